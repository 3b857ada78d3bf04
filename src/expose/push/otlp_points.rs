//! One family `/metrics` serves as OTLP metrics: the family as the
//! Prometheus protobuf exposition writes it (`expose/proto`), so that its
//! names, labels and values are those a scrape reads at the same instant.
//!
//! * gauges and untyped families: `Gauge` (the windowed families among
//!   them, the window an attribute like every other label);
//! * counters: monotonic `Sum`;
//! * histograms: `Histogram` (explicit bounds, counts per bucket, not
//!   cumulative) for the classic buckets, and `ExponentialHistogram` at
//!   the same scale for a native histogram (OTLP's bucket `k` is
//!   Prometheus' bucket `k + 1`: both cover `(base^k, base^(k+1)]`);
//! * summaries: `Summary`.
//!
//! Sums and histograms carry each stream's start time (its own, or when
//! the output first saw it) and are cumulative, or delta with
//! [`Temporality::Delta`] (see `otlp_streams.rs`).

use super::otlp_streams::{stream_id, Reading, Streams, Temporality};
use crate::expose::proto::metrics as pm;
use crate::otlp::proto::opentelemetry::proto::common::v1::{any_value, AnyValue, KeyValue};
use crate::otlp::proto::opentelemetry::proto::metrics::v1::{
    exponential_histogram_data_point::Buckets, metric::Data, number_data_point,
    summary_data_point::ValueAtQuantile, AggregationTemporality, ExponentialHistogram,
    ExponentialHistogramDataPoint, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    Sum, Summary, SummaryDataPoint,
};

/// Slot keys of a native histogram's zero bucket, and of its negative
/// buckets (`NEGATIVE + index`); positive ones are their index.
const ZERO_SLOT: i64 = i64::MIN;
const NEGATIVE: i64 = 1 << 40;

/// Stream kinds, so that a classic and a native histogram of one series
/// are two streams.
const CLASSIC: u8 = 1;
const NATIVE: u8 = 2;
const COUNTER: u8 = 3;
const SUMMARY: u8 = 4;

/// Turns families into OTLP metrics for one push at `now` (Unix ns).
pub struct Points<'a> {
    /// The push's time: each point's time unless it carries its own.
    pub now: u64,
    /// Cumulative or delta sums and histograms.
    pub temporality: Temporality,
    /// The output's memory of its streams.
    pub streams: &'a mut Streams,
}

/// One converted family: its metrics and their data points.
#[derive(Debug, Default)]
pub struct Converted {
    /// One metric, or two for histograms with both kinds.
    pub metrics: Vec<Metric>,
    /// Data points among them.
    pub points: u64,
}

impl Points<'_> {
    /// `f` as OTLP metrics.
    pub fn family(&mut self, f: &pm::MetricFamily) -> Converted {
        let kind = f.r#type.and_then(|t| pm::MetricType::try_from(t).ok());
        let mut out = Converted::default();
        match kind.unwrap_or(pm::MetricType::Untyped) {
            pm::MetricType::Counter => self.sums(f, &mut out),
            pm::MetricType::Summary => self.summaries(f, &mut out),
            pm::MetricType::Histogram | pm::MetricType::GaugeHistogram => {
                self.classic(f, &mut out);
                self.native(f, &mut out);
            }
            _ => gauges(f, self.now, &mut out),
        }
        out
    }

    fn temporality(&self) -> i32 {
        match self.temporality {
            Temporality::Cumulative => AggregationTemporality::Cumulative as i32,
            Temporality::Delta => AggregationTemporality::Delta as i32,
        }
    }

    /// The start and the reading to send of stream `id` (its cumulative
    /// reading `cur`), or `None` if a delta has nothing to say yet.
    fn reading(&mut self, id: u64, cur: Reading) -> Option<(u64, Reading)> {
        match self.temporality {
            Temporality::Cumulative => Some((self.streams.start(id, cur.start, self.now), cur)),
            Temporality::Delta => self.streams.delta(id, cur, self.now),
        }
    }

    fn sums(&mut self, f: &pm::MetricFamily, out: &mut Converted) {
        let mut points = Vec::new();
        for m in &f.metric {
            let Some(c) = &m.counter else { continue };
            let cur = Reading {
                start: nanos(c.created_timestamp.as_ref()),
                count: c.value.unwrap_or(0.0),
                ..Reading::default()
            };
            let Some((start, r)) = self.reading(id(f, COUNTER, m), cur) else {
                continue;
            };
            points.push(NumberDataPoint {
                attributes: attributes(m),
                start_time_unix_nano: start,
                time_unix_nano: time(m, self.now),
                value: Some(number_data_point::Value::AsDouble(r.count)),
                ..NumberDataPoint::default()
            });
        }
        let data = Data::Sum(Sum {
            data_points: Vec::new(),
            aggregation_temporality: self.temporality(),
            is_monotonic: true,
        });
        out.push(f, data, points.len(), |d| {
            if let Data::Sum(s) = d {
                s.data_points = points;
            }
        });
    }

    fn summaries(&mut self, f: &pm::MetricFamily, out: &mut Converted) {
        let mut points = Vec::new();
        for m in &f.metric {
            let Some(s) = &m.summary else { continue };
            let own = nanos(s.created_timestamp.as_ref());
            let start = self.streams.start(id(f, SUMMARY, m), own, self.now);
            let quantile_values = s
                .quantile
                .iter()
                .map(|q| ValueAtQuantile {
                    quantile: q.quantile.unwrap_or(0.0),
                    value: q.value.unwrap_or(0.0),
                })
                .collect();
            points.push(SummaryDataPoint {
                attributes: attributes(m),
                start_time_unix_nano: start,
                time_unix_nano: time(m, self.now),
                count: s.sample_count.unwrap_or(0),
                sum: s.sample_sum.unwrap_or(0.0),
                quantile_values,
                flags: 0,
            });
        }
        let data = Data::Summary(Summary {
            data_points: Vec::new(),
        });
        out.push(f, data, points.len(), |d| {
            if let Data::Summary(s) = d {
                s.data_points = points;
            }
        });
    }

    /// The classic buckets, unless the histogram has only native ones.
    fn classic(&mut self, f: &pm::MetricFamily, out: &mut Converted) {
        let mut points = Vec::new();
        for m in &f.metric {
            let Some(h) = &m.histogram else { continue };
            if h.bucket.is_empty() && h.schema.is_some() {
                continue;
            }
            let bounds: Vec<f64> = h
                .bucket
                .iter()
                .filter_map(|b| b.upper_bound)
                .filter(|b| *b != f64::INFINITY)
                .collect();
            let count = h.sample_count.unwrap_or(0) as f64;
            let mut slots: Vec<(i64, f64)> = h
                .bucket
                .iter()
                .take(bounds.len())
                .enumerate()
                .map(|(i, b)| (i as i64, b.cumulative_count.unwrap_or(0) as f64))
                .collect();
            slots.push((bounds.len() as i64, count));
            let cur = Reading {
                start: nanos(h.created_timestamp.as_ref()),
                count,
                sum: h.sample_sum.unwrap_or(0.0),
                slots,
            };
            let Some((start, r)) = self.reading(id(f, CLASSIC, m), cur) else {
                continue;
            };
            let mut below = 0.0;
            let bucket_counts = r
                .slots
                .iter()
                .map(|(_, cum)| {
                    let n = (cum - below).max(0.0);
                    below = *cum;
                    n as u64
                })
                .collect();
            points.push(HistogramDataPoint {
                attributes: attributes(m),
                start_time_unix_nano: start,
                time_unix_nano: time(m, self.now),
                count: r.count as u64,
                sum: Some(r.sum),
                bucket_counts,
                explicit_bounds: bounds,
                ..HistogramDataPoint::default()
            });
        }
        let data = Data::Histogram(Histogram {
            data_points: Vec::new(),
            aggregation_temporality: self.temporality(),
        });
        out.push(f, data, points.len(), |d| {
            if let Data::Histogram(s) = d {
                s.data_points = points;
            }
        });
    }

    /// The native histograms, at their own scale.
    fn native(&mut self, f: &pm::MetricFamily, out: &mut Converted) {
        let mut points = Vec::new();
        for m in &f.metric {
            let Some(h) = &m.histogram else { continue };
            let Some(scale) = h.schema else { continue };
            let mut slots = vec![(ZERO_SLOT, h.zero_count.unwrap_or(0) as f64)];
            let negative = buckets(&h.negative_span, &h.negative_delta);
            slots.extend(negative.iter().map(|(i, n)| (NEGATIVE + i, *n as f64)));
            slots.extend(
                buckets(&h.positive_span, &h.positive_delta)
                    .iter()
                    .map(|(i, n)| (*i, *n as f64)),
            );
            slots.sort_by_key(|(k, _)| *k);
            let cur = Reading {
                start: nanos(h.created_timestamp.as_ref()),
                count: h.sample_count.unwrap_or(0) as f64,
                sum: h.sample_sum.unwrap_or(0.0),
                slots,
            };
            let Some((start, r)) = self.reading(id(f, NATIVE, m), cur) else {
                continue;
            };
            points.push(exponential(m, &r, scale, h.zero_threshold, start, self.now));
        }
        let data = Data::ExponentialHistogram(ExponentialHistogram {
            data_points: Vec::new(),
            aggregation_temporality: self.temporality(),
        });
        out.push(f, data, points.len(), |d| {
            if let Data::ExponentialHistogram(s) = d {
                s.data_points = points;
            }
        });
    }
}

impl Converted {
    /// Adds a metric of `f` holding `data` once `fill` has put its `n`
    /// points in, unless it has none.
    fn push(
        &mut self,
        f: &pm::MetricFamily,
        mut data: Data,
        n: usize,
        fill: impl FnOnce(&mut Data),
    ) {
        if n == 0 {
            return;
        }
        fill(&mut data);
        self.points += n as u64;
        self.metrics.push(Metric {
            name: f.name.clone().unwrap_or_default(),
            description: f.help.clone().unwrap_or_default(),
            unit: f.unit.clone().unwrap_or_default(),
            metadata: Vec::new(),
            data: Some(data),
        });
    }
}

fn gauges(f: &pm::MetricFamily, now: u64, out: &mut Converted) {
    let points: Vec<NumberDataPoint> = f
        .metric
        .iter()
        .filter_map(|m| {
            let v = m
                .gauge
                .as_ref()
                .and_then(|g| g.value)
                .or_else(|| m.untyped.as_ref().and_then(|u| u.value))?;
            Some(NumberDataPoint {
                attributes: attributes(m),
                time_unix_nano: time(m, now),
                value: Some(number_data_point::Value::AsDouble(v)),
                ..NumberDataPoint::default()
            })
        })
        .collect();
    let data = Data::Gauge(Gauge {
        data_points: Vec::new(),
    });
    out.push(f, data, points.len(), |d| {
        if let Data::Gauge(g) = d {
            g.data_points = points;
        }
    });
}

/// An exponential histogram point from reading `r` of native slots.
fn exponential(
    m: &pm::Metric,
    r: &Reading,
    scale: i32,
    zero_threshold: Option<f64>,
    start: u64,
    now: u64,
) -> ExponentialHistogramDataPoint {
    let slot = |k: i64| {
        r.slots
            .iter()
            .find(|(s, _)| *s == k)
            .map_or(0.0, |(_, n)| *n)
    };
    // Positive slots are keyed by their index, negative ones by
    // `NEGATIVE + index`: each side is the keys within half of `NEGATIVE`
    // of its base.
    let side = |base: i64| {
        let half = NEGATIVE / 2;
        let mine: Vec<(i64, u64)> = r
            .slots
            .iter()
            .filter(|(k, _)| (base - half..base + half).contains(k))
            .map(|(k, n)| (k - base, n.max(0.0) as u64))
            .collect();
        dense(&mine)
    };
    ExponentialHistogramDataPoint {
        attributes: attributes(m),
        start_time_unix_nano: start,
        time_unix_nano: time(m, now),
        count: r.count as u64,
        sum: Some(r.sum),
        scale,
        zero_count: slot(ZERO_SLOT).max(0.0) as u64,
        positive: side(0),
        negative: side(NEGATIVE),
        zero_threshold: zero_threshold.unwrap_or(0.0),
        ..ExponentialHistogramDataPoint::default()
    }
}

/// Prometheus bucket counts by index as OTLP's dense buckets: offset one
/// below the first index, zeros in the gaps.
fn dense(buckets: &[(i64, u64)]) -> Option<Buckets> {
    let (first, last) = (buckets.first()?.0, buckets.last()?.0);
    let mut counts = vec![0; (last - first + 1) as usize];
    for (i, n) in buckets {
        counts[(i - first) as usize] = *n;
    }
    Some(Buckets {
        offset: (first - 1) as i32,
        bucket_counts: counts,
    })
}

/// A native histogram side's spans and deltas as (index, count) pairs.
fn buckets(spans: &[pm::BucketSpan], deltas: &[i64]) -> Vec<(i64, u64)> {
    let mut out = Vec::with_capacity(deltas.len());
    let (mut index, mut count, mut d) = (0i64, 0i64, deltas.iter());
    for span in spans {
        index += i64::from(span.offset.unwrap_or(0));
        for _ in 0..span.length.unwrap_or(0) {
            count += d.next().copied().unwrap_or(0);
            out.push((index, count.max(0) as u64));
            index += 1;
        }
    }
    out
}

fn id(f: &pm::MetricFamily, kind: u8, m: &pm::Metric) -> u64 {
    let labels = m.label.iter().map(|l| {
        let name = l.name.as_deref().unwrap_or_default();
        (name, l.value.as_deref().unwrap_or_default())
    });
    stream_id(f.name.as_deref().unwrap_or_default(), kind, labels)
}

fn attributes(m: &pm::Metric) -> Vec<KeyValue> {
    m.label
        .iter()
        .map(|l| KeyValue {
            key: l.name.clone().unwrap_or_default(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(
                    l.value.clone().unwrap_or_default(),
                )),
            }),
            ..KeyValue::default()
        })
        .collect()
}

/// A point's time: its own timestamp, else the push's.
fn time(m: &pm::Metric, now: u64) -> u64 {
    m.timestamp_ms
        .and_then(|ms| u64::try_from(ms).ok())
        .map_or(now, |ms| ms * 1_000_000)
}

fn nanos(t: Option<&prost_types::Timestamp>) -> u64 {
    t.map_or(0, |t| {
        u64::try_from(t.seconds).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.nanos).unwrap_or(0)
    })
}
