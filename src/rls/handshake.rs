//! TLS in front of the gRPC listener (`[rls.tls]`): one connection's
//! handshake. `accept.rs` runs it in the connection's own task, under the
//! connection's setup deadline (`[rls] handshake_timeout_ms`), at most
//! [`MAX_HANDSHAKES`] at once (more are closed at once). A failed or
//! stalled handshake is counted (`rollstat_rls_refused_total{reason=
//! "tls_handshake"}`) and closed; a client that connects and closes
//! without a byte is not counted.

use std::io;

use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Handshakes in progress at once; a connection past it is closed.
pub const MAX_HANDSHAKES: usize = 256;

/// The handshake, or `None` for a client that closed before a byte.
pub async fn handshake(
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
