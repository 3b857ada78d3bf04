//! The pure half of a window sync: which series share, what each bucket
//! already pushed, the deltas and reads of the next sync, and what the
//! answers settle. No I/O: the daemon's sync ([`FleetWindows::sync`](super::FleetWindows::sync))
//! walks these steps around its pipelines, and the tests below drive them
//! against a model of the window script without Redis.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::clock::{duration_nanos, Timestamp};
use crate::parse::MetricKind;
use crate::series::state::SharedBucket;
use crate::series::{Registry, SeriesMeta};
use crate::sketch::bins::{difference, fold_lowest, Bin};
use crate::sketch::redis_hll::{self, RedisHll};
use crate::sketch::{DistinctCounter, SparseDDSketch};
use crate::store::{
    window_key, BucketDelta, MemberDelta, SeqDeltas, Spread, SyncOutcome, WindowBatch, WindowRead,
    WindowResult, WindowTotals, WindowWork,
};
use crate::window::WindowSpec;

use super::view::{FleetSpread, FleetTotals};

/// Extra lifetime of a window hash after its window (ms).
const TTL_MARGIN_MS: u64 = 2000;
/// A window with more batches in doubt than this (its syncs time out again
/// and again) gives them up, counted as `unconfirmed`.
const MAX_IN_DOUBT: usize = 32;

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
    /// The range and quantile bins of a gauge's, timer's, histogram's or
    /// distribution's bucket.
    spread: Option<Box<SlotSpread>>,
    /// What a set's bucket sent of its members.
    members: Option<Box<SlotMembers>>,
}

/// A set's bucket: the members it sent, and those gathered for the next
/// batch.
#[derive(Default)]
struct SlotMembers {
    /// The hashes sent while the bucket counts exactly.
    sent: HashSet<u64>,
    /// The registers sent, once the bucket is past its exact limit.
    sent_registers: Option<Box<RedisHll>>,
    /// New hashes for the next batch.
    hashes: Vec<u64>,
    /// The registers they raise (or, past the exact limit, that grew):
    /// `(index, value)`, unsorted.
    raised: Vec<(usize, u8)>,
    beyond_exact: bool,
}

impl SlotMembers {
    /// Gathers what `members` holds that was not sent: new hashes while
    /// exact, then the registers that grew.
    fn observe(&mut self, members: &DistinctCounter) {
        if let Some(hashes) = members.exact_hashes() {
            for h in hashes {
                if self.sent.insert(h) {
                    self.hashes.push(h);
                    self.raised.push(redis_hll::pattern_of(h));
                }
            }
        } else if let Some(regs) = members.registers() {
            let grew = regs.above(self.sent_registers.as_deref());
            let base = self.sent_registers.get_or_insert_with(Box::default);
            for &r in &grew {
                base.offer(r);
            }
            self.raised.extend(grew);
            self.sent = HashSet::new();
            self.beyond_exact = true;
        }
    }

    /// The members gathered since the last batch.
    fn take(&mut self) -> MemberDelta {
        let mut raised = std::mem::take(&mut self.raised);
        // The largest value per register, in index order.
        raised.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        raised.dedup_by_key(|r| r.0);
        MemberDelta {
            hashes: std::mem::take(&mut self.hashes),
            registers: if raised.is_empty() {
                Vec::new()
            } else {
                redis_hll::encode(&raised)
            },
            beyond_exact: self.beyond_exact,
        }
    }
}

/// The range of a bucket and its quantile bins: those there now (read
/// when the totals change) and those last sent.
#[derive(Default)]
struct SlotSpread {
    min: f64,
    max: f64,
    local: Vec<(Bin, u64)>,
    sent: Vec<(Bin, u64)>,
    /// Whether `local` had more than `max_shared_bins` bins, its lowest
    /// folded.
    folded: bool,
}

impl Slot {
    /// Takes the bucket's state this sync: its totals, and its range and
    /// bins when the totals changed (a new sample changes the count).
    fn observe(&mut self, b: SharedBucket<'_>, max_bins: usize) {
        let totals = (b.sum, b.count);
        if let Some((min, max)) = b.range {
            if self.local != totals || self.spread.is_none() {
                let sp = self.spread.get_or_insert_with(Box::default);
                (sp.min, sp.max) = (min, max);
                if let Some(d) = b.values {
                    sp.local = d.bins();
                    sp.folded = fold_lowest(&mut sp.local, max_bins);
                }
            }
        }
        if let Some(d) = b.members {
            if self.local != totals {
                self.members.get_or_insert_with(Box::default).observe(d);
            }
        }
        self.local = totals;
    }

    /// The delta of this bucket since the last batch, if it changed; what
    /// is sent becomes the base of the next one. Counts in `folded` a delta
    /// whose bins were folded.
    fn delta(&mut self, slot: u64, folded: &mut usize) -> Option<BucketDelta> {
        if self.local == self.sent {
            return None;
        }
        let spread = self.spread.as_mut().map(|sp| {
            *folded += usize::from(sp.folded);
            let bins = difference(&sp.local, &sp.sent);
            sp.sent = std::mem::take(&mut sp.local);
            Spread {
                min: sp.min,
                max: sp.max,
                bins,
            }
        });
        let d = BucketDelta {
            slot,
            sum: self.local.0 - self.sent.0,
            count: self.local.1 - self.sent.1,
            spread,
            members: self.members.as_mut().map(|m| m.take()),
        };
        self.sent = self.local;
        Some(d)
    }
}

/// What became of a window's batches in one sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fate {
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
    /// A set's window: its distinct members are read back.
    distinct: bool,
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
    /// The fleet's quantile bins of each slot last read back, with their
    /// version (see `window_sync.lua`).
    fleet_bins: BTreeMap<u64, (u64, Vec<(Bin, i64)>)>,
}

impl Tracked {
    /// Window `window` of shape `spec` of the series `id`, with nothing
    /// pushed yet.
    fn new(id: u128, window: &str, spec: WindowSpec, generation: u64) -> Tracked {
        Tracked {
            id,
            window: window.to_string(),
            interval: duration_nanos(spec.interval()).max(1),
            size: spec.size() as u64,
            ignore_current: spec.ignores_current(),
            distinct: false,
            length_ms: u64::try_from(spec.length().as_millis()).unwrap_or(u64::MAX),
            slots: HashMap::new(),
            in_doubt: Vec::new(),
            next_read: 0,
            lost_until: 0,
            seen: generation,
            fleet_bins: BTreeMap::new(),
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
                b.deltas.retain(|d| !gone.contains(&d.slot));
            }
            self.in_doubt.retain(|b| !b.deltas.is_empty());
        }
        (expired, unconfirmed)
    }

    /// The batches of this sync: those in doubt, then the buckets' new
    /// deltas under a new sequence number from `seq` (if any), which joins
    /// them in doubt until an answer says it was applied.
    fn batches(&mut self, seq: &mut u64, folded: &mut usize) -> Vec<SeqDeltas> {
        let mut deltas: Vec<BucketDelta> = self
            .slots
            .iter_mut()
            .filter_map(|(slot, s)| s.delta(*slot, folded))
            .collect();
        if !deltas.is_empty() {
            deltas.sort_by_key(|d| d.slot);
            *seq += 1;
            self.in_doubt.push(SeqDeltas { seq: *seq, deltas });
        }
        self.in_doubt.clone()
    }

    /// `(slot, version)` of the fleet bins held for the slots from
    /// `oldest` on: the read leaves out those that did not change.
    fn known(&self, oldest: u64) -> Vec<(u64, u64)> {
        self.fleet_bins
            .range(oldest..)
            .map(|(slot, (version, _))| (*slot, *version))
            .collect()
    }

    /// Takes the bins a read brought into the copy held (the slots it did
    /// not name are gone), and gives the window's fleet range and
    /// quantiles at `qs`. `Err(())` when the range cannot be told: some of
    /// the window's samples came from an instance that sends no range (an
    /// older rollstat); `Ok(None)` when nobody sent one (counters).
    fn take_read(&mut self, t: &WindowTotals, qs: &[f64]) -> Result<Option<FleetSpread>, ()> {
        let mut held = std::mem::take(&mut self.fleet_bins);
        for sb in &t.slots {
            let bins = match &sb.bins {
                Some(b) => b.clone(),
                None => match held.remove(&sb.slot) {
                    Some((v, b)) if v == sb.version => b,
                    _ => continue,
                },
            };
            self.fleet_bins.insert(sb.slot, (sb.version, bins));
        }
        held.clear();
        if t.spread_count == 0.0 {
            return Ok(None);
        }
        if t.spread_count < t.count * (1.0 - 1e-9) {
            return Err(());
        }
        let mut merged: BTreeMap<Bin, i64> = BTreeMap::new();
        for (_, bins) in self.fleet_bins.values() {
            for &(bin, n) in bins {
                *merged.entry(bin).or_default() += n;
            }
        }
        let quantiles = if merged.is_empty() {
            Vec::new()
        } else {
            let positive = merged
                .into_iter()
                .map(|(b, n)| (b, u64::try_from(n).unwrap_or(0)));
            let sketch = SparseDDSketch::from_bins(positive, t.min, t.max);
            qs.iter().map(|&q| (q, sketch.quantile(q))).collect()
        };
        Ok(Some(FleetSpread {
            min: t.min,
            max: t.max,
            quantiles,
        }))
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
                        if let Some(s) = self.slots.get_mut(&d.slot) {
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

/// Every window tracked, and which series share.
#[derive(Default)]
pub(super) struct SyncState {
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
    /// Deltas sent with folded bins since [`take_folded`](Self::take_folded).
    folded: usize,
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

/// Who may share: `[redis]`'s key prefix and caps.
pub(super) struct Sharing {
    pub(super) prefix: String,
    /// `redis.max_shared_series`.
    pub(super) max_series: usize,
    /// `redis.max_shared_label_bytes`.
    pub(super) max_label_bytes: usize,
    /// `redis.max_shared_bins`.
    pub(super) max_bins: usize,
}

impl Sharing {
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
}

/// What settling one chunk's answer counted, in bucket deltas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Settled {
    /// Applied by the script.
    pub(super) pushed: usize,
    /// Of a window Redis answered an error for.
    pub(super) rejected: usize,
    /// Given up in doubt (more than [`MAX_IN_DOUBT`] batches waited).
    pub(super) unconfirmed: usize,
}

/// What the chunks of one sync read back, sorted for the view.
#[derive(Default)]
pub(super) struct Reads {
    /// The fleet totals of the windows read, by key.
    pub(super) read: Vec<(String, FleetTotals)>,
    /// The fleet range and quantiles of the windows read that have them
    /// (from [`SyncState::settle`]), by key.
    spreads: HashMap<String, FleetSpread>,
    /// Windows read whose range could not be told (see
    /// [`Tracked::take_read`]).
    partial: HashSet<String>,
    /// Windows left out of the view this time: not read, refused, or
    /// missing deltas Redis refused.
    pub(super) unread: Vec<String>,
    /// Windows whose refused deltas are still inside them.
    incomplete: HashSet<String>,
    /// Whether a chunk went unanswered (the view is then not fresh).
    pub(super) failed: bool,
}

impl Reads {
    /// Sorts one chunk's answer (after [`SyncState::settle`] saw it).
    pub(super) fn take(&mut self, chunk: &WindowBatch, outcome: SyncOutcome) {
        let SyncOutcome::Done(results) = outcome else {
            self.failed = true;
            return;
        };
        for (w, r) in chunk.windows().iter().zip(results) {
            match r {
                WindowResult::Totals(_) if self.incomplete.contains(&w.read.key) => {
                    self.unread.push(w.read.key.clone());
                }
                WindowResult::Totals(t) => {
                    let mut fleet = FleetTotals::from(&t);
                    fleet.spread = self.spreads.remove(&w.read.key);
                    fleet.partial = self.partial.contains(&w.read.key);
                    self.read.push((w.read.key.clone(), fleet));
                }
                WindowResult::Rejected | WindowResult::Unread | WindowResult::Read(..) => {
                    self.unread.push(w.read.key.clone());
                }
            }
        }
    }
}

/// What became of each window of a chunk, from its answer.
pub(super) fn fates(outcome: &SyncOutcome, windows: usize) -> Vec<Fate> {
    match outcome {
        SyncOutcome::Done(results) => results
            .iter()
            .map(|r| match r {
                WindowResult::Rejected => Fate::Rejected,
                _ => Fate::Applied,
            })
            .collect(),
        SyncOutcome::WrittenUnread(_) => vec![Fate::InDoubt; windows],
        SyncOutcome::Failed(_) => vec![Fate::NotSent; windows],
    }
}

impl SyncState {
    /// Step 1 of a sync, a new generation: the local totals of every
    /// bucket of every window of the series that share; series gone make
    /// room under the cap. Returns how many series of a shared rule stay
    /// local, by reason (`cap`, `labels`).
    pub(super) fn observe(
        &mut self,
        registry: &Registry,
        sharing: &Sharing,
        now: Timestamp,
    ) -> [(&'static str, i64); 2] {
        self.generation += 1;
        let SyncState {
            keys,
            generation,
            series,
            admitted,
            ..
        } = self;
        let generation = *generation;
        registry.visit(|meta, state| {
            let Some(id) = meta.fleet_id() else {
                return;
            };
            if sharing.admit(series, admitted, id, meta, generation) != Admit::Shared {
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
                let key = window_key(&sharing.prefix, id, wname, interval, spec.size() as u64);
                let t = keys
                    .entry(key)
                    .or_insert_with(|| Tracked::new(id, wname, spec, generation));
                t.ignore_current = spec.ignores_current();
                t.distinct = meta.kind == MetricKind::Set;
                t.seen = generation;
                state.visit_shared_slots(i, now, |start, b| {
                    let slot = t.slots.entry(start.as_nanos() / interval).or_default();
                    slot.observe(b, sharing.max_bins);
                    slot.seen = generation;
                });
            }
        });
        let [cap, labels] = self.forget_gone_series();
        [("cap", cap), ("labels", labels)]
    }

    /// Forgets the series this sync did not see (a shared one makes room
    /// under the cap); returns how many of the others stay local, by
    /// reason (`cap`, `labels`).
    fn forget_gone_series(&mut self) -> [i64; 2] {
        let generation = self.generation;
        let admitted = &mut self.admitted;
        let mut kept = [0i64; 2];
        self.series.retain(|_, (seen, a)| {
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
        kept
    }

    /// Step 2: the buckets that left their local window, with deltas
    /// unsent (`expired`) or sent and never confirmed (`unconfirmed`), and
    /// the windows left with nothing.
    pub(super) fn drop_unseen(&mut self) -> (usize, usize) {
        let generation = self.generation;
        let (mut expired, mut unconfirmed) = (0, 0);
        self.keys.retain(|_, t| {
            let (e, u) = t.drop_unseen(generation);
            expired += e;
            unconfirmed += u;
            t.seen == generation || !t.slots.is_empty()
        });
        (expired, unconfirmed)
    }

    /// Step 3: the writes and the reads, one window at a time. A window
    /// with nothing to write is read only when it may have changed (see
    /// [`Tracked::read_done`]).
    pub(super) fn work(&mut self, now: Timestamp) -> WindowBatch {
        let mut batch = WindowBatch::new();
        for (key, t) in &mut self.keys {
            let batches = t.batches(&mut self.seq, &mut self.folded);
            if batches.is_empty() && now.as_nanos() < t.next_read {
                continue;
            }
            let current = now.as_nanos() / t.interval;
            let oldest = (current + 1).saturating_sub(t.size);
            batch.push(WindowWork {
                batches,
                expire_ms: t.length_ms.saturating_add(TTL_MARGIN_MS),
                read: WindowRead {
                    key: key.clone(),
                    oldest,
                    current,
                    ignore_current: t.ignore_current,
                    known: t.known(oldest),
                    distinct: t.distinct,
                },
            });
        }
        batch
    }

    /// Deltas sent with folded bins since the last call.
    pub(super) fn take_folded(&mut self) -> usize {
        std::mem::take(&mut self.folded)
    }

    /// The view's place of each window tracked: its series and window name.
    pub(super) fn places(&self) -> HashMap<String, (u128, String)> {
        self.keys
            .iter()
            .map(|(k, t)| (k.clone(), (t.id, t.window.clone())))
            .collect()
    }

    /// Step 4, per chunk: what its answer (`outcome`, at `now`) settles of
    /// each window's batches, its next read, and whether it is left out
    /// of the view for refused deltas (marked in `reads`).
    pub(super) fn settle(
        &mut self,
        chunk: &WindowBatch,
        outcome: &SyncOutcome,
        now: u64,
        sync_interval: u64,
        qs: &[f64],
        reads: &mut Reads,
    ) -> Settled {
        let mut settled = Settled::default();
        let fates = fates(outcome, chunk.windows().len());
        let results = match outcome {
            SyncOutcome::Done(results) => Some(results),
            _ => None,
        };
        for (i, (w, fate)) in chunk.windows().iter().zip(&fates).enumerate() {
            match fate {
                Fate::Applied => settled.pushed += w.deltas(),
                Fate::Rejected => settled.rejected += w.deltas(),
                Fate::InDoubt | Fate::NotSent => {}
            }
            let Some(t) = self.keys.get_mut(&w.read.key) else {
                continue;
            };
            settled.unconfirmed += t.settle(*fate);
            let read = results.and_then(|r| r.get(i));
            t.read_done(read, now, sync_interval);
            if let Some(WindowResult::Totals(tot)) = read {
                match t.take_read(tot, qs) {
                    Ok(Some(spread)) => {
                        reads.spreads.insert(w.read.key.clone(), spread);
                    }
                    Ok(None) => {}
                    Err(()) => {
                        reads.partial.insert(w.read.key.clone());
                    }
                }
            }
            if *fate == Fate::Rejected && w.deltas() > 0 {
                t.lost_until = now.saturating_add(t.length_ms.saturating_mul(1_000_000));
            }
            if t.lost_until > now {
                reads.incomplete.insert(w.read.key.clone());
            }
        }
        settled
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::Config;
    use crate::parse::{parse_datagram, Line};
    use crate::series::{KeyBuf, Plan};

    /// What `window_sync.lua` does with one instance's batches: applies a
    /// batch only if its number is above the last applied.
    #[derive(Default)]
    struct Script {
        applied: u64,
        slots: HashMap<u64, (f64, f64)>,
        /// Per slot of a set: the hashes and the registers merged.
        members: HashMap<u64, (HashSet<u64>, RedisHll)>,
        /// Per slot: bins added up, min, max.
        spreads: HashMap<u64, (BTreeMap<Bin, i64>, f64, f64)>,
    }

    impl Script {
        fn run(&mut self, batches: &[SeqDeltas]) {
            for b in batches {
                if b.seq > self.applied {
                    for d in &b.deltas {
                        let e = self.slots.entry(d.slot).or_default();
                        *e = (e.0 + d.sum, e.1 + d.count);
                        if let Some(sp) = &d.spread {
                            let (bins, min, max) = self.spreads.entry(d.slot).or_insert((
                                BTreeMap::new(),
                                f64::INFINITY,
                                f64::NEG_INFINITY,
                            ));
                            for &(b, n) in &sp.bins {
                                *bins.entry(b).or_default() += n;
                            }
                            bins.retain(|_, n| *n != 0);
                            (*min, *max) = (min.min(sp.min), max.max(sp.max));
                        }
                        if let Some(m) = &d.members {
                            let (hashes, regs) = self.members.entry(d.slot).or_default();
                            hashes.extend(&m.hashes);
                            if !m.registers.is_empty() {
                                regs.merge(&redis_hll::decode(&m.registers).unwrap());
                            }
                        }
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
        let b1 = t.batches(&mut seq, &mut 0);
        assert_eq!(b1.len(), 1);
        redis.run(&b1);
        assert_eq!(t.settle(Fate::InDoubt), 0);
        // Sync 2: 3 more; the batch in doubt goes again, then the new one.
        // This time nothing reaches Redis (deadline before it arrived).
        set(&mut t, 10, 8.0, 2);
        let b2 = t.batches(&mut seq, &mut 0);
        assert_eq!(b2.iter().map(|b| b.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(b2[1].deltas, [BucketDelta::totals(10, 3.0, 3.0)]);
        assert_eq!(t.settle(Fate::InDoubt), 0);
        // Sync 3: not sent at all (the store is down).
        set(&mut t, 11, 1.0, 3);
        let b3 = t.batches(&mut seq, &mut 0);
        assert_eq!(b3.len(), 3);
        assert_eq!(t.settle(Fate::NotSent), 0);
        // Sync 4: answered. Every delta lands once: 8 in slot 10, 1 in 11.
        set(&mut t, 10, 8.0, 4);
        set(&mut t, 11, 1.0, 4);
        let b4 = t.batches(&mut seq, &mut 0);
        assert_eq!(b4.iter().map(|b| b.seq).collect::<Vec<_>>(), [1, 2, 3]);
        redis.run(&b4);
        assert_eq!(t.settle(Fate::Applied), 0);
        assert_eq!(redis.slots[&10], (8.0, 8.0));
        assert_eq!(redis.slots[&11], (1.0, 1.0));
        // Nothing left to send; nothing counted as given up.
        assert!(t.batches(&mut seq, &mut 0).is_empty());
        assert_eq!(t.drop_unseen(4), (0, 0));
    }

    #[test]
    fn buckets_leaving_the_window_count_unsent_as_expired_and_in_doubt_as_unconfirmed() {
        let mut t = tracked();
        let mut seq = 0;
        set(&mut t, 1, 2.0, 1);
        set(&mut t, 2, 2.0, 1);
        let _ = t.batches(&mut seq, &mut 0);
        t.settle(Fate::InDoubt);
        // Slot 1 leaves while in doubt; slot 3 is new and leaves unsent.
        set(&mut t, 2, 2.0, 2);
        set(&mut t, 3, 1.0, 1);
        assert_eq!(t.drop_unseen(2), (1, 1));
        // The batch in doubt no longer carries slot 1.
        assert_eq!(t.in_doubt[0].deltas, [BucketDelta::totals(2, 2.0, 2.0)]);
        // A bucket whose batch was never sent (the store down) leaves as
        // expired, not unconfirmed.
        set(&mut t, 2, 2.0, 2);
        set(&mut t, 4, 1.0, 2);
        let _ = t.batches(&mut seq, &mut 0);
        t.settle(Fate::NotSent);
        set(&mut t, 2, 2.0, 3);
        assert_eq!(t.drop_unseen(3), (1, 0));
        // Too many batches in doubt: given up, one per bucket.
        for g in 3..(3 + MAX_IN_DOUBT as u64 + 1) {
            set(&mut t, 2, g as f64, g);
            let _ = t.batches(&mut seq, &mut 0);
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
                t.read_done(Some(&WindowResult::Totals(totals.clone())), now, sync);
            }
        }
        reads
    }

    #[test]
    fn a_window_with_nothing_to_write_is_read_only_when_it_may_have_changed() {
        let some = WindowTotals {
            sum: 3.0,
            count: 3.0,
            ..WindowTotals::default()
        };
        // Ignoring the current bucket: once per bucket (10), not 100 times.
        assert_eq!(reads(true, some.clone()), 10);
        // Empty (its key expired): once per bucket too.
        assert_eq!(reads(false, WindowTotals::default()), 10);
        assert_eq!(reads(true, WindowTotals::default()), 10);
        // Counting the current bucket, which others fill at any time: every
        // sync.
        assert_eq!(reads(false, some.clone()), 100);
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

    /// Integer-valued increments, so that sums are exact in f64.
    fn answer_kind() -> impl proptest::strategy::Strategy<Value = (bool, Fate)> {
        proptest::prop_oneof![
            // Answered: applied.
            proptest::strategy::Just((true, Fate::Applied)),
            // Applied, the answer lost (a deadline after it arrived).
            proptest::strategy::Just((true, Fate::InDoubt)),
            // Sent, lost before Redis (a deadline before it arrived).
            proptest::strategy::Just((false, Fate::InDoubt)),
            // Not sent (the store down).
            proptest::strategy::Just((false, Fate::NotSent)),
        ]
    }

    proptest::proptest! {
        /// A window's buckets against the window script's model over syncs
        /// whose answers are applied, lost after or before Redis, or never
        /// sent: once one sync is answered, Redis holds exactly the local
        /// totals of every bucket (no delta lost, none applied twice), and
        /// nothing is given up on the way.
        #[test]
        fn after_an_answered_sync_redis_holds_exactly_the_local_totals(
            syncs in proptest::collection::vec(
                (proptest::collection::vec((0u64..4, 0u32..5), 0..4), answer_kind()),
                1..=MAX_IN_DOUBT,
            ),
        ) {
            let mut t = tracked();
            let mut seq = 0;
            let mut redis = Script::default();
            let mut local: HashMap<u64, f64> = HashMap::new();
            let mut given_up = 0;
            let mut sync = |t: &mut Tracked, seq: &mut u64, runs: bool, fate: Fate| {
                let batches = t.batches(seq, &mut 0);
                if runs {
                    redis.run(&batches);
                }
                t.settle(fate)
            };
            for (g, (adds, (runs, fate))) in syncs.into_iter().enumerate() {
                for (slot, n) in adds {
                    let v = local.entry(slot).or_default();
                    *v += f64::from(n);
                    set(&mut t, slot, *v, g as u64 + 1);
                }
                given_up += sync(&mut t, &mut seq, runs, fate);
            }
            given_up += sync(&mut t, &mut seq, true, Fate::Applied);
            proptest::prop_assert_eq!(given_up, 0);
            proptest::prop_assert!(t.in_doubt.is_empty());
            for (slot, v) in &local {
                let sent = redis.slots.get(slot).copied().unwrap_or_default();
                proptest::prop_assert_eq!(sent, (*v, *v), "slot {}", slot);
            }
            proptest::prop_assert_eq!(redis.slots.len(), local.values().filter(|v| **v > 0.0).count());
        }
    }

    const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

    /// A registry whose every series shares its one window, `10s` (10 x
    /// 1 s, the current bucket counted).
    fn shared_registry() -> Registry {
        let cfg = "[[windows]]\nname = \"10s\"\nbuckets = 10\ninterval_ms = 1000\n\
                   [redis]\nurl = \"redis://127.0.0.1:1\"\n\
                   [[mappings]]\nmatch = \"**\"\nshared = true\n";
        Registry::new(Plan::new(Config::parse(cfg).unwrap().series_settings()), 4)
    }

    fn feed(r: &Registry, now: Timestamp, dgram: &str) {
        let mut buf = KeyBuf::default();
        for l in parse_datagram(dgram.as_bytes()) {
            match l {
                Ok(Line::Sample(s)) => {
                    r.ingest(&s, now, &mut buf).unwrap();
                }
                other => panic!("bad test line: {other:?}"),
            }
        }
    }

    fn sharing(max_series: usize, max_label_bytes: usize) -> Sharing {
        Sharing {
            prefix: "t".into(),
            max_series,
            max_label_bytes,
            max_bins: 512,
        }
    }

    /// Steps 1 to 3 of a sync: (kept local by reason, expired,
    /// unconfirmed, the work).
    fn plan(
        st: &mut SyncState,
        r: &Registry,
        sharing: &Sharing,
        now: Timestamp,
    ) -> ([i64; 2], (usize, usize), WindowBatch) {
        let kept = st.observe(r, sharing, now).map(|(_, n)| n);
        let gone = st.drop_unseen();
        (kept, gone, st.work(now))
    }

    /// Every delta of the work: (slot, sum, count).
    fn deltas(b: &WindowBatch) -> Vec<(u64, f64, f64)> {
        b.windows()
            .iter()
            .flat_map(|w| w.batches.iter().flat_map(|s| s.deltas.iter()))
            .map(|d| (d.slot, d.sum, d.count))
            .collect()
    }

    fn answered(totals: &[WindowTotals]) -> SyncOutcome {
        SyncOutcome::Done(
            totals
                .iter()
                .map(|t| WindowResult::Totals(t.clone()))
                .collect(),
        )
    }

    #[test]
    fn a_sync_sends_each_buckets_new_delta_once_and_reads_the_fleet_totals_back() {
        let r = shared_registry();
        let (mut st, sharing) = (SyncState::default(), sharing(10, 1000));
        let slot = T0.as_nanos() / 1_000_000_000;
        feed(&r, T0, "a:3|c");
        let (kept, gone, work) = plan(&mut st, &r, &sharing, T0);
        assert_eq!((kept, gone), ([0, 0], (0, 0)));
        assert_eq!(deltas(&work), [(slot, 3.0, 1.0)]);
        assert_eq!(work.windows()[0].read.current, slot);
        assert_eq!(work.windows()[0].read.oldest, slot - 9);
        let totals = WindowTotals {
            sum: 5.0,
            count: 2.0,
            ..WindowTotals::default()
        };
        let mut reads = Reads::default();
        let outcome = answered(std::slice::from_ref(&totals));
        let settled = st.settle(&work, &outcome, T0.as_nanos(), 1, &[0.5], &mut reads);
        assert_eq!(
            settled,
            Settled {
                pushed: 1,
                rejected: 0,
                unconfirmed: 0
            }
        );
        reads.take(&work, outcome);
        assert!(!reads.failed);
        // The view takes the totals under the series and window.
        let places = st.places();
        let mut view = super::super::view::View::default();
        view.refresh(&places, reads.read, &reads.unread);
        let (id, window) = places.values().next().unwrap();
        assert_eq!(
            view.get(*id, window),
            Some(&super::super::FleetTotals {
                sum: 5.0,
                count: 2.0,
                ..Default::default()
            })
        );
        // One more in the same bucket: only the difference goes, under the
        // next number.
        feed(&r, T0, "a:2|c");
        let (_, _, work) = plan(&mut st, &r, &sharing, T0);
        assert_eq!(deltas(&work), [(slot, 2.0, 1.0)]);
        assert_eq!(work.windows()[0].batches[0].seq, 2);
        st.settle(
            &work,
            &answered(std::slice::from_ref(&totals)),
            T0.as_nanos(),
            1,
            &[0.5],
            &mut Reads::default(),
        );
        // Nothing new: nothing to write, but the window (which counts the
        // bucket being filled) is read again.
        let (_, _, work) = plan(&mut st, &r, &sharing, T0 + Duration::from_millis(100));
        assert_eq!((work.windows().len(), work.deltas()), (1, 0));
        // The bucket leaves the window, all of it confirmed: nothing is
        // counted as given up.
        let (_, gone, _) = plan(&mut st, &r, &sharing, T0 + Duration::from_secs(11));
        assert_eq!(gone, (0, 0));
    }

    #[test]
    fn the_cap_keeps_series_local_until_a_shared_one_goes_and_long_labels_never_share() {
        let (a, b) = (shared_registry(), shared_registry());
        feed(&a, T0, "a:1|c");
        feed(&b, T0, "b:1|c");
        let (mut st, one) = (SyncState::default(), sharing(1, 1000));
        assert_eq!(plan(&mut st, &a, &one, T0).0, [0, 0]);
        // `a` is gone (this walk does not see it) and `b` is new: the cap
        // is still full while `b` is walked; it shares from the next sync.
        let (kept, _, work) = plan(&mut st, &b, &one, T0);
        assert_eq!(kept, [1, 0]);
        assert!(work.windows().is_empty());
        let (kept, _, work) = plan(&mut st, &b, &one, T0);
        assert_eq!(kept, [0, 0]);
        assert_eq!(deltas(&work).len(), 1);
        // A name longer than max_shared_label_bytes never shares.
        let (mut st, short) = (SyncState::default(), sharing(10, 3));
        feed(&a, T0, "abcd:1|c");
        let (kept, _, work) = plan(&mut st, &a, &short, T0);
        assert_eq!(kept, [0, 1]);
        assert_eq!(work.windows().len(), 1, "`a` shares, `abcd` does not");
    }

    #[test]
    fn a_window_whose_deltas_redis_refused_stays_out_of_the_view_for_one_window_length() {
        let r = shared_registry();
        let (mut st, sharing) = (SyncState::default(), sharing(10, 1000));
        feed(&r, T0, "a:3|c");
        let (_, _, work) = plan(&mut st, &r, &sharing, T0);
        let refused = SyncOutcome::Done(vec![WindowResult::Rejected]);
        let mut reads = Reads::default();
        let settled = st.settle(&work, &refused, T0.as_nanos(), 1, &[0.5], &mut reads);
        assert_eq!(
            settled,
            Settled {
                pushed: 0,
                rejected: 1,
                unconfirmed: 0
            }
        );
        reads.take(&work, refused);
        assert_eq!((reads.read.len(), reads.unread.len()), (0, 1));
        // Read back fine later, but still missing the refused deltas.
        let totals = WindowTotals {
            sum: 9.0,
            count: 3.0,
            ..WindowTotals::default()
        };
        let read_at = |st: &mut SyncState, now: Timestamp| {
            feed(&r, now, "a:1|c");
            let (_, _, work) = plan(st, &r, &sharing, now);
            let mut reads = Reads::default();
            let outcome = answered(std::slice::from_ref(&totals));
            st.settle(&work, &outcome, now.as_nanos(), 1, &[0.5], &mut reads);
            reads.take(&work, outcome);
            (reads.read.len(), reads.unread.len())
        };
        assert_eq!(read_at(&mut st, T0 + Duration::from_secs(9)), (0, 1));
        // One window length (10 s) on, those buckets are gone: in the view
        // again.
        assert_eq!(read_at(&mut st, T0 + Duration::from_secs(10)), (1, 0));
    }

    #[test]
    fn the_bins_and_ranges_sent_add_up_to_the_local_buckets_own() {
        let r = shared_registry();
        let (mut st, sharing) = (SyncState::default(), sharing(10, 1000));
        let mut redis: HashMap<String, Script> = HashMap::new();
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        for round in 0..40u64 {
            let now = T0 + Duration::from_millis(round * 250);
            for _ in 0..(round % 7) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let ms = (rng % 100_000) as f64 / 10.0;
                feed(&r, now, &format!("t:{ms}|ms|@0.5\ng:{}|g", ms - 500.0));
            }
            let (_, _, work) = plan(&mut st, &r, &sharing, now);
            for w in work.windows() {
                redis.entry(w.read.key.clone()).or_default().run(&w.batches);
            }
            let applied = SyncOutcome::Done(vec![
                WindowResult::Totals(WindowTotals::default());
                work.windows().len()
            ]);
            st.settle(
                &work,
                &applied,
                now.as_nanos(),
                1,
                &[0.5],
                &mut Reads::default(),
            );
        }
        // Every bucket still in the window: Redis's bins, min and max are
        // the local bucket's.
        let end = T0 + Duration::from_millis(39 * 250);
        let by_id: HashMap<u128, String> = st
            .places()
            .into_iter()
            .map(|(key, (id, _))| (id, key))
            .collect();
        let mut checked = 0;
        r.visit(|meta, state| {
            let script = &redis[&by_id[&meta.fleet_id().unwrap()]];
            state.visit_shared_slots(0, end, |start, b| {
                let slot = start.as_nanos() / 1_000_000_000;
                let (bins, min, max) = &script.spreads[&slot];
                let (lo, hi) = b.range.unwrap();
                if meta.kind == MetricKind::Timer {
                    let local: BTreeMap<Bin, i64> = b
                        .values
                        .unwrap()
                        .bins()
                        .into_iter()
                        .map(|(k, n)| (k, n as i64))
                        .collect();
                    assert_eq!(bins, &local, "slot {slot}");
                    checked += 1;
                } else {
                    assert!(bins.is_empty(), "a gauge sends no bins");
                }
                assert_eq!((*min, *max), (lo, hi));
            });
        });
        assert!(checked >= 5, "{checked} timer buckets checked");
    }

    #[test]
    fn the_members_sent_add_up_to_each_buckets_own_exact_and_past_the_limit() {
        let r = shared_registry();
        let (mut st, sharing) = (SyncState::default(), sharing(10, 1000));
        let mut redis: HashMap<String, Script> = HashMap::new();
        let mut next = 0u64;
        for round in 0..30u64 {
            let now = T0 + Duration::from_millis(round * 250);
            // Few members a round, then 3,000 at once (one bucket past
            // the exact limit), repeats of earlier members throughout.
            let n = if round == 12 { 3_000 } else { round % 5 * 40 };
            let lines: Vec<String> = (0..n)
                .map(|i| format!("s:m{}|s", if i % 4 == 0 { i } else { next + i }))
                .collect();
            next += n;
            for chunk in lines.chunks(50) {
                feed(&r, now, &chunk.join("\n"));
            }
            let (_, _, work) = plan(&mut st, &r, &sharing, now);
            for w in work.windows() {
                assert!(w.read.distinct);
                redis.entry(w.read.key.clone()).or_default().run(&w.batches);
            }
            let applied = SyncOutcome::Done(vec![
                WindowResult::Totals(WindowTotals::default());
                work.windows().len()
            ]);
            st.settle(
                &work,
                &applied,
                now.as_nanos(),
                1,
                &[],
                &mut Reads::default(),
            );
        }
        let end = T0 + Duration::from_millis(29 * 250);
        let script = redis.values().next().unwrap();
        let (mut exact, mut beyond) = (0, 0);
        r.visit(|_, state| {
            state.visit_shared_slots(0, end, |start, b| {
                let slot = start.as_nanos() / 1_000_000_000;
                let local = b.members.unwrap();
                if b.count == 0.0 {
                    return;
                }
                let (hashes, regs) = &script.members[&slot];
                assert_eq!(script.slots[&slot].1, b.count, "samples of slot {slot}");
                if let Some(mine) = local.exact_hashes() {
                    let mine: HashSet<u64> = mine.into_iter().collect();
                    assert_eq!(hashes, &mine, "slot {slot}");
                    let mut built = RedisHll::default();
                    for h in mine {
                        built.offer(redis_hll::pattern_of(h));
                    }
                    assert_eq!(regs, &built, "slot {slot}");
                    exact += 1;
                } else {
                    assert_eq!(Some(regs), local.registers(), "slot {slot}");
                    beyond += 1;
                }
            });
        });
        assert!(exact >= 4 && beyond == 1, "{exact} exact, {beyond} beyond");
    }
}
