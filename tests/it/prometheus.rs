//! A real Prometheus (the Debian `prometheus` binary) scrapes the daemon
//! every second; PromQL sees the rate we send, and the scrape (Prometheus
//! asks for OpenMetrics and gzip) is healthy.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{http, wait_until, Daemon, Prometheus};

#[test]
fn a_real_prometheus_scrapes_the_rate_we_send() {
    let d = Daemon::start();
    let prom = Prometheus::start(d.http);

    // 10 increments every 100 ms = 100/s, until told to stop (at most 30 s).
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (stop, udp) = (stop.clone(), d.udp);
        std::thread::spawn(move || {
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            let dgram = "prom.req:1|c|#route:/p\n".repeat(10);
            let start = Instant::now();
            for i in 1..=300u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                sock.send_to(dgram.as_bytes(), udp).unwrap();
                let next = start + Duration::from_millis(100) * i;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        })
    };
    let _stop_on_exit = StopOnDrop(stop.clone());

    // The windowed rate as Prometheus stored it: the "2s" window holds only
    // time we were sending once 2 s have passed. ± 25% (see windows.rs).
    let rate = wait_until(
        Duration::from_secs(20),
        "rollstat_window_rate ≈ 100 in Prometheus",
        || {
            let v =
                prom.query(r#"rollstat_window_rate{metric="prom.req",window="2s",route="/p"}"#)?;
            match v.as_slice() {
                [x] if (*x - 100.0).abs() <= 25.0 => Ok(*x),
                other => Err(format!("{other:?}")),
            }
        },
    );
    // PromQL's own rate over the cumulative counter: after a few 1 s scrapes,
    // rate() over 5 s sees the same ~100/s (± 30%: it extrapolates).
    let promql_rate = wait_until(
        Duration::from_secs(15),
        "rate(prom_req_total[5s]) ≈ 100",
        || {
            let v = prom.query(r#"rate(prom_req_total{route="/p"}[5s])"#)?;
            match v.as_slice() {
                [x] if (*x - 100.0).abs() <= 30.0 => Ok(*x),
                other => Err(format!("{other:?}")),
            }
        },
    );
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();

    // The target is healthy: Prometheus asked for OpenMetrics and gzip and
    // parsed what it got.
    let t = http(prom.addr, "GET", "/api/v1/targets", &[], b"").json();
    let target = &t["data"]["activeTargets"][0];
    assert_eq!(target["health"], "up", "{t}");
    assert_eq!(target["lastError"], "", "{t}");
    assert_eq!(prom.query(r#"up{job="rollstat"}"#).unwrap(), [1.0]);
    // Self-metrics made it too.
    let lines = prom
        .query(r#"rollstat_ingest_lines_total{transport="udp"}"#)
        .unwrap();
    assert!(lines.first().is_some_and(|n| *n > 0.0), "{lines:?}");
    eprintln!("window rate {rate}/s, PromQL rate {promql_rate}/s");
}

struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
