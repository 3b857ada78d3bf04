//! The daemon: wires bound sockets to the state and the background tasks,
//! and shuts them down in order. No business logic lives here.
//!
//! [`run`] reads as the daemon's life: [`State::build`] (no sockets),
//! [`Listeners::bind`] (done by the caller, so a port clash fails before
//! anything starts and tests can bind port 0), spawn the receivers, the
//! background tasks and the HTTP server, wait for `shutdown`, then stop: the
//! Unix socket's file is removed, the receivers stop and drain what the
//! kernel already queued for them (within `[ingest] drain_timeout_ms`, each
//! transport's drain logged), then the tasks, then HTTP.

mod listeners;
pub mod notify;
mod state;
mod tasks;

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::watch;

pub use self::listeners::{check as check_listeners, relay_loops, BindError, Bound, Listeners};
pub use self::state::{BuildError, State};
use self::tasks::Tasks;
use crate::clock::Clock;
use crate::config::Config;
use crate::ingest::fault::Faults;
use crate::ingest::stop::Stop;
use crate::ingest::supervise::Supervisor;
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
/// completes, then stops gracefully. `faults` are the integration tests'
/// injected faults (`ROLLSTAT_TEST_FAULTS`; none in production).
///
/// # Errors
///
/// [`DaemonError`]: the state cannot be built or a part cannot start.
pub async fn run(
    cfg: Config,
    config_path: Option<std::path::PathBuf>,
    listeners: Listeners,
    clock: Arc<dyn Clock>,
    faults: Faults,
    ready: impl FnOnce(),
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    for w in crate::config::exposure::warnings(&cfg) {
        tracing::warn!("{w}");
    }
    let state = Arc::new(State::build(cfg, config_path, clock)?.with_faults(faults));
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
    // systemd's Type=notify (nothing when NOTIFY_SOCKET is unset).
    let notifier = Arc::new(notify::Notifier::from_env());
    let listening = listeners.status(state.tls.is_some());
    let udp_port = listeners.udp.as_ref().map(|u| u.local_addr.port());
    // The socket file is removed at stop, and on any early return (its
    // drop), so that no run leaves it behind but one that is killed.
    let (unix_socket, mut unix_file) = match listeners.unix {
        Some(u) => (Some(u.socket), Some(u.file)),
        None => (None, None),
    };
    // Before the receivers, so that the first lines find their senders.
    let relay_senders = state
        .relays
        .as_ref()
        .map(|r| crate::relay::spawn(r, state.clock.clone()))
        .transpose()
        .map_err(start("relay senders"))?;
    let receivers = Receivers::spawn(&state, listeners.udp, listeners.tcp, unix_socket, &stop_rx)?;
    let tasks = Tasks::spawn(&state, &stop_rx, &notifier).map_err(start("SIGHUP handler"))?;
    state.outputs.apply(&state.config.outputs);
    let http = tokio::net::TcpListener::from_std(listeners.http).map_err(start("HTTP listener"))?;
    let rls_server = match (listeners.rls, &state.rls) {
        (Some(l), Some(rls)) => {
            let l =
                tokio::net::TcpListener::from_std(l).map_err(start("rate-limit gRPC listener"))?;
            Some(tokio::spawn(crate::rls::grpc::serve(
                l,
                rls.clone(),
                state.rls_tls.clone(),
                state.clock.clone(),
                stop_rx.clone(),
            )))
        }
        _ => None,
    };
    let server = tokio::spawn(crate::http::serve::serve(
        http,
        state.router(udp_port),
        state.config.http.clone(),
        state.tls.clone(),
        state.telemetry.clone(),
        stop_rx.clone(),
    ));
    let otlp_http = listeners
        .otlp_http
        .map(|l| spawn_otlp_http(&state, l, &stop_rx))
        .transpose()?;
    let otlp_grpc = listeners
        .otlp_grpc
        .map(|l| spawn_otlp_grpc(&state, l, &stop_rx))
        .transpose()?;

    // Polled once before anyone hears that the daemon is ready: a signal
    // handler in `shutdown` (main's SIGTERM) is installed at its first
    // poll, and a stop asked right after READY=1 (or the "listening" line)
    // must be the graceful one, not the signal's default action.
    let mut shutdown = std::pin::pin!(shutdown);
    if futures_util::FutureExt::now_or_never(shutdown.as_mut()).is_none() {
        state
            .serving
            .store(true, std::sync::atomic::Ordering::Release);
        ready();
        notifier.ready(&listening);
        shutdown.await;
    }
    // Not ready from here: a load balancer stops sending while we drain.
    state
        .serving
        .store(false, std::sync::atomic::Ordering::Release);
    notifier.stopping();
    tracing::info!("Shutting down: processing what was received, then exiting.");
    // First, so that a sender learns at once that nobody listens (ENOENT)
    // rather than queueing datagrams nobody will read; what is already
    // queued is still applied below.
    if let Some(f) = &mut unix_file {
        f.remove();
    }
    receivers.stop(&state, &stop_tx).await;
    tasks.join().await;
    // What the receivers applied last, to the shared store (own deadline).
    state.final_sync().await;
    // And to every output: a last push, sent within its stop_timeout_ms.
    state.outputs.stop().await;
    match tokio::time::timeout(Duration::from_secs(5), server).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "HTTP server task failed."),
        Err(_) => tracing::warn!("HTTP connections still open after 5s; exiting anyway."),
    }
    wait_otlp(otlp_http, otlp_grpc).await;
    if let Some(rls) = rls_server {
        match tokio::time::timeout(Duration::from_secs(5), rls).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "The rate-limit gRPC server failed."),
            Ok(Err(e)) => tracing::warn!(error = %e, "The rate-limit gRPC server task failed."),
            Err(_) => tracing::warn!("Rate-limit gRPC calls still open after 5s; exiting anyway."),
        }
    }
    // Nothing feeds the relays any more: each sends what it holds, within
    // [ingest] drain_timeout_ms of now, then counts the rest.
    if let (Some(relays), Some(senders)) = (&state.relays, relay_senders) {
        relays.stop(state.clock.now() + state.config.ingest.drain_timeout);
        let _ = tokio::task::spawn_blocking(move || senders.join()).await;
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
        otlp = t.lines(Transport::Otlp),
        "rollstat stopped; lines accepted since start, by transport."
    );
    Ok(())
}

/// Waits, at most 5 s each, for the OTLP servers' connections to finish.
async fn wait_otlp(
    http: Option<tokio::task::JoinHandle<()>>,
    grpc: Option<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>,
) {
    if let Some(server) = http {
        if tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .is_err()
        {
            tracing::warn!("OTLP/HTTP connections still open after 5s; exiting anyway.");
        }
    }
    if let Some(server) = grpc {
        match tokio::time::timeout(Duration::from_secs(5), server).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "The OTLP/gRPC server failed."),
            Ok(Err(e)) => tracing::warn!(error = %e, "The OTLP/gRPC server task failed."),
            Err(_) => tracing::warn!("OTLP/gRPC calls still open after 5s; exiting anyway."),
        }
    }
}

/// Serves OTLP/gRPC on `l`, with `[http.tls]`.
fn spawn_otlp_grpc(
    state: &Arc<State>,
    l: std::net::TcpListener,
    stop: &watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>, DaemonError> {
    let l = tokio::net::TcpListener::from_std(l).map_err(start("OTLP/gRPC listener"))?;
    let otlp = state
        .otlp
        .clone()
        .expect("OTLP ingest exists with otlp_grpc");
    let (telemetry, max_bytes) = (
        state.telemetry.clone(),
        state.config.ingest.http_max_body_bytes,
    );
    let (tls, stop) = (state.tls.clone(), stop.clone());
    Ok(tokio::spawn(async move {
        crate::ingest::otlp_grpc::serve(l, otlp, &telemetry, max_bytes, tls, stop).await
    }))
}

/// Serves OTLP/HTTP on `l` with the HTTP listener's limits and TLS.
fn spawn_otlp_http(
    state: &Arc<State>,
    l: std::net::TcpListener,
    stop: &watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, DaemonError> {
    let l = tokio::net::TcpListener::from_std(l).map_err(start("OTLP/HTTP listener"))?;
    Ok(tokio::spawn(crate::http::serve::serve(
        l,
        state.otlp_router(),
        state.config.http.clone(),
        state.tls.clone(),
        state.telemetry.clone(),
        stop.clone(),
    )))
}

/// The statsd receivers: UDP and Unix reader threads, the TCP accept task.
struct Receivers {
    /// Tells the reader threads and TCP connections to stop, with the
    /// drain's deadline; collects what each transport drained.
    stop: Arc<Stop>,
    threads: Vec<JoinHandle<()>>,
    tcp: Option<tokio::task::JoinHandle<()>>,
    /// The UDP port and copies of its sockets, kept open until the bytes
    /// left in their queues after the drain are read.
    udp: Option<(u16, Vec<std::net::UdpSocket>)>,
    unix: bool,
}

impl Receivers {
    fn spawn(
        state: &State,
        udp: Option<udp::UdpSockets>,
        tcp: Option<std::net::TcpListener>,
        unix: Option<std::os::unix::net::UnixDatagram>,
        stop_rx: &watch::Receiver<bool>,
    ) -> Result<Receivers, DaemonError> {
        let stop = Arc::new(Stop::new());
        let sup = Supervisor {
            panics: state.telemetry.task_panics.clone(),
            liveness: state.liveness.clone(),
            faults: state.faults.clone(),
        };
        let mut threads = Vec::new();
        let ingest = &state.config.ingest;
        let mut udp_probe = None;
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
            let copies = u
                .sockets
                .iter()
                .map(std::net::UdpSocket::try_clone)
                .collect::<io::Result<Vec<_>>>()
                .map_err(start("UDP readers"))?;
            udp_probe = Some((u.local_addr.port(), copies));
            let readers = udp::spawn(
                u.sockets,
                state.ingestor.clone(),
                stop.clone(),
                ingest.udp_workers,
                &ingest.allowed_sources,
                &sup,
            )
            .map_err(start("UDP readers"))?;
            threads.extend(readers);
        }
        let has_unix = unix.is_some();
        if let Some(sock) = unix {
            threads.push(
                unix::spawn(sock, state.ingestor.clone(), stop.clone(), &sup)
                    .map_err(start("Unix datagram reader"))?,
            );
        }
        let tcp = match tcp {
            Some(l) => {
                let l =
                    tokio::net::TcpListener::from_std(l).map_err(start("statsd TCP listener"))?;
                // Not ready once this task has ended (it returns only at
                // stop; a panic would end it too).
                let alive = state.liveness.register("the statsd TCP accept loop");
                let serve = tcp::serve(
                    l,
                    state.ingestor.clone(),
                    tcp::TcpSettings::from_config(ingest),
                    stop_rx.clone(),
                    stop.clone(),
                );
                Some(tokio::spawn(async move {
                    let _alive = alive;
                    serve.await;
                }))
            }
            None => None,
        };
        Ok(Receivers {
            stop,
            threads,
            tcp,
            udp: udp_probe,
            unix: has_unix,
        })
    }

    /// Stops every receiver (and, through `stop_tx`, the tasks and HTTP)
    /// and waits until each has applied what it already received and
    /// drained what the kernel queued for it, until `[ingest]
    /// drain_timeout_ms` from now. Logs one line per transport: drained,
    /// left, took; a drain the deadline cut is counted in
    /// `rollstat_shutdown_drain_deadline_total{transport}`.
    async fn stop(self, state: &State, stop_tx: &watch::Sender<bool>) {
        let started = state.clock.now();
        let timeout = state.config.ingest.drain_timeout;
        // Before the watch: a TCP connection woken by it reads the deadline.
        self.stop.begin(started + timeout);
        let _ = stop_tx.send(true);
        for t in self.threads {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
        if let Some(t) = self.tcp {
            let _ = t.await;
        }
        let took_ms = state
            .clock
            .now()
            .saturating_duration_since(started)
            .as_millis();
        let udp_left = self.udp.map(|(port, copies)| {
            let left = udp::queued_bytes(port);
            drop(copies);
            left
        });
        let timeout_ms = timeout.as_millis();
        for (t, on) in [
            (Transport::Udp, udp_left.is_some()),
            (Transport::Unix, self.unix),
            (Transport::Tcp, true),
        ] {
            let Some(d) = self.stop.drain(t).filter(|_| on) else {
                continue;
            };
            if t == Transport::Tcp && d.drained() == 0 && d.cut() == 0 {
                // No connection was open: nothing to say.
                continue;
            }
            let transport = t.as_str();
            let drained = d.drained();
            let left = match (t, d.cut()) {
                (_, 0) => "none".to_string(),
                (Transport::Udp, _) => match udp_left.flatten() {
                    Some(b) => format!("~{b} bytes still queued in the kernel"),
                    None => "some (the kernel's queue was not empty)".to_string(),
                },
                (Transport::Tcp, n) => format!("some, on {n} connections"),
                _ => "some (the queue was not empty at the deadline)".to_string(),
            };
            let unit = if t == Transport::Tcp {
                "reads"
            } else {
                "datagrams"
            };
            if d.cut() > 0 {
                state
                    .telemetry
                    .shutdown_drain_deadline
                    .with_label_values(&[transport])
                    .inc();
                tracing::warn!(transport, drained, unit, left = %left, took_ms, timeout_ms, "Stop drain cut short by ingest.drain_timeout_ms: what was left is not applied (counted in rollstat_shutdown_drain_deadline_total).");
            } else {
                tracing::info!(transport, drained, unit, left = %left, took_ms, timeout_ms, "Stop drain done: everything queued was applied.");
            }
        }
    }
}
