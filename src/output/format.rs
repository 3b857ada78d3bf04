//! The protocol an output speaks, in one place: how a push is rendered
//! into request bodies, which headers say what a body is, and what an
//! answer says of the batch it took.
//!
//! Each protocol is one variant of [`Format`]; the rest of the pipeline
//! (queue, client, retries) does not know which it carries.

use std::sync::Arc;

use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use prost::Message as _;

use super::batch::{render, Sent, Source};
use super::batch_otlp::render_otlp;
use super::batch_v2::render_v2;
use super::client::Answer;
use super::queue::Batch;
use super::retry::{of_status, Fate};
use super::settings::{OutputDef, OutputKind, Protocol};
use crate::expose::buffer::ChunkPool;
use crate::otlp::proto::opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceResponse;
use crate::Timestamp;

/// How an output's requests are written and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus remote write 1.0: Snappy `prometheus.WriteRequest`.
    RemoteWrite1,
    /// Prometheus remote write 2.0: Snappy `io.prometheus.write.v2.Request`,
    /// each with its symbols; the answer says how much was written.
    RemoteWrite2,
    /// OTLP/HTTP: a gzipped protobuf `ExportMetricsServiceRequest`; a
    /// 2xx may carry a `partial_success` saying how many points were
    /// rejected.
    Otlp,
}

/// The headers a 2.0 receiver answers with: what it wrote.
const WRITTEN: [&str; 3] = [
    "x-prometheus-remote-write-samples-written",
    "x-prometheus-remote-write-histograms-written",
    "x-prometheus-remote-write-exemplars-written",
];

/// What an answer means for the batch it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// What its status says ([`of_status`]); a 2xx: all of it written.
    Status(Fate),
    /// A 2xx that says fewer were written than sent: the batch is done,
    /// the difference counted.
    Short {
        /// Samples, histograms and exemplars sent but not written.
        unwritten: u64,
    },
    /// The receiver does not speak this format (a 2xx without the
    /// format's answer, or a 415): the batch is not taken, and the output
    /// should speak an older format.
    Unspoken,
}

impl Format {
    /// The format `def` asks for.
    #[must_use]
    pub fn of(def: &OutputDef) -> Format {
        match (def.kind, def.protocol) {
            (OutputKind::RemoteWrite, Protocol::V1) => Format::RemoteWrite1,
            (OutputKind::RemoteWrite, Protocol::V2) => Format::RemoteWrite2,
            (OutputKind::Otlp, _) => Format::Otlp,
        }
    }

    /// The remote write version it is (the `rollstat_output_protocol`
    /// gauge): 1 or 2; 0 for OTLP.
    #[must_use]
    pub fn remote_write_version(self) -> i64 {
        match self {
            Format::RemoteWrite1 => 1,
            Format::RemoteWrite2 => 2,
            Format::Otlp => 0,
        }
    }

    /// The batches of one push of `def`'s selection as of `now`.
    #[must_use]
    pub fn render(
        self,
        source: &Source,
        def: &OutputDef,
        now: Timestamp,
        pool: &Arc<ChunkPool>,
        sent: &mut Sent,
    ) -> Vec<Batch> {
        match self {
            Format::RemoteWrite1 => render(source, def, now, pool, sent),
            Format::RemoteWrite2 => render_v2(source, def, now, pool, sent),
            Format::Otlp => render_otlp(source, def, now, pool, sent),
        }
    }

    /// Sets the headers that say what a body is.
    pub fn headers(self, h: &mut HeaderMap) {
        let set = |h: &mut HeaderMap, k: &'static str, v: &'static str| {
            h.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
        };
        match self {
            Format::RemoteWrite1 => {
                set(h, "content-encoding", "snappy");
                set(h, "content-type", "application/x-protobuf");
                set(h, "x-prometheus-remote-write-version", "0.1.0");
            }
            Format::RemoteWrite2 => {
                set(h, "content-encoding", "snappy");
                set(
                    h,
                    "content-type",
                    "application/x-protobuf;proto=io.prometheus.write.v2.Request",
                );
                set(h, "x-prometheus-remote-write-version", "2.0.0");
            }
            Format::Otlp => {
                set(h, "content-encoding", "gzip");
                set(h, "content-type", "application/x-protobuf");
            }
        }
    }

    /// What `answer` means for `batch`.
    #[must_use]
    pub fn judge(self, answer: &Answer, batch: &Batch) -> Verdict {
        match self {
            Format::RemoteWrite1 => Verdict::Status(of_status(answer.status)),
            Format::RemoteWrite2 => judge_v2(answer, batch),
            Format::Otlp => judge_otlp(answer),
        }
    }
}

/// An OTLP/HTTP answer, as the OTLP specification reads it: 429, 502,
/// 503 and 504 are tried again, every other failure is final; a 2xx whose
/// `partial_success` names rejected points is done, the rejected counted.
fn judge_otlp(answer: &Answer) -> Verdict {
    let status = answer.status.as_u16();
    match status {
        200..=299 => {
            let rejected = ExportMetricsServiceResponse::decode(answer.body.as_ref())
                .ok()
                .and_then(|r| r.partial_success)
                .map_or(0, |p| u64::try_from(p.rejected_data_points).unwrap_or(0));
            if rejected == 0 {
                Verdict::Status(Fate::Sent)
            } else {
                Verdict::Short {
                    unwritten: rejected,
                }
            }
        }
        429 | 502..=504 => Verdict::Status(of_status(answer.status)),
        _ => Verdict::Status(Fate::Refused),
    }
}

/// A 2.0 answer: a 415, or a 2xx without any `Written` header, is a
/// receiver that does not speak 2.0 (a 1.0 receiver reads a 2.0 body as
/// an empty 1.0 request and answers 2xx); a 2xx with them is read.
fn judge_v2(answer: &Answer, batch: &Batch) -> Verdict {
    let status = answer.status.as_u16();
    if status == 415 {
        return Verdict::Unspoken;
    }
    if !answer.status.is_success() {
        return Verdict::Status(of_status(answer.status));
    }
    let written = |name: &str| {
        let v = answer.headers.get(name)?.to_str().ok()?;
        v.trim().parse::<u64>().ok()
    };
    let [samples, histograms, exemplars] = WRITTEN.map(written);
    if samples.is_none() && histograms.is_none() && exemplars.is_none() {
        return Verdict::Unspoken;
    }
    let floats = batch.samples - batch.histograms;
    let unwritten = floats.saturating_sub(samples.unwrap_or(floats))
        + batch
            .histograms
            .saturating_sub(histograms.unwrap_or(batch.histograms));
    if unwritten == 0 {
        Verdict::Status(Fate::Sent)
    } else {
        Verdict::Short { unwritten }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::body::Bytes;
    use hyper::StatusCode;

    /// A one-byte batch said to hold `samples`, `histograms` among them.
    fn batch(samples: u64, histograms: u64, protocol: Protocol) -> Batch {
        Batch {
            body: Bytes::from_static(b"x"),
            samples,
            histograms,
            protocol,
        }
    }

    fn answer(status: u16) -> Answer {
        Answer {
            status: StatusCode::from_u16(status).unwrap(),
            headers: HeaderMap::new(),
            body: Bytes::new(),
        }
    }

    #[test]
    fn remote_write_1_says_snappy_protobuf_0_1_0_and_trusts_the_status() {
        let mut h = HeaderMap::new();
        Format::RemoteWrite1.headers(&mut h);
        assert_eq!(h["content-encoding"], "snappy");
        assert_eq!(h["content-type"], "application/x-protobuf");
        assert_eq!(h["x-prometheus-remote-write-version"], "0.1.0");
        let b = batch(3, 0, Protocol::V1);
        let judge = |s| Format::RemoteWrite1.judge(&answer(s), &b);
        assert_eq!(judge(204), Verdict::Status(Fate::Sent));
        assert_eq!(judge(415), Verdict::Status(Fate::Refused));
        assert!(matches!(judge(503), Verdict::Status(Fate::Retry { .. })));
    }

    fn written(status: u16, headers: &[(&'static str, &'static str)]) -> Answer {
        let mut a = answer(status);
        for (k, v) in headers {
            a.headers.insert(*k, HeaderValue::from_static(v));
        }
        a
    }

    #[test]
    fn remote_write_2_reads_the_written_headers_and_knows_a_receiver_that_does_not_speak_it() {
        let mut h = HeaderMap::new();
        Format::RemoteWrite2.headers(&mut h);
        assert_eq!(h["content-encoding"], "snappy");
        assert_eq!(
            h["content-type"],
            "application/x-protobuf;proto=io.prometheus.write.v2.Request"
        );
        assert_eq!(h["x-prometheus-remote-write-version"], "2.0.0");
        let b = batch(10, 2, Protocol::V2);
        let judge = |a: Answer| Format::RemoteWrite2.judge(&a, &b);
        let s = "x-prometheus-remote-write-samples-written";
        let hw = "x-prometheus-remote-write-histograms-written";
        let e = "x-prometheus-remote-write-exemplars-written";
        let all = [(s, "8"), (hw, "2"), (e, "0")];
        assert_eq!(judge(written(204, &all)), Verdict::Status(Fate::Sent));
        assert_eq!(
            judge(written(200, &[(s, "5"), (hw, "1"), (e, "0")])),
            Verdict::Short { unwritten: 4 }
        );
        assert_eq!(judge(written(204, &[])), Verdict::Unspoken);
        assert_eq!(judge(written(415, &[])), Verdict::Unspoken);
        assert_eq!(judge(written(400, &all)), Verdict::Status(Fate::Refused));
        assert!(matches!(
            judge(written(503, &[])),
            Verdict::Status(Fate::Retry { .. })
        ));
    }

    #[test]
    fn otlp_says_gzip_protobuf_and_counts_a_partial_success_without_retrying_it() {
        use crate::otlp::proto::opentelemetry::proto::collector::metrics::v1::ExportMetricsPartialSuccess;
        let mut h = HeaderMap::new();
        Format::Otlp.headers(&mut h);
        assert_eq!(h["content-encoding"], "gzip");
        assert_eq!(h["content-type"], "application/x-protobuf");
        let b = batch(10, 0, Protocol::V1);
        let partial = |rejected| {
            let r = ExportMetricsServiceResponse {
                partial_success: Some(ExportMetricsPartialSuccess {
                    rejected_data_points: rejected,
                    error_message: "bad".into(),
                }),
            };
            Answer {
                body: r.encode_to_vec().into(),
                ..answer(200)
            }
        };
        let judge = |a: Answer| Format::Otlp.judge(&a, &b);
        assert_eq!(judge(answer(200)), Verdict::Status(Fate::Sent));
        assert_eq!(judge(partial(0)), Verdict::Status(Fate::Sent));
        assert_eq!(judge(partial(3)), Verdict::Short { unwritten: 3 });
        assert_eq!(judge(answer(400)), Verdict::Status(Fate::Refused));
        assert_eq!(judge(answer(500)), Verdict::Status(Fate::Refused));
        assert_eq!(judge(answer(415)), Verdict::Status(Fate::Refused));
        for s in [429, 502, 503, 504] {
            assert!(matches!(
                judge(answer(s)),
                Verdict::Status(Fate::Retry { .. })
            ));
        }
    }
}
