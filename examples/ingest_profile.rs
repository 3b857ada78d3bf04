//! A fixed ingest workload for instruction counting (valgrind's callgrind),
//! which stays exact on a busy shared machine where timings do not:
//!
//! ```text
//! cargo build --release --example ingest_profile
//! valgrind --tool=callgrind target/release/examples/ingest_profile ingest 5000
//! valgrind --tool=callgrind target/release/examples/ingest_profile parse 5000
//! ```
//!
//! Builds 10k counter series from one pass of `rollstat-blast` datagrams
//! (~79 lines each), then ingests (or only parses) N more datagrams; or, with
//! `scrape N`, renders /metrics N times through the prometheus crate
//! (gather + TextEncoder); or, with `text N`, writes the series N times with
//! the text writer `/metrics` uses (one thread); `proto N` the same with its
//! protobuf writer. `otlp N` decodes and applies N OTLP requests of the
//! shape `benches/otlp/run.sh` posts (10k streams: 100 metric names x 100
//! `route` values, a fifth of the names gauges, the rest cumulative
//! monotonic sums; 1,000 points a request, each stream once a pass, each
//! sum 1 more a pass), as the OTLP/HTTP listener does after reading the
//! body; only `otlp_round` (decode + apply) is worth counting:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='ingest_profile::otlp_round' \
//!     target/release/examples/ingest_profile otlp 100
//! ```
//!
//! With `ROLLSTAT_PROFILE_CONFIG=config.toml` the workload runs on that
//! file as the daemon would (its windows, mappings, breakers fed by
//! ingest, tag styles, and the daemon's shard count for this machine);
//! `max_series` is raised to fit the names. `ROLLSTAT_PROFILE_STEP_US=100`
//! spaces the datagrams 100 µs apart in simulated time (default 1 µs), so
//! that a run crosses bucket boundaries as the daemon at 800k lines/s does.
//! `ROLLSTAT_PROFILE_KIND=timer` (or any `rollstat-blast --type`) makes the
//! names that type instead of counters (blast's lines: a timer is
//! `name:12.5|ms`). `ROLLSTAT_PROFILE_WORKLOAD=dogstatsd` (or `statsd`)
//! sends `rollstat-blast --profile`'s lines over the names instead
//! (seed 1, 200,000 lines, about one a datagram for DogStatsD's tags).
//! Without `ROLLSTAT_PROFILE_CONFIG`, `Config::default()`
//! and 16 shards. A `[[relay]]` in the file is wired as the daemon wires
//! it, without its sender thread (docs/performance.md).

use std::sync::Arc;

use prost::Message;
use rollstat::config::Config;
use rollstat::ingest::{Ingestor, Worker};
use rollstat::otlp::proto::opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest;
use rollstat::parse::{parse_datagram, Line};
use rollstat::series::{Plan, Registry};
use rollstat::telemetry::Telemetry;
use rollstat::{Clock, ManualClock, Timestamp};
use rollstat_testkit::fixtures::{render_datagrams, Kind};
use rollstat_testkit::profile::{Ledger, Workload};

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "ingest".into());
    let n: usize = std::env::args()
        .nth(2)
        .map_or(5000, |a| a.parse().expect("datagrams"));
    // Optional third argument: counter names (series) to build, 10k if absent.
    let names: usize = std::env::args()
        .nth(3)
        .map_or(10_000, |a| a.parse().expect("names"));
    let file = std::env::var_os("ROLLSTAT_PROFILE_CONFIG");
    let mut cfg = file.as_ref().map_or_else(Config::default, |p| {
        Config::load(std::path::Path::new(p)).expect("config")
    });
    cfg.series.max_series = cfg.series.max_series.max(names + 1000);
    let shards = if file.is_some() {
        // As the daemon sizes its registry (src/daemon/state.rs).
        std::thread::available_parallelism().map_or(8, |n| n.get() * 8)
    } else {
        16
    };
    let registry = Arc::new(Registry::new(Plan::new(cfg.series_settings()), shards));
    let clock = ManualClock::new();
    let services = if file.is_some() {
        rollstat::service::ServiceHandle::new(
            rollstat::service::Services::new(cfg.service_settings(), clock.now(), None)
                .expect("services"),
        )
    } else {
        rollstat::service::ServiceHandle::default()
    };
    let telemetry = Arc::new(Telemetry::new().expect("telemetry"));
    // The config's [[relay]] destinations, without their sender threads:
    // this measures the ingest path's side (the copy into each worker's
    // batch, the hand-off; once a 1 MiB buffer is full, the counted drop).
    let relays = rollstat::relay::Relays::new(&cfg.relays, &telemetry.relay).map(Arc::new);
    let ing = Ingestor::new(
        registry,
        telemetry,
        Arc::new(clock.clone()),
        Arc::new(services),
    )
    .with_parse_options(rollstat::parse::ParseOptions::default().tag_styles(cfg.ingest.tag_styles))
    .with_relays(relays);
    if mode == "otlp" {
        return otlp(Arc::new(ing), &cfg, &clock, n);
    }
    let kind: Kind =
        std::env::var("ROLLSTAT_PROFILE_KIND").map_or(Kind::Counter, |k| k.parse().expect("kind"));
    // ROLLSTAT_PROFILE_WORKLOAD=dogstatsd (or statsd, counters): the
    // `rollstat-blast --profile` lines over `names` contexts, seed 1,
    // 200,000 lines in 1432-byte datagrams.
    let dgrams = match std::env::var("ROLLSTAT_PROFILE_WORKLOAD") {
        Ok(p) => Workload::new(p.parse().expect("profile"), names, 1).datagrams(
            200_000,
            1432,
            &mut Ledger::default(),
        ),
        Err(_) => render_datagrams(names, 0, kind, 80, 1432),
    };
    let mut w = Worker::default();
    for (d, _) in &dgrams {
        ing.ingest(d, clock.now(), &mut w);
    }
    if mode == "text" {
        let threads = std::env::var("RENDER_THREADS").map_or(1, |t| t.parse().expect("threads"));
        let pool = rollstat::expose::text::ChunkPool::new();
        let mut bytes = 0;
        for _ in 0..n {
            bytes += rollstat::expose::text::render(
                &ing.registry,
                clock.now(),
                rollstat::expose::text::Format::Prometheus,
                threads,
                &pool,
            )
            .len();
        }
        println!("mode=text renders={n} bytes={bytes}");
        return;
    }
    if mode == "proto" {
        // The protobuf writer /metrics uses for the series (one thread), as
        // `text` above: docs/performance.md.
        let threads = std::env::var("RENDER_THREADS").map_or(1, |t| t.parse().expect("threads"));
        let pool = rollstat::expose::text::ChunkPool::new();
        let mut bytes = 0;
        for _ in 0..n {
            rollstat::expose::proto::render_each(
                &ing.registry,
                clock.now(),
                rollstat::expose::negotiate::Escaping::Underscores,
                threads,
                &pool,
                |p| bytes += p.len(),
            );
        }
        println!("mode=proto renders={n} bytes={bytes}");
        return;
    }
    if mode == "scrape" {
        ing.telemetry
            .registry
            .register(Box::new(
                rollstat::expose::prometheus::SeriesCollector::new(
                    ing.registry.clone(),
                    Arc::new(clock.clone()),
                    Arc::new(rollstat::service::ServiceHandle::default()),
                ),
            ))
            .expect("collector");
        let mut bytes = 0;
        for _ in 0..n {
            let families = ing.telemetry.registry.gather();
            let mut out = String::new();
            prometheus::TextEncoder::new()
                .encode_utf8(&families, &mut out)
                .expect("encodes");
            bytes += out.len();
        }
        println!("mode=scrape scrapes={n} bytes={bytes}");
        return;
    }
    // Simulated time between datagrams: 1 µs unless ROLLSTAT_PROFILE_STEP_US
    // says (at 800k lines/s one flow sends a datagram every 100 µs; a step
    // that crosses bucket boundaries also counts the rings' rotation).
    let step_ns: u64 = std::env::var("ROLLSTAT_PROFILE_STEP_US")
        .map_or(1, |s| s.parse().expect("step in µs"))
        * 1_000;
    let mut now = clock.now().as_nanos();
    let mut lines = 0u64;
    let mut acc = 0.0;
    for i in 0..n {
        let (d, k) = &dgrams[i % dgrams.len()];
        lines += k;
        now += step_ns;
        if mode == "parse" {
            acc += parse_datagram(d)
                .map(|l| match l {
                    Ok(Line::Sample(s)) => s.values().sum::<f64>(),
                    _ => 0.0,
                })
                .sum::<f64>();
        } else {
            ing.ingest(d, Timestamp::from_nanos(now), &mut w);
        }
    }
    println!("mode={mode} datagrams={n} lines={lines} acc={acc}");
}

/// `otlp N`: N requests, 10 a pass over the streams.
fn otlp(ing: Arc<Ingestor>, cfg: &Config, clock: &ManualClock, n: usize) {
    let otlp = rollstat::ingest::otlp::OtlpIngest::new(ing, cfg.otlp_settings());
    let start = clock.now().as_nanos();
    let (mut accepted, mut rejected) = (0, 0);
    for i in 0..n {
        let body = otlp_request(i % 10, (i / 10) as u64, start).encode_to_vec();
        let out = otlp_round(&otlp, &body, clock.now());
        (accepted, rejected) = (accepted + out.accepted, rejected + out.rejected);
    }
    println!("mode=otlp requests={n} accepted={accepted} rejected={rejected}");
}

/// What the listener does with a body it has read: decode, apply.
#[inline(never)]
fn otlp_round(
    otlp: &rollstat::ingest::otlp::OtlpIngest,
    body: &[u8],
    now: Timestamp,
) -> rollstat::ingest::otlp::Outcome {
    let req = ExportMetricsServiceRequest::decode(body).expect("decodes");
    otlp.apply(&req, now)
}

/// Request `r` (of 10) of pass `pass`: metrics `10 r .. 10 r + 9`, each
/// with 100 points; every fifth metric a gauge.
fn otlp_request(r: usize, pass: u64, start: u64) -> ExportMetricsServiceRequest {
    use rollstat::otlp::proto::opentelemetry::proto::common::v1::{
        any_value::Value, AnyValue, KeyValue,
    };
    use rollstat::otlp::proto::opentelemetry::proto::metrics::v1::{
        metric::Data, number_data_point, Gauge, Metric, NumberDataPoint, ResourceMetrics,
        ScopeMetrics, Sum,
    };
    use rollstat::otlp::proto::opentelemetry::proto::resource::v1::Resource;
    let kv = |k: &str, v: String| KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v)),
        }),
        ..Default::default()
    };
    let metric = |m: usize| {
        let gauge = m % 5 == 0;
        let points = (0..100)
            .map(|a| NumberDataPoint {
                attributes: vec![kv("route", format!("/r{a}"))],
                start_time_unix_nano: start,
                value: Some(if gauge {
                    number_data_point::Value::AsDouble(pass as f64)
                } else {
                    number_data_point::Value::AsInt(pass as i64 + 1)
                }),
                ..Default::default()
            })
            .collect();
        let data = if gauge {
            Data::Gauge(Gauge {
                data_points: points,
            })
        } else {
            Data::Sum(Sum {
                data_points: points,
                aggregation_temporality: 2,
                is_monotonic: true,
            })
        };
        Metric {
            name: format!("blast_otlp_{m}"),
            data: Some(data),
            ..Default::default()
        }
    };
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "rollstat-blast".into())],
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                metrics: (10 * r..10 * r + 10).map(metric).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The daemon's allocator (src/main.rs), so the counts are the daemon's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
