//! Limits and windows shared through real `redis-server` processes (started
//! by [`crate::redis_server`] on free loopback ports, killed on drop).
//!
//! * The Lua sliding log decides exactly like the in-memory `SlidingLog`
//!   (allowed, remaining, reset, retry-after, binding rule) on random
//!   timelines with several rules and weights, and never holds more than
//!   `max` in any window (brute force); the Lua sliding counter decides
//!   exactly like the in-memory `SlidingCounter`.
//! * Two daemons on one Redis, hammered concurrently on one key: at most 100
//!   admitted in any 1 s window, counted with send times at the window's start
//!   and receive times at its end so that loopback jitter cannot fake a
//!   violation (the validator of [`crate::exactness`]).
//! * Faults: Redis killed (decisions continue from local state, `source:
//!   local`, `rollstat_store_up 0`), stopped with SIGSTOP (decisions return
//!   within the deadline), restarted with an empty script cache (NOSCRIPT
//!   handled, sharing resumes, `rollstat_store_up 1`).
//! * Shared windows: two daemons fed statsd separately both publish the
//!   fleet-wide window; an outage pauses the fleet view and counts the bucket
//!   deltas that could not be shared.
//! * Redis Cluster: three masters on loopback made with `redis-cli --cluster
//!   create`; the two-daemon limit and window tests pass against it, and the
//!   keys of many limit keys spread over all three nodes.
//!
//! Without `redis-server` on the PATH these tests print why and pass, except
//! under CI (`CI` set), where they fail.

use std::net::UdpSocket;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rollstat::limit::{Decision, Limit, LimitState, Limits, SlidingCounter, SlidingLog};
use rollstat::store::{RedisConfig, RedisStore, RedisTarget, StoreError};
use rollstat::Timestamp;

use crate::exactness::{hammer, max_certainly_in_window, source, Http};
use crate::redis_server::{have_redis, Cluster, Redis};
use crate::support::{free_port, sample_value, wait_true, Daemon};

// ---------------------------------------------------------------------------
// The Lua scripts against the in-memory algorithms and a brute-force count

/// xorshift64*: a reproducible stream without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A redis-server and a store on it (2 s deadline), or `None` if
/// redis-server is missing (the test then returns; see [`have_redis`]).
fn redis_store() -> Option<(Redis, Arc<RedisStore>)> {
    let redis = Redis::start()?;
    let mut cfg = RedisConfig::url(redis.url());
    cfg.timeout = Duration::from_secs(2);
    let store = RedisStore::new(cfg).unwrap();
    Some((redis, store))
}

/// The Lua scripts that decide limits in Redis.
enum Script {
    Log,
    Counter,
}

/// An in-memory algorithm and the Lua script that must decide like it.
trait Lua: LimitState {
    const SCRIPT: Script;
}

impl Lua for SlidingLog {
    const SCRIPT: Script = Script::Log;
}

impl Lua for SlidingCounter {
    const SCRIPT: Script = Script::Counter;
}

/// The decision of `M`'s script for `key` of the limit `lua`.
async fn lua<M: Lua>(
    store: &RedisStore,
    key: &str,
    limits: &Limits,
    n: u32,
    now: Timestamp,
) -> Decision {
    match M::SCRIPT {
        Script::Log => store.sliding_log("lua", key, limits, n, now).await,
        Script::Counter => store.sliding_counter("lua", key, limits, n, now).await,
    }
    .unwrap()
}

/// Rules as (max, window in ms).
type Rules = &'static [(u32, u64)];

/// One timeline replayed by [`compare_on_random_timelines`].
struct Timeline {
    rules: Rules,
    /// The admitted requests of positive weight: (µs, weight).
    admitted: Vec<(u64, u32)>,
}

/// Replays three random timelines of 250 requests for each rule set of
/// `cases` through the Lua script (keys `{key_prefix}case{c}-run{r}`) and
/// the in-memory algorithm `M`, asserting that every decision is the same.
/// Returns the number of decisions compared and the timelines.
async fn compare_on_random_timelines<M: Lua>(
    store: &RedisStore,
    cases: &[Rules],
    seed: u64,
    key_prefix: &str,
) -> (usize, Vec<Timeline>) {
    let mut rng = Rng(seed);
    let mut compared = 0;
    let mut timelines = Vec::new();
    for (case, &rules) in cases.iter().enumerate() {
        for run in 0..3 {
            let limits = Limits::new(
                rules
                    .iter()
                    .map(|&(m, w)| Limit::new(m, Duration::from_millis(w)).unwrap()),
            )
            .unwrap();
            let mut model = M::new(&limits);
            // Timestamps on whole microseconds, the precision of the scores.
            let mut now_us: u64 = 1_767_225_600_000_000 + rng.below(1_000_000);
            let key = format!("{key_prefix}case{case}-run{run}");
            let mut admitted = Vec::new();
            for step in 0..250 {
                // Bursts at one instant, small steps and long gaps.
                now_us += match rng.below(10) {
                    0..=2 => 0,
                    3..=7 => rng.below(150_000),
                    _ => rng.below(1_500_000),
                };
                let max_w = rules.iter().map(|r| r.0).min().unwrap();
                let n = rng.below(u64::from(max_w) + 1) as u32;
                let now = Timestamp::from_nanos(now_us * 1000);
                let want = model.acquire(n, now).unwrap();
                let got = lua::<M>(store, &key, &limits, n, now).await;
                assert_eq!(
                    got, want,
                    "case {case} run {run} step {step}: n = {n} at +{now_us} us"
                );
                if got.allowed && n > 0 {
                    admitted.push((now_us, n));
                }
                compared += 1;
            }
            timelines.push(Timeline { rules, admitted });
        }
    }
    (compared, timelines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lua_sliding_log_decides_like_the_in_memory_log_on_random_timelines() {
    let Some((_redis, store)) = redis_store() else {
        return;
    };
    let cases: [Rules; 4] = [
        &[(5, 1_000)],
        &[(5, 1_000), (8, 3_000)],
        &[(3, 250), (10, 2_000), (20, 10_000)],
        &[(1, 100), (4, 700)],
    ];
    let started = Instant::now();
    let (compared, timelines) =
        compare_on_random_timelines::<SlidingLog>(&store, &cases, 0x9e37_79b9_7f4a_7c15, "").await;
    // Brute force: no window of any rule holds more than its max.
    for Timeline { rules, admitted } in &timelines {
        for &(max, w_ms) in rules.iter() {
            let w = w_ms * 1000;
            for &(end, _) in admitted {
                let inside: u32 = admitted
                    .iter()
                    .filter(|(t, _)| *t <= end && *t + w > end)
                    .map(|x| x.1)
                    .sum();
                assert!(inside <= max, "{inside} > {max} in a {w_ms} ms window");
            }
        }
    }
    // Too heavy a request is refused before anything is sent.
    let limits = Limits::new([Limit::per_second(2).unwrap()]).unwrap();
    let e = store
        .sliding_log(
            "lua",
            "heavy",
            &limits,
            3,
            Timestamp::from_secs(1_767_225_600),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Acquire(_)), "{e}");
    println!(
        "{compared} decisions compared with the in-memory log in {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lua_sliding_counter_decides_like_the_in_memory_counter_on_random_timelines() {
    let Some((_redis, store)) = redis_store() else {
        return;
    };
    let cases: [Rules; 3] = [
        &[(10, 1_000)],
        &[(5, 1_000), (12, 3_000)],
        &[(3, 250), (10, 2_000), (40, 10_000)],
    ];
    let (compared, _) = compare_on_random_timelines::<SlidingCounter>(
        &store,
        &cases,
        0x2545_f491_4f6c_dd1d,
        "counter-",
    )
    .await;
    println!("{compared} counter decisions compared with the in-memory counter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_carry_one_hash_tag_per_limit_and_key_and_expire_after_the_window() {
    let Some((redis, store)) = redis_store() else {
        return;
    };
    let limits = Limits::new([
        Limit::per_second(5).unwrap(),
        Limit::per_minute(50).unwrap(),
    ])
    .unwrap();
    let k1 = store.log_key("api", "alice", &limits.as_slice()[0]);
    let k2 = store.log_key("api", "alice", &limits.as_slice()[1]);
    assert_eq!(k1, "rollstat:{api:alice}:1s");
    assert_eq!(k2, "rollstat:{api:alice}:60s");
    let now = Timestamp::from_secs(1_767_225_600);
    let d = store
        .sliding_log("api", "alice", &limits, 3, now)
        .await
        .unwrap();
    assert!(d.allowed && d.remaining == 2);
    // Weighted: one member of weight 3 in each set (running total 3);
    // TTL = window + 1 s margin.
    let reply = |cmd: &str, key: &str| redis.command(&format!("{cmd} {key}")).unwrap();
    let pttl = |key: &str| -> i64 { reply("PTTL", key).trim()[1..].parse().unwrap() };
    assert_eq!(reply("ZCARD", &k1).trim(), ":1");
    assert_eq!(reply("ZCARD", &k2).trim(), ":1");
    assert_eq!(
        redis.cli_command(&["ZRANGE", &k1, "0", "-1"]),
        "0000000000000003:3"
    );
    let (ttl1, ttl2) = (pttl(&k1), pttl(&k2));
    assert!((1_500..=2_000).contains(&ttl1), "{ttl1}");
    assert!((60_500..=61_000).contains(&ttl2), "{ttl2}");
    // A denial records nothing.
    let d = store
        .sliding_log("api", "alice", &limits, 3, now)
        .await
        .unwrap();
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(Duration::from_secs(1)));
    assert_eq!(reply("ZCARD", &k1).trim(), ":1");
}

// ---------------------------------------------------------------------------
// Daemons sharing limits

/// A config: listeners on port 0 (statsd TCP off), a `[redis]` section of
/// the lines `redis`, then `rest`.
pub(crate) fn config(redis: &str, rest: &str) -> String {
    format!(
        r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[redis]
{redis}
{rest}"#
    )
}

/// The `[redis]` timing of the sharing tests: a 200 ms deadline, a sync of
/// shared windows every 100 ms.
const TIMING: &str = "timeout_ms = 200\nsync_interval_ms = 100";

/// A shared limit `api` of 100 per second against the server(s) of
/// `redis`, then `extra`.
fn shared_config(redis: &str, extra: &str) -> String {
    config(
        &format!("{redis}\n{TIMING}"),
        &format!(
            r#"
[[limits]]
name = "api"
shared = true
rules = [{{ max = 100, window_ms = 1000 }}]
{extra}
"#
        ),
    )
}

/// Two daemons on one Redis (or cluster), 4 clients each hammering one key
/// of a 100/s shared limit for 6 s.
fn two_daemons_stay_within_the_limit(redis_section: &str) {
    let cfg = shared_config(redis_section, "");
    let (a, b) = (Daemon::start_with(&cfg), Daemon::start_with(&cfg));
    let started = Instant::now();
    // 4 clients on each daemon, one key, one request every 8 ms each: about
    // 1000 requests/s offered against 100/s.
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let addr = if i % 2 == 0 { a.http } else { b.http };
            std::thread::spawn(move || {
                hammer(
                    addr,
                    "api",
                    "fleet",
                    "q=100;w=1",
                    Duration::from_millis(8),
                    Duration::from_secs(6),
                )
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut denied = 0;
    let mut sources = Vec::new();
    let mut per_daemon = [0usize; 2];
    for (i, h) in handles.into_iter().enumerate() {
        let h = h.join().unwrap();
        per_daemon[i % 2] += h.admitted.len();
        all.extend(h.admitted);
        denied += h.denied;
        sources.extend(h.sources);
    }
    sources.sort();
    sources.dedup();
    let m = max_certainly_in_window(&all, Duration::from_secs(1));
    println!(
        "two daemons, 8 clients, one key: admitted {} ({} on a, {} on b), denied {denied}, \
         max in any 1 s window = {m}, sources {sources:?}, in {:?}",
        all.len(),
        per_daemon[0],
        per_daemon[1],
        started.elapsed()
    );
    assert_eq!(sources, ["redis"], "every decision must come from Redis");
    assert!(m <= 100, "two daemons admitted {m} within one second");
    assert!(m >= 95, "the window count should reach the limit: {m}");
    // One fleet-wide limit: about 100/s over 6 s in total, not 100/s each.
    assert!(
        all.len() <= 700 && all.len() >= 500,
        "admitted {} in 6 s against 100/s fleet-wide",
        all.len()
    );
    assert!(per_daemon[0] > 100 && per_daemon[1] > 100, "{per_daemon:?}");
}

#[test]
fn two_daemons_on_one_redis_never_admit_more_than_100_in_any_second() {
    let Some(redis) = Redis::start() else { return };
    two_daemons_stay_within_the_limit(&redis.section());
}

/// One acquire on the limit `api` over a fresh connection: (status, body,
/// how long it took).
fn acquire(d: &Daemon, key: &str) -> (u16, String, Duration) {
    let t = Instant::now();
    let (code, _, body) =
        Http::connect(d.http).call("POST", &format!("/api/v1/limits/api/acquire?key={key}"), "");
    (code, body, t.elapsed())
}

#[test]
fn redis_killed_then_restarted_empty_local_decisions_then_sharing_resumes() {
    let Some(mut redis) = Redis::start() else {
        return;
    };
    let mut d = Daemon::start_with(&shared_config(&redis.section(), ""));
    let (code, body, _) = acquire(&d, "k");
    assert_eq!((code, source(&body)), (200, "redis"), "{body}");
    wait_true(Duration::from_secs(5), "rollstat_store_up 1", || {
        d.metric("rollstat_store_up ") == Some(1.0)
    });
    let loads_before = d.metric("rollstat_store_script_loads_total").unwrap_or(0.0);

    redis.kill();
    let mut locals = 0;
    for _ in 0..20 {
        let (code, body, took) = acquire(&d, "k");
        assert!(code == 200 || code == 429, "{code}: {body}");
        assert_eq!(source(&body), "local", "{body}");
        assert!(took < Duration::from_secs(1), "took {took:?}");
        locals += 1;
    }
    assert_eq!(d.metric("rollstat_store_up "), Some(0.0));
    assert!(
        d.metric("rollstat_store_errors_total{op=\"limit\"}")
            .unwrap_or(0.0)
            >= 1.0
    );
    assert!(d.alive());

    // Back, on the same port, with an empty script cache.
    redis.restart();
    wait_true(
        Duration::from_secs(10),
        "sharing to resume after the restart",
        || source(&acquire(&d, "k2").1) == "redis",
    );
    wait_true(Duration::from_secs(5), "rollstat_store_up 1", || {
        d.metric("rollstat_store_up ") == Some(1.0)
    });
    let loads_after = d.metric("rollstat_store_script_loads_total").unwrap_or(0.0);
    assert!(
        loads_after > loads_before,
        "the script should have been reloaded after NOSCRIPT: {loads_before} -> {loads_after}"
    );
    assert!(d.alive());
    println!(
        "{locals} local decisions during the outage; script loads {loads_before} -> {loads_after}"
    );
}

#[test]
fn redis_stopped_with_sigstop_decisions_return_within_the_deadline() {
    let Some(redis) = Redis::start() else { return };
    let mut d = Daemon::start_with(&shared_config(
        &redis.section(),
        "on_store_error = \"local\"",
    ));
    assert_eq!(source(&acquire(&d, "s").1), "redis");
    redis.signal("-STOP");
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let (code, body, took) = acquire(&d, "s");
        assert_eq!(code, 200, "{body}");
        assert_eq!(source(&body), "local", "{body}");
        slowest = slowest.max(took);
    }
    // Deadline 200 ms; loopback and scheduling add little.
    assert!(slowest < Duration::from_millis(700), "slowest {slowest:?}");
    assert_eq!(d.metric("rollstat_store_up "), Some(0.0));
    redis.signal("-CONT");
    wait_true(
        Duration::from_secs(10),
        "sharing to resume after SIGCONT",
        || source(&acquire(&d, "s").1) == "redis",
    );
    assert!(d.alive());
    println!("slowest decision while Redis was stopped: {slowest:?}");
}

#[test]
fn fail_closed_and_fail_open_limits_answer_without_redis() {
    if !have_redis() {
        return;
    }
    // Redis down from the start: nothing listens on this port.
    let port = free_port();
    let cfg = config(
        &format!("url = \"redis://127.0.0.1:{port}\"\ntimeout_ms = 100"),
        r#"
[[limits]]
name = "closed"
shared = true
on_store_error = "deny"
rules = [{ max = 10, window_ms = 1000 }]

[[limits]]
name = "open"
shared = true
on_store_error = "allow"
rules = [{ max = 10, window_ms = 1000 }]
"#,
    );
    let mut d = Daemon::start_with(&cfg);
    let mut c = Http::connect(d.http);
    let (code, _, body) = c.call("POST", "/api/v1/limits/closed/acquire?key=a", "");
    assert_eq!((code, source(&body)), (503, "fallback"), "{body}");
    for _ in 0..20 {
        let (code, _, body) = c.call("POST", "/api/v1/limits/open/acquire?key=a", "");
        assert_eq!((code, source(&body)), (200, "fallback"), "{body}");
    }
    assert_eq!(d.metric("rollstat_store_up "), Some(0.0));
    // Started while Redis was down; it comes up on that port: sharing starts.
    let _redis = Redis::start_with(port, Vec::new());
    wait_true(Duration::from_secs(10), "sharing to start", || {
        let (code, _, body) =
            Http::connect(d.http).call("POST", "/api/v1/limits/closed/acquire?key=b", "");
        code == 200 && source(&body) == "redis"
    });
    assert!(d.alive());
}

#[test]
fn shared_limits_and_windows_need_a_redis_section() {
    let e = rollstat::config::Config::parse(
        r#"
[[limits]]
name = "a"
shared = true
rules = [{ max = 1, window_ms = 1000 }]
"#,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("line 4") && e.contains("needs a `[redis]` section"),
        "{e}"
    );
    let e = rollstat::config::Config::parse(
        r#"
[redis]
url = "redis://127.0.0.1:6379"
timeout_ms = 0

[[limits]]
name = "a"
algorithm = "approximate"
shared = true
on_store_error = "maybe"
rules = [{ max = 1, window_ms = 1000 }]
"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`redis.timeout_ms`"), "{e}");
    assert!(e.contains("unknown policy `maybe`"), "{e}");
    let cfg = rollstat::config::Config::parse(
        r#"
[redis]
cluster_nodes = ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]
sync_interval_ms = 250
"#,
    )
    .unwrap();
    let r = cfg.redis.unwrap();
    assert_eq!(
        r.target,
        RedisTarget::Cluster(vec![
            "redis://127.0.0.1:7000".into(),
            "redis://127.0.0.1:7001".into()
        ])
    );
    assert_eq!(r.sync_interval, Duration::from_millis(250));
}

// ---------------------------------------------------------------------------
// Shared windows

/// A window `w` of `buckets` × `interval_ms` over `api.requests`, shared
/// through the server(s) of `redis`.
pub(crate) fn window_config(redis: &str, buckets: u32, interval_ms: u32) -> String {
    config(
        &format!("{redis}\n{TIMING}"),
        &format!(
            r#"
[[windows]]
name = "w"
buckets = {buckets}
interval_ms = {interval_ms}

[[mappings]]
match = "api.requests"
shared = true
"#
        ),
    )
}

/// Sends `n` increments of 1 to `api.requests`, 50 lines a datagram.
pub(crate) fn send_counts(d: &Daemon, n: usize) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut left = n;
    while left > 0 {
        let k = left.min(50);
        let text = vec!["api.requests:1|c"; k].join("\n");
        s.send_to(text.as_bytes(), d.udp).unwrap();
        left -= k;
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub(crate) const LOCAL: &str = "rollstat_window_samples{metric=\"api.requests\",window=\"w\"}";
pub(crate) const FLEET: &str =
    "rollstat_fleet_window_samples{metric=\"api.requests\",window=\"w\"}";
const FLEET_RATE: &str = "rollstat_fleet_window_rate{metric=\"api.requests\",window=\"w\"}";
const LOCAL_RATE: &str = "rollstat_window_rate{metric=\"api.requests\",window=\"w\"}";

fn two_daemons_publish_the_fleet_wide_rate(redis_section: &str) {
    let cfg = window_config(redis_section, 30, 1000);
    let (a, b) = (Daemon::start_with(&cfg), Daemon::start_with(&cfg));
    let started = Instant::now();
    send_counts(&a, 300);
    send_counts(&b, 600);
    for d in [&a, &b] {
        wait_true(
            Duration::from_secs(10),
            "the fleet view to show both daemons",
            || d.metric(FLEET) == Some(900.0),
        );
    }
    assert_eq!(a.metric(LOCAL), Some(300.0));
    assert_eq!(b.metric(LOCAL), Some(600.0));
    // One scrape: the fleet rate divides the fleet's 900 by the time the
    // window's 30 x 1 s buckets span (29 to 30 s): other instances may have
    // filled them long before this one started. The local rate divides this
    // daemon's 300 by the time it has watched (it started seconds ago).
    let body = a.get("/metrics", &[]).text();
    let find = |p: &str| sample_value(&body, p).unwrap_or_else(|| panic!("no {p}"));
    let (fleet_rate, local_rate) = (find(FLEET_RATE), find(LOCAL_RATE));
    assert!(
        fleet_rate > 900.0 / 30.0 && fleet_rate <= 900.0 / 29.0 + 1e-9,
        "fleet {fleet_rate}"
    );
    // Watched for less than the span: at least the fleet's rate scaled by
    // 300/900, and well above it while the daemon is younger than 20 s.
    let up = started.elapsed().as_secs_f64();
    assert!(
        local_rate >= fleet_rate / 3.0 - 1e-9,
        "{local_rate} vs {fleet_rate}"
    );
    if up < 20.0 {
        assert!(
            local_rate > fleet_rate / 3.0 * 1.4,
            "local {local_rate} after {up} s, fleet {fleet_rate}"
        );
    }
    // The JSON API shows the same fleet view next to the local window.
    for (d, local) in [(&a, 300.0), (&b, 600.0)] {
        let all = d.series("api.*");
        let w = &all[0]["windows"]["w"];
        assert_eq!(w["samples"], local, "{all}");
        assert_eq!(w["fleet"]["samples"], 900.0, "{all}");
        assert_eq!(w["fleet"]["sum"], 900.0, "{all}");
        assert_eq!(w["fleet"]["avg"], 1.0, "{all}");
        let fleet_rate = w["fleet"]["rate"].as_f64().unwrap();
        assert!(
            fleet_rate > 900.0 / 30.0 && fleet_rate <= 900.0 / 29.0 + 1e-9,
            "{all}"
        );
    }
    println!(
        "fleet view 900 = 300 + 600 on both daemons after {:?}; rate {fleet_rate:.2}/s fleet, {local_rate:.2}/s local",
        started.elapsed()
    );
}

#[test]
fn two_daemons_on_one_redis_publish_the_fleet_wide_window() {
    let Some(redis) = Redis::start() else { return };
    two_daemons_publish_the_fleet_wide_rate(&redis.section());
}

#[test]
fn shared_windows_survive_an_outage_and_count_what_could_not_be_shared() {
    let Some(mut redis) = Redis::start() else {
        return;
    };
    // A 1 s window of 4 buckets: an outage of 2 s outlives its buckets.
    let mut d = Daemon::start_with(&window_config(&redis.section(), 4, 250));
    send_counts(&d, 100);
    wait_true(Duration::from_secs(5), "the fleet view", || {
        d.metric(FLEET) == Some(100.0)
    });
    redis.kill();
    // Samples keep arriving during the outage; the local view shows them.
    let outage = Instant::now();
    while outage.elapsed() < Duration::from_secs(2) {
        send_counts(&d, 10);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(d.metric(LOCAL).unwrap_or(0.0) > 0.0);
    assert_eq!(d.metric("rollstat_store_up "), Some(0.0));
    // The fleet view is stale: not published.
    assert_eq!(d.metric(FLEET), None);
    let unshared = d
        .metric("rollstat_store_unshared_deltas_total")
        .unwrap_or(0.0);
    assert!(unshared >= 1.0, "buckets that expired unshared: {unshared}");
    assert!(d.alive());
    redis.restart();
    // Sharing resumes: the fleet view returns and equals the local one
    // (one instance), once the outage's samples have left the window.
    wait_true(Duration::from_secs(10), "the fleet view to return", || {
        d.metric(FLEET).is_some()
    });
    send_counts(&d, 40);
    wait_true(Duration::from_secs(5), "fleet == local", || {
        let (l, f) = (d.metric(LOCAL), d.metric(FLEET));
        l.is_some() && l == f
    });
    assert_eq!(d.metric("rollstat_store_up "), Some(1.0));
    println!("unshared bucket deltas during a 2 s outage: {unshared}");
}

#[test]
fn an_overflowing_line_on_a_shared_metric_is_refused_and_sharing_goes_on() {
    let Some(redis) = Redis::start() else { return };
    let d = Daemon::start_with(&window_config(&redis.section(), 30, 1000));
    send_counts(&d, 10);
    // 1e305 at @1e-6 is 1e311: it used to put inf into the bucket, fail
    // the Redis pipeline on every sync and mark the store down (and every
    // shared limit with it). Now it is refused and never becomes a delta.
    d.send_udp(b"api.requests:1e305|c|@0.000001");
    send_counts(&d, 10);
    wait_true(Duration::from_secs(10), "the fleet view of 20", || {
        d.metric(FLEET) == Some(20.0)
    });
    assert_eq!(
        d.metric("rollstat_series_refused_total{reason=\"overflow\"}"),
        Some(1.0)
    );
    // Several syncs later the store is still up and the view still true.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(d.metric("rollstat_store_up "), Some(1.0));
    assert_eq!(d.metric(FLEET), Some(20.0));
    assert_eq!(d.metric(LOCAL), Some(20.0));
}

// ---------------------------------------------------------------------------
// Redis Cluster

#[test]
fn on_a_three_node_cluster_two_daemons_share_one_limit_and_one_window() {
    let started = Instant::now();
    let Some(cluster) = Cluster::start() else {
        return;
    };
    println!("3-node cluster up in {:?}", started.elapsed());
    two_daemons_stay_within_the_limit(&cluster.section());
    two_daemons_publish_the_fleet_wide_rate(&cluster.section());
    // Keys of many limit keys spread over the nodes; each key's rules stay
    // in one slot (one EVALSHA decides them all).
    let cfg = shared_config(
        &cluster.section(),
        "[[limits]]\nname = \"multi\"\nshared = true\nrules = [{ max = 2, window_ms = 1000 }, { max = 3, window_ms = 60000 }]",
    );
    let d = Daemon::start_with(&cfg);
    let mut c = Http::connect(d.http);
    for k in 0..30 {
        let (code, _, body) = c.call(
            "POST",
            &format!("/api/v1/limits/multi/acquire?key=user{k}"),
            "",
        );
        assert_eq!((code, source(&body)), (200, "redis"), "{body}");
    }
    assert_eq!(
        cluster.nodes_holding_keys(),
        3,
        "the keys should spread over all three nodes"
    );
}
