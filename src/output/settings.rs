//! What an `[[outputs]]` table configures, as `config` reads it.

use std::path::PathBuf;
use std::time::Duration;

use crate::expose::negotiate::Escaping;
pub use crate::expose::push::otlp_streams::Temporality;
use crate::expose::push::Selection;

/// `interval_ms` when unset: Prometheus' default scrape interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(15);
/// `timeout_ms` when unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// `queue_max_bytes` when unset: 64 MiB of compressed batches, several
/// pushes of 100k series (a push of them is about 6 MiB).
pub const DEFAULT_QUEUE_BYTES: usize = 64 << 20;
/// `batch_max_bytes` when unset: uncompressed bytes of one request, about
/// 20k samples, well under every receiver's limit (Mimir 100 MiB,
/// VictoriaMetrics 32 MiB).
pub const DEFAULT_BATCH_BYTES: usize = 2 << 20;
/// `retry_min_ms` and `retry_max_ms` when unset.
pub const DEFAULT_RETRY_MIN: Duration = Duration::from_millis(500);
/// See [`DEFAULT_RETRY_MIN`].
pub const DEFAULT_RETRY_MAX: Duration = Duration::from_secs(30);
/// `stop_timeout_ms` when unset: the final flush at stop.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The protocol an output speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    /// Prometheus remote write (1.0, or 2.0 with `protocol`).
    RemoteWrite,
    /// OTLP/HTTP protobuf metrics (`/v1/metrics`), gzip.
    Otlp,
}

impl OutputKind {
    /// The config spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            OutputKind::RemoteWrite => "remote_write",
            OutputKind::Otlp => "otlp",
        }
    }
}

/// The remote write version an output speaks (`protocol`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// 1.0: `prometheus.WriteRequest`.
    #[default]
    V1,
    /// 2.0: `io.prometheus.write.v2.Request`, falling back to 1.0 for a
    /// receiver that does not speak it.
    V2,
}

impl Protocol {
    /// The config spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::V1 => "1.0",
            Protocol::V2 => "2.0",
        }
    }
}

/// How requests prove who sends them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// No `Authorization` header.
    None,
    /// `Authorization: Bearer <the file's first line>`, re-read at each
    /// request so that a rotated token is used at once.
    Bearer {
        /// `bearer_token_file`.
        token_file: PathBuf,
    },
    /// `Authorization: Basic`, the password re-read from its file at each
    /// request.
    Basic {
        /// `basic_auth.username`.
        username: String,
        /// `basic_auth.password_file`.
        password_file: PathBuf,
    },
}

/// The TLS files of an `https://` output (`[outputs.tls]`): the client's
/// own settings.
pub use super::client::ClientTls as OutputTls;

/// One `[[outputs]]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputDef {
    /// The `output` label of its metrics; unique.
    pub name: String,
    /// The protocol.
    pub kind: OutputKind,
    /// Its version (`protocol`).
    pub protocol: Protocol,
    /// Where batches are POSTed.
    pub url: url::Url,
    /// Time between two pushes.
    pub interval: Duration,
    /// Deadline of one request, connection and TLS included.
    pub timeout: Duration,
    /// Compressed batches waiting, at most, in bytes; the oldest batch is
    /// dropped first.
    pub queue_max_bytes: usize,
    /// Uncompressed bytes of one request at most (a larger family is cut
    /// between samples).
    pub batch_max_bytes: usize,
    /// The first and the longest wait between two tries of a batch.
    pub retry_min: Duration,
    /// See `retry_min`.
    pub retry_max: Duration,
    /// How long the final flush at stop may take.
    pub stop_timeout: Duration,
    /// What is sent.
    pub select: Selection,
    /// How names that are not legacy ones are written (`escaping`).
    pub escaping: Escaping,
    /// `Authorization`.
    pub auth: Auth,
    /// A file of `Name: value` lines sent as headers with each request
    /// (re-read at each push).
    pub headers_file: Option<PathBuf>,
    /// TLS files for `https://`.
    pub tls: OutputTls,
    /// Sums and histograms of an OTLP output: cumulative or delta.
    pub temporality: Temporality,
    /// The resource attributes of an OTLP output (`[outputs.resource]`),
    /// `service.name` among them.
    pub resource: Vec<(String, String)>,
}
