//! Shared rolling windows: each instance's windows, merged through Redis
//! into a fleet view.
//!
//! This module sits above the registry ([`crate::series`]) and the store
//! ([`crate::store`]): it walks the shared series, keeps what each bucket
//! already pushed, and holds the fleet view; the Redis keys, fields and
//! commands are [`crate::store::windows`]'s.
//!
//! # How
//!
//! Ingest never waits on Redis and is not changed at all: a series whose
//! mapping rule says `shared = true` aggregates in its local windows as
//! usual. Every sync interval (`[redis] sync_interval_ms`, 100 ms by default)
//! one task walks the shared series and, for every bucket still in a local
//! window, compares its sum and count with what this instance already pushed
//! for that bucket. The differences go out, and the shared windows are read
//! back (see *Cost* for when) and trimmed of slots that left them, in chunks of at most 64 windows
//! and 512 deltas, one pipeline each under `sync_timeout_ms`, up to 8 chunks
//! in flight at once ([`crate::store::windows`] has the keys and commands).
//! On a Redis Cluster a chunk never holds two slots (the client refuses a
//! pipeline that spans slots). A window Redis answers an error for (e.g.
//! `WRONGTYPE`) is skipped, the others go on; a chunk that fails before its
//! writes are sent (the store down, a refused connection) leaves its deltas
//! pending for the next sync, and so do the chunks the failure keeps from
//! being sent. One sync at a time: the daemon's task, then the final sync at stop. Their totals are
//! the fleet view, published on `/metrics` as the
//! `rollstat_fleet_window_{samples,sum_value,rate,avg}` families with the
//! same labels as the local `rollstat_window_*` ones. Only sums and counts
//! merge exactly across instances, so min, max, quantiles and set cardinality
//! stay local. An instance publishes the fleet view of the series it has
//! itself.
//!
//! # Cost
//!
//! At most `[redis] max_shared_series` series share (in the order first
//! seen; one that goes makes room), and none whose name and labels exceed
//! `max_shared_label_bytes`; the others stay local, counted by
//! `rollstat_fleet_unshared_series{reason}` (`cap`, `labels`). A window
//! with nothing to write is read only when it may have changed (see
//! `Tracked::read_done`): once per bucket interval when it ignores the
//! bucket being filled or was read back empty, every sync otherwise.
//!
//! # Time and clock skew
//!
//! Each instance files a sample under the slot of its own clock. With clocks
//! within `δ` of each other, a sample near a slot boundary may land in the
//! neighbouring slot on another instance: the fleet view is exact up to
//! moving samples by at most `δ` in time (a 1 ms skew against 1 s buckets
//! shifts at most 0.1% of a uniform flow by one bucket). The fleet view lags
//! by up to one sync interval plus one round trip.
//!
//! # Outages
//!
//! While Redis is down, nothing is sent; pending differences stay in the
//! local windows and go out with the first sync that succeeds, as long as
//! their bucket is still in the local window. Each window's new differences
//! go out as one batch under a sequence number, applied by the window's
//! script only if it is above the last one applied for this instance
//! (`src/store/windows.rs`). A batch whose answer never came (a chunk's
//! deadline passed: applied or not, nobody knows) stays *in doubt* and is
//! sent again, under the same number, with every following sync until one
//! is answered: it is applied exactly once, neither lost nor counted twice.
//! What is given up is counted in `rollstat_store_unshared_deltas_total{reason}`
//! (one per bucket): differences whose bucket left the local window before
//! they could be sent (`expired`) or while still in doubt (`unconfirmed`; so
//! are the batches of a window whose syncs time out more than 32 times in a
//! row), and those of a window Redis answered an error for (`rejected`;
//! such a window's fleet totals lack them, so it is left out of the view
//! until their buckets have left it, one window length). A
//! fleet view older than three sync intervals plus the sync deadline is
//! not published: the local families go on, the fleet
//! families pause, and `rollstat_store_op_up{op="windows"}` says why.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::stream::{self, StreamExt};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::clock::{duration_nanos, Timestamp};
use crate::config::RedisConfig;
use crate::parse::MetricKind;
use crate::series::{Registry, SeriesMeta};
use crate::store::{
    window_key, RedisStore, SeqDeltas, SyncOutcome, WindowBatch, WindowRead, WindowResult,
    WindowTotals, WindowWork,
};

/// Extra lifetime of a window hash after its window (ms).
const TTL_MARGIN_MS: u64 = 2000;
/// At most this many windows (one Redis key each) per sync chunk...
const CHUNK_WINDOWS: usize = 64;
/// ...and this many bucket deltas (two fields each), unless one window
/// alone has more.
const CHUNK_DELTAS: usize = 512;
/// Chunks of one sync in flight at once on a cluster (different slots,
/// mostly different nodes). On a single server one at a time: chunks in
/// flight together queue on the one connection the limits use too, and a
/// limit call waits behind all of them (8 at once: shared-limit acquire p99
/// 40 ms while 1,000 shared series synced, against 11 ms one at a time;
/// `benches/fleet/acquire_under_sync.py`).
const IN_FLIGHT: usize = 8;
/// A window with more batches in doubt than this (its syncs time out again
/// and again) gives them up, counted as `unconfirmed`.
const MAX_IN_DOUBT: usize = 32;

/// Fleet-wide totals of one window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FleetTotals {
    /// Weighted sum of values (counters: increments).
    pub sum: f64,
    /// Weighted number of samples.
    pub count: f64,
}

impl From<WindowTotals> for FleetTotals {
    fn from(t: WindowTotals) -> Self {
        FleetTotals {
            sum: t.sum,
            count: t.count,
        }
    }
}

impl FleetTotals {
    /// Per second over `covered` (the time the window's buckets span,
    /// [`RollingWindow::spanned`](crate::window::RollingWindow::spanned)), as
    /// `rollstat_window_rate` counts: increments for counters, samples for
    /// other types.
    #[must_use]
    pub fn rate(&self, kind: MetricKind, covered: std::time::Duration) -> f64 {
        let per = if kind == MetricKind::Counter {
            self.sum
        } else {
            self.count
        };
        crate::stats::per_second(per, covered)
    }

    /// The average value, if there were samples.
    #[must_use]
    pub fn avg(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }
}

/// One bucket of a shared window: its local totals, what was sent for it
/// (`local - sent` is its next delta) and what is done (confirmed applied,
/// or given up: `sent - pushed` is in doubt).
#[derive(Default)]
struct Slot {
    local: (f64, f64),
    sent: (f64, f64),
    pushed: (f64, f64),
    /// Whether a batch with a delta of this bucket was sent and not
    /// answered since it was last confirmed (else what is between `pushed`
    /// and `sent` never left this instance).
    doubt: bool,
    seen: u64,
}

/// What became of a window's batches in one sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// The script ran: every batch is applied (now or before).
    Applied,
    /// Sent, no answer: the batches stay in doubt and are sent again.
    InDoubt,
    /// Not sent: the batches wait for the next sync.
    NotSent,
    /// Redis answered an error for the window: its deltas are given up.
    Rejected,
}

struct Tracked {
    /// The series' identity and the window's name: where its fleet totals
    /// go in the view.
    id: u128,
    window: String,
    interval: u64,
    size: u64,
    ignore_current: bool,
    length_ms: u64,
    slots: HashMap<u64, Slot>,
    /// Batches sent (or meant to be) and not yet known applied, in
    /// increasing sequence order: sent again, under the same numbers,
    /// with the next sync.
    in_doubt: Vec<SeqDeltas>,
    /// With nothing to write, it is not read before this time (Unix nanos).
    next_read: u64,
    /// Redis refused deltas of this window (e.g. at maxmemory): its fleet
    /// totals lack them, so they are left out of the view until this time
    /// (Unix nanos), when those buckets have left the window.
    lost_until: u64,
    seen: u64,
}

impl Tracked {
    /// Window `window` of shape `spec` of the series `id`, with nothing
    /// pushed yet.
    fn new(id: u128, window: &str, spec: crate::window::WindowSpec, generation: u64) -> Tracked {
        Tracked {
            id,
            window: window.to_string(),
            interval: duration_nanos(spec.interval()).max(1),
            size: spec.size() as u64,
            ignore_current: spec.ignores_current(),
            length_ms: u64::try_from(spec.length().as_millis()).unwrap_or(u64::MAX),
            slots: HashMap::new(),
            in_doubt: Vec::new(),
            next_read: 0,
            lost_until: 0,
            seen: generation,
        }
    }

    /// Drops the buckets that left the local window (not seen in sync
    /// `generation`), and their deltas from the batches in doubt. Returns
    /// how many of them had deltas never sent (`expired`) and how many had
    /// deltas sent but never confirmed (`unconfirmed`), one per bucket.
    fn drop_unseen(&mut self, generation: u64) -> (usize, usize) {
        let (mut expired, mut unconfirmed) = (0, 0);
        let mut gone = Vec::new();
        self.slots.retain(|slot, s| {
            if s.seen == generation {
                return true;
            }
            if s.local != s.sent || (s.sent != s.pushed && !s.doubt) {
                expired += 1;
            } else if s.sent != s.pushed {
                unconfirmed += 1;
            }
            gone.push(*slot);
            false
        });
        if !gone.is_empty() && !self.in_doubt.is_empty() {
            for b in &mut self.in_doubt {
                b.deltas.retain(|d| !gone.contains(&d.0));
            }
            self.in_doubt.retain(|b| !b.deltas.is_empty());
        }
        (expired, unconfirmed)
    }

    /// The batches of this sync: those in doubt, then the buckets' new
    /// deltas under a new sequence number from `seq` (if any), which joins
    /// them in doubt until an answer says it was applied.
    fn batches(&mut self, seq: &mut u64) -> Vec<SeqDeltas> {
        let mut deltas: Vec<(u64, f64, f64)> = Vec::new();
        for (slot, s) in &mut self.slots {
            if s.local != s.sent {
                deltas.push((*slot, s.local.0 - s.sent.0, s.local.1 - s.sent.1));
                s.sent = s.local;
            }
        }
        if !deltas.is_empty() {
            deltas.sort_by_key(|d| d.0);
            *seq += 1;
            self.in_doubt.push(SeqDeltas { seq: *seq, deltas });
        }
        self.in_doubt.clone()
    }

    /// Schedules the next read of a window with nothing to write, after
    /// this sync's `read` (`None`: not answered) at `now`. A window that
    /// ignores the bucket being filled changes only when a bucket closes
    /// and the other instances have pushed its last deltas: it is read again
    /// once per bucket interval, one sync interval after the next boundary.
    /// A window read back empty (its key expired, nobody writes) is read
    /// again once per bucket interval too. Other windows (the current
    /// bucket counts, and other instances fill it at any time) are read
    /// every sync; a window not answered, next sync.
    fn read_done(&mut self, read: Option<&WindowResult>, now: u64, sync_interval: u64) {
        let empty = match read {
            Some(WindowResult::Totals(t)) => t.count == 0.0 && t.sum == 0.0,
            Some(WindowResult::Rejected) => true,
            _ => {
                self.next_read = 0;
                return;
            }
        };
        self.next_read = if empty || self.ignore_current {
            (now / self.interval + 1)
                .saturating_mul(self.interval)
                .saturating_add(sync_interval)
        } else {
            0
        };
    }

    /// Records what became of the batches [`batches`](Self::batches) gave.
    /// Returns the buckets given up while in doubt (when more than
    /// [`MAX_IN_DOUBT`] batches wait).
    fn settle(&mut self, fate: Fate) -> usize {
        match fate {
            Fate::Applied | Fate::Rejected => {
                self.in_doubt.clear();
                for s in self.slots.values_mut() {
                    s.pushed = s.sent;
                    s.doubt = false;
                }
                0
            }
            Fate::NotSent => 0,
            Fate::InDoubt if self.in_doubt.len() <= MAX_IN_DOUBT => {
                for b in &self.in_doubt {
                    for d in &b.deltas {
                        if let Some(s) = self.slots.get_mut(&d.0) {
                            s.doubt = true;
                        }
                    }
                }
                0
            }
            Fate::InDoubt => {
                self.in_doubt.clear();
                let mut given_up = 0;
                for s in self.slots.values_mut() {
                    if s.pushed != s.sent {
                        given_up += 1;
                        s.pushed = s.sent;
                    }
                    s.doubt = false;
                }
                given_up
            }
        }
    }
}

#[derive(Default)]
struct SyncState {
    keys: HashMap<String, Tracked>,
    generation: u64,
    /// The last sequence number given to a batch (this process's: the
    /// script keeps one per instance).
    seq: u64,
    /// Every series of a shared rule seen: the last sync that saw it, and
    /// whether it shares.
    series: HashMap<u128, (u64, Admit)>,
    /// Series that share (at most `max_shared_series`).
    admitted: usize,
}

/// Whether a series of a shared rule shares its windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Admit {
    Shared,
    /// Kept local: `max_shared_series` series share already.
    Cap,
    /// Kept local: its name and labels exceed `max_shared_label_bytes`.
    Labels,
}

/// What one sync did, for logs and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Windows synced.
    pub windows: usize,
    /// Bucket deltas sent.
    pub pushed: usize,
    /// Bucket deltas given up (counted as unshared), every reason.
    pub unshared: usize,
    /// Of which: Redis answered an error for their window (e.g.
    /// `WRONGTYPE`).
    pub rejected: usize,
    /// Of which: sent, outcome unknown (a chunk's deadline passed).
    pub unconfirmed: usize,
    /// Whether the fleet view was refreshed.
    pub read: bool,
}

/// The shared windows of one daemon: pending deltas and the fleet view.
pub struct FleetWindows {
    prefix: String,
    /// Held across one sync.
    running: tokio::sync::Mutex<()>,
    state: Mutex<SyncState>,
    view: RwLock<View>,
    /// When the view was last refreshed (Unix nanos).
    refreshed: AtomicU64,
    /// A view older than this is not published (nanos).
    stale_after: u64,
    /// `redis.sync_interval_ms` (nanos).
    sync_interval: u64,
    /// `redis.max_shared_series`, `redis.max_shared_label_bytes`.
    max_series: usize,
    max_label_bytes: usize,
}

/// The fleet totals by series identity and window name.
#[derive(Default)]
struct View(HashMap<u128, Vec<(String, FleetTotals)>>);

impl View {
    fn get(&self, id: u128, window: &str) -> Option<FleetTotals> {
        let windows = self.0.get(&id)?;
        windows.iter().find(|(w, _)| w == window).map(|(_, t)| *t)
    }

    fn set(&mut self, id: u128, window: &str, t: FleetTotals) {
        let windows = self.0.entry(id).or_default();
        match windows.iter_mut().find(|(w, _)| w == window) {
            Some(slot) => slot.1 = t,
            None => windows.push((window.to_string(), t)),
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(u128, &str) -> bool) {
        self.0.retain(|id, windows| {
            windows.retain(|(w, _)| keep(*id, w));
            !windows.is_empty()
        });
    }
}

impl FleetWindows {
    /// Empty, for the store configured by `cfg`.
    #[must_use]
    pub fn new(cfg: &RedisConfig) -> Self {
        let (interval, timeout) = (cfg.sync_interval, cfg.sync_timeout);
        FleetWindows {
            prefix: cfg.key_prefix.clone(),
            running: tokio::sync::Mutex::new(()),
            state: Mutex::default(),
            view: RwLock::default(),
            refreshed: AtomicU64::new(0),
            stale_after: duration_nanos(interval * 3 + timeout),
            sync_interval: duration_nanos(interval),
            max_series: cfg.max_shared_series,
            max_label_bytes: cfg.max_shared_label_bytes,
        }
    }

    /// Whether the shared series `id` (`meta`) shares its windows this sync
    /// (`generation`): once admitted it stays until it goes; a series whose
    /// name and labels exceed `max_shared_label_bytes` never is; the others
    /// are, while fewer than `max_shared_series` are. Counted once per
    /// series, not per sync (a 25 KB label set is not summed ten times a
    /// second).
    fn admit(
        &self,
        series: &mut HashMap<u128, (u64, Admit)>,
        admitted: &mut usize,
        id: u128,
        meta: &SeriesMeta,
        generation: u64,
    ) -> Admit {
        let (seen, a) = series.entry(id).or_insert_with(|| {
            let bytes = meta.prom_name.len()
                + meta
                    .labels
                    .iter()
                    .map(|(k, v)| k.len() + v.len())
                    .sum::<usize>();
            let a = if bytes > self.max_label_bytes {
                Admit::Labels
            } else {
                Admit::Cap
            };
            (generation, a)
        });
        *seen = generation;
        if *a == Admit::Cap && *admitted < self.max_series {
            *a = Admit::Shared;
            *admitted += 1;
        }
        *a
    }

    /// Pushes what changed locally since the last sync and reads the merged
    /// windows back. One sync at a time (the daemon's sync task).
    pub async fn sync(
        &self,
        registry: &Registry,
        store: &RedisStore,
        now: Timestamp,
    ) -> SyncReport {
        // The periodic task and the final sync at stop never overlap: two
        // syncs would send the same deltas twice.
        let _one = self.running.lock().await;
        let mut report = SyncReport::default();
        let gone_unconfirmed;
        // 1. Local values of every bucket of every shared window.
        let batch = {
            let mut st = self.state.lock();
            st.generation += 1;
            let SyncState {
                keys,
                generation,
                seq,
                series,
                admitted,
            } = &mut *st;
            let generation = *generation;
            registry.visit(|meta, state| {
                let Some(id) = meta.fleet_id() else {
                    return;
                };
                if meta.kind == MetricKind::Set {
                    return;
                }
                if self.admit(series, admitted, id, meta, generation) != Admit::Shared {
                    return;
                }
                for (i, wname) in meta.windows.iter().enumerate() {
                    let (spec, _) = state.window_shape(i, now);
                    let interval = duration_nanos(spec.interval()).max(1);
                    // The shape is in the key: a reload that gives the
                    // window another shape moves it to another key, which
                    // starts from nothing pushed, as its local buckets do
                    // (no negative deltas); what was pushed under the old
                    // one stays in Redis until it expires.
                    let key = window_key(&self.prefix, id, wname, interval, spec.size() as u64);
                    let t = keys
                        .entry(key)
                        .or_insert_with(|| Tracked::new(id, wname, spec, generation));
                    t.ignore_current = spec.ignores_current();
                    t.seen = generation;
                    state.visit_slot_totals(i, now, |start, sum, count| {
                        let slot = t.slots.entry(start.as_nanos() / interval).or_default();
                        slot.local = (sum, count);
                        slot.seen = generation;
                    });
                }
            });
            // Series gone make room under the cap.
            let mut kept = [0i64; 2];
            series.retain(|_, (seen, a)| {
                if *seen != generation {
                    if *a == Admit::Shared {
                        *admitted -= 1;
                    }
                    return false;
                }
                match a {
                    Admit::Cap => kept[0] += 1,
                    Admit::Labels => kept[1] += 1,
                    Admit::Shared => {}
                }
                true
            });
            for (reason, n) in ["cap", "labels"].into_iter().zip(kept) {
                store
                    .metrics()
                    .unshared_series
                    .with_label_values(&[reason])
                    .set(n);
            }
            // 2. Buckets that left their local window with deltas unsent
            // (or sent, never confirmed).
            let (mut expired, mut unconfirmed) = (0, 0);
            keys.retain(|_, t| {
                let (e, u) = t.drop_unseen(generation);
                expired += e;
                unconfirmed += u;
                t.seen == generation || !t.slots.is_empty()
            });
            report.unshared += expired;
            gone_unconfirmed = unconfirmed;
            // 3. The writes and the reads, one window at a time.
            let mut batch = WindowBatch::new();
            for (key, t) in keys.iter_mut() {
                let batches = t.batches(seq);
                // Nothing to write: read only when the window may have
                // changed (see `Tracked::read_done`).
                if batches.is_empty() && now.as_nanos() < t.next_read {
                    continue;
                }
                let current = now.as_nanos() / t.interval;
                batch.push(WindowWork {
                    batches,
                    expire_ms: t.length_ms.saturating_add(TTL_MARGIN_MS),
                    read: WindowRead {
                        key: key.clone(),
                        oldest: (current + 1).saturating_sub(t.size),
                        current,
                        ignore_current: t.ignore_current,
                    },
                });
            }
            report.windows = batch.windows().len();
            batch
        };
        let unshared = |reason: &str, n: usize| {
            store
                .metrics()
                .unshared
                .with_label_values(&[reason])
                .inc_by(n as u64);
        };
        unshared("expired", report.unshared);
        report.unconfirmed += gone_unconfirmed;
        if batch.windows().is_empty() {
            // Nothing to write or read this time: the view is as fresh as
            // the read schedule makes it.
            unshared("unconfirmed", report.unconfirmed);
            report.unshared += report.unconfirmed;
            self.refreshed.store(now.as_nanos(), Ordering::Release);
            return report;
        }
        // The view's place of each window tracked.
        let places: HashMap<String, (u128, String)> = {
            let st = self.state.lock();
            st.keys
                .iter()
                .map(|(k, t)| (k.clone(), (t.id, t.window.clone())))
                .collect()
        };
        // 4. Chunk by chunk, up to `IN_FLIGHT` at once, each under its own
        // deadline; on a cluster a chunk keeps to one slot. A chunk that
        // failed before its writes were sent leaves them pending for the
        // next sync; the others go on (the windows operation's gate stops
        // the chunks not yet started once the store is marked down).
        let mut read = Vec::new();
        let mut unread = Vec::new();
        // Windows whose refused deltas are still inside them.
        let mut incomplete = std::collections::HashSet::new();
        let mut failed = false;
        let chunks = batch.into_chunks(CHUNK_WINDOWS, CHUNK_DELTAS, store.is_cluster());
        let in_flight = if store.is_cluster() { IN_FLIGHT } else { 1 };
        let answers: Vec<(WindowBatch, SyncOutcome)> = stream::iter(chunks)
            .map(|chunk| async move {
                let outcome = store.sync_windows(&chunk, now).await;
                (chunk, outcome)
            })
            .buffer_unordered(in_flight)
            .collect()
            .await;
        for (chunk, outcome) in answers {
            let fates: Vec<Fate> = match &outcome {
                SyncOutcome::Done(results) => results
                    .iter()
                    .map(|r| match r {
                        WindowResult::Rejected => Fate::Rejected,
                        _ => Fate::Applied,
                    })
                    .collect(),
                SyncOutcome::WrittenUnread(_) => vec![Fate::InDoubt; chunk.windows().len()],
                SyncOutcome::Failed(_) => vec![Fate::NotSent; chunk.windows().len()],
            };
            {
                let mut st = self.state.lock();
                let results = match &outcome {
                    SyncOutcome::Done(results) => Some(results),
                    _ => None,
                };
                for (i, (w, fate)) in chunk.windows().iter().zip(&fates).enumerate() {
                    if let Some(t) = st.keys.get_mut(&w.read.key) {
                        report.unconfirmed += t.settle(*fate);
                        let read = results.and_then(|r| r.get(i));
                        t.read_done(read, now.as_nanos(), self.sync_interval);
                    }
                    match fate {
                        Fate::Applied => report.pushed += w.deltas(),
                        Fate::Rejected => report.rejected += w.deltas(),
                        Fate::InDoubt | Fate::NotSent => {}
                    }
                    if let Some(t) = st.keys.get_mut(&w.read.key) {
                        if *fate == Fate::Rejected && w.deltas() > 0 {
                            t.lost_until = now
                                .as_nanos()
                                .saturating_add(t.length_ms.saturating_mul(1_000_000));
                        }
                        if t.lost_until > now.as_nanos() {
                            incomplete.insert(w.read.key.clone());
                        }
                    }
                }
            }
            match outcome {
                SyncOutcome::Done(results) => {
                    for (w, r) in chunk.windows().iter().zip(results) {
                        match r {
                            WindowResult::Totals(_) if incomplete.contains(&w.read.key) => {
                                unread.push(w.read.key.clone());
                            }
                            WindowResult::Totals(t) => read.push((w.read.key.clone(), t)),
                            WindowResult::Rejected
                            | WindowResult::Unread
                            | WindowResult::Read(_) => {
                                unread.push(w.read.key.clone());
                            }
                        }
                    }
                }
                SyncOutcome::WrittenUnread(_) | SyncOutcome::Failed(_) => {
                    failed = true;
                }
            }
        }
        unshared("rejected", report.rejected);
        unshared("unconfirmed", report.unconfirmed);
        report.unshared += report.rejected + report.unconfirmed;
        {
            let tracked: std::collections::HashSet<(u128, &str)> =
                places.values().map(|(id, w)| (*id, w.as_str())).collect();
            let unread: std::collections::HashSet<(u128, &str)> = unread
                .iter()
                .filter_map(|k| places.get(k))
                .map(|(id, w)| (*id, w.as_str()))
                .collect();
            let mut view = self.view.write();
            view.retain(|id, w| tracked.contains(&(id, w)) && !unread.contains(&(id, w)));
            for (k, t) in read {
                if let Some((id, w)) = places.get(&k) {
                    view.set(*id, w, FleetTotals::from(t));
                }
            }
        }
        if !failed {
            self.refreshed.store(now.as_nanos(), Ordering::Release);
            report.read = true;
        }
        report
    }

    /// The fleet view as of `now`, if fresh: hold it across a registry walk
    /// and look series up in it. Take it *before* walking the registry,
    /// never while a shard is locked: [`visit`](Self::visit) reads the
    /// view and then locks shards, and the sync waits to replace the view,
    /// so the other order could deadlock.
    #[must_use]
    pub fn view(&self, now: Timestamp) -> Option<FleetView<'_>> {
        let at = self.refreshed.load(Ordering::Acquire);
        if now.as_nanos().saturating_sub(at) > self.stale_after {
            return None;
        }
        Some(FleetView {
            totals: self.view.read(),
        })
    }

    /// Calls `f` with every shared series this instance holds, each of its
    /// windows, the fleet totals of that window and the time the window's
    /// buckets span (the denominator of a fleet rate), if the view is fresh
    /// at `now`. The `rollstat_fleet_window_*` families are written from
    /// this walk ([`crate::expose`]).
    pub fn visit(
        &self,
        registry: &Registry,
        now: Timestamp,
        mut f: impl FnMut(&SeriesMeta, &str, FleetTotals, std::time::Duration),
    ) {
        let at = self.refreshed.load(Ordering::Acquire);
        if now.as_nanos().saturating_sub(at) > self.stale_after {
            return;
        }
        let view = self.view.read();
        registry.visit(|meta, state| {
            let Some(id) = meta.fleet_id() else {
                return;
            };
            if meta.kind == MetricKind::Set {
                return;
            }
            for (i, wname) in meta.windows.iter().enumerate() {
                let Some(t) = view.get(id, wname) else {
                    continue;
                };
                let (_, covered) = state.window_shape(i, now);
                f(meta, wname, t, covered);
            }
        });
    }
}

/// A read hold on the fleet view (see [`FleetWindows::view`]).
pub struct FleetView<'a> {
    totals: RwLockReadGuard<'a, View>,
}

impl FleetView<'_> {
    /// The fleet totals of the shared series `id` (its
    /// [`SeriesMeta::fleet_id`]) in `window`.
    #[must_use]
    pub fn totals(&self, id: u128, window: &str) -> Option<FleetTotals> {
        self.totals.get(id, window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::WindowTotals;
    use crate::window::WindowSpec;

    /// What `window_sync.lua` does with one instance's batches: applies a
    /// batch only if its number is above the last applied.
    #[derive(Default)]
    struct Script {
        applied: u64,
        slots: HashMap<u64, (f64, f64)>,
    }

    impl Script {
        fn run(&mut self, batches: &[SeqDeltas]) {
            for b in batches {
                if b.seq > self.applied {
                    for &(slot, ds, dc) in &b.deltas {
                        let e = self.slots.entry(slot).or_default();
                        *e = (e.0 + ds, e.1 + dc);
                    }
                    self.applied = b.seq;
                }
            }
        }
    }

    fn tracked() -> Tracked {
        let spec = WindowSpec::new(10, std::time::Duration::from_secs(1)).unwrap();
        Tracked::new(7, "w", spec, 1)
    }

    fn set(t: &mut Tracked, slot: u64, count: f64, generation: u64) {
        let s = t.slots.entry(slot).or_default();
        s.local = (count, count);
        s.seen = generation;
    }

    #[test]
    fn a_batch_in_doubt_is_sent_again_under_its_number_and_applied_once() {
        let mut t = tracked();
        let mut seq = 0;
        let mut redis = Script::default();
        // Sync 1: 5 in slot 10, applied, but the answer is lost.
        set(&mut t, 10, 5.0, 1);
        let b1 = t.batches(&mut seq);
        assert_eq!(b1.len(), 1);
        redis.run(&b1);
        assert_eq!(t.settle(Fate::InDoubt), 0);
        // Sync 2: 3 more; the batch in doubt goes again, then the new one.
        // This time nothing reaches Redis (deadline before it arrived).
        set(&mut t, 10, 8.0, 2);
        let b2 = t.batches(&mut seq);
        assert_eq!(b2.iter().map(|b| b.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(b2[1].deltas, [(10, 3.0, 3.0)]);
        assert_eq!(t.settle(Fate::InDoubt), 0);
        // Sync 3: not sent at all (the store is down).
        set(&mut t, 11, 1.0, 3);
        let b3 = t.batches(&mut seq);
        assert_eq!(b3.len(), 3);
        assert_eq!(t.settle(Fate::NotSent), 0);
        // Sync 4: answered. Every delta lands once: 8 in slot 10, 1 in 11.
        set(&mut t, 10, 8.0, 4);
        set(&mut t, 11, 1.0, 4);
        let b4 = t.batches(&mut seq);
        assert_eq!(b4.iter().map(|b| b.seq).collect::<Vec<_>>(), [1, 2, 3]);
        redis.run(&b4);
        assert_eq!(t.settle(Fate::Applied), 0);
        assert_eq!(redis.slots[&10], (8.0, 8.0));
        assert_eq!(redis.slots[&11], (1.0, 1.0));
        // Nothing left to send; nothing counted as given up.
        assert!(t.batches(&mut seq).is_empty());
        assert_eq!(t.drop_unseen(4), (0, 0));
    }

    #[test]
    fn buckets_leaving_the_window_count_unsent_as_expired_and_in_doubt_as_unconfirmed() {
        let mut t = tracked();
        let mut seq = 0;
        set(&mut t, 1, 2.0, 1);
        set(&mut t, 2, 2.0, 1);
        let _ = t.batches(&mut seq);
        t.settle(Fate::InDoubt);
        // Slot 1 leaves while in doubt; slot 3 is new and leaves unsent.
        set(&mut t, 2, 2.0, 2);
        set(&mut t, 3, 1.0, 1);
        assert_eq!(t.drop_unseen(2), (1, 1));
        // The batch in doubt no longer carries slot 1.
        assert_eq!(t.in_doubt[0].deltas, [(2, 2.0, 2.0)]);
        // A bucket whose batch was never sent (the store down) leaves as
        // expired, not unconfirmed.
        set(&mut t, 2, 2.0, 2);
        set(&mut t, 4, 1.0, 2);
        let _ = t.batches(&mut seq);
        t.settle(Fate::NotSent);
        set(&mut t, 2, 2.0, 3);
        assert_eq!(t.drop_unseen(3), (1, 0));
        // Too many batches in doubt: given up, one per bucket.
        for g in 3..(3 + MAX_IN_DOUBT as u64 + 1) {
            set(&mut t, 2, g as f64, g);
            let _ = t.batches(&mut seq);
            let given_up = t.settle(Fate::InDoubt);
            if t.in_doubt.is_empty() {
                assert_eq!(given_up, 1);
                return;
            }
            assert_eq!(given_up, 0);
        }
        panic!("batches in doubt were never given up");
    }

    /// Reads of a window with nothing to write over 10 s of syncs every
    /// 100 ms (100 syncs), 1 s buckets.
    fn reads(ignore_current: bool, totals: WindowTotals) -> usize {
        let mut t = tracked();
        t.ignore_current = ignore_current;
        let sync = 100_000_000;
        let start = 1_700_000_000_000_000_000_u64;
        let mut reads = 0;
        for i in 0..100 {
            let now = start + i * sync;
            if now >= t.next_read {
                reads += 1;
                t.read_done(Some(&WindowResult::Totals(totals)), now, sync);
            }
        }
        reads
    }

    #[test]
    fn a_window_with_nothing_to_write_is_read_only_when_it_may_have_changed() {
        let some = WindowTotals {
            sum: 3.0,
            count: 3.0,
        };
        // Ignoring the current bucket: once per bucket (10), not 100 times.
        assert_eq!(reads(true, some), 10);
        // Empty (its key expired): once per bucket too.
        assert_eq!(reads(false, WindowTotals::default()), 10);
        assert_eq!(reads(true, WindowTotals::default()), 10);
        // Counting the current bucket, which others fill at any time: every
        // sync.
        assert_eq!(reads(false, some), 100);
        // Not answered: read again next sync.
        let mut t = tracked();
        t.ignore_current = true;
        t.read_done(None, 5, 100);
        assert_eq!(t.next_read, 0);
        // The read after a boundary waits one sync interval past it, for
        // the other instances' last deltas of the bucket that closed.
        t.read_done(Some(&WindowResult::Totals(some)), 1_500_000_000, 100);
        assert_eq!(t.next_read, 2_000_000_100);
    }
}
