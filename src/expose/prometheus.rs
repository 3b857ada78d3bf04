//! `/metrics`: a `prometheus::core::Collector` that computes every windowed
//! and cumulative value at scrape time, from one clock reading.
//!
//! Families (all documented in the README):
//!
//! * windowed, gauges with fixed names and labels `metric`, `window`, the
//!   series' tags (and `q` for quantiles): `rollstat_window_samples`,
//!   `rollstat_window_sum_value`, `rollstat_window_rate`, `rollstat_window_avg`,
//!   `rollstat_window_min`, `rollstat_window_max`, `rollstat_window_quantile`,
//!   `rollstat_window_unique`;
//! * cumulative, per statsd name: counters `<name>_total`, gauges `<name>`,
//!   timers (seconds), histograms and distributions as Prometheus histograms
//!   `<name>_bucket/_sum/_count`. Sets have no cumulative family.
//!
//! A value that is not defined (min of an empty window, a quantile of no
//! samples) is left out rather than published as NaN; a series whose values
//! cannot be computed never fails the scrape.

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};

use crate::clock::Clock;
use crate::parse::MetricKind;
use crate::series::{Registry, SeriesMeta, SeriesState, WindowView};
use crate::service::ServiceHandle;

/// Collects every series of a [`Registry`] at scrape time.
pub struct SeriesCollector {
    registry: Arc<Registry>,
    clock: Arc<dyn Clock>,
    services: Arc<ServiceHandle>,
    fleet: Option<Arc<crate::fleet::FleetWindows>>,
    series: bool,
}

impl SeriesCollector {
    /// A collector over `registry` and the breakers and limits of
    /// `services`, reading `clock` once per scrape.
    #[must_use]
    pub fn new(
        registry: Arc<Registry>,
        clock: Arc<dyn Clock>,
        services: Arc<ServiceHandle>,
    ) -> Self {
        SeriesCollector {
            registry,
            clock,
            services,
            fleet: None,
            series: true,
        }
    }

    /// Leaves the series families out: the daemon writes those with
    /// [`crate::expose::text`], which produces the same samples at a
    /// fraction of the cost, and registers this collector for the rest
    /// (registry statistics, breakers, limits, the fleet view).
    #[must_use]
    pub fn without_series(mut self) -> Self {
        self.series = false;
        self
    }

    /// Also publishes the fleet view of shared windows.
    #[must_use]
    pub fn with_fleet(mut self, fleet: Option<Arc<crate::fleet::FleetWindows>>) -> Self {
        self.fleet = fleet;
        self
    }
}

pub(crate) const WINDOWED: [(&str, &str); 8] = [
    ("rollstat_window_samples", "Samples in the window, weighted by 1/sample_rate (go-zero Count)."),
    ("rollstat_window_sum_value", "Sum of values in the window, weighted by 1/sample_rate (go-zero Sum)."),
    ("rollstat_window_rate", "Per second over the time the window's buckets cover: increments for counters, samples for other types."),
    ("rollstat_window_avg", "Average value in the window (sum / samples)."),
    ("rollstat_window_min", "Smallest value in the window."),
    ("rollstat_window_max", "Largest value in the window."),
    ("rollstat_window_quantile", "Quantile of the values in the window (DDSketch, 1% relative error), by q."),
    ("rollstat_window_unique", "Distinct set members in the window."),
];

pub(crate) fn pair(name: &str, value: &str) -> LabelPair {
    let mut l = LabelPair::default();
    l.set_name(name.to_string());
    l.set_value(value.to_string());
    l
}

pub(crate) fn gauge(labels: Vec<LabelPair>, v: f64) -> Metric {
    let mut g = Gauge::default();
    g.set_value(v);
    let mut m = Metric::from_gauge(g);
    m.set_label(labels);
    m
}

pub(crate) fn family(
    name: String,
    help: &str,
    t: MetricType,
    metrics: Vec<Metric>,
) -> MetricFamily {
    let mut f = MetricFamily::default();
    f.set_name(name);
    f.set_help(help.to_string());
    f.set_field_type(t);
    f.set_metric(metrics);
    f
}

/// Renders all series families at once; also used by tests without HTTP.
#[must_use]
pub fn collect_series(registry: &Registry, now: crate::Timestamp) -> Vec<MetricFamily> {
    let plan = registry.plan();
    let mut windowed: [Vec<Metric>; 8] = Default::default();
    let mut cumulative: BTreeMap<String, (MetricType, String, String, Vec<Metric>)> =
        BTreeMap::new();
    // Views are computed under the shard locks; metrics are built afterwards
    // in the order `Registry::gather` sorts them (label count, then label
    // values: metric, window, tags), so its stable sort finds each family
    // already in order and moves nothing. It used to sort every windowed
    // family from hash order: a third of a scrape's instructions.
    let mut series: Vec<(Arc<SeriesMeta>, Vec<WindowView>)> = Vec::with_capacity(registry.len());
    registry.visit(|meta, state| {
        let views = (0..meta.windows.len())
            .map(|i| state.window_view(i, now, &plan.quantiles))
            .collect();
        series.push((meta.clone(), views));
        push_cumulative(&mut cumulative, meta, state);
    });
    series.sort_unstable_by(|(a, _), (b, _)| {
        a.labels
            .len()
            .cmp(&b.labels.len())
            .then_with(|| a.metric.cmp(&b.metric))
            .then_with(|| {
                a.labels
                    .iter()
                    .map(|l| &l.1)
                    .cmp(b.labels.iter().map(|l| &l.1))
            })
    });
    for (meta, views) in &series {
        for (wname, v) in meta.windows.iter().zip(views) {
            push_windowed(&mut windowed, meta, wname, v);
        }
    }
    drop(series);
    let mut out = Vec::new();
    for (i, metrics) in windowed.into_iter().enumerate() {
        if !metrics.is_empty() {
            let (name, help) = WINDOWED[i];
            out.push(family(name.to_string(), help, MetricType::GAUGE, metrics));
        }
    }
    for (name, (t, help, _, metrics)) in cumulative {
        out.push(family(name, &help, t, metrics));
    }
    out
}

pub(crate) fn base_labels(meta: &SeriesMeta, window: &str) -> Vec<LabelPair> {
    let mut l = Vec::with_capacity(meta.labels.len() + 3);
    l.push(pair("metric", &meta.metric));
    l.push(pair("window", window));
    for (k, v) in &meta.labels {
        l.push(pair(k, v));
    }
    l
}

/// The windowed values of one view by family index into [`WINDOWED`]
/// (the quantile family, index 6, comes from `v.quantiles` instead): the one
/// rule of which family publishes what, shared by this collector and the
/// text writer ([`crate::expose::text`]). Undefined and non-finite values are
/// `None`: left out, never published as NaN.
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

fn push_windowed(out: &mut [Vec<Metric>; 8], meta: &SeriesMeta, window: &str, v: &WindowView) {
    let labels = base_labels(meta, window);
    for (i, value) in windowed_values(meta.kind, v).into_iter().enumerate() {
        if let Some(x) = value {
            out[i].push(gauge(labels.clone(), x));
        }
    }
    for (q, value) in &v.quantiles {
        if let Some(x) = value.filter(|x| x.is_finite()) {
            let mut l = labels.clone();
            l.push(pair("q", &format_q(*q)));
            out[6].push(gauge(l, x));
        }
    }
}

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
    /// `<name>`.
    Gauge,
    /// `<name>_bucket/_sum/_count` (timers in seconds).
    Histogram,
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

    /// The family name for the sanitised statsd name `prom_name`.
    pub(crate) fn family_name(self, prom_name: &str) -> String {
        match self {
            Cumulative::Counter => format!("{prom_name}_total"),
            Cumulative::Gauge | Cumulative::Histogram => prom_name.to_string(),
        }
    }

    /// The family's HELP text, naming the statsd metric.
    pub(crate) fn help(self, kind: MetricKind, metric: &str) -> String {
        let (before, after) = self.help_around(kind);
        format!("{before}{metric}{after}")
    }

    /// The HELP text before and after the statsd name (so the text writer
    /// can write it without formatting a `String` per family).
    pub(crate) fn help_around(self, kind: MetricKind) -> (&'static str, &'static str) {
        match (self, kind) {
            (Cumulative::Counter, _) => (
                "statsd counter ",
                " (sum of increments, weighted by 1/sample_rate).",
            ),
            (Cumulative::Gauge, _) => ("statsd gauge ", "."),
            (Cumulative::Histogram, MetricKind::Timer) => ("statsd timer ", " in seconds."),
            (Cumulative::Histogram, MetricKind::Histogram) => ("statsd histogram ", "."),
            (Cumulative::Histogram, _) => ("statsd distribution ", "."),
        }
    }

    fn metric_type(self) -> MetricType {
        match self {
            Cumulative::Counter => MetricType::COUNTER,
            Cumulative::Gauge => MetricType::GAUGE,
            Cumulative::Histogram => MetricType::HISTOGRAM,
        }
    }
}

fn push_cumulative(
    out: &mut BTreeMap<String, (MetricType, String, String, Vec<Metric>)>,
    meta: &SeriesMeta,
    state: &SeriesState,
) {
    let Some(family) = Cumulative::of(meta.kind) else {
        return;
    };
    let labels: Vec<LabelPair> = meta.labels.iter().map(|(k, v)| pair(k, v)).collect();
    let mut metric = match state {
        SeriesState::Counter { total, .. } => {
            let mut c = Counter::default();
            c.set_value(*total);
            let mut m = Metric::default();
            m.set_counter(c);
            m
        }
        SeriesState::Gauge { value, .. } => gauge(Vec::new(), *value),
        SeriesState::Distribution { histogram, .. } => {
            let mut h = Histogram::default();
            let buckets = cumulative_buckets(&meta.histogram_buckets, &histogram.counts)
                .map(|(ub, cum)| {
                    let mut b = Bucket::default();
                    b.set_upper_bound(ub);
                    b.set_cumulative_count(cum);
                    b
                })
                .collect();
            h.set_bucket(buckets);
            h.set_sample_count(histogram.count.round() as u64);
            h.set_sample_sum(histogram.sum);
            let mut m = Metric::default();
            m.set_histogram(h);
            m
        }
        SeriesState::Set { .. } => return,
    };
    metric.set_label(labels);
    let e = out
        .entry(family.family_name(&meta.prom_name))
        .or_insert_with(|| {
            (
                family.metric_type(),
                family.help(meta.kind, &meta.metric),
                meta.metric.clone(),
                Vec::new(),
            )
        });
    // Several statsd names can share a family (`a.b` and `a_b`): the HELP
    // names the smallest, whatever the order series are visited in.
    if meta.metric < e.2 {
        e.1 = family.help(meta.kind, &meta.metric);
        e.2 = meta.metric.clone();
    }
    e.3.push(metric);
}

/// `(upper bound, cumulative count)` per finite bucket: the weighted counts
/// added up and rounded as Prometheus wants whole counts.
pub(crate) fn cumulative_buckets<'a>(
    bounds: &'a [f64],
    counts: &'a [f64],
) -> impl Iterator<Item = (f64, u64)> + 'a {
    let mut cum = 0.0;
    bounds.iter().zip(counts).map(move |(ub, c)| {
        cum += c;
        (*ub, cum.round() as u64)
    })
}

impl Collector for SeriesCollector {
    fn desc(&self) -> Vec<&Desc> {
        // Families are dynamic; a prometheus::Registry accepts only one
        // description-less collector, so this one gathers every dynamic
        // family: series, registry statistics, breakers and limits.
        Vec::new()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.collect_at(self.clock.now())
    }
}

impl SeriesCollector {
    /// The fleet view of shared windows, if Redis sharing is on.
    #[must_use]
    pub fn fleet(&self) -> Option<&crate::fleet::FleetWindows> {
        self.fleet.as_deref()
    }

    /// The clock reading a scrape should use for everything it publishes.
    #[must_use]
    pub fn now(&self) -> crate::Timestamp {
        self.clock.now()
    }

    /// Every family as of `now`: what [`Collector::collect`] returns, for a
    /// caller that also writes the series text at the same `now` (one clock
    /// reading per scrape, so that e.g. a fleet rate and the local rate of
    /// one scrape cover the same time).
    #[must_use]
    pub fn collect_at(&self, now: crate::Timestamp) -> Vec<MetricFamily> {
        let mut out = if self.series {
            collect_series(&self.registry, now)
        } else {
            Vec::new()
        };
        if let Some(f) = &self.fleet {
            out.extend(f.families(&self.registry, now));
        }
        out.extend(crate::telemetry::registry_families(&self.registry));
        out.extend(crate::expose::signals::families(
            &self.services.current(),
            now,
        ));
        out
    }
}
