//! A steady, varied load on a running daemon (for the dashboards and page
//! tests).

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::daemon::Daemon;
use super::http::try_http;

/// The statsd metrics [`Load`] sends, one per type.
pub const LOAD_METRICS: [&str; 6] = [
    "load.requests",
    "load.queue",
    "load.latency",
    "load.size",
    "load.dist",
    "load.users",
];

/// A steady load on a daemon started with [`LOAD_CONFIG`], until dropped
/// (or 180 s, whichever first): every 100 ms one line of every statsd type
/// over UDP, breaker outcomes (mostly failures for 10 s, then healthy for
/// 10 s, and so on, so the breaker trips at once and later recovers) and a
/// breaker decision, a dropped `debug.*` line, a bad line, and acquire calls
/// over the `api` limit (5/s).
pub struct Load {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Load {
    /// Starts the load.
    pub fn start(d: &Daemon) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let (udp, http_addr, flag) = (d.udp, d.http, stop.clone());
        let thread = std::thread::spawn(move || {
            let sock = UdpSocket::bind("127.0.0.1:0").expect("bind UDP");
            let deadline = Instant::now() + Duration::from_secs(180);
            let mut i: u64 = 0;
            while !flag.load(Ordering::Relaxed) && Instant::now() < deadline {
                let wave = (i % 40) as f64 / 40.0 * std::f64::consts::TAU;
                let lines = format!(
                    "load.requests:{}|c|#route:/checkout\nload.requests:{}|c|#route:/search\n\
                     load.queue:{}|g\nload.latency:{}|ms|#route:/checkout\nload.latency:{}|ms|#route:/search\n\
                     load.size:{}|h\nload.dist:{}|d\nload.users:user{}|s\n\
                     checkout.requests:4|c\ncheckout.failures:{}|c\ndebug.noise:1|c\nbad line\n",
                    2 + i % 3,
                    1 + i % 2,
                    20.0 + 10.0 * wave.sin(),
                    40.0 + 25.0 * wave.sin() + (i % 7) as f64,
                    120.0 + (i % 13) as f64 * 9.0,
                    512 + (i % 5) * 100,
                    0.25 + 0.1 * wave.cos(),
                    i % 25,
                    if (i / 100) % 2 == 0 && i % 10 < 8 { 3 } else { 0 },
                );
                let _ = sock.send_to(lines.as_bytes(), udp);
                // About 10 acquire calls per second for one key against 5/s: half denied.
                let acquire = "/api/v1/limits/api/acquire?key=client";
                let _ = try_http(http_addr, "POST", acquire, &[], b"");
                // Ask the breaker too, so that it hands out half-open trials
                // and moves between its states.
                let decision = "/api/v1/breakers/checkout/decision";
                let _ = try_http(http_addr, "GET", decision, &[], b"");
                i += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Load {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
