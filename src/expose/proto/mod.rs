//! `/metrics` as Prometheus protobuf: a sequence of
//! `io.prometheus.client.MetricFamily` messages, each preceded by its
//! length as a varint (`application/vnd.google.protobuf;
//! proto=io.prometheus.client.MetricFamily; encoding=delimited`).
//!
//! * `metrics.rs`: the types prost-build generates from the official
//!   `proto/metrics.proto` (committed; `tests/proto_generated.rs` fails if
//!   they differ from a fresh generation). The self-metrics, breaker,
//!   limit and fleet families, built in the `prometheus` crate's model,
//!   are converted to them and encoded by prost ([`encode_families`]).
//! * The series families are written by `ProtoWriter` field by field
//!   (`wire.rs`) from the same registry walk as the text writers
//!   (`walk.rs`), with the same samples: the protobuf form of what text
//!   shows, plus what only protobuf carries: every counter's, histogram's
//!   and summary's start time (`created_timestamp`), and the native
//!   histogram of a timer, histogram or distribution that has one, in the
//!   same `Histogram` message as its classic buckets (as client_golang and
//!   statsd_exporter send both). Classic buckets leave out `+Inf`, which
//!   is the sample count, as client_golang does.
//! * A histogram whose native histogram holds no value yet is still sent
//!   as native (its zero threshold is set and it has one empty span, as
//!   client_golang does), so a scraper never sees it change kind.

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod metrics;
pub(crate) mod wire;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use prost::Message as _;

use self::wire::{family, field, histogram, metric};
use super::buffer::{ChunkPool, Piece};
use super::escaping::{escape_label_name, is_legacy_label_name};
use super::families::{
    format_q, label_names, nth_name, Cumulative, CumulativeValue, HistogramValues, METRIC_LABEL,
    QUANTILE_FAMILY, QUANTILE_LABEL, WINDOW_LABEL,
};
use super::negotiate::Escaping;
use super::walk::{self, Head, Series, Writer, Written, PARALLEL_MIN_SERIES};
use crate::series::{Registry, SeriesMeta};
use crate::sketch::native::{spans_and_deltas, NativeHistogram};
use crate::Timestamp;

/// Writes every live series of `registry` as seen at `now` as delimited
/// `MetricFamily` messages, names escaped by `escaping`, handing each
/// piece to `emit` as soon as it is final (see `walk.rs`).
pub fn render_each(
    registry: &Registry,
    now: Timestamp,
    escaping: Escaping,
    threads: usize,
    pool: &Arc<ChunkPool>,
    emit: impl FnMut(Piece),
) -> Written {
    render_with(
        registry,
        now,
        escaping,
        threads,
        pool,
        PARALLEL_MIN_SERIES,
        emit,
    )
}

/// Which series a render keeps, by statsd name (after mapping).
pub type Keep = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// [`render_each`] of the series `keep` accepts only, on one thread: what
/// an OTLP push reads (see `output/batch_otlp.rs`).
pub fn render_kept(
    registry: &Registry,
    now: Timestamp,
    escaping: Escaping,
    keep: &Keep,
    pool: &Arc<ChunkPool>,
    emit: impl FnMut(Piece),
) -> Written {
    walk::render(
        registry,
        now,
        |quantiles| ProtoWriter::new(quantiles, escaping).keeping(keep.clone()),
        1,
        pool,
        PARALLEL_MIN_SERIES,
        emit,
    )
}

fn render_with(
    registry: &Registry,
    now: Timestamp,
    escaping: Escaping,
    threads: usize,
    pool: &Arc<ChunkPool>,
    parallel_min_series: usize,
    emit: impl FnMut(Piece),
) -> Written {
    walk::render(
        registry,
        now,
        |quantiles| ProtoWriter::new(quantiles, escaping),
        threads,
        pool,
        parallel_min_series,
        emit,
    )
}

/// One thread's protobuf writer: the label fields of the series and window
/// being written, and scratch space for nested messages.
struct ProtoWriter {
    escaping: Escaping,
    /// The series written, when not all.
    keep: Option<Keep>,
    /// The `q` label field per configured quantile, written once.
    q_labels: Vec<Vec<u8>>,
    /// The series' tags as `LabelPair` fields.
    tags: Vec<u8>,
    /// The `metric` label field of the current series.
    head: Vec<u8>,
    /// `metric`, `window` and the tags: every label of a windowed sample
    /// of the current window but `q`.
    block: Vec<u8>,
    /// The series' label names ([`label_names`]), and where each ends.
    name: Vec<u8>,
    ends: Vec<usize>,
    /// The body of a `Metric`'s value message (`Histogram`, ...).
    inner: Vec<u8>,
    /// The body of a `Metric`.
    body: Vec<u8>,
}

impl ProtoWriter {
    fn new(quantiles: &[f64], escaping: Escaping) -> ProtoWriter {
        let q_label = |q: f64| {
            let mut l = Vec::new();
            wire::label(&mut l, QUANTILE_LABEL.as_bytes(), format_q(q).as_bytes());
            l
        };
        ProtoWriter {
            escaping,
            keep: None,
            q_labels: quantiles.iter().map(|q| q_label(*q)).collect(),
            tags: Vec::with_capacity(256),
            head: Vec::with_capacity(128),
            block: Vec::with_capacity(256),
            name: Vec::with_capacity(256),
            ends: Vec::with_capacity(16),
            inner: Vec::with_capacity(256),
            body: Vec::with_capacity(512),
        }
    }

    fn keeping(mut self, keep: Keep) -> ProtoWriter {
        self.keep = Some(keep);
        self
    }
}

/// Bytes of a `Metric` field holding a gauge or counter value: the field's
/// key, its length (9) and the value's key and 8 bytes.
const VALUE_FIELD: usize = 11;

impl Writer for ProtoWriter {
    fn series(&mut self, meta: &SeriesMeta) {
        self.tags.clear();
        label_names(&mut self.name, &mut self.ends, meta, self.escaping);
        for (i, (_, v)) in meta.labels.iter().enumerate() {
            let name = nth_name(&self.name, &self.ends, i);
            wire::label(&mut self.tags, name, v.as_bytes());
        }
        self.head.clear();
        wire::label(
            &mut self.head,
            METRIC_LABEL.as_bytes(),
            meta.metric.as_bytes(),
        );
    }

    fn wants(&mut self, meta: &SeriesMeta) -> bool {
        self.keep.as_ref().is_none_or(|keep| keep(&meta.metric))
    }

    fn window(&mut self, _meta: &SeriesMeta, name: &str) {
        self.block.clear();
        self.block.extend_from_slice(&self.head);
        wire::label(&mut self.block, WINDOW_LABEL.as_bytes(), name.as_bytes());
        self.block.extend_from_slice(&self.tags);
    }

    fn windowed(&mut self, out: &mut Vec<u8>, family: usize, q: usize, value: f64) {
        let q_label: &[u8] = if family == QUANTILE_FAMILY {
            &self.q_labels[q]
        } else {
            &[]
        };
        let len = self.block.len() + q_label.len() + VALUE_FIELD;
        wire::nested(out, family::METRIC, len, |out| {
            out.extend_from_slice(&self.block);
            out.extend_from_slice(q_label);
            wire::nested(out, metric::GAUGE, 9, |out| {
                wire::double(out, field::VALUE, value);
            });
        });
    }

    fn escaping(&self) -> Escaping {
        self.escaping
    }

    fn cumulative(&mut self, out: &mut Vec<u8>, s: &Series<'_>) {
        let Series {
            base: _,
            family,
            value,
            meta,
            state,
            now,
        } = *s;
        let created = meta.created.as_nanos();
        let (secs, nanos) = (created / 1_000_000_000, (created % 1_000_000_000) as u32);
        let inner = &mut self.inner;
        inner.clear();
        let key = match value {
            CumulativeValue::Counter(total) => {
                wire::double(inner, field::VALUE, total);
                wire::timestamp(inner, field::COUNTER_CREATED, secs, nanos);
                metric::COUNTER
            }
            CumulativeValue::Gauge(v) => {
                wire::double(inner, field::VALUE, v);
                metric::GAUGE
            }
            CumulativeValue::Histogram(h) if family == Cumulative::Summary => {
                wire::uint(inner, field::SUMMARY_COUNT, h.count());
                wire::double(inner, field::SUMMARY_SUM, h.sum());
                let qs = meta.summary.as_ref().map_or(&[][..], |s| &s.quantiles[..]);
                for (q, v) in state.summary_quantiles(qs, now).unwrap_or_default() {
                    wire::nested(inner, field::SUMMARY_QUANTILE, 18, |out| {
                        wire::double(out, field::QUANTILE_Q, q);
                        wire::double(out, field::QUANTILE_VALUE, v);
                    });
                }
                wire::timestamp(inner, field::SUMMARY_CREATED, secs, nanos);
                metric::SUMMARY
            }
            CumulativeValue::Histogram(h) => {
                histogram_body(inner, &h);
                wire::timestamp(inner, histogram::CREATED, secs, nanos);
                metric::HISTOGRAM
            }
        };
        let body = &mut self.body;
        body.clear();
        body.extend_from_slice(&self.tags);
        wire::bytes(body, key, inner);
        wire::bytes(out, family::METRIC, body);
    }

    fn header(&self, out: &mut Vec<u8>, head: &Head<'_>, body_len: usize) {
        let (suffix, kind) = match head.family {
            Some(f) => (f.suffix(), metric_type(f)),
            None => ("", metrics::MetricType::Gauge),
        };
        let name_len = head.name.len() + suffix.len();
        let help_len: usize = head.help.iter().map(|s| s.len()).sum();
        let fields = 1
            + wire::varint_len(name_len as u64)
            + name_len
            + 1
            + wire::varint_len(help_len as u64)
            + help_len
            + 2;
        wire::varint(out, (fields + body_len) as u64);
        out.push(family::NAME);
        wire::varint(out, name_len as u64);
        out.extend_from_slice(head.name);
        out.extend_from_slice(suffix.as_bytes());
        out.push(family::HELP);
        wire::varint(out, help_len as u64);
        for part in head.help {
            out.extend_from_slice(part.as_bytes());
        }
        // Every type's number is below 128: one byte.
        wire::uint(out, family::TYPE, kind as u64);
    }
}

/// The `MetricType` of a cumulative family (a counter named as it is, which
/// OpenMetrics must call `unknown`, is a counter here: protobuf has no
/// `_total` rule).
fn metric_type(f: Cumulative) -> metrics::MetricType {
    match f {
        Cumulative::Counter | Cumulative::CounterAsIs => metrics::MetricType::Counter,
        Cumulative::Gauge => metrics::MetricType::Gauge,
        Cumulative::Histogram => metrics::MetricType::Histogram,
        Cumulative::Summary => metrics::MetricType::Summary,
    }
}

/// The fields of a `Histogram` message but its start time: count and sum,
/// the classic buckets, and the native histogram if the series has one.
///
/// The message has one sample count for both kinds of buckets: the classic
/// count (`_count` in text). Prometheus requires a native histogram's
/// buckets to add up to it; they do, since the native histogram counts
/// each weight rounded and carries the rest (see
/// `CumulativeHistogram::observe`), which keeps its total at the weighted
/// count rounded. Should float rounding ever part the two at a half, the
/// native total is sent and a classic bucket capped at it, so the message
/// stays valid.
fn histogram_body(out: &mut Vec<u8>, h: &HistogramValues<'_>) {
    let native = h.native();
    let count = native.map_or_else(|| h.count(), |n| n.total_weight().round() as u64);
    wire::uint(out, histogram::SAMPLE_COUNT, count);
    wire::double(out, histogram::SAMPLE_SUM, h.sum());
    for (ub, cum) in h.buckets() {
        let cum = cum.min(count);
        let len = 1 + wire::varint_len(cum) + 9;
        wire::nested(out, histogram::BUCKET, len, |out| {
            wire::uint(out, field::BUCKET_COUNT, cum);
            wire::double(out, field::BUCKET_BOUND, ub);
        });
    }
    if let Some(n) = native {
        native_fields(out, n, count);
    }
}

/// A native histogram's fields, its counts made whole so that they add up
/// to `count`, the sample count the classic buckets share.
fn native_fields(out: &mut Vec<u8>, n: &NativeHistogram, count: u64) {
    let counts = n.integer_counts(count);
    wire::uint(out, histogram::SCHEMA, wire::zigzag(i64::from(n.schema())));
    wire::double(out, histogram::ZERO_THRESHOLD, n.zero_threshold());
    wire::uint(out, histogram::ZERO_COUNT, counts.zero);
    fn side(out: &mut Vec<u8>, buckets: &[(i32, u64)], span_key: u8, delta_key: u8) {
        let (spans, deltas) = spans_and_deltas(buckets);
        for (offset, length) in spans {
            let offset = wire::zigzag(i64::from(offset));
            let len = 2 + wire::varint_len(offset) + wire::varint_len(u64::from(length));
            wire::nested(out, span_key, len, |out| {
                wire::uint(out, field::SPAN_OFFSET, offset);
                wire::uint(out, field::SPAN_LENGTH, u64::from(length));
            });
        }
        for d in deltas {
            wire::uint(out, delta_key, wire::zigzag(d));
        }
    }
    side(
        out,
        &counts.negative,
        histogram::NEGATIVE_SPAN,
        histogram::NEGATIVE_DELTA,
    );
    if counts.positive.is_empty() && counts.negative.is_empty() {
        // No bucket yet: one empty span marks the histogram as native.
        wire::nested(out, histogram::POSITIVE_SPAN, 4, |out| {
            wire::uint(out, field::SPAN_OFFSET, 0);
            wire::uint(out, field::SPAN_LENGTH, 0);
        });
    }
    side(
        out,
        &counts.positive,
        histogram::POSITIVE_SPAN,
        histogram::POSITIVE_DELTA,
    );
}

/// Appends `families` (built in the `prometheus` crate's model: the
/// self-metrics, breakers, limits and fleet view) as delimited
/// `MetricFamily` messages through the generated types, label names
/// escaped by `escaping` (every name there is a legacy one but the fleet
/// view's tags).
pub fn encode_families(
    families: &[prometheus::proto::MetricFamily],
    escaping: Escaping,
    out: &mut Vec<u8>,
) {
    for f in families {
        let m = convert(f, escaping);
        // Encoding into a Vec cannot run out of room.
        let _ = m.encode_length_delimited(out);
    }
}

/// `f` as the generated type.
fn convert(f: &prometheus::proto::MetricFamily, escaping: Escaping) -> metrics::MetricFamily {
    use prometheus::proto::MetricType as T;
    let kind = match f.get_field_type() {
        T::COUNTER => metrics::MetricType::Counter,
        T::GAUGE => metrics::MetricType::Gauge,
        T::SUMMARY => metrics::MetricType::Summary,
        T::UNTYPED => metrics::MetricType::Untyped,
        T::HISTOGRAM => metrics::MetricType::Histogram,
    };
    // Every label name there is a legacy one (the fleet view's are the
    // sanitised tag keys), which each scheme leaves as it is, as text does.
    let label = |l: &prometheus::proto::LabelPair| {
        let name = if is_legacy_label_name(l.name()) {
            l.name().to_string()
        } else {
            let mut name = Vec::new();
            escape_label_name(&mut name, l.name(), escaping);
            String::from_utf8(name).unwrap_or_default()
        };
        metrics::LabelPair {
            name: Some(name),
            value: Some(l.value().to_string()),
        }
    };
    let metric = |m: &prometheus::proto::Metric| {
        let mut out = metrics::Metric {
            label: m.get_label().iter().map(label).collect(),
            ..Default::default()
        };
        match kind {
            metrics::MetricType::Counter => {
                out.counter = Some(metrics::Counter {
                    value: Some(m.get_counter().get_value()),
                    ..Default::default()
                });
            }
            metrics::MetricType::Gauge => {
                out.gauge = Some(metrics::Gauge {
                    value: Some(m.get_gauge().get_value()),
                });
            }
            metrics::MetricType::Summary => {
                let s = m.get_summary();
                out.summary = Some(metrics::Summary {
                    sample_count: Some(s.sample_count()),
                    sample_sum: Some(s.sample_sum()),
                    quantile: s
                        .get_quantile()
                        .iter()
                        .map(|q| metrics::Quantile {
                            quantile: Some(q.quantile()),
                            value: Some(q.value()),
                        })
                        .collect(),
                    ..Default::default()
                });
            }
            metrics::MetricType::Histogram => {
                let h = m.get_histogram();
                out.histogram = Some(metrics::Histogram {
                    sample_count: Some(h.get_sample_count()),
                    sample_sum: Some(h.get_sample_sum()),
                    bucket: h
                        .get_bucket()
                        .iter()
                        .map(|b| metrics::Bucket {
                            cumulative_count: Some(b.cumulative_count()),
                            upper_bound: Some(b.upper_bound()),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                });
            }
            metrics::MetricType::Untyped | metrics::MetricType::GaugeHistogram => {
                // rollstat makes no untyped family; the crate marks its
                // untyped accessors deprecated.
                #[allow(deprecated)]
                let value = Some(m.get_untyped().get_value());
                out.untyped = Some(metrics::Untyped { value });
            }
        }
        out
    };
    metrics::MetricFamily {
        name: Some(f.name().to_string()),
        help: Some(f.help().to_string()),
        r#type: Some(kind as i32),
        metric: f.get_metric().iter().map(metric).collect(),
        unit: None,
    }
}
