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
//! Two fields per bucket: `<slot>:s` (sum) and `<slot>:c` (count).
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
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WindowTotals {
    /// Weighted sum of values (counters: increments).
    pub sum: f64,
    /// Weighted number of samples.
    pub count: f64,
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
}

/// Bucket deltas sent under one sequence number: applied at most once.
#[derive(Clone, Debug, PartialEq)]
pub struct SeqDeltas {
    /// Increasing per instance; the script skips a batch whose number is
    /// not above the last one applied for the instance.
    pub seq: u64,
    /// `(slot, Δsum, Δcount)` per bucket that changed.
    pub deltas: Vec<(u64, f64, f64)>,
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
}

/// The writes and reads of one window sync, or of one chunk of it (see
/// [`WindowBatch::into_chunks`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WindowBatch {
    pub(super) windows: Vec<WindowWork>,
    deltas: usize,
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
    /// window alone has more, `max_deltas` deltas: each chunk is one
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
                        || cur.deltas + w.deltas() > max_deltas)
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

/// The totals of one window from the flat `[field, value, ...]` list that
/// `window_sync.lua` returns; unknown or malformed fields are skipped.
pub(super) fn totals(read: &WindowRead, fields: &[String]) -> WindowTotals {
    let mut tot = WindowTotals::default();
    for pair in fields.chunks_exact(2) {
        let Some((slot, which)) = pair[0].split_once(':') else {
            continue;
        };
        let (Ok(slot), Ok(v)) = (slot.parse::<u64>(), pair[1].parse::<f64>()) else {
            continue;
        };
        if slot > read.current || (read.ignore_current && slot == read.current) {
            continue;
        }
        match which {
            "s" => tot.sum += v,
            "c" => tot.count += v,
            _ => {}
        }
    }
    tot
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
            ("9:s", "2"),
            ("9:c", "1"),
            ("10:s", "4"),
            ("10:c", "1"),
            ("junk", "7"),
            ("9:x", "7"),
            ("9:s", "nan?"),
        ]);
        let mut r = WindowRead {
            key: "k".into(),
            oldest: 0,
            current: 9,
            ignore_current: false,
        };
        assert_eq!(
            totals(&r, &f),
            WindowTotals {
                sum: 3.0,
                count: 2.0
            }
        );
        r.ignore_current = true;
        assert_eq!(
            totals(&r, &f),
            WindowTotals {
                sum: 1.0,
                count: 1.0
            }
        );
    }

    fn work(key: &str, deltas: usize) -> WindowWork {
        WindowWork {
            batches: vec![SeqDeltas {
                seq: 1,
                deltas: (0..deltas as u64).map(|s| (s, 1.0, 1.0)).collect(),
            }],
            expire_ms: 3000,
            read: WindowRead {
                key: key.into(),
                oldest: 0,
                current: 2,
                ignore_current: true,
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
