//! One `acquire?n=1000000` on a shared
//! exact limit of 1,000,000 per 60 s and per hour. The old script added one
//! sorted-set member per unit: one script call of 5.6 s (every other client
//! got BUSY) and 270 MB. Now one member per request, whatever its weight.
//!
//! Without `redis-server` on the PATH this test prints why and passes,
//! except under CI.

use std::time::Instant;

use crate::exactness::{source, Http};
use crate::redis::config;
use crate::redis_server::Redis;
use crate::support::Daemon;

/// The weight of the heavy request (and each rule's max).
const N: u32 = 1_000_000;

/// Bytes `MEMORY USAGE` reports for `key` (0 if absent).
fn memory_usage(redis: &Redis, key: &str) -> u64 {
    redis
        .cli_command(&["MEMORY", "USAGE", key])
        .parse()
        .unwrap_or(0)
}

#[test]
fn one_request_of_weight_a_million_is_one_member_and_a_fast_script() {
    let Some(redis) = Redis::start() else {
        return;
    };
    assert_eq!(
        redis.cli_command(&["CONFIG", "SET", "slowlog-log-slower-than", "100000"]),
        "OK"
    );
    assert_eq!(redis.cli_command(&["SLOWLOG", "RESET"]), "OK");
    // A deadline long enough for the old 5 s script to answer: the slow log
    // (not a timeout and a local fallback) is what tells it apart.
    let cfg = config(
        &format!("{}\ntimeout_ms = 30000", redis.section()),
        &format!(
            r#"
[[limits]]
name = "bulk"
shared = true
rules = [{{ max = {N}, window_ms = 60000 }}, {{ max = {N}, window_ms = 3600000 }}]
"#
        ),
    );
    let d = Daemon::start_with(&cfg);
    let mut c = Http::connect(d.http);
    let started = Instant::now();
    let (code, _, body) = c.call(
        "POST",
        &format!("/api/v1/limits/bulk/acquire?key=k&n={N}"),
        "",
    );
    let took = started.elapsed();
    assert_eq!((code, source(&body)), (200, "redis"), "{body}");
    println!("acquire n={N}: answered in {took:?}");

    let slow = redis.cli_command(&["SLOWLOG", "GET"]);
    assert!(
        slow.is_empty(),
        "a command ran longer than 100 ms in Redis:\n{slow}"
    );
    let mut total = 0;
    for key in ["rollstat:{bulk:k}:60s", "rollstat:{bulk:k}:3600s"] {
        assert_eq!(redis.cli_command(&["ZCARD", key]), "1", "{key}");
        let bytes = memory_usage(&redis, key);
        println!("MEMORY USAGE {key}: {bytes} bytes");
        assert!(bytes > 0, "{key} missing");
        total += bytes;
    }
    assert!(total < 1 << 20, "{total} bytes for one request");

    // Full: one more is denied, here by the local mirror, and on a second
    // daemon (which admitted nothing itself) by Redis.
    let (code, _, body) = c.call("POST", "/api/v1/limits/bulk/acquire?key=k&n=1", "");
    assert_eq!(code, 429, "{body}");
    let other = Daemon::start_with(&cfg);
    let (code, _, body) =
        Http::connect(other.http).call("POST", "/api/v1/limits/bulk/acquire?key=k&n=1", "");
    assert_eq!((code, source(&body)), (429, "redis"), "{body}");

    // The cost per request: 1,000 requests of weight 1 on one key.
    for _ in 0..1000 {
        let (code, _, body) = c.call("POST", "/api/v1/limits/bulk/acquire?key=many&n=1", "");
        assert_eq!(code, 200, "{body}");
    }
    let bytes = memory_usage(&redis, "rollstat:{bulk:many}:60s");
    println!(
        "MEMORY USAGE of a log of 1000 requests: {bytes} bytes, {} per request",
        bytes / 1000
    );
    assert!(bytes < 200 * 1000, "{bytes}");
}
