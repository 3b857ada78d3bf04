//! OpenTelemetry metrics (OTLP) as data: the messages, and what rollstat
//! reads out of them.
//!
//! * [`proto`]: the types generated from the vendored schemas under
//!   proto/opentelemetry/ by prost-build and committed (see
//!   proto/README.md; tests/proto_generated.rs checks they are current):
//!   `ExportMetricsServiceRequest` in
//!   `proto::opentelemetry::proto::collector::metrics::v1`, with the
//!   common, resource and metrics packages it uses. The push outputs
//!   write them; the OTLP listeners read them.

pub mod buckets;
pub mod json;
pub mod measure;
pub mod points;
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod proto;
pub mod reject;
pub mod streams;

pub use points::{Data, Point, ReadSettings, Reader};
pub use reject::Reject;
