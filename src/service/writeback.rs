//! What a shared limit's local fallback admitted during an outage, kept to
//! be written back to the shared store on recovery: a bounded queue of
//! `(key, n, at)`.
//!
//! `NamedLimit::decide` (in `limits.rs`) pushes every admission its local
//! fallback makes (`on_store_error = "local"`), and drains the queue through
//! the store before its next shared decision; the daemon's store task drains
//! it too, so it empties without traffic. Entries keep their own time, so
//! the sliding log and counter in Redis place them where they happened.
//! What cannot be written back is counted in
//! `rollstat_store_writeback_total{result}`: `overflow` (the queue was
//! full), `expired` (its time left the longest window first: it no longer
//! counts anywhere). The bound that remains is in `fallback.rs`.

use std::collections::VecDeque;

use parking_lot::Mutex;

use crate::clock::Timestamp;

/// At most this many admissions wait per limit; more are counted as
/// `overflow` and dropped (a 10-minute outage at 16 admissions a second).
pub const WRITEBACK_CAP: usize = 10_000;

/// One admission to write back: key, weight, when.
pub type Entry = (String, u32, Timestamp);

/// The bounded queue of one limit.
pub struct WriteBackQueue {
    entries: Mutex<VecDeque<Entry>>,
    cap: usize,
}

impl WriteBackQueue {
    /// Empty, holding at most `cap` entries.
    #[must_use]
    pub fn new(cap: usize) -> Self {
        WriteBackQueue {
            entries: Mutex::new(VecDeque::new()),
            cap,
        }
    }

    /// Queues an admission; `false` if the queue is full (dropped: the
    /// caller counts it as `overflow`).
    pub fn push(&self, key: &str, n: u32, at: Timestamp) -> bool {
        let mut q = self.entries.lock();
        if q.len() >= self.cap {
            return false;
        }
        q.push_back((key.to_string(), n, at));
        true
    }

    /// Whether something waits.
    #[must_use]
    pub fn is_pending(&self) -> bool {
        !self.entries.lock().is_empty()
    }

    /// Takes every entry out, oldest first, but those whose time left a
    /// window of `longest` nanoseconds at `now` (their count is returned:
    /// `expired`).
    pub fn take(&self, now: Timestamp, longest: u64) -> (Vec<Entry>, usize) {
        let all: Vec<Entry> = self.entries.lock().drain(..).collect();
        let before = all.len();
        let live: Vec<Entry> = all
            .into_iter()
            .filter(|(_, _, at)| at.as_nanos().saturating_add(longest) > now.as_nanos())
            .collect();
        let expired = before - live.len();
        (live, expired)
    }

    /// A queue holding what `previous` held (a limit carried over a
    /// reload): nothing waiting to be written back is lost to the reload.
    #[must_use]
    pub fn carried_from(previous: &WriteBackQueue, cap: usize) -> Self {
        let entries: VecDeque<Entry> = previous.entries.lock().drain(..).take(cap).collect();
        WriteBackQueue {
            entries: Mutex::new(entries),
            cap,
        }
    }

    /// Puts entries that could not be sent back at the front, in their
    /// order; those that no longer fit (the queue refilled meanwhile) are
    /// dropped and their number returned (`overflow`).
    pub fn put_back(&self, entries: Vec<Entry>) -> usize {
        let mut q = self.entries.lock();
        let room = self.cap.saturating_sub(q.len());
        let keep = entries.len().min(room);
        let dropped = entries.len() - keep;
        for e in entries.into_iter().take(keep).rev() {
            q.push_front(e);
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

    #[test]
    fn a_reload_carries_what_waits() {
        let q = WriteBackQueue::new(3);
        assert!(q.push("a", 1, T0));
        assert!(q.push("b", 2, T0));
        let next = WriteBackQueue::carried_from(&q, 3);
        assert!(!q.is_pending());
        let (live, expired) = next.take(T0, 1);
        assert_eq!(expired, 0);
        assert_eq!(
            live,
            vec![("a".to_string(), 1, T0), ("b".to_string(), 2, T0)]
        );
    }

    #[test]
    fn bounded_expiring_and_put_back_in_order() {
        let q = WriteBackQueue::new(3);
        assert!(q.push("a", 1, T0));
        assert!(q.push("b", 2, T0 + Duration::from_secs(30)));
        assert!(q.push("c", 1, T0 + Duration::from_secs(50)));
        assert!(!q.push("d", 1, T0), "a full queue refuses");
        assert!(q.is_pending());
        // A 60 s window at T0 + 60 s: `a` left it.
        let (live, expired) = q.take(T0 + Duration::from_secs(60), 60_000_000_000);
        assert_eq!(expired, 1);
        assert_eq!(
            live.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
            ["b", "c"]
        );
        assert!(!q.is_pending());
        // Not sent: back at the front, before what came meanwhile; what no
        // longer fits is counted.
        assert!(q.push("e", 1, T0 + Duration::from_secs(61)));
        assert!(q.push("f", 1, T0 + Duration::from_secs(61)));
        assert_eq!(q.put_back(live), 1);
        let (again, _) = q.take(T0 + Duration::from_secs(61), 60_000_000_000);
        assert_eq!(
            again.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
            ["b", "e", "f"]
        );
    }
}
