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
    fleet: Option<Arc<crate::store::FleetWindows>>,
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
        }
    }

    /// Also publishes the fleet view of shared windows.
    #[must_use]
    pub fn with_fleet(mut self, fleet: Option<Arc<crate::store::FleetWindows>>) -> Self {
        self.fleet = fleet;
        self
    }
}

const WINDOWED: [(&str, &str); 8] = [
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
    let mut cumulative: BTreeMap<String, (MetricType, String, Vec<Metric>)> = BTreeMap::new();
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
    for (name, (t, help, metrics)) in cumulative {
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

fn push_windowed(out: &mut [Vec<Metric>; 8], meta: &SeriesMeta, window: &str, v: &WindowView) {
    let labels = base_labels(meta, window);
    let mut put = |i: usize, value: Option<f64>| {
        if let Some(x) = value.filter(|x| x.is_finite()) {
            out[i].push(gauge(labels.clone(), x));
        }
    };
    put(0, Some(v.samples));
    if meta.kind != MetricKind::Set {
        put(1, Some(v.sum));
    }
    put(2, Some(v.rate));
    put(3, v.avg);
    put(4, v.min);
    put(5, v.max);
    put(7, v.unique.map(|u| u as f64));
    for (q, value) in &v.quantiles {
        if let Some(x) = value.filter(|x| x.is_finite()) {
            let mut l = labels.clone();
            l.push(pair("q", &format_q(*q)));
            out[6].push(gauge(l, x));
        }
    }
}

fn format_q(q: f64) -> String {
    let s = format!("{q}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

fn push_cumulative(
    out: &mut BTreeMap<String, (MetricType, String, Vec<Metric>)>,
    meta: &SeriesMeta,
    state: &SeriesState,
) {
    let labels: Vec<LabelPair> = meta.labels.iter().map(|(k, v)| pair(k, v)).collect();
    let (name, t, help, mut metric) = match state {
        SeriesState::Counter { total, .. } => {
            let mut c = Counter::default();
            c.set_value(*total);
            let mut m = Metric::default();
            m.set_counter(c);
            (
                format!("{}_total", meta.prom_name),
                MetricType::COUNTER,
                format!(
                    "statsd counter {} (sum of increments, weighted by 1/sample_rate).",
                    meta.metric
                ),
                m,
            )
        }
        SeriesState::Gauge { value, .. } => (
            meta.prom_name.to_string(),
            MetricType::GAUGE,
            format!("statsd gauge {}.", meta.metric),
            gauge(Vec::new(), *value),
        ),
        SeriesState::Distribution { histogram, .. } => {
            let mut h = Histogram::default();
            let mut cum = 0.0;
            let buckets = meta
                .histogram_buckets
                .iter()
                .zip(&histogram.counts)
                .map(|(ub, c)| {
                    cum += c;
                    let mut b = Bucket::default();
                    b.set_upper_bound(*ub);
                    b.set_cumulative_count(cum.round() as u64);
                    b
                })
                .collect();
            h.set_bucket(buckets);
            h.set_sample_count(histogram.count.round() as u64);
            h.set_sample_sum(histogram.sum);
            let mut m = Metric::default();
            m.set_histogram(h);
            let unit = if meta.kind == MetricKind::Timer {
                " in seconds"
            } else {
                ""
            };
            (
                meta.prom_name.to_string(),
                MetricType::HISTOGRAM,
                format!("statsd {} {}{unit}.", meta.kind.as_str(), meta.metric),
                m,
            )
        }
        SeriesState::Set { .. } => return,
    };
    metric.set_label(labels);
    out.entry(name)
        .or_insert_with(|| (t, help, Vec::new()))
        .2
        .push(metric);
}

impl Collector for SeriesCollector {
    fn desc(&self) -> Vec<&Desc> {
        // Families are dynamic; a prometheus::Registry accepts only one
        // description-less collector, so this one gathers every dynamic
        // family: series, registry statistics, breakers and limits.
        Vec::new()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let now = self.clock.now();
        let mut out = collect_series(&self.registry, now);
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
