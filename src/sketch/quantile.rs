//! Weighted DDSketch wrapper.

use std::fmt;

use sketches_ddsketch::{Config, DDSketch};

/// A DDSketch with 1% relative accuracy: every quantile it returns is within
/// 1% of a value whose rank is the requested one.
///
/// Weights (statsd's `1 / sample_rate`) are rounded to whole counts, at least
/// 1, because the sketch keeps integer bins: a sample sent at `@0.3` counts 3
/// times, not 3.33. Sums and counts are kept exactly elsewhere
/// ([`Summary`](crate::window::bucket::Summary)); only quantile ranks see the
/// rounding.
#[derive(Clone, Default)]
pub struct QuantileSketch {
    inner: DDSketch,
}

impl QuantileSketch {
    /// Relative accuracy of the quantiles.
    pub const RELATIVE_ACCURACY: f64 = 0.01;

    /// Largest count one sample may stand for.
    const MAX_WEIGHT: f64 = u32::MAX as f64;

    /// An empty sketch. Allocates nothing until the first add.
    #[must_use]
    pub fn new() -> Self {
        QuantileSketch {
            inner: DDSketch::new(Config::defaults()),
        }
    }

    /// Adds `value`, standing for `weight` events. Non-finite values are
    /// ignored (the parser rejects them before they get here).
    #[inline]
    pub fn add(&mut self, value: f64, weight: f64) {
        if !value.is_finite() {
            return;
        }
        let count = if weight.is_finite() {
            weight.round().clamp(1.0, Self::MAX_WEIGHT) as u64
        } else {
            1
        };
        self.inner.add_with_count(value, count);
    }

    /// The value at quantile `q` in [0, 1], or `None` when empty or `q` is out
    /// of range.
    #[must_use]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        self.inner.quantile(q).ok().flatten()
    }

    /// Number of (weighted) values in the sketch.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.inner.count() as u64
    }

    /// Folds `other` into this sketch.
    pub fn merge(&mut self, other: &QuantileSketch) {
        if other.inner.count() == 0 {
            return;
        }
        // Both sides use Config::defaults(), so merge cannot fail on a
        // configuration mismatch; keep the sketch unchanged if it ever did.
        let _ = self.inner.merge(&other.inner);
    }

    /// Empties the sketch.
    pub fn clear(&mut self) {
        if self.inner.count() != 0 {
            self.inner = DDSketch::new(Config::defaults());
        }
    }
}

impl fmt::Debug for QuantileSketch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuantileSketch")
            .field("count", &self.inner.count())
            .field("p50", &self.quantile(0.5))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_rounded_counts_and_nonfinite_values_are_ignored() {
        let mut s = QuantileSketch::new();
        s.add(1.0, 10.0);
        s.add(100.0, 0.3);
        s.add(f64::NAN, 1.0);
        s.add(f64::INFINITY, 1.0);
        assert_eq!(s.count(), 11);
        let p50 = s.quantile(0.5).unwrap();
        assert!((p50 - 1.0).abs() <= 0.01 + 1e-9, "p50 {p50}");
        assert_eq!(s.quantile(1.5), None);
    }

    #[test]
    fn merge_and_clear() {
        let (mut a, mut b) = (QuantileSketch::new(), QuantileSketch::new());
        a.add(-5.0, 1.0);
        b.add(5.0, 1.0);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        let lo = a.quantile(0.0).unwrap();
        assert!((lo + 5.0).abs() <= 0.05, "min {lo}");
        a.clear();
        assert_eq!(a.count(), 0);
        assert_eq!(a.quantile(0.5), None);
    }
}
