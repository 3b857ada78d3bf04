//! One HTTP connection's deadlines: the socket wrapped so that every phase of
//! the connection is bounded in time, as careful servers bound it (nginx's
//! `client_header_timeout`, `keepalive_timeout`, `send_timeout`; Go's
//! `ReadHeaderTimeout` and `IdleTimeout`).
//!
//! A connection is in one of three phases, tracked by [`ConnState`]:
//!
//! * **head**: from accept (a new connection) or from the first byte of a
//!   request (a kept-alive one) until hyper has parsed the request's head and
//!   called the service. Reads must complete the head by `header_timeout`.
//! * **busy**: from the service call until the response body has been
//!   written (or dropped). No read deadline here: the body has its own
//!   ([`super::body`]), and a long response is not idleness.
//! * **idle**: after a response, until the next request's first byte; the
//!   connection is closed after `idle_timeout`.
//!
//! hyper's own `header_read_timeout` cannot tell idle from head (its timer
//! starts when it begins waiting for a request), so it is left off and the
//! deadlines live here, at the socket. Writes have a progress deadline in
//! every phase: a write (or flush) that stays blocked for `write_timeout`,
//! because the client stopped reading, fails the connection, which drops
//! the response and whatever it held (a `/metrics` scrape slot).
//!
//! The wrapper also keeps the raw bytes of each request head (up to
//! [`MAX_SNIFFED_HEAD`]) so that [`framing_problem`] can see what
//! hyper folds away: a `Content-Length` next to `Transfer-Encoding`.
//!
//! **Over TLS** the wrapper sits on the TLS stream (above the decryption),
//! not on the TCP stream under it: the phases and the framing check must
//! see request bytes, and under TLS the socket also carries records that
//! are no request (session tickets, alerts, key updates), so a wrapper on
//! the TCP stream would take a close_notify for a request's first byte and
//! never find a head's end in ciphertext. The deadlines still hold at the
//! socket: a TLS read is pending until a whole record has arrived, and a
//! TLS write or flush is pending while the socket takes no more, so the
//! same timers fire. The handshake happens before the wrapper exists, cut
//! at the connection's header deadline ([`super::handshake`]), which counts from
//! accept as it does for plain HTTP.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::telemetry::{close_reason, ReasonCounters};

/// The longest request head kept for the framing check. hyper refuses
/// longer heads itself (`max_buf_size` in [`super::serve`]).
pub const MAX_SNIFFED_HEAD: usize = 64 * 1024;

/// The deadlines of one connection (from `[http]`).
#[derive(Clone, Copy, Debug)]
pub struct Deadlines {
    /// Head phase: the whole head within this.
    pub header: Duration,
    /// Idle phase: the next request's first byte within this.
    pub idle: Duration,
    /// Any phase: a blocked write must make progress within this.
    pub write: Duration,
}

#[derive(Debug)]
enum Phase {
    /// Waiting for (the rest of) a request head since `since`.
    Head { since: Instant },
    /// A request is being served.
    Busy,
    /// Waiting for a request since `since`.
    Idle { since: Instant },
}

#[derive(Debug)]
struct Inner {
    phase: Phase,
    /// Raw bytes of the current request head, while in the head phase.
    head: Vec<u8>,
    /// Whether `head` holds a complete head (`\r\n\r\n` seen) or stopped
    /// at the cap.
    head_done: bool,
    /// The framing problem found in the last complete head, if any.
    framing: Option<&'static str>,
    /// The reader waiting for bytes: woken when the request ends (to arm
    /// the idle deadline) or the daemon stops (to end a head at once).
    waiting_reader: Option<std::task::Waker>,
    /// The daemon is stopping: a connection in the head phase is closed.
    stopping: bool,
}

/// What the socket wrapper, the service and the response body share about
/// one connection.
#[derive(Debug)]
pub struct ConnState {
    inner: Mutex<Inner>,
}

impl ConnState {
    /// A new connection accepted at `now`: in the head phase.
    #[must_use]
    pub fn new(now: Instant) -> Arc<ConnState> {
        Arc::new(ConnState {
            inner: Mutex::new(Inner {
                phase: Phase::Head { since: now },
                head: Vec::new(),
                head_done: false,
                framing: None,
                waiting_reader: None,
                stopping: false,
            }),
        })
    }

    /// hyper parsed a head and calls the service: the request is busy
    /// until [`request_ended`](Self::request_ended). Returns the framing
    /// problem of that head, if its raw bytes showed one.
    pub fn request_started(&self) -> Option<&'static str> {
        let mut g = self.inner.lock();
        g.phase = Phase::Busy;
        let framing = if g.head_done {
            framing_problem(&g.head)
        } else {
            None
        };
        clear_head(&mut g.head);
        g.head_done = false;
        g.framing = framing;
        framing
    }

    /// Whether no request is being served (waiting for one, or for the
    /// rest of its head): such a connection can be closed at a stop without
    /// losing a response.
    #[must_use]
    pub fn awaiting_request(&self) -> bool {
        !matches!(self.inner.lock().phase, Phase::Busy)
    }

    /// The daemon is stopping: a connection still waiting for a head is
    /// closed at once (hyper's graceful shutdown closes idle ones and lets a
    /// busy one finish its response).
    pub fn stop(&self) {
        let mut g = self.inner.lock();
        g.stopping = true;
        let reader = g.waiting_reader.take();
        drop(g);
        if let Some(w) = reader {
            w.wake();
        }
    }

    /// Bytes were written at `now`: a response still going out is not
    /// idleness, so the idle (or next head's) deadline counts from here. A
    /// write that makes no progress has its own deadline.
    fn on_write(&self, now: Instant) {
        let mut g = self.inner.lock();
        match &mut g.phase {
            Phase::Idle { since } | Phase::Head { since } => *since = now,
            Phase::Busy => {}
        }
    }

    /// The response was written (or dropped) at `now`: idle.
    pub fn request_ended(&self, now: Instant) {
        let mut g = self.inner.lock();
        if matches!(g.phase, Phase::Busy) {
            g.phase = Phase::Idle { since: now };
        }
        let reader = g.waiting_reader.take();
        drop(g);
        if let Some(w) = reader {
            w.wake();
        }
    }

    /// Bytes arrived at `now`: an idle connection starts a head; a head
    /// keeps its raw bytes for the framing check.
    fn on_read(&self, bytes: &[u8], now: Instant) {
        let mut g = self.inner.lock();
        if let Phase::Idle { .. } = g.phase {
            g.phase = Phase::Head { since: now };
            clear_head(&mut g.head);
            g.head_done = false;
        }
        if let Phase::Head { .. } = g.phase {
            // Empty lines before a request line are allowed (RFC 9112
            // §2.2) and skipped by hyper: skip them here too, or they would
            // look like a complete head.
            let bytes = if g.head.is_empty() {
                let skip = bytes
                    .iter()
                    .take_while(|b| matches!(b, b'\r' | b'\n'))
                    .count();
                &bytes[skip..]
            } else {
                bytes
            };
            if !g.head_done && !bytes.is_empty() {
                let keep = bytes
                    .len()
                    .min(MAX_SNIFFED_HEAD.saturating_sub(g.head.len()));
                // Look for the end of the head across the seam too.
                let from = g.head.len().saturating_sub(3);
                g.head.extend_from_slice(&bytes[..keep]);
                if memchr::memmem::find(&g.head[from..], b"\r\n\r\n").is_some()
                    || g.head.len() >= MAX_SNIFFED_HEAD
                {
                    g.head_done = true;
                }
            }
        }
    }

    /// When reads must have delivered what the phase waits for, and the
    /// reason counted if they did not. While busy there is none, and the
    /// reader (`waker`) is woken when the request ends.
    fn read_deadline(
        &self,
        d: &Deadlines,
        waker: Option<&std::task::Waker>,
    ) -> Option<(Instant, &'static str)> {
        let mut g = self.inner.lock();
        if let Some(w) = waker {
            g.waiting_reader = Some(w.clone());
        }
        match g.phase {
            // Not a timeout: not counted (no such reason in the family).
            Phase::Head { .. } if g.stopping => Some((Instant::now(), "stopping")),
            Phase::Head { since } => Some((since + d.header, close_reason::HEADER_TIMEOUT)),
            Phase::Idle { since } => Some((since + d.idle, close_reason::IDLE_TIMEOUT)),
            Phase::Busy => None,
        }
    }
}

/// Empties a head buffer, giving back the memory of an unusually long one.
fn clear_head(head: &mut Vec<u8>) {
    if head.capacity() > 4096 {
        *head = Vec::new();
    } else {
        head.clear();
    }
}

/// Whether a request head (raw bytes, ending in `\r\n\r\n`) frames its body
/// ambiguously: two `Content-Length` headers that differ, or a
/// `Content-Length` next to a `Transfer-Encoding` (RFC 9112 §6.3: a
/// request-smuggling sign). Returns the refusal reason.
#[must_use]
pub fn framing_problem(head: &[u8]) -> Option<&'static str> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    // A head hyper accepted but httparse cannot read (more than 128
    // headers): no verdict here, hyper's framing stands.
    if !matches!(req.parse(head), Ok(httparse::Status::Complete(_))) {
        return None;
    }
    let mut length: Option<&[u8]> = None;
    let mut lengths_differ = false;
    let mut transfer_encoding = false;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = h.value.trim_ascii();
            match length {
                Some(prev) if prev != v => lengths_differ = true,
                _ => length = Some(v),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = true;
        }
    }
    (lengths_differ || (length.is_some() && transfer_encoding))
        .then_some(crate::telemetry::refuse_reason::AMBIGUOUS_FRAMING)
}

/// A stream (TCP, or TLS over TCP) whose reads and writes fail with
/// `TimedOut` when the connection's phase deadline passes (counted under
/// its reason in `closed`).
pub struct DeadlineIo<S> {
    stream: S,
    state: Arc<ConnState>,
    deadlines: Deadlines,
    closed: ReasonCounters,
    read_timer: Option<Pin<Box<Sleep>>>,
    write_timer: Option<Pin<Box<Sleep>>>,
}

impl<S> DeadlineIo<S> {
    /// Wraps an accepted stream.
    #[must_use]
    pub fn new(
        stream: S,
        state: Arc<ConnState>,
        deadlines: Deadlines,
        closed: ReasonCounters,
    ) -> DeadlineIo<S> {
        DeadlineIo {
            stream,
            state,
            deadlines,
            closed,
            read_timer: None,
            write_timer: None,
        }
    }

    /// Called when a write-side operation is pending: fails once it has
    /// been pending for the write deadline.
    fn write_pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let write = self.deadlines.write;
        let timer = self
            .write_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(write)));
        if timer.as_mut().poll(cx).is_ready() {
            self.write_timer = None;
            self.closed.inc(close_reason::WRITE_TIMEOUT);
            return Poll::Ready(Err(timed_out(close_reason::WRITE_TIMEOUT)));
        }
        Poll::Pending
    }

    fn write_done<T>(
        &mut self,
        r: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match r {
            Poll::Pending => self.write_pending(cx),
            ready => {
                self.write_timer = None;
                ready
            }
        }
    }
}

impl<S> DeadlineIo<S> {
    /// Bytes written count as activity (a flush that had nothing to write
    /// does not: hyper flushes after every read).
    fn wrote(&self, r: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = r {
            if *n > 0 {
                self.state.on_write(Instant::now());
            }
        }
    }
}

fn timed_out(reason: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, reason)
}

impl<S: AsyncRead + Unpin> AsyncRead for DeadlineIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let got = &buf.filled()[before..];
                if !got.is_empty() {
                    this.state.on_read(got, Instant::now());
                }
                this.read_timer = None;
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let Some((deadline, reason)) =
                    this.state.read_deadline(&this.deadlines, Some(cx.waker()))
                else {
                    this.read_timer = None;
                    return Poll::Pending;
                };
                let timer = this
                    .read_timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if timer.deadline() != deadline {
                    timer.as_mut().reset(deadline);
                }
                if timer.as_mut().poll(cx).is_ready() {
                    this.read_timer = None;
                    this.closed.inc(reason);
                    return Poll::Ready(Err(timed_out(reason)));
                }
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for DeadlineIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.wrote(&r);
        this.write_done(r, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.wrote(&r);
        this.write_done(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_flush(cx);
        this.write_done(r, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_shutdown(cx);
        this.write_done(r, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_problems_are_found_in_the_raw_head() {
        let ok = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(framing_problem(ok), None);
        let same_twice = b"POST /x HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n";
        assert_eq!(framing_problem(same_twice), None);
        let differ = b"POST /x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
        assert_eq!(framing_problem(differ), Some("ambiguous_framing"));
        let both = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(framing_problem(both), Some("ambiguous_framing"));
        let both_other_order =
            b"POST /x HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n";
        assert_eq!(framing_problem(both_other_order), Some("ambiguous_framing"));
        let chunked = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(framing_problem(chunked), None);
        // Not a complete head: no verdict.
        assert_eq!(framing_problem(b"POST /x HTTP/1.1\r\nContent-Le"), None);
    }

    #[test]
    fn leading_empty_lines_do_not_end_the_sniffed_head() {
        let t0 = Instant::now();
        let s = ConnState::new(t0);
        s.on_read(b"\r\n\r\n", t0);
        s.on_read(
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            t0,
        );
        assert_eq!(s.request_started(), Some("ambiguous_framing"));
    }

    /// The `[http]` defaults.
    const DEFAULTS: Deadlines = Deadlines {
        header: Duration::from_secs(10),
        idle: Duration::from_secs(75),
        write: Duration::from_secs(30),
    };

    #[test]
    fn a_response_still_being_written_is_not_idleness() {
        let t0 = Instant::now();
        let d = DEFAULTS;
        let s = ConnState::new(t0);
        s.on_read(b"GET / HTTP/1.1\r\n\r\n", t0);
        s.request_started();
        // hyper drops a one-piece body once queued, before it is written.
        s.request_ended(t0);
        let t1 = t0 + Duration::from_secs(60);
        s.on_write(t1);
        assert_eq!(
            s.read_deadline(&d, None),
            Some((t1 + d.idle, close_reason::IDLE_TIMEOUT))
        );
        // Stopping ends a head at once, not an idle connection.
        s.on_read(b"GE", t1);
        s.stop();
        let (at, _) = s.read_deadline(&d, None).unwrap();
        assert!(at <= Instant::now());
    }

    #[test]
    fn phases_follow_the_requests() {
        let t0 = Instant::now();
        let d = DEFAULTS;
        let s = ConnState::new(t0);
        assert_eq!(
            s.read_deadline(&d, None),
            Some((t0 + d.header, close_reason::HEADER_TIMEOUT))
        );
        s.on_read(b"GET / HTTP/1.1\r\n", t0);
        s.on_read(
            b"Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            t0,
        );
        assert_eq!(s.request_started(), Some("ambiguous_framing"));
        assert_eq!(s.read_deadline(&d, None), None);
        let t1 = t0 + Duration::from_secs(1);
        s.request_ended(t1);
        assert_eq!(
            s.read_deadline(&d, None),
            Some((t1 + d.idle, close_reason::IDLE_TIMEOUT))
        );
        // The next request's first byte starts its head deadline.
        let t2 = t1 + Duration::from_secs(5);
        s.on_read(b"G", t2);
        assert_eq!(
            s.read_deadline(&d, None),
            Some((t2 + d.header, close_reason::HEADER_TIMEOUT))
        );
        s.on_read(b"ET / HTTP/1.1\r\n\r\n", t2);
        assert_eq!(s.request_started(), None);
    }
}
