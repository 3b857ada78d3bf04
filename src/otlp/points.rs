//! The data points of an OTLP metrics request, one at a time, with the
//! name and tags their series has: the walk from `ResourceMetrics` down,
//! and the checks that a point can be a statsd-like sample at all.
//!
//! **Tags.** A point's attributes, then the resource attributes
//! [`ReadSettings::resource_labels`] keeps (each under its label name;
//! an attribute of the point with that name wins). String values are
//! kept as sent; booleans, integers and doubles as their text; other
//! values (arrays, maps, bytes) refuse the point.
//!
//! **Streams.** Each point also carries the hash of its stream: the
//! resource's and the point's attributes, the scope's name and version and
//! the metric's name, as OTLP identifies a stream. Two instances of one
//! service are two streams (their cumulative values are turned into
//! increments apart) of one series.
//!
//! **Time.** A point is applied when it arrives, as a statsd line is;
//! its `time_unix_nano` only decides whether it is [`Reject::TooOld`]
//! (older than the oldest bucket of every window) or [`Reject::TooNew`]
//! (further ahead than the tolerance). Points flagged "no recorded
//! value" are skipped (counted nowhere: the sender says it has nothing).

use std::borrow::Cow;
use std::hash::{BuildHasher, Hash, Hasher};
use std::time::Duration;

use super::proto::opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest;
use super::proto::opentelemetry::proto::common::v1::{any_value, KeyValue};
use super::proto::opentelemetry::proto::metrics::v1::{
    metric, number_data_point, AggregationTemporality, ExponentialHistogramDataPoint,
    HistogramDataPoint, Metric, SummaryDataPoint,
};
use super::reject::Reject;
use crate::clock::Timestamp;
use crate::parse::{MAX_NAME_LEN, MAX_TAGS, MAX_TAG_KEY_LEN, MAX_TAG_VALUE_LEN};

/// `DataPointFlags.FLAG_NO_RECORDED_VALUE`.
const NO_RECORDED_VALUE: u32 = 1;

/// How points are read.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadSettings {
    /// `(resource attribute, label)`: resource attributes kept as tags.
    pub resource_labels: Vec<(String, String)>,
    /// Points older than this before now are too old (the longest window).
    pub max_age: Duration,
    /// Points newer than this after now are too new.
    pub max_ahead: Duration,
}

/// One data point, ready for its series.
#[derive(Debug)]
pub struct Point<'r> {
    /// The metric's name.
    pub name: &'r str,
    /// `(key, value)` as the series' tags.
    pub tags: Vec<(&'r str, Cow<'r, str>)>,
    /// The hash of its stream.
    pub stream: u64,
    /// Its start time, Unix nanoseconds (0: not sent).
    pub start: u64,
    /// Its value.
    pub data: Data<'r>,
}

/// What a point holds.
#[derive(Clone, Copy, Debug)]
pub enum Data<'r> {
    /// A gauge's value.
    Gauge(f64),
    /// A sum's value.
    Sum {
        /// The value (an increment when not cumulative).
        value: f64,
        /// Only goes up.
        monotonic: bool,
        /// A running total since `start`, not an increment.
        cumulative: bool,
    },
    /// An explicit-bounds histogram.
    Histogram(&'r HistogramDataPoint, bool),
    /// An exponential histogram.
    Exponential(&'r ExponentialHistogramDataPoint, bool),
    /// A summary (cumulative, as OTLP defines it).
    Summary(&'r SummaryDataPoint),
}

/// The reading of one request: what it needs besides the request.
pub struct Reader<'s, H> {
    /// How to read.
    pub settings: &'s ReadSettings,
    /// The stream hasher (randomly keyed: a sender cannot aim collisions).
    pub hasher: &'s H,
    /// Now, by rollstat's clock.
    pub now: Timestamp,
}

impl<H: BuildHasher> Reader<'_, H> {
    /// Calls `each` with every data point of `req` in order, or with why
    /// it cannot be read.
    pub fn read<'r>(
        &'r self,
        req: &'r ExportMetricsServiceRequest,
        mut each: impl FnMut(Result<Point<'r>, Reject>),
    ) {
        for rm in &req.resource_metrics {
            let resource = rm.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
            let mut h = self.hasher.build_hasher();
            hash_attributes(&mut h, resource);
            let of_resource = h.finish();
            for sm in &rm.scope_metrics {
                let mut h = self.hasher.build_hasher();
                of_resource.hash(&mut h);
                if let Some(s) = &sm.scope {
                    (&s.name, &s.version).hash(&mut h);
                }
                let stream = h.finish();
                for m in &sm.metrics {
                    let ctx = Context { resource, stream };
                    self.metric(m, &ctx, &mut each);
                }
            }
        }
    }

    fn metric<'r>(
        &'r self,
        m: &'r Metric,
        ctx: &Context<'r>,
        each: &mut impl FnMut(Result<Point<'r>, Reject>),
    ) {
        use metric::Data as D;
        let Some(data) = &m.data else {
            return each(Err(Reject::BadTemporality));
        };
        let cumulative = |t: i32| match AggregationTemporality::try_from(t) {
            Ok(AggregationTemporality::Cumulative) => Some(true),
            Ok(AggregationTemporality::Delta) => Some(false),
            _ => None,
        };
        let mut emit = |attrs, start, time, flags, d: Option<Data<'r>>| {
            if flags & NO_RECORDED_VALUE != 0 {
                return;
            }
            let point = d
                .ok_or(Reject::BadTemporality)
                .and_then(|d| self.point(m, ctx, attrs, start, time, d));
            each(point);
        };
        match data {
            D::Gauge(g) => {
                for p in &g.data_points {
                    let d = Data::Gauge(number(p.value).unwrap_or(f64::NAN));
                    emit(
                        &p.attributes,
                        p.start_time_unix_nano,
                        p.time_unix_nano,
                        p.flags,
                        Some(d),
                    );
                }
            }
            D::Sum(s) => {
                let c = cumulative(s.aggregation_temporality);
                for p in &s.data_points {
                    let d = c.map(|cumulative| Data::Sum {
                        value: number(p.value).unwrap_or(f64::NAN),
                        monotonic: s.is_monotonic,
                        cumulative,
                    });
                    emit(
                        &p.attributes,
                        p.start_time_unix_nano,
                        p.time_unix_nano,
                        p.flags,
                        d,
                    );
                }
            }
            D::Histogram(h) => {
                let c = cumulative(h.aggregation_temporality);
                for p in &h.data_points {
                    let d = c.map(|c| Data::Histogram(p, c));
                    emit(
                        &p.attributes,
                        p.start_time_unix_nano,
                        p.time_unix_nano,
                        p.flags,
                        d,
                    );
                }
            }
            D::ExponentialHistogram(h) => {
                let c = cumulative(h.aggregation_temporality);
                for p in &h.data_points {
                    let d = c.map(|c| Data::Exponential(p, c));
                    emit(
                        &p.attributes,
                        p.start_time_unix_nano,
                        p.time_unix_nano,
                        p.flags,
                        d,
                    );
                }
            }
            D::Summary(s) => {
                for p in &s.data_points {
                    let d = Some(Data::Summary(p));
                    emit(
                        &p.attributes,
                        p.start_time_unix_nano,
                        p.time_unix_nano,
                        p.flags,
                        d,
                    );
                }
            }
        }
    }

    /// The point, checked.
    fn point<'r>(
        &'r self,
        m: &'r Metric,
        ctx: &Context<'r>,
        attrs: &'r [KeyValue],
        start: u64,
        time: u64,
        data: Data<'r>,
    ) -> Result<Point<'r>, Reject> {
        if m.name.is_empty() || m.name.len() > MAX_NAME_LEN {
            return Err(Reject::BadName);
        }
        self.check_time(time)?;
        check_values(&data)?;
        let tags = self.tags(attrs, ctx.resource)?;
        let mut h = self.hasher.build_hasher();
        (ctx.stream, &m.name).hash(&mut h);
        hash_attributes(&mut h, attrs);
        Ok(Point {
            name: &m.name,
            tags,
            stream: h.finish(),
            start,
            data,
        })
    }

    fn check_time(&self, time: u64) -> Result<(), Reject> {
        if time == 0 {
            return Ok(());
        }
        let now = self.now.as_nanos();
        let age = u64::try_from(self.settings.max_age.as_nanos()).unwrap_or(u64::MAX);
        let ahead = u64::try_from(self.settings.max_ahead.as_nanos()).unwrap_or(u64::MAX);
        if time < now.saturating_sub(age) {
            Err(Reject::TooOld)
        } else if time > now.saturating_add(ahead) {
            Err(Reject::TooNew)
        } else {
            Ok(())
        }
    }

    /// The point's attributes and the resource attributes kept, as tags.
    fn tags<'r>(
        &'r self,
        attrs: &'r [KeyValue],
        resource: &'r [KeyValue],
    ) -> Result<Vec<(&'r str, Cow<'r, str>)>, Reject> {
        let labels = &self.settings.resource_labels;
        let mut tags = Vec::with_capacity(attrs.len() + labels.len());
        for kv in attrs {
            tags.push((kv.key.as_str(), text(kv)?));
        }
        for (attr, label) in labels {
            let Some(kv) = resource.iter().find(|kv| kv.key == *attr) else {
                continue;
            };
            if !tags.iter().any(|(k, _)| *k == label.as_str()) {
                tags.push((label.as_str(), text(kv)?));
            }
        }
        if tags.len() > MAX_TAGS
            || tags.iter().any(|(k, v)| {
                k.is_empty() || k.len() > MAX_TAG_KEY_LEN || v.len() > MAX_TAG_VALUE_LEN
            })
        {
            return Err(Reject::BadAttributes);
        }
        Ok(tags)
    }
}

/// What the points of one metric share.
struct Context<'r> {
    resource: &'r [KeyValue],
    /// The hash of the resource and the scope.
    stream: u64,
}

/// A number point's value, `None` when it has none.
fn number(v: Option<number_data_point::Value>) -> Option<f64> {
    match v? {
        number_data_point::Value::AsDouble(d) => Some(d),
        number_data_point::Value::AsInt(i) => Some(i as f64),
    }
}

/// NaN, infinities and negative monotonic values refused.
fn check_values(d: &Data<'_>) -> Result<(), Reject> {
    let finite = |v: Option<f64>| v.is_none_or(f64::is_finite);
    let ok = match *d {
        Data::Gauge(v) => v.is_finite(),
        Data::Sum {
            value, monotonic, ..
        } => value.is_finite() && !(monotonic && value < 0.0),
        Data::Histogram(p, _) => finite(p.sum) && finite(p.min) && finite(p.max),
        Data::Exponential(p, _) => {
            finite(p.sum) && finite(p.min) && finite(p.max) && p.zero_threshold.is_finite()
        }
        Data::Summary(p) => {
            p.sum.is_finite() && p.quantile_values.iter().all(|q| q.value.is_finite())
        }
    };
    if ok {
        Ok(())
    } else {
        Err(Reject::BadValue)
    }
}

/// An attribute's value as tag text.
fn text(kv: &KeyValue) -> Result<Cow<'_, str>, Reject> {
    use any_value::Value as V;
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(V::StringValue(s)) => Ok(Cow::Borrowed(s)),
        Some(V::BoolValue(b)) => Ok(Cow::Borrowed(if *b { "true" } else { "false" })),
        Some(V::IntValue(i)) => Ok(Cow::Owned(i.to_string())),
        Some(V::DoubleValue(d)) => Ok(Cow::Owned(d.to_string())),
        None => Ok(Cow::Borrowed("")),
        Some(_) => Err(Reject::BadAttributes),
    }
}

fn hash_attributes(h: &mut impl Hasher, attrs: &[KeyValue]) {
    attrs.len().hash(h);
    for kv in attrs {
        kv.key.hash(h);
        match text(kv) {
            Ok(t) => t.hash(h),
            Err(_) => 0xffu8.hash(h),
        }
    }
}
