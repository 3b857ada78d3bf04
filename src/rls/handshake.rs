//! TLS in front of the gRPC listener (`[rls.tls]`): every accepted
//! connection's handshake runs in its own task under a deadline
//! ([`HANDSHAKE_TIMEOUT`]), at most [`MAX_HANDSHAKES`] at once (more are
//! closed at once), and only finished TLS streams reach tonic. A failed or
//! stalled handshake is counted (`rollstat_rls_refused_total{reason=
//! "tls_handshake"}`) and closed; a client that connects and closes
//! without a byte is not counted.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::service::RlsHandle;
use crate::tls::ServerTls;

/// The longest a client may take to finish its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshakes in progress at once; a connection past it is closed.
pub const MAX_HANDSHAKES: usize = 256;

/// A connection whose handshake is done.
pub struct Tls(TlsStream<TcpStream>);

impl tonic::transport::server::Connected for Tls {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Tls {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tls {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// The connections of `listener` once their handshake with `tls` is done,
/// until `stop` turns true.
pub fn incoming(
    listener: TcpListener,
    tls: Arc<ServerTls>,
    rls: Arc<RlsHandle>,
    mut stop: watch::Receiver<bool>,
) -> impl Stream<Item = io::Result<Tls>> {
    let (tx, rx) = mpsc::channel::<io::Result<Tls>>(64);
    let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = stop.wait_for(|s| *s) => return,
            };
            let Ok((tcp, _)) = accepted else {
                // A failed accept (out of descriptors): try again shortly.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            // As for plain connections: answers go out at once.
            let _ = tcp.set_nodelay(true);
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                rls.current().count_tls_failure();
                continue;
            };
            let (tx, config, rls) = (tx.clone(), tls.current(), rls.clone());
            tokio::spawn(async move {
                let _slot = slot;
                let acceptor = TlsAcceptor::from(config);
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(acceptor, tcp)).await {
                    Ok(Some(Ok(stream))) => {
                        let _ = tx.send(Ok(Tls(stream))).await;
                    }
                    Ok(None) => {}
                    Ok(Some(Err(_))) | Err(_) => rls.current().count_tls_failure(),
                }
            });
        }
    });
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) })
}

/// The handshake, or `None` for a client that closed before a byte.
async fn handshake(
    acceptor: TlsAcceptor,
    tcp: TcpStream,
) -> Option<io::Result<TlsStream<TcpStream>>> {
    let mut first = [0u8; 1];
    match tcp.peek(&mut first).await {
        Ok(0) => return None,
        Ok(_) => {}
        Err(e) => return Some(Err(e)),
    }
    Some(acceptor.accept(tcp).await)
}
