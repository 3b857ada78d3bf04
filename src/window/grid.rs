//! [`Windows`]: all the windows of one series, one [`Ring`] per bucket
//! interval. Windows whose buckets have the same interval lie on the same
//! epoch-aligned grid, so they read one ring sized for the longest of them
//! (a `10s` window of 10 × 1 s is the newest 10 buckets of a `1m` ring of
//! 60 × 1 s), and a sample costs one bucket update per interval, whatever the
//! number of windows. Why a read of the newest `w` buckets of a larger ring
//! is exactly a `w`-bucket go-zero window: [`super::ring`].
//!
//! Windows on different intervals keep their own rings: deriving a coarse
//! window from a fine ring would read up to `coarse / fine` buckets per
//! coarse bucket on every reduce, and a fine window from a coarse ring
//! cannot be done at all.
//!
//! A [`Layout`] is the shape of a set of windows (which ring each reads, and
//! how); it is shared by every series on the same windows, so a series holds
//! only its rings.

use std::sync::Arc;
use std::time::Duration;

use super::bucket::Bucket;
use super::ring::{Read, Ring};
use super::WindowSpec;
use crate::clock::Timestamp;

/// Which ring each window reads, and how; built once per set of windows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Per ring: bucket interval in nanoseconds and number of buckets (the
    /// longest window on that interval).
    rings: Box<[(u64, usize)]>,
    /// Per window, in the order given: its ring, its read and its shape.
    windows: Box<[(usize, Read, WindowSpec)]>,
}

impl Layout {
    /// The layout of `windows`, each with the time it began to be watched:
    /// a read never counts time before it as covered, and skips slots that
    /// ended before it (a window added by a reload to a ring that already
    /// held data reads only what came after; see
    /// [`Read::skip_unwatched`]).
    #[must_use]
    pub fn new(windows: impl IntoIterator<Item = (WindowSpec, Timestamp)>) -> Layout {
        let mut rings: Vec<(u64, usize)> = Vec::new();
        let windows = windows
            .into_iter()
            .map(|(spec, watched)| {
                let r = match rings.iter().position(|(i, _)| *i == spec.interval) {
                    Some(r) => {
                        rings[r].1 = rings[r].1.max(spec.size);
                        r
                    }
                    None => {
                        rings.push((spec.interval, spec.size));
                        rings.len() - 1
                    }
                };
                let read = Read {
                    size: spec.size,
                    ignore_current: spec.ignore_current,
                    watched_from: Some(watched.as_nanos()),
                    skip_unwatched: true,
                };
                (r, read, spec)
            })
            .collect();
        Layout {
            rings: rings.into(),
            windows,
        }
    }

    /// Number of windows.
    #[must_use]
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    /// Whether there are no windows.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Number of rings (distinct bucket intervals).
    #[must_use]
    pub fn rings(&self) -> usize {
        self.rings.len()
    }

    /// Buckets a series on this layout holds: the sum of its rings' sizes.
    #[must_use]
    pub fn buckets(&self) -> usize {
        self.rings.iter().map(|(_, n)| n).sum()
    }

    /// The shape of window `i`.
    #[must_use]
    pub fn spec(&self, i: usize) -> Option<WindowSpec> {
        self.windows.get(i).map(|w| w.2)
    }
}

/// The rings of one series' windows on a [`Layout`].
#[derive(Clone)]
pub struct Windows<B> {
    layout: Arc<Layout>,
    rings: Box<[Ring<B>]>,
}

// === impl Windows ===

impl<B: Bucket> Windows<B> {
    /// Empty rings for `layout`, on the epoch-aligned grid, created at `now`.
    #[must_use]
    pub fn new(layout: Arc<Layout>, now: Timestamp) -> Self {
        let rings = layout
            .rings
            .iter()
            .map(|&(interval, size)| Ring::with_origin(size, interval, Timestamp::EPOCH, now))
            .collect();
        Windows { layout, rings }
    }

    /// The layout the rings follow.
    #[must_use]
    pub fn layout(&self) -> &Arc<Layout> {
        &self.layout
    }

    /// Number of windows.
    #[must_use]
    pub fn len(&self) -> usize {
        self.layout.len()
    }

    /// Whether there are no windows.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.layout.is_empty()
    }

    /// The shape of window `i`.
    #[must_use]
    pub fn spec(&self, i: usize) -> Option<WindowSpec> {
        self.layout.spec(i)
    }

    /// Adds `input` to the bucket for `now` of every ring: every window
    /// sees it.
    #[inline]
    pub fn add(&mut self, input: B::Input, now: Timestamp)
    where
        B::Input: Copy,
    {
        for r in self.rings.iter_mut() {
            r.add(input, now);
        }
    }

    /// The same windows with every bucket converted by `f` (a series whose
    /// buckets need a wider type from now on).
    #[must_use]
    pub fn map<C: Bucket>(&self, mut f: impl FnMut(&B) -> C) -> Windows<C> {
        Windows {
            layout: self.layout.clone(),
            rings: self.rings.iter().map(|r| r.map(&mut f)).collect(),
        }
    }

    /// The rings, for a caller that checks or writes the current buckets.
    pub fn rings_mut(&mut self) -> &mut [Ring<B>] {
        &mut self.rings
    }

    fn read(&self, i: usize) -> (&Ring<B>, &Read) {
        let (r, read, _) = &self.layout.windows[i];
        (&self.rings[*r], read)
    }

    /// Window `i` merged at `now` (go-zero's reduce). Never changes state.
    #[must_use]
    pub fn reduce(&self, i: usize, now: Timestamp) -> B {
        let (ring, read) = self.read(i);
        ring.reduce(read, now)
    }

    /// Calls `f` on every bucket window `i` sees at `now`, oldest first.
    pub fn visit(&self, i: usize, now: Timestamp, f: impl FnMut(&B)) -> usize {
        let (ring, read) = self.read(i);
        ring.visit(read, now, f)
    }

    /// The time window `i`'s reduce at `now` covers ([`Ring::covered`]).
    #[must_use]
    pub fn covered(&self, i: usize, now: Timestamp) -> Duration {
        let (ring, read) = self.read(i);
        ring.covered(read, now)
    }

    /// The time window `i`'s buckets span at `now`, watched or not.
    #[must_use]
    pub fn spanned(&self, i: usize, now: Timestamp) -> Duration {
        let (ring, read) = self.read(i);
        ring.spanned(read, now)
    }

    /// Calls `f(slot_start, bucket)` on window `i`'s unexpired buckets,
    /// newest first, the current one included ([`Ring::visit_slots`]).
    pub fn visit_slots(&self, i: usize, now: Timestamp, f: impl FnMut(Timestamp, &B)) {
        let (ring, read) = self.read(i);
        ring.visit_slots(read, now, f);
    }

    /// Moves the rings to `layout` (a reload): a ring whose interval the new
    /// layout still has keeps its newest buckets (resized to the longest
    /// window now on it); the others are new and empty. Windows the new
    /// layout watches from before `now` keep their history; windows it
    /// watches from later read nothing older.
    pub fn relayout(&mut self, layout: Arc<Layout>, now: Timestamp) {
        let mut old: Vec<Option<Ring<B>>> = std::mem::take(&mut self.rings)
            .into_vec()
            .into_iter()
            .map(Some)
            .collect();
        self.rings = layout
            .rings
            .iter()
            .map(|&(interval, size)| {
                match old
                    .iter_mut()
                    .find(|r| r.as_ref().is_some_and(|r| r.interval_nanos() == interval))
                    .and_then(Option::take)
                {
                    Some(r) => r.resized(size),
                    None => Ring::with_origin(size, interval, Timestamp::EPOCH, now),
                }
            })
            .collect();
        self.layout = layout;
    }
}

impl<B: std::fmt::Debug> std::fmt::Debug for Windows<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Windows")
            .field("layout", &self.layout)
            .field("rings", &self.rings)
            .finish()
    }
}
