//! Read-only views of the registry: Prometheus and OpenMetrics exposition,
//! the JSON API's shapes.

pub mod buffer;
pub mod encode;
pub mod json;
pub mod openmetrics;
pub mod page;
pub mod paging;
pub mod prometheus;
pub mod signals;
pub mod text;

#[cfg(test)]
mod tests;
