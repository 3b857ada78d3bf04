//! Shared rolling windows, the Redis side: how a window's buckets are kept
//! in Redis, and one sync's writes and reads as a [`WindowBatch`].
//!
//! What to share and when (the walk over the registry, what was already
//! pushed, the fleet view) is the job of `src/fleet.rs`, a layer above; this file only knows
//! keys, fields and commands.
//!
//! # Keys and fields
//!
//! One hash per shared series and window, `<prefix>:win:{<series>}:<window>`,
//! with two fields per bucket: `<slot>:s` (sum) and `<slot>:c` (count).
//! `<slot>` is the bucket's index on the epoch-aligned grid (slot start /
//! interval), the same on every instance. A sync sends, in one pipeline:
//!
//! ```text
//! HINCRBYFLOAT <key> <slot>:s <Δsum>
//! HINCRBYFLOAT <key> <slot>:c <Δcount>
//! PEXPIRE      <key> <window length + margin>
//! ```
//!
//! then runs `window_read.lua` per window (by SHA, reloaded on `NOSCRIPT`):
//! it deletes fields of slots that left the window and returns the rest,
//! atomically. [`RedisStore::sync_windows`](super::RedisStore::sync_windows)
//! runs both round trips under one deadline.

use redis::Pipeline;

/// The hash key of a shared window: `<prefix>:win:{<series>}:<window>`.
#[must_use]
pub fn window_key(prefix: &str, series: &str, window: &str) -> String {
    format!("{prefix}:win:{{{series}}}:{window}")
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

/// The writes and reads of one window sync.
#[derive(Default)]
pub struct WindowBatch {
    pub(super) writes: Pipeline,
    pub(super) reads: Vec<WindowRead>,
    pub(super) deltas: usize,
}

// === impl WindowBatch ===

impl WindowBatch {
    /// Nothing to write or read.
    #[must_use]
    pub fn new() -> Self {
        WindowBatch::default()
    }

    /// Adds `Δsum` and `Δcount` to bucket `slot` of the window `key`.
    pub fn add(&mut self, key: &str, slot: u64, sum: f64, count: f64) {
        self.writes
            .cmd("HINCRBYFLOAT")
            .arg(key)
            .arg(format!("{slot}:s"))
            .arg(sum)
            .ignore();
        self.writes
            .cmd("HINCRBYFLOAT")
            .arg(key)
            .arg(format!("{slot}:c"))
            .arg(count)
            .ignore();
        self.deltas += 1;
    }

    /// Lets the window `key` expire `ms` milliseconds after this write.
    pub fn expire(&mut self, key: &str, ms: u64) {
        self.writes.cmd("PEXPIRE").arg(key).arg(ms).ignore();
    }

    /// Reads the window back after the writes.
    pub fn read(&mut self, read: WindowRead) {
        self.reads.push(read);
    }

    /// Bucket deltas added.
    #[must_use]
    pub fn deltas(&self) -> usize {
        self.deltas
    }

    /// The windows to read, in the order their totals come back.
    #[must_use]
    pub fn reads(&self) -> &[WindowRead] {
        &self.reads
    }
}

/// The totals of one window from the flat `[field, value, ...]` list that
/// `window_read.lua` returns; unknown or malformed fields are skipped.
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

    #[test]
    fn a_batch_counts_its_deltas_and_keeps_reads_in_order() {
        let mut b = WindowBatch::new();
        b.add("a", 1, 1.0, 1.0);
        b.add("a", 2, 1.0, 1.0);
        b.expire("a", 3000);
        for key in ["a", "b"] {
            b.read(WindowRead {
                key: key.into(),
                oldest: 0,
                current: 2,
                ignore_current: true,
            });
        }
        assert_eq!(b.deltas(), 2);
        assert_eq!(b.reads()[1].key, "b");
        assert_eq!(window_key("p", "x|a=b", "1m"), "p:win:{x|a=b}:1m");
    }
}
