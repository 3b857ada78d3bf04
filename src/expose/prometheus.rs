//! `/metrics` in the `prometheus` crate's model: a
//! `prometheus::core::Collector` that computes every windowed and
//! cumulative value at scrape time, from one clock reading.
//!
//! The series families follow the rules in `families.rs`; the
//! daemon writes the series with [`super::text`] instead (same samples, a
//! fraction of the cost) and registers this collector for the rest:
//! registry statistics, breakers and limits ([`super::signals`]), the fleet
//! view. A series whose values cannot be computed never fails the scrape.
//!
//! Encoding: the families this collector returns are written by the
//! `prometheus` crate's `TextEncoder` for text 0.0.4, whose escaper follows
//! the text 0.0.4 rule (`encode.rs`: label values escape `\`, `"`,
//! line feed; HELP `\` and line feed), or by [`super::openmetrics`] for
//! OpenMetrics, with the OpenMetrics escaper of `encode.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Bucket, Histogram, LabelPair, Metric, MetricFamily, MetricType};

use super::families::{
    base_labels, counter, family, format_q, gauge, pair, quantile_values, windowed_values,
    Cumulative, CumulativeValue, QUANTILE_FAMILY, QUANTILE_LABEL, WINDOWED,
};
use crate::clock::Clock;
use crate::series::{Registry, SeriesMeta, SeriesState, WindowView};
use crate::service::ServiceHandle;

/// A cumulative family being gathered: its type, its HELP, what chose
/// the HELP (a rule's own first, then the smallest statsd name), its
/// samples.
type Family = (MetricType, String, (bool, String), Vec<Metric>);
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

/// Renders all series families at once; also used by tests without HTTP.
#[must_use]
pub fn collect_series(registry: &Registry, now: crate::Timestamp) -> Vec<MetricFamily> {
    let plan = registry.plan();
    let mut windowed: [Vec<Metric>; 8] = Default::default();
    let mut cumulative: BTreeMap<String, Family> = BTreeMap::new();
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
        push_cumulative(&mut cumulative, meta, state, now);
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
            out.push(WINDOWED[i].of(metrics));
        }
    }
    for (name, (t, help, _, metrics)) in cumulative {
        out.push(family(name, &help, t, metrics));
    }
    out
}

fn push_windowed(out: &mut [Vec<Metric>; 8], meta: &SeriesMeta, window: &str, v: &WindowView) {
    let labels = base_labels(meta, window);
    for (i, value) in windowed_values(meta.kind, v).into_iter().enumerate() {
        if let Some(x) = value {
            out[i].push(gauge(labels.clone(), x));
        }
    }
    for (q, value) in quantile_values(v) {
        if let Some(x) = value {
            let mut l = labels.clone();
            l.push(pair(QUANTILE_LABEL, &format_q(q)));
            out[QUANTILE_FAMILY].push(gauge(l, x));
        }
    }
}

fn push_cumulative(
    out: &mut BTreeMap<String, Family>,
    meta: &SeriesMeta,
    state: &SeriesState,
    now: crate::Timestamp,
) {
    let (Some(family), Some(value)) = (
        Cumulative::of_series(meta),
        CumulativeValue::of(meta, state),
    ) else {
        return;
    };
    let labels: Vec<LabelPair> = meta.labels.iter().map(|(k, v)| pair(k, v)).collect();
    let metric = match value {
        CumulativeValue::Counter(total) => counter(labels, total),
        CumulativeValue::Gauge(value) => gauge(labels, value),
        CumulativeValue::Histogram(v) if family == Cumulative::Summary => {
            let qs = meta.summary.as_ref().map_or(&[][..], |s| &s.quantiles[..]);
            let mut sm = prometheus::proto::Summary::default();
            sm.set_quantile(
                state
                    .summary_quantiles(qs, now)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(q, x)| {
                        let mut pq = prometheus::proto::Quantile::default();
                        pq.set_quantile(q);
                        pq.set_value(x);
                        pq
                    })
                    .collect(),
            );
            sm.set_sample_count(v.count());
            sm.set_sample_sum(v.sum());
            let mut m = Metric::default();
            m.set_summary(sm);
            m.set_label(labels);
            m
        }
        CumulativeValue::Histogram(v) => {
            let mut h = Histogram::default();
            let buckets = v
                .buckets()
                .map(|(ub, cum)| {
                    let mut b = Bucket::default();
                    b.set_upper_bound(ub);
                    b.set_cumulative_count(cum);
                    b
                })
                .collect();
            h.set_bucket(buckets);
            h.set_sample_count(v.count());
            h.set_sample_sum(v.sum());
            let mut m = Metric::default();
            m.set_histogram(h);
            m.set_label(labels);
            m
        }
    };
    let help = || match &meta.help {
        Some(h) => h.to_string(),
        None => family.help(meta.kind, &meta.metric),
    };
    // Ordered as the HELP is chosen: a mapping rule's `help` first, then
    // the smallest statsd name.
    let rank = (meta.help.is_none(), meta.metric.clone());
    let e = out
        .entry(family.family_name(&meta.prom_name))
        .or_insert_with(|| (family.metric_type(), help(), rank.clone(), Vec::new()));
    // Several statsd names can share a family (`a.b` and `a_b`): the HELP
    // is the same whatever the order series are visited in.
    if rank < e.2 {
        e.1 = help();
        e.2 = rank;
    }
    e.3.push(metric);
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
        let g = self.groups_at(now);
        out.extend(g.fleet);
        out.extend(g.registry);
        out.extend(g.signals);
        out
    }

    /// What [`collect_at`](Self::collect_at) returns but the series, by
    /// group (what a push output selects).
    #[must_use]
    pub fn groups_at(&self, now: crate::Timestamp) -> StateGroups {
        StateGroups {
            fleet: self.fleet.as_ref().map_or_else(Vec::new, |f| {
                crate::expose::fleet::families(f, &self.registry, now)
            }),
            registry: crate::telemetry::registry_families(&self.registry),
            signals: crate::expose::signals::families(&self.services.current(), now),
        }
    }
}

/// The families of [`SeriesCollector::groups_at`].
pub struct StateGroups {
    /// The fleet view of shared windows (windowed).
    pub fleet: Vec<MetricFamily>,
    /// The registry's own statistics (self-metrics).
    pub registry: Vec<MetricFamily>,
    /// Breakers and limits.
    pub signals: Vec<MetricFamily>,
}
