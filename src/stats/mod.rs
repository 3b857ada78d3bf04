//! Windowed statistics: what a reduce of a [`RollingWindow`] means in numbers.
//!
//! [`WindowStats::of`] reduces a window once at `now` and reports:
//!
//! * `sum` and `count`: go-zero's Sum and Count over the unexpired buckets
//!   (for statsd data, weighted by `1 / sample_rate`);
//! * [`avg`](WindowStats::avg) = sum / count;
//! * [`rate`](WindowStats::rate) = count per second and
//!   [`sum_rate`](WindowStats::sum_rate) = sum per second. The denominator is
//!   [`covered`](WindowStats::covered): the time the reduced buckets actually
//!   cover, i.e. `size - 1` whole slots plus the elapsed part of the current
//!   slot, or `size - 1` whole slots with ignore-current
//!   ([`RollingWindow::covered`]). Dividing by the full window length instead
//!   would under-report by up to one bucket's share while the current bucket
//!   fills; dividing by the visited buckets would make the rate jump when a
//!   slot is skipped. Time before the window was
//!   [watched from](RollingWindow::watched_from) (the daemon's start, or the
//!   reload that created the window) is not covered: a window younger than
//!   its length reads the rate of what it saw, not that rate diluted over
//!   time nobody watched. A series born later than that reads, over the
//!   time before its birth, as having had nothing (as in go-zero).
//! * `min` and `max` of the raw values, when the bucket type keeps them;
//! * quantiles from the merged DDSketch of a [`Distribution`] window
//!   ([`quantile`](WindowStats::quantile), 1% relative error);
//! * distinct members of a [`Distinct`] window ([`WindowStats::distinct`]).
//!
//! All of it is pure: a window and a `now` in, plain numbers out.

use std::time::Duration;

use crate::clock::Timestamp;
use crate::window::bucket::{Bucket, Distinct, Distribution, SumCount, Summary, Tally, UnitTally};
use crate::window::{RollingWindow, Windows};

/// A bucket whose contents can be read as sum, count and (maybe) min/max.
pub trait Totals {
    /// Weighted sum of values.
    fn sum(&self) -> f64;
    /// Weighted number of events.
    fn count(&self) -> f64;
    /// Smallest value, if the bucket keeps it and is not empty.
    fn min(&self) -> Option<f64> {
        None
    }
    /// Largest value, if the bucket keeps it and is not empty.
    fn max(&self) -> Option<f64> {
        None
    }
    /// The value at quantile `q` within 1% relative error, if the bucket
    /// keeps a sketch and is not empty.
    fn quantile(&self, _q: f64) -> Option<f64> {
        None
    }
}

impl Totals for SumCount {
    fn sum(&self) -> f64 {
        self.sum
    }
    fn count(&self) -> f64 {
        self.count as f64
    }
}

impl Totals for UnitTally {
    fn sum(&self) -> f64 {
        UnitTally::sum(self)
    }
    fn count(&self) -> f64 {
        f64::from(UnitTally::count(self))
    }
}

impl Totals for Tally {
    fn sum(&self) -> f64 {
        self.sum
    }
    fn count(&self) -> f64 {
        self.count
    }
}

impl Totals for Summary {
    fn sum(&self) -> f64 {
        self.sum
    }
    fn count(&self) -> f64 {
        self.count
    }
    fn min(&self) -> Option<f64> {
        (!self.is_empty()).then_some(self.min)
    }
    fn max(&self) -> Option<f64> {
        (!self.is_empty()).then_some(self.max)
    }
}

impl Totals for Distribution {
    fn sum(&self) -> f64 {
        self.summary.sum
    }
    fn count(&self) -> f64 {
        self.summary.count
    }
    fn min(&self) -> Option<f64> {
        Totals::min(&self.summary)
    }
    fn max(&self) -> Option<f64> {
        Totals::max(&self.summary)
    }
    fn quantile(&self, q: f64) -> Option<f64> {
        Distribution::quantile(self, q)
    }
}

/// The statistics of one window at one instant, from a single reduce.
#[derive(Clone, Debug)]
pub struct WindowStats<B> {
    /// The merged bucket (sum, count, sketch...).
    pub merged: B,
    /// The time the merged buckets cover; the denominator of the rates.
    pub covered: Duration,
}

impl<B: Bucket + Totals> WindowStats<B> {
    /// Reduces `window` at `now` and keeps what the statistics need.
    #[must_use]
    pub fn of(window: &RollingWindow<B>, now: Timestamp) -> Self {
        WindowStats {
            merged: window.reduce(now),
            covered: window.covered(now),
        }
    }

    /// Reduces window `i` of a series' [`Windows`] at `now`.
    #[must_use]
    pub fn of_shared(windows: &Windows<B>, i: usize, now: Timestamp) -> Self {
        WindowStats {
            merged: windows.reduce(i, now),
            covered: windows.covered(i, now),
        }
    }

    /// Weighted sum (go-zero's Sum).
    #[must_use]
    pub fn sum(&self) -> f64 {
        self.merged.sum()
    }

    /// Weighted count (go-zero's Count).
    #[must_use]
    pub fn count(&self) -> f64 {
        self.merged.count()
    }

    /// `sum / count`, or `None` for an empty window.
    #[must_use]
    pub fn avg(&self) -> Option<f64> {
        let c = self.count();
        (c > 0.0).then(|| self.sum() / c)
    }

    /// Events per second: `count / covered`.
    #[must_use]
    pub fn rate(&self) -> f64 {
        per_second(self.count(), self.covered)
    }

    /// Sum per second: `sum / covered` (a counter's increments per second).
    #[must_use]
    pub fn sum_rate(&self) -> f64 {
        per_second(self.sum(), self.covered)
    }

    /// Smallest value in the window, if the bucket type keeps it.
    #[must_use]
    pub fn min(&self) -> Option<f64> {
        self.merged.min()
    }

    /// Largest value in the window, if the bucket type keeps it.
    #[must_use]
    pub fn max(&self) -> Option<f64> {
        self.merged.max()
    }

    /// The value at quantile `q` (in [0, 1]) within 1% relative error, if the
    /// bucket type keeps a sketch and the window is not empty.
    #[must_use]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        Totals::quantile(&self.merged, q)
    }
}

impl WindowStats<Distinct> {
    /// Distinct members in a set window (exact up to
    /// [`DistinctCounter::EXACT_LIMIT`](crate::sketch::DistinctCounter::EXACT_LIMIT)).
    #[must_use]
    pub fn distinct(window: &RollingWindow<Distinct>, now: Timestamp) -> u64 {
        window.reduce(now).members.count()
    }
}

/// `total / covered` in units per second; 0 when nothing is covered.
#[must_use]
pub fn per_second(total: f64, covered: Duration) -> f64 {
    let secs = covered.as_secs_f64();
    if secs > 0.0 {
        total / secs
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests;
