//! Rolling windows on the wall clock (1 s buckets). Exact time semantics are
//! proven with a manual clock in the unit and property tests; here we check
//! that the real daemon's windows fill, rate and empty in real time.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use crate::support::{assert_close, Daemon};

#[test]
fn a_steady_stream_shows_its_rate_and_leaves_the_window_after_it_stops() {
    let d = Daemon::start();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    // 20 increments every 100 ms = 200/s, for 3 s (one datagram per tick).
    let per_tick = 20;
    let tick = Duration::from_millis(100);
    let ticks = 30;
    let datagram = "steady.req:1|c\n".repeat(per_tick);
    let start = Instant::now();
    let mut rates = Vec::new();
    for i in 0..ticks {
        sock.send_to(datagram.as_bytes(), d.udp).unwrap();
        // From 2.2 s on, the "2s" window (1 whole bucket + the elapsed part
        // of the current one) holds only time during which we were sending.
        if i >= 22 && i % 2 == 0 {
            let s = d.scrape();
            rates.push(s.must(
                "rollstat_window_rate",
                &[("metric", "steady.req"), ("window", "2s")],
            ));
        }
        let next = start + tick * (i + 1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let sent = (per_tick * ticks as usize) as f64;
    // Everything sent is still inside the "5s" window (it spans 4 whole
    // buckets before the current one, longer than the 3 s stream).
    let s = d.wait_lines("udp", sent, Duration::from_secs(5));
    assert_eq!(
        s.must(
            "rollstat_window_samples",
            &[("metric", "steady.req"), ("window", "5s")]
        ),
        sent
    );
    assert_eq!(s.must("steady_req_total", &[]), sent);
    // Rate: the window covers 1 s to 2 s; one 100 ms tick more or less in it
    // is 20 increments over at least 1 s, i.e. at most 10% of 200/s; sleeps
    // overshooting on a loaded machine lower the real rate a bit more.
    // Accept 200/s ± 25% for each reading, and ± 15% for their median.
    assert!(!rates.is_empty());
    for r in &rates {
        assert_close(*r, 200.0, 50.0, "rollstat_window_rate{window=\"2s\"}");
    }
    rates.sort_by(f64::total_cmp);
    assert_close(rates[rates.len() / 2], 200.0, 30.0, "median 2s rate");

    // After the stream stops, values leave the windows: the "2s" window
    // within 2 s, the "5s" window within 5 s (plus scheduling slack).
    let stopped = Instant::now();
    d.wait_scrape(Duration::from_secs(4), "the 2s window to empty", |s| {
        s.value(
            "rollstat_window_samples",
            &[("metric", "steady.req"), ("window", "2s")],
        ) == Some(0.0)
    });
    let s = d.wait_scrape(Duration::from_secs(7), "the 5s window to empty", |s| {
        s.value(
            "rollstat_window_samples",
            &[("metric", "steady.req"), ("window", "5s")],
        ) == Some(0.0)
    });
    assert!(
        stopped.elapsed() >= Duration::from_secs(3),
        "the 5s window emptied only {:?} after the stream stopped",
        stopped.elapsed()
    );
    assert_eq!(
        s.must(
            "rollstat_window_rate",
            &[("metric", "steady.req"), ("window", "5s")]
        ),
        0.0
    );
    // The cumulative counter does not roll.
    assert_eq!(s.must("steady_req_total", &[]), sent);
}
