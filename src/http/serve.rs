//! The HTTP listener: accepts connections under a cap and serves each with
//! hyper's HTTP/1, inside the deadlines of [`super::conn`].
//!
//! * **Cap.** At most `http.max_connections` connections are served at once.
//!   A client beyond it is accepted, sent `503` with `Retry-After: 1` (as
//!   far as the socket takes it without waiting) and closed, counted as
//!   `connection_cap`; refusals being delivered are themselves capped
//!   ([`MAX_PENDING_REFUSALS`]), beyond which a client is closed without a
//!   word.
//! * **No avoidable latency.** Accepted sockets get `TCP_NODELAY`: a
//!   response's last small segment must not wait for the client's delayed
//!   ACK (about 40 ms on Linux) behind Nagle's algorithm.
//! * **Accept errors** (out of file descriptors, say) are counted and
//!   followed by a back-off from 10 ms doubling to 1 s, so a full
//!   descriptor table is not a busy loop.
//! * **Shutdown.** When `shutdown` turns true, the listener stops accepting
//!   and every connection is asked to finish its response and close
//!   (hyper's graceful shutdown); [`serve`] returns when they have.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::Request;
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::conn::{ConnState, DeadlineIo, Deadlines, MAX_SNIFFED_HEAD};
use crate::config::HttpLimits;
use crate::ingest::backoff::{AcceptBackoff, Failure, Report};
use crate::telemetry::{close_reason, refuse_reason, Telemetry};

/// Refusals (`503` then close) being written at once; beyond, a client over
/// the cap is closed at once.
pub const MAX_PENDING_REFUSALS: usize = 64;

/// What a client beyond `http.max_connections` reads before the close.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 64\r\n\r\nrollstat: too many open HTTP connections (http.max_connections)\n";

/// A request extension: what the connection saw of the request's raw head.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawHead {
    /// A framing problem hyper folded away (`ambiguous_framing`), if any.
    pub framing: Option<&'static str>,
}

/// Serves `app` on `listener` until `shutdown` turns true, then lets open
/// connections finish their responses.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    telemetry: Arc<Telemetry>,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let refusals = Arc::new(Semaphore::new(MAX_PENDING_REFUSALS));
    let deadlines = Deadlines {
        header: limits.header_timeout,
        idle: limits.idle_timeout,
        write: limits.write_timeout,
    };
    let mut connections = JoinSet::new();
    let mut backoff = AcceptBackoff::new();
    loop {
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => break,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // Typically EMFILE: retrying at once would spin on the same
                // error, so wait (10 ms doubling to 1 s), unless stopping.
                telemetry.http_accept_errors.inc();
                let failure = backoff.failed();
                log_accept_failure(failure, &e);
                tokio::select! {
                    () = tokio::time::sleep(failure.delay) => continue,
                    _ = shutdown.changed() => break,
                }
            }
        };
        let failed = backoff.succeeded();
        if failed > 0 {
            tracing::info!(failed_accepts = failed, "Accepting HTTP connections again.");
        }
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            telemetry.http_closed.inc(close_reason::CONNECTION_CAP);
            if let Ok(slot) = refusals.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    refuse(stream).await;
                    drop(slot);
                });
            }
            continue;
        };
        // Best effort: a socket that refuses it still works, only slower.
        let _ = stream.set_nodelay(true);
        let (app, telemetry, shutdown) = (app.clone(), telemetry.clone(), shutdown.clone());
        connections.spawn(async move {
            connection(stream, app, deadlines, &telemetry, shutdown).await;
            drop(permit);
        });
    }
    // New clients are refused (connection refused) rather than left in the
    // accept queue while the open connections finish.
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Writes the `503` to a client over the cap, without waiting more than a
/// second for it, then closes.
async fn refuse(stream: TcpStream) {
    use tokio::io::AsyncWriteExt;
    let mut stream = stream;
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(REFUSAL).await?;
        stream.shutdown().await
    })
    .await;
}

/// Serves one connection until it closes, fails a deadline, or the daemon
/// stops (then it finishes its response first).
async fn connection(
    stream: TcpStream,
    app: Router,
    deadlines: Deadlines,
    telemetry: &Telemetry,
    mut shutdown: watch::Receiver<bool>,
) {
    telemetry.http_connections.inc();
    let _open = OnDrop(|| telemetry.http_connections.dec());
    let state = ConnState::new(Instant::now());
    let io = DeadlineIo::new(
        stream,
        state.clone(),
        deadlines,
        telemetry.http_closed.clone(),
    );
    let conn_state = state.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let framing = state.request_started();
        let done = Ended(state.clone());
        let app = app.clone();
        async move {
            let mut req = req.map(Body::new);
            req.extensions_mut().insert(RawHead { framing });
            let resp = tower::ServiceExt::oneshot(app, req)
                .await
                .unwrap_or_else(|e: Infallible| match e {});
            Ok::<_, Infallible>(resp.map(|body| Tracked { body, _done: done }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .keep_alive(true)
        // Heads longer than this are refused by hyper (431); the framing
        // check reads up to the same length.
        .max_buf_size(MAX_SNIFFED_HEAD.max(8192));
    let conn = builder.serve_connection(TokioIo::new(io), service);
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = shutdown.changed() => {
            // A connection waiting for a request (or for the rest of its
            // head) is closed at once; a response in progress finishes.
            conn_state.stop();
            if conn_state.awaiting_request() {
                return;
            }
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        if e.is_parse() {
            // hyper answered 400 (or 431) itself: e.g. a bad request line,
            // two different Content-Length values, headers too long.
            telemetry.http_refused.inc(refuse_reason::MALFORMED_REQUEST);
        }
        tracing::debug!(error = %e, "HTTP connection ended with an error.");
    }
}

/// Runs its closure when dropped.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Marks the request ended (the connection idle) when the response body is
/// dropped: hyper drops it once written, or when the connection fails.
struct Ended(Arc<ConnState>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.request_ended(Instant::now());
    }
}

/// A response body that marks its request ended when dropped.
struct Tracked {
    body: Body,
    _done: Ended,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

fn log_accept_failure(failure: Failure, e: &std::io::Error) {
    match failure.log {
        Some(Report::First) => tracing::warn!(
            error = %e,
            retry_in = ?failure.delay,
            "Accepting an HTTP connection failed; retrying with a back-off of up to 1 s. \
             If the error is 'Too many open files', raise the open-file limit \
             (ulimit -n, systemd LimitNOFILE=) or lower the connection caps \
             (http.max_connections, ingest.tcp_max_connections).",
        ),
        Some(Report::Continuing { failures, over }) => tracing::warn!(
            error = %e,
            failures,
            over = ?over,
            "Accepting HTTP connections still fails (see rollstat_http_accept_errors_total).",
        ),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_response() {
        let text = std::str::from_utf8(REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(body.len(), len);
    }
}
