//! Glob matching (`?match=` over the registry, mapping rules at series
//! birth): rollstat's linear-time matcher ("after") against the recursive
//! backtracking matcher it replaced ("before", copied below), in the same
//! run. Throughput is in names.

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use rollstat::mapping::Glob;

/// 100k names shaped like a statsd fleet: 10% `api.route<i>` (one level
/// under `api.`), 10% `api.v1.route<i>.latency`, the rest
/// `svc<i%50>.endpoint<j>.<stat>`.
fn names() -> Vec<String> {
    (0..100_000usize)
        .map(|i| match i % 10 {
            0 => format!("api.route{}", i % 1_000),
            1 => format!("api.v1.route{}.latency", i % 1_000),
            _ => {
                let stat = ["requests", "latency_ms", "errors"][i % 3];
                format!("svc{}.endpoint{}.{stat}", i % 50, (i / 50) % 200)
            }
        })
        .collect()
}

/// The `glob/*` benchmarks.
pub fn benches(c: &mut Criterion) {
    let names = names();
    let mut g = c.benchmark_group("glob/is_match_100k");
    g.throughput(Throughput::Elements(names.len() as u64));
    g.sample_size(20);
    for pattern in ["api.*", "svc1*.**.requests", "**"] {
        let after = Glob::new(pattern).unwrap();
        let before = Before::new(pattern);
        let hits = names.iter().filter(|n| after.is_match(n)).count();
        assert_eq!(hits, names.iter().filter(|n| before.is_match(n)).count());
        count_matching(&mut g, "after", pattern, &names, |n| after.is_match(n));
        count_matching(&mut g, "before", pattern, &names, |n| before.is_match(n));
    }
    g.finish();

    // Mapping rules capture: the same walk plus the greedy capture pass.
    let mut g = c.benchmark_group("glob/matches_100k");
    g.throughput(Throughput::Elements(names.len() as u64));
    g.sample_size(20);
    let pattern = "svc1*.**.requests";
    let after = Glob::new(pattern).unwrap();
    let before = Before::new(pattern);
    let mut caps = Vec::new();
    count_matching(&mut g, "after", pattern, &names, |n| {
        after.matches(n, &mut caps)
    });
    count_matching(&mut g, "before", pattern, &names, |n| {
        before.matches(n, &mut caps)
    });
    g.finish();

    // The backtracking pattern (tests/reference/glob_backtracking.rs) on one name. "dotted" is the backtracking
    // matcher's worst case (the suffix `b` matches, the middle cannot since
    // no `*` crosses the dot); "all_a" is rejected by the suffix check;
    // "matching" (`a…ab`) fills every row of the dynamic programme. The
    // baseline only runs on 24 characters: it tries every way to place the
    // eight `a`s, and at 200 characters it would not finish.
    let mut g = c.benchmark_group("glob/pathological");
    g.throughput(Throughput::Elements(1));
    g.sample_size(10);
    let pattern = "*a*a*a*a*a*a*a*a*b";
    let after = Glob::new(pattern).unwrap();
    let before = Before::new(pattern);
    for len in [24, 200, 65_536] {
        let dotted = format!("{}.b", "a".repeat(len - 2));
        let all_a = "a".repeat(len);
        let matching = format!("{}b", "a".repeat(len - 1));
        g.bench_function(BenchmarkId::new("after/dotted", len), |b| {
            b.iter(|| after.is_match(black_box(&dotted)))
        });
        g.bench_function(BenchmarkId::new("after/all_a", len), |b| {
            b.iter(|| after.is_match(black_box(&all_a)))
        });
        g.bench_function(BenchmarkId::new("after/matching", len), |b| {
            b.iter(|| after.is_match(black_box(&matching)))
        });
        if len == 24 {
            g.bench_function(BenchmarkId::new("before/dotted", len), |b| {
                b.iter(|| before.is_match(black_box(&dotted)))
            });
            g.bench_function(BenchmarkId::new("before/all_a", len), |b| {
                b.iter(|| before.is_match(black_box(&all_a)))
            });
        }
    }
    g.finish();
}

/// Benchmarks `{label}/{pattern}`: counting the `names` that `is_match`
/// accepts, each name passed through `black_box`.
fn count_matching<'a>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    label: &str,
    pattern: &str,
    names: &'a [String],
    mut is_match: impl FnMut(&'a str) -> bool,
) {
    g.bench_function(BenchmarkId::new(label, pattern), |b| {
        b.iter(|| names.iter().filter(|n| is_match(black_box(n))).count())
    });
}

/// The matcher this bench compares against: the old backtracking one, in
/// tests/reference/ (also the property test's model).
#[path = "../tests/reference/glob_backtracking.rs"]
mod reference;

/// The old matcher on one pattern.
struct Before {
    toks: Vec<reference::Tok>,
}

impl Before {
    fn new(pattern: &str) -> Before {
        Before {
            toks: reference::tokens(pattern),
        }
    }

    fn matches<'n>(&self, name: &'n str, caps: &mut Vec<&'n str>) -> bool {
        caps.clear();
        reference::matches(&self.toks, name, caps)
    }

    fn is_match(&self, name: &str) -> bool {
        let mut caps = Vec::new();
        self.matches(name, &mut caps)
    }
}
