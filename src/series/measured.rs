//! What the registry takes besides statsd lines: a value from another
//! source (an OTLP data point) already turned into what it adds to its
//! series, and the name and tags both kinds of input are keyed by.

use std::borrow::Cow;

use crate::parse::{MetricKind, Sample, Tags};
use crate::window::Aggregate;

/// A metric name, its statsd type and its tags: what the registry keys a
/// series by, whatever brought the value.
pub trait Named {
    /// The tags, in the order they were sent.
    type Tags<'t>: ExactSizeIterator<Item = (&'t str, &'t str)>
    where
        Self: 't;
    /// The metric name as sent (the mapping rules see it).
    fn name(&self) -> &str;
    /// The statsd type the series has.
    fn kind(&self) -> MetricKind;
    /// The tags as sent.
    fn tags(&self) -> Self::Tags<'_>;
}

impl<'a> Named for Sample<'a> {
    type Tags<'t>
        = Tags<'t>
    where
        Self: 't;

    fn name(&self) -> &str {
        self.name
    }

    fn kind(&self) -> MetricKind {
        self.kind
    }

    fn tags(&self) -> Tags<'_> {
        Sample::tags(self)
    }
}

/// A value measured elsewhere, for one series.
#[derive(Clone, Copy, Debug)]
pub struct Measured<'a> {
    /// The metric name, as the mapping rules see it.
    pub name: &'a str,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// The tags (attributes) as `(key, value)`.
    pub tags: &'a [(&'a str, Cow<'a, str>)],
    /// What it adds to the series.
    pub fold: Fold<'a>,
}

impl Named for Measured<'_> {
    type Tags<'t>
        = std::iter::Map<
        std::slice::Iter<'t, (&'t str, Cow<'t, str>)>,
        fn(&'t (&'t str, Cow<'t, str>)) -> (&'t str, &'t str),
    >
    where
        Self: 't;

    fn name(&self) -> &str {
        self.name
    }

    fn kind(&self) -> MetricKind {
        self.kind
    }

    fn tags(&self) -> Self::Tags<'_> {
        self.tags.iter().map(|(k, v)| (*k, v.as_ref()))
    }
}

/// What a measured value does to its series.
#[derive(Clone, Copy, Debug)]
pub enum Fold<'a> {
    /// A counter's increment (never negative).
    Add(f64),
    /// A gauge's new value.
    Set(f64),
    /// A change of a gauge's value.
    Shift(f64),
    /// Observations of a distribution, already aggregated.
    Aggregate(&'a Aggregate),
}
