//! OTLP ingest (`[listen] otlp_http`): the OpenTelemetry SDKs of Python
//! (protobuf, gzip or not) and Node (JSON) push a counter, an up-down
//! counter, a histogram and an observable gauge, with cumulative and delta
//! temporality; rollstat's cumulative families and windows must equal what
//! the SDK recorded (it prints its totals). Then hostile bodies: each
//! refused and counted, the good points beside them kept.

use std::process::Command;
use std::time::Duration;

use prost::Message;
use rollstat::otlp::proto::opentelemetry::proto::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use rollstat::otlp::proto::opentelemetry::proto::common::v1::{any_value, AnyValue, KeyValue};
use rollstat::otlp::proto::opentelemetry::proto::metrics::v1::{
    metric, number_data_point, ExponentialHistogram, ExponentialHistogramDataPoint, Gauge,
    Histogram, HistogramDataPoint, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics,
};
use serde_json::Value;

use crate::support::{
    assert_close, http, missing, python, repo, require_tool, run, Daemon, Scrape,
};

const CONFIG: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"
otlp_http = "127.0.0.1:0"
otlp_grpc = "127.0.0.1:0"

[[windows]]
name = "1m"
buckets = 60
interval_ms = 1000
"#;

/// Runs an SDK client script against the daemon; its totals.
fn send(mut cmd: Command) -> Value {
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    let out = run(&mut cmd, b"", Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        out.stdout,
        out.stderr
    );
    let last = out.stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn python_sdk(
    d: &Daemon,
    protocol: &str,
    prefix: &str,
    temporality: &str,
    compression: &str,
) -> Value {
    let endpoint = match protocol {
        "grpc" => format!("http://{}", d.otlp_grpc().unwrap()),
        _ => format!("http://{}/v1/metrics", d.otlp_http().unwrap()),
    };
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/clients/python/otlp_send.py"))
        .args(["--protocol", protocol, "--rounds", "3", "--prefix", prefix])
        .args(["--temporality", temporality, "--compression", compression])
        .args(["--endpoint", &endpoint]);
    send(cmd)
}

/// The scrape once every point of `n` requests' worth has been counted.
fn scraped(d: &Daemon, points: f64) -> Scrape {
    d.wait_lines("otlp", points, Duration::from_secs(10))
}

/// Everything the SDK recorded, as rollstat publishes it under `p`
/// (`p` the prefix with `_` for `.`).
fn assert_matches(s: &Scrape, p: &str, sent: &Value) {
    let svc = ("service", "otel-test");
    let metric = |m: &str| format!("{}{m}", p.replace('_', "."));
    for route in ["/a", "/b"] {
        let want = sent["requests"][route].as_f64().unwrap();
        let labels = [("route", route), svc];
        assert_eq!(
            s.must(&format!("{p}requests_total"), &labels),
            want,
            "{route}"
        );
        let m = metric("requests");
        let win = [
            ("metric", m.as_str()),
            ("window", "1m"),
            ("route", route),
            svc,
        ];
        assert_eq!(s.must("rollstat_window_sum_value", &win), want, "{route}");
    }
    assert_eq!(
        s.must(&format!("{p}inflight"), &[svc]),
        sent["inflight"].as_f64().unwrap()
    );
    assert_eq!(
        s.must(&format!("{p}temperature"), &[svc]),
        sent["temperature"].as_f64().unwrap()
    );
    let lat = &sent["latency"];
    let count = lat["count"].as_f64().unwrap();
    assert_eq!(s.must(&format!("{p}latency_count"), &[svc]), count);
    assert_close(
        s.must(&format!("{p}latency_sum"), &[svc]),
        lat["sum"].as_f64().unwrap(),
        1e-9,
        "latency sum",
    );
    let m = metric("latency");
    let win = |f: &str| {
        s.must(
            &format!("rollstat_window_{f}"),
            &[("metric", m.as_str()), ("window", "1m"), svc],
        )
    };
    assert_eq!(win("samples"), count);
    assert_close(
        win("sum_value"),
        lat["sum"].as_f64().unwrap(),
        1e-9,
        "window sum",
    );
    // Every value the SDK recorded is within its bucket: the window's
    // range and its median lie within the buckets' range.
    assert!(win("min") <= lat["min"].as_f64().unwrap() + 0.01, "min");
    assert!(
        win("max") >= 1.0 && win("max") <= lat["max"].as_f64().unwrap(),
        "max"
    );
    assert_eq!(
        s.sum("rollstat_ingest_rejected_lines_total"),
        0.0,
        "{:?}",
        s.by_label("rollstat_ingest_rejected_lines_total", "reason")
    );
}

#[test]
fn the_python_sdk_over_http_protobuf_lands_as_recorded_cumulative_and_delta() {
    let d = Daemon::start_with(CONFIG);
    let cumulative = python_sdk(&d, "http", "c.", "cumulative", "none");
    // 3 rounds x (2 counters + updown + histogram + gauge).
    scraped(&d, 15.0);
    let delta = python_sdk(&d, "http", "d.", "delta", "gzip");
    let s = scraped(&d, 30.0);
    assert_matches(&s, "c_", &cumulative);
    assert_matches(&s, "d_", &delta);
}

#[test]
fn the_python_sdk_over_grpc_lands_as_recorded_cumulative_and_delta() {
    let d = Daemon::start_with(CONFIG);
    let cumulative = python_sdk(&d, "grpc", "gc.", "cumulative", "none");
    scraped(&d, 15.0);
    let delta = python_sdk(&d, "grpc", "gd.", "delta", "gzip");
    let s = scraped(&d, 30.0);
    assert_matches(&s, "gc_", &cumulative);
    assert_matches(&s, "gd_", &delta);
}

#[test]
fn the_node_sdk_over_http_json_lands_as_recorded() {
    let node = require_tool("node");
    let js = repo().join("tests/clients/node");
    if !js
        .join("node_modules/@opentelemetry/exporter-metrics-otlp-http/package.json")
        .is_file()
    {
        missing("@opentelemetry/exporter-metrics-otlp-http (tests/clients/node/node_modules)");
    }
    let d = Daemon::start_with(CONFIG);
    let mut cmd = Command::new(node);
    cmd.arg(js.join("otlp_send.js"))
        .args([
            "--temporality",
            "cumulative",
            "--rounds",
            "2",
            "--prefix",
            "n.",
        ])
        .arg("--endpoint")
        .arg(format!("http://{}/v1/metrics", d.otlp_http().unwrap()));
    let sent = send(cmd);
    let s = scraped(&d, 10.0);
    assert_matches(&s, "n_", &sent);
}

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

fn gauge(name: &str, v: f64, attrs: Vec<KeyValue>) -> Metric {
    Metric {
        name: name.into(),
        data: Some(metric::Data::Gauge(Gauge {
            data_points: vec![NumberDataPoint {
                attributes: attrs,
                value: Some(number_data_point::Value::AsDouble(v)),
                ..Default::default()
            }],
        })),
        ..Default::default()
    }
}

/// An exponential histogram at scale 40: past the finest OTLP allows.
fn wrong_scale() -> Metric {
    Metric {
        name: "e".into(),
        data: Some(metric::Data::ExponentialHistogram(ExponentialHistogram {
            aggregation_temporality: 1,
            data_points: vec![ExponentialHistogramDataPoint {
                scale: 40,
                ..Default::default()
            }],
        })),
        ..Default::default()
    }
}

fn request(metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            scope_metrics: vec![ScopeMetrics {
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn post(d: &Daemon, content_type: &str, body: &[u8]) -> crate::support::Response {
    http(
        d.otlp_http().unwrap(),
        "POST",
        "/v1/metrics",
        &[("Content-Type", content_type)],
        body,
    )
}

#[test]
fn hostile_points_are_refused_and_counted_and_the_good_ones_beside_them_kept() {
    let d = Daemon::start_with(CONFIG);
    let huge = "x".repeat(100_000);
    let bad_histogram = Metric {
        name: "h".into(),
        data: Some(metric::Data::Histogram(Histogram {
            aggregation_temporality: 1,
            data_points: vec![HistogramDataPoint {
                count: 5,
                bucket_counts: vec![1, 2],
                explicit_bounds: vec![1.0, 2.0, 3.0],
                ..Default::default()
            }],
        })),
        ..Default::default()
    };
    let req = request(vec![
        gauge("good", 1.0, vec![kv("k", "v")]),
        gauge("nan", f64::NAN, vec![]),
        gauge("inf", f64::INFINITY, vec![]),
        gauge("long", 1.0, vec![kv("k", &huge)]),
        gauge(
            "many",
            1.0,
            (0..1000).map(|i| kv(&format!("k{i}"), "v")).collect(),
        ),
        gauge("", 1.0, vec![]),
        bad_histogram,
        wrong_scale(),
        gauge("good2", 2.0, vec![]),
    ]);
    let r = post(&d, "application/x-protobuf", &req.encode_to_vec());
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = ExportMetricsServiceResponse::decode(&r.body[..]).unwrap();
    let partial = answer.partial_success.expect("a partial success");
    assert_eq!(partial.rejected_data_points, 7, "{}", partial.error_message);
    assert!(
        partial
            .error_message
            .starts_with("7 of 9 data points were not applied; the first: otlp_bad_value"),
        "{}",
        partial.error_message
    );
    let s = d.wait_lines("otlp", 2.0, Duration::from_secs(10));
    assert_eq!(s.must("good", &[("k", "v")]), 1.0);
    assert_eq!(s.must("good2", &[]), 2.0);
    let reasons = s.by_label("rollstat_ingest_rejected_lines_total", "reason");
    let at = |r: &str| {
        reasons
            .iter()
            .find(|(k, _)| k.as_str() == r)
            .map_or(0.0, |(_, v)| *v)
    };
    assert_eq!(at("otlp_bad_value"), 2.0);
    assert_eq!(at("otlp_bad_attributes"), 2.0);
    assert_eq!(at("otlp_bad_name"), 1.0);
    assert_eq!(at("otlp_bad_buckets"), 2.0);

    // Whole bodies: truncated protobuf, bad JSON, deep JSON nesting and an
    // unknown media type; nothing applied, each counted.
    let body = req.encode_to_vec();
    let r = post(&d, "application/x-protobuf", &body[..body.len() / 2]);
    assert_eq!(r.status, 400, "{}", r.text());
    let r = post(&d, "application/json", b"{\"resourceMetrics\": [");
    assert_eq!(r.status, 400, "{}", r.text());
    let deep = format!(
        "{{\"resourceMetrics\":[{{\"resource\":{{\"attributes\":[{{\"key\":\"k\",\"value\":{}1{}}}]}}}}]}}",
        "{\"arrayValue\":{\"values\":[".repeat(10_000),
        "]}}".repeat(10_000)
    );
    let r = post(&d, "application/json", deep.as_bytes());
    assert_eq!(r.status, 400, "{}", r.text());
    // A negative count is not OTLP/JSON (the field is a uint64): the body
    // is malformed, as protobuf could not even carry it.
    let negative = br#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"h","histogram":{"aggregationTemporality":1,"dataPoints":[{"count":"-3","bucketCounts":["-3"]}]}}]}]}]}"#;
    let r = post(&d, "application/json", negative);
    assert_eq!(r.status, 400, "{}", r.text());
    // A million attributes on one point: past the body cap, refused unread.
    let million = request(vec![gauge(
        "wide",
        1.0,
        (0..1_000_000).map(|i| kv(&i.to_string(), "v")).collect(),
    )]);
    let r = post(&d, "application/x-protobuf", &million.encode_to_vec());
    assert_eq!(r.status, 413, "{}", r.text());
    let r = post(&d, "text/plain", b"good:1|g");
    assert_eq!(r.status, 415, "{}", r.text());
    let s = d.scrape();
    let refused = s.by_label("rollstat_http_requests_refused_total", "reason");
    let at = |r: &str| {
        refused
            .iter()
            .find(|(k, _)| k.as_str() == r)
            .map_or(0.0, |(_, v)| *v)
    };
    assert_eq!(at("bad_otlp"), 4.0, "{refused:?}");
    assert_eq!(at("unsupported_media_type"), 1.0, "{refused:?}");
    assert_eq!(at("body_too_large"), 1.0, "{refused:?}");
    assert_eq!(
        s.must("rollstat_ingest_lines_total", &[("transport", "otlp")]),
        2.0
    );
}
