//! Breaker benchmarks: one allow plus one recorded outcome per iteration, with
//! the passed-in time advancing 1 µs per call (so buckets roll over every 250
//! calls for the SRE breaker, every 1000 for the error-rate one).
//!
//! * `breaker/sre_allow_and_record`, `breaker/error_rate_allow_and_record`:
//!   the bare breakers, no lock.
//! * `breaker/sre_shared_1_thread`: the same through a [`SharedBreaker`]
//!   (uncontended lock plus the inner generator).
//! * `breaker/sre_shared_2_threads`: two threads on one `SharedBreaker`, each
//!   doing `iters` allow+record pairs; the figure is wall time over `iters`,
//!   so with no contention it would equal the 1-thread figure, and with a fully
//!   serialised lock it would be about twice it. Throughput counts both
//!   threads' pairs (2 elements per iteration).

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use rollstat::breaker::{
    ErrorRateBreaker, ErrorRateConfig, Outcome, RandomSource, SharedBreaker, SplitMix64,
    SreBreaker, SreConfig,
};
use rollstat::{ManualClock, Timestamp};

const T0: Timestamp = ManualClock::DEFAULT_START;
const STEP: Duration = Duration::from_micros(1);

fn sre() -> SreBreaker {
    SreBreaker::new(SreConfig::default(), T0).expect("default SRE config is valid")
}

/// One thread's share of the 2-thread run: `iters` allow+record pairs,
/// timed from the moment both threads are ready.
#[allow(clippy::disallowed_methods)] // a benchmark measures wall time
fn shared_worker(shared: &SharedBreaker<SreBreaker>, start: &Barrier, iters: u64) -> Duration {
    start.wait();
    let t = std::time::Instant::now();
    let mut now = T0;
    for _ in 0..iters {
        now = now + STEP;
        black_box(shared.allow(now));
        shared.record(Outcome::Success, now);
    }
    t.elapsed()
}

/// Registers the `breaker/*` benchmarks.
pub fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker");
    g.throughput(Throughput::Elements(1));

    g.bench_function("sre_allow_and_record", |b| {
        let mut br = sre();
        let mut rng = SplitMix64::new(1);
        let mut now = T0;
        b.iter(|| {
            now = now + STEP;
            let v = br.allow(now, rng.next_f64());
            br.record(Outcome::Success, now);
            black_box(v)
        });
    });

    g.bench_function("error_rate_allow_and_record", |b| {
        let mut br = ErrorRateBreaker::new(ErrorRateConfig::default(), T0)
            .expect("default error-rate config is valid");
        let mut now = T0;
        b.iter(|| {
            now = now + STEP;
            let v = br.allow(now);
            br.record(Outcome::Success, now);
            black_box(v)
        });
    });

    g.bench_function("sre_shared_1_thread", |b| {
        let shared = SharedBreaker::new(sre(), 1);
        let mut now = T0;
        b.iter(|| {
            now = now + STEP;
            let v = shared.allow(now);
            shared.record(Outcome::Success, now);
            black_box(v)
        });
    });

    // Each iteration is one allow+record pair on each of the two threads.
    g.throughput(Throughput::Elements(2));
    g.bench_function("sre_shared_2_threads", |b| {
        b.iter_custom(|iters| {
            let shared = SharedBreaker::new(sre(), 1);
            let start = Barrier::new(2);
            std::thread::scope(|s| {
                let a = s.spawn(|| shared_worker(&shared, &start, iters));
                let b = shared_worker(&shared, &start, iters);
                a.join().map_or(b, |a| a.max(b))
            })
        });
    });

    g.finish();
}
