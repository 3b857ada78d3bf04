//! The TLS handshake of one HTTPS connection, before hyper sees it.
//!
//! * **Deadline.** The handshake must finish by the connection's header
//!   deadline (`http.header_timeout_ms` from accept, the same budget the
//!   first request's head then continues to use): a client that opens a
//!   TCP connection and never completes the handshake is cut off and
//!   counted as `header_timeout`, as a client that never sends its head is.
//! * **Failures** (no common version, a client that refuses the certificate
//!   or sends none where one is required, bytes that are not TLS) are
//!   counted as `tls_handshake` and logged at debug only: a scanner must not
//!   be able to fill the log.
//! * **Plain HTTP to the HTTPS port** gets a `400` in plain HTTP saying to
//!   use `https://` (as Go's servers answer), so a curl or a Prometheus
//!   configured with the wrong scheme shows the reason, not a broken reply.
//! * A client that connects and closes without sending a byte (a TCP health
//!   check) is not a failure and is not counted.
//! * **Stop.** A connection still in its handshake is closed at once when
//!   the daemon stops.

use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::telemetry::{close_reason, ReasonCounters};

/// The first byte of a TLS record carrying a handshake message (a
/// ClientHello starts with it).
const HANDSHAKE_RECORD: u8 = 0x16;

/// What a plain-HTTP client reads from the HTTPS port before the close.
const USE_HTTPS: &[u8] = b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 80\r\n\r\nrollstat: this port speaks HTTPS only ([http.tls] is set); use an https:// URL.\n";

/// How long the answer to a plain-HTTP client may take, the request it
/// sent read and thrown away (so the close does not reset the connection
/// before the answer is read).
const USE_HTTPS_WRITE: Duration = Duration::from_secs(1);

/// Reads more of a plain-HTTP request than this and the answer's close
/// goes ahead anyway.
const USE_HTTPS_DRAIN: usize = 64 * 1024;

/// How the handshake ended, before counting.
enum Outcome {
    /// Boxed: a TLS stream is over a kilobyte, the other outcomes nothing.
    Done(Box<TlsStream<TcpStream>>),
    /// Closed before a byte: not counted.
    Gone,
    /// Plain HTTP: answered, then counted as `tls_handshake`.
    PlainHttp(TcpStream),
    /// Counted as `tls_handshake`.
    Failed,
}

/// Runs the TLS handshake on `stream` with `config`, by `deadline`.
/// Returns the TLS stream, or `None` if the connection is to be closed
/// (counted in `closed` unless the client simply left, or the daemon is
/// stopping).
pub async fn handshake(
    stream: TcpStream,
    config: Arc<ServerConfig>,
    deadline: Instant,
    closed: &ReasonCounters,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<TlsStream<TcpStream>> {
    let outcome = tokio::select! {
        r = tokio::time::timeout_at(deadline, attempt(stream, config)) => r,
        _ = shutdown.changed() => return None,
    };
    match outcome {
        Ok(Outcome::Done(s)) => Some(*s),
        Ok(Outcome::Gone) => None,
        Ok(Outcome::PlainHttp(stream)) => {
            closed.inc(close_reason::TLS_HANDSHAKE);
            // Its own bound, past the header deadline: the request has
            // arrived, only its answer and the close remain.
            let _ = tokio::time::timeout(USE_HTTPS_WRITE, use_https(stream)).await;
            None
        }
        Ok(Outcome::Failed) => {
            closed.inc(close_reason::TLS_HANDSHAKE);
            None
        }
        Err(_) => {
            closed.inc(close_reason::HEADER_TIMEOUT);
            tracing::debug!("TLS handshake not finished by http.header_timeout_ms; closed.");
            None
        }
    }
}

async fn attempt(stream: TcpStream, config: Arc<ServerConfig>) -> Outcome {
    let mut first = [0u8; 1];
    match stream.peek(&mut first).await {
        Ok(0) => return Outcome::Gone,
        Ok(_) => {}
        Err(e) => {
            tracing::debug!(error = %e, "HTTPS connection failed before its handshake.");
            return Outcome::Gone;
        }
    }
    if first[0] != HANDSHAKE_RECORD {
        tracing::debug!(
            first_byte = first[0],
            "Not a TLS handshake on the HTTPS listener; closed."
        );
        if first[0].is_ascii_alphabetic() {
            return Outcome::PlainHttp(stream);
        }
        return Outcome::Failed;
    }
    match TlsAcceptor::from(config).accept(stream).await {
        Ok(s) => Outcome::Done(Box::new(s)),
        Err(e) => {
            tracing::debug!(error = %e, "TLS handshake failed; closed.");
            Outcome::Failed
        }
    }
}

/// Tells a plain-HTTP client to use `https://`, then reads what it sent
/// until it closes (at most [`USE_HTTPS_DRAIN`] bytes), so that closing
/// with its request unread does not reset the connection under the answer.
async fn use_https(mut stream: TcpStream) -> std::io::Result<()> {
    stream.write_all(USE_HTTPS).await?;
    stream.shutdown().await?;
    let mut sink = [0u8; 4096];
    let mut read = 0;
    while read < USE_HTTPS_DRAIN {
        match stream.read(&mut sink).await? {
            0 => break,
            n => read += n,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_http_answer_is_a_complete_response() {
        crate::http::tests::assert_complete_response(USE_HTTPS);
    }
}
