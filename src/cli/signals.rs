//! The stop signals: SIGTERM and SIGINT (Ctrl-C).

use tokio::signal::unix::{signal, Signal, SignalKind};

/// Ctrl-C or SIGTERM. A second one while the graceful stop is still
/// running (it waits up to 5 s for open HTTP connections, and for the
/// receivers to drain) exits at once, with status 1.
pub async fn shutdown_signal() {
    // Both streams exist from here on, so that a signal between the first
    // and the watcher below is not missed.
    let listen = |kind: SignalKind, name: &str| match signal(kind) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(target: "rollstat", error = %e, "Cannot listen for {name}; it will not stop rollstat.");
            None
        }
    };
    let mut signals = [
        listen(SignalKind::terminate(), "SIGTERM"),
        listen(SignalKind::interrupt(), "SIGINT (Ctrl-C)"),
    ];
    stop_requested(&mut signals).await;
    tokio::spawn(async move {
        stop_requested(&mut signals).await;
        tracing::warn!(target: "rollstat", "A second stop signal: exiting now, without finishing the graceful stop.");
        std::process::exit(1);
    });
}

/// The next SIGTERM or SIGINT.
async fn stop_requested(signals: &mut [Option<Signal>; 2]) {
    async fn next(s: &mut Option<Signal>) {
        match s {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    let [term, int] = signals;
    tokio::select! {
        _ = next(term) => {}
        _ = next(int) => {}
    }
}
