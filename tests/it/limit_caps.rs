//! Issue #17 through the real binary: the limits' caps, inputs and
//! fallbacks say and count what really happened.
//!
//! * `max_keys = 16` admits exactly 16 distinct keys (the old code split the
//!   cap over 16 shards and refused 6 of 16 new keys with 10 tracked); the
//!   17th is a JSON 503 counted as `rejected_new`, and 100 other new keys do
//!   not evict an active key (the old default did, resetting its limit).
//! * Two rules with the same window: `check-config` refuses them, naming
//!   the key and the line.

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
