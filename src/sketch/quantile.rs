//! Weighted DDSketch, inline while it holds a few values.

use std::fmt;

use super::bins::{normalize, Bin};
use super::budget::{self, Coarsened};
use super::sparse::{bin_of, SparseDDSketch};

/// A DDSketch with 1% relative accuracy: every quantile it returns is within
/// 1% of a value whose rank is the requested one.
///
/// Weights (statsd's `1 / sample_rate`) are rounded to whole counts, at least
/// 1, because the sketch keeps integer bins: a sample sent at `@0.3` counts 3
/// times, not 3.33. Sums and counts are kept exactly elsewhere
/// ([`Summary`](crate::window::bucket::Summary)); only quantile ranks see the
/// rounding.
///
/// **Memory.** The crate's DDSketch stores allocate bins 128 at a time over
/// the whole range in use (1 KiB for the first value), so a window bucket
/// holding one timer sample cost over 1 KiB and a config.toml timer series
/// (70 buckets) ~89 KiB. Up to [`FEW`](Self::FEW) distinct values are
/// therefore kept inline, as (value, count) pairs, and a sketch is built only
/// at a fifth distinct value; the sketch is a [`SparseDDSketch`]: the same
/// bins and quantile rule, holding only the bins in use (16 bytes each). The
/// answers are those of the crate's DDSketch fed the same values (a
/// property test checks it): bins depend only on the values and counts
/// given, not on their order or on how sketches were merged.
#[derive(Clone, Default)]
pub struct QuantileSketch {
    repr: Repr,
}

#[derive(Clone, Default)]
enum Repr {
    #[default]
    Empty,
    /// `len` distinct values with their counts.
    Few {
        values: [(f64, u64); QuantileSketch::FEW],
        len: u8,
    },
    Full(Charged),
}

/// A built sketch, its box charged to the sketch budget while it lives
/// (its bins charge themselves).
struct Charged(Box<SparseDDSketch>);

/// The heap bytes of a built sketch's box.
const BOX_BYTES: u64 = std::mem::size_of::<SparseDDSketch>() as u64;

impl Clone for Charged {
    fn clone(&self) -> Self {
        budget::current().charge(BOX_BYTES);
        Charged(self.0.clone())
    }
}

impl Drop for Charged {
    fn drop(&mut self) {
        budget::current().credit(BOX_BYTES);
    }
}

impl QuantileSketch {
    /// Relative accuracy of the quantiles.
    pub const RELATIVE_ACCURACY: f64 = 0.01;

    /// Distinct values kept inline before a DDSketch is built.
    pub const FEW: usize = 4;

    /// Largest count one sample may stand for.
    const MAX_WEIGHT: f64 = u32::MAX as f64;

    /// An empty sketch. Allocates nothing until a fifth distinct value.
    #[must_use]
    pub fn new() -> Self {
        QuantileSketch::default()
    }

    /// Adds `value`, standing for `weight` events. Non-finite values are
    /// ignored (the parser rejects them before they get here).
    #[inline]
    pub fn add(&mut self, value: f64, weight: f64) {
        if !value.is_finite() {
            return;
        }
        self.add_count(value, Self::whole(weight), true);
    }

    /// The whole count a weight stands for in the sketch: rounded, at
    /// least 1 and at most `u32::MAX`.
    #[must_use]
    pub fn whole(weight: f64) -> u64 {
        if weight.is_finite() {
            weight.round().clamp(1.0, Self::MAX_WEIGHT) as u64
        } else {
            1
        }
    }

    /// Adds `count` at `value`; under `gated` (ingest), within the sketch
    /// budget: a fifth distinct value with no room for a sketch is counted
    /// with the nearest of the four kept inline.
    fn add_count(&mut self, value: f64, count: u64, gated: bool) {
        match &mut self.repr {
            Repr::Empty => {
                let mut values = [(0.0, 0); Self::FEW];
                values[0] = (value, count);
                self.repr = Repr::Few { values, len: 1 };
            }
            Repr::Few { values, len } => {
                let n = usize::from(*len);
                if let Some(slot) = values[..n].iter_mut().find(|(v, _)| *v == value) {
                    slot.1 = slot.1.saturating_add(count);
                } else if n < Self::FEW {
                    values[n] = (value, count);
                    *len += 1;
                } else if gated && !budget::current().try_charge(BOX_BYTES) {
                    budget::current().count_coarsened(Coarsened::Quantile);
                    let near = values[..n]
                        .iter_mut()
                        .min_by(|a, b| (a.0 - value).abs().total_cmp(&(b.0 - value).abs()));
                    if let Some(slot) = near {
                        slot.1 = slot.1.saturating_add(count);
                    }
                } else {
                    if !gated {
                        budget::current().charge(BOX_BYTES);
                    }
                    let mut full = Self::sketch_of(&values[..n], gated);
                    full.add_gated(value, count, gated);
                    self.repr = Repr::Full(Charged(full));
                }
            }
            Repr::Full(d) => d.0.add_gated(value, count, gated),
        }
    }

    fn sketch_of(values: &[(f64, u64)], gated: bool) -> Box<SparseDDSketch> {
        let mut d = Box::<SparseDDSketch>::default();
        for &(v, c) in values {
            d.add_gated(v, c, gated);
        }
        d
    }

    /// The value at quantile `q` in [0, 1], or `None` when empty or `q` is out
    /// of range.
    #[must_use]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        match &self.repr {
            Repr::Empty => None,
            Repr::Few { values, len } => {
                Self::sketch_of(&values[..usize::from(*len)], false).quantile(q)
            }
            Repr::Full(d) => d.0.quantile(q),
        }
    }

    /// Number of (weighted) values in the sketch.
    #[must_use]
    pub fn count(&self) -> u64 {
        match &self.repr {
            Repr::Empty => 0,
            Repr::Few { values, len } => values[..usize::from(*len)]
                .iter()
                .fold(0u64, |n, (_, c)| n.saturating_add(*c)),
            Repr::Full(d) => d.0.count(),
        }
    }

    /// The sketch's bins with their counts, sorted in value order (see
    /// [`bins`](super::bins)): what a fleet sync sends.
    #[must_use]
    pub fn bins(&self) -> Vec<(Bin, u64)> {
        let mut out = Vec::new();
        match &self.repr {
            Repr::Empty => {}
            Repr::Few { values, len } => {
                for &(v, c) in &values[..usize::from(*len)] {
                    out.push((bin_of(v), c));
                }
            }
            Repr::Full(d) => d.0.for_each_bin(|b, c| out.push((b, c))),
        }
        normalize(&mut out);
        out
    }

    /// Whether a sketch has been built (more than [`FEW`](Self::FEW)
    /// distinct values were added).
    #[cfg(test)]
    #[must_use]
    pub fn is_full(&self) -> bool {
        matches!(self.repr, Repr::Full(_))
    }

    /// Folds `other` into this sketch (a read: never coarsened, what it
    /// grows charged to the budget).
    pub fn merge(&mut self, other: &QuantileSketch) {
        match &other.repr {
            Repr::Empty => {}
            Repr::Few { values, len } => {
                for &(v, c) in &values[..usize::from(*len)] {
                    self.add_count(v, c, false);
                }
            }
            Repr::Full(theirs) => match &mut self.repr {
                Repr::Full(ours) => ours.0.merge(&theirs.0),
                _ => {
                    let mut full = theirs.clone();
                    if let Repr::Few { values, len } = &self.repr {
                        for &(v, c) in &values[..usize::from(*len)] {
                            full.0.add_gated(v, c, false);
                        }
                    }
                    self.repr = Repr::Full(full);
                }
            },
        }
    }

    /// Empties the sketch, giving back its bins if it had any.
    pub fn clear(&mut self) {
        self.repr = Repr::Empty;
    }
}

impl fmt::Debug for QuantileSketch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuantileSketch")
            .field("count", &self.count())
            .field("p50", &self.quantile(0.5))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sketches_ddsketch::{Config, DDSketch};

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

    /// The sketch built the plain way: one DDSketch fed every value.
    fn direct(values: &[(f64, u64)]) -> DDSketch {
        let mut d = DDSketch::new(Config::defaults());
        for &(v, c) in values {
            d.add_with_count(v, c);
        }
        d
    }

    #[test]
    fn a_few_values_stay_inline_and_a_fifth_builds_the_sketch() {
        let mut s = QuantileSketch::new();
        for v in [1.0, 2.0, 3.0, 4.0, 4.0, 1.0] {
            s.add(v, 1.0);
        }
        assert!(!s.is_full());
        assert_eq!(s.count(), 6);
        s.add(5.0, 1.0);
        assert!(s.is_full());
        assert_eq!(s.count(), 7);
        s.clear();
        assert!(!s.is_full());
        assert_eq!(s.count(), 0);
        assert_eq!(std::mem::size_of::<QuantileSketch>(), 72);
    }

    proptest::proptest! {
        /// Whatever mix of inline and full forms a sequence of adds and
        /// merges goes through, the quantiles are those of one DDSketch
        /// fed every value.
        #[test]
        fn quantiles_are_those_of_one_ddsketch_fed_every_value(
            parts in proptest::collection::vec(
                proptest::collection::vec((0u32..4000, 1u64..4), 0..60), 1..6),
        ) {
            // Repeated small values (the inline form), and values spread
            // over 1e-3..1e6 on both sides of 0 (full sketches, ~1000 bins
            // a side), and 0.
            let value = |k: u32| match k {
                0 => 0.0,
                1..=12 => f64::from(k).powi(3) * if k % 3 == 0 { -1.0 } else { 1.0 },
                _ => {
                    let v = 1e-3 * 1.005f64.powi(k as i32);
                    if k % 2 == 0 { -v } else { v }
                }
            };
            let mut merged = QuantileSketch::new();
            let mut all = Vec::new();
            for part in &parts {
                let mut s = QuantileSketch::new();
                for &(k, c) in part {
                    s.add(value(k), c as f64);
                    all.push((value(k), c));
                }
                merged.merge(&s);
            }
            let want = direct(&all);
            proptest::prop_assert_eq!(merged.count(), want.count() as u64);
            for q in [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0] {
                proptest::prop_assert_eq!(merged.quantile(q), want.quantile(q).ok().flatten(), "q {}", q);
            }
        }
    }
}
