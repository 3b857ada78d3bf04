//! The protocol an output speaks, in one place: how a push is rendered
//! into request bodies, which headers say what a body is, and what an
//! answer says of the batch it took.
//!
//! Each protocol is one variant of [`Format`]; the rest of the pipeline
//! (queue, client, retries) does not know which it carries.

use std::sync::Arc;

use hyper::header::{HeaderMap, HeaderName, HeaderValue};

use super::batch::{render, Sent, Source};
use super::client::Answer;
use super::queue::Batch;
use super::retry::{of_status, Fate};
use super::settings::{OutputDef, OutputKind};
use crate::expose::buffer::ChunkPool;
use crate::Timestamp;

/// How an output's requests are written and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus remote write 1.0: Snappy `prometheus.WriteRequest`.
    RemoteWrite1,
}

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
        match def.kind {
            OutputKind::RemoteWrite => Format::RemoteWrite1,
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
        }
    }

    /// What `answer` means for `batch`.
    #[must_use]
    pub fn judge(self, answer: &Answer, batch: &Batch) -> Verdict {
        let _ = batch;
        match self {
            Format::RemoteWrite1 => Verdict::Status(of_status(answer.status)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::body::Bytes;
    use hyper::StatusCode;

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
        let b = Batch {
            body: Bytes::from_static(b"x"),
            samples: 3,
        };
        let judge = |s| Format::RemoteWrite1.judge(&answer(s), &b);
        assert_eq!(judge(204), Verdict::Status(Fate::Sent));
        assert_eq!(judge(415), Verdict::Status(Fate::Refused));
        assert!(matches!(judge(503), Verdict::Status(Fate::Retry { .. })));
    }
}
