//! Window, statistics and clock benchmarks. Time is passed in (a counter
//! advanced per iteration), so these measure the algorithm, not the OS clock;
//! the system clock has its own group.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use rollstat::sketch::hash_member;
use rollstat::stats::WindowStats;
use rollstat::window::bucket::{Distinct, Distribution, Observation, SumCount, Summary};
use rollstat::window::{RollingWindow, SharedWindow, WindowSpec};
use rollstat::{Clock, ManualClock, SystemClock, Timestamp};

const T0: u64 = 1_767_225_600_000_000_000;

fn spec(size: usize) -> WindowSpec {
    WindowSpec::new(size, Duration::from_millis(100)).unwrap()
}

pub fn benches(c: &mut Criterion) {
    window_add(c);
    window_reduce(c);
    window_add_shared(c);
    stats(c);
    clock(c);
}

fn window_add(c: &mut Criterion) {
    let mut g = c.benchmark_group("window/add");
    g.throughput(Throughput::Elements(1));
    // 1 µs between adds: a new bucket every 100k adds, as at 1M samples/s.
    g.bench_function("sum_count", |b| {
        let mut w = RollingWindow::<SumCount>::new(spec(10), Timestamp::from_nanos(T0));
        let mut now = T0;
        b.iter(|| {
            now += 1_000;
            w.add(black_box(1.0), Timestamp::from_nanos(now));
        });
        black_box(w.reduce(Timestamp::from_nanos(now)));
    });
    // Every add crosses into a new bucket: the slow path (one division, one reset).
    g.bench_function("sum_count_new_bucket_each_add", |b| {
        let mut w = RollingWindow::<SumCount>::new(spec(10), Timestamp::from_nanos(T0));
        let mut now = T0;
        b.iter(|| {
            now += 100_000_000;
            w.add(black_box(1.0), Timestamp::from_nanos(now));
        });
    });
    g.bench_function("summary_weighted", |b| {
        let mut w = RollingWindow::<Summary>::new(spec(10), Timestamp::from_nanos(T0));
        let mut now = T0;
        b.iter(|| {
            now += 1_000;
            w.add(
                black_box(Observation::sampled(3.5, 0.5)),
                Timestamp::from_nanos(now),
            );
        });
    });
    g.bench_function("distribution_sketch", |b| {
        let mut w = RollingWindow::<Distribution>::new(spec(10), Timestamp::from_nanos(T0));
        let mut now = T0;
        let mut v = 1.0f64;
        b.iter(|| {
            now += 1_000;
            v = if v > 1e6 { 1.0 } else { v * 1.37 };
            w.add(Observation::new(black_box(v)), Timestamp::from_nanos(now));
        });
    });
    g.bench_function("set_member", |b| {
        let mut w = RollingWindow::<Distinct>::new(spec(10), Timestamp::from_nanos(T0));
        let mut now = T0;
        let mut i = 0u64;
        b.iter(|| {
            now += 1_000;
            i = (i + 1) % 500;
            w.add(hash_member(&i.to_le_bytes()), Timestamp::from_nanos(now));
        });
    });
    g.finish();
}

fn window_reduce(c: &mut Criterion) {
    let mut g = c.benchmark_group("window/reduce");
    for size in [10usize, 40, 1000] {
        let mut w = RollingWindow::<SumCount>::new(spec(size), Timestamp::from_nanos(T0));
        // Fill every bucket, end inside the last one (span 0).
        for i in 0..size as u64 {
            w.add(1.0, Timestamp::from_nanos(T0 + i * 100_000_000));
        }
        let now = Timestamp::from_nanos(T0 + (size as u64 - 1) * 100_000_000 + 50_000_000);
        g.bench_with_input(BenchmarkId::new("sum_count", size), &now, |b, &now| {
            b.iter(|| black_box(black_box(&w).reduce(black_box(now))));
        });
    }
    g.finish();
}

/// Two threads adding to one `SharedWindow`, against one thread adding the
/// same total to it, and against the unshared window. Reports time per add.
fn window_add_shared(c: &mut Criterion) {
    let mut g = c.benchmark_group("window/add_shared");
    g.throughput(Throughput::Elements(1));
    for threads in [1usize, 2] {
        g.bench_function(BenchmarkId::new("threads", threads), |b| {
            b.iter_custom(|iters| {
                let w = SharedWindow::new(RollingWindow::<SumCount>::new(
                    spec(10),
                    Timestamp::from_nanos(T0),
                ));
                let per_thread = iters / threads as u64 + 1;
                let barrier = Barrier::new(threads);
                let start = std::thread::scope(|s| {
                    let handles: Vec<_> = (0..threads)
                        .map(|_| {
                            #[allow(clippy::disallowed_methods)] // timing the bench itself
                            s.spawn(|| {
                                barrier.wait();
                                let t = Instant::now();
                                let mut now = T0;
                                for _ in 0..per_thread {
                                    now += 1_000;
                                    w.add(1.0, Timestamp::from_nanos(now));
                                }
                                t.elapsed()
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().unwrap())
                        .max()
                        .unwrap()
                });
                // Wall time for `iters` adds spread over the threads.
                start.mul_f64(iters as f64 / (per_thread * threads as u64) as f64)
            });
        });
    }
    g.finish();
}

fn stats(c: &mut Criterion) {
    let mut g = c.benchmark_group("stats");
    let now_end = T0 + 950_000_000;
    let mut sc = RollingWindow::<SumCount>::new(spec(10), Timestamp::from_nanos(T0));
    let mut dist = RollingWindow::<Distribution>::new(spec(10), Timestamp::from_nanos(T0));
    let mut set = RollingWindow::<Distinct>::new(spec(10), Timestamp::from_nanos(T0));
    for i in 0..10_000u64 {
        let t = Timestamp::from_nanos(T0 + i * 95_000);
        sc.add(i as f64, t);
        dist.add(Observation::new((i % 1000) as f64 + 0.5), t);
        set.add(hash_member(&(i % 300).to_le_bytes()), t);
    }
    let now = Timestamp::from_nanos(now_end);
    g.bench_function("sum_count_rate_avg", |b| {
        b.iter(|| {
            let s = WindowStats::of(black_box(&sc), now);
            black_box((s.rate(), s.sum_rate(), s.avg()))
        });
    });
    g.bench_function("distribution_p50_p90_p99_min_max", |b| {
        b.iter(|| {
            let s = WindowStats::of(black_box(&dist), now);
            black_box((
                s.quantile(0.5),
                s.quantile(0.9),
                s.quantile(0.99),
                s.min(),
                s.max(),
            ))
        });
    });
    g.bench_function("set_distinct_300", |b| {
        b.iter(|| black_box(WindowStats::distinct(black_box(&set), now)));
    });
    g.bench_function("new_bucket_reset_distribution", |b| {
        b.iter_batched(
            || dist.clone(),
            |mut w| {
                w.add(
                    Observation::new(1.0),
                    Timestamp::from_nanos(now_end + 100_000_000),
                );
                w
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

fn clock(c: &mut Criterion) {
    let mut g = c.benchmark_group("clock");
    let sys = SystemClock::new();
    g.bench_function("system_now", |b| b.iter(|| black_box(sys.now())));
    let manual = ManualClock::new();
    g.bench_function("manual_now", |b| b.iter(|| black_box(manual.now())));
    g.bench_function("std_instant_now", |b| {
        #[allow(clippy::disallowed_methods)]
        b.iter(|| black_box(Instant::now()))
    });
    g.finish();
}
