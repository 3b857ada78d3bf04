//! Logging on stderr (text or JSON lines), and `report`: the one way the
//! binary reports an error that stops it.

use std::sync::atomic::{AtomicBool, Ordering};

use rollstat::error::Causes;
use tracing_subscriber::EnvFilter;

use super::args::LogFormat;

/// Set once logging is JSON: errors that stop the daemon are then logged
/// as JSON too, so that every stderr line parses.
static JSON_LOGS: AtomicBool = AtomicBool::new(false);

/// The log directive for rustls unless the filter names it: see `filter`.
const RUSTLS_LOGS: &str = "rustls=error";

/// Logging for the daemon: `log` (or RUST_LOG) filters, `format` shapes
/// the lines.
pub fn init(log: &str, format: LogFormat) {
    let filter = filter(log);
    match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            // Colour only for a terminal, not for log files and journald.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => init_json(filter),
    }
}

/// RUST_LOG, else `--log`, else `info`. rustls logs at `warn` what a TLS
/// client sends (a warning alert, an unexpected message): a line per
/// connection anyone can open. Unless the filter names rustls itself, only
/// its errors are logged (traffic keys exhausted, nothing a peer can
/// cause); rollstat counts failed handshakes and logs them at debug.
fn filter(log: &str) -> EnvFilter {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(log))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    if filter.to_string().contains("rustls") {
        filter
    } else {
        filter.add_directive(RUSTLS_LOGS.parse().expect("a valid directive"))
    }
}

fn init_json(filter: EnvFilter) {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    JSON_LOGS.store(true, Ordering::Relaxed);
    // A panic (the supervisor restarts the task) as a JSON line too,
    // instead of the default hook's plain text.
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        tracing::error!(
            target: "rollstat",
            thread = thread.name().unwrap_or("unnamed"),
            panic = %info,
            "A thread panicked."
        );
    }));
}

/// Prints `e` to stderr with every cause under it, one per line
/// (`error: ...` then `  caused by: ...`): the one way the binary reports an
/// error that stops it.
/// Under `--log-format json`, the same text as one JSON log line.
pub fn report(e: &(dyn std::error::Error + 'static)) {
    if JSON_LOGS.load(Ordering::Relaxed) {
        tracing::error!(target: "rollstat", error = %Causes(e), "rollstat stopped on an error.");
    } else {
        eprintln!("error: {}", Causes(e));
    }
}
