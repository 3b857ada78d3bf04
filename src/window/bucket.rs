//! What one slot of a [`RollingWindow`](super::RollingWindow) holds.
//!
//! * [`SumCount`]: go-zero's bucket, a Sum and a Count; every add counts one.
//! * [`Tally`]: weighted sum and count, for statsd counters (16 bytes: what
//!   the counter families read, and nothing else).
//! * [`Summary`]: weighted sum and count plus min and max, for statsd samples
//!   that carry a sample-rate weight (gauges).
//! * [`Distribution`]: a [`Summary`] plus a mergeable quantile sketch, for
//!   timers, histograms and distributions.
//! * [`Distinct`]: a distinct-count sketch, for statsd sets.
//!
//! A bucket type implements [`Bucket`]: add, reset, and merge (used by
//! `reduce` to fold the unexpired buckets into one).

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
#[derive(Clone, Debug, Default)]
pub struct Distribution {
    /// Sum, count, min, max.
    pub summary: Summary,
    /// Weighted quantile sketch of the values.
    pub sketch: QuantileSketch,
}

impl Bucket for Distribution {
    type Input = Observation;
    #[inline]
    fn add(&mut self, o: Observation) {
        self.summary.add(o);
        self.sketch.add(o.value, o.weight);
    }
    fn reset(&mut self) {
        self.summary.reset();
        self.sketch.clear();
    }
    fn merge(&mut self, o: &Self) {
        self.summary.merge(&o.summary);
        self.sketch.merge(&o.sketch);
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
