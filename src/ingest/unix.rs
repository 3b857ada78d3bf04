//! statsd over a Unix datagram socket (optional): one reader thread.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::reader::MAX_DATAGRAM;
use super::{Ingestor, Worker};
use crate::telemetry::Transport;

/// Binds `path`, replacing a stale socket file left by a previous run.
pub fn bind(path: &Path) -> io::Result<UnixDatagram> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt;
        m.file_type().is_socket()
    }) {
        std::fs::remove_file(path)?;
    }
    let s = UnixDatagram::bind(path)?;
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    Ok(s)
}

/// Starts the reader thread; it stops when `stop` is set.
pub fn spawn(
    sock: UnixDatagram,
    ing: Arc<Ingestor>,
    stop: Arc<AtomicBool>,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("rollstat-unix".into())
        .spawn(move || {
            let mut buf = vec![0u8; MAX_DATAGRAM];
            let mut w = Worker::default();
            while !stop.load(Ordering::Relaxed) {
                match sock.recv(&mut buf) {
                    Ok(n) => {
                        let now = ing.now();
                        w.counts.packets += 1;
                        let first = ing.ingest(&buf[..n], now, &mut w);
                        ing.note_bad_line(Transport::Unix, first, &buf[..n], now);
                        ing.flush(Transport::Unix, &mut w);
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock
                                | io::ErrorKind::TimedOut
                                | io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "Unix datagram receive failed; retrying.");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })
}
