//! The series families of `/metrics`: their names, HELP texts and labels,
//! and which value each shows for each statsd type and window. The one
//! place these rules live: the text writer ([`super::text`]) and the
//! crate-model collector ([`super::prometheus`]) take them from here, and
//! neither writer takes anything from the other. The fleet families
//! (`rollstat_fleet_window_*`, written by [`super::fleet`] from the fleet
//! view) take their labels and builders from here. How the
//! values are spelled is [`super::encode`]'s business.
//!
//! # Windowed families
//!
//! Gauges with fixed names, [`WINDOWED`]: one sample per series and window
//! (and configured quantile, for [`QUANTILE_FAMILY`]), labelled in this
//! order: [`METRIC_LABEL`] (the statsd name as received), [`WINDOW_LABEL`]
//! (the window's configured name), the series' tags in registry order, and
//! last [`QUANTILE_LABEL`] for the quantile family ([`format_q`]). Which
//! value each family shows: [`windowed_values`] and [`quantile_values`]. A
//! value that is not defined (min of an empty window, a quantile of no
//! samples) or not finite is left out, never published as NaN.
//!
//! # Cumulative families
//!
//! One per sanitised statsd name, by [`Cumulative`]: counters
//! `<name>_total`, gauges `<name>`, timers (in seconds), histograms and
//! distributions as Prometheus histograms `<name>_bucket/_sum/_count`; sets
//! have none. Samples carry the series' tags (and `le` for buckets); their
//! values are [`CumulativeValue`]. OpenMetrics adds `_created` to counters
//! and histograms ([`shows_created`]) and leaves out `_sum` and `_count` of
//! a histogram that saw a negative value ([`HistogramValues::shows_sum`]).
//! Several statsd names may share a family
//! (`a.b` and `a_b`): its HELP then names the smallest of them, so that it
//! does not depend on the order series are visited in.
//!
//! # In the crate's model
//!
//! [`pair`], [`gauge`], [`counter`], [`family`] and [`base_labels`] build
//! families as the `prometheus` crate's proto types: the series families
//! in [`super::prometheus`], and the fleet, breaker and limit families.

use prometheus::proto::{LabelPair, MetricType};

use super::encode::Format;
use super::escaping::{
    escape_label_name, escape_metric_name, is_legacy_label_name, is_legacy_metric_name,
};
use super::negotiate::Escaping;
use crate::parse::MetricKind;
use crate::series::state::CumulativeHistogram;
use crate::series::{SeriesMeta, SeriesState, WindowView};
use crate::sketch::native::NativeHistogram;

pub(crate) use crate::family::table::WINDOWED;

/// Index of `rollstat_window_quantile` in [`WINDOWED`]: its values come
/// from [`quantile_values`], one per configured quantile.
pub(crate) const QUANTILE_FAMILY: usize = 6;

/// The windowed samples' label holding the statsd name.
pub(crate) const METRIC_LABEL: &str = "metric";
/// The windowed samples' label holding the window's name.
pub(crate) const WINDOW_LABEL: &str = "window";
/// The quantile family's label holding the quantile ([`format_q`]).
pub(crate) const QUANTILE_LABEL: &str = "q";

/// The windowed values of one view by family index into [`WINDOWED`] (the
/// quantile family's entry is always `None`: see [`quantile_values`]).
/// Every type shows samples, rate and, where defined, avg, min and max;
/// sets show no sum (their values are members, not numbers) and are the
/// only type with a distinct count. Undefined and non-finite values are
/// `None`: left out.
pub(crate) fn windowed_values(kind: MetricKind, v: &WindowView) -> [Option<f64>; 8] {
    let sum = (kind != MetricKind::Set).then_some(v.sum);
    [
        Some(v.samples),
        sum,
        Some(v.rate),
        v.avg,
        v.min,
        v.max,
        None,
        v.unique.map(|u| u as f64),
    ]
    .map(|x| x.filter(|x| x.is_finite()))
}

/// The quantile family's values of one view, one per configured quantile
/// in configuration order: `(q, value)`, the value `None` (left out) where
/// undefined or not finite. Only timers, histograms and distributions have
/// quantiles.
pub(crate) fn quantile_values(v: &WindowView) -> impl Iterator<Item = (f64, Option<f64>)> + '_ {
    v.quantiles
        .iter()
        .map(|(q, x)| (*q, x.filter(|x| x.is_finite())))
}

/// The value of the [`QUANTILE_LABEL`] label: Rust's shortest form, with
/// `.0` added to a whole number (`0.5`, `0.99`, `1.0`).
pub(crate) fn format_q(q: f64) -> String {
    let s = format!("{q}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

/// The cumulative family a series belongs to, per statsd type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cumulative {
    /// `<name>_total`.
    Counter,
    /// `<name>` as it is: a counter under `[statsd_exporter] cumulative_names
    /// = "statsd_exporter"` whose name does not end in `_total` (typed
    /// `counter` in the Prometheus text format, `unknown` in OpenMetrics,
    /// whose counters must end in `_total`).
    CounterAsIs,
    /// `<name>`.
    Gauge,
    /// `<name>_bucket/_sum/_count` (timers in seconds).
    Histogram,
    /// `<name>{quantile="0.5"}`, `<name>_sum`, `<name>_count`: a timer,
    /// histogram or distribution under a rule's `observer = "summary"`.
    Summary,
}

impl Cumulative {
    /// The family of `kind`; sets have none (a distinct count since birth
    /// is unbounded state, and sets publish `rollstat_window_unique`).
    pub(crate) fn of(kind: MetricKind) -> Option<Cumulative> {
        match kind {
            MetricKind::Counter => Some(Cumulative::Counter),
            MetricKind::Gauge => Some(Cumulative::Gauge),
            MetricKind::Timer | MetricKind::Histogram | MetricKind::Distribution => {
                Some(Cumulative::Histogram)
            }
            MetricKind::Set => None,
        }
    }

    /// The family of a series: [`of`](Self::of) its kind, a counter named
    /// as statsd_exporter names it when its identity says so.
    pub(crate) fn of_series(meta: &SeriesMeta) -> Option<Cumulative> {
        match Cumulative::of(meta.kind) {
            Some(Cumulative::Counter) if meta.counter_as_is => Some(Cumulative::CounterAsIs),
            Some(Cumulative::Histogram) if meta.summary.is_some() => Some(Cumulative::Summary),
            other => other,
        }
    }

    /// What follows the sanitised statsd name in the name of the family and
    /// of its value samples: `_total` for counters.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Cumulative::Counter => "_total",
            Cumulative::CounterAsIs
            | Cumulative::Gauge
            | Cumulative::Histogram
            | Cumulative::Summary => "",
        }
    }

    /// What follows the sanitised statsd name in the family's `# HELP` and
    /// `# TYPE` lines in `format`: OpenMetrics names a counter family
    /// without the `_total` its samples keep.
    pub(crate) fn header_suffix(self, format: Format) -> &'static str {
        match format {
            Format::Prometheus => self.suffix(),
            Format::OpenMetrics => "",
        }
    }

    /// The family name for the sanitised statsd name `prom_name`.
    pub(crate) fn family_name(self, prom_name: &str) -> String {
        format!("{prom_name}{}", self.suffix())
    }

    /// The type in the family's `# TYPE` line in `format`.
    pub(crate) fn type_word(self, format: Format) -> &'static str {
        match self {
            Cumulative::CounterAsIs if format == Format::OpenMetrics => "unknown",
            Cumulative::Counter | Cumulative::CounterAsIs => "counter",
            Cumulative::Gauge => "gauge",
            Cumulative::Histogram => "histogram",
            Cumulative::Summary => "summary",
        }
    }

    /// The family's type in the crate's model.
    pub(crate) fn metric_type(self) -> MetricType {
        match self {
            Cumulative::Counter | Cumulative::CounterAsIs => MetricType::COUNTER,
            Cumulative::Gauge => MetricType::GAUGE,
            Cumulative::Histogram => MetricType::HISTOGRAM,
            Cumulative::Summary => MetricType::SUMMARY,
        }
    }

    /// The family's HELP text, naming the statsd metric.
    pub(crate) fn help(self, kind: MetricKind, metric: &str) -> String {
        let (before, after) = self.help_around(kind);
        format!("{before}{metric}{after}")
    }

    /// The HELP text before and after the statsd name (so the text writer
    /// can write it without formatting a `String` per family). Neither
    /// part holds a character that needs escaping.
    pub(crate) fn help_around(self, kind: MetricKind) -> (&'static str, &'static str) {
        match (self, kind) {
            (Cumulative::Counter | Cumulative::CounterAsIs, _) => (
                "statsd counter ",
                " (sum of increments, weighted by 1/sample_rate).",
            ),
            (Cumulative::Gauge, _) => ("statsd gauge ", "."),
            (Cumulative::Histogram | Cumulative::Summary, MetricKind::Timer) => {
                ("statsd timer ", " in seconds.")
            }
            (Cumulative::Histogram | Cumulative::Summary, MetricKind::Histogram) => {
                ("statsd histogram ", ".")
            }
            (Cumulative::Histogram | Cumulative::Summary, _) => ("statsd distribution ", "."),
        }
    }
}

/// What a series shows in its cumulative family.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CumulativeValue<'a> {
    /// `<name>_total`: the sum of increments since the series was born.
    Counter(f64),
    /// `<name>`: the gauge's current value.
    Gauge(f64),
    /// `<name>_bucket`, `_sum`, `_count`; a summary's `{quantile}`
    /// samples with its `_sum` and `_count`.
    Histogram(HistogramValues<'a>),
}

impl<'a> CumulativeValue<'a> {
    /// The cumulative values of a series; `None` for a set.
    pub(crate) fn of(meta: &'a SeriesMeta, state: &'a SeriesState) -> Option<Self> {
        match state {
            SeriesState::Counter { total, .. } => Some(CumulativeValue::Counter(*total)),
            SeriesState::Gauge { value, .. } => Some(CumulativeValue::Gauge(*value)),
            SeriesState::Distribution { histogram, .. } => {
                Some(CumulativeValue::Histogram(HistogramValues {
                    bounds: &meta.histogram_buckets,
                    histogram,
                }))
            }
            SeriesState::Set { .. } => None,
        }
    }
}

/// A cumulative histogram as published.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HistogramValues<'a> {
    bounds: &'a [f64],
    histogram: &'a CumulativeHistogram,
}

impl<'a> HistogramValues<'a> {
    /// `(upper bound, cumulative count)` per finite bucket: the weighted
    /// counts added up and rounded, as Prometheus wants whole counts. The
    /// `+Inf` bucket is [`count`](Self::count).
    pub(crate) fn buckets(&self) -> impl Iterator<Item = (f64, u64)> + 'a {
        let mut cum = 0.0;
        self.bounds
            .iter()
            .zip(&self.histogram.counts)
            .map(move |(ub, c)| {
                cum += c;
                (*ub, cum.round() as u64)
            })
    }

    /// Observations (weighted, rounded): `_count` and the `+Inf` bucket.
    pub(crate) fn count(&self) -> u64 {
        self.histogram.whole_count()
    }

    /// The native histogram of the same observations, if the series has
    /// one (served over protobuf only).
    pub(crate) fn native(&self) -> Option<&'a NativeHistogram> {
        self.histogram.native.as_ref().map(|n| &n.histogram)
    }

    /// Sum of the observed values (weighted): `_sum`.
    pub(crate) fn sum(&self) -> f64 {
        self.histogram.sum
    }

    /// Whether `format` shows `_sum` and `_count`: OpenMetrics' `_sum` is a
    /// counter, so it is left out once a negative value was observed (it
    /// could go down), and `_count` appears if and only if `_sum` does (the
    /// `+Inf` bucket still says how many).
    pub(crate) fn shows_sum(&self, format: Format) -> bool {
        !(format == Format::OpenMetrics && self.histogram.saw_negative)
    }
}

/// Whether `format` shows a counter's or a histogram's `_created` sample,
/// the time the series (and its counts) began, so that a scraper can tell
/// a reset from a decrease: OpenMetrics only (text 0.0.4 cannot carry it,
/// and the crate's model has no place for it).
pub(crate) fn shows_created(format: Format) -> bool {
    format == Format::OpenMetrics
}

// === Names under an escaping scheme ===

/// Appends the base name of the series' cumulative family (what its
/// [`Cumulative::suffix`] follows) as the scraper asked names to be
/// escaped:
///
/// * `underscores`: the name the series was born with (`api_latency`);
/// * `allow-utf-8`: the statsd name as sent, after mapping (`api.latency`),
///   with the same two adjustments the sanitised name gets: a counter's
///   `_total` is its samples' suffix (never `_total_total`), and a name
///   starting with `rollstat_` gets `statsd_` before it (rollstat's own
///   families own that prefix);
/// * `dots` and `values`: that name escaped by the scheme, unless it is a
///   legacy name already, which is sent as it is, as client_golang's
///   targets send them (`EscapeMetricFamily`), though `dots` alone would
///   double its underscores. A counter's name is escaped with its `_total`,
///   as client_golang escapes a counter family's whole name, so that its
///   samples read back (`U__api_2e_hits__total`, whose base here is
///   `U__api_2e_hits_`); the other families' suffixes (`_bucket`, `_sum`)
///   follow the escaped name, as client_golang writes them.
///
/// The writer quotes an `allow-utf-8` name where its format needs it.
pub(crate) fn family_base(out: &mut Vec<u8>, meta: &SeriesMeta, escaping: Escaping) {
    if escaping == Escaping::Underscores || *meta.prom_name == meta.metric {
        out.extend_from_slice(meta.prom_name.as_bytes());
        return;
    }
    let mut m = meta.metric.as_str();
    let counter = meta.kind == MetricKind::Counter && !meta.counter_as_is;
    if counter {
        if let Some(f) = m.strip_suffix("_total").filter(|f| !f.is_empty()) {
            m = f;
        }
    }
    let prefixed;
    if m.starts_with("rollstat_") {
        prefixed = format!("statsd_{m}");
        m = &prefixed;
    }
    if counter && matches!(escaping, Escaping::Dots | Escaping::Values) && !is_legacy_metric_name(m)
    {
        let at = out.len();
        escape_metric_name(out, &format!("{m}_total"), escaping);
        // Both schemes write `_total` as `__total`: the base keeps one `_`.
        if out[at..].ends_with(b"_total") {
            out.truncate(out.len() - "_total".len());
        }
        return;
    }
    escape_name(out, m, escaping, is_legacy_metric_name, escape_metric_name);
}

/// `name` as it is if `legacy` says it is a legacy name, else escaped by
/// `escaping` with `escape`.
fn escape_name(
    out: &mut Vec<u8>,
    name: &str,
    escaping: Escaping,
    legacy: fn(&str) -> bool,
    escape: fn(&mut Vec<u8>, &str, Escaping),
) {
    if legacy(name) {
        out.extend_from_slice(name.as_bytes());
    } else {
        escape(out, name, escaping);
    }
}

/// The names of `meta`'s labels under `escaping`, appended to `names` (the
/// end of each in `ends`, by label): each label's sanitised name for
/// `underscores`; else the name it was sent as
/// ([`SeriesMeta::sent_label_names`]), escaped by `dots` and `values`
/// unless it is a legacy name (as [`family_base`]).
///
/// `dots` and `values` are not one-to-one on their own: tags `a.b` and
/// `a_dot_b` would both be `a_dot_b` under `dots`, one series with the same
/// label name twice, which Prometheus refuses (and with it the whole
/// scrape). So when two names of a series come out alike, every label of
/// that series takes its sanitised name instead, which the registry keeps
/// apart.
pub(crate) fn label_names(
    names: &mut Vec<u8>,
    ends: &mut Vec<usize>,
    meta: &SeriesMeta,
    escaping: Escaping,
) {
    names.clear();
    ends.clear();
    let sanitised = |names: &mut Vec<u8>, ends: &mut Vec<usize>| {
        for (k, _) in &meta.labels {
            names.extend_from_slice(k.as_bytes());
            ends.push(names.len());
        }
    };
    let sent = match (&meta.sent_label_names, escaping) {
        (Some(sent), e) if e != Escaping::Underscores => sent,
        _ => return sanitised(names, ends),
    };
    for (i, (k, _)) in meta.labels.iter().enumerate() {
        let name = sent.0.get(i).map_or(k.as_str(), |s| s);
        escape_name(
            names,
            name,
            escaping,
            is_legacy_label_name,
            escape_label_name,
        );
        ends.push(names.len());
    }
    let name = |i: usize| &names[if i == 0 { 0 } else { ends[i - 1] }..ends[i]];
    let clash = (1..ends.len()).any(|i| (0..i).any(|j| name(i) == name(j)));
    if clash {
        names.clear();
        ends.clear();
        sanitised(names, ends);
    }
}

/// Label `i`'s name in what [`label_names`] wrote.
pub(crate) fn nth_name<'a>(names: &'a [u8], ends: &[usize], i: usize) -> &'a [u8] {
    &names[if i == 0 { 0 } else { ends[i - 1] }..ends[i]]
}

// === In the crate's model ===

pub(crate) use crate::family::{counter, family, gauge, pair};

/// The labels of a windowed sample of `meta` in `window` (the quantile
/// family adds [`QUANTILE_LABEL`] after them).
pub(crate) fn base_labels(meta: &SeriesMeta, window: &str) -> Vec<LabelPair> {
    let mut l = Vec::with_capacity(meta.labels.len() + 3);
    l.push(pair(METRIC_LABEL, &meta.metric));
    l.push(pair(WINDOW_LABEL, window));
    for (k, v) in &meta.labels {
        l.push(pair(k, v));
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_help_texts_hold_nothing_either_format_escapes() {
        // The text writer writes them as they are.
        let kinds = [
            MetricKind::Counter,
            MetricKind::Gauge,
            MetricKind::Timer,
            MetricKind::Histogram,
            MetricKind::Distribution,
        ];
        let parts = kinds.iter().flat_map(|k| {
            let (a, b) = Cumulative::of(*k).unwrap().help_around(*k);
            [a, b]
        });
        for text in WINDOWED.iter().map(|w| w.help).chain(parts) {
            assert!(!text.contains(['\\', '"', '\n']), "{text}");
        }
    }

    #[test]
    fn quantiles_are_written_with_a_decimal_point() {
        assert_eq!(format_q(0.5), "0.5");
        assert_eq!(format_q(1.0), "1.0");
        assert_eq!(format_q(0.999), "0.999");
    }

    #[test]
    fn a_counter_family_is_named_without_total_in_openmetrics_headers() {
        let c = Cumulative::Counter;
        assert_eq!(c.family_name("hits"), "hits_total");
        assert_eq!(c.header_suffix(Format::Prometheus), "_total");
        assert_eq!(c.header_suffix(Format::OpenMetrics), "");
        assert_eq!(Cumulative::Gauge.header_suffix(Format::Prometheus), "");
    }
}
