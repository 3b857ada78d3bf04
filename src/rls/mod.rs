//! The rate limit service's settings: domains, descriptor trees and limits.

pub mod settings;
pub use settings::*;
