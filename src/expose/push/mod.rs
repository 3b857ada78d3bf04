//! What rollstat pushes: the families `/metrics` serves, written as
//! remote-write requests for the outputs (`[[outputs]]`) to send.
//!
//! * `select.rs`: which families and series an output sends;
//! * `labels.rs`: a sample's sorted label set, encoded once per series;
//! * `remote_write.rs`: remote write 1.0 `TimeSeries` fields from the
//!   registry walk and from the `prometheus` crate's model.

mod labels;
pub mod remote_write;
pub mod select;

pub use self::select::{Groups, Selection};

#[cfg(test)]
mod tests;
