//! Why a data point was not applied: stable reasons, counted under
//! `reason` in `rollstat_ingest_rejected_lines_total` beside the statsd
//! parser's, and named first in a `partial_success` message.

/// Why a data point of an OTLP request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reject {
    /// A metric without a name, or a name over the statsd name cap.
    BadName,
    /// More attributes (with the resource attributes kept) than a statsd
    /// line may carry tags, a key or value longer than a tag's, or a
    /// value that is not a string, boolean, integer or double.
    BadAttributes,
    /// A number point without a value, or a NaN or infinite value, sum,
    /// min or max; a negative value of a monotonic sum.
    BadValue,
    /// Bucket counts that do not fit their bounds (one more count than
    /// bounds), bounds not increasing, counts that do not add up to the
    /// point's count, or an exponential scale outside -10..=20.
    BadBuckets,
    /// A sum whose aggregation temporality is unspecified, or a metric
    /// without data.
    BadTemporality,
    /// A point older than the oldest bucket of every window.
    TooOld,
    /// A point further ahead of rollstat's clock than the tolerance.
    TooNew,
    /// A cumulative point of a stream rollstat cannot keep (the stream
    /// cap, `series.max_series`, is reached).
    StreamCap,
}

impl Reject {
    /// Every reason label, in declaration order.
    pub const ALL_REASONS: [&'static str; 8] = [
        "otlp_bad_name",
        "otlp_bad_attributes",
        "otlp_bad_value",
        "otlp_bad_buckets",
        "otlp_bad_temporality",
        "too_old",
        "too_new",
        "otlp_stream_cap",
    ];

    /// The stable label it is counted under.
    #[must_use]
    pub const fn reason(self) -> &'static str {
        Self::ALL_REASONS[self as usize]
    }

    /// What was wrong, for an operator reading a `partial_success`.
    #[must_use]
    pub const fn explain(self) -> &'static str {
        match self {
            Reject::BadName => "a metric without a name, or a name over 256 bytes",
            Reject::BadAttributes => {
                "more than 64 attributes, a key over 128 or a value over 256 bytes, or a value that is not a string, boolean, integer or double"
            }
            Reject::BadValue => {
                "a point without a value, a NaN or infinite value, or a negative value of a monotonic sum"
            }
            Reject::BadBuckets => {
                "bucket counts that do not match the bounds or the count, or an exponential scale outside -10..=20"
            }
            Reject::BadTemporality => {
                "a sum or histogram whose aggregation temporality is unspecified, or a metric without data"
            }
            Reject::TooOld => "a point older than the oldest bucket of every window",
            Reject::TooNew => "a point too far ahead of the receiver's clock",
            Reject::StreamCap => "a new cumulative stream beyond the stream cap (series.max_series)",
        }
    }
}
