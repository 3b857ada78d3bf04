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

use std::time::Duration;

use crate::exactness::{hammer, max_by_receive_time, max_certainly_in_window, Http};
use crate::support::{wait_true, Daemon};

/// The policy of both limits of [`LIMITS`], as `RateLimit-Policy` gives it.
const POLICY: &str = "q=100;w=1";

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
    let exact = hammer(
        d.http,
        "exact",
        "one-client",
        POLICY,
        Duration::from_millis(8),
        Duration::from_secs(20),
    );
    let approx = hammer(
        d.http,
        "approx",
        "one-client",
        POLICY,
        Duration::from_millis(8),
        Duration::from_secs(6),
    );
    let (allowed, denied) = (exact.admitted.len(), exact.denied);
    let (exact, approx) = (exact.admitted, approx.admitted);
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
                    POLICY,
                    Duration::from_millis(8),
                    Duration::from_secs(6),
                )
            })
        })
        .collect();
    let mut all = Vec::new();
    let (mut allowed, mut denied) = (0, 0);
    for h in handles {
        let h = h.join().unwrap();
        allowed += h.admitted.len();
        denied += h.denied;
        all.extend(h.admitted);
    }
    let m = max_certainly_in_window(&all, Duration::from_secs(1));
    println!(
        "8 clients, one key: admitted {allowed}, denied {denied}, max in any 1 s window = {m}"
    );
    assert!(m <= 100, "8 clients got {m} admitted within one second");
    assert!(allowed >= 500 && denied > allowed, "{allowed}/{denied}");
    assert_eq!(
        d.metric("rollstat_limit_decisions_total{limit=\"exact\",decision=\"allowed\"}"),
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

#[test]
fn statsd_failures_open_the_breaker_half_open_admits_exactly_the_trials_and_successes_close_it() {
    let d = Daemon::start_with(BREAKERS);
    let state = "rollstat_breaker_state{breaker=\"pay\",kind=\"error_rate\"}";
    assert_eq!(d.metric(state), Some(0.0));
    d.send_udp(b"pay.requests:20|c\npay.failures:12|c\n");
    wait_true(Duration::from_secs(5), "the breaker to open", || {
        d.metric(state) == Some(1.0)
    });
    assert_eq!(
        d.metric("rollstat_breaker_drop_ratio{breaker=\"pay\""),
        Some(1.0)
    );
    let decision = get(&d, "/api/v1/breakers/pay/decision");
    assert!(decision.contains("\"decision\":\"shed\""), "{decision}");

    // After open_duration the ticker moves it to half-open with nobody asking.
    wait_true(Duration::from_secs(5), "half-open", || {
        d.metric(state) == Some(2.0)
    });
    let verdicts: Vec<bool> = (0..5)
        .map(|_| {
            d.post("/api/v1/breakers/pay/decision", "application/json", b"")
                .text()
                .contains("\"decision\":\"allow\"")
        })
        .collect();
    assert_eq!(
        verdicts,
        [true, true, true, false, false],
        "exactly 3 trial calls"
    );

    // The trials succeed (reported as statsd counters): closed again.
    d.send_udp(b"pay.requests:3|c\n");
    wait_true(Duration::from_secs(5), "closed", || {
        d.metric(state) == Some(0.0)
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
        d.metric(ratio)
            .is_some_and(|r| (r - 95.0 / 101.0).abs() < 1e-9)
    });
    assert_eq!(
        d.metric("rollstat_breaker_state{breaker=\"search\""),
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
        d.metric(ratio) == Some(0.0)
    });
    assert_eq!(
        d.metric("rollstat_breaker_state{breaker=\"search\""),
        Some(0.0)
    );
}
