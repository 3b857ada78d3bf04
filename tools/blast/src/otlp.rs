//! OTLP/HTTP load (`--transport otlp`): pre-encoded
//! `ExportMetricsServiceRequest`s posted to `POST /v1/metrics` over
//! keep-alive HTTP/1.1 connections, one per sender thread.
//!
//! **Streams.** `streams` distinct (metric name, attribute set) pairs:
//! stream `s` is metric `s / per_metric` with the one attribute
//! `route=/r<s % per_metric>`, under the resource `service.name =
//! rollstat-blast`. `gauge_pct` percent of the metrics, spread evenly, are
//! gauges (`as_double`); the rest are cumulative monotonic sums
//! (`as_int`), all with one start time (the tool's start, so each
//! stream's first point counts whole).
//!
//! **Requests.** The streams are cut into requests of `per_request`
//! points, each stream in exactly one request, and every request is
//! encoded once, before the timed loop. Sender `k` owns requests `k`,
//! `k + senders`, ...: a stream's points go over one connection, in
//! order. Before each send, only fixed-width fields are overwritten in
//! place (no encoding in the timed loop): every point's
//! `time_unix_nano` (now) and value: pass `p` (from 0) sends `p + 1` as
//! every sum's running total (so each point adds 1) and `p` as every
//! gauge's value.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use prost::Message;
use rollstat::otlp::proto::opentelemetry::proto::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use rollstat::otlp::proto::opentelemetry::proto::common::v1::{
    any_value, AnyValue, InstrumentationScope, KeyValue,
};
use rollstat::otlp::proto::opentelemetry::proto::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Gauge, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum,
};
use rollstat::otlp::proto::opentelemetry::proto::resource::v1::Resource;
use rollstat::{Clock, SystemClock};
use rollstat_testkit::http::Conn;

use crate::send::since;

/// Placeholder of `time_unix_nano` while encoding (bytes no string of ours
/// holds), found and overwritten before each send.
const TIME_MARK: u64 = 0xF1E2_D3C4_B5A6_9788;
/// Placeholder of a sum's `as_int`.
const INT_MARK: i64 = 0x71E2_D3C4_B5A6_9799;
/// Placeholder bits of a gauge's `as_double`.
const DOUBLE_MARK: u64 = 0x7FE2_D3C4_B5A6_97AA;

/// Protobuf tags (field number << 3 | wire type 1, 64-bit) of
/// `NumberDataPoint.time_unix_nano` (3), `as_double` (4), `as_int` (6).
const TAG_TIME: u8 = 3 << 3 | 1;
const TAG_DOUBLE: u8 = 4 << 3 | 1;
const TAG_INT: u8 = 6 << 3 | 1;

/// The streams and how requests carry them.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Distinct streams in all.
    pub streams: usize,
    /// Streams (attribute values) per metric name.
    pub per_metric: usize,
    /// Data points per request.
    pub per_request: usize,
    /// Percent of the metric names that are gauges.
    pub gauge_pct: usize,
}

impl Shape {
    /// Whether metric `m` is a gauge: `gauge_pct` percent, spread evenly.
    fn is_gauge(&self, m: usize) -> bool {
        m * self.gauge_pct / 100 != (m + 1) * self.gauge_pct / 100
    }

    /// The name of metric `m`.
    pub fn metric_name(&self, m: usize) -> String {
        if self.is_gauge(m) {
            format!("blast.otlp.g{m:04}")
        } else {
            format!("blast.otlp.c{m:04}")
        }
    }

    /// Metric names in all.
    pub fn metrics(&self) -> usize {
        self.streams.div_ceil(self.per_metric.max(1))
    }
}

/// One encoded request and the offsets of its fields rewritten per send.
#[derive(Clone, Debug)]
pub struct Body {
    /// The encoded `ExportMetricsServiceRequest`.
    pub bytes: Vec<u8>,
    /// Data points in it.
    pub points: u64,
    times: Vec<usize>,
    ints: Vec<usize>,
    doubles: Vec<usize>,
}

impl Body {
    /// Sets every point's time to `time_ns` and the values of pass `pass`.
    fn stamp(&mut self, time_ns: u64, pass: u64) {
        let put = |bytes: &mut [u8], at: &[usize], v: [u8; 8]| {
            for &i in at {
                bytes[i..i + 8].copy_from_slice(&v);
            }
        };
        put(&mut self.bytes, &self.times, time_ns.to_le_bytes());
        put(&mut self.bytes, &self.ints, (pass as i64 + 1).to_le_bytes());
        put(
            &mut self.bytes,
            &self.doubles,
            (pass as f64).to_bits().to_le_bytes(),
        );
    }
}

/// A string attribute.
pub fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

/// A request of `metrics` under blast's resource and scope.
pub fn request(metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "rollstat-blast")],
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "rollstat-blast".into(),
                    ..Default::default()
                }),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Metric `m` with `points`: a gauge or a cumulative monotonic sum.
fn metric_of(shape: &Shape, m: usize, points: Vec<NumberDataPoint>) -> Metric {
    let data = if shape.is_gauge(m) {
        metric::Data::Gauge(Gauge {
            data_points: points,
        })
    } else {
        metric::Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        })
    };
    Metric {
        name: shape.metric_name(m),
        data: Some(data),
        ..Default::default()
    }
}

/// Every offset just past `tag` followed by the 8 bytes `mark`.
fn marks(bytes: &[u8], tag: u8, mark: [u8; 8]) -> Vec<usize> {
    bytes
        .windows(9)
        .enumerate()
        .filter(|(_, w)| w[0] == tag && w[1..] == mark)
        .map(|(i, _)| i + 1)
        .collect()
}

/// Every request of one pass over the streams, encoded, each stream's
/// start time `start_ns`.
pub fn encode_all(shape: &Shape, start_ns: u64) -> io::Result<Vec<Body>> {
    let per_metric = shape.per_metric.max(1);
    let mut out = Vec::new();
    let mut first = 0;
    while first < shape.streams {
        let last = (first + shape.per_request.max(1)).min(shape.streams);
        let (mut metrics, mut gauges) = (Vec::new(), 0);
        let mut s = first;
        while s < last {
            let m = s / per_metric;
            let end = ((m + 1) * per_metric).min(last);
            let points = (s..end)
                .map(|s| NumberDataPoint {
                    attributes: vec![kv("route", &format!("/r{:04}", s % per_metric))],
                    start_time_unix_nano: start_ns,
                    time_unix_nano: TIME_MARK,
                    value: Some(if shape.is_gauge(m) {
                        number_data_point::Value::AsDouble(f64::from_bits(DOUBLE_MARK))
                    } else {
                        number_data_point::Value::AsInt(INT_MARK)
                    }),
                    ..Default::default()
                })
                .collect();
            if shape.is_gauge(m) {
                gauges += end - s;
            }
            metrics.push(metric_of(shape, m, points));
            s = end;
        }
        let bytes = request(metrics).encode_to_vec();
        let points = last - first;
        let body = Body {
            times: marks(&bytes, TAG_TIME, TIME_MARK.to_le_bytes()),
            ints: marks(&bytes, TAG_INT, INT_MARK.to_le_bytes()),
            doubles: marks(&bytes, TAG_DOUBLE, DOUBLE_MARK.to_le_bytes()),
            points: points as u64,
            bytes,
        };
        if body.times.len() != points
            || body.doubles.len() != gauges
            || body.ints.len() != points - gauges
        {
            return Err(io::Error::other(
                "encoding: the placeholders of times and values were not found once per point",
            ));
        }
        out.push(body);
        first = last;
    }
    Ok(out)
}

/// How one OTLP sender sends.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// Points per second; 0 = as fast as possible.
    pub rate: f64,
    pub duration: Duration,
    /// Requests at most.
    pub max_requests: u64,
}

/// What one OTLP sender did.
#[derive(Clone, Debug, Default)]
pub struct Sent {
    /// Requests answered 200.
    pub requests: u64,
    /// Points in those requests.
    pub points: u64,
    /// Requests answered otherwise (counted, not sent again).
    pub failed: u64,
    /// Points the answers' `partial_success` said were not applied.
    pub refused: u64,
    /// The first failure or partial success, as the daemon put it.
    pub first_error: Option<String>,
    pub elapsed: Duration,
}

/// Posts `bodies` in turn over one keep-alive connection to `addr`.
pub fn sender(addr: SocketAddr, bodies: &mut [Body], pace: Pace) -> io::Result<Sent> {
    let mut conn = Conn::connect(addr).map_err(io::Error::other)?;
    let headers = [("Content-Type", "application/x-protobuf")];
    let clock = SystemClock::new();
    let start = clock.now();
    let mut s = Sent::default();
    let mut pass = 0;
    loop {
        for b in bodies.iter_mut() {
            let elapsed = since(&clock, start);
            if elapsed >= pace.duration || s.requests + s.failed >= pace.max_requests {
                s.elapsed = elapsed;
                return Ok(s);
            }
            if pace.rate > 0.0 {
                let due = Duration::from_secs_f64(s.points as f64 / pace.rate);
                if due > elapsed {
                    std::thread::sleep((due - elapsed).min(pace.duration - elapsed));
                }
            }
            b.stamp(clock.now().as_nanos(), pass);
            let r = conn
                .request("POST", "/v1/metrics", &headers, &b.bytes)
                .map_err(|e| {
                    io::Error::other(format!("OTLP request {} failed: {e}", s.requests + 1))
                })?;
            match check(r.status, &r.body) {
                Ok((refused, why)) => {
                    s.requests += 1;
                    s.points += b.points;
                    s.refused += refused;
                    if refused > 0 {
                        s.first_error
                            .get_or_insert_with(|| format!("partial success: {why}"));
                    }
                }
                Err(e) => {
                    s.failed += 1;
                    s.first_error.get_or_insert(e);
                }
            }
        }
        pass += 1;
    }
}

/// Points refused by a 200 answer's `partial_success` and its message, or
/// why the answer is a failure.
pub fn check(status: u16, body: &[u8]) -> Result<(u64, String), String> {
    if status != 200 {
        return Err(format!(
            "status {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ));
    }
    let answer = ExportMetricsServiceResponse::decode(body)
        .map_err(|e| format!("status 200 but the body is no ExportMetricsServiceResponse: {e}"))?;
    Ok(answer.partial_success.map_or((0, String::new()), |p| {
        (
            u64::try_from(p.rejected_data_points).unwrap_or(0),
            p.error_message,
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape {
            streams: 2500,
            per_metric: 100,
            per_request: 1000,
            gauge_pct: 20,
        }
    }

    #[test]
    fn every_stream_is_in_one_request_and_stamped_in_place() {
        let mut bodies = encode_all(&shape(), 7).unwrap();
        assert_eq!(
            bodies.iter().map(|b| b.points).collect::<Vec<_>>(),
            [1000, 1000, 500]
        );
        bodies[0].stamp(123, 4);
        let req = ExportMetricsServiceRequest::decode(&bodies[0].bytes[..]).unwrap();
        let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
        assert_eq!(metrics.len(), 10);
        let (mut sums, mut gauges) = (0, 0);
        for m in metrics {
            let points = match m.data.as_ref().unwrap() {
                metric::Data::Sum(s) => {
                    assert!(s.is_monotonic && s.aggregation_temporality == 2);
                    sums += 1;
                    &s.data_points
                }
                metric::Data::Gauge(g) => {
                    gauges += 1;
                    &g.data_points
                }
                other => panic!("{other:?}"),
            };
            assert_eq!(points.len(), 100);
            for p in points {
                assert_eq!((p.start_time_unix_nano, p.time_unix_nano), (7, 123));
                let want = if m.name.contains(".g") {
                    number_data_point::Value::AsDouble(4.0)
                } else {
                    number_data_point::Value::AsInt(5)
                };
                assert_eq!(p.value, Some(want), "{}", m.name);
            }
        }
        assert_eq!((sums, gauges), (8, 2));
        let names: std::collections::BTreeSet<_> = bodies
            .iter()
            .flat_map(|b| {
                let r = ExportMetricsServiceRequest::decode(&b.bytes[..]).unwrap();
                r.resource_metrics[0].scope_metrics[0]
                    .metrics
                    .iter()
                    .map(|m| m.name.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(names.len(), 25);
    }

    #[test]
    fn answers_are_checked() {
        assert_eq!(check(200, b""), Ok((0, String::new())));
        let partial = ExportMetricsServiceResponse {
            partial_success: Some(
                rollstat::otlp::proto::opentelemetry::proto::collector::metrics::v1::ExportMetricsPartialSuccess {
                    rejected_data_points: 3,
                    error_message: "x".into(),
                },
            ),
        };
        assert_eq!(check(200, &partial.encode_to_vec()), Ok((3, "x".into())));
        assert!(check(503, b"busy").unwrap_err().contains("503"));
    }
}
