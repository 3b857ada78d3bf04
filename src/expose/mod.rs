//! Read-only views of the registry: Prometheus and OpenMetrics exposition,
//! the JSON API's shapes.
//!
//! `/metrics` is built from these parts:
//!
//! * `families.rs`: the rules (names, HELP texts, labels, which value each
//!   family shows per statsd type and window), and the crate-model
//!   builders the other families use;
//! * [`text`]: the series families written straight as text, over
//!   `encode.rs` (one escaper per format, labels, headers, numbers) and
//!   `buffer.rs` (pooled chunks, the body's pieces);
//! * [`prometheus`]: the same families in the `prometheus` crate's model,
//!   and the collector of everything else; [`openmetrics`] encodes that
//!   model as OpenMetrics (the crate's `TextEncoder` does text 0.0.4);
//! * [`signals`]: the breaker and limit families; `fleet.rs`: the fleet
//!   view of shared windows.

pub(crate) mod buffer;
pub(crate) mod encode;
pub(crate) mod families;
pub(crate) mod fleet;
pub mod json;
pub mod openmetrics;
pub mod page;
pub mod paging;
pub mod prometheus;
pub mod signals;
pub mod text;

#[cfg(test)]
mod tests;
