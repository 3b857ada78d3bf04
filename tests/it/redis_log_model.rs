//! The shared exact log (one member per request, carrying its
//! weight and a running total) decides exactly like the in-memory log, on
//! random sequences found by proptest against a real `redis-server`:
//!
//! * allowed, remaining, reset and retry-after (the whole [`Decision`]) of
//!   `RedisStore::sliding_log` equal those of `SlidingLog`, for random time
//!   steps in whole microseconds, weights and one or two rules with
//!   whole-microsecond windows;
//! * with write-backs interleaved (admissions at their own, older times, the
//!   path of a local fallback's admissions after an outage), the decisions
//!   equal a brute-force count over every admitted `(time, weight)`;
//! * members of an older rollstat (one per unit, `<us>-<instance>-<seq>-<i>`)
//!   are read as weight 1.
//!
//! Without `redis-server` on the PATH these tests print why and pass, except
//! under CI.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use rollstat::limit::{Decision, Limit, LimitState, Limits, SlidingLog};
use rollstat::store::{RedisConfig, RedisStore, SharedAlgorithm, WriteBackOutcome};
use rollstat::Timestamp;

use crate::redis_server::Redis;

/// 2026-01-01, in µs.
const T0_US: u64 = 1_767_225_600_000_000;

/// One step of a sequence.
#[derive(Clone, Debug)]
enum Step {
    /// Time advances by `dt` µs, then a request of weight `n` (0: a peek).
    Acquire { dt: u64, n: u32 },
    /// Weight `n` admitted `age` µs before the current time is written back.
    WriteBack { age: u64, n: u32 },
}

/// Rules `(max, window µs)`: one or two, small windows so that entries
/// expire within a sequence.
fn rules() -> impl Strategy<Value = Vec<(u32, u64)>> {
    prop::collection::vec((1u32..12, 1u64..3_000), 1..=2)
        .prop_filter("distinct windows (one rule per window)", |r| {
            r.len() < 2 || r[0].1 != r[1].1
        })
}

fn acquire(max_n: u32) -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (Just(0u64), 0..=max_n).prop_map(|(dt, n)| Step::Acquire { dt, n }),
        5 => (1u64..400, 0..=max_n).prop_map(|(dt, n)| Step::Acquire { dt, n }),
        2 => (400u64..4_000, 0..=max_n).prop_map(|(dt, n)| Step::Acquire { dt, n }),
    ]
}

fn limits_of(rules: &[(u32, u64)]) -> Limits {
    Limits::new(
        rules
            .iter()
            .map(|&(m, w)| Limit::new(m, Duration::from_micros(w)).unwrap()),
    )
    .unwrap()
}

/// A runtime, a redis-server and a store on it, or `None` without
/// redis-server.
fn setup() -> Option<(tokio::runtime::Runtime, Redis, Arc<RedisStore>)> {
    let redis = Redis::start()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut cfg = RedisConfig::url(redis.url());
    cfg.timeout = Duration::from_secs(5);
    let store = rt.block_on(async { RedisStore::new(cfg).unwrap() });
    Some((rt, redis, store))
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// A fresh key per case.
fn next_key(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}{}", N.fetch_add(1, Ordering::Relaxed))
}

#[test]
fn the_shared_log_decides_like_the_local_log_on_random_sequences() {
    let Some((rt, _redis, store)) = setup() else {
        return;
    };
    let strategy = rules().prop_flat_map(|r| {
        let max_n = r.iter().map(|x| x.0).min().unwrap();
        (Just(r), prop::collection::vec(acquire(max_n), 1..40))
    });
    let decisions = AtomicU64::new(0);
    runner(64)
        .run(&strategy, |(rules, steps)| {
            let limits = limits_of(&rules);
            let mut local = SlidingLog::new(&limits);
            let key = next_key("model-");
            let mut now_us = T0_US;
            for (i, step) in steps.iter().enumerate() {
                let Step::Acquire { dt, n } = *step else {
                    unreachable!()
                };
                now_us += dt;
                let now = Timestamp::from_nanos(now_us * 1000);
                let want = local.acquire(n, now).unwrap();
                let got = rt
                    .block_on(store.sliding_log("model", &key, &limits, n, now))
                    .unwrap();
                prop_assert_eq!(
                    got,
                    want,
                    "step {} (n = {} at +{} us)",
                    i,
                    n,
                    now_us - T0_US
                );
                decisions.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
        .unwrap();
    println!("{} decisions compared", decisions.into_inner());
}

/// The decision a brute-force count over `entries` (admitted `(µs,
/// weight)`, any order) gives for weight `n` at `now` (µs, not before any
/// entry): [`Decision`]'s rules, computed the slow way.
fn brute(entries: &[(u64, u32)], limits: &Limits, n: u32, now: u64) -> (Decision, bool) {
    let mut sorted = entries.to_vec();
    sorted.sort_by_key(|e| e.0);
    let mut views = Vec::new();
    let mut allowed = true;
    let mut retry = 0u64;
    for l in limits.as_slice() {
        let w = l.window_nanos() / 1000;
        let inside: Vec<(u64, u32)> = sorted.iter().copied().filter(|e| e.0 + w > now).collect();
        let used: u64 = inside.iter().map(|e| u64::from(e.1)).sum();
        let max = u64::from(l.max());
        if used + u64::from(n) > max {
            allowed = false;
            let excess = used + u64::from(n) - max;
            let mut freed = 0;
            for e in &inside {
                freed += u64::from(e.1);
                if freed >= excess {
                    retry = retry.max(e.0 + w - now);
                    break;
                }
            }
        }
        views.push((*l, used, inside.last().map(|e| e.0)));
    }
    let mut best: Option<(Limit, u32, u64)> = None;
    for (l, used, newest) in views {
        let used = if allowed { used + u64::from(n) } else { used };
        let w = l.window_nanos() / 1000;
        let reset = if allowed && n > 0 {
            w
        } else {
            newest.map_or(0, |t| t + w - now)
        };
        let remaining = u64::from(l.max()).saturating_sub(used) as u32;
        if best
            .is_none_or(|b| (remaining, std::cmp::Reverse(reset)) < (b.1, std::cmp::Reverse(b.2)))
        {
            best = Some((l, remaining, reset));
        }
    }
    let (limit, remaining, reset) = best.unwrap();
    (
        Decision {
            allowed,
            limit,
            remaining,
            reset: Duration::from_micros(reset),
            retry_after: (!allowed).then(|| Duration::from_micros(retry)),
        },
        allowed && n > 0,
    )
}

#[test]
fn write_backs_at_older_times_keep_the_shared_log_exact() {
    let Some((rt, _redis, store)) = setup() else {
        return;
    };
    let strategy = rules().prop_flat_map(|r| {
        let max_n = r.iter().map(|x| x.0).min().unwrap();
        let step = prop_oneof![
            4 => acquire(max_n),
            1 => (0u64..3_000, 1..=max_n).prop_map(|(age, n)| Step::WriteBack { age, n }),
        ];
        (Just(r), prop::collection::vec(step, 1..40))
    });
    runner(64)
        .run(&strategy, |(rules, steps)| {
            let limits = limits_of(&rules);
            let key = next_key("wb-");
            let mut entries: Vec<(u64, u32)> = Vec::new();
            let mut now_us = T0_US;
            for (i, step) in steps.iter().enumerate() {
                match *step {
                    Step::Acquire { dt, n } => {
                        now_us += dt;
                        let now = Timestamp::from_nanos(now_us * 1000);
                        let (want, record) = brute(&entries, &limits, n, now_us);
                        let got = rt
                            .block_on(store.sliding_log("model", &key, &limits, n, now))
                            .unwrap();
                        prop_assert_eq!(
                            got,
                            want,
                            "step {} (n = {} at +{} us)",
                            i,
                            n,
                            now_us - T0_US
                        );
                        if record {
                            entries.push((now_us, n));
                        }
                    }
                    Step::WriteBack { age, n } => {
                        let at = now_us.saturating_sub(age).max(T0_US);
                        let now = Timestamp::from_nanos(now_us * 1000);
                        let out = rt.block_on(store.write_back(
                            "model",
                            &limits,
                            SharedAlgorithm::SlidingLog,
                            &[(key.clone(), n, Timestamp::from_nanos(at * 1000))],
                            now,
                        ));
                        prop_assert!(
                            matches!(&out, WriteBackOutcome::Done(ok) if ok == &[true]),
                            "{:?}",
                            out
                        );
                        entries.push((at, n));
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn members_of_an_older_rollstat_count_as_weight_one() {
    let Some((rt, redis, store)) = setup() else {
        return;
    };
    let limits = limits_of(&[(10, 1_000_000)]);
    let key = store.log_key("model", "old", &limits.as_slice()[0]);
    // An older rollstat admitted 3 at T0 and 2 at T0 + 100 ms, one member
    // per unit.
    for (t, i) in [(0u64, 0), (0, 1), (0, 2), (100_000, 0), (100_000, 1)] {
        let at = T0_US + t;
        redis.cli_command(&["ZADD", &key, &at.to_string(), &format!("{at}-abcd-7-{i}")]);
    }
    let at = |ms: u64| Timestamp::from_nanos((T0_US + ms * 1000) * 1000);
    let d = rt
        .block_on(store.sliding_log("model", "old", &limits, 4, at(200)))
        .unwrap();
    assert!(d.allowed);
    assert_eq!(d.remaining, 1);
    // 2 more need 1 freed: the oldest unit leaves at T0 + 1 s.
    let d = rt
        .block_on(store.sliding_log("model", "old", &limits, 2, at(300)))
        .unwrap();
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(Duration::from_millis(700)));
    // And an older rollstat appending after a new one: its tail is converted.
    let late = T0_US + 400_000;
    redis.cli_command(&["ZADD", &key, &late.to_string(), &format!("{late}-abcd-8-0")]);
    let d = rt
        .block_on(store.sliding_log("model", "old", &limits, 0, at(500)))
        .unwrap();
    assert_eq!(d.remaining, 0);
    let d = rt
        .block_on(store.sliding_log("model", "old", &limits, 3, at(1_000)))
        .unwrap();
    // At T0 + 1 s the 3 of T0 have left: 2 + 4 + 1 = 7 remain, 3 fit.
    assert!(d.allowed, "{d:?}");
    assert_eq!(d.remaining, 0);
}
