//! statsd over TCP: newline-framed lines, a maximum line length, and a cap on
//! open connections (further clients wait in the accept queue).

use std::sync::Arc;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use super::{Ingestor, Worker};
use crate::telemetry::Transport;

/// Index of `line_too_long` in `FRAMING_REASONS`.
const LINE_TOO_LONG: usize = 0;

/// Accepts connections until `shutdown` turns true, then waits for every
/// open connection to apply what it has read (each stops at the same
/// signal), so a graceful stop keeps what clients sent.
pub async fn serve(
    listener: TcpListener,
    ingestor: Arc<Ingestor>,
    max_connections: usize,
    max_line: usize,
    shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    accept_loop(
        &listener,
        &ingestor,
        max_connections,
        max_line,
        shutdown,
        &mut connections,
    )
    .await;
    while connections.join_next().await.is_some() {}
}

async fn accept_loop(
    listener: &TcpListener,
    ingestor: &Arc<Ingestor>,
    max_connections: usize,
    max_line: usize,
    mut shutdown: watch::Receiver<bool>,
    connections: &mut JoinSet<()>,
) {
    let permits = Arc::new(Semaphore::new(max_connections.max(1)));
    loop {
        // Reap finished connections so the set stays as small as the open ones.
        while connections.try_join_next().is_some() {}
        // Take a permit before accepting: at the cap, clients wait.
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = shutdown.changed() => return,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "Accepting a statsd TCP connection failed.");
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let ing = ingestor.clone();
        let sd = shutdown.clone();
        connections.spawn(async move {
            if let Err(e) = connection(stream, &ing, max_line, sd).await {
                tracing::debug!(%peer, error = %e, "statsd TCP connection ended with an error.");
            }
            drop(permit);
        });
    }
}

/// Reads one connection: every complete line is applied as it arrives; a
/// line longer than `max_line` is dropped and counted as `line_too_long`.
async fn connection(
    mut stream: TcpStream,
    ing: &Ingestor,
    max_line: usize,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut w = Worker::default();
    // True while skipping the rest of an over-long line.
    let mut discarding = false;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            r = stream.read(&mut chunk) => r?,
            _ = shutdown.changed() => 0,
        };
        if n == 0 {
            // EOF or shutdown: the last line needs no newline.
            if !discarding && !buf.is_empty() {
                apply(ing, &buf, max_line, &mut w);
            }
            ing.flush(Transport::Tcp, &mut w);
            return Ok(());
        }
        w.counts.packets += 1;
        let mut data = &chunk[..n];
        if discarding {
            match data.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    discarding = false;
                    data = &data[i + 1..];
                }
                None => continue,
            }
        }
        buf.extend_from_slice(data);
        if let Some(last_nl) = buf.iter().rposition(|&b| b == b'\n') {
            apply(ing, &buf[..=last_nl], max_line, &mut w);
            buf.drain(..=last_nl);
        }
        if buf.len() > max_line {
            w.counts.framing[LINE_TOO_LONG] += 1;
            buf.clear();
            discarding = true;
        }
        ing.flush(Transport::Tcp, &mut w);
    }
}

/// Applies complete lines, rejecting any longer than `max_line`.
fn apply(ing: &Ingestor, lines: &[u8], max_line: usize, w: &mut Worker) {
    let now = ing.now();
    if lines.len() <= max_line {
        let first = ing.ingest(lines, now, w);
        ing.note_bad_line(Transport::Tcp, first, lines, now);
        return;
    }
    for line in lines.split(|&b| b == b'\n') {
        if line.len() > max_line {
            w.counts.framing[LINE_TOO_LONG] += 1;
        } else if !line.is_empty() {
            let first = ing.ingest(line, now, w);
            ing.note_bad_line(Transport::Tcp, first, line, now);
        }
    }
}
