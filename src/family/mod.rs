//! Every family on `/metrics` is built here: the self-metrics are
//! declared once, as a table ([`table`]), and registered or filled from
//! its rows; [`family`] builds a family of samples for all of them, the
//! series' windowed and fleet families included.

pub mod table;

use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{
    Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
};

/// A family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (its name ends in `_total`).
    Counter,
    /// Any value.
    Gauge,
    /// Observations in buckets.
    Histogram,
}

impl Kind {
    /// As `# TYPE` says it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }

    /// The prometheus crate's type.
    #[must_use]
    pub fn proto(self) -> MetricType {
        match self {
            Kind::Counter => MetricType::COUNTER,
            Kind::Gauge => MetricType::GAUGE,
            Kind::Histogram => MetricType::HISTOGRAM,
        }
    }
}

/// One self-metric family, as [`table`] declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Family {
    /// The family's name.
    pub name: &'static str,
    /// Its type.
    pub kind: Kind,
    /// Its label names, in the order values are given.
    pub labels: &'static [&'static str],
    /// Its HELP text.
    pub help: &'static str,
}

// Registered metrics, made from a row (the caller registers them).
impl Family {
    fn opts(&self) -> Opts {
        Opts::new(self.name, self.help)
    }

    fn check(&self, kind: Kind, labelled: bool) {
        debug_assert_eq!(self.kind, kind, "{}", self.name);
        debug_assert_eq!(!self.labels.is_empty(), labelled, "{}", self.name);
    }

    /// An unlabelled counter.
    pub fn int_counter(&self) -> prometheus::Result<IntCounter> {
        self.check(Kind::Counter, false);
        IntCounter::with_opts(self.opts())
    }

    /// A counter with the row's labels.
    pub fn int_counter_vec(&self) -> prometheus::Result<IntCounterVec> {
        self.check(Kind::Counter, true);
        IntCounterVec::new(self.opts(), self.labels)
    }

    /// An unlabelled gauge of whole numbers.
    pub fn int_gauge(&self) -> prometheus::Result<IntGauge> {
        self.check(Kind::Gauge, false);
        IntGauge::with_opts(self.opts())
    }

    /// A gauge of whole numbers with the row's labels.
    pub fn int_gauge_vec(&self) -> prometheus::Result<IntGaugeVec> {
        self.check(Kind::Gauge, true);
        IntGaugeVec::new(self.opts(), self.labels)
    }

    /// An unlabelled gauge.
    pub fn gauge(&self) -> prometheus::Result<prometheus::Gauge> {
        self.check(Kind::Gauge, false);
        prometheus::Gauge::with_opts(self.opts())
    }

    /// A gauge with the row's labels.
    pub fn gauge_vec(&self) -> prometheus::Result<prometheus::GaugeVec> {
        self.check(Kind::Gauge, true);
        prometheus::GaugeVec::new(self.opts(), self.labels)
    }

    /// A gauge whose labels are constant: `values` in the row's label
    /// order (`rollstat_build_info`).
    pub fn const_gauge(&self, values: &[&str]) -> prometheus::Result<IntGauge> {
        self.check(Kind::Gauge, true);
        debug_assert_eq!(values.len(), self.labels.len(), "{}", self.name);
        let opts = self
            .labels
            .iter()
            .zip(values)
            .fold(self.opts(), |o, (k, v)| o.const_label(*k, *v));
        IntGauge::with_opts(opts)
    }

    /// An unlabelled histogram with these bucket bounds.
    pub fn histogram(&self, buckets: Vec<f64>) -> prometheus::Result<Histogram> {
        self.check(Kind::Histogram, false);
        Histogram::with_opts(HistogramOpts::new(self.name, self.help).buckets(buckets))
    }

    /// The family of `metrics`, for a family read at scrape time.
    #[must_use]
    pub fn of(&self, metrics: Vec<Metric>) -> MetricFamily {
        family(self.name, self.help, self.kind.proto(), metrics)
    }
}

// === Families of samples, in the prometheus crate's model ===

/// A family of `metrics`.
pub fn family(
    name: impl Into<String>,
    help: &str,
    t: MetricType,
    metrics: Vec<Metric>,
) -> MetricFamily {
    let mut f = MetricFamily::default();
    f.set_name(name.into());
    f.set_help(help.to_string());
    f.set_field_type(t);
    f.set_metric(metrics);
    f
}

/// A label.
#[must_use]
pub fn pair(name: &str, value: &str) -> LabelPair {
    let mut l = LabelPair::default();
    l.set_name(name.to_string());
    l.set_value(value.to_string());
    l
}

/// A gauge sample.
#[must_use]
pub fn gauge(labels: Vec<LabelPair>, v: f64) -> Metric {
    let mut g = Gauge::default();
    g.set_value(v);
    let mut m = Metric::from_gauge(g);
    m.set_label(labels);
    m
}

/// A counter sample.
#[must_use]
pub fn counter(labels: Vec<LabelPair>, v: f64) -> Metric {
    let mut c = Counter::default();
    c.set_value(v);
    let mut m = Metric::default();
    m.set_counter(c);
    m.set_label(labels);
    m
}

#[cfg(test)]
mod tests {
    use super::table::{ALL, FLEET, WINDOWED};

    #[test]
    fn every_row_has_a_unique_rollstat_name_a_help_and_a_type_suffix() {
        let mut names = std::collections::HashSet::new();
        for f in ALL.iter().chain(WINDOWED).chain(FLEET) {
            assert!(names.insert(f.name), "{} twice", f.name);
            assert!(f.name.starts_with("rollstat_"), "{}", f.name);
            assert!(!f.help.is_empty(), "{}", f.name);
            // The text writer writes HELP as it is.
            assert!(!f.help.contains(['\\', '\n']), "{}", f.name);
            assert_eq!(
                f.name.ends_with("_total"),
                f.kind == super::Kind::Counter,
                "{}",
                f.name
            );
        }
    }
}
