//! The binary's subcommands, one file each, and what they share: how an
//! error that stops the binary is reported (`report`), and logging.
//!
//! Their log lines name the target `rollstat` (the binary's own), not the
//! file they come from, as they did when all of this was src/main.rs.

pub mod args;
pub mod check_config;
pub mod completions;
pub mod convert_mapping;
pub mod logging;
pub mod man;
pub mod probe;
pub mod run;
pub mod signals;

pub use logging::report;
