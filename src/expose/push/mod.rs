//! What rollstat pushes: the families `/metrics` serves, written as
//! remote-write requests for the outputs (`[[outputs]]`) to send, and the
//! messages of the push protocols.
//!
//! * `select.rs`: which families and series an output sends;
//! * `labels.rs`: a sample's sorted label set, encoded once per series;
//! * `remote_write.rs`: remote write 1.0 `TimeSeries` fields from the
//!   registry walk and from the `prometheus` crate's model;
//! * `remote_write_v2.rs`: the same series staged for remote write 2.0
//!   (with type, HELP, start times, native histograms); `requests_v2.rs`:
//!   staged series into 2.0 requests, each with its own symbols table;
//! * `otlp_points.rs`: a family of the protobuf exposition as OTLP
//!   metrics; `otlp_streams.rs`: what an OTLP output remembers of each
//!   stream between pushes (start times, delta temporality);
//! * the types generated from the vendored schemas under proto/ by
//!   prost-build and committed (see proto/README.md;
//!   tests/proto_generated.rs checks they are current): [`prompb`]
//!   (remote write 1.0, `prometheus.WriteRequest`), [`write_v2`] (remote
//!   write 2.0, `io.prometheus.write.v2.Request`); the OTLP messages are
//!   [`crate::otlp::proto`]'s. `schema_tests.rs` pins their field numbers.

mod labels;
pub mod otlp_points;
pub mod otlp_streams;
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod prompb;
pub mod remote_write;
pub mod remote_write_v2;
pub mod requests_v2;
pub mod select;
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod write_v2;

pub use self::select::{Groups, Selection};

#[cfg(test)]
mod schema_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_v2;
