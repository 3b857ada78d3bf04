//! `[[outputs]] kind = "otlp"`: requests a receiver decodes with the
//! OpenTelemetry protos (compiled by prost-build, `otlp::proto`),
//! every data point's type, temporality, start time, attributes and value
//! checked against what `/metrics` serves; deltas that add up to the
//! totals; `partial_success` counted and never retried; a 400 refused
//! once, a 503 tried again.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::time::Duration;

use prost::Message as _;
use rollstat::otlp::proto::opentelemetry::proto::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use rollstat::otlp::proto::opentelemetry::proto::common::v1::{any_value, KeyValue};
use rollstat::otlp::proto::opentelemetry::proto::metrics::v1::{
    metric::Data, number_data_point, AggregationTemporality, Metric, NumberDataPoint,
};

use crate::push::{output_batches, scraped, send_and_push_to, Samples};
use crate::support::{wait_true, Daemon, FakeReceiver, Received, Reply};

/// Listeners on port 0 and one OTLP output to `url`, pushing every 300 ms.
fn config(url: &str, extra: &str) -> String {
    format!(
        r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = "127.0.0.1:0"
http = "127.0.0.1:0"

[ingest]
udp_readers = 1

[series]
quantiles = [0.5, 0.99]
histogram_buckets = [0.01, 0.1, 1.0]
native_histogram_bucket_factor = 1.1

[[windows]]
name = "5m"
buckets = 30
interval_ms = 10000

[[outputs]]
name = "otel"
kind = "otlp"
url = "{url}"
interval_ms = 300
retry_min_ms = 50
retry_max_ms = 2000
{extra}
"#
    )
}

/// A body decoded: gunzip, then the protobuf request.
fn decoded(r: &Received) -> ExportMetricsServiceRequest {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&r.body[..])
        .read_to_end(&mut raw)
        .expect("a gzip body");
    ExportMetricsServiceRequest::decode(&raw[..]).expect("an ExportMetricsServiceRequest")
}

fn metrics(req: &ExportMetricsServiceRequest) -> impl Iterator<Item = &Metric> {
    req.resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
}

fn labels(attrs: &[KeyValue]) -> BTreeMap<String, String> {
    attrs
        .iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => s.clone(),
                other => panic!("attribute {} is not a string: {other:?}", kv.key),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

fn value(p: &NumberDataPoint) -> f64 {
    match p.value {
        Some(number_data_point::Value::AsDouble(v)) => v,
        other => panic!("not a double: {other:?}"),
    }
}

/// `le` as a number, whichever way it was written.
fn normal(mut l: BTreeMap<String, String>) -> BTreeMap<String, String> {
    if let Some(le) = l.get_mut("le") {
        *le = le.parse::<f64>().map_or(le.clone(), |v| v.to_string());
    }
    l
}

/// The samples a scrape reading these points would see (classic
/// histograms as `_bucket`/`_sum`/`_count`), each point checked for its
/// kind's temporality and start time on the way.
fn as_samples(req: &ExportMetricsServiceRequest) -> Samples {
    let cumulative = AggregationTemporality::Cumulative as i32;
    let mut out = Samples::new();
    for m in metrics(req) {
        let mut put = |name: String, l: BTreeMap<String, String>, v: f64| {
            out.insert((name, normal(l)), v);
        };
        match m.data.as_ref().expect("data") {
            Data::Gauge(g) => g.data_points.iter().for_each(|p| {
                assert_eq!(
                    p.start_time_unix_nano, 0,
                    "{}: a gauge has no start",
                    m.name
                );
                put(m.name.clone(), labels(&p.attributes), value(p));
            }),
            Data::Sum(s) => {
                assert!(
                    s.is_monotonic && s.aggregation_temporality == cumulative,
                    "{}",
                    m.name
                );
                for p in &s.data_points {
                    assert!(
                        p.start_time_unix_nano > 0 && p.start_time_unix_nano <= p.time_unix_nano,
                        "{}",
                        m.name
                    );
                    put(m.name.clone(), labels(&p.attributes), value(p));
                }
            }
            Data::Histogram(h) => {
                assert_eq!(h.aggregation_temporality, cumulative, "{}", m.name);
                for p in &h.data_points {
                    assert!(p.start_time_unix_nano > 0, "{}", m.name);
                    assert_eq!(p.bucket_counts.len(), p.explicit_bounds.len() + 1);
                    assert_eq!(p.bucket_counts.iter().sum::<u64>(), p.count);
                    let l = labels(&p.attributes);
                    let mut below = 0;
                    for (i, n) in p.bucket_counts.iter().enumerate() {
                        below += n;
                        let le = p
                            .explicit_bounds
                            .get(i)
                            .map_or("+Inf".into(), f64::to_string);
                        let mut lb = l.clone();
                        lb.insert("le".into(), le);
                        put(format!("{}_bucket", m.name), lb, below as f64);
                    }
                    put(format!("{}_sum", m.name), l.clone(), p.sum.unwrap());
                    put(format!("{}_count", m.name), l, p.count as f64);
                }
            }
            Data::ExponentialHistogram(h) => {
                assert_eq!(h.aggregation_temporality, cumulative, "{}", m.name);
                for p in &h.data_points {
                    let buckets: u64 = p
                        .positive
                        .iter()
                        .chain(&p.negative)
                        .flat_map(|b| &b.bucket_counts)
                        .sum();
                    assert_eq!(buckets + p.zero_count, p.count, "{}", m.name);
                }
            }
            Data::Summary(s) => s.data_points.iter().for_each(|p| {
                let l = labels(&p.attributes);
                put(format!("{}_sum", m.name), l.clone(), p.sum);
                put(format!("{}_count", m.name), l, p.count as f64);
            }),
        }
    }
    out
}

fn batches(d: &Daemon, result: &str) -> f64 {
    output_batches(d, "otel", result)
}

#[test]
fn an_otlp_receiver_gets_every_family_as_metrics_serves_it() {
    let rx = FakeReceiver::start(vec![Reply::Status(200, vec![])]);
    let extra = "groups = [\"windowed\", \"cumulative\"]\n[outputs.resource]\n\"deployment.environment\" = \"test\"";
    let d = Daemon::start_with(&config(&rx.url(), extra));
    send_and_push_to(&d, "otel");
    let want: Samples = scraped(&d.scrape())
        .into_iter()
        .map(|((n, l), v)| ((n, normal(l)), v))
        .collect();
    assert!(want.len() > 30, "{} samples compared", want.len());
    let last = rx.received().last().cloned().unwrap();
    assert_eq!(last.header("content-encoding"), Some("gzip"));
    assert_eq!(last.header("content-type"), Some("application/x-protobuf"));
    let req = decoded(&last);
    let rm = &req.resource_metrics[0];
    let resource = labels(&rm.resource.as_ref().unwrap().attributes);
    assert_eq!(resource["service.name"], "rollstat");
    assert_eq!(resource["deployment.environment"], "test");
    assert_eq!(rm.scope_metrics[0].scope.as_ref().unwrap().name, "rollstat");
    let got: Samples = as_samples(&req)
        .into_iter()
        .filter(|(k, _)| {
            want.contains_key(k) || k.0.starts_with("rollstat_window_") && !k.0.ends_with("rate")
        })
        .collect();
    let differing: Vec<_> = want
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .take(5)
        .collect();
    assert!(
        differing.is_empty(),
        "{} pushed, {} served; differing: {differing:?}",
        got.len(),
        want.len()
    );
    assert_eq!(got.len(), want.len());
    // The native histogram of the timer, at the scale /metrics serves.
    let native = metrics(&req)
        .find_map(|m| match &m.data {
            Some(Data::ExponentialHistogram(h)) if m.name == "lat" => {
                Some(h.data_points[0].clone())
            }
            _ => None,
        })
        .expect("lat as an ExponentialHistogram");
    assert_eq!(native.count, 3);
    assert!((native.sum.unwrap() - 1.762).abs() < 1e-9);
    assert_eq!(native.scale, 3, "factor 1.1 is schema 3");
    // No self-metrics: they were not selected.
    assert!(metrics(&req).all(|m| !m.name.starts_with("rollstat_output")));
}

#[test]
fn delta_temporality_sends_what_changed_and_the_deltas_add_up_to_the_total() {
    let rx = FakeReceiver::start(vec![Reply::Status(200, vec![])]);
    let d = Daemon::start_with(&config(
        &rx.url(),
        "temporality = \"delta\"\ngroups = [\"cumulative\"]",
    ));
    d.send_udp(b"hits:1|c");
    d.wait_scrape(Duration::from_secs(10), "hits", |s| {
        s.value("hits_total", &[]) == Some(1.0)
    });
    let sent = batches(&d, "sent");
    wait_true(Duration::from_secs(10), "pushes", || {
        batches(&d, "sent") >= sent + 2.0
    });
    d.send_udp(b"hits:4|c");
    d.wait_scrape(Duration::from_secs(10), "hits", |s| {
        s.value("hits_total", &[]) == Some(5.0)
    });
    let sent = batches(&d, "sent");
    wait_true(Duration::from_secs(10), "pushes", || {
        batches(&d, "sent") >= sent + 2.0
    });
    let mut points = Vec::new();
    for r in rx.received() {
        for m in metrics(&decoded(&r)) {
            if let (Some(Data::Sum(s)), "hits_total") = (&m.data, m.name.as_str()) {
                assert_eq!(
                    s.aggregation_temporality,
                    AggregationTemporality::Delta as i32
                );
                points.extend(
                    s.data_points
                        .iter()
                        .map(|p| (p.start_time_unix_nano, p.time_unix_nano, value(p))),
                );
            }
        }
    }
    let total: f64 = points.iter().map(|p| p.2).sum();
    assert_eq!(total, 5.0, "{points:?}");
    for w in points.windows(2) {
        assert_eq!(
            w[1].0, w[0].1,
            "each delta starts where the last ended: {points:?}"
        );
    }
}

#[test]
fn a_partial_success_is_counted_and_not_retried_and_a_400_is_refused_once() {
    let partial = ExportMetricsServiceResponse {
        partial_success: Some(ExportMetricsPartialSuccess {
            rejected_data_points: 2,
            error_message: "two points had no name".into(),
        }),
    }
    .encode_to_vec();
    let rx = FakeReceiver::start(vec![
        Reply::Body(200, partial),
        Reply::Status(503, vec![]),
        Reply::Status(400, vec![]),
        Reply::Status(200, vec![]),
    ]);
    let d = Daemon::start_with(&config(&rx.url(), ""));
    d.send_udp(b"hits:1|c");
    wait_true(Duration::from_secs(20), "four answers", || {
        rx.received().len() >= 4
    });
    let got = rx.received();
    assert_ne!(
        got[1].body, got[0].body,
        "the partly taken batch is not sent again"
    );
    assert_eq!(got[2].body, got[1].body, "the 503 is tried again");
    assert_ne!(got[3].body, got[2].body, "the 400 is not");
    let s = d.scrape();
    assert_eq!(
        s.value(
            "rollstat_output_unwritten_samples_total",
            &[("output", "otel")]
        ),
        Some(2.0)
    );
    assert!(
        s.value(
            "rollstat_output_batches_total",
            &[("output", "otel"), ("result", "refused")]
        ) >= Some(1.0)
    );
    assert_eq!(
        s.value("rollstat_output_protocol", &[("output", "otel")]),
        Some(0.0)
    );
}
