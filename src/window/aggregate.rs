//! Observations counted elsewhere, as a distribution's bucket takes them.

/// Observations counted elsewhere (a histogram's buckets): their exact
/// count, sum and range, and values standing for them (one inside each
/// bucket, weighted by its count) for the quantile sketch and the
/// series' buckets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Aggregate {
    /// How many observations.
    pub count: f64,
    /// Their sum.
    pub sum: f64,
    /// The smallest, or the smallest value standing for them.
    pub min: f64,
    /// The largest, or the largest value standing for them.
    pub max: f64,
    /// `(value, weight)`: the observations as the sketch and the buckets
    /// see them; the weights add up to `count`.
    pub values: Vec<(f64, f64)>,
}
