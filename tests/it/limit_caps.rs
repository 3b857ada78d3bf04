//! Issue #17 through the real binary: the limits' caps, inputs and
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

use std::process::Command;
use std::time::Duration;

use crate::redis::config;
use crate::support::{http, run, Daemon, Scrape, TempDir};

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
