//! What one slot of a [`RollingWindow`](super::RollingWindow) holds.
//!
//! * [`SumCount`]: go-zero's bucket, a Sum and a Count; every add counts one.
//! * [`Tally`]: weighted sum and count, for statsd counters (16 bytes: what
//!   the counter families read, and nothing else); [`UnitTally`], the same
//!   in 12 bytes for a counter that has only seen unsampled lines.
//! * [`Summary`]: weighted sum and count plus min and max, for statsd samples
//!   that carry a sample-rate weight (gauges).
//! * [`Distribution`]: a [`Summary`] plus a mergeable quantile sketch, for
//!   timers, histograms and distributions.
//! * [`Distinct`]: a distinct-count sketch, for statsd sets.
//!
//! A bucket type implements [`Bucket`]: add, reset, and merge (used by
//! `reduce` to fold the unexpired buckets into one).

use crate::sketch::bins::Bin;
use crate::sketch::sparse::bin_of;
use crate::sketch::{DistinctCounter, QuantileSketch};

/// A bucket of a rolling window.
pub trait Bucket: Default {
    /// What one `add` brings in.
    type Input;
    /// Folds one input into the bucket.
    fn add(&mut self, input: Self::Input);
    /// Empties the bucket for reuse by a new slot. Keeps small allocations
    /// (refilling costs nothing) and gives large ones back (a bucket that
    /// was full once must not hold its peak while empty).
    fn reset(&mut self);
    /// Folds another bucket's contents into this one.
    fn merge(&mut self, other: &Self);
}

/// go-zero's bucket: the sum of the values added and how many adds there were.
/// `add(0.0)` and negative values count too.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SumCount {
    /// Sum of the values added.
    pub sum: f64,
    /// Number of adds.
    pub count: u64,
}

impl Bucket for SumCount {
    type Input = f64;
    #[inline]
    fn add(&mut self, v: f64) {
        self.sum += v;
        self.count += 1;
    }
    #[inline]
    fn reset(&mut self) {
        *self = SumCount::default();
    }
    #[inline]
    fn merge(&mut self, o: &Self) {
        self.sum += o.sum;
        self.count += o.count;
    }
}

/// One statsd sample: a value and the weight it stands for (`1 / sample_rate`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// The measured value.
    pub value: f64,
    /// How many real events this sample stands for (>= 1 for sampled data).
    pub weight: f64,
}

impl Observation {
    /// An unsampled observation (weight 1).
    #[must_use]
    pub const fn new(value: f64) -> Self {
        Observation { value, weight: 1.0 }
    }

    /// An observation sent at `sample_rate` (in (0, 1]); weight `1 / rate`.
    #[must_use]
    pub fn sampled(value: f64, sample_rate: f64) -> Self {
        Observation {
            value,
            weight: 1.0 / sample_rate,
        }
    }
}

/// Weighted sum and count: a counter's bucket.
///
/// `sum` adds `value * weight`, so an increment of 1 sent at `@0.1` adds
/// 10; `count` adds `weight` (go-zero's Count, scaled by the sample rate).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    /// Sum of `value * weight`.
    pub sum: f64,
    /// Sum of weights: estimated number of events.
    pub count: f64,
}

impl Bucket for Tally {
    type Input = Observation;
    #[inline]
    fn add(&mut self, o: Observation) {
        self.sum += o.value * o.weight;
        self.count += o.weight;
    }
    #[inline]
    fn reset(&mut self) {
        *self = Tally::default();
    }
    #[inline]
    fn merge(&mut self, o: &Self) {
        self.sum += o.sum;
        self.count += o.count;
    }
}

/// A counter's bucket while every sample it saw was unsampled (weight 1):
/// the sum of the increments and how many there were, in 12 bytes (a 4-byte
/// count, packed to 4-byte alignment; x86 and ARM read an f64 at any
/// alignment). A series moves its buckets to [`Tally`] before the first
/// sampled line, or before a bucket's count would pass `u32::MAX`: the
/// caller's job, since a bucket cannot change its own type.
#[derive(Clone, Copy, Default)]
#[repr(C, packed(4))]
pub struct UnitTally {
    sum: f64,
    count: u32,
}

impl UnitTally {
    /// A bucket holding `count` increments summing to `sum`.
    #[must_use]
    pub fn new(sum: f64, count: u32) -> Self {
        UnitTally { sum, count }
    }

    /// Sum of the increments.
    #[must_use]
    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// Number of increments.
    #[must_use]
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The same contents as a [`Tally`].
    #[must_use]
    pub fn widened(&self) -> Tally {
        Tally {
            sum: self.sum,
            count: f64::from(self.count),
        }
    }
}

impl std::fmt::Debug for UnitTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (sum, count) = (self.sum, self.count);
        f.debug_struct("UnitTally")
            .field("sum", &sum)
            .field("count", &count)
            .finish()
    }
}

impl Bucket for UnitTally {
    type Input = f64;
    #[inline]
    fn add(&mut self, v: f64) {
        self.sum += v;
        // The caller widens before the count could overflow.
        self.count = self.count.wrapping_add(1);
    }
    #[inline]
    fn reset(&mut self) {
        *self = UnitTally::default();
    }
    #[inline]
    fn merge(&mut self, o: &Self) {
        self.sum += o.sum;
        self.count = self.count.saturating_add(o.count);
    }
}

/// Weighted sum and count, with the min and max of the raw values.
///
/// `sum` adds `value * weight`, so a value of 1 sent at `@0.1` adds 10;
/// `count` adds `weight` (go-zero's Count, scaled by the sample rate). A
/// weight is at least 1 (`1 / sample_rate`, rate in (0, 1]), so the bucket
/// is empty exactly when `count` is 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Sum of `value * weight`.
    pub sum: f64,
    /// Sum of weights: estimated number of events.
    pub count: f64,
    /// Smallest value seen (+inf when empty).
    pub min: f64,
    /// Largest value seen (-inf when empty).
    pub max: f64,
}

impl Default for Summary {
    fn default() -> Self {
        Summary {
            sum: 0.0,
            count: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl Summary {
    /// True when nothing was added.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0.0
    }
}

impl Bucket for Summary {
    type Input = Observation;
    #[inline]
    fn add(&mut self, o: Observation) {
        self.sum += o.value * o.weight;
        self.count += o.weight;
        self.min = self.min.min(o.value);
        self.max = self.max.max(o.value);
    }
    #[inline]
    fn reset(&mut self) {
        *self = Summary::default();
    }
    #[inline]
    fn merge(&mut self, o: &Self) {
        self.sum += o.sum;
        self.count += o.count;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }
}

/// A [`Summary`] plus a quantile sketch (1% relative error).
///
/// Most buckets of most timers hold one distinct value (a timer sent once a
/// second, on 1 s buckets): such a bucket keeps no sketch at all, since its
/// summary already knows the value (its min, equal to its max). A second
/// distinct value builds the sketch, the first value entering it with its
/// whole weight (rounded once, where each later sample's weight is rounded
/// on its own). 40 bytes, and a boxed sketch only when needed.
#[derive(Clone, Debug, Default)]
pub struct Distribution {
    /// Sum, count, min, max.
    pub summary: Summary,
    /// Weighted quantile sketch of the values; `None` while the bucket holds
    /// at most one distinct value.
    sketch: Option<Box<QuantileSketch>>,
}

impl Distribution {
    /// The value at quantile `q` (in [0, 1]) within 1% relative error, or
    /// `None` when empty: the value itself when the bucket holds only one.
    #[must_use]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        match &self.sketch {
            Some(s) => s.quantile(q),
            None if self.summary.is_empty() || !(0.0..=1.0).contains(&q) => None,
            None => Some(self.summary.min),
        }
    }

    /// The bins of the bucket's values with their counts, in value order:
    /// the sketch's, or the one value's bin with the bucket's whole count
    /// (rounded as the sketch would, were it built now).
    #[must_use]
    pub fn bins(&self) -> Vec<(Bin, u64)> {
        match &self.sketch {
            Some(s) => s.bins(),
            None if self.summary.is_empty() => Vec::new(),
            None => vec![(
                bin_of(self.summary.min),
                QuantileSketch::whole(self.summary.count),
            )],
        }
    }

    /// Adds observations counted elsewhere: `count` of them summing to
    /// `sum` within `[min, max]` (a NaN bound is left out), the sketch
    /// taking `values` as `(value, weight)`. The sketch is built even when
    /// `values` is empty, so that a quantile is never read off the range.
    pub fn add_aggregate(
        &mut self,
        count: f64,
        sum: f64,
        min: f64,
        max: f64,
        values: &[(f64, f64)],
    ) {
        let sketch = self.sketch_mut();
        for &(v, w) in values {
            if w > 0.0 {
                sketch.add(v, w);
            }
        }
        let s = &mut self.summary;
        s.sum += sum;
        s.count += count;
        s.min = s.min.min(min);
        s.max = s.max.max(max);
    }

    /// Whether the bucket holds one distinct value (or none) and no sketch.
    fn single(&self) -> bool {
        self.sketch.is_none()
    }

    /// The sketch, built from the single value held so far if needed.
    fn sketch_mut(&mut self) -> &mut QuantileSketch {
        let summary = self.summary;
        self.sketch.get_or_insert_with(|| {
            let mut s = Box::<QuantileSketch>::default();
            if !summary.is_empty() {
                s.add(summary.min, summary.count);
            }
            s
        })
    }
}

impl Bucket for Distribution {
    type Input = Observation;
    #[inline]
    fn add(&mut self, o: Observation) {
        let same =
            self.summary.is_empty() || (self.summary.min == o.value && self.summary.max == o.value);
        if !(self.single() && same) {
            self.sketch_mut().add(o.value, o.weight);
        }
        self.summary.add(o);
    }
    fn reset(&mut self) {
        self.summary.reset();
        // A sketch is built again only if the next slot needs one.
        self.sketch = None;
    }
    fn merge(&mut self, o: &Self) {
        if o.summary.is_empty() {
            return;
        }
        let same = self.summary.is_empty()
            || (self.summary.min == o.summary.min
                && self.summary.max == o.summary.max
                && o.summary.min == o.summary.max);
        if !(self.single() && o.single() && same) {
            let other = match &o.sketch {
                Some(s) => std::borrow::Cow::Borrowed(&**s),
                None => {
                    let mut s = QuantileSketch::default();
                    s.add(o.summary.min, o.summary.count);
                    std::borrow::Cow::Owned(s)
                }
            };
            self.sketch_mut().merge(&other);
        }
        self.summary.merge(&o.summary);
    }
}

/// Distinct members seen, for statsd sets. Input: the member's 64-bit hash
/// (see [`crate::sketch::hash_member`]).
#[derive(Clone, Debug, Default)]
pub struct Distinct {
    /// Samples received.
    pub samples: u64,
    /// The distinct-count sketch.
    pub members: DistinctCounter,
}

impl Bucket for Distinct {
    type Input = u64;
    #[inline]
    fn add(&mut self, hash: u64) {
        self.samples += 1;
        self.members.insert_hash(hash);
    }
    fn reset(&mut self) {
        self.samples = 0;
        self.members.clear();
    }
    fn merge(&mut self, o: &Self) {
        self.samples += o.samples;
        self.members.merge(&o.members);
    }
}
