//! statsd over TCP: newline-framed lines and a maximum line length; a cap on
//! open connections (a client beyond it is accepted and closed at once), an
//! idle timeout, and a back-off after failed accepts.
//!
//! Every cut-off is counted in `rollstat_tcp_connections_closed_total{reason}`,
//! open connections in `rollstat_tcp_connections`, failed accepts in
//! `rollstat_tcp_accept_errors_total`.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use prometheus::IntGauge;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{sleep, Instant};

use super::backoff::{AcceptBackoff, Failure, Report};
use super::stop::Stop;
use super::{AllowedSources, Ingest};
use super::{Ingestor, Worker};
use crate::telemetry::{close_reason, Transport};

/// Index of `line_too_long` in `FRAMING_REASONS`.
const LINE_TOO_LONG: usize = 0;

/// How the listener treats its connections (from `[ingest]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpSettings {
    /// Client addresses accepted (`allowed_sources`; empty: all); others
    /// are closed at accept, counted as `source_not_allowed`.
    pub allowed: AllowedSources,
    /// Open connections at most (`tcp_max_connections`); a client beyond it
    /// is accepted and closed at once.
    pub max_connections: usize,
    /// A connection that sends nothing for this long is closed, its last
    /// line applied (`tcp_idle_timeout_secs`).
    pub idle_timeout: Duration,
    /// Longest line (`max_line_bytes`); longer ones are `line_too_long`.
    pub max_line: usize,
}

impl TcpSettings {
    /// The `[ingest]` keys that concern TCP.
    #[must_use]
    pub fn from_config(ingest: &Ingest) -> Self {
        TcpSettings {
            allowed: ingest.allowed_sources.clone(),
            max_connections: ingest.tcp_max_connections,
            idle_timeout: ingest.tcp_idle_timeout,
            max_line: ingest.max_line_bytes,
        }
    }
}

/// Accepts connections until `shutdown` turns true, then waits for every
/// open connection to apply what it has read and what the kernel already
/// queued for it, until `stop`'s deadline (each stops at the same signal),
/// so a graceful stop keeps what clients sent.
pub async fn serve(
    listener: TcpListener,
    ingestor: Arc<Ingestor>,
    settings: TcpSettings,
    shutdown: watch::Receiver<bool>,
    stop: Arc<Stop>,
) {
    serve_from(&listener, ingestor, settings, shutdown, stop).await;
}

/// Where connections come from: the listener, or in tests one that fails.
trait Accept {
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>>;
}

impl Accept for TcpListener {
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        TcpListener::poll_accept(self, cx)
    }
}

async fn serve_from(
    listener: &impl Accept,
    ingestor: Arc<Ingestor>,
    settings: TcpSettings,
    shutdown: watch::Receiver<bool>,
    stop: Arc<Stop>,
) {
    let mut connections = JoinSet::new();
    accept_loop(
        listener,
        &ingestor,
        settings,
        shutdown,
        &stop,
        &mut connections,
    )
    .await;
    while connections.join_next().await.is_some() {}
}

async fn accept_loop(
    listener: &impl Accept,
    ingestor: &Arc<Ingestor>,
    settings: TcpSettings,
    mut shutdown: watch::Receiver<bool>,
    stop: &Arc<Stop>,
    connections: &mut JoinSet<()>,
) {
    let tel = &ingestor.telemetry;
    let permits = Arc::new(Semaphore::new(settings.max_connections.max(1)));
    let mut backoff = AcceptBackoff::new();
    loop {
        // Reap finished connections so the set stays as small as the open ones.
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            r = poll_fn(|cx| listener.poll_accept(cx)) => r,
            _ = shutdown.changed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Typically EMFILE: retrying at once would spin on the same
                // error, so wait (10 ms doubling to 1 s), unless stopping.
                tel.tcp_accept_errors.inc();
                let failure = backoff.failed();
                log_accept_failure(failure, &e);
                tokio::select! {
                    () = sleep(failure.delay) => continue,
                    _ = shutdown.changed() => return,
                }
            }
        };
        let failed = backoff.succeeded();
        if failed > 0 {
            tracing::info!(
                failed_accepts = failed,
                "Accepting statsd TCP connections again."
            );
        }
        // Before the cap: a refused source takes no connection slot.
        if !settings.allowed.allows(peer.ip()) {
            tel.tcp_closed.inc(close_reason::SOURCE_NOT_ALLOWED);
            tracing::debug!(%peer, "statsd TCP connection refused: not in ingest.allowed_sources.");
            drop(stream);
            continue;
        }
        // At the cap, close at once rather than leave the client in the
        // accept queue: it learns to retry, and a flood of connections holds
        // no more descriptors than the cap.
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tel.tcp_closed.inc(close_reason::CONNECTION_CAP);
            tracing::debug!(%peer, max = settings.max_connections, "statsd TCP connection refused: at ingest.tcp_max_connections.");
            drop(stream);
            continue;
        };
        let open = OpenConnection::new(&tel.tcp_connections);
        let ing = ingestor.clone();
        let sd = shutdown.clone();
        let settings = settings.clone();
        let stop = stop.clone();
        connections.spawn(async move {
            // Both released when the task ends, however it ends.
            let _held = (open, permit);
            match connection(stream, &ing, &settings, sd, &stop).await {
                Ok(End::IdleTimeout) => {
                    ing.telemetry.tcp_closed.inc(close_reason::IDLE_TIMEOUT);
                    tracing::debug!(%peer, timeout = ?settings.idle_timeout, "statsd TCP connection closed: idle (ingest.tcp_idle_timeout_secs).");
                }
                Ok(End::Eof | End::Shutdown) => {}
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "statsd TCP connection ended with an error.");
                }
            }
        });
    }
}

fn log_accept_failure(failure: Failure, e: &io::Error) {
    let delay = failure.delay;
    match failure.log {
        Some(Report::First) => tracing::warn!(
            error = %e,
            retry_in = ?delay,
            "Accepting a statsd TCP connection failed; retrying with a back-off of up to 1 s. \
             If the error is 'Too many open files', raise the open-file limit \
             (ulimit -n, systemd LimitNOFILE=) or lower the connection caps \
             (ingest.tcp_max_connections, http.max_connections).",
        ),
        Some(Report::Continuing { failures, over }) => tracing::warn!(
            error = %e,
            failures,
            over = ?over,
            "Accepting statsd TCP connections still fails (see rollstat_tcp_accept_errors_total).",
        ),
        None => {}
    }
}

/// A served connection, counted in `rollstat_tcp_connections` from
/// creation until drop (also when its task returns early or panics).
struct OpenConnection(IntGauge);

impl OpenConnection {
    fn new(gauge: &IntGauge) -> Self {
        gauge.inc();
        OpenConnection(gauge.clone())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Why a connection stopped without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The client closed its side.
    Eof,
    /// The daemon is stopping.
    Shutdown,
    /// Nothing arrived for the idle timeout.
    IdleTimeout,
}

/// Reads one connection: every complete line is applied as it arrives; a
/// line longer than `max_line` is dropped and counted as `line_too_long`.
/// At EOF, shutdown or the idle timeout, the last line needs no newline.
/// At shutdown, bytes already received but not yet read are still applied,
/// until none are left or `stop`'s deadline passes (a client that never
/// pauses cannot hold up the stop).
async fn connection(
    mut stream: TcpStream,
    ing: &Ingestor,
    settings: &TcpSettings,
    mut shutdown: watch::Receiver<bool>,
    stop: &Stop,
) -> io::Result<End> {
    let mut lines = Lines::new(settings.max_line);
    let mut w = Worker::default();
    let mut chunk = vec![0u8; 64 * 1024];
    let idle = sleep(settings.idle_timeout);
    tokio::pin!(idle);
    loop {
        let (n, end) = tokio::select! {
            // Stopping first, so a client that never pauses cannot hold up
            // a graceful stop; then data, so bytes that arrived before the
            // deadline are read even if the timer is also due.
            biased;
            _ = shutdown.changed() => (0, End::Shutdown),
            r = stream.read(&mut chunk) => (r?, End::Eof),
            () = &mut idle => (0, End::IdleTimeout),
        };
        if n == 0 {
            if end == End::Shutdown {
                let (mut reads, mut cut) = (0, false);
                loop {
                    if stop.past_deadline(ing.now()) {
                        cut = true;
                        break;
                    }
                    match stream.try_read(&mut chunk) {
                        Ok(n) if n > 0 => {
                            reads += 1;
                            w.counts.packets += 1;
                            lines.feed(ing, &chunk[..n], &mut w);
                        }
                        _ => break,
                    }
                }
                if let Some(d) = stop.drain(Transport::Tcp) {
                    d.add(reads, cut);
                }
            }
            lines.finish(ing, &mut w);
            ing.flush(Transport::Tcp, &mut w);
            return Ok(end);
        }
        idle.as_mut().reset(Instant::now() + settings.idle_timeout);
        w.counts.packets += 1;
        lines.feed(ing, &chunk[..n], &mut w);
        ing.flush(Transport::Tcp, &mut w);
    }
}

/// Newline framing of one connection's byte stream.
struct Lines {
    /// The incomplete last line so far.
    buf: Vec<u8>,
    /// True while skipping the rest of an over-long line.
    discarding: bool,
    max_line: usize,
    /// Whether the connection's first bytes were seen.
    started: bool,
}

impl Lines {
    fn new(max_line: usize) -> Self {
        Lines {
            buf: Vec::with_capacity(64 * 1024),
            discarding: false,
            max_line,
            started: false,
        }
    }

    /// Applies every line `data` completes; keeps the rest. A connection
    /// whose first byte is the relay marker is a rollstat relay's: its
    /// lines are not relayed again.
    fn feed(&mut self, ing: &Ingestor, mut data: &[u8], w: &mut Worker) {
        if !self.started && !data.is_empty() {
            self.started = true;
            w.relayed = ing.came_relayed(data);
        }
        if self.discarding {
            match memchr::memchr(b'\n', data) {
                Some(i) => {
                    self.discarding = false;
                    data = &data[i + 1..];
                }
                None => return,
            }
        }
        // Only the new bytes can hold a newline: the kept rest has none. A
        // sender of one byte per segment thus costs one byte of search per
        // byte, not the whole pending line each time.
        let kept = self.buf.len();
        self.buf.extend_from_slice(data);
        if let Some(i) = memchr::memrchr(b'\n', &self.buf[kept..]) {
            let last_nl = kept + i;
            apply(ing, &self.buf[..=last_nl], self.max_line, w);
            self.buf.drain(..=last_nl);
        }
        if self.buf.len() > self.max_line {
            w.counts.framing[LINE_TOO_LONG] += 1;
            self.buf.clear();
            self.discarding = true;
        }
    }

    /// The stream ended: the last line needs no newline.
    fn finish(&mut self, ing: &Ingestor, w: &mut Worker) {
        if !self.discarding && !self.buf.is_empty() {
            apply(ing, &self.buf, self.max_line, w);
            self.buf.clear();
        }
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

#[cfg(test)]
mod tests {
    //! Paused-time tests drive the idle timeout and the back-off; tokio
    //! advances paused time whenever the runtime is idle, so a timer can
    //! fire while loopback bytes are still unread: the connection reads
    //! before it looks at its deadline, and the assertions are bounds.
    //! The cap test runs on real time, where no 600 s timer can fire.

    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::ingest::route::tests::ingestor;
    use crate::telemetry::close_reason::{CONNECTION_CAP, IDLE_TIMEOUT};

    fn settings(max_connections: usize) -> TcpSettings {
        TcpSettings {
            allowed: AllowedSources::default(),
            max_connections,
            idle_timeout: Duration::from_secs(600),
            max_line: 1024,
        }
    }

    /// Polls `f` every 10 ms (instant under paused time), at most 10 s.
    async fn until(what: &str, f: impl Fn() -> bool) {
        for _ in 0..1000 {
            if f() {
                return;
            }
            sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting for {what}");
    }

    /// A listener on loopback port 0 served in the background, and the
    /// sender that stops it.
    async fn start(
        ing: &Arc<Ingestor>,
        s: TcpSettings,
    ) -> (SocketAddr, watch::Sender<bool>, tokio::task::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(serve(l, ing.clone(), s, rx, Arc::new(Stop::new())));
        (addr, tx, task)
    }

    /// Fails `failures` accepts with EMFILE, then accepts from `inner`
    /// (or never, without one).
    struct Failing {
        failures: AtomicU64,
        inner: Option<TcpListener>,
    }

    impl Accept for Failing {
        fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
            let left = self.failures.load(Ordering::Relaxed);
            if left > 0 {
                self.failures.store(left - 1, Ordering::Relaxed);
                return Poll::Ready(Err(io::Error::from_raw_os_error(24)));
            }
            match &self.inner {
                Some(l) => l.poll_accept(cx),
                None => Poll::Pending,
            }
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_idle_connection_is_closed_after_the_timeout_and_its_last_line_applied() {
        let ing = ingestor();
        let (addr, _stop, _task) = start(&ing, settings(8)).await;
        let start = Instant::now();
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"idle.a:1|c\nidle.b:2|c").await.unwrap();
        let mut rest = Vec::new();
        assert_eq!(
            c.read_to_end(&mut rest).await.unwrap(),
            0,
            "EOF from the server"
        );
        assert!(
            start.elapsed() >= Duration::from_secs(600),
            "closed after {:?}, before the 600 s idle timeout",
            start.elapsed()
        );
        assert_eq!(
            ing.telemetry.lines(Transport::Tcp),
            2,
            "the partial last line counts"
        );
        assert_eq!(ing.telemetry.tcp_closed.get(IDLE_TIMEOUT), 1);
        assert_eq!(ing.telemetry.tcp_connections.get(), 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn every_read_restarts_the_idle_timeout() {
        let ing = ingestor();
        let (addr, stop, task) = start(&ing, settings(8)).await;
        let mut c = TcpStream::connect(addr).await.unwrap();
        // 1500 s in all, never 600 s without a byte.
        for i in 0..5 {
            c.write_all(format!("busy.m{i}:1|c\n").as_bytes())
                .await
                .unwrap();
            sleep(Duration::from_secs(300)).await;
        }
        until("5 lines", || ing.telemetry.lines(Transport::Tcp) == 5).await;
        assert_eq!(ing.telemetry.tcp_closed.get(IDLE_TIMEOUT), 0);
        assert_eq!(ing.telemetry.tcp_connections.get(), 1);
        // A graceful stop applies what was sent, the last line without a
        // newline included, read or not.
        c.write_all(b"busy.last:1|c").await.unwrap();
        sleep(Duration::from_millis(10)).await;
        stop.send(true).unwrap();
        task.await.unwrap();
        assert_eq!(ing.telemetry.lines(Transport::Tcp), 6);
        assert_eq!(ing.telemetry.tcp_connections.get(), 0);
        assert_eq!(ing.telemetry.tcp_closed.get(IDLE_TIMEOUT), 0);
    }

    /// A client connected from `source` (Linux loopback answers on all of
    /// 127.0.0.0/8).
    async fn connect_from(source: [u8; 4], addr: SocketAddr) -> TcpStream {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.bind(SocketAddr::from((source, 0))).unwrap();
        s.connect(addr).await.unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_client_outside_the_allowed_sources_is_closed_at_accept_and_counted() {
        let ing = ingestor();
        let allowed = AllowedSources::new(vec![
            crate::ingest::SourceNet::parse("127.0.0.2/32").unwrap()
        ]);
        let s = TcpSettings {
            allowed,
            ..settings(8)
        };
        let (addr, stop, task) = start(&ing, s).await;
        let mut outside = connect_from([127, 0, 0, 1], addr).await;
        let _ = outside.write_all(b"src.out:1|c\n").await;
        let mut byte = [0u8; 1];
        // Closed by the server: EOF, or a reset if the line arrived first.
        assert!(!matches!(outside.read(&mut byte).await, Ok(n) if n > 0));
        until("the refusal counted", || {
            ing.telemetry
                .tcp_closed
                .get(close_reason::SOURCE_NOT_ALLOWED)
                == 1
        })
        .await;
        let mut inside = connect_from([127, 0, 0, 2], addr).await;
        inside.write_all(b"src.in:1|c\n").await.unwrap();
        until("the allowed line", || {
            ing.telemetry.lines(Transport::Tcp) == 1
        })
        .await;
        stop.send(true).unwrap();
        task.await.unwrap();
        assert_eq!(ing.telemetry.lines(Transport::Tcp), 1);
        assert_eq!(
            ing.telemetry
                .tcp_closed
                .get(close_reason::SOURCE_NOT_ALLOWED),
            1
        );
        assert_eq!(ing.telemetry.tcp_closed.get(CONNECTION_CAP), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn beyond_the_cap_a_client_is_closed_at_once_and_counted() {
        let ing = ingestor();
        let (addr, stop, task) = start(&ing, settings(2)).await;
        let mut c1 = TcpStream::connect(addr).await.unwrap();
        let mut c2 = TcpStream::connect(addr).await.unwrap();
        c1.write_all(b"cap.a:1|c\n").await.unwrap();
        c2.write_all(b"cap.b:1|c\n").await.unwrap();
        until("2 open connections and 2 lines", || {
            ing.telemetry.tcp_connections.get() == 2 && ing.telemetry.lines(Transport::Tcp) == 2
        })
        .await;

        let mut c3 = TcpStream::connect(addr).await.unwrap();
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(10), c3.read(&mut byte))
            .await
            .expect("the server closes the third connection at once");
        assert!(matches!(read, Ok(0)), "EOF, got {read:?}");
        assert_eq!(ing.telemetry.tcp_closed.get(CONNECTION_CAP), 1);
        assert_eq!(ing.telemetry.tcp_connections.get(), 2);

        // One leaves: a new client is served again.
        drop(c1);
        until("1 open connection", || {
            ing.telemetry.tcp_connections.get() == 1
        })
        .await;
        let mut c4 = TcpStream::connect(addr).await.unwrap();
        c4.write_all(b"cap.c:1|c\n").await.unwrap();
        until("3 lines", || ing.telemetry.lines(Transport::Tcp) == 3).await;
        assert_eq!(ing.telemetry.tcp_connections.get(), 2);
        assert_eq!(ing.telemetry.tcp_closed.get(CONNECTION_CAP), 1);

        stop.send(true).unwrap();
        task.await.unwrap();
        assert_eq!(ing.telemetry.tcp_connections.get(), 0);
        drop((c2, c4));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn failed_accepts_are_counted_and_backed_off_then_serving_resumes() {
        let ing = ingestor();
        let inner = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = inner.local_addr().unwrap();
        let failing = Failing {
            failures: AtomicU64::new(5),
            inner: Some(inner),
        };
        let (_tx, rx) = watch::channel(false);
        let server = {
            let ing = ing.clone();
            tokio::spawn(async move {
                serve_from(&failing, ing, settings(8), rx, Arc::new(Stop::new())).await
            })
        };
        let start = Instant::now();
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"late.a:1|c\n").await.unwrap();
        c.shutdown().await.unwrap();
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).await.unwrap();
        assert_eq!(ing.telemetry.tcp_accept_errors.get(), 5);
        assert_eq!(ing.telemetry.lines(Transport::Tcp), 1);
        // 10 + 20 + 40 + 80 + 160 ms of back-off before the accept.
        assert!(
            start.elapsed() >= Duration::from_millis(310),
            "{:?}",
            start.elapsed()
        );
        server.abort();
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_back_off_stops_at_shutdown() {
        let ing = ingestor();
        let failing = Failing {
            failures: AtomicU64::new(u64::MAX),
            inner: None,
        };
        let (tx, rx) = watch::channel(false);
        let server = {
            let ing = ing.clone();
            tokio::spawn(async move {
                serve_from(&failing, ing, settings(8), rx, Arc::new(Stop::new())).await
            })
        };
        let start = Instant::now();
        sleep(Duration::from_secs(5)).await;
        tx.send(true).unwrap();
        server.await.unwrap();
        // Stopped at once, not at the end of the 1 s sleep under way.
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        // Failures at 0, 10, 30, 70, 150, 310, 630 ms, then 1.27 s, 2.27,
        // 3.27 and 4.27 s: no spinning.
        assert_eq!(ing.telemetry.tcp_accept_errors.get(), 11);
    }
}
