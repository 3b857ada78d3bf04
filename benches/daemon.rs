//! Daemon hot paths measured in-process, without sockets:
//!
//! * `ingest/*`: [`Ingestor::ingest`] of an 80-line counter datagram into a
//!   registry that already holds its 10k series, next to parsing the same
//!   datagrams alone, so the ratio (registry cost per line) is read from one
//!   run;
//! * `render/*`: the series part of a `/metrics` scrape for 10k and 100k
//!   counter series with one 10-bucket window: `text_1t`/`text_2t` is what
//!   the daemon does ([`rollstat::expose::text::render`] on one or two
//!   threads), `crate` the baseline of the same through the prometheus crate
//!   (the series collector in the telemetry registry, `gather`,
//!   `TextEncoder`); sizes and an equality check are printed once per size.
//!
//! Time is passed in (advanced per iteration), as in the window benches.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use rollstat::config::Config;
use rollstat::expose::prometheus::SeriesCollector;
use rollstat::ingest::{Ingestor, Worker};
use rollstat::parse::{parse_datagram, Line};
use rollstat::series::{Plan, Registry};
use rollstat::service::ServiceHandle;
use rollstat::telemetry::Telemetry;
use rollstat::{Clock, ManualClock};
use rollstat_testkit::fixtures::{render_datagrams, Kind};

/// The `ingest/*` and `render/*` benchmarks.
pub fn benches(c: &mut Criterion) {
    ingest(c);
    render(c);
}

/// A registry of the default config (one `10s` window of 10 x 1 s) with room
/// for `series` series, an ingestor over it and the clock it reads.
fn setup(series: usize) -> (Arc<Ingestor>, ManualClock) {
    let mut cfg = Config::default();
    cfg.series.max_series = series + 1000;
    let registry = Arc::new(Registry::new(Plan::new(cfg.series_settings()), 16));
    let telemetry = Arc::new(Telemetry::new().expect("self-metrics register"));
    let clock = ManualClock::new();
    telemetry
        .registry
        .register(Box::new(SeriesCollector::new(
            registry.clone(),
            Arc::new(clock.clone()),
            Arc::new(ServiceHandle::default()),
        )))
        .expect("collector registers");
    let ing = Arc::new(Ingestor::new(
        registry,
        telemetry,
        Arc::new(clock.clone()),
        Arc::new(ServiceHandle::default()),
    ));
    (ing, clock)
}

/// Creates `names` counter series by ingesting one pass of blast datagrams.
fn fill(ing: &Ingestor, clock: &ManualClock, names: usize) -> Vec<(Vec<u8>, u64)> {
    let dgrams = render_datagrams(names, 0, Kind::Counter, 80, 1432);
    let mut w = Worker::default();
    for (d, _) in &dgrams {
        assert!(ing.ingest(d, clock.now(), &mut w).is_none());
    }
    assert_eq!(ing.registry.len(), names);
    dgrams
}

fn ingest(c: &mut Criterion) {
    let (ing, clock) = setup(10_000);
    let dgrams = fill(&ing, &clock, 10_000);
    let lines = dgrams[0].1;
    let mut g = c.benchmark_group("ingest");
    g.throughput(Throughput::Elements(lines));
    // Full datagrams only, so every iteration is `lines` lines.
    let full: Vec<&[u8]> = dgrams
        .iter()
        .filter(|d| d.1 == lines)
        .map(|d| d.0.as_slice())
        .collect();
    g.bench_function("datagram_80_counters_10k_series", |b| {
        let mut w = Worker::default();
        let mut now = clock.now().as_nanos();
        let mut i = 0;
        b.iter(|| {
            // 80 lines per µs: a new bucket every 1e6 datagrams.
            now += 1_000;
            i = (i + 1) % full.len();
            ing.ingest(
                black_box(full[i]),
                rollstat::Timestamp::from_nanos(now),
                &mut w,
            )
        });
    });
    g.bench_function("parse_only_same_datagrams", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % full.len();
            parse_datagram(black_box(full[i]))
                .map(|l| match l {
                    Ok(Line::Sample(s)) => s.values().sum::<f64>() + s.name.len() as f64,
                    _ => 0.0,
                })
                .sum::<f64>()
        });
    });
    g.finish();
}

fn scrape(ing: &Ingestor) -> String {
    let families = ing.telemetry.registry.gather();
    let mut out = String::new();
    prometheus::TextEncoder::new()
        .encode_utf8(&families, &mut out)
        .expect("encodes");
    out
}

fn render(c: &mut Criterion) {
    use rollstat::expose::text::{self, Format};
    let mut g = c.benchmark_group("render");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    for (label, n) in [("10k", 10_000), ("100k", 100_000)] {
        let (ing, clock) = setup(n);
        fill(&ing, &clock, n);
        clock.advance(Duration::from_millis(1500));
        let body = scrape(&ing);
        let pool = text::ChunkPool::new();
        let written = text::render(&ing.registry, clock.now(), Format::Prometheus, 2, &pool);
        let written = String::from_utf8(written.concat()).expect("utf-8");
        eprintln!(
            "render/{label}: crate {} bytes, {} lines ({:.0} bytes per series); text writer {} bytes, same samples as the crate: {}",
            body.len(),
            body.lines().count(),
            body.len() as f64 / n as f64,
            written.len(),
            same_samples(&series_text(&ing, &clock), &written),
        );
        g.throughput(Throughput::Elements(n as u64));
        // Baseline: the whole exposition through the prometheus crate (the
        // series collector in the telemetry registry, gather, TextEncoder).
        g.bench_function(format!("crate/{label}"), |b| {
            b.iter(|| black_box(scrape(&ing).len()))
        });
        // What /metrics does for the series: the text writer, on one thread
        // and split across two.
        for threads in [1, 2] {
            g.bench_function(format!("text_{threads}t/{label}"), |b| {
                b.iter(|| {
                    black_box(
                        text::render(
                            &ing.registry,
                            clock.now(),
                            Format::Prometheus,
                            threads,
                            &pool,
                        )
                        .len(),
                    )
                })
            });
        }
    }
    g.finish();
}

/// The series families alone through the crate (collect_series + TextEncoder,
/// no gather), to compare the text writer's output with.
fn series_text(ing: &Ingestor, clock: &ManualClock) -> String {
    let families = rollstat::expose::prometheus::collect_series(&ing.registry, clock.now());
    let mut out = String::new();
    prometheus::TextEncoder::new()
        .encode_utf8(&families, &mut out)
        .expect("encodes");
    out
}

/// Whether two expositions hold the same lines (the text writer does not
/// sort series within a family; the crate does).
fn same_samples(a: &str, b: &str) -> bool {
    let mut a: Vec<&str> = a.lines().collect();
    let mut b: Vec<&str> = b.lines().collect();
    a.sort_unstable();
    b.sort_unstable();
    a == b
}
