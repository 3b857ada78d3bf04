//! Shared rolling windows, the Redis side: how a window's buckets are kept
//! in Redis, and one sync's writes and reads as a [`WindowBatch`].
//!
//! What to share and when (the walk over the registry, what was already
//! pushed, the fleet view) is the job of `src/fleet/`, a layer above; this file only knows
//! keys, fields and commands.
//!
//! # Keys and fields
//!
//! One hash per shared series, window and window shape:
//!
//! ```text
//! <prefix>:win:{<group>}:<id>:<window>:<interval>x<size>
//! rollstat:win:{29}:5f0e...(32 hex digits):1m:1000msx60
//! ```
//!
//! * `<id>`: the series' 128-bit identity (xxh3-128 of its Prometheus name
//!   and sorted labels, computed once per series in `src/series/`), in 32
//!   hex digits. The key no longer embeds the label set: a series with 64
//!   long tags made a 24.9 KB key, sent four times per sync. The labels are
//!   not stored in Redis at all: each instance publishes the fleet view of
//!   the series it holds itself, and knows their labels.
//! * `<group>`: the id mod 64 ([`GROUPS`]), the hash tag: on a Redis
//!   Cluster the keys of all series fall in at most 64 slots, so a sync
//!   needs at most 64 slot pipelines (fewer, larger round trips) instead of
//!   one per series. The cost: all shared windows live on at most 64 slots,
//!   so on a cluster of more than 64 masters some masters get none, and a
//!   resharding moves them in 64 lumps.
//! * `<window>` and `<interval>x<size>` (interval in `ms` when a whole
//!   number of milliseconds, else `ns`): windows of different shapes never
//!   share a hash, so instances with different shapes for one window name
//!   (a rolling config change) never trim each other's fields; two windows
//!   of one shape on one series keep their own hash (each local window
//!   holds its own buckets: one added by a reload starts empty).
//!
//! Two fields per bucket: `<slot>:s` (sum) and `<slot>:c` (count); for
//! types with a range a third, `<slot>:x` (`<count>;<version>;<min>;<max>`,
//! see `window_sync.lua`), and the slot's quantile bins in their own hash
//! `<key>:q:<slot>` (one field per bin, [`Bin::field`]). A set's slot has
//! `<slot>:u` (`<version>;<past the exact limit>`), its members'
//! HyperLogLog `<key>:u:<slot>` and, while exact, their hashes in the set
//! `<key>:e:<slot>`; `#u` caches the window's last distinct count.
//! `<slot>` is the bucket's index on the epoch-aligned grid (slot start /
//! interval), the same on every instance. A sync runs, per window, one
//! script, `window_sync.lua` (by SHA, reloaded on `NOSCRIPT`), with this
//! instance's batches of deltas for it, each under a sequence number:
//!
//! ```text
//! EVALSHA <window_sync> 1 <key> <instance> <current> <oldest> <expire_ms>
//!         <batches> (<seq> <n> (<slot> <Δsum> <Δcount>){n} )*
//! ```
//!
//! The script applies (`HINCRBYFLOAT`) a batch only if its sequence number
//! is above the one stored for the instance in the field `@<instance>`
//! (`<seq>:<slot sent in>`), then stores it and renews the expiry, deletes
//! the fields of slots that left the window, and returns the rest,
//! atomically. A batch whose answer was lost (a deadline) is sent again with
//! the same number: applied at most once, never lost while its buckets are
//! in the window. The `@` fields cost about 30 bytes per writing instance
//! and key; one older than two window lengths is deleted (its instance has
//! nothing in doubt that could still land). A sync is cut into chunks of a
//! bounded number of windows and deltas ([`WindowBatch::into_chunks`]);
//! each chunk is one pipeline under `redis.sync_timeout_ms`
//! ([`RedisStore::sync_windows`](super::RedisStore::sync_windows)), and an
//! error Redis answers for one window's script (e.g. `WRONGTYPE`) fails
//! that window only.

use redis::cluster_routing::Slot;

use crate::sketch::bins::Bin;

/// Hash tags (Redis Cluster slots) the shared windows are spread over.
pub const GROUPS: u128 = 64;

/// The hash key of window `window` of shape `interval_nanos` x `size` of
/// the shared series `id`: `<prefix>:win:{<id mod 64>}:<id>:<window>:<shape>`
/// (see the module docs).
#[must_use]
pub fn window_key(prefix: &str, id: u128, window: &str, interval_nanos: u64, size: u64) -> String {
    let group = id % GROUPS;
    if interval_nanos % 1_000_000 == 0 {
        let ms = interval_nanos / 1_000_000;
        format!("{prefix}:win:{{{group}}}:{id:032x}:{window}:{ms}msx{size}")
    } else {
        format!("{prefix}:win:{{{group}}}:{id:032x}:{window}:{interval_nanos}nsx{size}")
    }
}

/// Fleet-wide totals of one window, as read back from Redis.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowTotals {
    /// Weighted sum of values (counters: increments).
    pub sum: f64,
    /// Weighted number of samples.
    pub count: f64,
    /// Of `count`, the samples whose writers sent their range (and, for
    /// the types with quantiles, their bins): less than `count` when an
    /// instance that does not send them shares the window.
    pub spread_count: f64,
    /// The smallest value the writers of ranges saw (+inf when none).
    pub min: f64,
    /// The largest (-inf when none).
    pub max: f64,
    /// Every slot in the window holding a range: its bins' version and,
    /// when that is not the version the read said it knew, its bins.
    pub slots: Vec<SlotBins>,
    /// For sets: the distinct members of the window over every instance.
    pub unique: Option<Unique>,
}

/// The distinct members of a shared set's window, as read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unique {
    /// How many.
    pub count: u64,
    /// Whether exact (the union of every slot's member hashes), else the
    /// `PFCOUNT` of their HyperLogLogs (0.81 % standard error).
    pub exact: bool,
}

impl Default for WindowTotals {
    fn default() -> Self {
        WindowTotals {
            sum: 0.0,
            count: 0.0,
            spread_count: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            slots: Vec::new(),
            unique: None,
        }
    }
}

/// The quantile bins of one slot of a shared window, as read back.
#[derive(Clone, Debug, PartialEq)]
pub struct SlotBins {
    /// The slot (its index on the epoch-aligned grid).
    pub slot: u64,
    /// Bumped by every batch that changes the slot's bins.
    pub version: u64,
    /// The bins over every instance; `None` when `version` is the one the
    /// read said it knew (the reader's copy is current).
    pub bins: Option<Vec<(Bin, i64)>>,
}

/// One window to read back: its key and which slots count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowRead {
    /// The window's hash key ([`window_key`]).
    pub key: String,
    /// The oldest slot still inside the window; older fields are deleted.
    pub oldest: u64,
    /// The slot being filled now; later ones (a peer's clock ahead) are left
    /// out, and this one too when the window ignores the current bucket.
    pub current: u64,
    /// Whether the window leaves out the bucket being filled.
    pub ignore_current: bool,
    /// `(slot, version)` of the slots whose bins the reader holds: those
    /// come back without their bins while their version is unchanged.
    pub known: Vec<(u64, u64)>,
    /// Whether the window is a set's, whose distinct members are counted.
    pub distinct: bool,
}

/// What a bucket of a gauge, timer, histogram or distribution brings
/// beside its totals.
#[derive(Clone, Debug, PartialEq)]
pub struct Spread {
    /// The smallest value in the local bucket (merged by minimum: sent
    /// twice, it changes nothing).
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// How each quantile bin's count changed since the last batch (none
    /// for gauges).
    pub bins: Vec<(Bin, i64)>,
}

/// What changed in one bucket since the last batch.
#[derive(Clone, Debug, PartialEq)]
pub struct BucketDelta {
    /// The bucket's slot.
    pub slot: u64,
    /// Change of the weighted sum.
    pub sum: f64,
    /// Change of the weighted count.
    pub count: f64,
    /// The range and bins, for the types that have them.
    pub spread: Option<Spread>,
    /// The new members, for sets.
    pub members: Option<MemberDelta>,
}

/// The members a set's bucket gained since the last batch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemberDelta {
    /// Their hashes, while the bucket counts exactly (added to the slot's
    /// set of hashes, which Redis keeps while the union stays exact).
    pub hashes: Vec<u64>,
    /// A HyperLogLog in Redis's layout holding the registers they raised
    /// ([`encode`](crate::sketch::redis_hll::encode)), `PFMERGE`d into
    /// the slot's; empty when they raised none.
    pub registers: Vec<u8>,
    /// Whether the bucket is past its exact limit: the slot's count is then
    /// the HyperLogLog's.
    pub beyond_exact: bool,
}

impl BucketDelta {
    /// One, plus its quantile bins, plus its member hashes and a register
    /// blob's bytes in 256s: what it costs a chunk.
    #[must_use]
    pub fn weight(&self) -> usize {
        let bins = self.spread.as_ref().map_or(0, |s| s.bins.len());
        let members = self
            .members
            .as_ref()
            .map_or(0, |m| m.hashes.len() + m.registers.len() / 256);
        1 + bins + members
    }

    /// A delta of the totals only (counters).
    #[must_use]
    pub fn totals(slot: u64, sum: f64, count: f64) -> Self {
        BucketDelta {
            slot,
            sum,
            count,
            spread: None,
            members: None,
        }
    }
}

/// Bucket deltas sent under one sequence number: applied at most once.
#[derive(Clone, Debug, PartialEq)]
pub struct SeqDeltas {
    /// Increasing per instance; the script skips a batch whose number is
    /// not above the last one applied for the instance.
    pub seq: u64,
    /// One per bucket that changed.
    pub deltas: Vec<BucketDelta>,
}

/// One window's part of a sync: its batches of deltas (those still in doubt
/// first, then the new one, in increasing sequence order), its expiry and
/// its read.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowWork {
    /// The batches, in increasing sequence order.
    pub batches: Vec<SeqDeltas>,
    /// The hash expires this long after a write (ms).
    pub expire_ms: u64,
    /// What to read back (its `key` is the window's hash).
    pub read: WindowRead,
}

impl WindowWork {
    /// Bucket deltas in all its batches.
    #[must_use]
    pub fn deltas(&self) -> usize {
        self.batches.iter().map(|b| b.deltas.len()).sum()
    }

    /// Bucket deltas plus the quantile bins they carry: the size a chunk
    /// is cut by.
    #[must_use]
    pub fn weight(&self) -> usize {
        self.batches
            .iter()
            .flat_map(|b| &b.deltas)
            .map(BucketDelta::weight)
            .sum()
    }
}

/// The writes and reads of one window sync, or of one chunk of it (see
/// [`WindowBatch::into_chunks`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WindowBatch {
    pub(super) windows: Vec<WindowWork>,
    deltas: usize,
    weight: usize,
}

// === impl WindowBatch ===

impl WindowBatch {
    /// Nothing to write or read.
    #[must_use]
    pub fn new() -> Self {
        WindowBatch::default()
    }

    /// Adds a window: its deltas are written, then it is read back.
    pub fn push(&mut self, work: WindowWork) {
        self.deltas += work.deltas();
        self.weight += work.weight();
        self.windows.push(work);
    }

    /// Bucket deltas added.
    #[must_use]
    pub fn deltas(&self) -> usize {
        self.deltas
    }

    /// The windows, in the order their results come back.
    #[must_use]
    pub fn windows(&self) -> &[WindowWork] {
        &self.windows
    }

    /// Splits into chunks of at most `max_windows` windows and, unless one
    /// window alone has more, `max_deltas` deltas (a delta's quantile bins
    /// counting one each): each chunk is one
    /// pipeline under its own deadline, and a window's commands never span
    /// two chunks (one key per window, so a chunk never needs more than its
    /// own keys). With `by_slot` (the store is a Redis Cluster), windows are
    /// first grouped by the cluster slot of their key ([`slot_of`]), in the
    /// order each slot first appears, and a chunk never holds two slots: the
    /// cluster client refuses a pipeline that spans slots.
    #[must_use]
    pub fn into_chunks(
        self,
        max_windows: usize,
        max_deltas: usize,
        by_slot: bool,
    ) -> Vec<WindowBatch> {
        let groups: Vec<Vec<WindowWork>> = if by_slot {
            let mut index: std::collections::HashMap<Slot, usize> =
                std::collections::HashMap::new();
            let mut groups: Vec<Vec<WindowWork>> = Vec::new();
            for w in self.windows {
                let g = *index.entry(slot_of(&w.read.key)).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[g].push(w);
            }
            groups
        } else {
            vec![self.windows]
        };
        let mut out = Vec::new();
        for group in groups {
            let mut cur = WindowBatch::new();
            for w in group {
                if !cur.windows.is_empty()
                    && (cur.windows.len() >= max_windows.max(1)
                        || cur.weight + w.weight() > max_deltas)
                {
                    out.push(std::mem::take(&mut cur));
                }
                cur.push(w);
            }
            if !cur.windows.is_empty() {
                out.push(cur);
            }
        }
        out
    }
}

/// The Redis Cluster slot of `key` (CRC16 of its `{hash tag}`): the
/// commands of one pipeline must all fall in one slot on a cluster.
#[must_use]
pub fn slot_of(key: &str) -> Slot {
    Slot::for_key(key)
}

/// Whether `slot` counts in the totals of `read`: not ahead of the
/// current slot, and not the current one when the window ignores it.
fn counts(read: &WindowRead, slot: u64) -> bool {
    slot < read.current || (slot == read.current && !read.ignore_current)
}

/// The totals of one window from what `window_sync.lua` returns: the
/// flat `[field, value, ...]` list of its hash, per slot whose bins
/// changed `[slot, bin, count, ...]`, and for a set `[count, exact]`.
/// Unknown or malformed fields are skipped.
pub(super) fn totals(
    read: &WindowRead,
    fields: &[String],
    bins: &[Vec<String>],
    unique: &[u64],
) -> WindowTotals {
    let mut tot = WindowTotals::default();
    for pair in fields.chunks_exact(2) {
        let Some((slot, which)) = pair[0].split_once(':') else {
            continue;
        };
        let Ok(slot) = slot.parse::<u64>() else {
            continue;
        };
        if !counts(read, slot) {
            continue;
        }
        match which {
            "s" => tot.sum += pair[1].parse::<f64>().unwrap_or(0.0),
            "c" => tot.count += pair[1].parse::<f64>().unwrap_or(0.0),
            "x" => tot.add_spread(slot, &pair[1]),
            _ => {}
        }
    }
    for one in bins {
        let Some(slot) = one.first().and_then(|s| s.parse::<u64>().ok()) else {
            continue;
        };
        let Some(at) = tot.slots.iter_mut().find(|b| b.slot == slot) else {
            continue;
        };
        let parsed = one[1..]
            .chunks_exact(2)
            .filter_map(|p| Some((Bin::parse(&p[0])?, p[1].parse::<i64>().ok()?)))
            .collect();
        at.bins = Some(parsed);
    }
    if let (true, [count, exact]) = (read.distinct, unique) {
        tot.unique = Some(Unique {
            count: *count,
            exact: *exact == 1,
        });
    }
    tot
}

impl WindowTotals {
    /// Adds one slot's `x` field, `<count>;<version>;<min>;<max>`.
    fn add_spread(&mut self, slot: u64, x: &str) {
        let mut parts = x.split(';');
        let (Some(count), Some(version), Some(min), Some(max)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return;
        };
        let (Ok(count), Ok(version), Ok(min), Ok(max)) = (
            count.parse::<f64>(),
            version.parse::<u64>(),
            min.parse::<f64>(),
            max.parse::<f64>(),
        ) else {
            return;
        };
        self.spread_count += count;
        self.min = self.min.min(min);
        self.max = self.max.max(max);
        self.slots.push(SlotBins {
            slot,
            version,
            bins: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Vec<String> {
        pairs
            .iter()
            .flat_map(|(f, v)| [f.to_string(), v.to_string()])
            .collect()
    }

    #[test]
    fn totals_leave_out_future_slots_and_the_current_one_when_ignored() {
        let f = fields(&[
            ("8:s", "1"),
            ("8:c", "1"),
            ("8:x", "1;3;0.5;0.5"),
            ("9:s", "2"),
            ("9:c", "1"),
            ("9:x", "1;1;2;2"),
            ("10:s", "4"),
            ("10:c", "1"),
            ("10:x", "1;1;4;4"),
            ("junk", "7"),
            ("9:y", "7"),
            ("9:s", "nan?"),
            ("7:x", "1;2;bad;0"),
        ]);
        let bins = vec![
            vec![
                "9".to_string(),
                "p35".into(),
                "1".into(),
                "junk".into(),
                "2".into(),
            ],
            vec!["10".to_string(), "p70".into(), "1".into()],
        ];
        let mut r = WindowRead {
            key: "k".into(),
            oldest: 0,
            current: 9,
            ignore_current: false,
            known: vec![(8, 3)],
            distinct: false,
        };
        let t = totals(&r, &f, &bins, &[]);
        assert_eq!((t.sum, t.count, t.spread_count), (3.0, 2.0, 2.0));
        assert_eq!(t.unique, None);
        assert_eq!((t.min, t.max), (0.5, 2.0));
        assert_eq!(
            t.slots,
            [
                SlotBins {
                    slot: 8,
                    version: 3,
                    bins: None
                },
                SlotBins {
                    slot: 9,
                    version: 1,
                    bins: Some(vec![(Bin::Positive(35), 1)])
                }
            ]
        );
        r.ignore_current = true;
        let t = totals(&r, &f, &bins, &[]);
        assert_eq!((t.sum, t.count, t.min, t.max), (1.0, 1.0, 0.5, 0.5));
        assert_eq!(t.slots.len(), 1);
        // A set's distinct count, when the read asked for one.
        assert_eq!(totals(&r, &f, &bins, &[12, 1]).unique, None);
        r.distinct = true;
        let u = totals(&r, &f, &bins, &[12, 0]).unique;
        assert_eq!(
            u,
            Some(Unique {
                count: 12,
                exact: false
            })
        );
    }

    fn work(key: &str, deltas: usize) -> WindowWork {
        WindowWork {
            batches: vec![SeqDeltas {
                seq: 1,
                deltas: (0..deltas as u64)
                    .map(|s| BucketDelta::totals(s, 1.0, 1.0))
                    .collect(),
            }],
            expire_ms: 3000,
            read: WindowRead {
                key: key.into(),
                oldest: 0,
                current: 2,
                ignore_current: true,
                known: Vec::new(),
                distinct: false,
            },
        }
    }

    #[test]
    fn a_batch_counts_its_deltas_and_chunks_by_windows_and_deltas() {
        let mut b = WindowBatch::new();
        for (i, d) in [2, 0, 3, 1, 6, 1].into_iter().enumerate() {
            b.push(work(&format!("k{i}"), d));
        }
        assert_eq!(b.deltas(), 13);
        assert_eq!(b.windows()[1].read.key, "k1");
        let sizes: Vec<(usize, usize)> = b
            .clone()
            .into_chunks(3, 4, false)
            .iter()
            .map(|c| (c.windows().len(), c.deltas()))
            .collect();
        // k0+k1 (2), k2+k3 (4), k4 alone (6, over the cap but one window),
        // k5.
        assert_eq!(sizes, [(2, 2), (2, 4), (1, 6), (1, 1)]);
        let keys: Vec<String> = b
            .into_chunks(2, 100, false)
            .iter()
            .flat_map(|c| c.windows().iter().map(|w| w.read.key.clone()))
            .collect();
        assert_eq!(keys, ["k0", "k1", "k2", "k3", "k4", "k5"]);
        let id = 0x0123_4567_89ab_cdef_0011_2233_4455_6677_u128;
        assert_eq!(
            window_key("p", id, "1m", 1_000_000_000, 60),
            "p:win:{55}:0123456789abcdef0011223344556677:1m:1000msx60"
        );
        assert_eq!(
            window_key("p", 3, "w", 1_500, 10),
            "p:win:{3}:00000000000000000000000000000003:w:1500nsx10"
        );
        // Same group, same slot: one pipeline on a cluster.
        assert_eq!(
            slot_of(&window_key("p", 3, "a", 1, 1)),
            slot_of(&window_key("p", 3 + GROUPS * 1000, "b", 2, 2))
        );
    }

    #[test]
    fn slots_agree_with_the_redis_client_and_cluster_chunks_never_mix_slots() {
        // Redis's documented example: only the hash tag counts.
        assert_eq!(slot_of("{user1000}.following"), slot_of("user1000"));
        assert_ne!(
            slot_of("{user1000}.following"),
            slot_of("{user1001}.following")
        );
        let mut b = WindowBatch::new();
        for i in 0..40 {
            b.push(work(&format!("p:win:{{g{}}}:w{i}", i % 5), 1));
        }
        let chunks = b.clone().into_chunks(64, 512, true);
        assert_eq!(chunks.len(), 5);
        for c in &chunks {
            let slots: std::collections::HashSet<Slot> =
                c.windows().iter().map(|w| slot_of(&w.read.key)).collect();
            assert_eq!(slots.len(), 1);
            assert_eq!(c.windows().len(), 8);
        }
        // Within a slot, the caps still hold; on one server, slots mix.
        assert_eq!(b.clone().into_chunks(3, 512, true).len(), 15);
        assert_eq!(b.into_chunks(64, 512, false).len(), 1);
    }
}
