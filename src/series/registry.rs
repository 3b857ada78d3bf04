//! The sharded registry: lookup and birth of series, the caps, the catalog
//! of published names (one type per name, no two series with one identity),
//! expiry, and the walks a scrape or a fleet sync makes.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use hashbrown::HashTable;
use parking_lot::{Mutex, RwLock};

use super::identity::{fleet_hash, SeriesMeta};
use super::key::{self, KeyBuf, StoredKey, Valueless};
use super::measured::{Measured, Named};
use super::plan::Plan;
use super::state::{Folded, Overflow, SeriesState};
use crate::clock::Timestamp;
use crate::names;
use crate::parse::{MetricKind, Sample, MAX_TAGS};

/// What a series' state takes in: a statsd line or a measured value.
trait Input: Named {
    /// Folds the input into `state`, a series of `meta`.
    fn fold(
        &self,
        state: &mut SeriesState,
        meta: &SeriesMeta,
        now: Timestamp,
    ) -> Result<Folded, Overflow>;
}

impl Input for Sample<'_> {
    #[inline]
    fn fold(
        &self,
        state: &mut SeriesState,
        meta: &SeriesMeta,
        now: Timestamp,
    ) -> Result<Folded, Overflow> {
        state.apply(self, &meta.histogram_buckets, meta.scale, now)
    }
}

impl Input for Measured<'_> {
    fn fold(
        &self,
        state: &mut SeriesState,
        meta: &SeriesMeta,
        now: Timestamp,
    ) -> Result<Folded, Overflow> {
        state.fold(&self.fold, &meta.histogram_buckets, meta.scale, now)
    }
}

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
    pub(super) const fn index(self) -> usize {
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

/// A live series found by [`Registry::shard_series`]: its metadata, and
/// where [`Registry::with_series`] finds its state again.
#[derive(Clone, Debug)]
pub struct SeriesRef {
    entry: EntryRef,
    /// The series' published identity and windows (as when it was found; a
    /// reload may have changed them since, see [`Registry::with_series`]).
    pub meta: Arc<SeriesMeta>,
}

/// Where an entry is: its hash, and the number it was born with, which an
/// entry keeps from insertion to removal (a reload that re-windows a series
/// keeps its entry) and no other entry ever gets. Holds nothing: a removed
/// entry is simply not found, nor is a series born again in its place.
#[derive(Clone, Copy, Debug)]
struct EntryRef {
    hash: u64,
    id: u64,
}

impl EntryRef {
    fn of(e: &Entry) -> EntryRef {
        EntryRef {
            hash: e.hash,
            id: e.id,
        }
    }

    fn is(&self, e: &Entry) -> bool {
        e.id == self.id
    }
}

/// Shard index bits start here (below hashbrown's 7 tag bits, above the slot
/// index bits of any shard smaller than 2^40 slots).
const SHARD_SHIFT: u32 = 40;

type Shard = Mutex<HashTable<Entry>>;

/// A new series' metadata and the indices of its windows.
/// A new series: its identity, its windows and its native histogram.
type Born = (Arc<SeriesMeta>, Vec<usize>, Option<super::NativeSpec>);

pub(super) struct Entry {
    pub(super) hash: u64,
    /// Unique among the registry's entries, ever.
    pub(super) id: u64,
    pub(super) key: StoredKey,
    pub(super) last_seen: Timestamp,
    pub(super) meta: Arc<SeriesMeta>,
    pub(super) state: SeriesState,
}

/// A published name as the catalog keys it: xxh3-128. Two names with one
/// hash would read as one family (at 2^-128 a pair, never in practice).
fn name_hash(name: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(name.as_bytes())
}

#[derive(Default)]
pub(super) struct Catalog {
    /// Exposed family name -> (owning type, base Prometheus name, live
    /// series using it), both names as their [`name_hash`]: a name's text
    /// lives in its series' metadata, not a third time here.
    pub(super) families: HashMap<u128, (MetricKind, u128, usize)>,
    /// Published identities ([`SeriesMeta::id`]) of live series.
    pub(super) identities: HashSet<u128>,
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
    /// Tags without a value left out of lines under statsd_exporter's rule
    /// (a mapping file or its names), as statsd_exporter leaves them out.
    pub valueless_tags: AtomicU64,
    /// Entries re-planned by reloads, by [`Replanned`](super::Replanned) in `ALL_OUTCOMES`
    /// order.
    pub replanned: [AtomicU64; 3],
}

/// The sharded series registry.
pub struct Registry {
    pub(super) shards: Box<[Shard]>,
    pub(super) hasher: foldhash::fast::RandomState,
    pub(super) catalog: Mutex<Catalog>,
    pub(super) plan: RwLock<Arc<Plan>>,
    /// The first plan's [`Valueless`] rule (`true`: drop), read by every
    /// line's key without the plan's lock. Decided at start, as the parser's
    /// statsd_exporter mode is (`ParseOptions::statsd_exporter`): the two
    /// read a line alike until a restart.
    drop_valueless: AtomicBool,
    /// One replan at a time.
    pub(super) replanning: Mutex<()>,
    pub(super) len: AtomicUsize,
    /// The id of the next entry.
    next_id: AtomicU64,
    /// Self-metrics.
    pub counters: RegistryCounters,
}

impl Registry {
    /// An empty registry with `shards` shards (rounded up to a power of two).
    #[must_use]
    pub fn new(plan: Plan, shards: usize) -> Registry {
        let n = shards.max(1).next_power_of_two();
        Registry {
            drop_valueless: AtomicBool::new(plan.valueless == Valueless::Drop),
            shards: (0..n).map(|_| Mutex::new(HashTable::new())).collect(),
            hasher: foldhash::fast::RandomState::default(),
            catalog: Mutex::new(Catalog::default()),
            plan: RwLock::new(Arc::new(plan)),
            replanning: Mutex::new(()),
            len: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
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

    /// Whether the key in `buf` with `kind` appended holds a series (the
    /// key is left as it was).
    fn typed_exists(&self, buf: &mut KeyBuf, kind: MetricKind) -> bool {
        let len = buf.bytes.len();
        buf.push_kind(kind);
        let hash = self.hasher.hash_one(&buf.bytes);
        let shard = &self.shards[(hash >> SHARD_SHIFT) as usize & (self.shards.len() - 1)];
        let found = shard.lock().find(hash, |e| *e.key == *buf.bytes).is_some();
        buf.bytes.truncate(len);
        found
    }

    /// What a tag without a value becomes in this registry.
    fn valueless(&self) -> Valueless {
        if self.drop_valueless.load(Ordering::Relaxed) {
            Valueless::Drop
        } else {
            Valueless::True
        }
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
        self.take(s, now, buf)
    }

    /// Applies one measured value at `now`, as [`ingest`](Self::ingest)
    /// applies a line: the same rules, caps and refusals.
    pub fn ingest_measured(
        &self,
        m: &Measured<'_>,
        now: Timestamp,
        buf: &mut KeyBuf,
    ) -> Result<Applied, Refusal> {
        self.take(m, now, buf)
    }

    #[inline]
    fn take(&self, s: &impl Input, now: Timestamp, buf: &mut KeyBuf) -> Result<Applied, Refusal> {
        buf.build(s, self.valueless());
        if buf.valueless > 0 {
            self.counters
                .valueless_tags
                .fetch_add(buf.valueless as u64, Ordering::Relaxed);
        }
        // The name and tags' key; a line of another type than the series
        // found there tries the key with its type (`KeyBuf::push_kind`):
        // where the rules give the two types different names, each is a
        // series of its own, and where they do not the birth below refuses
        // it as `type_conflict` on the names it would expose.
        let mut typed = false;
        let (hash, mut map) = loop {
            let key = &buf.bytes;
            let hash = self.hasher.hash_one(key);
            // hashbrown indexes slots with the low bits and tags them with
            // the top 7: take the shard from bits in between so both stay
            // uniform.
            let shard = &self.shards[(hash >> SHARD_SHIFT) as usize & (self.shards.len() - 1)];
            let mut map = shard.lock();
            match map.find_mut(hash, |e| *e.key == *key) {
                Some(e) if e.meta.kind == s.kind() => {
                    let folded = s
                        .fold(&mut e.state, &e.meta, now)
                        .map_err(|_| self.refuse(Refusal::Overflow))?;
                    e.last_seen = now;
                    return Ok(self.stored(folded));
                }
                Some(_) if !typed => drop(map),
                Some(_) => return Err(self.refuse(Refusal::TypeConflict)),
                None if typed => break (hash, map),
                // A new series: unless its name and tags already hold one
                // of this type under the typed key (looked up with this
                // shard unlocked: it may be the same shard).
                None => {
                    drop(map);
                    if !self.typed_exists(buf, s.kind()) {
                        // Locked again; a line of another thread may have
                        // made the series meanwhile: looked up again.
                        let shard =
                            &self.shards[(hash >> SHARD_SHIFT) as usize & (self.shards.len() - 1)];
                        let map = shard.lock();
                        if map.find(hash, |e| *e.key == *buf.bytes).is_none() {
                            break (hash, map);
                        }
                        drop(map);
                        continue;
                    }
                }
            }
            buf.push_kind(s.kind());
            typed = true;
        };
        let key = &buf.bytes;
        let plan = self.plan();
        let Some((meta, window_ids, native)) = self.birth(s, &plan, now)? else {
            return Ok(Applied::DroppedByMapping);
        };
        let mut state = SeriesState::new(
            s.kind(),
            &plan.layout(&window_ids),
            meta.histogram_buckets.len(),
            now,
        );
        if let Some(spec) = &meta.summary {
            state.start_summary(spec, now);
        }
        if let Some(spec) = native {
            state.start_native(spec);
        }
        let folded = match s.fold(&mut state, &meta, now) {
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
                id: self.next_id.fetch_add(1, Ordering::Relaxed),
                key: StoredKey::new(key),
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
    fn birth(&self, s: &impl Named, plan: &Plan, now: Timestamp) -> Result<Option<Born>, Refusal> {
        let kind = s.kind();
        let mut tags: [(&str, &str); MAX_TAGS] = [("", ""); MAX_TAGS];
        let mut n = 0;
        for t in s.tags().take(MAX_TAGS) {
            tags[n] = t;
            n += 1;
        }
        let mut tags_dropped = 0;
        let (tags, _) = key::sorted_unique(&mut tags[..n], self.valueless());
        let resolved = plan.resolve(s.name(), kind, tags, &mut tags_dropped);
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
        // Two identities with one 128-bit hash would be refused as a
        // collision: at 2^-128 a pair, never in practice.
        let identity = fleet_hash(&prom_name, &r.labels);
        {
            let exposed: Vec<u128> = names::exposed_names(kind, &prom_name)
                .iter()
                .map(|n| name_hash(n))
                .collect();
            let base_name = name_hash(&prom_name);
            let mut cat = self.catalog.lock();
            for n in &exposed {
                if let Some((kind_there, base, _)) = cat.families.get(n) {
                    if *kind_there != kind || *base != base_name {
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
                    .or_insert_with(|| (kind, base_name, 0))
                    .2 += 1;
            }
        }
        let mut meta = SeriesMeta {
            kind,
            metric: r.metric,
            prom_name,
            labels: r.labels,
            sent_label_names: r.sent_label_names,
            windows: plan.window_names(&r.window_ids),
            // A summary keeps no buckets (its sum and count only).
            histogram_buckets: if r.summary.is_some() {
                Arc::from([])
            } else {
                r.histogram_buckets
                    .unwrap_or_else(|| plan.histogram_buckets.clone())
            },
            ttl: r.ttl,
            scale: r.scale,
            help: r.help,
            counter_as_is: r.counter_as_is,
            summary: r.summary,
            shared: false,
            id: identity,
            created: now,
        };
        meta.set_shared(r.shared);
        Ok(Some((Arc::new(meta), r.window_ids, r.native)))
    }

    /// Gives back the published identities and family counts of series that
    /// are gone.
    pub(super) fn release(&self, gone: Vec<Arc<SeriesMeta>>) {
        if gone.is_empty() {
            return;
        }
        let mut cat = self.catalog.lock();
        for m in gone {
            cat.identities.remove(&m.id);
            for n in names::exposed_names(m.kind, &m.prom_name) {
                let n = name_hash(&n);
                if let Some(f) = cat.families.get_mut(&n) {
                    f.2 -= 1;
                    if f.2 == 0 {
                        cat.families.remove(&n);
                    }
                }
            }
        }
    }

    /// Removes series not written for the TTL; returns how many.
    pub fn sweep(&self, now: Timestamp) -> usize {
        let ttl = self.plan().ttl;
        let mut removed = 0;
        for shard in self.shards.iter() {
            let mut gone = Vec::new();
            shard.lock().retain(|e| {
                let keep = match e.meta.ttl {
                    None => e.last_seen + ttl > now,
                    Some(own) => own.is_zero() || e.last_seen + own > now,
                };
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
