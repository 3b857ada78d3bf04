//! OTLP data points into the registry: each point read
//! ([`crate::otlp::Reader`]), made an increment, a value or observations
//! ([`crate::otlp::measure`]) and applied as a statsd line would be, with
//! the same mapping rules, caps and counts (`transport="otlp"`).
//!
//! A request is answered with what was not applied: the points refused
//! (counted under their reason in `rollstat_ingest_rejected_lines_total`)
//! and those the registry refused (`rollstat_series_refused_total`), and
//! the first reason, for the `partial_success` the listeners send.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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
    /// Randomly seeded per process (foldhash, as the registry's keys).
    hasher: foldhash::fast::RandomState,
    /// When the streams were last swept (nanoseconds).
    swept: AtomicU64,
    /// Requests applied at once ([`MAX_CONCURRENT_EXPORTS`]).
    slots: Arc<Semaphore>,
}

/// Requests applied at once, over both listeners: more would not go
/// faster on the cores there are, only hold more memory.
pub const MAX_CONCURRENT_EXPORTS: usize = 4;

/// How long a request waits for a slot before it is answered "busy"
/// (HTTP 429, gRPC UNAVAILABLE, both retried by OTLP exporters).
pub const SLOT_WAIT: Duration = Duration::from_secs(1);

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
            hasher: foldhash::fast::RandomState::default(),
            swept: AtomicU64::new(0),
            slots: Arc::new(Semaphore::new(MAX_CONCURRENT_EXPORTS)),
        }
    }

    /// A slot to apply one request in, waiting at most [`SLOT_WAIT`];
    /// `None` when every slot stayed taken (the sender should retry).
    pub async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        tokio::time::timeout(SLOT_WAIT, self.slots.clone().acquire_owned())
            .await
            .ok()?
            .ok()
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
        let t = &self.ingestor.telemetry;
        t.otlp_stream_resets.inc_by(self.streams.take_resets());
        t.otlp_streams
            .set(i64::try_from(self.streams.len()).unwrap_or(i64::MAX));
        out
    }

    /// One point; `Err` with the reason it was not applied.
    fn point(
        &self,
        p: &Point<'_, '_>,
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
        let m = Measured {
            name: p.name,
            kind,
            tags: p.tags,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::config::Config;
    use crate::otlp::proto::opentelemetry::proto::metrics::v1::{
        exponential_histogram_data_point::Buckets, metric, number_data_point,
        summary_data_point::ValueAtQuantile, ExponentialHistogram, ExponentialHistogramDataPoint,
        Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, Summary, SummaryDataPoint,
    };
    use crate::series::{Plan, Registry, SeriesState};
    use crate::service::{ServiceHandle, Services};
    use crate::telemetry::Telemetry;

    const CFG: &str = "[listen]\notlp_http = \"127.0.0.1:0\"\n[series]\nnative_histogram_bucket_factor = 1.1\n[[windows]]\nname = \"1m\"\nbuckets = 60\ninterval_ms = 1000\n";

    fn otlp() -> (OtlpIngest, Arc<Registry>, Timestamp) {
        otlp_with("")
    }

    /// The path over [`CFG`] and `extra`.
    fn otlp_with(extra: &str) -> (OtlpIngest, Arc<Registry>, Timestamp) {
        let cfg = Config::parse(&format!("{CFG}{extra}")).unwrap();
        let clock = ManualClock::new();
        let now = clock.now();
        let services = Services::new(cfg.service_settings(), now, None).unwrap();
        let registry = Arc::new(Registry::new(Plan::new(cfg.series_settings()), 4));
        let ingestor = Ingestor::new(
            registry.clone(),
            Arc::new(Telemetry::new().unwrap()),
            Arc::new(clock),
            Arc::new(ServiceHandle::new(services)),
        );
        (
            OtlpIngest::new(Arc::new(ingestor), cfg.otlp_settings()),
            registry,
            now,
        )
    }

    fn request(m: Metric) -> ExportMetricsServiceRequest {
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![m],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    fn counter(value: i64, start: u64) -> ExportMetricsServiceRequest {
        request(Metric {
            name: "hits".into(),
            data: Some(metric::Data::Sum(Sum {
                aggregation_temporality: 2,
                is_monotonic: true,
                data_points: vec![NumberDataPoint {
                    start_time_unix_nano: start,
                    value: Some(number_data_point::Value::AsInt(value)),
                    ..Default::default()
                }],
            })),
            ..Default::default()
        })
    }

    fn total(r: &Registry) -> f64 {
        let mut t = f64::NAN;
        r.visit(|_, s| {
            if let SeriesState::Counter { total, .. } = s {
                t = *total;
            }
        });
        t
    }

    #[test]
    fn a_cumulative_counter_adds_what_it_grew_by_and_a_restart_counts_whole() {
        let (o, r, now) = otlp();
        let start = now.as_nanos() - 1_000_000_000;
        // A drop is a reset too: the 2 counted whole.
        for (v, want) in [(5, 5.0), (8, 8.0), (8, 8.0), (2, 10.0)] {
            let out = o.apply(&counter(v, start), now);
            assert_eq!((out.accepted, out.rejected), (1, 0));
            assert_eq!(total(&r), want, "after {v}");
        }
        // The sender restarted: a new start time, counted whole.
        o.apply(&counter(3, start + 10), now);
        assert_eq!(total(&r), 13.0);
        assert_eq!(o.streams().len(), 1);
        let t = &o.ingestor.telemetry;
        assert_eq!((t.otlp_stream_resets.get(), t.otlp_streams.get()), (2, 1));
    }

    #[test]
    fn an_exponential_histogram_fills_a_native_histogram_of_its_scale_exactly() {
        let (o, r, now) = otlp();
        let point = ExponentialHistogramDataPoint {
            scale: 3,
            count: 7,
            sum: Some(10.0),
            zero_count: 1,
            positive: Some(Buckets {
                offset: 5,
                bucket_counts: vec![1, 2, 3],
            }),
            ..Default::default()
        };
        let req = request(Metric {
            name: "lat".into(),
            data: Some(metric::Data::ExponentialHistogram(ExponentialHistogram {
                aggregation_temporality: 1,
                data_points: vec![point],
            })),
            ..Default::default()
        });
        assert_eq!(o.apply(&req, now).rejected, 0);
        let mut counts = None;
        r.visit(|_, s| {
            if let SeriesState::Distribution { histogram, .. } = s {
                assert_eq!((histogram.count, histogram.sum), (7.0, 10.0));
                let n = histogram.native.as_ref().expect("a native histogram");
                assert_eq!(n.histogram.schema(), 3);
                counts = Some(n.histogram.integer_counts(7));
            }
        });
        let counts = counts.expect("the series");
        // OTLP's bucket k is Prometheus' k + 1.
        assert_eq!(counts.positive, vec![(6, 1), (7, 2), (8, 3)]);
        assert_eq!(counts.zero, 1);
    }

    #[test]
    fn the_answer_names_how_many_points_were_not_applied_and_why_the_first() {
        let (o, _, now) = otlp();
        let mut req = counter(-1, 0);
        req.resource_metrics.extend(counter(1, 0).resource_metrics);
        let out = o.apply(&req, now);
        assert_eq!((out.accepted, out.rejected), (1, 1));
        let p = out.response().partial_success.unwrap();
        assert_eq!(p.rejected_data_points, 1);
        assert!(
            p.error_message
                .starts_with("1 of 2 data points were not applied; the first: otlp_bad_value"),
            "{}",
            p.error_message
        );
        assert_eq!(
            o.apply(&counter(1, 0), now).response().partial_success,
            None
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waits_a_second_for_a_slot_then_is_told_to_come_back() {
        let (o, _, _) = otlp();
        let mut held = Vec::new();
        for _ in 0..MAX_CONCURRENT_EXPORTS {
            held.push(o.slot().await.expect("a free slot"));
        }
        assert!(o.slot().await.is_none());
        held.pop();
        assert!(o.slot().await.is_some());
    }

    fn summary(name: &str, count: u64, sum: f64, start: u64) -> ExportMetricsServiceRequest {
        let q = |quantile, value| ValueAtQuantile { quantile, value };
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![Metric {
                        name: name.into(),
                        data: Some(metric::Data::Summary(Summary {
                            data_points: vec![SummaryDataPoint {
                                start_time_unix_nano: start,
                                count,
                                sum,
                                quantile_values: vec![q(0.0, 0.5), q(0.5, 1.0), q(1.0, 4.0)],
                                ..Default::default()
                            }],
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    /// `(metric, samples, sum, min, max)` of a series' window.
    type Window = (String, f64, f64, Option<f64>, Option<f64>);

    /// Each series' window.
    fn windows(r: &Registry, now: Timestamp) -> Vec<Window> {
        let mut out = Vec::new();
        r.visit(|m, s| {
            let v = s.window_view(0, now, &[]);
            out.push((m.prom_name.to_string(), v.samples, v.sum, v.min, v.max));
        });
        out
    }

    #[test]
    fn a_summary_adds_the_change_of_its_count_and_sum_and_its_range_once() {
        let (o, r, now) = otlp();
        let start = now.as_nanos() - 1_000_000_000;
        o.apply(&summary("rpc", 4, 6.0, start), now);
        o.apply(&summary("rpc", 10, 15.0, start), now);
        assert_eq!(
            windows(&r, now),
            vec![("rpc".to_string(), 10.0, 15.0, Some(0.5), Some(4.0))]
        );
    }

    #[test]
    fn a_mapping_rule_renames_otlp_points_as_it_renames_statsd_lines() {
        let rule = "[[mappings]]\nmatch = \"svc.*.latency\"\nrename = \"latency\"\nlabels = { service = \"$1\" }\n";
        let (o, r, now) = otlp_with(rule);
        o.apply(&summary("svc.api.latency", 2, 3.0, now.as_nanos()), now);
        let mut seen = Vec::new();
        r.visit(|m, _| seen.push((m.prom_name.to_string(), m.labels.clone())));
        assert_eq!(
            seen,
            vec![(
                "latency".to_string(),
                vec![("service".to_string(), "api".to_string())]
            )]
        );
    }
}
