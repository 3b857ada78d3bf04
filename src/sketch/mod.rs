//! Mergeable sketches that live inside window buckets.
//!
//! * [`QuantileSketch`], a DDSketch (relative-error quantiles, 1% by default)
//!   with sample-rate weights: a few values inline, then a
//!   [`SparseDDSketch`] (the `sketches-ddsketch` crate's mapping and
//!   quantile rule, with only the bins in use).
//! * [`native::NativeHistogram`]: a Prometheus native (exponential)
//!   histogram, beside a series' classic buckets since its birth.
//! * [`DistinctCounter`]: distinct counts for statsd sets, exact up to
//!   [`DistinctCounter::EXACT_LIMIT`] members, then a HyperLogLog.
//!
//! * [`bins`]: a quantile sketch's bins as a fleet sync sends them, and
//!   their difference since the last sync.
//! * [`redis_hll::RedisHll`]: a HyperLogLog in Redis's own register
//!   layout, so Redis merges and counts what is built here.
//!
//! Both merge, so a window's buckets fold into one sketch on reduce, and
//! (later) instances can merge theirs.

pub mod bins;
pub mod budget;
mod distinct;
pub mod native;
mod quantile;
pub mod rank;
pub mod redis_hll;
pub mod sparse;

pub use distinct::{hash_member, DistinctCounter};
pub use quantile::QuantileSketch;
pub use sparse::SparseDDSketch;
