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
    HistogramDataPoint, Metric, NumberDataPoint, SummaryDataPoint,
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

/// A tag of a point: `(key, value)`, the value formatted when the
/// attribute is not a string.
pub type Tag<'r> = (&'r str, Cow<'r, str>);

/// One data point, ready for its series; its tags are in a buffer the
/// reader fills again for the next point.
#[derive(Debug)]
pub struct Point<'r, 't> {
    /// The metric's name.
    pub name: &'r str,
    /// `(key, value)` as the series' tags.
    pub tags: &'t [Tag<'r>],
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
        mut each: impl for<'t> FnMut(Result<Point<'r, 't>, Reject>),
    ) {
        // One buffer for every point's tags.
        let mut tags = Vec::new();
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
                    self.metric(m, &ctx, &mut tags, &mut each);
                }
            }
        }
    }

    fn metric<'r>(
        &'r self,
        m: &'r Metric,
        ctx: &Context<'r>,
        tags: &mut Vec<Tag<'r>>,
        each: &mut impl for<'t> FnMut(Result<Point<'r, 't>, Reject>),
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
        let mut emit = |h: Head<'r>, d: Option<Data<'r>>| {
            if h.flags & NO_RECORDED_VALUE != 0 {
                return;
            }
            let point = d
                .ok_or(Reject::BadTemporality)
                .and_then(|d| self.point(m, ctx, h.attrs, (h.start, h.time), d, tags));
            each(point);
        };
        match data {
            D::Gauge(g) => {
                for p in &g.data_points {
                    let v = number(p.value).unwrap_or(f64::NAN);
                    emit(p.head(), Some(Data::Gauge(v)));
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
                    emit(p.head(), d);
                }
            }
            D::Histogram(h) => {
                let c = cumulative(h.aggregation_temporality);
                for p in &h.data_points {
                    emit(p.head(), c.map(|c| Data::Histogram(p, c)));
                }
            }
            D::ExponentialHistogram(h) => {
                let c = cumulative(h.aggregation_temporality);
                for p in &h.data_points {
                    emit(p.head(), c.map(|c| Data::Exponential(p, c)));
                }
            }
            D::Summary(s) => {
                for p in &s.data_points {
                    emit(p.head(), Some(Data::Summary(p)));
                }
            }
        }
    }

    /// The point, checked, its tags in `tags`.
    fn point<'r, 't>(
        &'r self,
        m: &'r Metric,
        ctx: &Context<'r>,
        attrs: &'r [KeyValue],
        (start, time): (u64, u64),
        data: Data<'r>,
        tags: &'t mut Vec<Tag<'r>>,
    ) -> Result<Point<'r, 't>, Reject> {
        if m.name.is_empty() || m.name.len() > MAX_NAME_LEN {
            return Err(Reject::BadName);
        }
        self.check_time(time)?;
        check_values(&data)?;
        self.tags(attrs, ctx.resource, tags)?;
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

    /// The point's attributes and the resource attributes kept, as tags,
    /// in `tags` (cleared first).
    fn tags<'r>(
        &'r self,
        attrs: &'r [KeyValue],
        resource: &'r [KeyValue],
        tags: &mut Vec<Tag<'r>>,
    ) -> Result<(), Reject> {
        let labels = &self.settings.resource_labels;
        tags.clear();
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
        Ok(())
    }
}

/// What every kind of data point has besides its value.
#[derive(Clone, Copy)]
struct Head<'r> {
    attrs: &'r [KeyValue],
    /// `start_time_unix_nano`.
    start: u64,
    /// `time_unix_nano`.
    time: u64,
    flags: u32,
}

/// A data point's [`Head`].
trait Stamped {
    fn head(&self) -> Head<'_>;
}

macro_rules! stamped {
    ($($point:ty),*) => {$(
        impl Stamped for $point {
            fn head(&self) -> Head<'_> {
                Head {
                    attrs: &self.attributes,
                    start: self.start_time_unix_nano,
                    time: self.time_unix_nano,
                    flags: self.flags,
                }
            }
        }
    )*};
}

stamped!(
    NumberDataPoint,
    HistogramDataPoint,
    ExponentialHistogramDataPoint,
    SummaryDataPoint
);

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

/// Hashes attributes as sent, without formatting their values.
fn hash_attributes(h: &mut impl Hasher, attrs: &[KeyValue]) {
    use any_value::Value as V;
    attrs.len().hash(h);
    for kv in attrs {
        kv.key.hash(h);
        match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(V::StringValue(s)) => (0u8, s).hash(h),
            Some(V::BoolValue(b)) => (1u8, b).hash(h),
            Some(V::IntValue(i)) => (2u8, i).hash(h),
            Some(V::DoubleValue(d)) => (3u8, d.to_bits()).hash(h),
            _ => 4u8.hash(h),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::opentelemetry::proto::common::v1::AnyValue;
    use super::super::proto::opentelemetry::proto::metrics::v1::{
        Gauge, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
    };
    use super::super::proto::opentelemetry::proto::resource::v1::Resource;
    use super::*;
    use std::collections::hash_map::RandomState;

    const NOW: Timestamp = Timestamp::from_secs(1_767_225_600);

    fn kv(k: &str, v: any_value::Value) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue { value: Some(v) }),
            ..Default::default()
        }
    }

    fn s(v: &str) -> any_value::Value {
        any_value::Value::StringValue(v.into())
    }

    fn gauge(time: u64, attrs: Vec<KeyValue>) -> Metric {
        Metric {
            name: "g".into(),
            data: Some(metric::Data::Gauge(Gauge {
                data_points: vec![NumberDataPoint {
                    attributes: attrs,
                    time_unix_nano: time,
                    value: Some(number_data_point::Value::AsInt(3)),
                    ..Default::default()
                }],
            })),
            ..Default::default()
        }
    }

    fn request(resource: Vec<KeyValue>, metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: resource,
                    ..Default::default()
                }),
                scope_metrics: vec![ScopeMetrics {
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    fn settings() -> ReadSettings {
        ReadSettings {
            resource_labels: vec![("service.name".into(), "service".into())],
            max_age: Duration::from_secs(60),
            max_ahead: Duration::from_secs(5),
        }
    }

    /// A point as read: its tags and stream, or its rejection.
    type Read = Result<(Vec<(String, String)>, u64), Reject>;

    /// Each point read.
    fn read(req: &ExportMetricsServiceRequest) -> Vec<Read> {
        let (settings, hasher) = (settings(), RandomState::new());
        let reader = Reader {
            settings: &settings,
            hasher: &hasher,
            now: NOW,
        };
        let mut out = Vec::new();
        reader.read(req, |p| {
            out.push(p.map(|p| {
                let tags = p
                    .tags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                (tags, p.stream)
            }));
        });
        out
    }

    fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn attributes_then_the_kept_resource_attributes_are_the_tags() {
        let attrs = vec![
            kv("route", s("/a")),
            kv("ok", any_value::Value::BoolValue(true)),
            kv("code", any_value::Value::IntValue(200)),
        ];
        let resource = vec![kv("service.name", s("api")), kv("host.name", s("h1"))];
        let got = read(&request(resource, vec![gauge(0, attrs)]));
        let want = tags(&[
            ("route", "/a"),
            ("ok", "true"),
            ("code", "200"),
            ("service", "api"),
        ]);
        assert_eq!(got[0].as_ref().unwrap().0, want);
    }

    #[test]
    fn two_instances_of_one_service_are_two_streams_of_one_series() {
        let a = vec![
            kv("service.name", s("api")),
            kv("service.instance.id", s("1")),
        ];
        let b = vec![
            kv("service.name", s("api")),
            kv("service.instance.id", s("2")),
        ];
        let mut req = request(a, vec![gauge(0, vec![])]);
        req.resource_metrics
            .extend(request(b, vec![gauge(0, vec![])]).resource_metrics);
        let got = read(&req);
        let (x, y) = (got[0].as_ref().unwrap(), got[1].as_ref().unwrap());
        assert_eq!(x.0, y.0);
        assert_ne!(x.1, y.1);
    }

    #[test]
    fn points_outside_the_time_tolerance_are_too_old_or_too_new() {
        let now = NOW.as_nanos();
        let at = |t: u64| {
            read(&request(vec![], vec![gauge(t, vec![])]))
                .remove(0)
                .err()
        };
        assert_eq!(at(now - 61_000_000_000), Some(Reject::TooOld));
        assert_eq!(at(now + 6_000_000_000), Some(Reject::TooNew));
        assert_eq!(at(now - 59_000_000_000), None);
        assert_eq!(at(0), None);
    }

    #[test]
    fn array_values_and_unspecified_temporality_are_refused_and_no_value_points_skipped() {
        let arr = any_value::Value::ArrayValue(Default::default());
        let got = read(&request(vec![], vec![gauge(0, vec![kv("k", arr)])]));
        assert_eq!(got, vec![Err(Reject::BadAttributes)]);
        let sum = Metric {
            name: "s".into(),
            data: Some(metric::Data::Sum(Sum {
                data_points: vec![NumberDataPoint::default()],
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(
            read(&request(vec![], vec![sum])),
            vec![Err(Reject::BadTemporality)]
        );
        let mut skipped = gauge(0, vec![]);
        if let Some(metric::Data::Gauge(g)) = &mut skipped.data {
            g.data_points[0].flags = NO_RECORDED_VALUE;
        }
        assert!(read(&request(vec![], vec![skipped])).is_empty());
    }
}
