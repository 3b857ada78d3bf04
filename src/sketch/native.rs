//! Prometheus native histograms (sparse exponential buckets), kept per
//! series beside the classic buckets of statsd timers, histograms and
//! distributions, and written over protobuf.
//!
//! # Buckets
//!
//! A native histogram has a *schema* `s` in [`MIN_SCHEMA`]`..=`[`MAX_SCHEMA`].
//! Its buckets grow by the factor `2^(2^-s)`: bucket `i` holds the values `v`
//! with `2^((i-1)/2^s) < v <= 2^(i/2^s)`, so `1.0` is in bucket 0, `2.0` in
//! bucket `2^s` (for `s >= 0`) and every power of two is the upper bound of a
//! bucket at every schema. A negative value goes into the negative bucket of
//! the same index as its absolute value. A value whose absolute value is at
//! most [`ZERO_THRESHOLD`] (2^-128, itself a bucket bound at every schema)
//! goes into the single zero bucket; so do zeros and subnormals.
//!
//! The index is found the way Prometheus' own Go client finds it
//! (client_golang `prometheus/histogram.go`, `histogramCounts.observe`), so
//! the two agree to the last bit, bounds included:
//!
//! * split `|v|` into `frac · 2^exp` with `frac` in `[0.5, 1)` (C's `frexp`);
//! * schema > 0: the index is `j + (exp - 1) · 2^s`, where `j` is the first
//!   position in the schema's table of bounds `b_j ≈ 2^(j/2^s - 1)`,
//!   `j = 0..2^s`, whose bound is at least `frac` (a binary search);
//! * schema <= 0: the index at schema 0 is `exp`, less one when `frac` is
//!   exactly 0.5 (a power of two is the top of its bucket); at a schema
//!   `s < 0` it is that index divided by `2^-s`, rounded up (an arithmetic
//!   shift right of `index + 2^-s - 1`).
//!
//! The table of bounds is not `2^(j/2^s - 1)` correctly rounded: Prometheus'
//! clients and server (client_golang `nativeHistogramBounds`, prometheus
//! `model/histogram/generic.go` `exponentialBounds`) share a table made by
//! a recursion, which we repeat at compile time (`build_bounds`):
//! `b_0 = 0.5` at every schema; at schema `s` the even positions are the
//! bounds of schema `s - 1` (`b_2k = b'_k`) and each odd position is its
//! left neighbour times the growth factor (`b_2k+1 = b_2k · F_s`), where
//! `F_s` is `2^(2^-s)` as Go's `math.Exp2` gives it — correctly rounded
//! except `F_1`, one unit in the last place below `√2`. The result is
//! bit-for-bit client_golang's table (a test checks a digest of all 511
//! bounds) and lies within 4 units in the last place of `2^(j/2^s - 1)`.
//! A correctly rounded table would put some values a few ulps from a bound
//! into a different bucket from Prometheus (`√2` as an `f64`, for one).
//!
//! Values too large for the schema's last finite bucket cannot occur (the
//! largest finite `f64` has an index, `1024 · 2^s` at `s >= 0`); infinities,
//! which callers should not pass, go one bucket above it, as in
//! client_golang. NaN observations are ignored (client_golang leaves them
//! out of the buckets too).
//!
//! # Counts and weights
//!
//! statsd samples carry a weight (`1/sample_rate`, possibly fractional such
//! as 3.333), so bucket counts are `f64` sums of weights. The wire wants
//! integers; [`NativeHistogram::integer_counts`] makes them (see there) so
//! that `zero_count + Σ buckets` is exactly the series' sample count, which
//! Prometheus requires when the sum is not NaN (`model/histogram`
//! `Histogram.Validate`).
//!
//! # Bucket limit
//!
//! A histogram keeps at most `max_buckets` populated buckets, negative and
//! positive together (the zero bucket does not count), as client_golang's
//! `NativeHistogramMaxBucketNumber`. When a new bucket would make more, the
//! schema is lowered by one, merging each pair of neighbours (bucket `i`
//! becomes `⌈i/2⌉`, i.e. `(i + 1) >> 1` — client_golang's
//! `doubleBucketWidth`), and again until the buckets fit or the schema is
//! [`MIN_SCHEMA`]. At [`MIN_SCHEMA`] the limit is exceeded rather than
//! anything dropped or reset; there a bucket spans a factor of 65536, so at
//! most 72 buckets a side can be populated (indices -7..=64). Counts are
//! never reset (client_golang can also reset or widen the zero bucket; we do
//! neither). Because the number of populated buckets only grows with more
//! values and only shrinks with a lower schema, the schema reached is the
//! highest one, up to the starting schema, at which all values so far fit
//! (or [`MIN_SCHEMA`]), whatever their order — so merging two histograms
//! (a test's `merge_from`) agrees with observing everything in one.
//!
//! # Memory
//!
//! One timer series holds one of these, and there are hundreds of thousands
//! of series, so the inline size is 40 bytes (a `Vec`, the zero count, the
//! limit and the schema) and the heap holds 16 bytes per populated bucket:
//! one vector of `(sign, index, count)` sorted with the negative buckets
//! first. A dense run per sign (`offset` + `Vec<f64>`, 8 bytes a bucket)
//! would be half that when buckets are contiguous, but one outlier far from
//! the rest widens the run by up to ~300,000 buckets at schema 8 (2.3 MB), and
//! two runs cost 24 more inline bytes when a series has both signs; sorted
//! pairs are bounded by the bucket limit whatever the values. The vector
//! grows by half (at least 4) and never past `max_buckets + 1` entries while
//! lowering the schema keeps it within the limit, so with the usual limit of
//! 160 a series holds at most 2,576 heap bytes.
//!
//! # Cost of an observation
//!
//! A `frexp` by bit operations; a binary search of at most 256 bounds (8
//! comparisons, schema 8; 3 at schema 3) or a shift (schema <= 0); then the
//! bucket: first the slot it would have if the populated buckets were one
//! contiguous run from the first (they usually are, for timers), else a
//! binary search. Adding to an existing bucket allocates nothing. A new
//! bucket shifts the later ones (at most `max_buckets` × 16 bytes),
//! sometimes grows the vector, and past the limit merges pairs in one pass.
//! Measured in a scratch crate (release, one core of this 2-core machine,
//! log-uniform values over 0.1–2000 ms, weight 1): about 8 ns an
//! observation at schema 3 with 115 contiguous buckets, 5 ns at schema 0;
//! the binary search alone made it 48 ns.

/// The highest resolution: buckets grow by `2^(2^-8)` ≈ 1.0027.
pub const MAX_SCHEMA: i8 = 8;

/// The lowest resolution: buckets grow by `2^16` = 65536.
pub const MIN_SCHEMA: i8 = -4;

/// Values whose absolute value is at most this, 2^-128, count in the zero
/// bucket (client_golang's `DefNativeHistogramZeroThreshold`). It is a bucket
/// bound at every schema.
pub const ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;

/// The schema for a bucket factor, by client_golang's rule (`pickSchema`):
/// the largest schema whose growth factor `2^(2^-s)` does not exceed
/// `factor`, computed as `-floor(log2(log2(factor)))` and clamped to
/// [`MIN_SCHEMA`]`..=`[`MAX_SCHEMA`] (a factor below 1.0027 gives 8, one of
/// 65536 or more gives -4). `None` when `factor <= 1` or NaN: native
/// histograms are off.
#[must_use]
pub fn schema_for_factor(factor: f64) -> Option<i8> {
    if factor.is_nan() || factor <= 1.0 {
        return None;
    }
    let floor = factor.log2().log2().floor();
    Some(if floor <= -f64::from(MAX_SCHEMA) {
        MAX_SCHEMA
    } else if floor >= -f64::from(MIN_SCHEMA) {
        MIN_SCHEMA
    } else {
        // -8 < floor < 4, an integer.
        -(floor as i8)
    })
}

/// `2^(2^-s)` for s = 1..=8 as Go's `math.Exp2` computes it (index 0
/// unused): all correctly rounded but `F_1`, one ulp below `√2`. Given as
/// bits so no platform's `exp2` is involved.
const GROWTH: [f64; 9] = [
    2.0,
    f64::from_bits(0x3FF6_A09E_667F_3BCC),
    f64::from_bits(0x3FF3_06FE_0A31_B715),
    f64::from_bits(0x3FF1_72B8_3C7D_517B),
    f64::from_bits(0x3FF0_B558_6CF9_890F),
    f64::from_bits(0x3FF0_59B0_D315_8574),
    f64::from_bits(0x3FF0_2C9A_3E77_8061),
    f64::from_bits(0x3FF0_163D_A9FB_3335),
    f64::from_bits(0x3FF0_0B1A_FA5A_BCBF),
];

/// All schemas' bounds in one array: schema `s` (0..=8) at `[2^s, 2^(s+1))`.
/// Index 0 is unused.
static BOUNDS: [f64; 512] = build_bounds();

/// The recursion described in the module docs, run by the compiler (whose
/// floating-point multiplication is IEEE's, rounded to nearest).
const fn build_bounds() -> [f64; 512] {
    let mut table = [0.0; 512];
    table[1] = 0.5;
    let mut s = 1;
    while s <= 8 {
        let (this, prev) = (1usize << s, 1usize << (s - 1));
        let mut j = 0;
        while j < this {
            table[this + j] = if j % 2 == 0 {
                table[prev + j / 2]
            } else {
                table[this + j - 1] * GROWTH[s]
            };
            j += 1;
        }
        s += 1;
    }
    table
}

/// The bounds in `[0.5, 1)` of a schema in 1..=8: `2^s` of them, the `j`th
/// about `2^(j/2^s - 1)`.
fn bounds(schema: i8) -> &'static [f64] {
    let n = 1usize << schema;
    &BOUNDS[n..2 * n]
}

/// `x = frac · 2^exp` with `frac` in `[0.5, 1)`, for finite `x > 0`
/// (subnormals included); `(0.0, 0)` for zero.
fn frexp(x: f64) -> (f64, i32) {
    const MANTISSA: u64 = (1 << 52) - 1;
    const HALF_EXPONENT: u64 = 0x3FE << 52;
    let (x, shift) = if x.to_bits() >> 52 == 0 {
        if x == 0.0 {
            return (0.0, 0);
        }
        // Subnormal: scale by 2^64 into the normal range.
        (x * 18_446_744_073_709_551_616.0, 64)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7FF) as i32;
    (
        f64::from_bits((bits & MANTISSA) | HALF_EXPONENT),
        biased - 1022 - shift,
    )
}

/// The bucket index of `abs` (> 0, not NaN) at `schema`.
fn bucket_index(abs: f64, schema: i8) -> i32 {
    if abs.is_infinite() {
        return bucket_index(f64::MAX, schema) + 1;
    }
    let (frac, exp) = frexp(abs);
    if schema > 0 {
        let j = bounds(schema).partition_point(|&b| b < frac) as i32;
        j + ((exp - 1) << schema)
    } else {
        let index = if frac == 0.5 { exp - 1 } else { exp };
        let shift = -schema;
        (index + (1 << shift) - 1) >> shift
    }
}

/// The index at one schema lower of bucket `index`: `⌈index/2⌉`.
fn halve_index(index: i32) -> i32 {
    (index >> 1) + (index & 1)
}

/// One populated bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bucket {
    positive: bool,
    index: i32,
    /// Sum of weights, > 0.
    count: f64,
}

/// A native histogram: weighted counts in a zero bucket and in sparse
/// exponential buckets of both signs, with a bucket limit that lowers the
/// resolution (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct NativeHistogram {
    /// Sorted by `(positive, index)`: negative buckets first.
    buckets: Vec<Bucket>,
    zero: f64,
    max_buckets: u32,
    schema: i8,
}

/// Integer counts for the wire, from [`NativeHistogram::integer_counts`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IntegerCounts {
    /// The zero bucket's count.
    pub zero: u64,
    /// `(index, count)` of negative buckets, ascending index, counts > 0.
    pub negative: Vec<(i32, u64)>,
    /// `(index, count)` of positive buckets, ascending index, counts > 0.
    pub positive: Vec<(i32, u64)>,
}

impl NativeHistogram {
    /// An empty histogram at `schema` (clamped to
    /// [`MIN_SCHEMA`]`..=`[`MAX_SCHEMA`]) keeping at most `max_buckets`
    /// populated buckets (at least 1). Allocates nothing.
    #[must_use]
    pub fn new(schema: i8, max_buckets: u32) -> Self {
        NativeHistogram {
            buckets: Vec::new(),
            zero: 0.0,
            max_buckets: max_buckets.max(1),
            schema: schema.clamp(MIN_SCHEMA, MAX_SCHEMA),
        }
    }

    /// Counts `v` with `weight` (`1/sample_rate`). `v` should be finite and
    /// `weight` finite and > 0; a NaN `v` or any other weight is ignored.
    #[inline]
    pub fn observe(&mut self, v: f64, weight: f64) {
        if v.is_nan() || weight.is_nan() || weight <= 0.0 || weight.is_infinite() {
            return;
        }
        let abs = v.abs();
        if abs <= ZERO_THRESHOLD {
            self.zero += weight;
            return;
        }
        let index = bucket_index(abs, self.schema);
        self.add(v > 0.0, index, weight);
        self.limit();
    }

    /// The current schema, after any lowering.
    #[must_use]
    pub fn schema(&self) -> i8 {
        self.schema
    }

    /// The zero bucket's threshold: always [`ZERO_THRESHOLD`].
    #[must_use]
    pub fn zero_threshold(&self) -> f64 {
        ZERO_THRESHOLD
    }

    /// The sum of the weights counted, in the zero bucket and every other.
    #[must_use]
    pub fn total_weight(&self) -> f64 {
        self.zero + self.buckets.iter().map(|b| b.count).sum::<f64>()
    }

    /// Populated buckets, negative and positive (not the zero bucket).
    #[cfg(test)]
    #[must_use]
    pub fn populated_buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Heap bytes held: the bucket vector's capacity × 16.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
    }

    /// Integer counts for the wire such that
    /// `zero + Σ negative + Σ positive == total` exactly and every count is
    /// `>= 0`.
    ///
    /// `total` is the series' integer sample count (the classic histogram's
    /// rounded weighted count, which the writer shares with the classic
    /// buckets). Walking the zero bucket, then the negative buckets, then
    /// the positive ones, each by ascending index, keep the running sum of
    /// weights; a bucket's count is the running sum rounded (half away from
    /// zero) and capped at `total`, less the same for the bucket before.
    /// The last populated bucket in that order (the zero bucket if nothing
    /// else is) instead gets whatever makes the sum `total`. With integer
    /// weights and `total` their sum, every count is its weighted count;
    /// with `total` the rounded sum of weights, every count is within 1 of
    /// its weighted count. Buckets whose count comes out 0 are left out.
    ///
    /// The rounding is per snapshot: with fractional weights a bucket's
    /// integer count can go down by one between two snapshots while its
    /// weighted count grows (its neighbour took the rounding), which
    /// Prometheus reads as a counter reset of a cumulative histogram. Integer
    /// weights (sample rates 1, 0.5, 0.25, 0.1, 0.01, …) never do that,
    /// and a series gives its histogram whole weights only (carrying the
    /// rounding to the next value) for that reason.
    #[must_use]
    pub fn integer_counts(&self, total: u64) -> IntegerCounts {
        let mut running = 0.0;
        let mut so_far = 0u64;
        let mut take = |weight: f64, last: bool| -> u64 {
            let upto = if last {
                total
            } else {
                running += weight;
                // `as` saturates: a huge sum becomes u64::MAX, then `total`.
                (running.round() as u64).min(total)
            };
            let count = upto - so_far;
            so_far = upto;
            count
        };
        let zero = take(self.zero, self.buckets.is_empty());
        let split = self.buckets.partition_point(|b| !b.positive);
        let mut negative = Vec::with_capacity(split);
        let mut positive = Vec::with_capacity(self.buckets.len() - split);
        let last = self.buckets.len().wrapping_sub(1);
        for (i, b) in self.buckets.iter().enumerate() {
            let count = take(b.count, i == last);
            if count > 0 {
                let side = if b.positive {
                    &mut positive
                } else {
                    &mut negative
                };
                side.push((b.index, count));
            }
        }
        IntegerCounts {
            zero,
            negative,
            positive,
        }
    }

    /// Adds `other`'s counts: both are brought to the lower of the two
    /// schemas, then the bucket limit applies as for observations. The
    /// result is the histogram that observing both histograms' values in one
    /// would give (up to the order in which weights were added). Keeps this
    /// histogram's limit.
    #[cfg(test)]
    pub fn merge_from(&mut self, other: &NativeHistogram) {
        while self.schema > other.schema {
            self.halve();
        }
        self.zero += other.zero;
        let steps = self.schema.abs_diff(other.schema);
        for b in &other.buckets {
            let index = (0..steps).fold(b.index, |i, _| halve_index(i));
            self.add(b.positive, index, b.count);
        }
        self.limit();
    }

    /// Adds `weight` to a bucket, creating it if needed.
    fn add(&mut self, positive: bool, index: i32, weight: f64) {
        match self.find(positive, index) {
            Ok(i) => self.buckets[i].count += weight,
            Err(i) => {
                let len = self.buckets.len();
                if len == self.buckets.capacity() {
                    // Grow by half (at least 4), but not past the limit + 1
                    // while the limit holds.
                    let ceiling = (self.max_buckets as usize).saturating_add(1);
                    let step = (len / 2).max(4);
                    let step = match ceiling.checked_sub(len) {
                        Some(room) if room > 0 => step.min(room),
                        _ => step,
                    };
                    self.buckets.reserve_exact(step);
                }
                self.buckets.insert(
                    i,
                    Bucket {
                        positive,
                        index,
                        count: weight,
                    },
                );
            }
        }
    }

    /// Where bucket `(positive, index)` is (`Ok`) or would go (`Err`).
    /// Populated buckets are mostly a contiguous run (timer values spread
    /// over neighbouring buckets), so first try the slot the index would
    /// have in a run starting at the first bucket: one comparison, and no
    /// unpredictable branches, when it hits. Else a binary search.
    #[inline]
    fn find(&self, positive: bool, index: i32) -> Result<usize, usize> {
        if let Some(first) = self.buckets.first() {
            if first.positive == positive {
                let slot = i64::from(index) - i64::from(first.index);
                if let Some(b) = usize::try_from(slot).ok().and_then(|i| self.buckets.get(i)) {
                    if b.positive == positive && b.index == index {
                        return Ok(slot as usize);
                    }
                }
            }
        }
        self.buckets
            .binary_search_by(|b| (b.positive, b.index).cmp(&(positive, index)))
    }

    /// Lowers the schema until the buckets fit the limit or the schema is
    /// [`MIN_SCHEMA`].
    #[inline]
    fn limit(&mut self) {
        while self.buckets.len() > self.max_buckets as usize && self.schema > MIN_SCHEMA {
            self.halve();
        }
    }

    /// Lowers the schema by one, merging each pair of neighbouring buckets.
    /// `⌈i/2⌉` keeps the order, so buckets that merge are adjacent.
    fn halve(&mut self) {
        self.schema -= 1;
        let mut kept = 0;
        for read in 0..self.buckets.len() {
            let mut b = self.buckets[read];
            b.index = halve_index(b.index);
            if kept > 0 {
                let prev = &mut self.buckets[kept - 1];
                if prev.positive == b.positive && prev.index == b.index {
                    prev.count += b.count;
                    continue;
                }
            }
            self.buckets[kept] = b;
            kept += 1;
        }
        self.buckets.truncate(kept);
    }
}

/// Longest run of empty buckets written inside a span (as zero-count
/// buckets) rather than starting a new span: 2, as client_golang's
/// `makeBuckets` ("gaps of one or two buckets should not create a new
/// span"). A new span costs two varints; a bridged bucket one byte of delta
/// plus one for the delta after it.
pub const MAX_BRIDGED_GAP: u32 = 2;

/// Prometheus' span/delta encoding of buckets given as `(index, count)` in
/// strictly ascending index (the `positive_span`/`positive_delta` and
/// `negative_span`/`negative_delta` fields of the protobuf `Histogram`).
///
/// Spans are `(offset, length)`: the first span's offset is the absolute
/// index of its first bucket, each later one's the number of empty buckets
/// between the previous span's end and its start (> [`MAX_BRIDGED_GAP`]).
/// Gaps of up to [`MAX_BRIDGED_GAP`] empty buckets are bridged: the span
/// goes on with zero-count buckets. Deltas are one per bucket in the spans:
/// its count minus the previous bucket's (the first against 0), computed
/// with wrapping `i64` arithmetic so that any `u64` counts decode exactly.
/// Empty input gives empty output.
#[must_use]
pub fn spans_and_deltas(buckets: &[(i32, u64)]) -> (Vec<(i32, u32)>, Vec<i64>) {
    let mut deltas = Vec::with_capacity(buckets.len());
    let mut previous = 0i64;
    let spans = spans(buckets, 0, |count| {
        let count = count as i64;
        deltas.push(count.wrapping_sub(previous));
        previous = count;
    });
    (spans, deltas)
}

/// The spans of `buckets` (see [`spans_and_deltas`]), handing `emit` each
/// count in the spans in order, `empty` for a bridged bucket.
fn spans<T: Copy>(buckets: &[(i32, T)], empty: T, mut emit: impl FnMut(T)) -> Vec<(i32, u32)> {
    let mut spans: Vec<(i32, u32)> = Vec::new();
    let mut next = 0i64;
    for &(index, count) in buckets {
        let gap = i64::from(index) - next;
        match spans.last_mut() {
            Some(span) if (0..=i64::from(MAX_BRIDGED_GAP)).contains(&gap) => {
                for _ in 0..gap {
                    emit(empty);
                }
                span.1 += gap as u32 + 1;
            }
            Some(_) => {
                debug_assert!(gap >= 0, "indices must ascend");
                // Native histogram indices lie within ±2^19, so gaps fit.
                spans.push((gap as i32, 1));
            }
            None => spans.push((index, 1)),
        }
        emit(count);
        next = i64::from(index) + 1;
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn next_up(x: f64) -> f64 {
        f64::from_bits(x.to_bits() + 1)
    }

    fn next_down(x: f64) -> f64 {
        f64::from_bits(x.to_bits() - 1)
    }

    /// Units in the last place between two positive floats.
    fn ulps(a: f64, b: f64) -> u64 {
        a.to_bits().abs_diff(b.to_bits())
    }

    // ---- (1) schema_for_factor -------------------------------------------

    #[test]
    fn schema_for_factor_follows_client_golang() {
        // client_golang TestNativeHistogram: 1.1 → 3, 1.2 → 2, 4 → -1, 17 → -2.
        assert_eq!(schema_for_factor(1.1), Some(3));
        assert_eq!(schema_for_factor(1.2), Some(2));
        assert_eq!(schema_for_factor(4.0), Some(-1));
        assert_eq!(schema_for_factor(17.0), Some(-2));
        assert_eq!(schema_for_factor(1.01), Some(7));
        assert_eq!(schema_for_factor(2.0), Some(0));
        assert_eq!(schema_for_factor(65536.0), Some(-4));
        assert_eq!(schema_for_factor(1e300), Some(-4));
        assert_eq!(schema_for_factor(f64::INFINITY), Some(-4));
        assert_eq!(schema_for_factor(1.0001), Some(8));
        assert_eq!(schema_for_factor(1.0 + f64::EPSILON), Some(8));
        assert_eq!(schema_for_factor(1.0), None);
        assert_eq!(schema_for_factor(0.5), None);
        assert_eq!(schema_for_factor(-3.0), None);
        assert_eq!(schema_for_factor(f64::NAN), None);
    }

    #[test]
    fn schema_for_factor_is_the_largest_schema_not_exceeding_the_factor() {
        for s in -3i8..=8 {
            let growth = 2f64.powf(2f64.powi(-i32::from(s)));
            // Comfortably above the growth factor of s, below that of s - 1.
            let above = growth * (1.0 + 1e-9);
            assert_eq!(schema_for_factor(above), Some(s), "factor {above}");
            let below = growth * (1.0 - 1e-9);
            assert_eq!(schema_for_factor(below), Some((s + 1).min(8)), "{below}");
        }
    }

    // ---- the bounds table --------------------------------------------------

    #[test]
    fn bounds_are_two_to_the_j_over_2_to_the_s_minus_one() {
        for s in 1i8..=8 {
            let b = bounds(s);
            assert_eq!(b.len(), 1 << s);
            assert_eq!(b[0], 0.5);
            for (j, &bound) in b.iter().enumerate() {
                let exact = 2f64.powf(j as f64 / f64::from(1u32 << s) - 1.0);
                assert!(
                    ulps(bound, exact) <= 4,
                    "schema {s} j {j}: {bound} vs {exact}"
                );
                if j > 0 {
                    assert!(bound > b[j - 1]);
                }
            }
            // Each schema's even positions are the schema below's bounds.
            if s > 1 {
                let coarser = bounds(s - 1);
                for (k, &c) in coarser.iter().enumerate() {
                    assert_eq!(b[2 * k], c);
                }
            }
        }
    }

    #[test]
    fn bounds_are_bit_for_bit_client_golangs() {
        // FNV-1a over the bits of all of client_golang's nativeHistogramBounds
        // (schema 0..=8 in order), computed from its source.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for s in 0..=8u32 {
            for &b in &BOUNDS[1 << s..2 << s] {
                h = (h ^ b.to_bits()).wrapping_mul(0x0100_0000_01b3);
            }
        }
        assert_eq!(h, 0x618c_4f38_8d68_9095);
        // A few of its entries.
        assert_eq!(bounds(1)[1], 0.707_106_781_186_547_5);
        assert_eq!(bounds(3)[1], 0.545_253_866_332_628_8);
        assert_eq!(bounds(5)[7], 0.581_862_429_388_788_7);
        assert_eq!(bounds(8)[1], 0.501_355_637_525_101_3);
        assert_eq!(bounds(8)[255], 0.997_296_056_085_469_8);
    }

    #[test]
    fn growth_factors_are_within_an_ulp_of_the_exact_ones() {
        for s in 1..=8 {
            let exact = 2f64.powf(2f64.powi(-s));
            assert!(ulps(GROWTH[s as usize], exact) <= 1, "{s}");
        }
        // F_1 is one ulp below √2, as in Go.
        assert_eq!(next_up(GROWTH[1]), 2f64.sqrt());
    }

    #[test]
    fn zero_threshold_is_two_to_the_minus_128() {
        assert_eq!(ZERO_THRESHOLD, 2f64.powi(-128));
        assert_eq!(frexp(ZERO_THRESHOLD), (0.5, -127));
    }

    #[test]
    fn frexp_splits_like_c() {
        assert_eq!(frexp(1.0), (0.5, 1));
        assert_eq!(frexp(3.0), (0.75, 2));
        assert_eq!(frexp(0.1), (0.8, -3));
        assert_eq!(frexp(f64::MAX), (next_down(1.0), 1024));
        assert_eq!(frexp(5e-324), (0.5, -1073));
        assert_eq!(frexp(f64::MIN_POSITIVE), (0.5, -1021));
        assert_eq!(frexp(0.0), (0.0, 0));
        for x in [1e-310, 3.7e-320, 2.2e-308] {
            let (f, e) = frexp(x);
            assert!((0.5..1.0).contains(&f));
            assert_eq!(f * 2f64.powi(e + 100) * 2f64.powi(-100), x);
        }
    }

    // ---- (2) indices of known values --------------------------------------

    #[test]
    fn powers_of_two_top_their_buckets_at_every_schema() {
        for s in MIN_SCHEMA..=MAX_SCHEMA {
            for k in -127i32..=1023 {
                let v = 2f64.powi(k);
                // 2^k is the bound 2^(i/2^s) with i = k·2^s, rounded up when s < 0.
                let want = if s >= 0 {
                    k << s
                } else {
                    k.div_euclid(1 << -s) + i32::from(k.rem_euclid(1 << -s) != 0)
                };
                assert_eq!(bucket_index(v, s), want, "2^{k} at schema {s}");
            }
        }
    }

    #[test]
    fn every_table_bound_tops_its_bucket() {
        for s in 1i8..=MAX_SCHEMA {
            let n = 1i32 << s;
            for (j, &b) in bounds(s).iter().enumerate() {
                for k in [-100, -1, 0, 1, 2, 30, 500] {
                    // b · 2^(k+1) is the upper bound of bucket j + k·2^s.
                    let bound = b * 2f64.powi(k + 1);
                    let i = j as i32 + k * n;
                    assert_eq!(bucket_index(bound, s), i, "schema {s} j {j} k {k}");
                    assert_eq!(bucket_index(next_up(bound), s), i + 1);
                    assert_eq!(bucket_index(next_down(bound), s), i);
                }
            }
        }
    }

    #[test]
    fn known_indices_at_schemas_minus_4_0_3_8() {
        let cases: &[(i8, f64, i32)] = &[
            (8, 1.0, 0),
            (8, next_up(1.0), 1),
            (8, next_down(1.0), 0),
            (8, 2.0, 256),
            (8, next_up(2.0), 257),
            (8, 0.5, -256),
            (8, next_down(0.5), -256),
            (8, next_up(0.5), -255),
            (8, 2.0 * bounds(8)[1], 1),
            (8, next_up(2.0 * bounds(8)[1]), 2),
            (8, 2.0 * bounds(8)[255], 255),
            (8, next_up(2.0 * bounds(8)[255]), 256),
            (8, f64::MAX, 1024 * 256),
            (3, 1.0, 0),
            (3, 2.0, 8),
            (3, 3.0, 13),
            (3, 1.09, 1),
            (3, 1.0905077326652576, 1),
            (3, next_up(1.0905077326652576), 2),
            (3, 0.001, -79),
            (3, 1024.0, 80),
            (3, next_up(1024.0), 81),
            // √2 as an f64 is above the true √2: bucket 4 at schema 3.
            (3, 2f64.sqrt(), 5),
            (3, 2.0 * bounds(3)[4], 4),
            (0, 1.0, 0),
            (0, next_up(1.0), 1),
            (0, 2.0, 1),
            (0, 3.0, 2),
            (0, 4.0, 2),
            (0, next_up(4.0), 3),
            (0, 0.5, -1),
            (0, 0.3, -1),
            (0, 0.25, -2),
            (0, f64::MAX, 1024),
            (-4, 1.0, 0),
            (-4, next_up(1.0), 1),
            (-4, 65536.0, 1),
            (-4, next_up(65536.0), 2),
            (-4, 2f64.powi(-16), -1),
            (-4, next_up(2f64.powi(-16)), 0),
            (-4, next_down(2f64.powi(-16)), -1),
            (-4, 2f64.powi(-128), -8),
            (-4, next_up(2f64.powi(-128)), -7),
            (-4, f64::MAX, 64),
            (-4, 1e300, 63),
        ];
        for &(s, v, want) in cases {
            assert_eq!(bucket_index(v, s), want, "{v} at schema {s}");
        }
        // √2 at schema 1: Prometheus' bound is one ulp below, so bucket 2.
        assert_eq!(bucket_index(2f64.sqrt(), 1), 2);
        assert_eq!(bucket_index(next_down(2f64.sqrt()), 1), 1);
    }

    #[test]
    fn client_golang_scenarios_give_its_buckets() {
        // client_golang TestNativeHistogram's expectations, through our
        // integer counts and spans.
        fn run(factor: f64, max: u32, values: &[f64]) -> (i8, IntegerCounts) {
            let mut h = NativeHistogram::new(schema_for_factor(factor).unwrap(), max);
            for &v in values {
                h.observe(v, 1.0);
            }
            let c = h.integer_counts(values.len() as u64);
            (h.schema(), c)
        }
        let (s, c) = run(1.1, 160, &[0.0, 1.0, 2.0, 3.0]);
        assert_eq!((s, c.zero), (3, 1));
        assert_eq!(
            spans_and_deltas(&c.positive),
            (vec![(0, 1), (7, 1), (4, 1)], vec![1, 0, 0])
        );
        let (s, c) = run(1.2, 160, &[0.0, 1.0, 1.2, 1.4, 1.8, 2.0]);
        assert_eq!((s, c.zero), (2, 1));
        assert_eq!(
            spans_and_deltas(&c.positive),
            (vec![(0, 5)], vec![1, -1, 2, -2, 2])
        );
        let v = [
            0.0156251, 0.0625, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 3.5, 5.0, 6.0, 7.0, 33.33,
        ];
        let (s, c) = run(4.0, 160, &v);
        assert_eq!((s, c.zero), (-1, 0));
        assert_eq!(
            spans_and_deltas(&c.positive),
            (vec![(-2, 6)], vec![2, 0, 0, 2, -1, -2])
        );
        let (s, c) = run(17.0, 160, &v);
        assert_eq!(s, -2);
        assert_eq!(
            spans_and_deltas(&c.positive),
            (vec![(-1, 4)], vec![2, 2, 3, -6])
        );
        let (s, c) = run(1.2, 160, &[0.0, -1.0, -1.2, -1.4, -1.8, -2.0]);
        assert_eq!((s, c.zero), (2, 1));
        assert!(c.positive.is_empty());
        assert_eq!(
            spans_and_deltas(&c.negative),
            (vec![(0, 5)], vec![1, -1, 2, -2, 2])
        );
        // "buckets limited by halving resolution" (max 4).
        let (s, c) = run(1.2, 4, &[0.0, 1.0, 1.1, 1.2, 1.4, 1.8, 2.0, 3.0]);
        assert_eq!((s, c.zero), (1, 1));
        assert_eq!(
            spans_and_deltas(&c.positive),
            (vec![(0, 5)], vec![1, 2, -1, -2, 1])
        );
        let (s, c) = run(1.2, 4, &[0.0, -1.0, -1.1, -1.2, -1.4, -1.8, -2.0, -3.0]);
        assert_eq!((s, c.zero), (1, 1));
        assert_eq!(
            spans_and_deltas(&c.negative),
            (vec![(0, 5)], vec![1, 2, -1, -2, 1])
        );
    }

    // ---- (3) against a brute-force model ------------------------------------

    /// A bucket bound `2^(i/2^s)` by the definition: exact powers of two by
    /// `powi`, the rest by `powf`.
    fn model_bound(i: i64, s: i8) -> f64 {
        if s <= 0 {
            2f64.powi((i << -s) as i32)
        } else if i % (1 << s) == 0 {
            2f64.powi((i >> s) as i32)
        } else {
            2f64.powf(i as f64 / f64::from(1u32 << s))
        }
    }

    /// The bucket of `abs` by the definition, by a slow walk from an estimate.
    fn model_index(abs: f64, s: i8) -> i32 {
        let mut i = (abs.log2() * 2f64.powi(i32::from(s))).ceil() as i64;
        while abs > model_bound(i, s) {
            i += 1;
        }
        while abs <= model_bound(i - 1, s) {
            i -= 1;
        }
        i as i32
    }

    type ModelCounts = (f64, BTreeMap<(bool, i32), f64>);

    fn model_counts(obs: &[(f64, f64)], s: i8) -> ModelCounts {
        let mut zero = 0.0;
        let mut buckets = BTreeMap::new();
        for &(v, w) in obs {
            if v.abs() <= ZERO_THRESHOLD {
                zero += w;
            } else {
                *buckets
                    .entry((v > 0.0, model_index(v.abs(), s)))
                    .or_insert(0.0) += w;
            }
        }
        (zero, buckets)
    }

    /// The final schema: the highest at which all values fit, else the lowest.
    fn model(obs: &[(f64, f64)], schema: i8, max: u32) -> (i8, ModelCounts) {
        let mut s = schema;
        loop {
            let counts = model_counts(obs, s);
            if counts.1.len() <= max as usize || s == MIN_SCHEMA {
                return (s, counts);
            }
            s -= 1;
        }
    }

    fn counts_of(h: &NativeHistogram) -> ModelCounts {
        let buckets = h
            .buckets
            .iter()
            .map(|b| ((b.positive, b.index), b.count))
            .collect();
        (h.zero, buckets)
    }

    fn value() -> impl Strategy<Value = f64> {
        let magnitude = prop_oneof![
            4 => (-140.0f64..1023.9).prop_map(f64::exp2),
            2 => (-140i32..=1023).prop_map(|k| 2f64.powi(k)),
            2 => 0.001f64..1000.0,
            1 => Just(0.0),
            1 => Just(5e-324),
            1 => Just(1e300),
            1 => Just(f64::MAX),
            1 => Just(ZERO_THRESHOLD),
        ];
        (any::<bool>(), magnitude).prop_map(|(neg, m)| if neg { -m } else { m })
    }

    /// Dyadic weights (k/8) add exactly in any order.
    fn dyadic_weight() -> impl Strategy<Value = f64> {
        (1u32..=40).prop_map(|k| f64::from(k) / 8.0)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn matches_the_brute_force_model(
            obs in prop::collection::vec((value(), dyadic_weight()), 0..80),
            schema in MIN_SCHEMA..=MAX_SCHEMA,
            max in 1u32..24,
        ) {
            let mut h = NativeHistogram::new(schema, max);
            for &(v, w) in &obs {
                h.observe(v, w);
            }
            let (s, counts) = model(&obs, schema, max);
            prop_assert_eq!(h.schema(), s);
            prop_assert_eq!(counts_of(&h), counts);
            if h.schema() > MIN_SCHEMA {
                prop_assert!(h.populated_buckets() <= max as usize);
                prop_assert!(h.buckets.capacity() <= max as usize + 1);
            }
            prop_assert_eq!(h.heap_bytes(), h.buckets.capacity() * 16);
            prop_assert!(h.buckets.windows(2).all(|p| (p[0].positive, p[0].index) < (p[1].positive, p[1].index)));
        }

        #[test]
        fn merging_equals_observing_everything_in_one(
            a in prop::collection::vec((value(), dyadic_weight()), 0..40),
            b in prop::collection::vec((value(), dyadic_weight()), 0..40),
            schema in MIN_SCHEMA..=MAX_SCHEMA,
            max in 1u32..16,
        ) {
            let (mut ha, mut hb, mut all) = (
                NativeHistogram::new(schema, max),
                NativeHistogram::new(schema, max),
                NativeHistogram::new(schema, max),
            );
            for &(v, w) in &a {
                ha.observe(v, w);
                all.observe(v, w);
            }
            for &(v, w) in &b {
                hb.observe(v, w);
                all.observe(v, w);
            }
            ha.merge_from(&hb);
            prop_assert_eq!(ha.schema(), all.schema());
            prop_assert_eq!(counts_of(&ha), counts_of(&all));
        }
    }

    // ---- (4) integer counts --------------------------------------------------

    fn check_integer_counts(h: &NativeHistogram, total: u64) -> IntegerCounts {
        let c = h.integer_counts(total);
        let sum = c.zero as u128
            + c.negative.iter().map(|b| b.1 as u128).sum::<u128>()
            + c.positive.iter().map(|b| b.1 as u128).sum::<u128>();
        assert_eq!(sum, u128::from(total));
        for side in [&c.negative, &c.positive] {
            assert!(side.windows(2).all(|p| p[0].0 < p[1].0));
            assert!(side.iter().all(|b| b.1 > 0));
        }
        c
    }

    #[test]
    fn integer_counts_equal_integer_weights() {
        let mut h = NativeHistogram::new(3, 160);
        for (v, w) in [
            (0.0, 2.0),
            (-1.0, 3.0),
            (-7.5, 1.0),
            (1.0, 4.0),
            (9.0, 10.0),
        ] {
            h.observe(v, w);
        }
        let c = check_integer_counts(&h, 20);
        assert_eq!(c.zero, 2);
        assert_eq!(c.negative, vec![(0, 3), (24, 1)]);
        assert_eq!(c.positive, vec![(0, 4), (26, 10)]);
    }

    #[test]
    fn integer_counts_round_the_running_sum() {
        let mut h = NativeHistogram::new(0, 160);
        // Sample rate 0.3: weights 3.333…; three buckets, 10 in all.
        for v in [1.0, 2.0, 4.0] {
            h.observe(v, 1.0 / 0.3);
        }
        // Running sums 3.33, 6.67, 10 → 3, 7, 10.
        let c = check_integer_counts(&h, 10);
        assert_eq!(c.positive, vec![(0, 3), (1, 4), (2, 3)]);
        // A smaller total caps the running sum; the last bucket gets 0 and
        // is left out.
        let c = check_integer_counts(&h, 6);
        assert_eq!(c.positive, vec![(0, 3), (1, 3)]);
        // A larger total goes to the last bucket.
        let c = check_integer_counts(&h, 12);
        assert_eq!(c.positive, vec![(0, 3), (1, 4), (2, 5)]);
        // Nothing but the total: the zero bucket takes it.
        let c = check_integer_counts(&NativeHistogram::new(0, 160), 5);
        assert_eq!((c.zero, c.negative.len(), c.positive.len()), (5, 0, 0));
        let c = check_integer_counts(&NativeHistogram::new(0, 160), 0);
        assert_eq!(c, IntegerCounts::default());
    }

    #[test]
    fn fractional_weights_can_move_a_rounded_count_down() {
        // The caveat in integer_counts' docs, shown: A 0.4, B 0.4 → 0, 1;
        // then A + 0.2 → 1, 0. The float counts only grow.
        let mut h = NativeHistogram::new(0, 160);
        h.observe(1.0, 0.4);
        h.observe(2.0, 0.4);
        assert_eq!(h.integer_counts(1).positive, vec![(1, 1)]);
        h.observe(1.0, 0.2);
        assert_eq!(h.integer_counts(1).positive, vec![(0, 1)]);
        assert!(
            (h.total_weight() - 1.0).abs() < 1e-12,
            "the weights only grow"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        #[test]
        fn integer_counts_are_exact_and_close(
            obs in prop::collection::vec((value(), 1.0f64..20.0), 0..60),
            schema in MIN_SCHEMA..=MAX_SCHEMA,
            max in 1u32..30,
            slack in -3i64..=3,
        ) {
            let mut h = NativeHistogram::new(schema, max);
            for &(v, w) in &obs {
                h.observe(v, w);
            }
            let weights: f64 = obs.iter().map(|o| o.1).sum();
            let total = weights.round() as u64;
            let c = check_integer_counts(&h, total);
            // Each count is within 1 of its weighted count.
            let (zero, buckets) = counts_of(&h);
            prop_assert!((c.zero as f64 - zero).abs() <= 1.0 + 1e-9);
            let ints: BTreeMap<(bool, i32), u64> = c.negative.iter().map(|&(i, n)| ((false, i), n))
                .chain(c.positive.iter().map(|&(i, n)| ((true, i), n))).collect();
            for (key, w) in buckets {
                let n = ints.get(&key).copied().unwrap_or(0);
                prop_assert!((n as f64 - w).abs() <= 1.0 + 1e-9, "{:?}: {} vs {}", key, n, w);
            }
            // Any other total: still exact and non-negative.
            check_integer_counts(&h, total.saturating_add_signed(slack));
        }

        #[test]
        fn integer_counts_equal_integer_weights_always(
            obs in prop::collection::vec((value(), 1u32..1000), 0..60),
            schema in MIN_SCHEMA..=MAX_SCHEMA,
            max in 1u32..30,
        ) {
            let mut h = NativeHistogram::new(schema, max);
            for &(v, w) in &obs {
                h.observe(v, f64::from(w));
            }
            let total: u64 = obs.iter().map(|o| u64::from(o.1)).sum();
            let c = check_integer_counts(&h, total);
            let (zero, buckets) = counts_of(&h);
            prop_assert_eq!(c.zero as f64, zero);
            let want: Vec<((bool, i32), u64)> = buckets.into_iter().map(|(k, w)| (k, w as u64)).collect();
            let got: Vec<((bool, i32), u64)> = c.negative.iter().map(|&(i, n)| ((false, i), n))
                .chain(c.positive.iter().map(|&(i, n)| ((true, i), n))).collect();
            prop_assert_eq!(got, want);
        }
    }

    // ---- (5) spans and deltas -------------------------------------------------

    /// Prometheus' reading of spans and deltas, with its checks
    /// (`checkHistogramSpans`: later offsets >= 0, lengths add up to the
    /// deltas; `checkHistogramBuckets`: no negative count).
    fn decode(spans: &[(i32, u32)], deltas: &[i64]) -> Vec<(i32, u64)> {
        assert_eq!(
            spans.iter().map(|s| s.1 as usize).sum::<usize>(),
            deltas.len()
        );
        let mut out = Vec::new();
        let mut count = 0i64;
        let mut d = deltas.iter();
        let mut index = 0i64;
        for (n, &(offset, length)) in spans.iter().enumerate() {
            assert!(n == 0 || offset >= 0);
            assert!(length > 0);
            index += i64::from(offset);
            for _ in 0..length {
                count = count.wrapping_add(*d.next().unwrap());
                out.push((index as i32, count as u64));
                index += 1;
            }
        }
        out
    }

    #[test]
    fn spans_and_deltas_examples() {
        assert_eq!(spans_and_deltas(&[]), (vec![], vec![]));
        assert_eq!(spans_and_deltas(&[(-5, 3)]), (vec![(-5, 1)], vec![3]));
        // Gaps of 1 and 2 are bridged; 3 starts a span.
        assert_eq!(
            spans_and_deltas(&[(0, 1), (2, 3), (5, 3), (9, 1)]),
            (vec![(0, 6), (3, 1)], vec![1, -1, 3, -3, 0, 3, -2])
        );
        let big = [(0, u64::MAX), (1, 0), (2, 1)];
        let (s, d) = spans_and_deltas(&big);
        assert_eq!(decode(&s, &d), big.to_vec());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        #[test]
        fn spans_and_deltas_decode_back(
            input in prop::collection::btree_map(-300_000i32..300_000, 0u64..1_000_000, 0..40),
            dense in prop::collection::btree_map(-20i32..20, 0u64..5, 0..30),
        ) {
            for map in [input, dense] {
                let buckets: Vec<(i32, u64)> = map.into_iter().collect();
                let (spans, deltas) = spans_and_deltas(&buckets);
                prop_assert!(spans.iter().skip(1).all(|s| s.0 > MAX_BRIDGED_GAP as i32));
                let decoded = decode(&spans, &deltas);
                let from: BTreeMap<i32, u64> = buckets.iter().copied().collect();
                // Every bucket comes back; the others are bridged empties.
                for &(i, n) in &decoded {
                    prop_assert_eq!(from.get(&i).copied().unwrap_or(0), n);
                }
                prop_assert!(decoded.windows(2).all(|p| p[0].0 < p[1].0));
                let back: BTreeMap<i32, u64> = decoded.iter().copied().collect();
                for (i, n) in &from {
                    prop_assert_eq!(back.get(i), Some(n));
                }
            }
        }
    }

    // ---- (6) scenarios ----------------------------------------------------------

    #[test]
    fn max_buckets_one_drops_to_a_single_bucket_or_the_lowest_schema() {
        let mut h = NativeHistogram::new(8, 1);
        h.observe(1.5, 1.0);
        assert_eq!((h.schema(), h.populated_buckets()), (8, 1));
        // 3 is one octave up: the two share a bucket only once a bucket spans
        // (1, 4], schema -1.
        h.observe(3.0, 1.0);
        assert_eq!((h.schema(), h.populated_buckets()), (-1, 1));
        assert_eq!(counts_of(&h).1, BTreeMap::from([((true, 1), 2.0)]));
        // A negative value cannot share a positive bucket: down to -4, over
        // the limit.
        h.observe(-3.0, 0.5);
        assert_eq!((h.schema(), h.populated_buckets()), (MIN_SCHEMA, 2));
        assert_eq!(
            counts_of(&h).1,
            BTreeMap::from([((false, 1), 0.5), ((true, 1), 2.0)])
        );
        // Zeros never count against the limit.
        h.observe(0.0, 1.0);
        h.observe(-1e-300, 1.0);
        assert_eq!(
            (h.schema(), h.populated_buckets(), h.zero),
            (MIN_SCHEMA, 2, 2.0)
        );
        // At -4 the limit is exceeded rather than anything lost.
        h.observe(1e10, 1.0);
        assert_eq!(h.populated_buckets(), 3);
        let c = h.integer_counts(6);
        assert_eq!(c.zero, 2);
        // Running sums 2, 2.5, 4.5 round to 2, 3, 5; the last bucket takes 1.
        assert_eq!(c.negative, vec![(1, 1)]);
        assert_eq!(c.positive, vec![(1, 2), (3, 1)]);
    }

    #[test]
    fn max_buckets_four_halves_as_needed() {
        let mut h = NativeHistogram::new(3, 4);
        for v in [1.0, 1.1, 1.2, 1.3] {
            h.observe(v, 1.0);
        }
        assert_eq!((h.schema(), h.populated_buckets()), (3, 4));
        h.observe(1.5, 1.0);
        // Schema 3 buckets 0, 2, 3, 4, 5 → schema 2: 0, 1, 2, 3.
        assert_eq!((h.schema(), h.populated_buckets()), (2, 4));
        // One far value: halve until the five fit in four.
        h.observe(1000.0, 1.0);
        assert!(h.populated_buckets() <= 4);
        assert_eq!(h.schema(), 1);
        let c = h.integer_counts(6);
        assert_eq!(c.positive, vec![(0, 1), (1, 3), (2, 1), (20, 1)]);
        assert!(h.heap_bytes() <= 5 * 16);
    }

    #[test]
    fn negative_values_mirror_positive_ones() {
        let (mut p, mut n) = (NativeHistogram::new(3, 5), NativeHistogram::new(3, 5));
        for v in [0.3, 1.0, 2.5, 2.6, 100.0, 1e-20, 7e7] {
            p.observe(v, 2.0);
            n.observe(-v, 2.0);
        }
        assert_eq!(p.schema(), n.schema());
        let (pc, nc) = (p.integer_counts(14), n.integer_counts(14));
        assert_eq!(pc.positive, nc.negative);
        assert!(pc.negative.is_empty() && nc.positive.is_empty());
    }

    #[test]
    fn extreme_values_do_not_panic() {
        for s in MIN_SCHEMA..=MAX_SCHEMA {
            let mut h = NativeHistogram::new(s, 160);
            for v in [
                1e300,
                -1e300,
                5e-324,
                -5e-324,
                f64::MAX,
                f64::MIN,
                1e-310,
                0.0,
                -0.0,
            ] {
                h.observe(v, 1.0);
            }
            // Subnormals and zeros are in the zero bucket.
            assert_eq!(h.zero, 5.0);
            let top = bucket_index(f64::MAX, s);
            assert_eq!(top, if s >= 0 { 1024 << s } else { 1024 >> -s });
            assert_eq!(bucket_index(1e300, s), model_index(1e300, s));
            // Infinities (not expected) go one above the top, as in client_golang.
            h.observe(f64::INFINITY, 1.0);
            assert_eq!(h.buckets.last().unwrap().index, top + 1);
            // NaN values and bad weights are ignored.
            let before = h.clone();
            h.observe(f64::NAN, 1.0);
            h.observe(1.0, 0.0);
            h.observe(1.0, -1.0);
            h.observe(1.0, f64::NAN);
            h.observe(1.0, f64::INFINITY);
            assert_eq!(h, before);
            let c = check_integer_counts(&h, 10);
            assert_eq!(c.zero, 5);
        }
    }

    #[test]
    fn new_clamps_its_arguments_and_allocates_nothing() {
        let h = NativeHistogram::new(20, 0);
        assert_eq!(
            (h.schema(), h.max_buckets, h.heap_bytes()),
            (MAX_SCHEMA, 1, 0)
        );
        assert_eq!(NativeHistogram::new(-9, 5).schema(), MIN_SCHEMA);
        assert_eq!(h.zero_threshold(), ZERO_THRESHOLD);
    }

    #[test]
    fn stays_small() {
        assert_eq!(std::mem::size_of::<NativeHistogram>(), 40);
        assert_eq!(std::mem::size_of::<Bucket>(), 16);
        // With the usual limit of 160, never more than 161 entries allocated.
        let mut h = NativeHistogram::new(8, 160);
        for k in 0..100_000 {
            h.observe(1.0001f64.powi(k) * 1e-3, 1.0);
        }
        assert!(h.populated_buckets() <= 160);
        assert!(h.heap_bytes() <= 161 * 16, "{}", h.heap_bytes());
    }
}
