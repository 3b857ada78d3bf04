//! One bad Redis key fails that key only. A key of the wrong type
//! (`SET 'rollstat:{shared:b}:10s' hello`) makes the limit script answer
//! `WRONGTYPE` for that key: its decisions go to its `on_store_error`,
//! counted as `rollstat_store_refused_total{op="limit",reason="wrong_type"}`,
//! while every other key stays decided by Redis and `/-/ready` stays 200.
//! (The store used to be marked down by that one error: 22% of the good
//! keys' decisions came back `source: local` and `/-/ready` flapped 503.)

use std::time::Duration;

use crate::exactness::{source, Http};
use crate::redis::config;
use crate::redis_server::Redis;
use crate::support::Daemon;

/// A shared limit `shared` of 1,000 per 10 s (never binding here).
fn shared_limit(redis: &Redis, policy: &str) -> String {
    config(
        &format!("{}\ntimeout_ms = 500", redis.section()),
        &format!(
            r#"
[[limits]]
name = "shared"
shared = true
on_store_error = "{policy}"
rules = [{{ max = 1000, window_ms = 10000 }}]
"#
        ),
    )
}

#[test]
fn a_key_of_the_wrong_type_fails_that_key_only() {
    let Some(redis) = Redis::start() else { return };
    assert_eq!(
        redis.cli_command(&["SET", "rollstat:{shared:b}:10s", "hello"]),
        "OK"
    );
    let d = Daemon::start_with(&shared_limit(&redis, "deny"));
    let mut c = Http::connect(d.http);
    let (mut bad, mut good, mut not_ready) = (Vec::new(), Vec::new(), Vec::new());
    // 200 rounds (about 50/s on each side): the poisoned key, a good key,
    // the readiness probe.
    for i in 0..200 {
        let (code, _, body) = c.call("POST", "/api/v1/limits/shared/acquire?key=b", "");
        bad.push((code, body));
        let key = format!("g{}", i % 7);
        let (code, _, body) = c.call(
            "POST",
            &format!("/api/v1/limits/shared/acquire?key={key}"),
            "",
        );
        if code != 200 || source(&body) != "redis" {
            good.push((i, code, body));
        }
        let (code, _, body) = c.call("GET", "/-/ready", "");
        if code != 200 {
            not_ready.push((i, body));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        good.is_empty(),
        "{} of 200 good keys' decisions not shared; first: {:?}",
        good.len(),
        good.first()
    );
    assert!(
        not_ready.is_empty(),
        "/-/ready not 200 in {} of 200 rounds; first: {:?}",
        not_ready.len(),
        not_ready.first()
    );
    // The poisoned key fails closed (its policy), saying why.
    for (code, body) in &bad {
        assert_eq!(*code, 503, "{body}");
        assert_eq!(source(body), "fallback", "{body}");
        assert!(body.contains("reason: wrong_type"), "{body}");
    }
    let refused = d
        .metric("rollstat_store_refused_total{op=\"limit\",reason=\"wrong_type\"}")
        .unwrap_or(0.0);
    assert_eq!(refused, 200.0);
    assert_eq!(d.metric("rollstat_store_up "), Some(1.0));
    assert_eq!(
        d.metric("rollstat_store_errors_total{op=\"limit\"}")
            .unwrap_or(0.0),
        0.0
    );
    println!("200 decisions on a WRONGTYPE key refused (503, wrong_type); 200 good keys' decisions all shared; /-/ready 200 in 200 of 200");
}

#[test]
fn under_local_a_key_of_the_wrong_type_is_decided_locally_and_not_written_back() {
    let Some(redis) = Redis::start() else { return };
    assert_eq!(
        redis.cli_command(&["SET", "rollstat:{shared:b}:10s", "hello"]),
        "OK"
    );
    let d = Daemon::start_with(&shared_limit(&redis, "local"));
    let mut c = Http::connect(d.http);
    for i in 0..50 {
        let (code, _, body) = c.call("POST", "/api/v1/limits/shared/acquire?key=b", "");
        assert_eq!((code, source(&body)), (200, "local"), "{body}");
        assert!(body.contains("reason: wrong_type"), "{body}");
        let (code, _, body) = c.call(
            "POST",
            &format!("/api/v1/limits/shared/acquire?key=g{i}"),
            "",
        );
        assert_eq!((code, source(&body)), (200, "redis"), "round {i}: {body}");
    }
    // Nothing is written back for a key Redis refused: it would be refused
    // again (or land in a late set no decision can merge).
    let rejected = d
        .metric("rollstat_store_writeback_total{result=\"rejected\"}")
        .unwrap_or(0.0);
    assert_eq!(rejected, 50.0);
    assert_eq!(
        d.metric("rollstat_store_writeback_total{result=\"written\"}"),
        Some(0.0)
    );
    assert_eq!(
        redis.cli_command(&["EXISTS", "rollstat:{shared:b}:10s:late"]),
        "0"
    );
}

/// Fills `redis` (started with a small `--maxmemory` and `noeviction`)
/// until it refuses writes; returns its `used_memory`.
fn fill_to_maxmemory(redis: &Redis) -> u64 {
    for i in 0..400 {
        let script = format!(
            "for i=1,500 do redis.call('SET', 'fill:{i}:'..i, string.rep('x', 100)) end return 1"
        );
        if redis.cli_command(&["EVAL", &script, "0"]).contains("OOM") {
            return used_memory(redis);
        }
    }
    panic!("redis-server never reached its maxmemory");
}

fn used_memory(redis: &Redis) -> u64 {
    let info = redis.cli_command(&["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

#[test]
fn at_maxmemory_writes_are_refused_up_front_and_the_fleet_view_is_left_out() {
    let Some(_) = Redis::start() else { return };
    let redis = Redis::start_with(
        crate::support::free_port(),
        ["--maxmemory", "3mb", "--maxmemory-policy", "noeviction"]
            .map(String::from)
            .to_vec(),
    );
    let cfg = config(
        &format!(
            "{}\ntimeout_ms = 500\nsync_interval_ms = 100",
            redis.section()
        ),
        r#"
[[limits]]
name = "shared"
shared = true
on_store_error = "deny"
rules = [{ max = 1000, window_ms = 10000 }]

[[windows]]
name = "w"
buckets = 30
interval_ms = 1000

[[mappings]]
match = "api.requests"
shared = true
"#,
    );
    let d = Daemon::start_with(&cfg);
    crate::redis::send_counts(&d, 100);
    crate::support::wait_true(Duration::from_secs(5), "the fleet view of 100", || {
        d.metric(crate::redis::FLEET) == Some(100.0)
    });
    let full = fill_to_maxmemory(&redis);
    crate::redis::send_counts(&d, 50);
    // The next sync pushes the 50 and is refused.
    let window_oom = "rollstat_store_refused_total{op=\"windows\",reason=\"oom\"}";
    crate::support::wait_true(Duration::from_secs(5), "a window sync refused", || {
        d.metric(window_oom).unwrap_or(0.0) >= 1.0
    });
    let mut c = Http::connect(d.http);
    let mut shown = Vec::new();
    // 100 new keys, each refused before anything of it is written; the fleet
    // view never shown meanwhile (it misses this instance's 50).
    for i in 0..100 {
        let (code, _, body) = c.call(
            "POST",
            &format!("/api/v1/limits/shared/acquire?key=new{i}"),
            "",
        );
        assert_eq!((code, source(&body)), (503, "fallback"), "key {i}: {body}");
        assert!(body.contains("reason: oom"), "{body}");
        if let Some(v) = d.metric(crate::redis::FLEET) {
            shown.push(v);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        shown.is_empty(),
        "the fleet view was shown {} times while Redis refused its pushes: {:?}",
        shown.len(),
        &shown[..shown.len().min(5)]
    );
    assert_eq!(d.metric(crate::redis::LOCAL), Some(150.0));
    let after = used_memory(&redis);
    let keys = redis.cli_command(&["--raw", "KEYS", "rollstat:{shared*"]);
    assert_eq!(keys, "", "keys written past maxmemory");
    assert!(
        d.metric("rollstat_store_refused_total{op=\"limit\",reason=\"oom\"}")
            .unwrap_or(0.0)
            >= 100.0
    );
    assert!(
        d.metric("rollstat_store_refused_total{op=\"windows\",reason=\"oom\"}")
            .unwrap_or(0.0)
            >= 1.0
    );
    let log = d.log();
    let logged = log.matches("is at maxmemory and refuses writes").count();
    assert_eq!(logged, 1, "{log}");
    // Redis accepts writes again: the fleet totals lack this instance's
    // refused 50 until their bucket leaves the 30 s window, so the view
    // stays out rather than show 100 against a local 150.
    assert_eq!(
        redis.cli_command(&["CONFIG", "SET", "maxmemory", "0"]),
        "OK"
    );
    crate::support::wait_true(Duration::from_secs(5), "writes accepted again", || {
        d.log().contains("accepts writes again")
    });
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            d.metric(crate::redis::FLEET),
            None,
            "a fleet view lacking 50"
        );
    }
    let (code, _, body) = c.call("POST", "/api/v1/limits/shared/acquire?key=later", "");
    assert_eq!((code, source(&body)), (200, "redis"), "{body}");
    println!(
        "at maxmemory: 100 new keys refused (oom), no limit key written, used_memory {full} -> {after}; fleet view left out; logged once"
    );
}

#[test]
fn a_shared_limit_puts_at_most_max_keys_keys_in_redis() {
    let Some(redis) = Redis::start() else { return };
    let cfg = config(
        &format!("{}\ntimeout_ms = 500", redis.section()),
        r#"
[[limits]]
name = "capped"
shared = true
max_keys = 5
rules = [{ max = 1000, window_ms = 10000 }]
"#,
    );
    let d = Daemon::start_with(&cfg);
    let mut c = Http::connect(d.http);
    for i in 0..5 {
        let (code, _, body) = c.call(
            "POST",
            &format!("/api/v1/limits/capped/acquire?key=k{i}"),
            "",
        );
        assert_eq!((code, source(&body)), (200, "redis"), "{body}");
    }
    for i in 5..50 {
        let (code, _, body) = c.call(
            "POST",
            &format!("/api/v1/limits/capped/acquire?key=k{i}"),
            "",
        );
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("max_keys"), "{body}");
    }
    // The keys held go on.
    let (code, _, body) = c.call("POST", "/api/v1/limits/capped/acquire?key=k0", "");
    assert_eq!((code, source(&body)), (200, "redis"), "{body}");
    let keys = redis.cli_command(&["--raw", "KEYS", "rollstat:{capped:*"]);
    assert_eq!(keys.lines().count(), 5, "{keys}");
    println!("max_keys = 5 on a shared limit: 45 new keys refused (503), 5 keys in Redis");
}
