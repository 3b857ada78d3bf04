//! One push as OTLP: the families of `def`'s selection written as the
//! Prometheus protobuf exposition writes them (so the names, labels and
//! values are a scrape's), read back and turned into OTLP metrics
//! (`expose::push::otlp_points`), gathered into
//! `ExportMetricsServiceRequest`s of at most `batch_max_bytes` each
//! (a family larger than that is cut between data points), gzipped.

use std::io::Write as _;
use std::sync::Arc;

use flate2::write::GzEncoder;
use prost::Message as _;

use super::batch::{model_families, Sent, Source};
use super::queue::Batch;
use super::settings::{OutputDef, Protocol};
use crate::expose::buffer::ChunkPool;
use crate::expose::families::WINDOWED;
use crate::expose::proto::{encode_families, metrics as pm, render_kept, Keep};
use crate::expose::push::otlp_points::Points;
use crate::otlp::proto::opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest;
use crate::otlp::proto::opentelemetry::proto::common::v1::{
    any_value, AnyValue, InstrumentationScope, KeyValue,
};
use crate::otlp::proto::opentelemetry::proto::metrics::v1::{
    metric::Data, ExponentialHistogram, Gauge, Histogram, Metric, ResourceMetrics, ScopeMetrics,
    Sum, Summary,
};
use crate::otlp::proto::opentelemetry::proto::resource::v1::Resource;
use crate::Timestamp;

/// The batches of one OTLP push of `def`'s selection as of `now`.
#[must_use]
pub fn render_otlp(
    source: &Source,
    def: &OutputDef,
    now: Timestamp,
    pool: &Arc<ChunkPool>,
    sent: &mut Sent,
) -> Vec<Batch> {
    let (head, series) = exposition(source, def, now, pool);
    let mut requests = Requests::new(def.batch_max_bytes);
    sent.streams.begin();
    let mut points = Points {
        now: now.as_nanos(),
        temporality: def.temporality,
        streams: &mut sent.streams,
    };
    let select = &def.select;
    for (bytes, from_series) in [(&head, false), (&series, true)] {
        let mut buf = bytes.as_slice();
        while let Ok(f) = pm::MetricFamily::decode_length_delimited(&mut buf) {
            let name = f.name.as_deref().unwrap_or_default();
            let windowed = WINDOWED.iter().any(|w| w.name == name);
            let group = !from_series
                || (windowed && select.groups.windowed)
                || (!windowed && select.groups.cumulative);
            if group && select.family(name) {
                points
                    .family(&f)
                    .metrics
                    .into_iter()
                    .for_each(|m| requests.add(m));
            }
        }
    }
    sent.streams.end();
    requests.finish();
    let envelope = Envelope::of(def);
    requests
        .done
        .into_iter()
        .map(|r| envelope.batch(r))
        .collect()
}

/// The selection as delimited protobuf `MetricFamily` messages: the
/// families built in the crate's model (self, signals, fleet), and the
/// series' families.
fn exposition(
    source: &Source,
    def: &OutputDef,
    now: Timestamp,
    pool: &Arc<ChunkPool>,
) -> (Vec<u8>, Vec<u8>) {
    let (select, escaping) = (&def.select, def.escaping);
    let mut head = Vec::new();
    model_families(source, select, now, |f| {
        encode_families(f, escaping, &mut head)
    });
    let mut series = Vec::new();
    if select.groups.windowed || select.groups.cumulative {
        let kept = select.clone();
        let keep: Keep = Arc::new(move |m: &str| kept.metric(m));
        render_kept(&source.registry, now, escaping, &keep, pool, |p| {
            series.extend_from_slice(p.as_ref());
        });
    }
    (head, series)
}

/// Metrics gathered into requests of at most `max` encoded bytes.
struct Requests {
    max: usize,
    done: Vec<(Vec<Metric>, u64)>,
    metrics: Vec<Metric>,
    bytes: usize,
    points: u64,
}

impl Requests {
    fn new(max: usize) -> Requests {
        Requests {
            max,
            done: Vec::new(),
            metrics: Vec::new(),
            bytes: 0,
            points: 0,
        }
    }

    fn add(&mut self, m: Metric) {
        for (part, points) in split(m, self.max) {
            let len = part.encoded_len() + 8;
            if self.bytes + len > self.max {
                self.finish();
            }
            self.bytes += len;
            self.points += points;
            self.metrics.push(part);
        }
    }

    fn finish(&mut self) {
        if !self.metrics.is_empty() {
            let metrics = std::mem::take(&mut self.metrics);
            self.done.push((metrics, self.points));
        }
        self.bytes = 0;
        self.points = 0;
    }
}

/// `m` in parts of at most about `max` encoded bytes each (cut between
/// data points), each with its count of points.
fn split(m: Metric, max: usize) -> Vec<(Metric, u64)> {
    let Metric {
        name,
        description,
        unit,
        metadata,
        data,
    } = m;
    let part = |data: Data| Metric {
        name: name.clone(),
        description: description.clone(),
        unit: unit.clone(),
        metadata: metadata.clone(),
        data: Some(data),
    };
    let parts: Vec<(Data, u64)> = match data {
        None => Vec::new(),
        Some(Data::Gauge(g)) => chunks(g.data_points, max, |p| {
            Data::Gauge(Gauge { data_points: p })
        }),
        Some(Data::Sum(s)) => chunks(s.data_points, max, |p| {
            Data::Sum(Sum {
                data_points: p,
                aggregation_temporality: s.aggregation_temporality,
                is_monotonic: s.is_monotonic,
            })
        }),
        Some(Data::Histogram(h)) => chunks(h.data_points, max, |p| {
            Data::Histogram(Histogram {
                data_points: p,
                aggregation_temporality: h.aggregation_temporality,
            })
        }),
        Some(Data::ExponentialHistogram(h)) => chunks(h.data_points, max, |p| {
            Data::ExponentialHistogram(ExponentialHistogram {
                data_points: p,
                aggregation_temporality: h.aggregation_temporality,
            })
        }),
        Some(Data::Summary(s)) => chunks(s.data_points, max, |p| {
            Data::Summary(Summary { data_points: p })
        }),
    };
    parts.into_iter().map(|(d, n)| (part(d), n)).collect()
}

/// `points` in runs of at most about `max` encoded bytes, each made into
/// data by `wrap`.
fn chunks<P: prost::Message>(
    points: Vec<P>,
    max: usize,
    wrap: impl Fn(Vec<P>) -> Data,
) -> Vec<(Data, u64)> {
    let mut out = Vec::new();
    let (mut run, mut bytes) = (Vec::new(), 0);
    for p in points {
        let len = p.encoded_len() + 4;
        if bytes + len > max / 2 && !run.is_empty() {
            let n = run.len() as u64;
            out.push((wrap(std::mem::take(&mut run)), n));
            bytes = 0;
        }
        bytes += len;
        run.push(p);
    }
    if !run.is_empty() {
        let n = run.len() as u64;
        out.push((wrap(run), n));
    }
    out
}

/// What every request of an output carries around its metrics: the
/// resource and the scope.
struct Envelope {
    resource: Resource,
    scope: InstrumentationScope,
}

impl Envelope {
    fn of(def: &OutputDef) -> Envelope {
        let attribute = |(k, v): &(String, String)| KeyValue {
            key: k.clone(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.clone())),
            }),
            ..KeyValue::default()
        };
        Envelope {
            resource: Resource {
                attributes: def.resource.iter().map(attribute).collect(),
                ..Resource::default()
            },
            scope: InstrumentationScope {
                name: "rollstat".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                ..InstrumentationScope::default()
            },
        }
    }

    /// `metrics` as one gzipped request.
    fn batch(&self, (metrics, points): (Vec<Metric>, u64)) -> Batch {
        let request = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(self.resource.clone()),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(self.scope.clone()),
                    metrics,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        Batch {
            body: gzip(&request.encode_to_vec()).into(),
            samples: points,
            histograms: 0,
            // Read only by a fallback from remote write 2.0, which an
            // OTLP output never makes.
            protocol: Protocol::V1,
        }
    }
}

fn gzip(raw: &[u8]) -> Vec<u8> {
    let mut z = GzEncoder::new(
        Vec::with_capacity(raw.len() / 4),
        flate2::Compression::fast(),
    );
    // Writing into a Vec cannot fail.
    let _ = z.write_all(raw);
    let mut body = z.finish().unwrap_or_default();
    body.shrink_to_fit();
    body
}
