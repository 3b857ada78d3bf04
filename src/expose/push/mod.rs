//! What rollstat pushes: the remote-write and OTLP messages, generated from
//! the vendored schemas under proto/ by prost-build and committed (see
//! proto/README.md; tests/proto_generated.rs checks they are current).
//!
//! * [`prompb`]: Prometheus remote write 1.0, `prometheus.WriteRequest`;
//! * [`write_v2`]: remote write 2.0, `io.prometheus.write.v2.Request`;
//! * [`otlp`]: OTLP metrics, `ExportMetricsServiceRequest` in
//!   `otlp::opentelemetry::proto::collector::metrics::v1`, with the
//!   common, resource and metrics packages it uses.

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod otlp;
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod prompb;
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod write_v2;

#[cfg(test)]
mod tests;
