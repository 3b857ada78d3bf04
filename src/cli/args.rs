//! The command line: flags and subcommands, as clap reads them. The man
//! page and the shell completions are generated from these definitions.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// `rollstat --version`: the version, the git commit and the build profile
/// (build.rs), e.g. `rollstat 0.1.0 (commit 1a2b3c4d5e6f, release build)`.
const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ROLLSTAT_GIT_COMMIT"),
    ", ",
    env!("ROLLSTAT_BUILD_PROFILE"),
    " build)"
);

/// Real-time statsd aggregator with rolling windows, breaker signals and
/// sliding-window rate limits, served on Prometheus /metrics and a JSON API.
#[derive(Parser)]
#[command(name = "rollstat", version = VERSION_LINE, about, long_about = None)]
pub struct Cli {
    /// Config file (see the sample config.toml). Without it, built-in
    /// defaults: statsd on 127.0.0.1:8125 (UDP and TCP), HTTP on 127.0.0.1:9102.
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Log filter, e.g. `info`, `debug`, `rollstat=debug` (or RUST_LOG).
    #[arg(long, default_value = "info", value_name = "FILTER")]
    pub log: String,
    /// Log line format on stderr: `text` for people, `json` for log
    /// shippers (one JSON object per line: timestamp, level, target, fields
    /// with the message).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, value_name = "FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Validate a config file; print every problem and exit non-zero if any.
    CheckConfig {
        /// The file to check.
        file: PathBuf,
    },
    /// Print a statsd_exporter mapping file (YAML) as config.toml
    /// `[[mappings]]` rules with the same meaning, or its problems.
    ConvertMapping {
        /// The statsd_exporter mapping file.
        file: PathBuf,
    },
    /// Health check for containers (no curl needed): GET a URL over plain
    /// HTTP; exit 0 on a 2xx answer, 1 otherwise with the reason on stderr.
    Probe {
        /// The URL to GET (http:// only).
        #[arg(long, default_value = rollstat::probe::DEFAULT_URL)]
        url: String,
        /// Give up after this long in all (connect, send, status line).
        #[arg(long, default_value_t = 2000, value_name = "MS")]
        timeout_ms: u64,
    },
    /// Print a shell completion script to stdout, e.g.
    /// `rollstat completions bash > /etc/bash_completion.d/rollstat`.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout, e.g.
    /// `rollstat man > /usr/local/share/man/man1/rollstat.1`.
    Man,
}

/// `--log-format`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event (colour on a terminal).
    Text,
    /// One JSON object per line.
    Json,
}
