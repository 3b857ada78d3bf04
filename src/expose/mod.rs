//! Read-only views of the registry: Prometheus exposition and names.

pub mod names;
pub mod prometheus;
