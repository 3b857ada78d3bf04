//! The daemon: wires bound sockets to the state and the background tasks,
//! and shuts them down in order. No business logic lives here.
//!
//! [`run`] reads as the daemon's life: [`State::build`] (no sockets),
//! [`Listeners::bind`] (done by the caller, so a port clash fails before
//! anything starts and tests can bind port 0), spawn the receivers, the
//! background tasks and the HTTP server, wait for `shutdown`, then stop: the
//! Unix socket's file is removed, the receivers stop and process what they
//! already received, then the tasks, then HTTP.

mod listeners;
mod state;
mod tasks;

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::watch;

pub use self::listeners::{check as check_listeners, BindError, Listeners};
pub use self::state::{BuildError, State};
use self::tasks::Tasks;
use crate::clock::Clock;
use crate::config::Config;
use crate::ingest::{tcp, udp, unix};
use crate::telemetry::Transport;

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The state could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A receiver thread, task or signal handler could not be started.
    #[error("cannot start the daemon's {what}")]
    Start {
        /// What could not be started.
        what: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

fn start(what: &'static str) -> impl FnOnce(io::Error) -> DaemonError {
    move |source| DaemonError::Start { what, source }
}

/// Builds the state of `cfg` and serves it on `listeners` ([`serve`]: `ready`
/// is called once every listener and task runs) until `shutdown`
/// completes, then stops gracefully.
///
/// # Errors
///
/// [`DaemonError`]: the state cannot be built or a part cannot start.
pub async fn run(
    cfg: Config,
    config_path: Option<std::path::PathBuf>,
    listeners: Listeners,
    clock: Arc<dyn Clock>,
    ready: impl FnOnce(),
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    for w in crate::config::exposure::warnings(&cfg) {
        tracing::warn!("{w}");
    }
    let state = Arc::new(State::build(cfg, config_path, clock)?);
    serve(state, listeners, ready, shutdown).await
}

/// Serves `state` on `listeners`, calls `ready` once every listener and
/// task runs (`/-/ready` says 200 from then on), and goes on until
/// `shutdown` completes, then stops gracefully.
///
/// # Errors
///
/// [`DaemonError::Start`]: a receiver, task or the HTTP server cannot start.
pub async fn serve(
    state: Arc<State>,
    listeners: Listeners,
    ready: impl FnOnce(),
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let udp_port = listeners.udp.as_ref().map(|u| u.local_addr.port());
    // The socket file is removed at stop, and on any early return (its
    // drop), so that no run leaves it behind but one that is killed.
    let (unix_socket, mut unix_file) = match listeners.unix {
        Some(u) => (Some(u.socket), Some(u.file)),
        None => (None, None),
    };
    let receivers = Receivers::spawn(&state, listeners.udp, listeners.tcp, unix_socket, &stop_rx)?;
    let tasks = Tasks::spawn(&state, &stop_rx).map_err(start("SIGHUP handler"))?;
    let http = tokio::net::TcpListener::from_std(listeners.http).map_err(start("HTTP listener"))?;
    let server = tokio::spawn(crate::http::serve::serve(
        http,
        state.router(udp_port),
        state.config.http.clone(),
        state.tls.clone(),
        state.telemetry.clone(),
        stop_rx.clone(),
    ));

    state
        .serving
        .store(true, std::sync::atomic::Ordering::Release);
    ready();

    shutdown.await;
    // Not ready from here: a load balancer stops sending while we drain.
    state
        .serving
        .store(false, std::sync::atomic::Ordering::Release);
    tracing::info!("Shutting down: processing what was received, then exiting.");
    // First, so that a sender learns at once that nobody listens (ENOENT)
    // rather than queueing datagrams nobody will read; what is already
    // queued is still applied below.
    if let Some(f) = &mut unix_file {
        f.remove();
    }
    let _ = stop_tx.send(true);
    receivers.stop().await;
    tasks.join().await;
    // What the receivers applied last, to the shared store (own deadline).
    state.final_sync().await;
    match tokio::time::timeout(Duration::from_secs(5), server).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "HTTP server task failed."),
        Err(_) => tracing::warn!("HTTP connections still open after 5s; exiting anyway."),
    }
    // Every receiver has stopped and flushed: these totals are final. They
    // let an operator (and the integration tests) check that a graceful stop
    // kept what was received.
    let t = &state.telemetry;
    tracing::info!(
        udp = t.lines(Transport::Udp),
        tcp = t.lines(Transport::Tcp),
        unix = t.lines(Transport::Unix),
        http = t.lines(Transport::Http),
        "rollstat stopped; lines accepted since start, by transport."
    );
    Ok(())
}

/// The statsd receivers: UDP and Unix reader threads, the TCP accept task.
struct Receivers {
    /// Tells the reader threads to stop (they poll it between reads).
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    tcp: Option<tokio::task::JoinHandle<()>>,
}

impl Receivers {
    fn spawn(
        state: &State,
        udp: Option<udp::UdpSockets>,
        tcp: Option<std::net::TcpListener>,
        unix: Option<std::os::unix::net::UnixDatagram>,
        stop_rx: &watch::Receiver<bool>,
    ) -> Result<Receivers, DaemonError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let ingest = &state.config.ingest;
        if let Some(u) = udp {
            state
                .telemetry
                .udp_recv_buffer
                .set(i64::try_from(u.recv_buffer).unwrap_or(i64::MAX));
            let asked = ingest.udp_recv_buffer_bytes;
            if u.capped(asked) {
                tracing::warn!(asked, granted = u.recv_buffer, "The kernel granted a smaller UDP receive buffer than ingest.udp_recv_buffer_bytes asks for (Linux reports twice the usable size); raise net.core.rmem_max, or run with CAP_NET_ADMIN, to avoid drops under bursts.");
            } else if u.forced {
                tracing::info!(
                    asked,
                    granted = u.recv_buffer,
                    "UDP receive buffer forced past net.core.rmem_max (CAP_NET_ADMIN)."
                );
            } else {
                tracing::info!(granted = u.recv_buffer, "UDP receive buffer set.");
            }
            let readers = udp::spawn(
                u.sockets,
                state.ingestor.clone(),
                stop.clone(),
                ingest.udp_workers,
                &ingest.allowed_sources,
            )
            .map_err(start("UDP readers"))?;
            threads.extend(readers);
        }
        if let Some(sock) = unix {
            threads.push(
                unix::spawn(sock, state.ingestor.clone(), stop.clone())
                    .map_err(start("Unix datagram reader"))?,
            );
        }
        let tcp = match tcp {
            Some(l) => {
                let l =
                    tokio::net::TcpListener::from_std(l).map_err(start("statsd TCP listener"))?;
                Some(tokio::spawn(tcp::serve(
                    l,
                    state.ingestor.clone(),
                    tcp::TcpSettings::from_config(ingest),
                    stop_rx.clone(),
                )))
            }
            None => None,
        };
        Ok(Receivers { stop, threads, tcp })
    }

    /// Stops every receiver and waits until each has processed what it
    /// already received. The stop signal has been sent to the TCP task.
    async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
        if let Some(t) = self.tcp {
            let _ = t.await;
        }
    }
}
