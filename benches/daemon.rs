//! Daemon hot paths measured in-process, without sockets:
//!
//! * `ingest/*`: [`Ingestor::ingest`] of an 80-line counter datagram into a
//!   registry that already holds its 10k series, next to parsing the same
//!   datagrams alone, so the ratio (registry cost per line) is read from one
//!   run;
//! * `render/*`: a whole `/metrics` scrape through the prometheus crate
//!   (the series collector registered in the telemetry registry, `gather`,
//!   `TextEncoder`) for 10k and 100k counter series with one 10-bucket
//!   window; the body size is printed once per size.
//!
//! Time is passed in (advanced per iteration), as in the window benches.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use rollstat::blast::{render_datagrams, Kind};
use rollstat::config::Config;
use rollstat::expose::prometheus::SeriesCollector;
use rollstat::ingest::{Ingestor, Worker};
use rollstat::parse::{parse_datagram, Line};
use rollstat::series::{Plan, Registry};
use rollstat::service::ServiceHandle;
use rollstat::telemetry::Telemetry;
use rollstat::{Clock, ManualClock};

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
    let registry = Arc::new(Registry::new(Plan::from_config(&cfg), 16));
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
    let mut g = c.benchmark_group("render");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    for (label, n) in [("10k", 10_000), ("100k", 100_000)] {
        let (ing, clock) = setup(n);
        fill(&ing, &clock, n);
        clock.advance(Duration::from_millis(1500));
        let body = scrape(&ing);
        eprintln!(
            "render/metrics_text/{label}: {} bytes, {} lines ({:.0} bytes per series)",
            body.len(),
            body.lines().count(),
            body.len() as f64 / n as f64
        );
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("metrics_text/{label}"), |b| {
            b.iter(|| black_box(scrape(&ing).len()))
        });
        let reference = series_text(&ing, &clock);
        let sketch = direct_text_sketch(&ing.registry, clock.now());
        eprintln!(
            "render/direct_text_sketch/{label}: {} bytes, identical to the crate's series text: {}",
            sketch.len(),
            sketch == reference
        );
        g.bench_function(format!("direct_text_sketch/{label}"), |b| {
            b.iter(|| black_box(direct_text_sketch(&ing.registry, clock.now()).len()))
        });
        g.bench_function(format!("collect_only/{label}"), |b| {
            b.iter(|| {
                black_box(rollstat::expose::prometheus::collect_series(
                    &ing.registry,
                    clock.now(),
                ))
            })
        });
    }
    g.finish();
}

/// The series families alone through the crate (collect_series + TextEncoder,
/// no gather), to check the sketch against.
fn series_text(ing: &Ingestor, clock: &ManualClock) -> String {
    let families = rollstat::expose::prometheus::collect_series(&ing.registry, clock.now());
    let mut out = String::new();
    prometheus::TextEncoder::new()
        .encode_utf8(&families, &mut out)
        .expect("encodes");
    out
}

/// NOT the exposition: a sketch measuring what writing the same text
/// directly (no proto structs, no per-metric allocation) would cost, for
/// counter series only (windowed samples/sum/rate/avg/min/max and
/// `<name>_total`). The startup check prints whether its bytes equal the
/// crate's output for the same registry.
fn direct_text_sketch(registry: &Registry, now: rollstat::Timestamp) -> String {
    use rollstat::series::{SeriesMeta, WindowView};
    use std::fmt::Write as _;
    const FAMILIES: [(&str, &str); 6] = [
        ("rollstat_window_samples", "Samples in the window, weighted by 1/sample_rate (go-zero Count)."),
        ("rollstat_window_sum_value", "Sum of values in the window, weighted by 1/sample_rate (go-zero Sum)."),
        ("rollstat_window_rate", "Per second over the time the window's buckets cover: increments for counters, samples for other types."),
        ("rollstat_window_avg", "Average value in the window (sum / samples)."),
        ("rollstat_window_min", "Smallest value in the window."),
        ("rollstat_window_max", "Largest value in the window."),
    ];
    fn esc(out: &mut String, v: &str) {
        if v.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
            for c in v.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
        } else {
            out.push_str(v);
        }
    }
    let plan = registry.plan();
    let mut series: Vec<(Arc<SeriesMeta>, Vec<WindowView>, f64)> =
        Vec::with_capacity(registry.len());
    registry.visit(|meta, state| {
        let views = (0..meta.windows.len())
            .map(|i| state.window_view(i, now, &plan.quantiles))
            .collect();
        let total = match state {
            rollstat::series::SeriesState::Counter { total, .. } => *total,
            _ => 0.0,
        };
        series.push((meta.clone(), views, total));
    });
    series.sort_unstable_by(|(a, ..), (b, ..)| {
        a.labels
            .len()
            .cmp(&b.labels.len())
            .then_with(|| a.metric.cmp(&b.metric))
            .then_with(|| {
                a.labels
                    .iter()
                    .map(|l| &l.1)
                    .cmp(b.labels.iter().map(|l| &l.1))
            })
    });
    let mut out = String::with_capacity(series.len() * 560);
    for (f, (name, help)) in FAMILIES.iter().enumerate() {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n");
        for (meta, views, _) in &series {
            for (wname, v) in meta.windows.iter().zip(views) {
                let value = match f {
                    0 => Some(v.samples),
                    1 => Some(v.sum),
                    2 => Some(v.rate),
                    3 => v.avg,
                    4 => v.min,
                    _ => v.max,
                };
                let Some(x) = value.filter(|x| x.is_finite()) else {
                    continue;
                };
                out.push_str(name);
                out.push_str("{metric=\"");
                esc(&mut out, &meta.metric);
                out.push_str("\",window=\"");
                esc(&mut out, wname);
                out.push('"');
                for (k, v) in &meta.labels {
                    let _ = write!(out, ",{k}=\"");
                    esc(&mut out, v);
                    out.push('"');
                }
                let _ = writeln!(out, "}} {x}");
            }
        }
    }
    let mut by_name: Vec<&(Arc<SeriesMeta>, Vec<WindowView>, f64)> = series.iter().collect();
    by_name.sort_by(|a, b| a.0.prom_name.cmp(&b.0.prom_name));
    for (meta, _, total) in by_name {
        let n = &meta.prom_name;
        let _ = write!(
            out,
            "# HELP {n}_total statsd counter {} (sum of increments, weighted by 1/sample_rate).\n# TYPE {n}_total counter\n{n}_total",
            meta.metric
        );
        if !meta.labels.is_empty() {
            out.push('{');
            for (i, (k, v)) in meta.labels.iter().enumerate() {
                let _ = write!(out, "{}{k}=\"", if i == 0 { "" } else { "," });
                esc(&mut out, v);
                out.push('"');
            }
            out.push('}');
        }
        let _ = writeln!(out, " {total}");
    }
    out
}
