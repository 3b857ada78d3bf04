//! `RollingWindow<B>`: go-zero's ring of time buckets, with time passed in.
//!
//! A window is `size` buckets of width `interval` laid on a time grid. Each
//! bucket aggregates the values added while time was inside its slot. The
//! behaviour follows go-zero's `core/collection/rollingwindow.go` exactly,
//! except that time is an argument instead of a global clock and that the
//! backward-time case is defined on purpose (see below).
//!
//! * [`add`](RollingWindow::add)`(v, now)`: let `span` be the number of whole
//!   intervals from the start of the last-written slot `L` to `now`, capped at
//!   `size`. If `span > 0`, reset the `span` buckets after the current one
//!   (at most all of them), move the current index by `span`, and set `L` to the
//!   latest grid point at or before `now` (`L += floor((now - L) / I) * I`, so
//!   the grid never drifts, even after a gap far longer than the window). Then
//!   add `v` into the current bucket.
//! * [`reduce`](RollingWindow::reduce)`(now)` / [`visit`](RollingWindow::visit):
//!   visit only unexpired buckets, oldest first, and never change state. The
//!   `span` buckets that expired since the last write are skipped, not visited
//!   as zeros, so the number of visited buckets is `size - span`.
//! * `ignore_current`: leave out the bucket still being filled, exactly when
//!   go-zero does: only while `span == 0` (time still inside the last-written
//!   slot); `size - 1` buckets are then visited. Once time has moved into a new,
//!   not yet written slot, that slot is skipped anyway.
//!
//! A value written in the slot starting at `a` is therefore visible for `now`
//! in `[a, a + size·interval)`, or `[a + interval, a + size·interval)` with
//! ignore-current.
//!
//! ## The grid origin
//!
//! go-zero anchors the grid at the window's creation instant
//! ([`RollingWindow::new`]). The daemon anchors it at multiples of the interval
//! since the Unix epoch ([`RollingWindow::epoch_aligned`]), so that every
//! series, and every instance in a fleet, agrees on bucket boundaries. Any
//! other origin can be given to [`RollingWindow::with_origin`].
//!
//! ## Time going backwards
//!
//! [`SystemClock`](crate::SystemClock) never goes backwards, but a
//! [`ManualClock`](crate::ManualClock) can, and a caller may pass stale
//! timestamps (for example a batch read before a newer one was processed).
//! rollstat's rule: **a `now` earlier than the start of the last-written slot
//! is treated as that slot's start.** An `add` lands in the current bucket, a
//! `reduce` sees the window as it was at `L`, nothing is reset, the grid never
//! moves backwards, and time resumes normally once `now` passes `L` again. This
//! differs on purpose from go-zero, whose arithmetic (on a wall-clock-based
//! relative time) makes a window that is one interval or more behind report
//! nothing and wipes every bucket on the next add.
//!
//! ## Cost
//!
//! `add` while time stays in the current slot is a compare and an add (no
//! division); moving to a new slot costs one division and at most `size`
//! bucket resets. `reduce` is one pass over at most `size` buckets.

mod aggregate;
pub mod bucket;
pub mod grid;
pub mod ring;
pub mod summary;

use std::fmt;
use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::{duration_nanos, Timestamp};
pub use aggregate::Aggregate;
use bucket::Bucket;
pub use grid::{Layout, Windows};
pub use ring::{Read, Ring};

/// The shape of a window: how many buckets, how wide, and whether the bucket
/// being filled is left out of reductions. Validated at construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WindowSpec {
    size: usize,
    interval: u64,
    ignore_current: bool,
}

/// A window shape that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowSpecError {
    /// `size` was zero.
    #[error("a rolling window needs at least 1 bucket; got 0 (set buckets >= 1)")]
    NoBuckets,
    /// `interval` was shorter than a nanosecond.
    #[error("a rolling window's bucket interval must be at least 1ns; got {0:?}")]
    ZeroInterval(Duration),
    /// `size * interval` does not fit in 584 years of nanoseconds.
    #[error("a rolling window of {size} buckets of {interval:?} is too long to represent")]
    TooLong {
        /// Number of buckets asked for.
        size: usize,
        /// Bucket width asked for.
        interval: Duration,
    },
}

// === impl WindowSpec ===

impl WindowSpec {
    /// `size` buckets of width `interval`, ignore-current off.
    pub fn new(size: usize, interval: Duration) -> Result<Self, WindowSpecError> {
        if size == 0 {
            return Err(WindowSpecError::NoBuckets);
        }
        let nanos = duration_nanos(interval);
        if nanos == 0 {
            return Err(WindowSpecError::ZeroInterval(interval));
        }
        if nanos.checked_mul(size as u64).is_none() {
            return Err(WindowSpecError::TooLong { size, interval });
        }
        Ok(WindowSpec {
            size,
            interval: nanos,
            ignore_current: false,
        })
    }

    /// `buckets` buckets that split `length` evenly: how the breakers are
    /// configured (a window and a bucket count, as go-zero and resilience4j
    /// take them).
    pub fn over(length: Duration, buckets: usize) -> Result<Self, WindowSpecError> {
        if buckets == 0 {
            return Err(WindowSpecError::NoBuckets);
        }
        WindowSpec::new(buckets, length / u32::try_from(buckets).unwrap_or(u32::MAX))
    }

    /// Sets go-zero's `IgnoreCurrentBucket` option.
    #[must_use]
    pub fn ignore_current(mut self, on: bool) -> Self {
        self.ignore_current = on;
        self
    }

    /// Number of buckets.
    #[must_use]
    pub fn size(&self) -> usize {
        self.size
    }

    /// Width of one bucket.
    #[must_use]
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// Whether the bucket being filled is left out of reductions.
    #[must_use]
    pub fn ignores_current(&self) -> bool {
        self.ignore_current
    }

    /// The whole window, `size * interval`.
    #[must_use]
    pub fn length(&self) -> Duration {
        Duration::from_nanos(self.interval * self.size as u64)
    }
}

/// A ring of `size` time buckets; see the [module docs](self) for the exact
/// semantics. A [`Ring`] read whole.
#[derive(Clone)]
pub struct RollingWindow<B> {
    ring: Ring<B>,
    read: Read,
}

// === impl RollingWindow ===

impl<B: Bucket> RollingWindow<B> {
    /// A window whose grid is anchored at `now`, as go-zero's
    /// `NewRollingWindow` does.
    #[must_use]
    pub fn new(spec: WindowSpec, now: Timestamp) -> Self {
        Self::with_origin(spec, now, now)
    }

    /// A window whose grid is anchored at multiples of the interval since the
    /// Unix epoch, so that windows created at different times (and on different
    /// machines) share bucket boundaries.
    #[must_use]
    pub fn epoch_aligned(spec: WindowSpec, now: Timestamp) -> Self {
        Self::with_origin(spec, Timestamp::EPOCH, now)
    }

    /// A window whose grid passes through `origin`, created at `now`.
    #[must_use]
    pub fn with_origin(spec: WindowSpec, origin: Timestamp, now: Timestamp) -> Self {
        RollingWindow {
            ring: Ring::with_origin(spec.size, spec.interval, origin, now),
            read: Read::newest(spec.size, spec.ignore_current),
        }
    }

    /// Declares that nothing was watched before `t` (e.g. the process that
    /// holds the window started then): [`covered`](Self::covered), the
    /// denominator of a windowed rate, leaves out the part of the window
    /// before `t`, so a window younger than its length reports the rate of
    /// what it saw rather than that rate diluted over time nobody watched.
    /// The buckets themselves are unchanged (go-zero's semantics).
    #[must_use]
    pub fn watched_from(mut self, t: Timestamp) -> Self {
        self.read.watched_from = Some(t.as_nanos());
        self
    }

    /// The window's shape.
    #[must_use]
    pub fn spec(&self) -> WindowSpec {
        WindowSpec {
            size: self.ring.len(),
            interval: self.ring.interval_nanos(),
            ignore_current: self.read.ignore_current,
        }
    }

    /// Start of the last-written slot (go-zero's `lastTime`).
    #[must_use]
    pub fn last_slot_start(&self) -> Timestamp {
        self.ring.last_slot_start()
    }

    /// Adds `input` into the bucket for `now`, first resetting the buckets
    /// that expired since the last write.
    #[inline]
    pub fn add(&mut self, input: B::Input, now: Timestamp) {
        self.ring.add(input, now);
    }

    /// Moves the ring to `now` (resetting expired buckets) without adding.
    /// `add` calls it; a caller may too, for example to write a bucket through
    /// [`current_mut`](Self::current_mut).
    #[inline]
    pub fn advance(&mut self, now: Timestamp) {
        self.ring.advance(now);
    }

    /// The bucket for the last-written slot. Call [`advance`](Self::advance)
    /// first to make it the bucket for `now`.
    pub fn current_mut(&mut self) -> &mut B {
        self.ring.current_mut()
    }

    /// Calls `f` on every unexpired bucket, oldest first, and returns how many
    /// were visited. Never changes state.
    #[inline]
    pub fn visit(&self, now: Timestamp, f: impl FnMut(&B)) -> usize {
        self.ring.visit(&self.read, now, f)
    }

    /// Calls `f(slot_start, bucket)` on every unexpired bucket, the current
    /// one included whatever ignore-current says, newest first. Slot starts
    /// lie on the window's grid; for an [epoch-aligned](Self::epoch_aligned)
    /// window `slot_start / interval` is the slot's index on the grid every
    /// instance shares. Never changes state.
    pub fn visit_slots(&self, now: Timestamp, f: impl FnMut(Timestamp, &B)) {
        self.ring.visit_slots(&self.read, now, f);
    }

    /// This window's counts in a new window of shape `spec` whose grid
    /// passes through `origin`, created at `now` (a reload that changes the
    /// shape): every unexpired bucket, the current one included, is merged
    /// into the new bucket whose slot holds the old slot's start; buckets
    /// that start before the new window's oldest slot are dropped. So counts
    /// move at most one old interval back in time, and a shorter window
    /// keeps only its own span. The watch start is kept.
    #[must_use]
    pub fn rebucketed(&self, spec: WindowSpec, origin: Timestamp, now: Timestamp) -> Self {
        let at = now.max(self.ring.last_slot_start());
        let mut new = Self::with_origin(spec, origin, at);
        new.read.watched_from = self.read.watched_from;
        let n = spec.size as u64;
        let (last, interval) = (new.ring.last_slot_start().as_nanos(), spec.interval);
        self.visit_slots(at, |start, b| {
            let s = start.as_nanos().min(last);
            let j = (last - s).div_ceil(interval);
            if j < n {
                new.ring.at_age_mut(j as usize).merge(b);
            }
        });
        new
    }

    /// Merges every unexpired bucket into one, oldest first. Never changes
    /// state.
    #[must_use]
    pub fn reduce(&self, now: Timestamp) -> B {
        self.ring.reduce(&self.read, now)
    }

    /// The time the buckets visited by a reduce at `now` cover, the
    /// denominator of a windowed rate: the `size - 1` whole slots before the
    /// slot containing `now`, plus the elapsed part of that slot unless
    /// ignore-current is on, less any part of that before the window was
    /// [watched from](Self::watched_from). Slots that expired since the last
    /// write (and are skipped by the reduce) are empty, and still count as
    /// covered time.
    ///
    /// Zero for a single-bucket window with ignore-current, which never
    /// reports anything, a single bucket at the very start of its slot, or
    /// a window watched only since the start of the slot being filled, with
    /// ignore-current.
    #[must_use]
    pub fn covered(&self, now: Timestamp) -> Duration {
        self.ring.covered(&self.read, now)
    }

    /// [`covered`](Self::covered) as if the window had been watched for
    /// ever: the time its buckets span at `now`. For totals that others
    /// filled too (a fleet's shared window, summed over instances that may
    /// have been up far longer than this one).
    #[must_use]
    pub fn spanned(&self, now: Timestamp) -> Duration {
        self.ring.spanned(&self.read, now)
    }
}

impl<B: fmt::Debug> fmt::Debug for RollingWindow<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RollingWindow")
            .field("ring", &self.ring)
            .field("read", &self.read)
            .finish()
    }
}

/// A [`RollingWindow`] that several threads may add to and reduce.
///
/// One short `parking_lot::Mutex` around the ring: an `add` holds it for a
/// compare and an add, a `reduce` for one pass over the buckets. go-zero uses
/// an `RWMutex` for the same job; with critical sections this short a plain
/// mutex is cheaper (no reader count to bounce between cores). The `core`
/// benchmark `window/add_shared_2_threads` measures it against the unshared
/// window.
pub struct SharedWindow<B> {
    inner: Mutex<RollingWindow<B>>,
}

// === impl SharedWindow ===

impl<B: Bucket> SharedWindow<B> {
    /// Wraps a window.
    #[must_use]
    pub fn new(window: RollingWindow<B>) -> Self {
        SharedWindow {
            inner: Mutex::new(window),
        }
    }

    /// [`RollingWindow::add`] under the lock.
    #[inline]
    pub fn add(&self, input: B::Input, now: Timestamp) {
        self.inner.lock().add(input, now);
    }

    /// [`RollingWindow::reduce`] under the lock.
    #[must_use]
    pub fn reduce(&self, now: Timestamp) -> B {
        self.inner.lock().reduce(now)
    }

    /// Runs `f` with the window locked, for several operations at one `now`.
    pub fn with<R>(&self, f: impl FnOnce(&mut RollingWindow<B>) -> R) -> R {
        f(&mut self.inner.lock())
    }
}

#[cfg(test)]
mod tests;
