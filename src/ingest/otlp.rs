//! OTLP data points into the registry: each point read
//! ([`crate::otlp::Reader`]), made an increment, a value or observations
//! ([`crate::otlp::measure`]) and applied as a statsd line would be, with
//! the same mapping rules, caps and counts (`transport="otlp"`).
//!
//! A request is answered with what was not applied: the points refused
//! (counted under their reason in `rollstat_ingest_rejected_lines_total`)
//! and those the registry refused (`rollstat_series_refused_total`), and
//! the first reason, for the `partial_success` the listeners send.

use std::collections::hash_map::RandomState;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Ingestor, Worker};
use crate::clock::Timestamp;
use crate::otlp::measure::{measure, Value};
use crate::otlp::proto::opentelemetry::proto::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use crate::otlp::streams::Streams;
use crate::otlp::{Point, ReadSettings, Reader, Reject};
use crate::series::{Applied, Fold, Measured};
use crate::telemetry::Transport;

/// How OTLP points are read and remembered (`[otlp]`).
#[derive(Clone, Debug, PartialEq)]
pub struct OtlpSettings {
    /// Resource attributes kept, the tolerance on time.
    pub read: ReadSettings,
    /// Cumulative streams remembered at most.
    pub max_streams: usize,
    /// Bytes of bucket counts they may hold.
    pub max_stream_bytes: usize,
    /// A stream not written for this long is forgotten.
    pub stream_ttl: Duration,
}

/// What became of a request's points.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Points applied (or dropped by a mapping rule, or a baseline).
    pub accepted: u64,
    /// Points not applied: refused as read, or by the registry.
    pub rejected: u64,
    /// The reason of the first point not applied, and what it means.
    pub first: Option<(&'static str, &'static str)>,
}

/// The OTLP ingest path: the registry's, plus the streams' memory.
pub struct OtlpIngest {
    ingestor: Arc<Ingestor>,
    settings: OtlpSettings,
    streams: Streams,
    hasher: RandomState,
    /// When the streams were last swept (nanoseconds).
    swept: AtomicU64,
}

impl OtlpIngest {
    /// The path into `ingestor`'s registry.
    #[must_use]
    pub fn new(ingestor: Arc<Ingestor>, settings: OtlpSettings) -> OtlpIngest {
        let streams = Streams::new(
            settings.max_streams,
            settings.max_stream_bytes,
            settings.stream_ttl,
            settings.read.max_age,
        );
        OtlpIngest {
            ingestor,
            settings,
            streams,
            hasher: RandomState::new(),
            swept: AtomicU64::new(0),
        }
    }

    /// The streams remembered.
    #[must_use]
    pub fn streams(&self) -> &Streams {
        &self.streams
    }

    /// Reads the clock once.
    #[must_use]
    pub fn now(&self) -> Timestamp {
        self.ingestor.now()
    }

    /// Applies every point of `req` at `now`.
    pub fn apply(&self, req: &ExportMetricsServiceRequest, now: Timestamp) -> Outcome {
        self.sweep(now);
        let mut w = Worker::default();
        w.counts.packets = 1;
        let mut out = Outcome::default();
        let reader = Reader {
            settings: &self.settings.read,
            hasher: &self.hasher,
            now,
        };
        reader.read(req, |p| {
            let refused = match p {
                Ok(p) => self.point(&p, now, &mut w).err(),
                Err(r) => {
                    w.counts.reject_point(r);
                    Some((r.reason(), r.explain()))
                }
            };
            match refused {
                None => out.accepted += 1,
                Some(why) => {
                    out.rejected += 1;
                    out.first.get_or_insert(why);
                }
            }
        });
        self.ingestor.flush(Transport::Otlp, &mut w);
        out
    }

    /// One point; `Err` with the reason it was not applied.
    fn point(
        &self,
        p: &Point<'_>,
        now: Timestamp,
        w: &mut Worker,
    ) -> Result<(), (&'static str, &'static str)> {
        let measured = measure(p, &self.streams, now).map_err(|r| {
            w.counts.reject_point(r);
            (r.reason(), r.explain())
        })?;
        let Some((kind, value)) = measured else {
            return Ok(());
        };
        let tags: Vec<(&str, &str)> = p.tags.iter().map(|(k, v)| (*k, v.as_ref())).collect();
        let m = Measured {
            name: p.name,
            kind,
            tags: &tags,
            fold: fold(&value),
        };
        match self.ingestor.registry.ingest_measured(&m, now, &mut w.keys) {
            Ok(Applied::Stored) => w.counts.lines += 1,
            Ok(Applied::DroppedByMapping) => w.counts.dropped_by_mapping += 1,
            Err(r) => {
                w.counts.refuse(r);
                return Err((r.reason(), REFUSED));
            }
        }
        Ok(())
    }

    /// Forgets old streams, at most every tenth of their TTL.
    fn sweep(&self, now: Timestamp) {
        let every = u64::try_from((self.settings.stream_ttl / 10).as_nanos()).unwrap_or(u64::MAX);
        let last = self.swept.load(Ordering::Relaxed);
        if now.as_nanos().saturating_sub(last) >= every
            && self
                .swept
                .compare_exchange(last, now.as_nanos(), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.streams.sweep(now);
        }
    }
}

/// What a registry refusal means, for a `partial_success` message.
const REFUSED: &str = "the series was refused (see rollstat_series_refused_total: a type conflict, a series cap, a label collision)";

fn fold(v: &Value) -> Fold<'_> {
    match v {
        Value::Add(x) => Fold::Add(*x),
        Value::Set(x) => Fold::Set(*x),
        Value::Shift(x) => Fold::Shift(*x),
        Value::Aggregate(a) => Fold::Aggregate(a),
    }
}

impl Outcome {
    /// The answer to the request: a `partial_success` when points were not
    /// applied, with how many and why the first was not.
    #[must_use]
    pub fn response(&self) -> ExportMetricsServiceResponse {
        ExportMetricsServiceResponse {
            partial_success: (self.rejected > 0).then(|| ExportMetricsPartialSuccess {
                rejected_data_points: i64::try_from(self.rejected).unwrap_or(i64::MAX),
                error_message: match self.first {
                    Some((reason, why)) => format!(
                        "{} of {} data points were not applied; the first: {reason} ({why})",
                        self.rejected,
                        self.rejected + self.accepted
                    ),
                    None => String::new(),
                },
            }),
        }
    }
}

impl From<Reject> for Outcome {
    fn from(r: Reject) -> Outcome {
        Outcome {
            accepted: 0,
            rejected: 1,
            first: Some((r.reason(), r.explain())),
        }
    }
}
