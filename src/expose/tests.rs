//! Golden bytes of `/metrics`: what each writer produces for a registry
//! built in-process (no sockets) from a fixed set of statsd lines, under a
//! [`ManualClock`], compared with the files in `src/expose/golden/`.
//!
//! The lines cover every statsd type and the names and tags a writer must
//! escape (quotes, backslashes, unicode, bare tags, names that share a
//! family once sanitised). Three writers are pinned:
//!
//! * the text writer ([`text::render`]), both formats. Series within a
//!   family come in registry order, which follows a per-process random hash,
//!   so the multi-series file compares each family's header lines and
//!   family order exactly and its sample lines as a sorted set; each series
//!   of the corpus is also rendered alone, where every byte is fixed;
//! * the crate-model collector ([`SeriesCollector::collect_at`], which sorts)
//!   through the crate's `TextEncoder` and [`openmetrics::encode`], as the
//!   head of a scrape is written: every byte;
//! * [`openmetrics::encode`] over hand-built families holding what no statsd
//!   line can carry (a newline in a label value and in a HELP text,
//!   non-finite values, a summary).
//!
//! `ROLLSTAT_BLESS=1 cargo test --lib expose::tests` rewrites the files
//! (then read the diff before committing it).

use std::sync::Arc;
use std::time::Duration;

use prometheus::proto::{Bucket, Histogram, Metric, MetricFamily, MetricType, Quantile, Summary};

use super::families::{counter, family, gauge, pair};
use super::openmetrics;
use super::prometheus::{collect_series, SeriesCollector};
use super::text::{self, ChunkPool, Format};
use crate::clock::{Clock, ManualClock};
use crate::config::Config;
use crate::parse::{parse_datagram, Line};
use crate::series::{KeyBuf, Plan, Registry};
use crate::service::{ServiceHandle, Services};
use crate::Timestamp;

pub(super) const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

/// Two windows (one with `ignore_current`), quantiles, histogram buckets, a
/// mapping with a label, a breaker and a limit.
pub(super) const CONFIG: &str = r#"
[series]
quantiles = [0.5, 0.99]
histogram_buckets = [0.01, 0.1, 1.0]
native_histogram_bucket_factor = 1.1
native_histogram_max_buckets = 160
[[windows]]
name = "10s"
buckets = 10
interval_ms = 1000
[[windows]]
name = "3s"
buckets = 3
interval_ms = 1000
ignore_current = true
[[mappings]]
match = "api.*.latency"
rename = "api.latency"
labels = { endpoint = "$1" }
[[breakers]]
name = "checkout"
kind = "error_rate"
requests_metric = "checkout.requests"
failures_metric = "checkout.failures"
min_calls = 2
failure_rate_threshold = 0.5
open_duration_ms = 5000
half_open_trials = 3
half_open_max_wait_ms = 30000
[[limits]]
name = "api"
algorithm = "exact"
rules = [{ max = 100, window_ms = 1000 }]
"#;

/// Every statsd type and every kind of name and tag a writer escapes.
/// Each entry is one datagram (one series, some of several lines).
pub(super) const CORPUS: &[&str] = &[
    "hits:1|c\nhits:2|c",
    "hits:3|c|@0.5|#route:/x,code:200",
    "hits:2|c|#route:/y\\z,code:500",
    "hits:5|c|#quote:a\"b,both:\\\"",
    "hits:1|c|#bare",
    "temp:21.5|g|#room:lab\ntemp:+1|g|#room:lab",
    "temp:-3|g",
    "api.users.latency:12|ms|#region:eu\napi.users.latency:250|ms|#region:eu\napi.users.latency:1500|ms|#region:eu",
    "size:100|h\nsize:5000|h|@0.1",
    "neg.t:-5|ms\nneg.t:7|ms",
    "req.bytes:1:2:3|d|#svc:a",
    "spread:1:2:3:4:5:6:7:8:9:10:20:40:80:160:320|d",
    "users:alice|s\nusers:bob|s",
    "users:alice|s|#tier:gold",
    "a.b:1|c",
    "a_b:2|c|#k:v",
    "a-b:1|c|#x:y",
    "caf\u{e9}.\u{fc}n\u{ef}:1.5|c|#citt\u{e0}:Z\u{fc}rich,emoji:\u{1f680}",
    "say\"hi\":1|c|#v:\"quoted\"",
    "back\\slash:4|g|#path:C:\\dir\\",
    "cpu,host=a,dc=x:1|c",
    "neg:-1.25|c",
    "tiny:0.000001|g",
    "big:12345678901234567890|g",
    "checkout.requests:1|c",
    "checkout.failures:1|c",
];

/// A registry holding `datagrams`, each applied 300 ms after the previous
/// one from [`T0`], and the clock standing 6.5 s after [`T0`].
pub(super) fn registry(datagrams: &[&str]) -> (Registry, ManualClock) {
    let cfg = Config::parse(CONFIG).unwrap();
    let r = Registry::new(Plan::new(cfg.series_settings()), 4);
    let clock = ManualClock::starting_at(T0);
    let mut key = KeyBuf::default();
    for d in datagrams {
        for l in parse_datagram(d.as_bytes()) {
            let Ok(Line::Sample(s)) = l else {
                panic!("{d:?} does not parse: {l:?}")
            };
            r.ingest(&s, clock.now(), &mut key)
                .unwrap_or_else(|e| panic!("{d:?} refused: {e:?}"));
        }
        clock.advance(Duration::from_millis(300));
    }
    clock.set(T0 + Duration::from_millis(6500));
    (r, clock)
}

fn render(r: &Registry, now: Timestamp, format: Format) -> String {
    let pool = ChunkPool::new();
    String::from_utf8(text::render(r, now, format, 1, &pool).concat()).unwrap()
}

/// Each family's header lines as they are and its samples sorted, families
/// in the order written.
fn sorted_within_families(text: &str) -> String {
    let mut out = String::new();
    let mut samples: Vec<&str> = Vec::new();
    let flush = |out: &mut String, samples: &mut Vec<&str>| {
        samples.sort_unstable();
        for s in samples.drain(..) {
            out.push_str(s);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut out, &mut samples);
            out.push_str(line);
            out.push('\n');
        } else {
            samples.push(line);
        }
    }
    flush(&mut out, &mut samples);
    out
}

/// Compares `got` with the golden file `name` (or writes it when blessing).
fn golden(name: &str, got: &str) {
    let path = format!("{}/src/expose/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("ROLLSTAT_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    if got != want {
        let first = got
            .lines()
            .zip(want.lines())
            .position(|(g, w)| g != w)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "{name} differs from the golden file, first at line {}:\n got: {:?}\nwant: {:?}",
            first + 1,
            got.lines().nth(first),
            want.lines().nth(first)
        );
    }
}

#[test]
fn the_text_writer_writes_the_golden_families_in_both_formats() {
    let (r, clock) = registry(CORPUS);
    let now = clock.now();
    golden(
        "series.prom",
        &sorted_within_families(&render(&r, now, Format::Prometheus)),
    );
    golden(
        "series.om",
        &sorted_within_families(&render(&r, now, Format::OpenMetrics)),
    );
}

#[test]
fn the_text_writer_writes_the_golden_bytes_of_each_series_alone() {
    for format in [Format::Prometheus, Format::OpenMetrics] {
        let mut all = String::new();
        for d in CORPUS {
            let (r, clock) = registry(&[d]);
            all.push_str(&format!("## {d:?}\n"));
            all.push_str(&render(&r, clock.now(), format));
        }
        let name = match format {
            Format::Prometheus => "alone.prom",
            Format::OpenMetrics => "alone.om",
        };
        golden(name, &all);
    }
}

#[test]
fn the_crate_model_writes_the_bytes_of_the_text_writer_for_each_series_alone() {
    for d in CORPUS {
        let (r, clock) = registry(&[d]);
        let families = collect_series(&r, clock.now());
        let mut plain = String::new();
        prometheus::TextEncoder::new()
            .encode_utf8(&families, &mut plain)
            .unwrap();
        let mut open = String::new();
        openmetrics::encode_families(&families, &mut open).unwrap();
        // Text 0.0.4 puts HELP before TYPE, as the crate does; the crate's
        // model has no `_created`.
        let text = render(&r, clock.now(), Format::Prometheus);
        assert_eq!(plain, text, "{d:?}");
        let om: String = render(&r, clock.now(), Format::OpenMetrics)
            .lines()
            .filter(|l| !l.contains("_created"))
            .flat_map(|l| [l, "\n"])
            .collect();
        // The crate's model cannot say that a histogram saw a negative
        // value (OpenMetrics then leaves out `_sum` and `_count`).
        if !d.starts_with("neg.t:") {
            assert_eq!(open, om, "{d:?}");
        }
    }
}

#[test]
fn the_crate_model_collector_writes_the_golden_bytes_in_both_formats() {
    // Its own sketch budget: the bytes the golden file holds are this
    // test's, not those of tests running beside it.
    crate::sketch::budget::scoped(None, collector_golden_bytes);
}

fn collector_golden_bytes() {
    let (r, clock) = registry(CORPUS);
    let cfg = Config::parse(CONFIG).unwrap();
    let services = Services::new(cfg.service_settings(), T0, None).unwrap();
    let collector = SeriesCollector::new(
        Arc::new(r),
        Arc::new(clock.clone()),
        Arc::new(ServiceHandle::new(services)),
    );
    let families = collector.collect_at(clock.now());
    let mut plain = String::new();
    prometheus::TextEncoder::new()
        .encode_utf8(&families, &mut plain)
        .unwrap();
    golden("collector.prom", &sorted_within_families(&plain));
    let mut open = String::new();
    openmetrics::encode(&families, &mut open).unwrap();
    golden("collector.om", &sorted_within_families(&open));
    // The daemon's head: everything but the series.
    let families = collector.without_series().collect_at(clock.now());
    let mut head = String::new();
    openmetrics::encode_families(&families, &mut head).unwrap();
    assert!(open.ends_with(&format!("{head}# EOF\n")), "{head}");
}

/// What the crate model can hold and no statsd line can: newlines, every
/// metric type, non-finite values.
fn hostile_families() -> Vec<MetricFamily> {
    let counter = counter(vec![pair("v", "a\nb\"c\\d")], 3.0);
    let gauges = [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.0, 1e21, 0.1]
        .iter()
        .enumerate()
        .map(|(i, v)| gauge(vec![pair("i", &i.to_string())], *v))
        .collect();
    let mut h = Histogram::default();
    h.set_bucket(
        [(0.5, 1), (f64::INFINITY, 2)]
            .iter()
            .map(|(ub, n)| {
                let mut b = Bucket::default();
                b.set_upper_bound(*ub);
                b.set_cumulative_count(*n);
                b
            })
            .collect(),
    );
    h.set_sample_count(2);
    h.set_sample_sum(1.5);
    let mut histogram = Metric::default();
    histogram.set_histogram(h);
    let mut s = Summary::default();
    let mut q = Quantile::default();
    q.set_quantile(0.5);
    q.set_value(2.0);
    s.set_quantile(vec![q]);
    s.set_sample_count(4);
    s.set_sample_sum(8.0);
    let mut summary = Metric::default();
    summary.set_summary(s);
    summary.set_label(vec![pair("s", "\u{1f680}")]);
    vec![
        family(
            "odd_total",
            "Help with a \"quote\", a \\ and a\nnewline.",
            MetricType::COUNTER,
            vec![counter],
        ),
        family("odd_gauge", "Values.", MetricType::GAUGE, gauges),
        family("odd_hist", "", MetricType::HISTOGRAM, vec![histogram]),
        family("odd_summary", "S.", MetricType::SUMMARY, vec![summary]),
    ]
}

#[test]
fn openmetrics_encodes_the_golden_bytes_of_what_no_statsd_line_can_carry() {
    let mut out = String::new();
    openmetrics::encode(&hostile_families(), &mut out).unwrap();
    golden("hostile.om", &out);
}
