//! The plan: what the mapping rules and the config make of a statsd name
//! and tag set (drop, rename, labels, windows, sharing), and the caps new
//! series are held to. A registry follows one plan at a time; a reload
//! swaps it ([`Registry::set_plan`](super::Registry::set_plan)).

use std::sync::Arc;
use std::time::Duration;

use super::{Action, Mapping, NamedWindow, Settings};
use crate::clock::Timestamp;
use crate::names;
use crate::parse::MetricKind;
use crate::window::Layout;

/// The settings a registry applies to new series, and to existing ones on
/// [`Registry::replan`](super::Registry::replan); swapped on reload.
#[derive(Debug)]
pub struct Plan {
    pub(super) windows: Vec<NamedWindow>,
    /// When each of `windows` began to be watched: the denominator of its
    /// rates never reaches further back ([`RollingWindow::watched_from`](crate::window::RollingWindow::watched_from)).
    pub(super) watched: Vec<Timestamp>,
    pub(super) default_windows: Vec<usize>,
    pub(super) default_window_names: Arc<[String]>,
    pub(super) mappings: Vec<Mapping>,
    /// Published quantiles.
    pub quantiles: Vec<f64>,
    /// Cumulative histogram bounds.
    pub histogram_buckets: Arc<[f64]>,
    pub(super) ttl: Duration,
    pub(super) max_series: usize,
    pub(super) max_series_per_metric: Option<usize>,
    pub(super) max_label_bytes: usize,
    /// `[statsd_exporter] cumulative_names = "statsd_exporter"`: names and
    /// label names escaped as statsd_exporter escapes them, counters not
    /// ending in `_total` published as they are.
    pub(super) exporter_names: bool,
    /// What a tag without a value becomes: statsd_exporter's rule (left
    /// out) under a statsd_exporter mapping file or its names, else `true`.
    pub(super) valueless: super::key::Valueless,
    /// `[series] native_histogram_*`.
    pub(super) native: super::NativeHistograms,
    /// `[series] name_escaping = "as_asked"`.
    names_as_asked: bool,
    /// The layout of every window list a series can get (the defaults and
    /// each rule's `windows`), built once: series on the same windows share
    /// it.
    layouts: Vec<(Vec<usize>, Arc<Layout>)>,
}

/// A series' native histogram: its starting schema (from the bucket
/// factor) and the most populated buckets it may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeSpec {
    /// `-4..=8`: bucket bounds at powers of `2^(2^-schema)`.
    pub schema: i8,
    /// Past this many populated buckets the resolution halves.
    pub max_buckets: u32,
}

/// The names a series' labels were sent as, in the order of its labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentNames(pub Box<[Box<str>]>);

/// What a plan makes of a series: its published identity and windows.
pub(super) struct Resolved {
    pub(super) metric: String,
    pub(super) prom_name: String,
    pub(super) labels: Vec<(String, String)>,
    pub(super) window_ids: Vec<usize>,
    pub(super) shared: bool,
    /// The rule's own expiry (zero: never), if it sets one.
    pub(super) ttl: Option<Duration>,
    /// The rule's own histogram bounds, if it sets them.
    pub(super) histogram_buckets: Option<Arc<[f64]>>,
    /// The rule's `scale`, else 1.
    pub(super) scale: f64,
    /// The rule's `help`, if any.
    pub(super) help: Option<Arc<str>>,
    /// The label names as sent, where they differ from `labels`' (see
    /// [`SeriesMeta::sent_label_names`](super::SeriesMeta::sent_label_names)).
    pub(super) sent_label_names: Option<Box<SentNames>>,
    /// Its native histogram's schema and bucket limit, if it has one.
    pub(super) native: Option<NativeSpec>,
    /// A counter published under its own name, as statsd_exporter does.
    pub(super) counter_as_is: bool,
    /// A timer, histogram or distribution published as a summary.
    pub(super) summary: Option<Arc<super::SummarySpec>>,
}

impl Plan {
    /// Runs the mapping rules on a series named `name` of `kind` with
    /// `tags` (sorted by key, unique): `None` if a rule drops it. Tags left
    /// out because another sanitised to the same label are added to
    /// `tags_dropped`.
    pub(super) fn resolve(
        &self,
        name: &str,
        kind: MetricKind,
        tags: &[(&str, &str)],
        tags_dropped: &mut u64,
    ) -> Option<Resolved> {
        let mut caps = Vec::new();
        let rule = self.mappings.iter().find(|m| {
            m.match_type.is_none_or(|k| k.contains(kind)) && m.pattern.matches(name, &mut caps)
        });
        if rule.is_some_and(|m| m.action == Action::Drop) {
            return None;
        }
        let metric = match rule.and_then(|m| m.rename.as_ref()) {
            Some(t) => t.render(&caps),
            None => name.to_string(),
        };
        let mut prom_name = if self.exporter_names {
            names::exporter_metric_name(&metric)
        } else {
            names::metric_name(&metric)
        };
        let counter_as_is =
            self.exporter_names && kind == MetricKind::Counter && !prom_name.ends_with("_total");
        if kind == MetricKind::Counter {
            // A counter's samples are `<family>_total`: a name that already
            // ends so (`requests_total`, a statsd_exporter mapping's `name`)
            // is the sample name, not the family's, as Prometheus' client
            // libraries read it (never `requests_total_total`).
            if let Some(family) = prom_name.strip_suffix("_total").filter(|f| !f.is_empty()) {
                prom_name.truncate(family.len());
            }
        }
        if prom_name.starts_with("rollstat_") {
            // Our own families own that prefix.
            prom_name.insert_str(0, "statsd_");
        }
        let (mut labels, sent_label_names) = self.published_labels(tags, rule, &caps, tags_dropped);
        labels.sort();
        let native = self.native_spec(kind, rule);
        let window_ids = rule
            .and_then(|m| m.windows.clone())
            .unwrap_or_else(|| self.default_windows.clone());
        let ttl = rule
            .and_then(|m| m.ttl)
            .map(|t| self.ttl_over(t, &window_ids));
        Some(Resolved {
            metric,
            prom_name,
            labels,
            window_ids,
            shared: rule.is_some_and(|m| m.shared),
            ttl,
            histogram_buckets: rule.and_then(|m| m.histogram_buckets.clone()),
            scale: rule.and_then(|m| m.scale).unwrap_or(1.0),
            help: rule.and_then(|m| m.help.clone()),
            counter_as_is,
            summary: rule
                .and_then(|m| m.summary.clone())
                .filter(|_| super::KindSet::OBSERVER.contains(kind)),
            sent_label_names,
            native,
        })
    }

    /// The labels a series of `tags` publishes under `rule` (captures
    /// `caps`): tags sanitised (a second tag sanitising to a taken name is
    /// counted in `tags_dropped`), then the rule's labels (an empty one
    /// removes the label; `honor_labels` keeps a tag's value); with the
    /// names the labels were sent as, where they differ and may be kept.
    fn published_labels(
        &self,
        tags: &[(&str, &str)],
        rule: Option<&Mapping>,
        caps: &[&str],
        tags_dropped: &mut u64,
    ) -> (Vec<(String, String)>, Option<Box<SentNames>>) {
        let mut labels: Vec<(String, String)> = Vec::with_capacity(tags.len());
        // The name each label was sent as, when it differs and may be
        // published (`None` for the rest, and under statsd_exporter's
        // names, which are always escaped).
        let mut sent: Vec<Option<&str>> = Vec::with_capacity(tags.len());
        for (k, v) in tags {
            let name = if self.exporter_names {
                names::exporter_label_name(k)
            } else {
                names::label_name(k)
            };
            if labels.iter().any(|(l, _)| *l == name) {
                // `content-type` and `content_type` on one line: the first
                // (in key order) keeps the label; the other is counted.
                *tags_dropped += 1;
            } else {
                sent.push(
                    (!self.exporter_names && name != *k && names::may_keep_as_sent(k))
                        .then_some(*k),
                );
                labels.push((name, v.to_string()));
            }
        }
        if let Some(m) = rule {
            // Mapping label names are valid and never reserved (the config
            // checks), so they are their own label names.
            for (k, tpl) in &m.labels {
                let v = tpl.render(caps);
                if v.is_empty() {
                    // Prometheus reads an empty value as no label at all.
                    // (`sent` goes with `labels`, index for index.)
                    if let Some(i) = labels.iter().position(|(l, _)| l == k) {
                        labels.remove(i);
                        sent.remove(i);
                    }
                    continue;
                }
                match labels.iter().position(|(l, _)| l == k) {
                    // statsd_exporter's honor_labels: the tag keeps its value.
                    Some(_) if m.honor_labels => {}
                    // The mapping's label, under the mapping's name.
                    Some(i) => (labels[i].1, sent[i]) = (v, None),
                    None => {
                        labels.push((k.clone(), v));
                        sent.push(None);
                    }
                }
            }
        }
        debug_assert_eq!(labels.len(), sent.len());
        let sent_label_names = sent.iter().any(Option::is_some).then(|| {
            let mut pairs: Vec<(&str, &str)> = labels
                .iter()
                .zip(&sent)
                .map(|((l, _), s)| (l.as_str(), s.unwrap_or(l)))
                .collect();
            pairs.sort_unstable();
            Box::new(SentNames(
                pairs.into_iter().map(|(_, s)| s.into()).collect(),
            ))
        });
        (labels, sent_label_names)
    }

    /// A rule's expiry `ttl` for a series on windows `ids`: never shorter
    /// than the longest of them (a series lives until its windows have
    /// drained, so every family goes together); zero stays never.
    fn ttl_over(&self, ttl: Duration, ids: &[usize]) -> Duration {
        if ttl.is_zero() {
            return ttl;
        }
        ids.iter()
            .map(|&i| self.windows[i].spec.length())
            .fold(ttl, Duration::max)
    }

    /// The native histogram of a series of `kind` matched by `rule`: the
    /// rule's factor and limit where it sets them (for any timer, histogram
    /// or distribution), else `[series]`'s for its types; none for a
    /// summary, or where the factor is 0.
    fn native_spec(&self, kind: MetricKind, rule: Option<&Mapping>) -> Option<NativeSpec> {
        use super::KindSet;
        if !KindSet::OBSERVER.contains(kind) || rule.is_some_and(|m| m.summary.is_some()) {
            return None;
        }
        let factor = match rule.and_then(|m| m.native_bucket_factor) {
            Some(f) => f,
            None if self.native.types.contains(kind) => self.native.bucket_factor,
            None => return None,
        };
        Some(NativeSpec {
            schema: crate::sketch::native::schema_for_factor(factor)?,
            max_buckets: rule
                .and_then(|m| m.native_max_buckets)
                .unwrap_or(self.native.max_buckets),
        })
    }

    /// This plan with every window watched from `now` (a daemon starting):
    /// a windowed rate read in the first minute of a `1m` window divides by
    /// the time since `now`, not by the minute.
    #[must_use]
    pub fn watched_from(mut self, now: Timestamp) -> Plan {
        self.watched.fill(now);
        self.with_layouts()
    }

    /// The plan of `cfg` replacing `self` on a reload at `now`: a window
    /// whose name and shape are unchanged keeps the time it was watched
    /// from (series keep its history, see [`Registry::replan`](super::Registry::replan)); a new or
    /// changed one is watched from the start of its bucket holding `now`,
    /// and reads nothing older. It shares its ring with windows that may
    /// already hold data, and a bucket cannot be split at `now`: so it holds,
    /// from the start, what came in that one bucket before the reload, and
    /// counts that bucket's time as watched (its rate stays true), never
    /// anything older.
    #[must_use]
    pub fn successor(&self, cfg: Settings<'_>, now: Timestamp) -> Plan {
        let mut next = Plan::new(cfg);
        for (w, watched) in next.windows.iter().zip(next.watched.iter_mut()) {
            *watched = match self.windows.iter().position(|old| old == w) {
                Some(i) => self.watched[i],
                None => {
                    let (t, i) = (
                        now.as_nanos(),
                        crate::clock::duration_nanos(w.spec.interval()),
                    );
                    Timestamp::from_nanos(t - t % i.max(1))
                }
            };
        }
        next.with_layouts()
    }

    /// The layout of windows `ids` (every list the plan gives a series is
    /// built in advance; another is built on the spot).
    pub(super) fn layout(&self, ids: &[usize]) -> Arc<Layout> {
        match self.layouts.iter().find(|(l, _)| l == ids) {
            Some((_, layout)) => layout.clone(),
            None => Arc::new(self.build_layout(ids)),
        }
    }

    fn build_layout(&self, ids: &[usize]) -> Layout {
        Layout::new(ids.iter().map(|&i| (self.windows[i].spec, self.watched[i])))
    }

    /// Builds the layouts of the defaults and of every rule's windows, for
    /// the current `watched`.
    fn with_layouts(mut self) -> Plan {
        let mut lists = vec![self.default_windows.clone()];
        lists.extend(self.mappings.iter().filter_map(|m| m.windows.clone()));
        lists.sort();
        lists.dedup();
        self.layouts = lists
            .into_iter()
            .map(|ids| {
                let layout = Arc::new(self.build_layout(&ids));
                (ids, layout)
            })
            .collect();
        self
    }

    /// Whether names follow statsd_exporter's (`[statsd_exporter]
    /// cumulative_names = "statsd_exporter"`).
    #[must_use]
    pub fn exporter_names(&self) -> bool {
        self.exporter_names
    }

    /// Whether names are escaped as each scraper asks: not under `[series]
    /// name_escaping = "underscores"`, nor under statsd_exporter's names,
    /// which statsd_exporter always escapes with underscores (so that a
    /// Prometheus 3 asking for UTF-8 names sees the names the shop had).
    #[must_use]
    pub fn names_as_asked(&self) -> bool {
        self.names_as_asked && !self.exporter_names
    }

    /// The names of windows `ids` (shared by every series on the defaults).
    pub(super) fn window_names(&self, ids: &[usize]) -> Arc<[String]> {
        if ids == self.default_windows {
            self.default_window_names.clone()
        } else {
            ids.iter().map(|&i| self.windows[i].name.clone()).collect()
        }
    }

    /// The plan of a validated config, whose windows count as watched
    /// since the epoch (their rates divide by their whole span from the
    /// first second): for a library user replaying history. A daemon uses
    /// [`watched_from`](Self::watched_from) at start and
    /// [`successor`](Self::successor) on reload.
    #[must_use]
    pub fn new(cfg: Settings<'_>) -> Plan {
        Plan {
            layouts: Vec::new(),
            watched: vec![Timestamp::EPOCH; cfg.windows.len()],
            default_windows: (0..cfg.windows.len()).collect(),
            default_window_names: cfg.windows.iter().map(|w| w.name.clone()).collect(),
            windows: cfg.windows.to_vec(),
            mappings: cfg.mappings.to_vec(),
            quantiles: cfg.series.quantiles.clone(),
            histogram_buckets: cfg.series.histogram_buckets.clone().into(),
            ttl: cfg.series.ttl,
            max_series: cfg.series.max_series,
            max_series_per_metric: cfg.series.max_series_per_metric,
            max_label_bytes: cfg.series.max_label_bytes,
            exporter_names: cfg.exporter_names,
            valueless: if cfg.exporter_compatible {
                super::key::Valueless::Drop
            } else {
                super::key::Valueless::True
            },
            native: cfg.series.native_histograms,
            names_as_asked: cfg.series.names_as_asked,
        }
        .with_layouts()
    }
}
