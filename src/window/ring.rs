//! [`Ring`]: the time buckets of one grid, and [`Read`]: how one window reads
//! them. A [`RollingWindow`](super::RollingWindow) is a ring read whole;
//! [`Windows`](super::grid::Windows) lets every window on the same bucket
//! interval read one ring sized for the longest of them.
//!
//! # Reading a window of `w` buckets from a ring of `n >= w`
//!
//! Let `L` be the start of the last-written slot and `k` the whole
//! intervals from `L` to `now`. A go-zero window of `w` buckets that saw
//! the same adds holds, at age `j` (the slot starting at `L - j·I`), what
//! was added in that slot, for every `j < w`; its reduce visits the ages
//! `w - 1 - min(k, w)` down to `0` (down to `1` with ignore-current while
//! `k = 0`). A ring of `n >= w` buckets fed the same adds holds the same
//! contents at every age `j < n`: an add resets the `min(k, n)` buckets
//! after the current one, which are exactly the ages that a `w`-ring resets
//! too, or ages it no longer reads. So reading those ages from the larger
//! ring gives the `w`-window's answer bucket for bucket, oldest first:
//! ignore-current and the window's length are properties of the read, not
//! of the ring (`tests/window.rs` checks it against the event-log model).

use std::time::Duration;

use super::bucket::Bucket;
use crate::clock::Timestamp;

/// A ring of time buckets on one grid.
#[derive(Clone)]
pub struct Ring<B> {
    buckets: Box<[B]>,
    /// Bucket width in nanoseconds (> 0).
    interval: u64,
    /// Index of the bucket holding the last-written slot.
    offset: usize,
    /// Start of the last-written slot, a grid point (go-zero's `lastTime`).
    last: u64,
}

/// How one window reads a [`Ring`]: its newest `size` buckets, with or
/// without the bucket being filled, over the time since `watched_from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Read {
    /// Buckets in the window (at most the ring's).
    pub size: usize,
    /// go-zero's `IgnoreCurrentBucket`.
    pub ignore_current: bool,
    /// Time before this was not watched: [`Ring::covered`] never counts it.
    pub watched_from: Option<u64>,
    /// Whether slots that ended at or before `watched_from` are skipped, as
    /// if empty: a window added to a ring that already held data (a reload)
    /// reads only what came after it.
    pub skip_unwatched: bool,
}

impl Read {
    /// The newest `size` buckets, everything counted as watched.
    #[must_use]
    pub const fn newest(size: usize, ignore_current: bool) -> Read {
        Read {
            size,
            ignore_current,
            watched_from: None,
            skip_unwatched: false,
        }
    }
}

// === impl Ring ===

impl<B: Bucket> Ring<B> {
    /// `size` empty buckets of `interval` nanoseconds on the grid through
    /// `origin`, the current one holding `now`.
    #[must_use]
    pub fn with_origin(size: usize, interval: u64, origin: Timestamp, now: Timestamp) -> Self {
        let (o, n, i) = (origin.as_nanos(), now.as_nanos(), interval);
        let last = if n >= o {
            n - (n - o) % i
        } else {
            // The grid point at or before `now`, counting back from the origin.
            let back = (o - n).div_ceil(i).saturating_mul(i);
            o.saturating_sub(back)
        };
        Ring {
            buckets: (0..size).map(|_| B::default()).collect(),
            interval: i,
            offset: 0,
            last,
        }
    }

    /// Number of buckets.
    #[must_use]
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Never true: a ring has at least one bucket.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Bucket width in nanoseconds.
    #[must_use]
    pub fn interval_nanos(&self) -> u64 {
        self.interval
    }

    /// Start of the last-written slot (go-zero's `lastTime`).
    #[must_use]
    pub fn last_slot_start(&self) -> Timestamp {
        Timestamp::from_nanos(self.last)
    }

    /// Whole intervals from the last-written slot to `now`, capped at `cap`.
    /// A `now` before the last-written slot counts as inside it (0).
    #[inline]
    fn span(&self, now: u64, cap: usize) -> usize {
        if now < self.last.saturating_add(self.interval) {
            // Same slot, or time went backwards: no division on the hot path.
            return 0;
        }
        let k = (now - self.last) / self.interval;
        if k >= cap as u64 {
            cap
        } else {
            k as usize
        }
    }

    /// Adds `input` into the bucket for `now`, first resetting the buckets
    /// that expired since the last write.
    #[inline]
    pub fn add(&mut self, input: B::Input, now: Timestamp) {
        self.advance(now);
        self.buckets[self.offset].add(input);
    }

    /// Moves the ring to `now` (resetting expired buckets) without adding.
    #[inline]
    pub fn advance(&mut self, now: Timestamp) {
        let now = now.as_nanos();
        let n = self.buckets.len();
        let span = self.span(now, n);
        if span == 0 {
            return;
        }
        for i in 1..=span {
            self.buckets[(self.offset + i) % n].reset();
        }
        self.offset = (self.offset + span) % n;
        // Latest grid point at or before `now`: never drifts, even after a gap
        // far longer than the ring (span was capped, this is not).
        self.last = now - (now - self.last) % self.interval;
    }

    /// The bucket for the last-written slot. Call [`advance`](Self::advance)
    /// first to make it the bucket for `now`.
    pub fn current_mut(&mut self) -> &mut B {
        &mut self.buckets[self.offset]
    }

    /// The ages (slots back from the last-written one) a read at `now`
    /// visits: `lo..=hi`, or `None` when it visits nothing.
    #[inline]
    fn ages(&self, read: &Read, now: u64) -> Option<(usize, usize)> {
        let w = read.size.min(self.buckets.len());
        let span = self.span(now, w);
        if span >= w {
            return None;
        }
        let lo = usize::from(span == 0 && read.ignore_current);
        let mut hi = w - 1 - span;
        if read.skip_unwatched {
            if let Some(from) = read.watched_from {
                // Age j's slot ends at last - (j - 1)·I; it is read if that
                // is after `from`.
                if from >= self.last.saturating_add(self.interval) {
                    return None;
                }
                let oldest = (self.last + self.interval - from - 1) / self.interval;
                hi = hi.min(usize::try_from(oldest).unwrap_or(usize::MAX));
            }
        }
        (lo <= hi).then_some((lo, hi))
    }

    /// Calls `f` on every bucket `read` sees at `now`, oldest first, and
    /// returns how many were visited. Never changes state.
    #[inline]
    pub fn visit(&self, read: &Read, now: Timestamp, mut f: impl FnMut(&B)) -> usize {
        let Some((lo, hi)) = self.ages(read, now.as_nanos()) else {
            return 0;
        };
        let n = self.buckets.len();
        let count = hi - lo + 1;
        // Oldest first: from age `hi` forwards, wrapping at the ring's end.
        // Two plain slice walks instead of a modulo per bucket.
        let start = (self.offset + n - hi) % n;
        let first = count.min(n - start);
        self.buckets[start..start + first].iter().for_each(&mut f);
        self.buckets[..count - first].iter().for_each(&mut f);
        count
    }

    /// Merges every bucket `read` sees at `now` into one. Never changes state.
    #[must_use]
    pub fn reduce(&self, read: &Read, now: Timestamp) -> B {
        let mut acc = B::default();
        self.visit(read, now, |b| acc.merge(b));
        acc
    }

    /// Calls `f(slot_start, bucket)` on every unexpired bucket of the newest
    /// `read.size`, the current one included whatever ignore-current says,
    /// newest first (unwatched slots left out if the read skips them).
    /// Never changes state.
    pub fn visit_slots(&self, read: &Read, now: Timestamp, mut f: impl FnMut(Timestamp, &B)) {
        let ages = self.ages(
            &Read {
                ignore_current: false,
                ..*read
            },
            now.as_nanos(),
        );
        let Some((_, hi)) = ages else {
            return;
        };
        let n = self.buckets.len();
        for j in 0..=hi {
            let Some(start) = self.last.checked_sub(j as u64 * self.interval) else {
                return;
            };
            f(
                Timestamp::from_nanos(start),
                &self.buckets[(self.offset + n - j) % n],
            );
        }
    }

    /// The time the buckets `read` visits at `now` cover, the denominator
    /// of a windowed rate: the `size - 1` whole slots before the slot
    /// containing `now`, plus the elapsed part of that slot unless
    /// ignore-current is on, less any part of that before `watched_from`.
    #[must_use]
    pub fn covered(&self, read: &Read, now: Timestamp) -> Duration {
        let (end, span) = self.end_and_span(read, now);
        let watched = read
            .watched_from
            .map_or(span, |from| end.saturating_sub(from));
        Duration::from_nanos(span.min(watched))
    }

    /// [`covered`](Self::covered) as if the window had been watched for
    /// ever: the time its buckets span at `now`.
    #[must_use]
    pub fn spanned(&self, read: &Read, now: Timestamp) -> Duration {
        Duration::from_nanos(self.end_and_span(read, now).1)
    }

    /// The end of the time a read at `now` covers, and its length ignoring
    /// the watch.
    fn end_and_span(&self, read: &Read, now: Timestamp) -> (u64, u64) {
        let now = now.as_nanos().max(self.last);
        let slot_start = now - (now - self.last) % self.interval;
        let whole = self.interval * (read.size as u64).saturating_sub(1);
        let end = if read.ignore_current { slot_start } else { now };
        (end, end - slot_start + whole)
    }

    /// This ring with `size` buckets: the newest `min(size, len)` keep their
    /// contents, older ones (if it grows) start empty.
    #[must_use]
    pub fn resized(mut self, size: usize) -> Self {
        let n = self.buckets.len();
        if size == n {
            return self;
        }
        let mut old: Vec<Option<B>> = std::mem::take(&mut self.buckets)
            .into_vec()
            .into_iter()
            .map(Some)
            .collect();
        // New index 0 holds age 0; index size - j holds age j.
        let buckets = (0..size)
            .map(|i| {
                let age = (size - i) % size;
                if age < n {
                    old[(self.offset + n - age) % n].take().unwrap_or_default()
                } else {
                    B::default()
                }
            })
            .collect();
        Ring {
            buckets,
            interval: self.interval,
            offset: 0,
            last: self.last,
        }
    }

    /// The same ring with every bucket converted by `f`: same grid, same
    /// slots, same ages.
    #[must_use]
    pub fn map<C: Bucket>(&self, f: impl FnMut(&B) -> C) -> Ring<C> {
        Ring {
            buckets: self.buckets.iter().map(f).collect(),
            interval: self.interval,
            offset: self.offset,
            last: self.last,
        }
    }

    /// The bucket `age` slots back from the last-written one.
    pub(super) fn at_age_mut(&mut self, age: usize) -> &mut B {
        let n = self.buckets.len();
        &mut self.buckets[(self.offset + n - age % n) % n]
    }
}

impl<B: std::fmt::Debug> std::fmt::Debug for Ring<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("size", &self.buckets.len())
            .field("interval", &Duration::from_nanos(self.interval))
            .field("offset", &self.offset)
            .field("last", &self.last)
            .field("buckets", &self.buckets)
            .finish()
    }
}
