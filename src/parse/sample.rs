//! The sample model: what one statsd line means once it is accepted, as
//! the rest of the crate sees it.
//!
//! [`Sample`] (a metric line, borrowing from the datagram), its
//! [`MetricKind`] and [`GaugeOp`], the [`Values`] and [`Tags`] it yields,
//! [`Line`] and [`SkipKind`] for what a non-empty line can be, and the limits
//! (`MAX_*`, [`MIN_SAMPLE_RATE`]) that every accepted sample respects. Only
//! the grammar (`grammar.rs`) builds a `Sample`, after checking everything,
//! so the iterators here re-read text that is known to be valid and cannot
//! fail. Nothing here parses a line.

use super::lex::{fast_decimal, split_or_all};

/// Longest metric name accepted, in bytes, after name-embedded tags are removed.
pub const MAX_NAME_LEN: usize = 256;
/// Longest tag key accepted, in bytes.
pub const MAX_TAG_KEY_LEN: usize = 128;
/// Longest tag value accepted, in bytes.
pub const MAX_TAG_VALUE_LEN: usize = 256;
/// Most tags on one line, name-embedded and DogStatsD together.
pub const MAX_TAGS: usize = 64;
/// Most `:`-separated values on one line (DogStatsD value packing).
pub const MAX_VALUES: usize = 1024;
/// Smallest sample rate accepted; the largest weight is therefore `1e6`.
pub const MIN_SAMPLE_RATE: f64 = 1e-6;

/// The statsd metric types rollstat aggregates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// `c` (and cadence's meter `m`): add the value, scaled by the weight.
    Counter,
    /// `g`: set the value, or add it when signed (see [`GaugeOp`]).
    Gauge,
    /// `ms`: a duration in milliseconds on the wire, published in seconds.
    Timer,
    /// `h`: a value for a distribution, no unit conversion.
    Histogram,
    /// `d`: DogStatsD distribution, treated like a histogram.
    Distribution,
    /// `s`: count distinct members.
    Set,
}

impl MetricKind {
    /// Every kind, in declaration order.
    pub const ALL: [MetricKind; 6] = [
        MetricKind::Counter,
        MetricKind::Gauge,
        MetricKind::Timer,
        MetricKind::Histogram,
        MetricKind::Distribution,
        MetricKind::Set,
    ];

    /// A stable lowercase word for logs and labels (`"counter"`, `"timer"`...).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Timer => "timer",
            MetricKind::Histogram => "histogram",
            MetricKind::Distribution => "distribution",
            MetricKind::Set => "set",
        }
    }

    /// The statsd type code written on the wire (`"c"`, `"g"`, `"ms"`...).
    #[must_use]
    pub const fn statsd_type(self) -> &'static str {
        match self {
            MetricKind::Counter => "c",
            MetricKind::Gauge => "g",
            MetricKind::Timer => "ms",
            MetricKind::Histogram => "h",
            MetricKind::Distribution => "d",
            MetricKind::Set => "s",
        }
    }

    /// Converts a wire value to the unit rollstat publishes: timers go from
    /// milliseconds to seconds (`v / 1000`, one correctly rounded division,
    /// as statsd_exporter does); every other kind is returned unchanged.
    #[must_use]
    pub fn to_base_units(self, v: f64) -> f64 {
        match self {
            MetricKind::Timer => v / 1000.0,
            _ => v,
        }
    }

    /// The kind a statsd type code names (`m`, cadence's meter, is a
    /// counter); `None` for any other text.
    pub(super) fn from_type(t: &[u8]) -> Option<MetricKind> {
        Some(match t {
            [b'c'] | [b'm'] => MetricKind::Counter,
            [b'g'] => MetricKind::Gauge,
            [b'm', b's'] => MetricKind::Timer,
            [b'h'] => MetricKind::Histogram,
            [b'd'] => MetricKind::Distribution,
            [b's'] => MetricKind::Set,
            _ => return None,
        })
    }
}

/// What a gauge line asks for. Rule (etsy statsd, statsd_exporter): a value
/// written with a leading `+` or `-` is a delta; a bare number sets the gauge.
/// A client that wants a negative absolute value sends `0` then `-N` (Python
/// `statsd` does exactly that: `neg:0|g\nneg:-7|g`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GaugeOp {
    /// `name:42|g`: the gauge becomes the value.
    Set,
    /// `name:+3|g` / `name:-3|g`: the (signed) value is added to the gauge.
    Delta,
}

/// Lines that are recognised and deliberately not turned into samples. They
/// are not errors; the daemon counts them under [`SkipKind::reason`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SkipKind {
    /// A DogStatsD event, `_e{title_len,text_len}:title|text...`.
    Event,
    /// A DogStatsD service check, `_sc|name|status...`.
    ServiceCheck,
}

impl SkipKind {
    /// Every skip label, in declaration order.
    pub const ALL_REASONS: [&'static str; 2] = ["event", "service_check"];

    /// Stable snake_case label for a "skipped lines" counter.
    #[must_use]
    pub const fn reason(self) -> &'static str {
        match self {
            SkipKind::Event => "event",
            SkipKind::ServiceCheck => "service_check",
        }
    }
}

/// One accepted, non-empty line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Line<'a> {
    /// A metric sample.
    Sample(Sample<'a>),
    /// An event or service check, recognised and skipped.
    Skipped(SkipKind),
}

/// One validated statsd metric line, borrowing from the datagram.
///
/// Every value and tag has already been checked, so the iterators returned by
/// [`values`](Sample::values) and [`tags`](Sample::tags) cannot fail.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample<'a> {
    /// The metric name, valid UTF-8, with any InfluxDB / Librato / SignalFx
    /// tags removed. Not sanitised for Prometheus (the series layer does it).
    pub name: &'a str,
    /// The statsd type.
    pub kind: MetricKind,
    /// The `@` rate as sent, in `[MIN_SAMPLE_RATE, 1]`; 1 when absent.
    pub sample_rate: f64,
    /// The DogStatsD `|T` Unix timestamp in seconds, if present. Not
    /// otherwise interpreted.
    pub timestamp: Option<u64>,
    pub(super) weight: f64,
    pub(super) gauge_op: Option<GaugeOp>,
    pub(super) first: f64,
    pub(super) raw_values: &'a str,
    pub(super) n_values: usize,
    pub(super) name_tags: &'a str,
    pub(super) dog_tags: &'a str,
    /// A DogStatsD container id (`|c:...`) read as the tag `container_id`
    /// (statsd_exporter's mode only; otherwise empty and ignored).
    pub(super) container: &'a str,
    pub(super) n_tags: usize,
}

impl<'a> Sample<'a> {
    /// How many real events this sample stands for: `1 / sample_rate` for
    /// counters, timers, histograms and distributions; always 1 for gauges
    /// and sets (a sample rate means nothing for them, as in etsy statsd).
    /// Computed once at parse time and at most `1 / MIN_SAMPLE_RATE`.
    #[inline]
    #[must_use]
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// For a gauge, whether the value sets it or is added to it; `None` for
    /// other kinds.
    #[inline]
    #[must_use]
    pub fn gauge_op(&self) -> Option<GaugeOp> {
        self.gauge_op
    }

    /// The numeric values in wire units (timers in milliseconds; see
    /// [`MetricKind::to_base_units`]). One or more for every kind but
    /// [`MetricKind::Set`], for which it is empty.
    #[inline]
    #[must_use]
    pub fn values(&self) -> Values<'a> {
        if self.kind == MetricKind::Set {
            return Values {
                first: None,
                rest: "",
                remaining: 0,
            };
        }
        // One value (the usual line): nothing after it to find.
        let rest = if self.n_values == 1 {
            ""
        } else {
            split_or_all(self.raw_values, b':').1
        };
        Values {
            first: Some(self.first),
            rest,
            remaining: self.n_values,
        }
    }

    /// The first (for most lines the only) numeric value; 0 for sets.
    #[inline]
    #[must_use]
    pub fn first_value(&self) -> f64 {
        self.first
    }

    /// The set member, for [`MetricKind::Set`] only: the whole value section
    /// as text (it may contain `:`), never parsed as a number.
    #[must_use]
    pub fn set_member(&self) -> Option<&'a str> {
        (self.kind == MetricKind::Set).then_some(self.raw_values)
    }

    /// All tags: name-embedded ones first (InfluxDB/Librato/SignalFx), then
    /// the DogStatsD `|#` ones, each in line order. Duplicated keys are kept.
    #[inline]
    #[must_use]
    pub fn tags(&self) -> Tags<'a> {
        Tags {
            name: self.name_tags,
            dog: self.dog_tags,
            container: self.container,
            remaining: self.n_tags,
        }
    }
}

/// The numeric values of a [`Sample`], as `f64`, in line order.
#[derive(Clone, Debug)]
pub struct Values<'a> {
    first: Option<f64>,
    rest: &'a str,
    remaining: usize,
}

impl Iterator for Values<'_> {
    type Item = f64;

    #[inline]
    fn next(&mut self) -> Option<f64> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        match self.first.take() {
            Some(v) => Some(v),
            None => self.next_packed(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl Values<'_> {
    /// The next of several packed values (`a:1:2:3|d`), after the first.
    #[inline(never)]
    fn next_packed(&mut self) -> Option<f64> {
        let (v, rest) = split_or_all(self.rest, b':');
        self.rest = rest;
        // Validated at parse time; a failure here is impossible, but end the
        // iteration rather than panic if it ever happened.
        if let Some(x) = fast_decimal(v.as_bytes()) {
            return Some(x);
        }
        match v.parse::<f64>() {
            Ok(x) => Some(x),
            Err(_) => {
                self.remaining = 0;
                None
            }
        }
    }
}

impl ExactSizeIterator for Values<'_> {}
impl std::iter::FusedIterator for Values<'_> {}

/// The tags of a [`Sample`] as `(key, value)` pairs. A bare DogStatsD tag
/// (`|#canary`) yields `("canary", "")`; an InfluxDB tag `k=` also has an
/// empty value. Empty entries (`a,,b`) are skipped. One `#` before a
/// DogStatsD key is dropped (`|#a:1,#b:2` is `a`, `b`).
#[derive(Clone, Debug)]
pub struct Tags<'a> {
    name: &'a str,
    dog: &'a str,
    container: &'a str,
    remaining: usize,
}

impl<'a> Iterator for Tags<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        loop {
            let (src, sep) = if !self.name.is_empty() {
                (&mut self.name, b'=')
            } else if !self.dog.is_empty() {
                (&mut self.dog, b':')
            } else if !self.container.is_empty() {
                self.remaining = self.remaining.saturating_sub(1);
                return Some((CONTAINER_TAG, std::mem::take(&mut self.container)));
            } else {
                return None;
            };
            let (entry, rest) = split_or_all(src, b',');
            *src = rest;
            // A DogStatsD key may carry a leading `#` (the Datadog PHP
            // client's `|#k1:v1,#k2:v2`); it is not part of the key.
            let entry = if sep == b':' {
                entry.strip_prefix('#').unwrap_or(entry)
            } else {
                entry
            };
            if entry.is_empty() {
                continue;
            }
            self.remaining = self.remaining.saturating_sub(1);
            return Some(split_or_all(entry, sep));
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

/// The tag a container id (`|c:...`) is read as in statsd_exporter's mode,
/// as statsd_exporter labels it.
pub const CONTAINER_TAG: &str = "container_id";

impl ExactSizeIterator for Tags<'_> {}
impl std::iter::FusedIterator for Tags<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::testing::sample;

    #[test]
    fn timers_convert_to_seconds_without_losing_the_raw_value() {
        let s = sample("lat:12.5|ms");
        assert_eq!(s.first_value(), 12.5);
        assert_eq!(s.kind.to_base_units(s.first_value()), 0.0125);
        assert_eq!(MetricKind::Histogram.to_base_units(12.5), 12.5);
        assert_eq!(MetricKind::Timer.to_base_units(3.0), 0.003);
    }

    #[test]
    fn metric_kind_labels() {
        let types: Vec<_> = MetricKind::ALL.iter().map(|k| k.statsd_type()).collect();
        assert_eq!(types, ["c", "g", "ms", "h", "d", "s"]);
        for k in MetricKind::ALL {
            assert_eq!(MetricKind::from_type(k.statsd_type().as_bytes()), Some(k));
            assert!(!k.as_str().is_empty());
        }
    }
}
