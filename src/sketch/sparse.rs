//! DDSketch with sparse stores: the same bins, index mapping and quantile
//! rule as `sketches-ddsketch` (whose [`Config`] maps values to bins), kept
//! as sorted `(bin, count)` pairs instead of a dense array.
//!
//! Why: the crate's stores are dense arrays grown 128 bins (1 KiB) at a
//! time over the range between the lowest and highest bin, so a window
//! bucket holding a few timer samples between 1 ms and 500 ms held ~2 KiB,
//! and a busy config.toml timer series (70 buckets) ~145 KiB. Sparse pairs
//! cost 16 bytes per bin actually used (measured: docs/performance.md).
//!
//! What stays the same, checked by a property test against the crate
//! (`quantile.rs`): a value's bin (`Config::key`), a bin's value
//! (`Config::value`), values within `min_possible` of 0 counted as zero,
//! and the quantile rule (rank `q·(count−1)`, negative bins from the most
//! negative, then zeros, then positive bins; `q = 0` and `q = 1` answer the
//! exact min and max). Like the crate, a store keeps at most
//! [`MAX_BINS`] bins: beyond that its lowest bins are folded into the next
//! one up, which keeps every upper quantile within the accuracy.

use std::sync::LazyLock;

use sketches_ddsketch::Config;

use super::bins::Bin;
use super::budget::{self, Coarsened};

/// The crate's default mapping: 1% relative accuracy, values below 1e-9
/// counted as zero.
static MAPPING: LazyLock<Config> = LazyLock::new(Config::defaults);

/// Most bins a store keeps (the crate's default `max_num_bins`).
pub const MAX_BINS: usize = 2048;

/// Most heap bytes one sketch holds: two stores of `MAX_BINS + 1` pairs.
pub const MAX_HEAP_BYTES: usize = 2 * (MAX_BINS + 1) * std::mem::size_of::<(i32, u64)>();

/// Heap bytes of one bin.
const BIN_BYTES: u64 = std::mem::size_of::<(i32, u64)>() as u64;

/// One side's bins: `(key, count)`, sorted by key, counts > 0. Its heap
/// (`capacity` bins) is charged to the sketch budget while it lives.
#[derive(Debug, Default, PartialEq)]
struct Store {
    bins: Vec<(i32, u64)>,
    count: u64,
}

impl Clone for Store {
    fn clone(&self) -> Self {
        let bins = self.bins.clone();
        budget::current().charge(bins.capacity() as u64 * BIN_BYTES);
        Store {
            bins,
            count: self.count,
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        budget::current().credit(self.heap_bytes());
    }
}

impl Store {
    fn heap_bytes(&self) -> u64 {
        self.bins.capacity() as u64 * BIN_BYTES
    }

    /// Adds `count` at `key`. Under `gated`, a new bin the budget has no
    /// room for is not made: the count goes to the nearest bin there is,
    /// and `false` says so when there is none (the store is empty).
    fn add(&mut self, key: i32, count: u64, gated: bool) -> bool {
        match self.bins.binary_search_by_key(&key, |b| b.0) {
            Ok(i) => self.bins[i].1 = self.bins[i].1.saturating_add(count),
            Err(i) => {
                // Grow by half, never past MAX_BINS + 1 pairs (Vec's own
                // doubling could leave 4096 allocated): at most 32 KiB.
                let len = self.bins.len();
                if len == self.bins.capacity() {
                    let more = (len / 2).clamp(4, (MAX_BINS + 1 - len).max(1));
                    let b = budget::current();
                    if gated && !b.try_charge(more as u64 * BIN_BYTES) {
                        b.count_coarsened(Coarsened::Quantile);
                        return self.add_to_nearest(i, count);
                    }
                    let before = self.heap_bytes();
                    self.bins.reserve_exact(more);
                    let charged = if gated { more as u64 * BIN_BYTES } else { 0 };
                    b.settle(before + charged, self.heap_bytes());
                }
                self.bins.insert(i, (key, count));
                self.collapse();
            }
        }
        self.count = self.count.saturating_add(count);
        true
    }

    /// Counts `count` in the bin next to where a new bin would go at `i`.
    fn add_to_nearest(&mut self, i: usize, count: u64) -> bool {
        if self.bins.is_empty() {
            return false;
        }
        let at = i.min(self.bins.len() - 1);
        self.bins[at].1 = self.bins[at].1.saturating_add(count);
        self.count = self.count.saturating_add(count);
        true
    }

    fn merge(&mut self, other: &Store) {
        if other.bins.is_empty() {
            return;
        }
        let (a, b) = (&self.bins, &other.bins);
        let mut out = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => {
                    out.push(a[i]);
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    out.push(b[j]);
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    out.push((a[i].0, a[i].1.saturating_add(b[j].1)));
                    i += 1;
                    j += 1;
                }
            }
        }
        out.extend_from_slice(&a[i..]);
        out.extend_from_slice(&b[j..]);
        let before = self.heap_bytes();
        self.bins = out;
        self.count = self.count.saturating_add(other.count);
        self.collapse();
        if self.bins.capacity() > MAX_BINS + 1 {
            self.bins.shrink_to_fit();
        }
        budget::current().settle(before, self.heap_bytes());
    }

    /// Folds the lowest bins into the next one up until at most
    /// [`MAX_BINS`] are left.
    fn collapse(&mut self) {
        if self.bins.len() <= MAX_BINS {
            return;
        }
        let extra = self.bins.len() - MAX_BINS;
        let folded = self.bins[..=extra]
            .iter()
            .fold(0u64, |n, b| n.saturating_add(b.1));
        self.bins[extra].1 = folded;
        self.bins.drain(..extra);
    }

    /// The key of the bin holding the value of rank `rank` (0-based, in key
    /// order), as the crate's `key_at_rank`.
    fn key_at_rank(&self, rank: u64) -> i32 {
        let mut n = 0u64;
        for &(key, count) in &self.bins {
            n = n.saturating_add(count);
            if n > rank {
                return key;
            }
        }
        self.bins.last().map_or(0, |b| b.0)
    }
}

/// The bin a finite value falls in.
#[must_use]
pub fn bin_of(v: f64) -> Bin {
    let m = &*MAPPING;
    if v > m.min_possible() {
        Bin::Positive(m.key(v))
    } else if v < -m.min_possible() {
        Bin::Negative(m.key(-v))
    } else {
        Bin::Zero
    }
}

/// A DDSketch whose stores hold only the bins in use.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseDDSketch {
    positive: Store,
    negative: Store,
    zero: u64,
    min: f64,
    max: f64,
}

impl Default for SparseDDSketch {
    fn default() -> Self {
        SparseDDSketch {
            positive: Store::default(),
            negative: Store::default(),
            zero: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl SparseDDSketch {
    /// Adds `v` (finite) `count` times, within the sketch budget
    /// ([`budget`](super::budget)): a value the budget has no room to give
    /// a bin of its own is counted in the nearest bin on its side (or as
    /// zero when its side has none), and counted as coarsened.
    pub fn add_with_count(&mut self, v: f64, count: u64) {
        self.add_gated(v, count, true);
    }

    /// Adds `v` as [`add_with_count`](Self::add_with_count) does, with
    /// `gated` false: whatever the budget (for reads, which give their
    /// bins back when done).
    pub(super) fn add_gated(&mut self, v: f64, count: u64, gated: bool) {
        if count == 0 || !v.is_finite() {
            return;
        }
        let m = &*MAPPING;
        let placed = if v > m.min_possible() {
            self.positive.add(m.key(v), count, gated)
        } else if v < -m.min_possible() {
            self.negative.add(m.key(-v), count, gated)
        } else {
            false
        };
        if !placed {
            self.zero = self.zero.saturating_add(count);
        }
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Values added, with their counts.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.positive
            .count
            .saturating_add(self.negative.count)
            .saturating_add(self.zero)
    }

    /// Folds `other` in.
    pub fn merge(&mut self, other: &SparseDDSketch) {
        self.positive.merge(&other.positive);
        self.negative.merge(&other.negative);
        self.zero = self.zero.saturating_add(other.zero);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The value at quantile `q` in [0, 1]: `None` when empty or `q` is out
    /// of range.
    #[must_use]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if !(0.0..=1.0).contains(&q) || self.count() == 0 {
            return None;
        }
        if q == 0.0 {
            return Some(self.min);
        }
        if q == 1.0 {
            return Some(self.max);
        }
        let m = &*MAPPING;
        let rank = (q * (self.count() as f64 - 1.0)) as u64;
        let neg = self.negative.count;
        Some(if rank < neg {
            -m.value(self.negative.key_at_rank(neg - rank - 1))
        } else if rank < neg.saturating_add(self.zero) {
            0.0
        } else {
            m.value(self.positive.key_at_rank(rank - neg - self.zero))
        })
    }

    /// Calls `f` with every bin in use and its count (zeros as
    /// [`Bin::Zero`]), in no set order.
    pub fn for_each_bin(&self, mut f: impl FnMut(Bin, u64)) {
        for &(k, c) in &self.negative.bins {
            f(Bin::Negative(k), c);
        }
        if self.zero > 0 {
            f(Bin::Zero, self.zero);
        }
        for &(k, c) in &self.positive.bins {
            f(Bin::Positive(k), c);
        }
    }

    /// The sketch holding `bins` (counts of 0 left out), with `min` and
    /// `max` as the values `q = 0` and `q = 1` answer: a sketch merged from
    /// bins read back from several instances. A read, outside the sketch
    /// budget; at most [`MAX_BINS`] bins a side are kept, as when merging.
    #[must_use]
    pub fn from_bins(bins: impl IntoIterator<Item = (Bin, u64)>, min: f64, max: f64) -> Self {
        let mut s = SparseDDSketch::default();
        for (bin, count) in bins {
            if count == 0 {
                continue;
            }
            match bin {
                Bin::Negative(k) => {
                    s.negative.add(k, count, false);
                }
                Bin::Zero => s.zero = s.zero.saturating_add(count),
                Bin::Positive(k) => {
                    s.positive.add(k, count, false);
                }
            }
        }
        s.min = min;
        s.max = max;
        s
    }

    /// Bins in use, both sides: 16 bytes each on the heap.
    #[must_use]
    pub fn bins(&self) -> usize {
        self.positive.bins.len() + self.negative.bins.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_keeps_at_most_max_bins_folding_the_lowest() {
        let mut s = SparseDDSketch::default();
        // 1.03^k spans more than MAX_BINS bins of 2%.
        for k in 0..3000 {
            s.add_with_count(1.03f64.powi(k), 1);
        }
        assert_eq!(s.bins(), MAX_BINS);
        assert!(s.positive.bins.capacity() <= MAX_BINS + 1);
        assert_eq!(s.count(), 3000);
        // Upper quantiles stay within 1%.
        let p99 = s.quantile(0.99).unwrap();
        let want = 1.03f64.powi(2969);
        assert!((p99 / want - 1.0).abs() < 0.011, "{p99} vs {want}");
        // The largest value added (`powi` may round differently when
        // optimised: to 1e-12).
        let max = s.quantile(1.0).unwrap();
        assert!((max / 1.03f64.powi(2999) - 1.0).abs() < 1e-12, "{max}");
    }

    #[test]
    fn merging_adds_bins_and_counts() {
        let (mut a, mut b) = (SparseDDSketch::default(), SparseDDSketch::default());
        for v in [1.0, 2.0, -3.0, 0.0] {
            a.add_with_count(v, 2);
        }
        for v in [2.0, 5.0, -3.0] {
            b.add_with_count(v, 1);
        }
        a.merge(&b);
        assert_eq!(a.count(), 11);
        assert_eq!(a.bins(), 4);
        assert_eq!((a.quantile(0.0), a.quantile(1.0)), (Some(-3.0), Some(5.0)));
    }
}
