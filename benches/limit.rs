//! Rate-limiter benchmarks: one decision per iteration, ours against
//! governor's GCRA, both with time passed in through a manual clock.
//!
//! Every iteration advances a shared-atomic manual clock by a fixed step and
//! makes one decision at the new time: rollstat's `ManualClock` for ours,
//! governor's `FakeRelativeClock` (the same design: an `Arc<AtomicU64>`) for
//! governor. So both sides pay the same clock cost and the algorithm is what
//! differs. Two traffic mixes per group:
//!
//! * `admit`: the offered rate is below the limit, every request is admitted
//!   (the log then holds a full window of entries, the steady state).
//! * `deny`: the offered rate is about 10 000 times the limit (1-key groups)
//!   or 10 times it (10k-key groups), so most requests are denied.
//!
//! The outcome is passed to `black_box` by reference (`black_box(&d)`), so it
//! must be fully computed but is not copied through the stack a second time
//! (copying a piecewise-written struct costs a store-forwarding stall that
//! has nothing to do with either limiter).
//!
//! Keyed groups pre-create 10 000 keys and cycle through them in order.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use criterion::{BenchmarkGroup, Criterion, Throughput};
use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use rollstat::limit::{KeyedConfig, KeyedLimiter, Limit, LimitState, SlidingCounter, SlidingLog};
use rollstat::{Clock, ManualClock};

const KEYS: usize = 10_000;

/// A traffic mix: requests per second allowed, and the time between requests.
#[derive(Clone, Copy)]
struct Mix {
    name: &'static str,
    per_second: u32,
    step: Duration,
}

/// One key: 10 000/s offered 1 per 110 µs (all admitted), or 100/s offered
/// 1 per µs (99.99% denied).
const ONE_KEY: [Mix; 2] = [
    Mix {
        name: "admit",
        per_second: 10_000,
        step: Duration::from_micros(110),
    },
    Mix {
        name: "deny",
        per_second: 100,
        step: Duration::from_micros(1),
    },
];

/// 10k keys, one request per µs overall, so each key is offered 100/s:
/// limit 1000/s per key (all admitted) or 10/s per key (90% denied).
const MANY_KEYS: [Mix; 2] = [
    Mix {
        name: "admit",
        per_second: 1000,
        step: Duration::from_micros(1),
    },
    Mix {
        name: "deny",
        per_second: 10,
        step: Duration::from_micros(1),
    },
];

/// All limiter benchmark groups.
pub fn benches(c: &mut Criterion) {
    one_key::<SlidingLog>(c, "limit/exact_1key");
    one_key::<SlidingCounter>(c, "limit/approx_1key");
    many_keys::<SlidingLog>(c, "limit/exact_10k_keys");
    many_keys::<SlidingCounter>(c, "limit/approx_10k_keys");
    governor_direct(c);
    governor_keyed(c);
}

fn group<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(1));
    g
}

fn keys() -> Vec<String> {
    (0..KEYS).map(|i| format!("client-{i:05}")).collect()
}

fn one_key<A: LimitState>(c: &mut Criterion, name: &str) {
    let mut g = group(c, name);
    for mix in ONE_KEY {
        let limit = Limit::per_second(mix.per_second).expect("valid limit");
        let mut state = A::new(&limit.into());
        let clock = ManualClock::new();
        g.bench_function(mix.name, |b| {
            b.iter(|| {
                clock.advance(mix.step);
                let d = state.acquire(black_box(1), clock.now());
                black_box(&d);
            });
        });
    }
    g.finish();
}

fn many_keys<A: LimitState + Send>(c: &mut Criterion, name: &str) {
    let mut g = group(c, name);
    let keys = keys();
    for mix in MANY_KEYS {
        let limit = Limit::per_second(mix.per_second).expect("valid limit");
        let limiter: KeyedLimiter<A> =
            KeyedLimiter::new(limit.into(), KeyedConfig::new(2 * KEYS)).expect("valid config");
        let clock = ManualClock::new();
        for k in &keys {
            clock.advance(mix.step);
            let _ = limiter.acquire(k, 1, clock.now());
        }
        let mut i = 0;
        g.bench_function(mix.name, |b| {
            b.iter(|| {
                clock.advance(mix.step);
                i = if i + 1 == KEYS { 0 } else { i + 1 };
                let d = limiter.acquire(&keys[i], black_box(1), clock.now());
                black_box(&d);
            });
        });
    }
    g.finish();
}

fn quota(per_second: u32) -> Quota {
    Quota::per_second(NonZeroU32::new(per_second).expect("non-zero"))
}

fn governor_direct(c: &mut Criterion) {
    let mut g = group(c, "limit/governor_direct");
    for mix in ONE_KEY {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::direct_with_clock(quota(mix.per_second), clock.clone());
        g.bench_function(mix.name, |b| {
            b.iter(|| {
                clock.advance(mix.step);
                let d = limiter.check();
                black_box(&d);
            });
        });
    }
    g.finish();
}

fn governor_keyed(c: &mut Criterion) {
    let mut g = group(c, "limit/governor_keyed_10k");
    let keys = keys();
    for mix in MANY_KEYS {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::dashmap_with_clock(quota(mix.per_second), clock.clone());
        for k in &keys {
            clock.advance(mix.step);
            let _ = limiter.check_key(k);
        }
        let mut i = 0;
        g.bench_function(mix.name, |b| {
            b.iter(|| {
                clock.advance(mix.step);
                i = if i + 1 == KEYS { 0 } else { i + 1 };
                let d = limiter.check_key(&keys[i]);
                black_box(&d);
            });
        });
    }
    g.finish();
}
