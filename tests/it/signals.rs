//! Breakers and rate limits through the real binary, over HTTP and statsd,
//! the way API owners and SREs use them.
//!
//! * The exactness test: a client calls acquire every ~8 ms for 20 s against
//!   100 per 1 s; sliding a 1 s window over the admitted decisions never finds
//!   more than 100 (then 8 concurrent clients on one key, same bound). The
//!   approximate algorithm's maximum is printed next to it.
//! * Breakers end to end: failures sent as statsd lines open the breaker on
//!   /metrics, half-open admits exactly the configured trials, successes close
//!   it; an SRE breaker's drop ratio rises with failures and falls back.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::support::Daemon;

/// A keep-alive HTTP/1.1 client on one connection.
struct Http {
    r: BufReader<TcpStream>,
}

impl Http {
    fn connect(addr: SocketAddr) -> Http {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Http {
            r: BufReader::new(s),
        }
    }

    /// Sends a request; returns (status, headers lowercased, body).
    fn call(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
    ) -> (u16, Vec<(String, String)>, String) {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: rollstat\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.r.get_mut().write_all(req.as_bytes()).unwrap();
        let mut status = String::new();
        self.r.read_line(&mut status).unwrap();
        let code: u16 = status.split_whitespace().nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        let mut len = 0;
        loop {
            let mut h = String::new();
            self.r.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap();
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
            if k == "content-length" {
                len = v.parse().unwrap();
            }
            headers.push((k, v));
        }
        let mut buf = vec![0; len];
        self.r.read_exact(&mut buf).unwrap();
        (code, headers, String::from_utf8(buf).unwrap())
    }
}

/// One admitted decision: when its request was sent and its answer received.
/// The server decided somewhere in between.
#[derive(Clone, Copy)]
struct Admitted {
    sent: Instant,
    received: Instant,
}

/// The most admitted decisions that certainly lie in one window of length
/// `w`: for each admitted decision as the window's end, count those whose
/// request was sent after `received − w`. Sound despite network jitter: it
/// only counts decisions that cannot have been more than `w` apart.
fn max_certainly_in_window(admitted: &[Admitted], w: Duration) -> usize {
    let mut sorted = admitted.to_vec();
    sorted.sort_by_key(|a| a.received);
    sorted
        .iter()
        .map(|end| {
            sorted
                .iter()
                .filter(|a| a.received <= end.received && a.sent + w > end.received)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// The same count on receive times only (what a naive client would see).
fn max_by_receive_time(admitted: &[Admitted], w: Duration) -> usize {
    let mut t: Vec<Instant> = admitted.iter().map(|a| a.received).collect();
    t.sort();
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..t.len() {
        while t[hi] - t[lo] >= w {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

/// Calls acquire for `key` every `every` until `total` has passed, from one
/// connection; returns the admitted decisions and counts (allowed, denied).
fn hammer(
    addr: SocketAddr,
    limit: &str,
    key: &str,
    every: Duration,
    total: Duration,
) -> (Vec<Admitted>, usize, usize) {
    let mut c = Http::connect(addr);
    let start = Instant::now();
    let mut admitted = Vec::new();
    let mut denied = 0;
    let mut next = start;
    let path = format!("/api/v1/limits/{limit}/acquire?key={key}");
    while start.elapsed() < total {
        let sent = Instant::now();
        let (code, headers, body) = c.call("POST", &path, "");
        let received = Instant::now();
        match code {
            200 => admitted.push(Admitted { sent, received }),
            429 => {
                denied += 1;
                assert!(
                    headers.iter().any(|(k, _)| k == "retry-after"),
                    "429 without Retry-After: {body}"
                );
            }
            other => panic!("unexpected status {other}: {body}"),
        }
        assert!(headers
            .iter()
            .any(|(k, v)| k == "ratelimit-policy" && v.contains("q=100;w=1")));
        next += every;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let n = admitted.len();
    (admitted, n, denied)
}

const LIMITS: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[[limits]]
name = "exact"
algorithm = "exact"
rules = [{ max = 100, window_ms = 1000 }]

[[limits]]
name = "approx"
algorithm = "approximate"
rules = [{ max = 100, window_ms = 1000 }]
"#;

#[test]
fn the_exact_limit_never_admits_more_than_100_in_any_second_over_http() {
    let d = Daemon::start_with(LIMITS);
    let w = Duration::from_secs(1);
    let (exact, allowed, denied) = hammer(
        d.http,
        "exact",
        "one-client",
        Duration::from_millis(8),
        Duration::from_secs(20),
    );
    let (approx, _, _) = hammer(
        d.http,
        "approx",
        "one-client",
        Duration::from_millis(8),
        Duration::from_secs(6),
    );
    let (m_exact, m_approx) = (
        max_certainly_in_window(&exact, w),
        max_by_receive_time(&approx, w),
    );
    println!(
        "one client, 8 ms spacing: exact admitted {allowed}, denied {denied}, max in any 1 s window = {m_exact} \
         (by receive time: {}); approximate max = {m_approx}",
        max_by_receive_time(&exact, w)
    );
    assert!(
        allowed > 1500 && denied > 300,
        "the limit must both admit and deny: {allowed}/{denied}"
    );
    assert!(
        m_exact <= 100,
        "exact limit admitted {m_exact} within one second"
    );
    assert!(
        m_exact >= 95,
        "the window count should reach the limit: {m_exact}"
    );
}

#[test]
fn eight_concurrent_clients_on_one_key_stay_within_the_exact_limit() {
    let d = Daemon::start_with(LIMITS);
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let addr = d.http;
            std::thread::spawn(move || {
                hammer(
                    addr,
                    "exact",
                    "shared",
                    Duration::from_millis(8),
                    Duration::from_secs(6),
                )
            })
        })
        .collect();
    let mut all = Vec::new();
    let (mut allowed, mut denied) = (0, 0);
    for h in handles {
        let (a, ok, no) = h.join().unwrap();
        all.extend(a);
        allowed += ok;
        denied += no;
    }
    let m = max_certainly_in_window(&all, Duration::from_secs(1));
    println!(
        "8 clients, one key: admitted {allowed}, denied {denied}, max in any 1 s window = {m}"
    );
    assert!(m <= 100, "8 clients got {m} admitted within one second");
    assert!(allowed >= 500 && denied > allowed, "{allowed}/{denied}");
    assert_eq!(
        metric(
            &d,
            "rollstat_limit_decisions_total{limit=\"exact\",decision=\"allowed\"}"
        ),
        Some(allowed as f64)
    );
}

#[test]
fn bad_acquire_requests_get_clear_errors() {
    let d = Daemon::start_with(LIMITS);
    let mut c = Http::connect(d.http);
    let (code, _, body) = c.call("POST", "/api/v1/limits/nope/acquire?key=a", "");
    assert_eq!(
        (code, body.contains("no limit named `nope`")),
        (404, true),
        "{body}"
    );
    let (code, _, body) = c.call("POST", "/api/v1/limits/exact/acquire", "");
    assert_eq!(
        (code, body.contains("missing `key`")),
        (400, true),
        "{body}"
    );
    let (code, _, body) = c.call(
        "POST",
        "/api/v1/limits/exact/acquire",
        r#"{"key":"k","n":101}"#,
    );
    assert_eq!(
        (code, body.contains("can never be admitted")),
        (400, true),
        "{body}"
    );
    let (code, _, body) = c.call("POST", "/api/v1/limits/exact/acquire?key=k&n=abc", "");
    assert_eq!(code, 400, "{body}");
    let (code, headers, body) = c.call(
        "POST",
        "/api/v1/limits/exact/acquire",
        r#"{"key":"k","n":100}"#,
    );
    assert_eq!(code, 200, "{body}");
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "ratelimit" && v == "\"exact\";r=0;t=1"),
        "{headers:?}"
    );
    let (code, headers, body) = c.call("POST", "/api/v1/limits/exact/acquire", r#"{"key":"k"}"#);
    assert_eq!(code, 429, "{body}");
    assert!(
        headers.iter().any(|(k, v)| k == "retry-after" && v == "1"),
        "{headers:?}"
    );
    assert!(body.contains("\"allowed\":false"), "{body}");
}

const BREAKERS: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[[breakers]]
name = "pay"
kind = "error_rate"
requests_metric = "pay.requests"
failures_metric = "pay.failures"
window_ms = 10000
buckets = 10
min_calls = 10
failure_rate_threshold = 0.5
open_duration_ms = 1500
half_open_trials = 3

[[breakers]]
name = "search"
kind = "sre"
outcome_metric = "search.calls"
outcome_tag = "outcome"
"#;

fn get(d: &Daemon, path: &str) -> String {
    d.get(path, &[]).text()
}

/// The value of the first /metrics sample whose line starts with `prefix`.
fn metric(d: &Daemon, prefix: &str) -> Option<f64> {
    get(d, "/metrics")
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn wait_true(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    crate::support::wait_until(limit, what, || {
        if f() {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
}

#[test]
fn statsd_failures_open_the_breaker_half_open_admits_exactly_the_trials_and_successes_close_it() {
    let d = Daemon::start_with(BREAKERS);
    let state = "rollstat_breaker_state{breaker=\"pay\",kind=\"error_rate\"}";
    assert_eq!(metric(&d, state), Some(0.0));
    d.send_udp(b"pay.requests:20|c\npay.failures:12|c\n");
    wait_true(Duration::from_secs(5), "the breaker to open", || {
        metric(&d, state) == Some(1.0)
    });
    assert_eq!(
        metric(&d, "rollstat_breaker_drop_ratio{breaker=\"pay\""),
        Some(1.0)
    );
    let decision = get(&d, "/api/v1/breakers/pay/decision");
    assert!(decision.contains("\"decision\":\"shed\""), "{decision}");

    // After open_duration the ticker moves it to half-open with nobody asking.
    wait_true(Duration::from_secs(5), "half-open", || {
        metric(&d, state) == Some(2.0)
    });
    let verdicts: Vec<bool> = (0..5)
        .map(|_| get(&d, "/api/v1/breakers/pay/decision").contains("\"decision\":\"allow\""))
        .collect();
    assert_eq!(
        verdicts,
        [true, true, true, false, false],
        "exactly 3 trial calls"
    );

    // The trials succeed (reported as statsd counters): closed again.
    d.send_udp(b"pay.requests:3|c\n");
    wait_true(Duration::from_secs(5), "closed", || {
        metric(&d, state) == Some(0.0)
    });
    let m = get(&d, "/metrics");
    for (from, to) in [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ] {
        let line = format!(
            "rollstat_breaker_transitions_total{{breaker=\"pay\",from=\"{from}\",to=\"{to}\"}} 1"
        );
        assert!(m.contains(&line), "missing {line}");
    }
}

#[test]
fn sre_drop_ratio_rises_with_failures_and_falls_as_successes_return() {
    let d = Daemon::start_with(BREAKERS);
    let ratio = "rollstat_breaker_drop_ratio{breaker=\"search\",kind=\"sre\"}";
    d.send_udp(b"search.calls:100|c|#outcome:error\n");
    // (100 - 5 - 0) / 101 = 0.94 before the working-streak damping (none yet).
    wait_true(Duration::from_secs(5), "the drop ratio to rise", || {
        metric(&d, ratio).is_some_and(|r| (r - 95.0 / 101.0).abs() < 1e-9)
    });
    assert_eq!(
        metric(&d, "rollstat_breaker_state{breaker=\"search\""),
        Some(1.0)
    );
    // Successes outweigh failures / k: the ratio goes back to 0.
    let mut c = Http::connect(d.http);
    let (code, _, body) = c.call(
        "POST",
        "/api/v1/breakers/search/outcomes",
        r#"{"success": 200}"#,
    );
    assert_eq!(code, 200, "{body}");
    wait_true(Duration::from_secs(5), "the drop ratio to fall", || {
        metric(&d, ratio) == Some(0.0)
    });
    assert_eq!(
        metric(&d, "rollstat_breaker_state{breaker=\"search\""),
        Some(0.0)
    );
}
