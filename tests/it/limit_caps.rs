//! The limits' caps, inputs and
//! fallbacks say and count what really happened.
//!
//! * `max_keys = 16` admits exactly 16 distinct keys (the old code split the
//!   cap over 16 shards and refused 6 of 16 new keys with 10 tracked); the
//!   17th is a JSON 503 counted as `rejected_new`, and 100 other new keys do
//!   not evict an active key (the old default did, resetting its limit).
//! * Two rules with the same window: `check-config` refuses them, naming
//!   the key and the line.
//! * Percent-decoding: `key=user%FF` and `key=user%FE` no longer share one
//!   quota (both decoded to U+FFFD); invalid escapes and non-UTF-8 keys are
//!   JSON 400s naming the parameter, counted; every acquire error is JSON.
//! * Fallbacks (against real `redis-server`): `allow` answers carry no
//!   `RateLimit` header that was never computed, say `"fallback"` and the
//!   store error, and are counted apart from quota decisions; a call sent
//!   to a stopped Redis that timed out is not written back.
//! * `[redis]` at check-config and at a reload: an address the daemon
//!   could not start with is refused; a changed `[redis]` is answered as
//!   needing a restart.

use std::process::Command;
use std::time::Duration;

use crate::redis::config;
use crate::redis_server::{have_redis, Redis};
use crate::support::{free_port, http, run, wait_true, Daemon, Scrape, TempDir};

const CAP: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[[limits]]
name = "api"
algorithm = "exact"
max_keys = 16
rules = [{ max = 2, window_ms = 60000 }]
"#;

/// One acquire: (status, headers, body as JSON).
fn acquire(
    d: &Daemon,
    limit: &str,
    query: &str,
) -> (u16, Vec<(String, String)>, serde_json::Value) {
    let r = http(
        d.http,
        "POST",
        &format!("/api/v1/limits/{limit}/acquire{query}"),
        &[],
        b"",
    );
    let json: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_else(|e| {
        panic!(
            "{limit}{query}: {} is not JSON ({e}): {}",
            r.status,
            r.text()
        )
    });
    let headers = r
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    (r.status, headers, json)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn counter(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    s.value(name, labels).unwrap_or(0.0)
}

#[test]
fn a_key_cap_of_16_admits_16_keys_refuses_the_17th_and_keeps_active_history() {
    let d = Daemon::start_with(CAP);
    let (code, _, body) = acquire(&d, "api", "?key=victim&n=2");
    assert_eq!(code, 200, "{body}");
    for i in 1..16 {
        let (code, _, body) = acquire(&d, "api", &format!("?key=k{i}"));
        assert_eq!(code, 200, "key {i} of 16: {body}");
    }
    let (code, headers, body) = acquire(&d, "api", "?key=k16");
    assert_eq!(code, 503, "{body}");
    let e = body["error"].as_str().unwrap();
    assert!(e.contains("16") && e.contains("max_keys"), "{e}");
    assert!(header(&headers, "retry-after").is_some(), "{headers:?}");
    // 100 other new keys: all refused, none evicts the active key.
    for i in 0..100 {
        let (code, _, body) = acquire(&d, "api", &format!("?key=new{i}"));
        assert_eq!(code, 503, "{body}");
    }
    let (code, _, body) = acquire(&d, "api", "?key=victim");
    assert_eq!(code, 429, "the active key's history was forgotten: {body}");
    let s = d.scrape();
    let evicted = |cause| {
        counter(
            &s,
            "rollstat_limit_evicted_keys_total",
            &[("limit", "api"), ("cause", cause)],
        )
    };
    assert_eq!(evicted("rejected_new"), 101.0);
    assert_eq!(evicted("cap"), 0.0);
    assert_eq!(
        counter(
            &s,
            "rollstat_limit_decisions_total",
            &[("limit", "api"), ("decision", "error")]
        ),
        101.0
    );
    assert_eq!(
        s.value("rollstat_limit_keys", &[("limit", "api")]),
        Some(16.0)
    );
}

#[test]
fn check_config_refuses_two_rules_with_the_same_window_in_a_shared_approximate_limit() {
    let dir = TempDir::new("same-window");
    let path = dir.path().join("rollstat.toml");
    std::fs::write(
        &path,
        config(
            "url = \"redis://127.0.0.1:6379\"",
            r#"
[[limits]]
name = "api"
algorithm = "approximate"
shared = true
rules = [{ max = 100, window_ms = 1000 }, { max = 100, window_ms = 1000 }]
"#,
        ),
    )
    .unwrap();
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("check-config")
            .arg(&path),
        b"",
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("line 14")
            && out.stderr.contains("`limits[0].rules[1].window_ms`")
            && out.stderr.contains("window_ms = 1000"),
        "{}",
        out.stderr
    );
}

const TWO: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[[limits]]
name = "api"
algorithm = "exact"
rules = [{ max = 1, window_ms = 60000 }]
"#;

#[test]
fn bad_percent_escapes_and_every_acquire_error_are_json_naming_the_parameter() {
    let d = Daemon::start_with(TWO);
    let refused = |d: &Daemon| {
        counter(
            &d.scrape(),
            "rollstat_http_requests_refused_total",
            &[("reason", "bad_acquire")],
        )
    };
    assert_eq!(
        d.scrape().value(
            "rollstat_http_requests_refused_total",
            &[("reason", "bad_acquire")]
        ),
        Some(0.0),
        "the reason is not pre-created"
    );
    // Before: both decoded to "user\u{FFFD}" and shared one quota.
    for (query, param) in [
        ("?key=user%FF", "key"),
        ("?key=user%FE", "key"),
        ("?key=user%G1", "key"),
        ("?key=user%F", "key"),
        ("?key=user%", "key"),
        ("?key=a&n=%ZZ", "n"),
        ("?key=%C3", "key"),
    ] {
        let (code, headers, body) = acquire(&d, "api", query);
        assert_eq!(code, 400, "{query}: {body}");
        let e = body["error"].as_str().unwrap_or_default();
        assert!(e.contains(&format!("`{param}`")), "{query}: {e}");
        assert!(
            header(&headers, "content-type").is_some_and(|c| c.contains("application/json")),
            "{query}: {headers:?}"
        );
    }
    assert_eq!(refused(&d), 7.0);
    // What axum's query reader answered in plain text is JSON too.
    for query in [
        "?key=a&n=abc",
        "?key=a&colour=blue",
        "?key=a&key=b",
        "?n=-1&key=a",
    ] {
        let (code, _, body) = acquire(&d, "api", query);
        assert_eq!(code, 400, "{query}: {body}");
        assert!(body["error"].is_string(), "{query}: {body}");
    }
    // Valid escapes decode as before: é and "a b" are their own keys.
    for query in ["?key=%C3%A9", "?key=a+b", "?key=a%20b%2B"] {
        let (code, _, body) = acquire(&d, "api", query);
        assert_eq!(code, 200, "{query}: {body}");
    }
    let (code, _, body) = acquire(&d, "api", "?key=a%20b");
    assert_eq!(code, 429, "`a+b` and `a%20b` are the same key: {body}");
    // A path that is not UTF-8 is a JSON 400 as well.
    let (code, _, body) = acquire(&d, "api%FF", "?key=a");
    assert_eq!(code, 400, "{body}");
    assert!(body["error"].is_string(), "{body}");
}

/// Two shared limits on a Redis at `url`: `open` (`allow`), `closed`
/// (`deny`) and `local`.
fn fallback_config(url: &str) -> String {
    config(
        &format!("url = \"{url}\"\ntimeout_ms = 200"),
        r#"
[[limits]]
name = "open"
shared = true
on_store_error = "allow"
rules = [{ max = 10, window_ms = 60000 }]

[[limits]]
name = "closed"
shared = true
on_store_error = "deny"
rules = [{ max = 10, window_ms = 60000 }]

[[limits]]
name = "local"
shared = true
on_store_error = "local"
rules = [{ max = 10, window_ms = 60000 }]
"#,
    )
}

fn decisions(d: &Daemon, limit: &str, decision: &str) -> f64 {
    counter(
        &d.scrape(),
        "rollstat_limit_decisions_total",
        &[("limit", limit), ("decision", decision)],
    )
}

#[test]
fn fallback_answers_say_so_carry_no_uncomputed_quota_and_are_counted_apart() {
    if !have_redis() {
        return;
    }
    // Nothing listens: every call fails, nothing is sent.
    let d = Daemon::start_with(&fallback_config(&format!(
        "redis://127.0.0.1:{}",
        free_port()
    )));
    for limit in ["open", "closed", "local"] {
        for decision in ["fallback_allowed", "fallback_denied"] {
            assert_eq!(
                d.scrape().value(
                    "rollstat_limit_decisions_total",
                    &[("limit", limit), ("decision", decision)]
                ),
                Some(0.0),
                "{limit} {decision} not pre-created"
            );
        }
    }
    for _ in 0..3 {
        let (code, headers, body) = acquire(&d, "open", "?key=a");
        assert_eq!(code, 200, "{body}");
        assert_eq!(
            (body["source"].as_str(), body["fallback"].as_str()),
            (Some("fallback"), Some("allow")),
            "{body}"
        );
        assert!(body["store_error"].is_string(), "{body}");
        assert!(body.get("remaining").is_none(), "{body}");
        assert!(header(&headers, "ratelimit").is_none(), "{headers:?}");
    }
    let (code, headers, body) = acquire(&d, "closed", "?key=a");
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["fallback"].as_str(), Some("deny"), "{body}");
    assert!(body["error"].is_string(), "{body}");
    assert!(header(&headers, "ratelimit").is_none(), "{headers:?}");
    let (code, headers, body) = acquire(&d, "local", "?key=a");
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        (body["source"].as_str(), body["fallback"].as_str()),
        (Some("local"), Some("local")),
        "{body}"
    );
    assert!(
        header(&headers, "ratelimit").is_some(),
        "computed: {headers:?}"
    );
    assert_eq!(decisions(&d, "open", "fallback_allowed"), 3.0);
    assert_eq!(decisions(&d, "open", "allowed"), 0.0);
    assert_eq!(decisions(&d, "closed", "fallback_denied"), 1.0);
    assert_eq!(decisions(&d, "closed", "denied"), 0.0);
    // The local fallback's decisions are real ones of this instance.
    assert_eq!(decisions(&d, "local", "allowed"), 1.0);
}

#[test]
fn a_limit_call_sent_to_a_stopped_redis_is_not_written_back_after_its_timeout() {
    let Some(redis) = Redis::start() else {
        return;
    };
    let d = Daemon::start_with(&fallback_config(&redis.url()));
    let (code, _, body) = acquire(&d, "local", "?key=a");
    assert_eq!(
        (code, body["source"].as_str()),
        (200, Some("redis")),
        "{body}"
    );
    let writeback = |d: &Daemon, result: &str| {
        counter(
            &d.scrape(),
            "rollstat_store_writeback_total",
            &[("result", result)],
        )
    };
    assert_eq!(
        d.scrape().value(
            "rollstat_store_writeback_total",
            &[("result", "unanswered")]
        ),
        Some(0.0),
        "the result is not pre-created"
    );
    redis.signal("-STOP");
    // Sent, no answer within 200 ms: the local limiter admits it, but Redis
    // may record it when it runs again, so it is not queued.
    let (code, _, body) = acquire(&d, "local", "?key=a");
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        (body["source"].as_str(), body["fallback"].as_str()),
        (Some("local"), Some("local")),
        "{body}"
    );
    assert!(
        body["store_error"]
            .as_str()
            .is_some_and(|e| e.contains("timeout")),
        "{body}"
    );
    assert_eq!(writeback(&d, "unanswered"), 1.0);
    redis.signal("-CONT");
    wait_true(Duration::from_secs(10), "sharing to resume", || {
        acquire(&d, "local", "?key=b").2["source"] == "redis"
    });
    // Redis ran the call it had been sent: a, 2 admissions there; nothing
    // was written back twice.
    assert_eq!(writeback(&d, "written"), 0.0);
    for _ in 0..8 {
        let (code, _, body) = acquire(&d, "local", "?key=a");
        assert_eq!(code, 200, "{body}");
    }
    let (code, _, body) = acquire(&d, "local", "?key=a");
    assert_eq!(code, 429, "{body}");
}

#[test]
fn check_config_and_reload_refuse_a_redis_address_the_daemon_cannot_start_with() {
    let dir = TempDir::new("redis-address");
    let path = dir.path().join("rollstat.toml");
    for (target, key) in [
        ("url = \"redis://127.0.0.1:notaport\"", "redis.url"),
        (
            "cluster_nodes = [\"unix:///tmp/redis.sock\"]",
            "redis.cluster_nodes",
        ),
    ] {
        std::fs::write(&path, config(target, "")).unwrap();
        let out = run(
            Command::new(env!("CARGO_BIN_EXE_rollstat"))
                .arg("check-config")
                .arg(&path),
            b"",
            Duration::from_secs(10),
        );
        assert_eq!(out.status.code(), Some(2), "{target}: {}", out.stderr);
        assert!(
            out.stderr.contains("line 8") && out.stderr.contains(&format!("`{key}`")),
            "{target}: {}",
            out.stderr
        );
    }
    // A running daemon: a bad [redis] fails the reload, a good but changed
    // one is answered as needing a restart.
    let admin = "\n[http.auth.admin]\naccess = \"open\"\n";
    let first = config(
        &format!("url = \"redis://127.0.0.1:{}\"", free_port()),
        admin,
    );
    let d = Daemon::start_with(&first);
    let reload = || http(d.http, "POST", "/-/reload", &[], b"");
    std::fs::write(
        &d.config,
        config("url = \"redis://127.0.0.1:notaport\"", admin),
    )
    .unwrap();
    let r = reload();
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("`redis.url`"), "{}", r.text());
    std::fs::write(
        &d.config,
        config(
            &format!("url = \"redis://127.0.0.1:{}\"", free_port()),
            admin,
        ),
    )
    .unwrap();
    let r = reload();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.text().contains("[redis]") && r.text().contains("restart"),
        "{}",
        r.text()
    );
    wait_true(
        Duration::from_secs(10),
        "the restart warning in the log",
        || {
            d.log()
                .contains("[redis] changes take effect only after a restart")
        },
    );
    // Still not the [redis] in use: said again.
    let r = reload();
    assert!(r.text().contains("[redis]"), "{}", r.text());
    // Back to the [redis] the daemon started with: nothing to say.
    std::fs::write(&d.config, &first).unwrap();
    let r = reload();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!r.text().contains("[redis]"), "{}", r.text());
}
