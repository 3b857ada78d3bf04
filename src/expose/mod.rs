//! Read-only views of the registry: Prometheus and OpenMetrics exposition,
//! the JSON API's shapes.
//!
//! `/metrics` is built from these parts:
//!
//! * [`negotiate`]: which format and name escaping a scraper's `Accept`
//!   asks for, and the `Content-Type` answered; [`escaping`]: the name
//!   escaping schemes;
//! * `families.rs`: the rules (names under each escaping scheme, HELP
//!   texts, labels, which value each family shows per statsd type and
//!   window), and the crate-model builders the other families use;
//! * `walk.rs`: the registry walk every series writer shares, which
//!   gathers each family's samples behind one header;
//! * [`text`]: the series families written as text (0.0.4, 1.0.0,
//!   OpenMetrics), over `encode.rs` (one escaper per format, labels,
//!   headers, numbers) and `buffer.rs` (pooled chunks, the body's pieces);
//! * [`proto`]: the same families as delimited protobuf, with start times
//!   and native histograms;
//! * [`prometheus`]: the same families in the `prometheus` crate's model,
//!   and the collector of everything else; [`openmetrics`] encodes that
//!   model as OpenMetrics (the crate's `TextEncoder` does text 0.0.4);
//! * [`signals`]: the breaker and limit families; `fleet.rs`: the fleet
//!   view of shared windows.
//!
//! [`push`] holds the messages rollstat pushes (remote write 1.0 and 2.0,
//! OTLP metrics), generated from the vendored schemas.

pub(crate) mod buffer;
pub(crate) mod encode;
pub mod escaping;
pub(crate) mod families;
pub(crate) mod fleet;
pub mod json;
pub mod negotiate;
pub mod openmetrics;
pub mod page;
pub mod paging;
pub mod prometheus;
pub mod proto;
pub mod push;
pub mod signals;
pub mod text;
mod walk;

#[cfg(test)]
mod tests;
