//! Issue #16, "Reload keeps state": what a SIGHUP keeps when it edits a
//! limit or a breaker, through the real binary. Windows are 60 s long, so
//! the tests never race the clock (the daemon runs real time).
//!
//! * A limit raised from 50 to 60 per minute, with 50 admitted: 10 more in
//!   the same minute, not 30 (the old code started every key afresh).
//! * An open error-rate breaker whose `failure_rate_threshold` is edited
//!   stays open with its counts (the old code built a fresh closed one).
//! * The same limit shared through Redis: the fleet's history is kept (the
//!   old Redis keys named `max`, so a new `max` started an empty history).

use std::time::Duration;

use crate::exactness::Http;
use crate::support::{wait_true, Daemon};

const LIMIT: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[[limits]]
name = "api"
algorithm = "exact"
rules = [{ max = 50, window_ms = 60000 }]
"#;

/// Sends a SIGHUP and waits for the `n`th good reload.
fn sighup(d: &Daemon, n: f64) {
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the SIGHUP reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "ok")]) == Some(n)
    });
}

/// How many of `offered` acquires for `key` are admitted (200; else 429).
fn admitted(c: &mut Http, key: &str, offered: usize) -> usize {
    let path = format!("/api/v1/limits/api/acquire?key={key}");
    (0..offered)
        .filter(|_| {
            let (code, _, body) = c.call("POST", &path, "");
            assert!(code == 200 || code == 429, "{code}: {body}");
            code == 200
        })
        .count()
}

#[test]
fn a_limit_raised_from_50_to_60_per_minute_at_a_sighup_admits_10_more_not_30() {
    let d = Daemon::start_with(LIMIT);
    let mut c = Http::connect(d.http);
    assert_eq!(admitted(&mut c, "alice", 50), 50);
    assert_eq!(admitted(&mut c, "alice", 1), 0);
    std::fs::write(&d.config, LIMIT.replace("max = 50", "max = 60")).unwrap();
    sighup(&d, 1.0);
    let mut c = Http::connect(d.http);
    assert_eq!(admitted(&mut c, "alice", 30), 10);
    // A key never seen has the whole new limit.
    assert_eq!(admitted(&mut c, "bob", 61), 60);
    // The decision counts went on over the reload: 50 + 10 + 60 allowed,
    // 1 + 20 + 1 denied.
    let s = d.scrape();
    let decisions = |d: &str| {
        s.must(
            "rollstat_limit_decisions_total",
            &[("limit", "api"), ("decision", d)],
        )
    };
    assert_eq!((decisions("allowed"), decisions("denied")), (120.0, 22.0));
    // Lowered to 40: alice holds 60, bob 60: both denied.
    std::fs::write(&d.config, LIMIT.replace("max = 50", "max = 40")).unwrap();
    sighup(&d, 2.0);
    let mut c = Http::connect(d.http);
    assert_eq!(admitted(&mut c, "alice", 5), 0);
    assert_eq!(admitted(&mut c, "bob", 5), 0);
}

const BREAKER: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[[breakers]]
name = "pay"
kind = "error_rate"
requests_metric = "pay.requests"
failures_metric = "pay.failures"
window_ms = 60000
buckets = 10
min_calls = 10
failure_rate_threshold = 0.5
open_duration_ms = 60000
half_open_trials = 3
"#;

#[test]
fn an_open_breaker_stays_open_with_its_counts_when_its_threshold_is_edited_at_a_sighup() {
    let d = Daemon::start_with(BREAKER);
    let state = "rollstat_breaker_state{breaker=\"pay\"";
    d.send_udp(b"pay.requests:20|c\npay.failures:12|c\n");
    wait_true(Duration::from_secs(10), "the breaker to open", || {
        d.metric(state) == Some(1.0)
    });
    let counts = |d: &Daemon| {
        (
            d.metric("rollstat_breaker_requests{breaker=\"pay\""),
            d.metric("rollstat_breaker_failures{breaker=\"pay\""),
        )
    };
    let before = counts(&d);
    assert!(before.1.is_some_and(|f| f > 0.0), "{before:?}");
    std::fs::write(
        &d.config,
        BREAKER.replace(
            "failure_rate_threshold = 0.5",
            "failure_rate_threshold = 0.9",
        ),
    )
    .unwrap();
    sighup(&d, 1.0);
    assert_eq!(
        d.metric(state),
        Some(1.0),
        "the breaker closed at the reload"
    );
    assert_eq!(counts(&d), before);
    let decision = d
        .post("/api/v1/breakers/pay/decision", "application/json", b"")
        .text();
    assert!(decision.contains("\"decision\":\"shed\""), "{decision}");
}

#[test]
fn a_shared_limit_raised_at_a_sighup_keeps_the_fleet_history_in_redis() {
    let Some(redis) = crate::redis_server::Redis::start() else {
        return;
    };
    let shared = format!(
        "{}shared = true\non_store_error = \"deny\"\n\n[redis]\n{}\n",
        LIMIT,
        redis.section()
    );
    let d = Daemon::start_with(&shared);
    let mut c = Http::connect(d.http);
    let (code, _, body) = c.call("POST", "/api/v1/limits/api/acquire?key=alice", "");
    assert!(
        code == 200 && body.contains("\"source\":\"redis\""),
        "{code}: {body}"
    );
    assert_eq!(admitted(&mut c, "alice", 49), 49);
    assert_eq!(admitted(&mut c, "alice", 1), 0);
    std::fs::write(&d.config, shared.replace("max = 50", "max = 60")).unwrap();
    sighup(&d, 1.0);
    let mut c = Http::connect(d.http);
    assert_eq!(admitted(&mut c, "alice", 30), 10);
    // The Redis key names the window only.
    let exists = redis.command("EXISTS rollstat:{api:alice}:60s");
    assert_eq!(exists.as_deref().map(str::trim), Some(":1"));
}
