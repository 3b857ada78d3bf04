//! The `rollstat` binary: the command line (src/cli/args.rs), then the
//! subcommand asked for, each in its own file under src/cli/; without one,
//! the daemon (src/cli/run.rs).

// Functions short enough to read at once (threshold in .clippy.toml).
#![deny(clippy::too_many_lines)]

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::args::{Cli, Command};

/// mimalloc: OTLP requests decode into many small strings and vectors
/// that live one request long, which glibc's allocator served at about a
/// third of the instructions a point cost (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::CheckConfig { file }) => cli::check_config::run(file),
        Some(Command::ConvertMapping { file }) => cli::convert_mapping::run(file),
        Some(Command::Probe { url, timeout_ms }) => cli::probe::run(url, *timeout_ms),
        Some(Command::Completions { shell }) => cli::completions::run(*shell),
        Some(Command::Man) => cli::man::run(),
        None => cli::run::run(&cli),
    }
}
