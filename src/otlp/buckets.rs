//! Histogram points as [`Aggregate`]s: the count, sum and range sent, and
//! one value inside each non-empty bucket weighted by its count, for the
//! quantile sketch and the series' own buckets.
//!
//! **Where the value sits.** An explicit bucket `(lo, hi]` is stood for by
//! the middle of the part of it within the point's `[min, max]` (the
//! whole bucket when they are not sent); the first bucket `(-inf, b0]` by
//! `min` (or `b0`), the last `(bn, +inf)` by `max` (or the float just
//! above `bn`). An exponential bucket `(base^k, base^(k+1)]` by its
//! geometric middle `base^(k+0.5)`, the zero bucket by 0. So a quantile
//! read from the sketch is off by at most half the width of the bucket it
//! falls in (plus the sketch's own 1%), and a series whose buckets are the
//! point's (the same explicit bounds, or a native histogram at the same
//! or a coarser scale) counts each observation in the bucket it was sent
//! in: exactly.

use super::proto::opentelemetry::proto::metrics::v1::exponential_histogram_data_point::Buckets;
use super::proto::opentelemetry::proto::metrics::v1::{
    ExponentialHistogramDataPoint, HistogramDataPoint,
};
use super::reject::Reject;
use crate::window::Aggregate;

/// Finest and coarsest exponential scale read (OTLP allows -10..=20).
pub const SCALES: std::ops::RangeInclusive<i32> = -10..=20;

/// An explicit-bounds point whose bucket counts are `counts` (the point's
/// own, or what changed since the stream's last point) and whose count and
/// sum are `count` and `sum`.
///
/// # Errors
///
/// [`Reject::BadBuckets`] when the counts do not fit the bounds or do not
/// add up to `count`; [`Reject::BadValue`] for a non-finite bound.
pub fn explicit(
    p: &HistogramDataPoint,
    counts: &[u64],
    count: u64,
    sum: f64,
    range: (f64, f64),
) -> Result<Aggregate, Reject> {
    let b = &p.explicit_bounds;
    if counts.len() != b.len() + 1 || !b.windows(2).all(|w| w[0] < w[1]) {
        return Err(Reject::BadBuckets);
    }
    if b.iter().any(|x| !x.is_finite()) {
        return Err(Reject::BadValue);
    }
    check_total(counts.iter().copied(), count)?;
    let (min, max) = range;
    let mut values = Vec::with_capacity(counts.iter().filter(|&&c| c > 0).count());
    for (i, &c) in counts.iter().enumerate().filter(|(_, &c)| c > 0) {
        let lo = if i == 0 { f64::NEG_INFINITY } else { b[i - 1] };
        let hi = b.get(i).copied().unwrap_or(f64::INFINITY);
        values.push((inside(lo, hi, min, max), c as f64));
    }
    Ok(aggregate(count, sum, range, values))
}

/// A value in `(lo, hi]`, in the middle of its part within `[min, max]`.
fn inside(lo: f64, hi: f64, min: f64, max: f64) -> f64 {
    let from = if min.is_finite() && min > lo { min } else { lo };
    let to = if max.is_finite() && max < hi { max } else { hi };
    match (from.is_finite(), to.is_finite()) {
        (true, true) if from <= to => from + (to - from) / 2.0,
        // The range sent misses the bucket (it should not): its bounds.
        (true, true) => lo.max(hi.min(to)),
        (false, true) => to,
        (true, false) => above(from),
        (false, false) => 0.0,
    }
}

/// The smallest `f64` above finite `x`.
fn above(x: f64) -> f64 {
    if x == 0.0 {
        f64::from_bits(1)
    } else if x > 0.0 {
        f64::from_bits(x.to_bits() + 1)
    } else {
        f64::from_bits(x.to_bits() - 1)
    }
}

/// An exponential point: `scale`, the zero bucket's count, and the
/// positive and negative buckets as `(offset, counts)`.
///
/// # Errors
///
/// [`Reject::BadBuckets`] for a scale outside [`SCALES`], counts that do
/// not add up to `count`, or a bucket whose bound is not a finite `f64`.
pub fn exponential(
    scale: i32,
    zero: u64,
    positive: Side<'_>,
    negative: Side<'_>,
    count: u64,
    sum: f64,
    range: (f64, f64),
) -> Result<Aggregate, Reject> {
    if !SCALES.contains(&scale) {
        return Err(Reject::BadBuckets);
    }
    let all = positive.1.iter().chain(negative.1).copied();
    check_total(all.chain(std::iter::once(zero)), count)?;
    let width = (-f64::from(scale)).exp2();
    let mut values = Vec::new();
    if zero > 0 {
        values.push((0.0, zero as f64));
    }
    for (sign, (offset, counts)) in [(1.0, positive), (-1.0, negative)] {
        for (j, &c) in counts.iter().enumerate().filter(|(_, &c)| c > 0) {
            let k = f64::from(offset) + j as f64;
            let v = ((k + 0.5) * width).exp2();
            if !v.is_finite() || v == 0.0 {
                return Err(Reject::BadBuckets);
            }
            values.push((sign * v, c as f64));
        }
    }
    Ok(aggregate(count, sum, range, values))
}

/// The bucket counts of an exponential point, as `(offset, counts)`.
#[must_use]
pub fn sides(p: &ExponentialHistogramDataPoint) -> (Side<'_>, Side<'_>) {
    (side(p.positive.as_ref()), side(p.negative.as_ref()))
}

/// One side of an exponential histogram: `(offset, counts)`.
pub type Side<'a> = (i32, &'a [u64]);

fn side(b: Option<&Buckets>) -> Side<'_> {
    b.map_or((0, &[][..]), |b| (b.offset, b.bucket_counts.as_slice()))
}

/// Whether the counts add up to `count` (without overflowing).
fn check_total(counts: impl Iterator<Item = u64>, count: u64) -> Result<(), Reject> {
    let mut total: u64 = 0;
    for c in counts {
        total = total.checked_add(c).ok_or(Reject::BadBuckets)?;
    }
    if total == count {
        Ok(())
    } else {
        Err(Reject::BadBuckets)
    }
}

/// The aggregate, its range the one sent or, where not sent, the values'.
fn aggregate(count: u64, sum: f64, range: (f64, f64), values: Vec<(f64, f64)>) -> Aggregate {
    let lowest = values.iter().map(|v| v.0).fold(f64::INFINITY, f64::min);
    let highest = values.iter().map(|v| v.0).fold(f64::NEG_INFINITY, f64::max);
    Aggregate {
        count: count as f64,
        sum,
        min: if range.0.is_finite() { range.0 } else { lowest },
        max: if range.1.is_finite() {
            range.1
        } else {
            highest
        },
        values,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(bounds: &[f64]) -> HistogramDataPoint {
        HistogramDataPoint {
            explicit_bounds: bounds.to_vec(),
            ..Default::default()
        }
    }

    const NO_RANGE: (f64, f64) = (f64::NAN, f64::NAN);

    #[test]
    fn each_explicit_bucket_is_stood_for_by_a_value_inside_it() {
        let p = point(&[1.0, 2.0, 4.0]);
        let a = explicit(&p, &[1, 2, 0, 3], 6, 20.0, NO_RANGE).unwrap();
        assert_eq!(a.values, vec![(1.0, 1.0), (1.5, 2.0), (above(4.0), 3.0)]);
        assert_eq!((a.count, a.sum), (6.0, 20.0));
        assert_eq!((a.min, a.max), (1.0, above(4.0)));
    }

    #[test]
    fn the_range_sent_narrows_the_edge_buckets_and_is_kept() {
        let p = point(&[1.0, 2.0]);
        let a = explicit(&p, &[1, 0, 1], 2, 10.5, (0.5, 10.0)).unwrap();
        assert_eq!(a.values, vec![(0.75, 1.0), (6.0, 1.0)]);
        assert_eq!((a.min, a.max), (0.5, 10.0));
    }

    #[test]
    fn counts_that_do_not_fit_the_bounds_or_the_count_are_refused() {
        let p = point(&[1.0, 2.0]);
        assert_eq!(
            explicit(&p, &[1, 2], 3, 0.0, NO_RANGE),
            Err(Reject::BadBuckets)
        );
        assert_eq!(
            explicit(&p, &[1, 2, 3], 7, 0.0, NO_RANGE),
            Err(Reject::BadBuckets)
        );
        let p = point(&[2.0, 1.0]);
        assert_eq!(
            explicit(&p, &[1, 2, 3], 6, 0.0, NO_RANGE),
            Err(Reject::BadBuckets)
        );
        let p = point(&[1.0, f64::NAN]);
        assert!(explicit(&p, &[0, 0, 0], 0, 0.0, NO_RANGE).is_err());
        let p = point(&[]);
        assert_eq!(
            explicit(&p, &[u64::MAX], u64::MAX, 0.0, NO_RANGE).map(|a| a.values.len()),
            Ok(1)
        );
        assert_eq!(
            check_total([u64::MAX, 1].into_iter(), 0),
            Err(Reject::BadBuckets)
        );
    }

    #[test]
    fn an_exponential_bucket_is_stood_for_by_its_geometric_middle() {
        // Scale 0: base 2, bucket k = (2^k, 2^(k+1)].
        let a = exponential(0, 1, (1, &[2, 0, 3]), (0, &[1]), 7, 0.0, NO_RANGE).unwrap();
        let expect = [
            (0.0, 1.0),
            (2f64.powf(1.5), 2.0),
            (2f64.powf(3.5), 3.0),
            (-(2f64.powf(0.5)), 1.0),
        ];
        for (got, want) in a.values.iter().zip(expect) {
            assert!(
                (got.0 - want.0).abs() < 1e-12 && got.1 == want.1,
                "{got:?} {want:?}"
            );
        }
        // Every value lies inside its bucket at scale 3 as well.
        let a = exponential(3, 0, (-5, &[1, 1, 1]), (0, &[]), 3, 0.0, NO_RANGE).unwrap();
        let base = 2f64.powf(1.0 / 8.0);
        for (j, (v, _)) in a.values.iter().enumerate() {
            let k = -5 + j as i32;
            assert!(base.powi(k) < *v && *v <= base.powi(k + 1));
        }
    }

    #[test]
    fn a_scale_out_of_range_or_a_bound_past_f64_is_refused() {
        assert_eq!(
            exponential(21, 0, (0, &[]), (0, &[]), 0, 0.0, NO_RANGE),
            Err(Reject::BadBuckets)
        );
        assert_eq!(
            exponential(-10, 0, (i32::MAX - 1, &[1]), (0, &[]), 1, 0.0, NO_RANGE),
            Err(Reject::BadBuckets)
        );
    }
}
