//! A data point as what it adds to its series: the statsd type its
//! series has and a [`Value`], cumulative points turned into increments
//! through [`Streams`].
//!
//! | OTLP | series | adds |
//! |---|---|---|
//! | Gauge | gauge | the value |
//! | Sum, monotonic, delta | counter | the value |
//! | Sum, monotonic, cumulative | counter | what the total grew by |
//! | Sum, not monotonic, delta | gauge | the change |
//! | Sum, not monotonic, cumulative | gauge | the value |
//! | Histogram, ExponentialHistogram | histogram | the count, sum and buckets (of the change, when cumulative) |
//! | Summary | histogram | the count and sum of the change; min and max from quantiles 0 and 1 |

use super::buckets::{self, sides};
use super::points::{Data, Point};
use super::proto::opentelemetry::proto::metrics::v1::{
    ExponentialHistogramDataPoint, HistogramDataPoint, SummaryDataPoint,
};
use super::reject::Reject;
use super::streams::{Change, Last, Streams};
use crate::clock::Timestamp;
use crate::parse::MetricKind;
use crate::window::Aggregate;

/// What a point adds, owned.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A counter's increment.
    Add(f64),
    /// A gauge's value.
    Set(f64),
    /// A gauge's change.
    Shift(f64),
    /// Observations.
    Aggregate(Aggregate),
}

/// The series type of `p` and what it adds; `None` when it adds nothing
/// (the first point of a stream that started long ago: a baseline).
///
/// # Errors
///
/// The point's [`Reject`].
pub fn measure(
    p: &Point<'_, '_>,
    streams: &Streams,
    now: Timestamp,
) -> Result<Option<(MetricKind, Value)>, Reject> {
    let note = |last: Last| streams.note(p.stream, p.start, last, now);
    Ok(match p.data {
        Data::Gauge(v) => Some((MetricKind::Gauge, Value::Set(v))),
        Data::Sum {
            value,
            monotonic: true,
            cumulative,
        } => {
            let inc = if cumulative {
                match note(Last::Sum(value))? {
                    Change::Whole => Some(value),
                    Change::Since(Last::Sum(d)) => Some(d),
                    _ => None,
                }
            } else {
                Some(value)
            };
            inc.map(|v| (MetricKind::Counter, Value::Add(v)))
        }
        Data::Sum {
            value, cumulative, ..
        } => Some((
            MetricKind::Gauge,
            if cumulative {
                Value::Set(value)
            } else {
                Value::Shift(value)
            },
        )),
        Data::Histogram(h, cumulative) => explicit(h, cumulative, note)?,
        Data::Exponential(h, cumulative) => exponential(h, cumulative, note)?,
        Data::Summary(s) => summary(s, note)?,
    })
}

type Measured = Option<(MetricKind, Value)>;

fn histogram(a: Aggregate) -> Measured {
    Some((MetricKind::Histogram, Value::Aggregate(a)))
}

/// The range a point sends, NaN where it does not.
fn range(min: Option<f64>, max: Option<f64>) -> (f64, f64) {
    (min.unwrap_or(f64::NAN), max.unwrap_or(f64::NAN))
}

/// A change's range is not sent: its values are placed within the whole
/// stream's range (which holds them), and its own range is theirs.
fn unranged(mut a: Aggregate) -> Aggregate {
    a.min = a.values.iter().map(|v| v.0).fold(f64::INFINITY, f64::min);
    a.max = a
        .values
        .iter()
        .map(|v| v.0)
        .fold(f64::NEG_INFINITY, f64::max);
    a
}

/// No range: exponential buckets are placed by their bounds alone.
const NO_RANGE: (f64, f64) = (f64::NAN, f64::NAN);

fn explicit(
    h: &HistogramDataPoint,
    cumulative: bool,
    note: impl FnOnce(Last) -> Result<Change, Reject>,
) -> Result<Measured, Reject> {
    let read =
        |counts: &[u64], count, sum| buckets::explicit(h, counts, count, sum, range(h.min, h.max));
    let whole = read(&h.bucket_counts, h.count, h.sum.unwrap_or(f64::NAN))?;
    let last = |sum| Last::Counts {
        count: h.count,
        sum,
        scale: 0,
        sides: vec![(0, h.bucket_counts.clone())],
    };
    let since =
        |count, sum, sides: &[(i32, Vec<u64>)]| Ok(unranged(read(&sides[0].1, count, sum)?));
    of_buckets(whole, h.sum.is_some(), cumulative, last, note, since)
}

fn exponential(
    h: &ExponentialHistogramDataPoint,
    cumulative: bool,
    note: impl FnOnce(Last) -> Result<Change, Reject>,
) -> Result<Measured, Reject> {
    let (pos, neg) = sides(h);
    let sum = h.sum.unwrap_or(f64::NAN);
    let (zero, count) = (h.zero_count, h.count);
    let whole = buckets::exponential(h.scale, zero, pos, neg, count, sum, range(h.min, h.max))?;
    let last = |sum| Last::Counts {
        count: h.count,
        sum,
        scale: h.scale,
        sides: vec![
            (0, vec![h.zero_count]),
            (pos.0, pos.1.to_vec()),
            (neg.0, neg.1.to_vec()),
        ],
    };
    let since = |count, sum, sides: &[(i32, Vec<u64>)]| {
        let zero = sides[0].1.first().copied().unwrap_or(0);
        let (p, n) = (&sides[1], &sides[2]);
        buckets::exponential(
            h.scale,
            zero,
            (p.0, &p.1),
            (n.0, &n.1),
            count,
            sum,
            NO_RANGE,
        )
    };
    of_buckets(whole, h.sum.is_some(), cumulative, last, note, since)
}

/// A histogram point of either kind, read `whole`: its sum from its
/// values when none was sent; when cumulative, what changed since its
/// stream's `last`, read by `since` from the counts of the change.
fn of_buckets(
    mut whole: Aggregate,
    sum_sent: bool,
    cumulative: bool,
    last: impl FnOnce(f64) -> Last,
    note: impl FnOnce(Last) -> Result<Change, Reject>,
    since: impl FnOnce(u64, f64, &[(i32, Vec<u64>)]) -> Result<Aggregate, Reject>,
) -> Result<Measured, Reject> {
    if !sum_sent {
        whole.sum = whole.values.iter().map(|(v, w)| v * w).sum();
    }
    if !cumulative {
        return Ok(histogram(whole));
    }
    Ok(match note(last(whole.sum))? {
        Change::Whole => histogram(whole),
        Change::Since(Last::Counts {
            count, sum, sides, ..
        }) => histogram(since(count, sum, &sides)?),
        Change::Since(Last::Sum(_)) | Change::Baseline => None,
    })
}

fn summary(
    s: &SummaryDataPoint,
    note: impl FnOnce(Last) -> Result<Change, Reject>,
) -> Result<Measured, Reject> {
    let at = |q: f64| {
        s.quantile_values
            .iter()
            .find(|v| v.quantile == q)
            .map(|v| v.value)
    };
    let last = Last::Counts {
        count: s.count,
        sum: s.sum,
        scale: 0,
        sides: Vec::new(),
    };
    let (count, sum, range) = match note(last)? {
        Change::Whole => (s.count, s.sum, (at(0.0), at(1.0))),
        Change::Since(Last::Counts { count, sum, .. }) => (count, sum, (None, None)),
        _ => return Ok(None),
    };
    Ok(histogram(Aggregate {
        count: count as f64,
        sum,
        min: range.0.unwrap_or(f64::NAN),
        max: range.1.unwrap_or(f64::NAN),
        values: Vec::new(),
    }))
}
