//! The gRPC listener's connections before tonic serves them:
//!
//! * **Cap.** At most `[rls] max_connections` are open at once. One past
//!   it reads the server's SETTINGS and a GOAWAY (ENHANCE_YOUR_CALM,
//!   naming the key) as far as the socket takes them without waiting, and
//!   is closed (with `[rls.tls]`: closed without a word), counted as
//!   `connection_cap`. So a flood of connections cannot take the
//!   descriptors `/metrics` and statsd need.
//! * **Setup deadline.** Each connection must finish its TLS handshake
//!   (with `[rls.tls]`, at most [`handshake::MAX_HANDSHAKES`] at once) and
//!   send the HTTP/2 client preface within `handshake_timeout_ms`, or it is
//!   closed: `tls_handshake` for the handshake, `preface_timeout` for the
//!   preface, `bad_preface` for bytes that are not one (HTTP/1 to this
//!   port, say). A client that connects and closes without a byte is not
//!   counted. Past the preface, HTTP/2 keepalive pings (`grpc.rs`) bound
//!   how long a connection may stop answering.
//! * **Age.** With `max_connection_age_ms`, a connection that old is
//!   closed, whatever its calls still hold, counted as `connection_age`: a
//!   client that never opens its flow-control window holds its answers in
//!   the server until then (without it, until it closes; at most
//!   `max_streams_per_connection` of them).
//! * **Accept errors** (out of descriptors) wait 10 ms, doubling to 1 s,
//!   before the next accept, rather than spinning on the error.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;

use super::handshake;
use super::service::RlsHandle;

/// Where a gRPC listener counts its connections: the rate-limit
/// service's, or OTLP's.
pub trait Tally: Send + Sync + 'static {
    /// Counts a connection refused or closed under `reason`.
    fn refused(&self, reason: &'static str);
    /// The gauge of connections open.
    fn connections(&self) -> prometheus::IntGauge;
}

impl Tally for RlsHandle {
    fn refused(&self, reason: &'static str) {
        self.current().count_connection_refusal(reason);
    }

    fn connections(&self) -> prometheus::IntGauge {
        self.current().connections()
    }
}
use super::settings::ListenerCaps;
use crate::tls::ServerTls;

/// The HTTP/2 client connection preface (RFC 9113, 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The first wait after a failed accept, and the longest.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// A connection whose setup is done: plain or TLS, its preface read (and
/// handed to tonic again first), holding its place under the cap.
pub struct Conn {
    io: Io,
    /// Bytes of [`PREFACE`] already handed on.
    replayed: usize,
    /// When it is closed, however busy (`max_connection_age_ms`).
    expires: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Counts the close at `expires`, once.
    tally: Option<Arc<dyn Tally>>,
    _slot: Slot,
}

/// A connection's place under `max_connections`, counted in
/// `rollstat_rls_connections` while it is held.
struct Slot {
    _permit: OwnedSemaphorePermit,
    open: prometheus::IntGauge,
}

impl Slot {
    fn new(permit: OwnedSemaphorePermit, open: prometheus::IntGauge) -> Slot {
        open.inc();
        Slot {
            _permit: permit,
            open,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.dec();
    }
}

enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Why a connection's setup did not finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failed {
    /// Closed before a byte: not counted.
    Silent,
    /// Counted under this reason.
    Counted(&'static str),
}

/// The connections of `listener` ready for tonic, until `stop` turns true.
pub fn incoming(
    listener: TcpListener,
    tls: Option<Arc<ServerTls>>,
    tally: Arc<dyn Tally>,
    caps: ListenerCaps,
    stop: watch::Receiver<bool>,
) -> impl Stream<Item = io::Result<Conn>> {
    let (tx, rx) = mpsc::channel::<io::Result<Conn>>(64);
    tokio::spawn(accept_loop(listener, tls, tally, caps, tx, stop));
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) })
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<Arc<ServerTls>>,
    tally: Arc<dyn Tally>,
    caps: ListenerCaps,
    tx: mpsc::Sender<io::Result<Conn>>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(caps.max_connections.max(1)));
    let handshakes = Arc::new(Semaphore::new(handshake::MAX_HANDSHAKES));
    let mut backoff: Option<Duration> = None;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait_for(|s| *s) => return,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => {
                backoff = None;
                tcp
            }
            Err(e) => {
                let delay = next_backoff(backoff);
                if backoff.is_none() {
                    tracing::warn!(error = %e, "Accepting a gRPC connection failed; retrying with a back-off of up to 1 s. If the error is 'Too many open files', raise the open-file limit or lower max_connections.");
                }
                backoff = Some(delay);
                tokio::select! {
                    () = tokio::time::sleep(delay) => continue,
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        };
        // Answers go out at once, not after the peer's delayed ACK.
        let _ = tcp.set_nodelay(true);
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            if tls.is_none() {
                refuse(&tcp);
            }
            tally.refused("connection_cap");
            continue;
        };
        let slot = Slot::new(permit, tally.connections());
        let tls = match &tls {
            None => None,
            Some(t) => match handshakes.clone().try_acquire_owned() {
                Ok(h) => Some((t.current(), h)),
                Err(_) => {
                    tally.refused("tls_handshake");
                    continue;
                }
            },
        };
        let (tx, tally) = (tx.clone(), tally.clone());
        let accepted = Instant::now();
        let deadline = accepted + caps.handshake_timeout;
        let expires = caps.max_connection_age.map(|age| accepted + age);
        tokio::spawn(async move {
            match setup(tcp, tls, deadline).await {
                Ok(io) => {
                    let conn = Conn {
                        io,
                        replayed: 0,
                        expires: expires.map(|at| Box::pin(tokio::time::sleep_until(at))),
                        tally: Some(tally),
                        _slot: slot,
                    };
                    let _ = tx.send(Ok(conn)).await;
                }
                Err(Failed::Silent) => {}
                Err(Failed::Counted(reason)) => tally.refused(reason),
            }
        });
    }
}

/// The wait after one more failed accept.
fn next_backoff(last: Option<Duration>) -> Duration {
    last.map_or(FIRST_BACKOFF, |d| (d * 2).min(MAX_BACKOFF))
}

/// The TLS handshake (with `tls`, holding a handshake slot), then the
/// preface, both by `deadline`.
async fn setup(
    tcp: TcpStream,
    tls: Option<(Arc<rustls::ServerConfig>, OwnedSemaphorePermit)>,
    deadline: Instant,
) -> Result<Io, Failed> {
    let mut io = match tls {
        None => Io::Plain(tcp),
        Some((config, _slot)) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            match tokio::time::timeout_at(deadline, handshake::handshake(acceptor, tcp)).await {
                Ok(None) => return Err(Failed::Silent),
                Ok(Some(Ok(stream))) => Io::Tls(Box::new(stream)),
                Ok(Some(Err(_))) | Err(_) => return Err(Failed::Counted("tls_handshake")),
            }
        }
    };
    match tokio::time::timeout_at(deadline, read_preface(&mut io)).await {
        Ok(r) => r.map(|()| io),
        Err(_) => Err(Failed::Counted("preface_timeout")),
    }
}

/// Reads the 24 bytes of the preface, failing at the first byte that is
/// not the preface's.
async fn read_preface(io: &mut Io) -> Result<(), Failed> {
    let mut got = [0u8; PREFACE.len()];
    let mut n = 0;
    while n < got.len() {
        let read = match io {
            Io::Plain(s) => s.read(&mut got[n..]).await,
            Io::Tls(s) => s.read(&mut got[n..]).await,
        };
        match read {
            Ok(0) | Err(_) if n == 0 => return Err(Failed::Silent),
            Ok(0) | Err(_) => return Err(Failed::Counted("bad_preface")),
            Ok(m) => n += m,
        }
        if !is_preface_start(&got[..n]) {
            return Err(Failed::Counted("bad_preface"));
        }
    }
    Ok(())
}

/// Whether `bytes` are the start of the preface (or all of it).
fn is_preface_start(bytes: &[u8]) -> bool {
    PREFACE.starts_with(bytes)
}

/// What a connection past the cap reads: an empty SETTINGS (the server's
/// preface) and a GOAWAY, last stream 0, ENHANCE_YOUR_CALM, with a
/// message.
fn refusal() -> Vec<u8> {
    const MESSAGE: &[u8] = b"rollstat: too many open gRPC connections (max_connections)";
    let mut out = vec![0, 0, 0, 4, 0, 0, 0, 0, 0];
    let len = u32::try_from(8 + MESSAGE.len()).unwrap_or(0).to_be_bytes();
    out.extend_from_slice(&[len[1], len[2], len[3], 7, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0xbu32.to_be_bytes());
    out.extend_from_slice(MESSAGE);
    out
}

/// Writes [`refusal`] as far as the socket takes it without waiting (all
/// of it, on a fresh socket), and reads away what the client sent so far
/// so that the close is a FIN, not a reset that could lose the GOAWAY.
fn refuse(tcp: &TcpStream) {
    let _ = tcp.try_write(&refusal());
    let mut sink = [0u8; 1024];
    for _ in 0..4 {
        match tcp.try_read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl Conn {
    /// An error once the connection has expired (counted the first time).
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let expired = self
            .expires
            .as_mut()
            .is_some_and(|e| e.as_mut().poll(cx).is_ready());
        expired.then(|| {
            if let Some(tally) = self.tally.take() {
                tally.refused("connection_age");
            }
            io::Error::new(io::ErrorKind::TimedOut, "past max_connection_age_ms")
        })
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(e) = this.expired(cx) {
            return Poll::Ready(Err(e));
        }
        if this.replayed < PREFACE.len() {
            let rest = &PREFACE[this.replayed..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.replayed += n;
            return Poll::Ready(Ok(()));
        }
        match &mut this.io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.expired(cx) {
            return Poll::Ready(Err(e));
        }
        match &mut self.io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preface_is_recognised_byte_by_byte() {
        assert!(is_preface_start(b""));
        assert!(is_preface_start(b"PRI * HTTP/2.0\r\n"));
        assert!(is_preface_start(PREFACE));
        assert!(!is_preface_start(b"GET / HTTP/1.1\r\n"));
        assert!(!is_preface_start(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nX"));
    }

    #[test]
    fn the_refusal_is_a_settings_frame_then_a_goaway_naming_the_key() {
        let r = refusal();
        assert_eq!(&r[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0], "empty SETTINGS");
        let goaway = &r[9..];
        let len = usize::from(goaway[2]) | usize::from(goaway[1]) << 8;
        assert_eq!((goaway[3], goaway.len()), (7, 9 + len), "GOAWAY, whole");
        assert_eq!(&goaway[9..13], &[0, 0, 0, 0], "last stream 0");
        assert_eq!(&goaway[13..17], &[0, 0, 0, 0xb], "ENHANCE_YOUR_CALM");
        assert!(String::from_utf8_lossy(&goaway[17..]).contains("max_connections"));
    }

    #[test]
    fn accept_backoff_doubles_to_a_second() {
        let mut d = None;
        let waits: Vec<u128> = (0..9)
            .map(|_| {
                let next = next_backoff(d);
                d = Some(next);
                next.as_millis()
            })
            .collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
    }
}
