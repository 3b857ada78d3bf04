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
//! * **HTTPS.** With `[http.tls]`, each accepted connection first runs the
//!   TLS handshake ([`super::handshake`]) under its header deadline, holding its
//!   place under the cap; hyper then speaks HTTP/1 over the TLS stream,
//!   wrapped in the same deadlines ([`super::conn`] says why the wrapper
//!   goes above TLS). Each handshake takes the settings current at accept,
//!   so a reload's new certificate serves the next connection. A client
//!   over the cap is closed without the plain-text `503`, which a TLS
//!   client could not read.

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
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::conn::{ConnState, DeadlineIo, Deadlines, MAX_SNIFFED_HEAD};
use super::HttpLimits;
use crate::ingest::backoff::{AcceptBackoff, Failure, Report};
use crate::telemetry::{close_reason, refuse_reason, Telemetry};
use crate::tls::ServerTls;

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

/// Serves `app` on `listener` (HTTPS with `tls`) until `shutdown` turns
/// true, then lets open connections finish their responses.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    tls: Option<Arc<ServerTls>>,
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
            if tls.is_some() {
                continue;
            }
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
        let tls = tls.as_ref().map(|t| t.current());
        connections.spawn(async move {
            connection(stream, tls, app, deadlines, &telemetry, shutdown).await;
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

/// Serves one connection (after its TLS handshake, with `tls`) until it
/// closes, fails a deadline, or the daemon stops (then it finishes its
/// response first).
async fn connection(
    stream: TcpStream,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: Router,
    deadlines: Deadlines,
    telemetry: &Telemetry,
    mut shutdown: watch::Receiver<bool>,
) {
    telemetry.http_connections.inc();
    let _open = OnDrop(|| telemetry.http_connections.dec());
    let accepted = Instant::now();
    let state = ConnState::new(accepted);
    match tls {
        None => http1(stream, state, app, deadlines, telemetry, shutdown).await,
        Some(config) => {
            let deadline = accepted + deadlines.header;
            let closed = &telemetry.http_closed;
            if let Some(stream) =
                super::handshake::handshake(stream, config, deadline, closed, &mut shutdown).await
            {
                http1(stream, state, app, deadlines, telemetry, shutdown).await;
            }
        }
    }
}

/// Speaks HTTP/1 on `stream` (TCP, or TLS over TCP) inside the deadlines.
async fn http1<S>(
    stream: S,
    state: Arc<ConnState>,
    app: Router,
    deadlines: Deadlines,
    telemetry: &Telemetry,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
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

    /// The listener over TLS, in process: a self-signed certificate for
    /// `localhost` made here, a router with a small and a large response,
    /// deadlines short enough to watch.
    mod https {
        use std::path::PathBuf;

        use axum::routing::get;
        use rustls::pki_types::{CertificateDer, ServerName};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio_rustls::client::TlsStream;

        use super::*;
        use crate::tls::{ClientAuth, TlsConfig, TlsVersion};

        /// The header and write deadlines; the idle one is twice this, so
        /// that a response stuck in a full socket (hyper has dropped its
        /// one-piece body: the request looks ended) meets the write deadline
        /// first, as with the defaults (30 s and 75 s).
        const DEADLINE: Duration = Duration::from_millis(300);

        struct Server {
            addr: std::net::SocketAddr,
            telemetry: Arc<Telemetry>,
            ca: CertificateDer<'static>,
            _stop: watch::Sender<bool>,
            dir: PathBuf,
        }

        impl Drop for Server {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.dir);
            }
        }

        async fn start(name: &str) -> Server {
            start_capped(name, 1024).await
        }

        async fn start_capped(name: &str, max_connections: usize) -> Server {
            let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
            let dir = std::env::temp_dir()
                .join(format!("rollstat-serve-tls-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("c.pem"), cert.cert.pem()).unwrap();
            std::fs::write(dir.join("k.pem"), cert.key_pair.serialize_pem()).unwrap();
            let tls = TlsConfig {
                source: crate::tls::TlsSource::Http,
                cert_file: dir.join("c.pem"),
                key_file: dir.join("k.pem"),
                client_ca_file: None,
                client_auth: ClientAuth::Require,
                min_version: TlsVersion::Tls12,
            };
            let server_tls = Arc::new(ServerTls::new(&tls).unwrap());
            let limits = HttpLimits {
                max_connections,
                header_timeout: DEADLINE,
                idle_timeout: DEADLINE * 2,
                write_timeout: DEADLINE,
                tls: Some(tls),
                ..HttpLimits::default()
            };
            let app = Router::new()
                .route("/small", get(|| async { "hello over tls" }))
                .route("/large", get(|| async { vec![b'x'; 32 << 20] }));
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let telemetry = Arc::new(Telemetry::new().unwrap());
            let (stop, stop_rx) = watch::channel(false);
            tokio::spawn(serve(
                listener,
                app,
                limits,
                Some(server_tls),
                telemetry.clone(),
                stop_rx,
            ));
            Server {
                addr,
                telemetry,
                ca: cert.cert.der().clone(),
                _stop: stop,
                dir,
            }
        }

        impl Server {
            fn closed(&self, reason: &str) -> u64 {
                self.telemetry.http_closed.get(reason)
            }

            /// A TLS client trusting the test certificate, offering `alpn`.
            async fn connect(&self, alpn: &[&[u8]]) -> std::io::Result<TlsStream<TcpStream>> {
                let mut roots = rustls::RootCertStore::empty();
                roots.add(self.ca.clone()).unwrap();
                let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
                config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
                let tcp = TcpStream::connect(self.addr).await?;
                tokio_rustls::TlsConnector::from(Arc::new(config))
                    .connect(ServerName::try_from("localhost").unwrap(), tcp)
                    .await
            }

            /// Waits (at most 5 s) until `reason` was counted `n` times.
            async fn wait_closed(&self, reason: &str, n: u64) {
                let until = Instant::now() + Duration::from_secs(5);
                while self.closed(reason) < n {
                    assert!(Instant::now() < until, "{reason}: {}", self.closed(reason));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert_eq!(self.closed(reason), n, "{reason}");
            }
        }

        /// Reads one response (head and a body of Content-Length bytes).
        async fn response<S: AsyncRead + Unpin>(s: &mut S) -> String {
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = s.read(&mut buf).await.unwrap();
                assert!(
                    n > 0,
                    "closed mid-response: {:?}",
                    String::from_utf8_lossy(&got)
                );
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length: ")
                                .map(str::to_string)
                        })
                        .unwrap()
                        .parse()
                        .unwrap();
                    if body.len() >= len {
                        return text;
                    }
                }
            }
        }

        #[tokio::test]
        async fn https_serves_http_1_and_keeps_the_idle_deadline() {
            let srv = start("serves").await;
            // A client offering h2 first still gets HTTP/1.1.
            let mut s = srv.connect(&[b"h2", b"http/1.1"]).await.unwrap();
            assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
            for _ in 0..2 {
                s.write_all(b"GET /small HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    .await
                    .unwrap();
                let r = response(&mut s).await;
                assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
                assert!(r.ends_with("hello over tls"), "{r}");
            }
            // Kept alive, then idle: closed at the idle deadline.
            srv.wait_closed(close_reason::IDLE_TIMEOUT, 1).await;
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest).await;
            assert!(rest.is_empty());
            // A client that speaks only h2 is refused in the handshake.
            assert!(srv.connect(&[b"h2"]).await.is_err());
            srv.wait_closed(close_reason::TLS_HANDSHAKE, 1).await;
            assert_eq!(srv.telemetry.http_connections.get(), 0);
        }

        #[tokio::test]
        async fn plain_http_is_told_to_use_https_and_counted() {
            let srv = start("plain").await;
            let mut s = TcpStream::connect(srv.addr).await.unwrap();
            s.write_all(b"GET /small HTTP/1.1\r\nHost: localhost\r\n\r\n")
                .await
                .unwrap();
            let r = response(&mut s).await;
            assert!(r.starts_with("HTTP/1.1 400 Bad Request"), "{r}");
            assert!(r.contains("use an https:// URL"), "{r}");
            srv.wait_closed(close_reason::TLS_HANDSHAKE, 1).await;
            // Not a handshake and not HTTP: closed, counted.
            let mut s = TcpStream::connect(srv.addr).await.unwrap();
            s.write_all(&[0x00, 0x01, 0x02]).await.unwrap();
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest).await;
            assert!(rest.is_empty());
            srv.wait_closed(close_reason::TLS_HANDSHAKE, 2).await;
            // Connected and gone without a byte (a TCP health check): not counted.
            drop(TcpStream::connect(srv.addr).await.unwrap());
            tokio::time::sleep(DEADLINE * 2).await;
            assert_eq!(srv.closed(close_reason::TLS_HANDSHAKE), 2);
            assert_eq!(srv.closed(close_reason::HEADER_TIMEOUT), 0);
        }

        #[tokio::test]
        async fn a_handshake_that_stalls_is_cut_at_the_header_deadline() {
            let srv = start("stall").await;
            let started = Instant::now();
            // Nothing at all, and the first byte of a ClientHello only.
            let mut quiet = TcpStream::connect(srv.addr).await.unwrap();
            let mut half = TcpStream::connect(srv.addr).await.unwrap();
            half.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
            for s in [&mut quiet, &mut half] {
                let mut rest = Vec::new();
                let _ = s.read_to_end(&mut rest).await;
                assert!(rest.is_empty());
            }
            let took = started.elapsed();
            assert!(took >= DEADLINE && took < DEADLINE * 10, "{took:?}");
            srv.wait_closed(close_reason::HEADER_TIMEOUT, 2).await;
            assert_eq!(srv.closed(close_reason::TLS_HANDSHAKE), 0);
        }

        #[tokio::test]
        async fn a_client_over_the_cap_is_closed_without_a_plain_text_503() {
            let srv = start_capped("cap", 1).await;
            let mut first = srv.connect(&[b"http/1.1"]).await.unwrap();
            let mut over = TcpStream::connect(srv.addr).await.unwrap();
            let mut rest = Vec::new();
            let _ = over.read_to_end(&mut rest).await;
            assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
            srv.wait_closed(close_reason::CONNECTION_CAP, 1).await;
            // The one within the cap is served.
            first
                .write_all(b"GET /small HTTP/1.1\r\nHost: localhost\r\n\r\n")
                .await
                .unwrap();
            assert!(response(&mut first).await.starts_with("HTTP/1.1 200 OK"));
        }

        #[tokio::test]
        async fn a_client_that_stops_reading_is_cut_at_the_write_deadline() {
            let srv = start("write").await;
            let mut s = srv.connect(&[b"http/1.1"]).await.unwrap();
            s.write_all(b"GET /large HTTP/1.1\r\nHost: localhost\r\n\r\n")
                .await
                .unwrap();
            // 32 MiB and no reading: the socket buffers fill, the TLS
            // writes stay pending, and the write deadline fires.
            srv.wait_closed(close_reason::WRITE_TIMEOUT, 1).await;
            drop(s);
        }
    }

    #[test]
    fn the_refusal_is_a_complete_response() {
        crate::http::tests::assert_complete_response(REFUSAL);
    }
}
