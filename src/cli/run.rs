//! `rollstat` without a subcommand: the daemon. Logging, the config, the
//! sockets bound, then `daemon::run` on a tokio runtime until a stop
//! signal.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use rollstat::config::{Config, ConfigError};
use rollstat::daemon::{self, Listeners};
use rollstat::ingest::fault::{self, Faults};
use rollstat::series::footprint;
use rollstat::SystemClock;

use super::args::{Cli, LogFormat};
use super::logging;
use super::report;
use super::signals::shutdown_signal;

/// What stopped the daemon, already reported: the exit status.
type Stopped = ExitCode;

pub fn run(cli: &Cli) -> ExitCode {
    logging::init(&cli.log, cli.log_format);
    match start(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

/// From the config to the daemon's end.
fn start(cli: &Cli) -> Result<(), Stopped> {
    let cfg = load(cli.config.as_ref())?;
    // Before binding: every connection the caps allow needs a descriptor.
    rollstat::fdlimit::raise_at_start(&cfg);
    let listeners = Listeners::bind(&cfg).map_err(|e| stop(&e, 1))?;
    refuse_relay_loops(&cfg, cli.config.as_ref(), &listeners)?;
    let faults = faults()?;
    limit_sketches(&cfg);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| stop(&RuntimeError(e), 1))?;
    // The bound addresses, for the ready line.
    let bound = listeners.bound();
    let addresses = bound.describe();
    let log_format = cli.log_format;
    let result = runtime.block_on(daemon::run(
        cfg,
        cli.config.clone(),
        listeners,
        Arc::new(SystemClock::new()),
        faults,
        // Once the state is built: tests and scripts read this line to
        // learn the bound ports, and may send at once.
        || {
            ready_line(&bound, log_format);
            tracing::info!(target: "rollstat", addresses = %addresses, "rollstat started.");
        },
        shutdown_signal(),
    ));
    // A reload stuck reading a file (a hung network mount) holds a
    // blocking thread; the stop has drained everything else by now.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result.map_err(|e| stop(&e, 1))
}

/// Reports `e` and gives the exit status `code`.
fn stop(e: &(dyn std::error::Error + 'static), code: u8) -> Stopped {
    report(e);
    ExitCode::from(code)
}

/// The config file, or the built-in defaults without one.
fn load(path: Option<&PathBuf>) -> Result<Config, Stopped> {
    match path {
        Some(path) => Config::load(path).map_err(|e| stop(&e, 2)),
        None => Ok(Config::default()),
    }
}

/// A relay to one of the sockets just bound would feed itself without
/// end: refused before anything starts (the names resolved).
fn refuse_relay_loops(
    cfg: &Config,
    path: Option<&PathBuf>,
    listeners: &Listeners,
) -> Result<(), Stopped> {
    let loops = daemon::relay_loops(cfg, &listeners.own());
    if loops.is_empty() {
        return Ok(());
    }
    let e = ConfigError {
        path: path.cloned(),
        problems: loops,
        refusal: None,
    };
    Err(stop(&e, 2))
}

/// The integration tests' fault hook (src/ingest/fault.rs), read once
/// here: only whoever starts the process can set it.
fn faults() -> Result<Faults, Stopped> {
    let faults = match std::env::var(fault::ENV) {
        Ok(v) => Faults::parse(&v).map_err(|e| stop(&e, 1))?,
        Err(_) => Faults::none(),
    };
    if faults.any() {
        tracing::warn!(
            target: "rollstat",
            faults = %std::env::var(fault::ENV).unwrap_or_default(),
            "Test faults are injected ({}): this daemon will panic on purpose. Unset it outside tests.",
            fault::ENV
        );
    }
    Ok(faults)
}

/// The sketches' share of the registry's memory budget.
fn limit_sketches(cfg: &Config) {
    let sketch_limit =
        footprint::sketch_limit(cfg.series_settings(), rollstat::host::memory_total_bytes());
    rollstat::sketch::budget::process().set_limit(sketch_limit);
    if sketch_limit == Some(0) {
        tracing::warn!(target: "rollstat", "The series at series.max_series need the whole memory budget before any sketch grows: every timer, histogram, distribution and set value past a bucket's first four is coarsened (rollstat check-config says by how much). Raise series.max_memory_bytes or lower series.max_series.");
    }
}

/// The ready line on stdout, which tests and scripts read to learn the
/// bound ports: `rollstat listening statsd_udp=A ... http=C` in text, and
/// under `--log-format json` one JSON object shaped like the log lines
/// (`fields.message` is "rollstat listening", one field per listener), so
/// that a merged stdout + stderr is JSON throughout. Printed whatever the
/// `--log` filter.
fn ready_line(bound: &daemon::Bound, format: LogFormat) {
    use std::io::Write;
    if format == LogFormat::Text {
        println!("rollstat listening {}", bound.describe());
        return;
    }
    let stdout = tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stdout)
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(stdout, || {
        tracing::info!(
            target: "rollstat",
            statsd_udp = bound.statsd_udp.as_deref(),
            statsd_tcp = bound.statsd_tcp.as_deref(),
            statsd_unix = bound.statsd_unix.as_deref(),
            http = bound.http.as_deref(),
            rls_grpc = bound.rls_grpc.as_deref(),
            otlp_http = bound.otlp_http.as_deref(),
            otlp_grpc = bound.otlp_grpc.as_deref(),
            "rollstat listening"
        );
    });
    let _ = std::io::stdout().flush();
}

/// The async runtime could not be built.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot start the async runtime (tokio); check this process's limits on threads and memory"
)]
struct RuntimeError(#[source] std::io::Error);
