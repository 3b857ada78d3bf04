//! The series registry: statsd samples in, one [`SeriesState`] per name and
//! tag set, bounded in number and in time.
//!
//! * **Key.** Name plus sorted tags ([`key`]); a hit costs one hash, one shard
//!   lock and no allocation. The key is hashed once (foldhash, seeded per
//!   process): the same hash picks the shard (bits 40..) and the slot in the
//!   shard's `hashbrown::HashTable` (which also keeps it, so growing a shard
//!   never rehashes keys).
//! * **Shards.** A power of two of `parking_lot::Mutex<HashTable>`s, so ingest
//!   threads rarely contend; a scrape locks one shard at a time.
//! * **Birth.** On a miss the mapping rules run once (drop, rename, extra
//!   labels, per-rule windows), the Prometheus identity is computed and
//!   checked in a small catalog, and the windows are created on the
//!   epoch-aligned grid.
//! * **One type per name.** The first statsd type seen for a Prometheus name
//!   owns it while any of its series lives; a line of another type for that
//!   name is refused as `type_conflict` (counted), so `/metrics` never shows
//!   one family with two types. Two raw names or tag sets that sanitise to the
//!   same published identity: the first wins, the later is refused as
//!   `label_collision`.
//! * **Bounds.** At most `max_series` entries (lines for new series beyond it
//!   are refused as `series_cap`); a series not written for `ttl` is removed
//!   by [`Registry::sweep`]. Both are counted.
//! * **Reload.** [`Registry::set_plan`] swaps the plan new series follow;
//!   [`Registry::replan`] then re-resolves every existing entry against it,
//!   one shard at a time (copy the keys under the lock, decide without it,
//!   apply under it again): same identity and windows, untouched; same
//!   identity, other windows, its windows are rebuilt (a window whose name
//!   and shape are unchanged keeps its history) and its cumulative values
//!   kept; dropped, renamed or relabelled, removed, so that its next line
//!   starts it fresh under the new rules. Each outcome is counted.

pub mod footprint;
pub mod key;
pub mod state;

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hashbrown::HashTable;
use parking_lot::{Mutex, RwLock};

use crate::clock::Timestamp;
use crate::config::{Action, Config, Mapping, NamedWindow};
use crate::names;
use crate::parse::{MetricKind, Sample, MAX_TAGS};
pub use key::KeyBuf;
pub use state::{Folded, Overflow, SeriesState, WindowView};

/// Why a line was not applied to a series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The name already belongs to another statsd type.
    TypeConflict,
    /// The series cap is reached and this would be a new series.
    SeriesCap,
    /// The published identity is already taken by another raw key.
    LabelCollision,
    /// Applying it would make a stored number infinite (a counter's total,
    /// a gauge's value, a histogram's sum, a window bucket's sum).
    Overflow,
    /// A new series whose labels (names and values) exceed
    /// `series.max_label_bytes`.
    LabelsTooLarge,
    /// A new series of a metric that already has
    /// `series.max_series_per_metric` series.
    MetricSeriesCap,
}

impl Refusal {
    /// Every reason label, in the order of [`RegistryCounters::refused`].
    pub const ALL_REASONS: [&'static str; 6] = [
        "type_conflict",
        "series_cap",
        "label_collision",
        "overflow",
        "labels_too_large",
        "metric_series_cap",
    ];

    /// Stable label for the refusal counters.
    #[must_use]
    pub const fn reason(self) -> &'static str {
        match self {
            Refusal::TypeConflict => "type_conflict",
            Refusal::SeriesCap => "series_cap",
            Refusal::LabelCollision => "label_collision",
            Refusal::Overflow => "overflow",
            Refusal::LabelsTooLarge => "labels_too_large",
            Refusal::MetricSeriesCap => "metric_series_cap",
        }
    }

    /// Its index in [`ALL_REASONS`](Self::ALL_REASONS).
    const fn index(self) -> usize {
        self as usize
    }
}

/// What happened to an accepted line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Folded into its series.
    Stored,
    /// Matched a `drop` mapping rule.
    DroppedByMapping,
}

/// What a reload did to one existing entry ([`Registry::replan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Replanned {
    /// Same identity and windows under the new plan: left untouched.
    Kept,
    /// Same identity, other windows: the changed windows start empty, the
    /// cumulative values are kept.
    Rewindowed,
    /// Dropped, renamed or relabelled by the new rules: removed (its next
    /// line starts it fresh under the new plan).
    Removed,
}

impl Replanned {
    /// Every outcome label.
    pub const ALL_OUTCOMES: [&'static str; 3] = ["kept", "rewindowed", "removed"];

    /// Stable label for the replan counter.
    #[must_use]
    pub const fn outcome(self) -> &'static str {
        match self {
            Replanned::Kept => "kept",
            Replanned::Rewindowed => "rewindowed",
            Replanned::Removed => "removed",
        }
    }
}

/// What one [`Registry::replan`] did, by outcome (drop-rule markers
/// included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplanReport {
    /// Entries left untouched.
    pub kept: usize,
    /// Series whose windows were rebuilt.
    pub rewindowed: usize,
    /// Entries removed.
    pub removed: usize,
}

impl ReplanReport {
    fn add(&mut self, r: Replanned) {
        match r {
            Replanned::Kept => self.kept += 1,
            Replanned::Rewindowed => self.rewindowed += 1,
            Replanned::Removed => self.removed += 1,
        }
    }
}

/// The published identity and settings of a series, decided at birth and
/// again by a reload ([`Registry::replan`]).
#[derive(Clone, Debug)]
pub struct SeriesMeta {
    /// statsd type.
    pub kind: MetricKind,
    /// The statsd name after mapping: the `metric` label.
    pub metric: String,
    /// The cumulative family name (sanitised `metric`); shared with the
    /// registry's catalog.
    pub prom_name: Arc<str>,
    /// Sanitised, sorted labels (tags and mapping labels).
    pub labels: Vec<(String, String)>,
    /// Names of the windows kept, in the order of the state's windows
    /// (shared by every series on the same windows).
    pub windows: Arc<[String]>,
    /// Cumulative histogram bounds (timers, histograms, distributions).
    pub histogram_buckets: Arc<[f64]>,
    /// Whether its windows are shared with the fleet (mapping `shared`).
    pub shared: bool,
    /// When the series was born: its cumulative values count from here
    /// (OpenMetrics `_created`). A series that expires and comes back is
    /// born again, its counter restarting at 0.
    pub created: Timestamp,
}

impl SeriesMeta {
    /// The published identity, as the catalog keys it. Recomputed when the
    /// series goes rather than kept: it would cost every series a copy.
    fn identity(&self) -> String {
        identity_of(&self.prom_name, &self.labels)
    }
}

/// Prometheus name and sorted labels, NUL-separated.
fn identity_of(prom_name: &str, labels: &[(String, String)]) -> String {
    let mut identity = prom_name.to_string();
    for (k, v) in labels {
        identity.push('\0');
        identity.push_str(k);
        identity.push('\0');
        identity.push_str(v);
    }
    identity
}

/// The settings a registry applies to new series, and to existing ones on
/// [`Registry::replan`]; swapped on reload.
#[derive(Debug)]
pub struct Plan {
    windows: Vec<NamedWindow>,
    /// When each of `windows` began to be watched: the denominator of its
    /// rates never reaches further back ([`RollingWindow::watched_from`](crate::window::RollingWindow::watched_from)).
    watched: Vec<Timestamp>,
    default_windows: Vec<usize>,
    default_window_names: Arc<[String]>,
    mappings: Vec<Mapping>,
    /// Published quantiles.
    pub quantiles: Vec<f64>,
    /// Cumulative histogram bounds.
    pub histogram_buckets: Arc<[f64]>,
    ttl: Duration,
    max_series: usize,
    max_series_per_metric: Option<usize>,
    max_label_bytes: usize,
}

/// What a plan makes of a series: its published identity and windows.
struct Resolved {
    metric: String,
    prom_name: String,
    labels: Vec<(String, String)>,
    window_ids: Vec<usize>,
    shared: bool,
}

impl Plan {
    /// Runs the mapping rules on a series named `name` of `kind` with
    /// `tags` (sorted by key, unique): `None` if a rule drops it. Tags left
    /// out because another sanitised to the same label are added to
    /// `tags_dropped`.
    fn resolve(
        &self,
        name: &str,
        kind: MetricKind,
        tags: &[(&str, &str)],
        tags_dropped: &mut u64,
    ) -> Option<Resolved> {
        let mut caps = Vec::new();
        let rule = self
            .mappings
            .iter()
            .find(|m| m.match_type.is_none_or(|k| k == kind) && m.pattern.matches(name, &mut caps));
        if rule.is_some_and(|m| m.action == Action::Drop) {
            return None;
        }
        let metric = match rule.and_then(|m| m.rename.as_ref()) {
            Some(t) => t.render(&caps),
            None => name.to_string(),
        };
        let mut prom_name = names::metric_name(&metric);
        if prom_name.starts_with("rollstat_") {
            // Our own families own that prefix.
            prom_name.insert_str(0, "statsd_");
        }
        let mut labels: Vec<(String, String)> = Vec::with_capacity(tags.len());
        for (k, v) in tags {
            let name = names::label_name(k);
            if labels.iter().any(|(l, _)| *l == name) {
                // `content-type` and `content_type` on one line: the first
                // (in key order) keeps the label; the other is counted.
                *tags_dropped += 1;
            } else {
                labels.push((name, v.to_string()));
            }
        }
        if let Some(m) = rule {
            // Mapping label names are valid and never reserved (the config
            // checks), so they are their own label names.
            for (k, tpl) in &m.labels {
                let v = tpl.render(&caps);
                if v.is_empty() {
                    // Prometheus reads an empty value as no label at all.
                    labels.retain(|(l, _)| l != k);
                    continue;
                }
                match labels.iter_mut().find(|(l, _)| l == k) {
                    Some(slot) => slot.1 = v,
                    None => labels.push((k.clone(), v)),
                }
            }
        }
        labels.sort();
        Some(Resolved {
            metric,
            prom_name,
            labels,
            window_ids: rule
                .and_then(|m| m.windows.clone())
                .unwrap_or_else(|| self.default_windows.clone()),
            shared: rule.is_some_and(|m| m.shared),
        })
    }

    /// This plan with every window watched from `now` (a daemon starting):
    /// a windowed rate read in the first minute of a `1m` window divides by
    /// the time since `now`, not by the minute.
    #[must_use]
    pub fn watched_from(mut self, now: Timestamp) -> Plan {
        self.watched.fill(now);
        self
    }

    /// The plan of `cfg` replacing `self` on a reload at `now`: a window
    /// whose name and shape are unchanged keeps the time it was watched
    /// from (series keep its history, see [`Registry::replan`]); a new or
    /// changed one is watched from `now`.
    #[must_use]
    pub fn successor(&self, cfg: &Config, now: Timestamp) -> Plan {
        let mut next = Plan::from_config(cfg).watched_from(now);
        for (w, watched) in next.windows.iter().zip(next.watched.iter_mut()) {
            if let Some(i) = self.windows.iter().position(|old| old == w) {
                *watched = self.watched[i];
            }
        }
        next
    }

    /// The names of windows `ids` (shared by every series on the defaults).
    fn window_names(&self, ids: &[usize]) -> Arc<[String]> {
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
    pub fn from_config(cfg: &Config) -> Plan {
        Plan {
            watched: vec![Timestamp::EPOCH; cfg.windows.len()],
            default_windows: (0..cfg.windows.len()).collect(),
            default_window_names: cfg.windows.iter().map(|w| w.name.clone()).collect(),
            windows: cfg.windows.clone(),
            mappings: cfg.mappings.clone(),
            quantiles: cfg.series.quantiles.clone(),
            histogram_buckets: cfg.series.histogram_buckets.clone().into(),
            ttl: cfg.series.ttl,
            max_series: cfg.series.max_series,
            max_series_per_metric: cfg.series.max_series_per_metric,
            max_label_bytes: cfg.series.max_label_bytes,
        }
    }
}

/// A live series found by [`Registry::shard_series`]: its metadata, and
/// where [`Registry::with_series`] finds its state again.
#[derive(Clone, Debug)]
pub struct SeriesRef {
    entry: EntryRef,
    /// The series' published identity and windows (as when it was found; a
    /// reload may have changed them since, see [`Registry::with_series`]).
    pub meta: Arc<SeriesMeta>,
}

/// Where an entry is: its hash, and the address of its key, which an entry
/// keeps from insertion to removal (a reload that re-windows a series keeps
/// its entry). Holds nothing: a removed entry is simply not found, and an
/// entry inserted later at the same address under the same 64-bit hash is
/// the same series born again.
#[derive(Clone, Copy, Debug)]
struct EntryRef {
    hash: u64,
    key: usize,
}

impl EntryRef {
    fn of(e: &Entry) -> EntryRef {
        EntryRef {
            hash: e.hash,
            key: e.key.as_ptr() as usize,
        }
    }

    fn is(&self, e: &Entry) -> bool {
        // hashbrown's probe compares only a 7-bit tag: the full hash must be
        // checked too, or a series born at a freed key's address in the same
        // probe group would pass for the one that died.
        e.hash == self.hash && e.key.as_ptr() as usize == self.key
    }
}

/// What [`Registry::replan`] does to an entry.
enum Decision {
    /// Same identity: compare its windows under the lock.
    Check(Resolved),
    Remove,
}

/// Shard index bits start here (below hashbrown's 7 tag bits, above the slot
/// index bits of any shard smaller than 2^40 slots).
const SHARD_SHIFT: u32 = 40;

type Shard = Mutex<HashTable<Entry>>;

/// A new series' metadata and the indices of its windows.
type Born = (Arc<SeriesMeta>, Vec<usize>);

struct Entry {
    hash: u64,
    key: Box<[u8]>,
    last_seen: Timestamp,
    meta: Arc<SeriesMeta>,
    state: SeriesState,
}

#[derive(Default)]
struct Catalog {
    /// Exposed family name -> (owning type, base Prometheus name, live
    /// series using it).
    families: HashMap<String, (MetricKind, Arc<str>, usize)>,
    identities: HashSet<String>,
}

/// Counters the registry keeps about itself.
#[derive(Debug, Default)]
pub struct RegistryCounters {
    /// Series created.
    pub created: AtomicU64,
    /// Series removed after their TTL.
    pub expired: AtomicU64,
    /// Lines refused, by [`Refusal`] in `ALL_REASONS` order.
    pub refused: [AtomicU64; Refusal::ALL_REASONS.len()],
    /// Counter lines with a negative increment (statsd `decrement`): in the
    /// windows, left out of the cumulative total.
    pub negative_increments: AtomicU64,
    /// Tags left out of a new series' labels because another tag of the same
    /// line sanitised to the same label name.
    pub tags_dropped: AtomicU64,
    /// Entries re-planned by reloads, by [`Replanned`] in `ALL_OUTCOMES`
    /// order.
    pub replanned: [AtomicU64; 3],
}

/// The sharded series registry.
pub struct Registry {
    shards: Box<[Shard]>,
    hasher: foldhash::fast::RandomState,
    catalog: Mutex<Catalog>,
    plan: RwLock<Arc<Plan>>,
    /// One replan at a time.
    replanning: Mutex<()>,
    len: AtomicUsize,
    /// Self-metrics.
    pub counters: RegistryCounters,
}

impl Registry {
    /// An empty registry with `shards` shards (rounded up to a power of two).
    #[must_use]
    pub fn new(plan: Plan, shards: usize) -> Registry {
        let n = shards.max(1).next_power_of_two();
        Registry {
            shards: (0..n).map(|_| Mutex::new(HashTable::new())).collect(),
            hasher: foldhash::fast::RandomState::default(),
            catalog: Mutex::new(Catalog::default()),
            plan: RwLock::new(Arc::new(plan)),
            replanning: Mutex::new(()),
            len: AtomicUsize::new(0),
            counters: RegistryCounters::default(),
        }
    }

    /// The current plan.
    #[must_use]
    pub fn plan(&self) -> Arc<Plan> {
        self.plan.read().clone()
    }

    /// Replaces the plan new series follow. Existing series keep theirs
    /// until [`replan`](Self::replan) applies it to them.
    pub fn set_plan(&self, plan: Plan) {
        *self.plan.write() = Arc::new(plan);
    }

    /// Number of series.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether there are no series.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Applies one sample at `now`.
    ///
    /// A line for a series that exists is folded in (or refused as
    /// `type_conflict` or `overflow`). A line for a new series runs the
    /// mapping rules: a drop rule drops it and nothing is kept (the next
    /// such line runs the rules again, so junk a rule drops never takes a
    /// place under `max_series`); otherwise the caps are checked
    /// (`series_cap`, `labels_too_large`, `metric_series_cap`) and so is
    /// its published identity (`type_conflict`, `label_collision`).
    pub fn ingest(
        &self,
        s: &Sample<'_>,
        now: Timestamp,
        buf: &mut KeyBuf,
    ) -> Result<Applied, Refusal> {
        let key = buf.build(s);
        let hash = self.hasher.hash_one(key);
        // hashbrown indexes slots with the low bits and tags them with the top
        // 7: take the shard from bits in between so both stay uniform.
        let shard = &self.shards[(hash >> SHARD_SHIFT) as usize & (self.shards.len() - 1)];
        let mut map = shard.lock();
        if let Some(e) = map.find_mut(hash, |e| *e.key == *key) {
            if e.meta.kind != s.kind {
                return Err(self.refuse(Refusal::TypeConflict));
            }
            let folded = e
                .state
                .apply(s, &e.meta.histogram_buckets, now)
                .map_err(|_| self.refuse(Refusal::Overflow))?;
            e.last_seen = now;
            return Ok(self.stored(folded));
        }
        let plan = self.plan();
        let Some((meta, window_ids)) = self.birth(s, &plan, now)? else {
            return Ok(Applied::DroppedByMapping);
        };
        let mut state = SeriesState::new(
            s.kind,
            &plan.windows,
            &plan.watched,
            &window_ids,
            plan.histogram_buckets.len(),
            now,
        );
        let folded = match state.apply(s, &plan.histogram_buckets, now) {
            Ok(f) => f,
            Err(_) => {
                self.release(vec![meta]);
                return Err(self.refuse(Refusal::Overflow));
            }
        };
        map.insert_unique(
            hash,
            Entry {
                hash,
                key: key.into(),
                last_seen: now,
                meta,
                state,
            },
            |e| e.hash,
        );
        self.len.fetch_add(1, Ordering::Relaxed);
        self.counters.created.fetch_add(1, Ordering::Relaxed);
        Ok(self.stored(folded))
    }

    fn stored(&self, f: Folded) -> Applied {
        if f == Folded::NegativeIncrement {
            self.counters
                .negative_increments
                .fetch_add(1, Ordering::Relaxed);
        }
        Applied::Stored
    }

    fn refuse(&self, r: Refusal) -> Refusal {
        self.counters.refused[r.index()].fetch_add(1, Ordering::Relaxed);
        r
    }

    /// Decides the published identity of a new series and takes it in
    /// the catalog; `None` = a drop rule matched.
    fn birth(&self, s: &Sample<'_>, plan: &Plan, now: Timestamp) -> Result<Option<Born>, Refusal> {
        let mut tags: [(&str, &str); MAX_TAGS] = [("", ""); MAX_TAGS];
        let mut n = 0;
        for t in s.tags().take(MAX_TAGS) {
            tags[n] = t;
            n += 1;
        }
        let mut tags_dropped = 0;
        let tags = key::sorted_unique(&mut tags[..n]);
        let resolved = plan.resolve(s.name, s.kind, tags, &mut tags_dropped);
        let Some(r) = resolved else {
            return Ok(None);
        };
        if self.len() >= plan.max_series {
            return Err(self.refuse(Refusal::SeriesCap));
        }
        // Both the tags as sent (the raw key keeps them) and the labels
        // published (mapping labels included) count against the cap.
        let bytes = |pairs: &mut dyn Iterator<Item = (&str, &str)>| -> usize {
            pairs.map(|(k, v)| k.len() + v.len()).sum()
        };
        let raw = bytes(&mut tags.iter().copied());
        let published = bytes(&mut r.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if raw.max(published) > plan.max_label_bytes {
            return Err(self.refuse(Refusal::LabelsTooLarge));
        }
        if tags_dropped > 0 {
            self.counters
                .tags_dropped
                .fetch_add(tags_dropped, Ordering::Relaxed);
        }
        let prom_name: Arc<str> = r.prom_name.into();
        let identity = identity_of(&prom_name, &r.labels);
        {
            let exposed = names::exposed_names(s.kind, &prom_name);
            let mut cat = self.catalog.lock();
            for n in &exposed {
                if let Some((kind, base, _)) = cat.families.get(n) {
                    if *kind != s.kind || **base != *prom_name {
                        return Err(self.refuse(Refusal::TypeConflict));
                    }
                }
            }
            if cat.identities.contains(&identity) {
                return Err(self.refuse(Refusal::LabelCollision));
            }
            // The first exposed name is the base name, which every series
            // of this published metric holds.
            let of_metric = cat.families.get(&exposed[0]).map_or(0, |f| f.2);
            if plan
                .max_series_per_metric
                .is_some_and(|cap| of_metric >= cap)
            {
                return Err(self.refuse(Refusal::MetricSeriesCap));
            }
            cat.identities.insert(identity);
            for n in exposed {
                cat.families
                    .entry(n)
                    .or_insert_with(|| (s.kind, prom_name.clone(), 0))
                    .2 += 1;
            }
        }
        let meta = SeriesMeta {
            kind: s.kind,
            metric: r.metric,
            prom_name,
            labels: r.labels,
            windows: plan.window_names(&r.window_ids),
            histogram_buckets: plan.histogram_buckets.clone(),
            shared: r.shared,
            created: now,
        };
        Ok(Some((Arc::new(meta), r.window_ids)))
    }

    /// Gives back the published identities and family counts of series that
    /// are gone.
    fn release(&self, gone: Vec<Arc<SeriesMeta>>) {
        if gone.is_empty() {
            return;
        }
        let mut cat = self.catalog.lock();
        for m in gone {
            cat.identities.remove(&m.identity());
            for n in names::exposed_names(m.kind, &m.prom_name) {
                if let Some(f) = cat.families.get_mut(&n) {
                    f.2 -= 1;
                    if f.2 == 0 {
                        cat.families.remove(&n);
                    }
                }
            }
        }
    }

    /// Applies the current plan to the entries that exist (call it after
    /// [`set_plan`](Self::set_plan)), one shard at a time so that ingest
    /// waits at most for one shard's copy and update, never for the rules:
    ///
    /// * same published identity (metric, name, labels) and windows: kept
    ///   untouched (a change of `shared` only is applied to it);
    /// * same identity, other windows: rebuilt on the new windows; a window
    ///   whose name and shape are unchanged keeps its history, the others
    ///   start empty on the epoch grid at `now`; cumulative values (counter
    ///   total, gauge value, histogram, set samples) are kept, and so are the
    ///   series' histogram bounds, which cannot be re-bucketed;
    /// * dropped, renamed or relabelled: removed, its identity freed; its
    ///   next line starts it fresh under the new rules;
    /// * a drop-rule marker is kept while the rules still drop it, else
    ///   removed.
    ///
    /// An entry that changed between the copy and the update (expired and
    /// born again, already under the new plan) is left alone. Returns and
    /// counts what happened.
    pub fn replan(&self, now: Timestamp) -> ReplanReport {
        let _one_at_a_time = self.replanning.lock();
        let plan = self.plan();
        let mut report = ReplanReport::default();
        for shard in self.shards.iter() {
            // 1. What the shard holds, copied under its lock.
            let held: Vec<(u64, Box<[u8]>, Arc<SeriesMeta>)> = shard
                .lock()
                .iter()
                .map(|e| (e.hash, e.key.clone(), e.meta.clone()))
                .collect();
            if held.is_empty() {
                continue;
            }
            // 2. What the new rules make of each, without the lock.
            let decided: Vec<_> = held
                .into_iter()
                .map(|(hash, key, was)| {
                    let d = decide(&plan, &key, &was);
                    (hash, key, was, d)
                })
                .collect();
            // 3. Applied under the lock again.
            let mut gone = Vec::new();
            let mut removed = 0;
            {
                let mut map = shard.lock();
                for (hash, key, was, decision) in decided {
                    let Ok(entry) = map.find_entry(hash, |e| *e.key == *key) else {
                        continue;
                    };
                    if !Arc::ptr_eq(&entry.get().meta, &was) {
                        continue;
                    }
                    let outcome = match decision {
                        Decision::Remove => {
                            gone.push(entry.remove().0.meta);
                            removed += 1;
                            Replanned::Removed
                        }
                        Decision::Check(r) => {
                            let e = entry.into_mut();
                            rewindow(&plan, &mut e.meta, &mut e.state, r, now)
                        }
                    };
                    report.add(outcome);
                }
            }
            self.len.fetch_sub(removed, Ordering::Relaxed);
            self.release(gone);
        }
        for (n, c) in [report.kept, report.rewindowed, report.removed]
            .into_iter()
            .zip(&self.counters.replanned)
        {
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
        report
    }

    /// Removes series not written for the TTL; returns how many.
    pub fn sweep(&self, now: Timestamp) -> usize {
        let ttl = self.plan().ttl;
        let mut removed = 0;
        for shard in self.shards.iter() {
            let mut gone = Vec::new();
            shard.lock().retain(|e| {
                let keep = e.last_seen + ttl > now;
                if !keep {
                    gone.push(e.meta.clone());
                    removed += 1;
                }
                keep
            });
            self.release(gone);
        }
        self.len.fetch_sub(removed, Ordering::Relaxed);
        self.counters
            .expired
            .fetch_add(removed as u64, Ordering::Relaxed);
        removed
    }

    /// Calls `f` for every live series, one shard locked at a time.
    pub fn visit(&self, mut f: impl FnMut(&Arc<SeriesMeta>, &SeriesState)) {
        for i in 0..self.shards.len() {
            self.visit_shard(i, &mut f);
        }
    }

    /// The live series of shard `i` (nothing if `i` is out of range) that
    /// `keep` accepts, copied under the shard's lock (one pointer copy each),
    /// so that matching, sorting and formatting run with no lock held. `keep`
    /// runs under the lock: give it work bounded by a few hundred bytes per
    /// series (e.g. [`Glob::may_match`](crate::mapping::Glob::may_match)),
    /// never a full match. Read a series' state afterwards with
    /// [`with_series`](Registry::with_series).
    #[must_use]
    pub fn shard_series(
        &self,
        i: usize,
        mut keep: impl FnMut(&SeriesMeta) -> bool,
    ) -> Vec<SeriesRef> {
        let Some(shard) = self.shards.get(i) else {
            return Vec::new();
        };
        shard
            .lock()
            .iter()
            .filter(|e| keep(&e.meta))
            .map(|e| SeriesRef {
                entry: EntryRef::of(e),
                meta: e.meta.clone(),
            })
            .collect()
    }

    /// Where the live series of shard `i` are, copied under its lock (two
    /// words each, nothing dereferenced): for a walk that then visits each
    /// with [`with_entry`](Registry::with_entry).
    fn shard_entries(&self, i: usize) -> Vec<EntryRef> {
        let Some(shard) = self.shards.get(i) else {
            return Vec::new();
        };
        shard.lock().iter().map(EntryRef::of).collect()
    }

    /// Calls `f` with the series `r` names (its current metadata and its
    /// state), holding its shard's lock for that one series; `None` if it
    /// is gone (expired, or removed by a reload) since `r` was taken. A
    /// series a reload re-windowed since is still found, with its new
    /// metadata.
    pub fn with_series<T>(
        &self,
        r: &SeriesRef,
        f: impl FnOnce(&Arc<SeriesMeta>, &SeriesState) -> T,
    ) -> Option<T> {
        self.with_entry(r.entry, f)
    }

    fn with_entry<T>(
        &self,
        r: EntryRef,
        f: impl FnOnce(&Arc<SeriesMeta>, &SeriesState) -> T,
    ) -> Option<T> {
        let shard = &self.shards[(r.hash >> SHARD_SHIFT) as usize & (self.shards.len() - 1)];
        let map = shard.lock();
        let e = map.find(r.hash, |e| r.is(e))?;
        Some(f(&e.meta, &e.state))
    }

    /// Number of shards, for callers that split a walk across threads with
    /// [`visit_shard`](Registry::visit_shard).
    #[must_use]
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Calls `f` for every live series of shard `i` (nothing if `i` is out
    /// of range). Where the shard's series are is copied under its lock,
    /// then each is visited under the lock for that one series only, so a
    /// long walk (a scrape, a fleet sync) never holds ingest into a shard
    /// for longer than one series' work. Series born during the walk may be
    /// missed; series gone since the copy are skipped.
    pub fn visit_shard(&self, i: usize, mut f: impl FnMut(&Arc<SeriesMeta>, &SeriesState)) {
        for r in self.shard_entries(i) {
            self.with_entry(r, |meta, state| f(meta, state));
        }
    }
}

/// What the plan makes of an existing series (no lock held).
fn decide(plan: &Plan, key: &[u8], was: &SeriesMeta) -> Decision {
    let Some((name, tags)) = key::decode(key) else {
        // Not a key this registry wrote: it cannot be re-resolved.
        return Decision::Remove;
    };
    // Dropped tags were counted when the series was born.
    let mut tags_dropped = 0;
    match plan.resolve(name, was.kind, &tags, &mut tags_dropped) {
        Some(r)
            if r.metric == was.metric
                && *r.prom_name == *was.prom_name
                && r.labels == was.labels =>
        {
            Decision::Check(r)
        }
        _ => Decision::Remove,
    }
}

/// Puts a series whose identity the new plan keeps on the plan's windows.
fn rewindow(
    plan: &Plan,
    meta: &mut Arc<SeriesMeta>,
    state: &mut SeriesState,
    r: Resolved,
    now: Timestamp,
) -> Replanned {
    // The window of the series that has window `i`'s name and shape.
    let same_as = |i: usize| {
        let w = &plan.windows[i];
        meta.windows
            .iter()
            .enumerate()
            .position(|(j, name)| *name == w.name && state.window_spec(j) == Some(w.spec))
    };
    let reuse: Vec<Option<usize>> = r.window_ids.iter().map(|&i| same_as(i)).collect();
    let unchanged =
        reuse.len() == meta.windows.len() && reuse.iter().enumerate().all(|(j, &k)| k == Some(j));
    if unchanged {
        if meta.shared != r.shared {
            let mut m = SeriesMeta::clone(meta);
            m.shared = r.shared;
            *meta = Arc::new(m);
        }
        return Replanned::Kept;
    }
    state.rewindow(&plan.windows, &r.window_ids, &reuse, now);
    let mut m = SeriesMeta::clone(meta);
    m.windows = plan.window_names(&r.window_ids);
    m.shared = r.shared;
    *meta = Arc::new(m);
    Replanned::Rewindowed
}

#[cfg(test)]
mod tests;
