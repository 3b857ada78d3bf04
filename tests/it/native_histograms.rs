//! Native histograms as a real Prometheus reads them. The
//! daemon runs the shipped `config.toml` (listeners on port 0, one mapping
//! rule added that turns native histograms off for `nh.classic`); a
//! Prometheus 2.42 started with `--enable-feature=native-histograms` asks
//! for protobuf first and stores the native histograms of a timer and a
//! `|h` histogram, whose `histogram_count`, `histogram_sum` and
//! `histogram_quantile` must agree with the values sent. Prometheus 2.42
//! drops the classic buckets of a histogram that also has native buckets
//! (`scrape_classic_histograms` came in 2.45), so a second, plain
//! Prometheus (OpenMetrics text) checks the classic buckets of the same
//! series, and the protobuf body itself must carry both in one `Histogram`
//! message.

use std::net::UdpSocket;
use std::time::Duration;

use rollstat::expose::proto::metrics::{Histogram, MetricFamily, MetricType};

use crate::support::{
    decode_families, sample_config_on_port_0, wait_until, Daemon, Prometheus, PROTO_ACCEPT,
};

/// `[series] native_histogram_bucket_factor = 1.1` gives schema 3: each
/// bucket's upper bound is 2^(1/8) = 1.0905 times its lower bound, the most
/// a quantile read from it can be off, relatively.
const SCHEMA_3_RELATIVE_ERROR: f64 = 0.0905;

/// The shipped config on port 0, with a rule before the others giving
/// `nh.classic` a bucket factor of 0: no native histogram for it.
fn config() -> String {
    let base = sample_config_on_port_0();
    let anchor = "[[mappings]]\nmatch = \"debug.**\"";
    assert!(
        base.contains(anchor),
        "config.toml's first mapping rule changed; update native_histograms::config"
    );
    assert!(
        base.contains("native_histogram_bucket_factor = 1.1\n"),
        "config.toml no longer ships bucket factor 1.1 (schema 3), which this test assumes"
    );
    let rule = "[[mappings]]\nmatch = \"nh.classic\"\nnative_histogram_bucket_factor = 0\n\n";
    base.replacen(anchor, &format!("{rule}{anchor}"), 1)
}

/// Sends `lines` over UDP, 50 to a datagram.
fn send_lines(d: &Daemon, lines: &[String]) {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
    for chunk in lines.chunks(50) {
        let dgram: String = chunk.iter().map(|l| format!("{l}\n")).collect();
        s.send_to(dgram.as_bytes(), d.udp).expect("send udp");
    }
}

/// Waits (20 s at most) until the instant query `promql` gives one value
/// that `ok` accepts, and returns it.
fn query_one(prom: &Prometheus, promql: &str, ok: impl Fn(f64) -> bool) -> f64 {
    wait_until(Duration::from_secs(20), promql, || {
        match prom.query(promql)?.as_slice() {
            [x] if ok(*x) => Ok(*x),
            other => Err(format!("got {other:?}")),
        }
    })
}

/// Fails unless `got` is within schema 3's relative error of `want`.
#[track_caller]
fn assert_within_schema_3(got: f64, want: f64, what: &str) {
    let rel = (got - want).abs() / want;
    assert!(
        rel <= SCHEMA_3_RELATIVE_ERROR,
        "{what}: got {got}, want {want} within {SCHEMA_3_RELATIVE_ERROR} relative (off by {rel:.4})"
    );
}

/// The one `Histogram` of family `name`.
fn histogram<'a>(families: &'a [MetricFamily], name: &str) -> &'a Histogram {
    let f = families
        .iter()
        .find(|f| f.name() == name)
        .unwrap_or_else(|| panic!("no family {name} in the protobuf body"));
    assert_eq!(f.r#type(), MetricType::Histogram, "{name}'s type");
    match f.metric.as_slice() {
        [m] => m.histogram.as_ref().expect("a Histogram message"),
        other => panic!("{name}: {} metrics, want 1", other.len()),
    }
}

/// The absolute counts of a native histogram's positive buckets, by bucket
/// index (spans' offsets and lengths applied to the running sum of deltas).
fn positive_buckets(h: &Histogram) -> Vec<(i32, i64)> {
    let mut out = Vec::new();
    let mut deltas = h.positive_delta.iter();
    let (mut index, mut count) = (0i32, 0i64);
    for span in &h.positive_span {
        // The first span's offset is its first index; a later one's is
        // the gap after the previous span (`index` is one past its end).
        index += span.offset();
        for _ in 0..span.length() {
            count += deltas.next().expect("fewer deltas than the spans' lengths");
            out.push((index, count));
            index += 1;
        }
    }
    assert!(
        deltas.next().is_none(),
        "more deltas than the spans' lengths"
    );
    out
}

/// Values `v` of `values` in schema 3's bucket `index`: 2^((index-1)/8) <
/// v <= 2^(index/8).
fn in_bucket(values: &[f64], index: i32) -> i64 {
    let upper = 2f64.powf(f64::from(index) / 8.0);
    let lower = 2f64.powf(f64::from(index - 1) / 8.0);
    values
        .iter()
        .filter(|v| **v > lower && **v <= upper)
        .count() as i64
}

#[test]
fn prometheus_with_native_histograms_reads_timers_and_histograms_over_protobuf() {
    let d = Daemon::start_with(&config());

    // 1..=1000 ms, 1..=200 as `|h`, 1..=100 ms under the rule without
    // native histograms, a counter and a gauge.
    let mut lines: Vec<String> = (1..=1000).map(|v| format!("nh.lat:{v}|ms")).collect();
    lines.extend((1..=200).map(|v| format!("nh.size:{v}|h")));
    lines.extend((1..=100).map(|v| format!("nh.classic:{v}|ms")));
    lines.push("nh.count:5|c".into());
    lines.push("nh.gauge:7|g".into());
    send_lines(&d, &lines);
    d.wait_lines("udp", lines.len() as f64, Duration::from_secs(20));

    // The protobuf body as the daemon serves it.
    let r = d.get("/metrics", &[("Accept", PROTO_ACCEPT)]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("content-type"),
        Some(
            "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; \
             encoding=delimited; escaping=underscores"
        )
    );
    let families = decode_families(&r.body);

    // nh_lat: classic buckets and native spans in the same message.
    let lat = histogram(&families, "nh_lat");
    assert_eq!(lat.sample_count(), 1000);
    assert!(
        (lat.sample_sum() - 500.5).abs() <= 1e-9,
        "nh_lat sum {}",
        lat.sample_sum()
    );
    // Timers are in seconds: v ms falls in `le` when v <= le * 1000.
    let classic: Vec<(f64, u64)> = lat
        .bucket
        .iter()
        .map(|b| (b.upper_bound(), b.cumulative_count()))
        .collect();
    let want: Vec<(f64, u64)> = [
        (0.005, 5),
        (0.01, 10),
        (0.025, 25),
        (0.05, 50),
        (0.1, 100),
        (0.25, 250),
        (0.5, 500),
        (1.0, 1000),
        (2.5, 1000),
        (5.0, 1000),
        (10.0, 1000),
    ]
    .to_vec();
    assert_eq!(classic, want, "nh_lat's classic buckets");
    assert_eq!(lat.schema, Some(3), "nh_lat's native schema (factor 1.1)");
    assert!(
        lat.zero_threshold.is_some(),
        "nh_lat: no zero threshold: {lat:?}"
    );
    assert_eq!(lat.zero_count(), 0, "nh_lat: nothing sent is zero");
    assert!(lat.negative_span.is_empty() && lat.negative_delta.is_empty());
    let buckets = positive_buckets(lat);
    let total: i64 = buckets.iter().map(|(_, c)| c).sum();
    assert_eq!(total, 1000, "nh_lat's native bucket counts add to {total}");
    assert!(
        buckets.len() <= 160,
        "{} native buckets, more than max_buckets",
        buckets.len()
    );
    // Each native bucket holds exactly the values sent that fall in it.
    let seconds: Vec<f64> = (1..=1000).map(|v| f64::from(v) / 1000.0).collect();
    for (index, count) in &buckets {
        assert_eq!(
            *count,
            in_bucket(&seconds, *index),
            "nh_lat's native bucket {index} (2^({index}-1)/8, 2^({index}/8)]"
        );
    }
    let size = histogram(&families, "nh_size");
    assert_eq!(size.sample_count(), 200);
    assert_eq!(size.schema, Some(3));
    assert!(!size.bucket.is_empty(), "nh_size has no classic buckets");
    // The rule with factor 0: classic buckets only, while the others keep
    // their native histograms.
    let classic_only = histogram(&families, "nh_classic");
    assert_eq!(classic_only.sample_count(), 100);
    assert!(!classic_only.bucket.is_empty());
    assert_eq!(
        (
            classic_only.schema,
            classic_only.zero_threshold,
            classic_only.positive_span.len(),
            classic_only.positive_delta.len()
        ),
        (None, None, 0, 0),
        "nh_classic (native_histogram_bucket_factor = 0) has native fields: {classic_only:?}"
    );

    // Two real Prometheus servers: one with native histograms (protobuf),
    // one plain (OpenMetrics text, classic buckets).
    let (native, plain) = std::thread::scope(|s| {
        let native = s.spawn(|| {
            Prometheus::start_configured(d.http, &["--enable-feature=native-histograms"], "")
        });
        let plain = s.spawn(|| Prometheus::start(d.http));
        (native.join().unwrap(), plain.join().unwrap())
    });

    let count = query_one(&native, "histogram_count(nh_lat)", |_| true);
    assert_eq!(count, 1000.0, "histogram_count(nh_lat)");
    let t = native.target().unwrap();
    assert_eq!(t["health"], "up", "{t}");
    assert_eq!(t["lastError"], "", "{t}");
    let sum = query_one(&native, "histogram_sum(nh_lat)", |_| true);
    assert!((sum - 500.5).abs() <= 1e-9, "histogram_sum(nh_lat) = {sum}");
    for q in [0.5, 0.9, 0.99] {
        let got = query_one(&native, &format!("histogram_quantile({q}, nh_lat)"), |_| {
            true
        });
        // The true q-quantile of 1..=1000 ms is q * 1000 ms.
        assert_within_schema_3(got, q, &format!("histogram_quantile({q}, nh_lat)"));
    }
    assert_eq!(
        query_one(&native, "histogram_count(nh_size)", |_| true),
        200.0
    );
    let size_sum = query_one(&native, "histogram_sum(nh_size)", |_| true);
    assert!(
        (size_sum - 20100.0).abs() <= 1e-9,
        "histogram_sum(nh_size) = {size_sum}"
    );
    let p90 = query_one(&native, "histogram_quantile(0.9, nh_size)", |_| true);
    assert_within_schema_3(p90, 180.0, "histogram_quantile(0.9, nh_size)");
    // Without native buckets, Prometheus stores nh_classic's classic ones.
    assert_eq!(
        native.query("histogram_count(nh_classic)").unwrap(),
        Vec::<f64>::new(),
        "nh_classic reached Prometheus as a native histogram"
    );
    assert_eq!(
        query_one(&native, "count(nh_classic_bucket)", |_| true),
        12.0,
        "nh_classic's 11 classic buckets and +Inf"
    );
    // The rest of the same scrape: a counter, a gauge, the windowed
    // families.
    assert_eq!(query_one(&native, "nh_count_total", |_| true), 5.0);
    assert_eq!(query_one(&native, "nh_gauge", |_| true), 7.0);
    let windows = native
        .query_result(r#"rollstat_window_samples{metric="nh.lat"}"#)
        .unwrap();
    let mut names: Vec<&str> = windows
        .iter()
        .filter_map(|s| s["metric"]["window"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["10s", "1m"], "{windows:?}");

    // The classic buckets of the same series, read from text. With linear
    // interpolation: rank 500 falls at the top of (0.25, 0.5] (250 to
    // 500), i.e. 0.5 exactly; rank 900 at 4/5 of (0.5, 1] (500 to 1000),
    // i.e. 0.9.
    let classic_p50 = query_one(
        &plain,
        "histogram_quantile(0.5, sum by (le) (nh_lat_bucket))",
        |_| true,
    );
    assert!(
        (classic_p50 - 0.5).abs() <= 1e-9,
        "classic p50 {classic_p50}"
    );
    let classic_p90 = query_one(
        &plain,
        "histogram_quantile(0.9, sum by (le) (nh_lat_bucket))",
        |_| true,
    );
    assert!(
        (classic_p90 - 0.9).abs() <= 1e-9,
        "classic p90 {classic_p90}"
    );
    assert_eq!(query_one(&plain, "nh_lat_count", |_| true), 1000.0);
    let t = plain.target().unwrap();
    assert_eq!((&t["health"], &t["lastError"]), (&"up".into(), &"".into()));
}

/// A statsd_exporter mapping file's `native_histogram_*`, as the
/// exporter reads them: the rule's own first, then `defaults`'; a factor
/// of 1 or less (or a summary) is no native histogram.
const NATIVE_MAPPING: &str = r#"defaults:
  observer_type: histogram
  histogram_options:
    native_histogram_bucket_factor: 1.1
    native_histogram_max_buckets: 160
mappings:
- match: "se.coarse"
  name: "se_coarse"
  histogram_options:
    native_histogram_bucket_factor: 2
- match: "se.narrow"
  name: "se_narrow"
  histogram_options:
    native_histogram_max_buckets: 4
- match: "se.off"
  name: "se_off"
  histogram_options:
    native_histogram_bucket_factor: 1
- match: "se.summary"
  name: "se_summary"
  observer_type: summary
"#;

#[test]
fn a_statsd_exporter_mapping_files_native_histogram_options_reach_the_scrape() {
    let dir = crate::support::TempDir::new("native-mapping");
    let file = dir.path().join("mapping.yml");
    std::fs::write(&file, NATIVE_MAPPING).unwrap();
    let d = Daemon::start_with(&format!(
        "{}\n[statsd_exporter]\nmapping_file = \"{}\"\n",
        crate::support::TEST_CONFIG,
        file.display()
    ));
    let names = [
        "se.coarse",
        "se.narrow",
        "se.off",
        "se.summary",
        "se.default",
    ];
    // 1..=100 ms each: at schema 3 that is ~54 buckets, over the 4 of
    // se.narrow.
    let lines: Vec<String> = names
        .iter()
        .flat_map(|n| (1..=100).map(move |v| format!("{n}:{v}|ms")))
        .collect();
    send_lines(&d, &lines);
    d.wait_lines("udp", lines.len() as f64, Duration::from_secs(20));
    let r = d.get("/metrics", &[("Accept", PROTO_ACCEPT)]);
    assert_eq!(r.status, 200);
    let families = decode_families(&r.body);
    let schema = |name: &str| histogram(&families, name).schema;
    // Factor 2: schema 0.
    assert_eq!(schema("se_coarse"), Some(0));
    // The defaults' factor 1.1 (schema 3), halved until 100 values fit in
    // 4 buckets.
    let narrow = histogram(&families, "se_narrow");
    assert!(narrow.schema.is_some_and(|s| s < 0), "{narrow:?}");
    assert!(positive_buckets(narrow).iter().filter(|b| b.1 > 0).count() <= 4);
    // The defaults' own, for a rule that sets none and for names no rule maps.
    assert_eq!(schema("se_default"), Some(3));
    // Factor 1: none, as client_golang reads it.
    assert_eq!(schema("se_off"), None);
    assert!(histogram(&families, "se_off").positive_span.is_empty());
    // A summary has none.
    let summary = families
        .iter()
        .find(|f| f.name() == "se_summary")
        .expect("se_summary");
    assert_eq!(summary.r#type(), MetricType::Summary);
    // Every histogram still counts its 100 values.
    for n in ["se_coarse", "se_narrow", "se_off", "se_default"] {
        assert_eq!(histogram(&families, n).sample_count(), 100, "{n}");
    }
}
