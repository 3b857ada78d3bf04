//! Mergeable sketches that live inside window buckets.
//!
//! * [`QuantileSketch`]: DDSketch (relative-error quantiles, 1% by default),
//!   from the `sketches-ddsketch` crate, with sample-rate weights.
//! * [`DistinctCounter`]: distinct counts for statsd sets, exact up to
//!   [`DistinctCounter::EXACT_LIMIT`] members, then a HyperLogLog.
//!
//! Both merge, so a window's buckets fold into one sketch on reduce, and
//! (later) instances can merge theirs.

mod distinct;
mod quantile;

pub use distinct::{hash_member, DistinctCounter};
pub use quantile::QuantileSketch;
