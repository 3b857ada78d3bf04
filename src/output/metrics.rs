//! The outputs' self-metrics: the `rollstat_output_*` families (declared
//! in [`crate::family::table`]), registered with the other self-metrics.

use prometheus::{Gauge, GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

use crate::family::table as t;

/// What became of a batch (`result` of `rollstat_output_batches_total`).
pub mod result {
    /// The receiver answered 2xx.
    pub const SENT: &str = "sent";
    /// The receiver answered a 4xx other than 429: not retried.
    pub const REFUSED: &str = "refused";
    /// Dropped unsent to keep the queue within `queue_max_bytes`.
    pub const QUEUE_FULL: &str = "queue_full";
    /// Still queued when the final flush at stop ran out of time.
    pub const STOP_DEADLINE: &str = "stop_deadline";
    /// Queued for an output a reload removed.
    pub const REMOVED: &str = "removed";
    /// Every result, in the HELP text's order.
    pub const ALL: [&str; 5] = [SENT, REFUSED, QUEUE_FULL, STOP_DEADLINE, REMOVED];
}

/// Why a try is retried (`reason` of `rollstat_output_retries_total`).
pub mod retry {
    /// A 5xx answer.
    pub const SERVER_ERROR: &str = "server_error";
    /// A 429 answer.
    pub const TOO_MANY_REQUESTS: &str = "too_many_requests";
    /// Every reason, in the HELP text's order (the client's failures
    /// after the two answers).
    pub const ALL: [&str; 6] = [
        SERVER_ERROR,
        TOO_MANY_REQUESTS,
        "connect",
        "tls",
        "timeout",
        "protocol",
    ];
}

/// The `rollstat_output_*` families.
#[derive(Clone)]
pub struct OutputFamilies {
    batches: IntCounterVec,
    samples: IntCounterVec,
    bytes: IntCounterVec,
    retries: IntCounterVec,
    queue: IntGaugeVec,
    last_success: GaugeVec,
    push_seconds: GaugeVec,
    unwritten: IntCounterVec,
    protocol: IntGaugeVec,
}

/// One output's counters, every label value created at 0.
#[derive(Clone)]
pub struct OutputCounters {
    batches: Vec<IntCounter>,
    samples: Vec<IntCounter>,
    retries: Vec<IntCounter>,
    /// Compressed bytes accepted.
    pub bytes: IntCounter,
    /// Bytes queued now.
    pub queue: IntGauge,
    /// Unix seconds of the last 2xx.
    pub last_success: Gauge,
    /// Seconds the last push took to write.
    pub push_seconds: Gauge,
    /// Samples a 2.0 receiver took but did not write.
    pub unwritten: IntCounter,
    /// The remote write version spoken now (1 or 2).
    pub protocol: IntGauge,
}

impl OutputCounters {
    /// Counts a batch of `samples` under `result` (one of [`result::ALL`]).
    pub fn batch(&self, result: &str, samples: u64) {
        let i = result::ALL.iter().position(|r| *r == result).unwrap_or(0);
        self.batches[i].inc();
        self.samples[i].inc_by(samples);
    }

    /// Counts a failed try under `reason` (one of [`retry::ALL`]).
    pub fn retry(&self, reason: &str) {
        let i = retry::ALL.iter().position(|r| *r == reason).unwrap_or(0);
        self.retries[i].inc();
    }
}

impl OutputFamilies {
    /// The families, registered in `r`.
    pub fn register(r: &Registry) -> prometheus::Result<OutputFamilies> {
        fn add<C: prometheus::core::Collector + Clone + 'static>(
            r: &Registry,
            c: C,
        ) -> prometheus::Result<C> {
            r.register(Box::new(c.clone()))?;
            Ok(c)
        }
        Ok(OutputFamilies {
            batches: add(r, t::OUTPUT_BATCHES_TOTAL.int_counter_vec()?)?,
            samples: add(r, t::OUTPUT_SAMPLES_TOTAL.int_counter_vec()?)?,
            bytes: add(r, t::OUTPUT_SENT_BYTES_TOTAL.int_counter_vec()?)?,
            retries: add(r, t::OUTPUT_RETRIES_TOTAL.int_counter_vec()?)?,
            queue: add(r, t::OUTPUT_QUEUE_BYTES.int_gauge_vec()?)?,
            last_success: add(r, t::OUTPUT_LAST_SUCCESS_SECONDS.gauge_vec()?)?,
            push_seconds: add(r, t::OUTPUT_PUSH_SECONDS.gauge_vec()?)?,
            unwritten: add(r, t::OUTPUT_UNWRITTEN_SAMPLES_TOTAL.int_counter_vec()?)?,
            protocol: add(r, t::OUTPUT_PROTOCOL.int_gauge_vec()?)?,
        })
    }

    /// The counters of the output named `output`.
    #[must_use]
    pub fn counters(&self, output: &str) -> OutputCounters {
        let each = |v: &IntCounterVec, all: &[&str]| {
            all.iter()
                .map(|x| v.with_label_values(&[output, x]))
                .collect()
        };
        OutputCounters {
            batches: each(&self.batches, &result::ALL),
            samples: each(&self.samples, &result::ALL),
            retries: each(&self.retries, &retry::ALL),
            bytes: self.bytes.with_label_values(&[output]),
            queue: self.queue.with_label_values(&[output]),
            last_success: self.last_success.with_label_values(&[output]),
            push_seconds: self.push_seconds.with_label_values(&[output]),
            unwritten: self.unwritten.with_label_values(&[output]),
            protocol: self.protocol.with_label_values(&[output]),
        }
    }
}
