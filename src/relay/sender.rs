//! A relay's sender thread: takes queued batches, packs their lines into
//! datagrams (UDP) or writes (TCP) of at most `max_datagram_bytes`, sends
//! them, and counts what was sent and what was lost.
//!
//! * UDP: one socket `connect`ed to the destination (resolved at start,
//!   retried with back-off until it resolves), so that the kernel reports
//!   `ECONNREFUSED` from a closed port on a later send: that send's lines
//!   are counted `send_error`. A datagram the destination never reads
//!   counts as sent (UDP cannot tell).
//! * TCP: connect within [`CONNECT_TIMEOUT`] (the host name resolved at
//!   every attempt), writes within [`WRITE_TIMEOUT`]; a failed write closes
//!   the connection, its lines and the rest of its batch are counted
//!   `connection_lost`, and connects are retried from 100 ms doubling to
//!   5 s. While there is no connection nothing is taken from the buffer:
//!   lines wait there (an outage shorter than the buffer loses nothing) and
//!   beyond it are dropped on the ingest path as `buffer_full`. Before each
//!   batch the connection is checked for an orderly close by the
//!   destination (its idle timeout), so that lines are not written into a
//!   connection that is already gone.
//! * At stop ([`Relays::stop`](super::Relays::stop)) the sender sends what
//!   is buffered until the deadline, then counts the rest as
//!   `stop_deadline` and ends. The deadline bounds every TCP write, one
//!   already blocked when the stop began included: a write waits for the
//!   socket at most [`WRITE_POLL`] at a time and looks at the deadline in
//!   between ([`Sender::write_tcp`]), so a destination that never reads
//!   holds the stop at most that much past its deadline; the lines of a
//!   write cut short so are counted `stop_deadline` too.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::pack::{batch_lines, Packed, Packer, Reconnect};
use super::RelayProtocol;
use super::{give_back, Relay, Relays};
use crate::clock::{Clock, Timestamp};
use crate::telemetry::relay_drop_reason;

/// A TCP connect that takes longer fails.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A TCP write that makes no progress for this long fails.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a TCP write waits for the socket before it looks at the
/// stop's deadline again.
pub const WRITE_POLL: Duration = Duration::from_millis(50);
/// The longest a sender sleeps with nothing to do (a wake-up comes
/// earlier when lines arrive or the stop begins).
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// At most one log line per relay and kind of failure this often.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The running sender threads.
pub struct Senders {
    threads: Vec<JoinHandle<()>>,
}

impl Senders {
    /// Waits for every sender to end (after [`Relays::stop`]).
    pub fn join(self) {
        for t in self.threads {
            if t.join().is_err() {
                tracing::error!("A relay sender thread panicked; its buffered lines are lost. This is a bug: please report it.");
            }
        }
    }
}

/// Starts one sender thread per relay.
///
/// # Errors
///
/// A thread that cannot be started.
pub fn spawn(relays: &Relays, clock: Arc<dyn Clock>) -> io::Result<Senders> {
    let mut threads = Vec::new();
    for (i, r) in relays.iter().enumerate() {
        let (r, clock) = (r.clone(), clock.clone());
        threads.push(
            std::thread::Builder::new()
                .name(format!("rollstat-relay-{i}"))
                .spawn(move || run(&r, &*clock))?,
        );
    }
    Ok(Senders { threads })
}

/// Where lines go: a socket, or none yet.
enum Dest {
    None,
    Udp(UdpSocket),
    Tcp(TcpStream),
}

/// A rate-limited warning: the first of a streak, then one per
/// [`LOG_EVERY`] with the count in between.
#[derive(Default)]
struct Quiet {
    last: Option<Timestamp>,
    unlogged: u64,
}

impl Quiet {
    /// Whether to log now; `Some(n)`: n events not logged since.
    fn log(&mut self, now: Timestamp) -> Option<u64> {
        self.unlogged += 1;
        if self.last.is_some_and(|t| now < t + LOG_EVERY) {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unlogged) - 1)
    }
}

/// Why a TCP write failed.
enum WriteFailed {
    /// The socket failed, or made no progress for [`WRITE_TIMEOUT`].
    Io(io::Error),
    /// The stop's deadline passed first.
    Deadline,
}

struct Sender<'r> {
    r: &'r Relay,
    clock: &'r dyn Clock,
    /// The write timeout last set on the TCP socket.
    write_timeout: Option<Duration>,
    /// Lines of writes the stop's deadline cut short.
    cut: u64,
    dest: Dest,
    retry: Reconnect,
    /// No connect before this.
    next_try: Timestamp,
    connect_log: Quiet,
    send_log: Quiet,
}

impl Sender<'_> {
    fn connected(&self) -> bool {
        !matches!(self.dest, Dest::None)
    }

    fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
        match self.r.def.literal {
            Some(a) => Ok(vec![a]),
            None => Ok(self.r.def.address.to_socket_addrs()?.collect()),
        }
    }

    /// One connect attempt, at most `limit` long (TCP).
    fn connect(&mut self, now: Timestamp, limit: Duration) {
        let attempt = self.resolve().and_then(|addrs| {
            let mut last =
                io::Error::new(io::ErrorKind::NotFound, "the name resolved to no address");
            for a in addrs {
                let made = match self.r.def.protocol {
                    RelayProtocol::Udp => {
                        let local: SocketAddr = if a.is_ipv4() {
                            ([0, 0, 0, 0], 0).into()
                        } else {
                            ([0u16; 8], 0).into()
                        };
                        UdpSocket::bind(local).and_then(|s| s.connect(a).map(|()| Dest::Udp(s)))
                    }
                    RelayProtocol::Tcp => TcpStream::connect_timeout(&a, limit).and_then(|s| {
                        s.set_nodelay(true)?;
                        Ok(Dest::Tcp(s))
                    }),
                };
                match made {
                    Ok(d) => return Ok(d),
                    Err(e) => last = e,
                }
            }
            Err(last)
        });
        match attempt {
            Ok(d) => {
                if self.retry.failures() > 0 {
                    tracing::info!(relay = self.r.name(), address = %self.r.def.address, "Relay destination reachable again.");
                }
                self.retry.succeeded();
                self.connect_log = Quiet::default();
                self.dest = d;
                self.write_timeout = None;
                self.r.counters.connected.set(1);
            }
            Err(e) => {
                let wait = self.retry.failed();
                self.next_try = now + wait;
                if let Some(since) = self.connect_log.log(now) {
                    tracing::warn!(relay = self.r.name(), address = %self.r.def.address, protocol = self.r.def.protocol.as_str(), error = %e, failures_not_logged = since, retry_in_ms = wait.as_millis() as u64, "Cannot reach the relay destination; lines wait in its buffer (buffer_bytes) and beyond it are dropped, counted in rollstat_relay_lines_dropped_total{{reason=\"buffer_full\"}}. Retrying with back-off.");
                }
            }
        }
    }

    /// Drops the connection after a failure: retried after back-off.
    fn lost(&mut self, now: Timestamp) {
        self.dest = Dest::None;
        self.r.counters.connected.set(0);
        self.next_try = now + self.retry.failed();
    }

    /// Whether the TCP destination closed the connection (or reset it)
    /// since the last write; a closed one is dropped.
    fn check_closed(&mut self, now: Timestamp) {
        let Dest::Tcp(s) = &mut self.dest else {
            return;
        };
        let mut probe = [0u8; 64];
        let gone = s.set_nonblocking(true).is_err()
            || match s.read(&mut probe) {
                Ok(0) => true,
                // The destination should not talk; whatever it said is
                // ignored.
                Ok(_) => false,
                Err(e) => e.kind() != io::ErrorKind::WouldBlock,
            }
            || s.set_nonblocking(false).is_err();
        if gone {
            tracing::info!(relay = self.r.name(), address = %self.r.def.address, "The relay destination closed the connection; connecting again.");
            self.lost(now);
            self.next_try = now;
        }
    }

    /// Writes all of `d` to the TCP destination, failing when a write makes
    /// no progress for [`WRITE_TIMEOUT`] or when the stop's deadline passes,
    /// whichever comes first: the socket is waited for at most
    /// [`WRITE_POLL`] at a time, the deadline read in between (a stop that
    /// begins during a blocked write is seen within that).
    fn write_tcp(&mut self, mut d: &[u8]) -> Result<(), WriteFailed> {
        let Dest::Tcp(s) = &mut self.dest else {
            return Ok(());
        };
        let mut progress = self.clock.now();
        while !d.is_empty() {
            let now = self.clock.now();
            let stop = self.r.shared.lock().stop;
            let wait = write_wait(now, progress, stop).ok_or(WriteFailed::Deadline)?;
            if wait.is_zero() {
                return Err(WriteFailed::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the destination read nothing for {} s",
                        WRITE_TIMEOUT.as_secs()
                    ),
                )));
            }
            // A system call only when the wait changes (near a deadline).
            if self.write_timeout != Some(wait) {
                s.set_write_timeout(Some(wait)).map_err(WriteFailed::Io)?;
                self.write_timeout = Some(wait);
            }
            match s.write(d) {
                Ok(0) => return Err(WriteFailed::Io(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    d = &d[n..];
                    progress = self.clock.now();
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(WriteFailed::Io(e)),
            }
        }
        Ok(())
    }

    /// Sends one datagram (or write) of `lines` lines.
    fn send(&mut self, d: &[u8], lines: u64, now: Timestamp) {
        let result = match &mut self.dest {
            Dest::None => {
                self.r
                    .counters
                    .dropped(relay_drop_reason::CONNECTION_LOST)
                    .inc_by(lines);
                return;
            }
            Dest::Udp(s) => s.send(d).map(|_| ()).map_err(WriteFailed::Io),
            Dest::Tcp(_) => self.write_tcp(d),
        };
        let c = &self.r.counters;
        match result {
            Ok(()) => {
                c.lines_sent.inc_by(lines);
                c.datagrams_sent.inc();
                c.bytes_sent.inc_by(d.len() as u64);
            }
            Err(WriteFailed::Deadline) => {
                // Logged with the rest of the stop's lines.
                c.dropped(relay_drop_reason::STOP_DEADLINE).inc_by(lines);
                self.cut += lines;
                self.lost(now);
            }
            Err(WriteFailed::Io(e)) => {
                let tcp = matches!(self.dest, Dest::Tcp(_));
                let reason = if tcp {
                    relay_drop_reason::CONNECTION_LOST
                } else {
                    relay_drop_reason::SEND_ERROR
                };
                c.dropped(reason).inc_by(lines);
                if let Some(since) = self.send_log.log(now) {
                    tracing::warn!(relay = self.r.name(), address = %self.r.def.address, error = %e, errors_not_logged = since, "Relay send failed; its lines are counted in rollstat_relay_lines_dropped_total{{reason=\"{reason}\"}}.");
                }
                if tcp {
                    self.lost(now);
                }
            }
        }
    }
}

/// The sender's loop, until the stop's deadline or an empty buffer after
/// the stop.
fn run(r: &Relay, clock: &dyn Clock) {
    let interval = r.def.flush_interval;
    let mut packer = Packer::new(r.def.max_datagram_bytes);
    let mut tx = Sender {
        r,
        clock,
        write_timeout: None,
        cut: 0,
        dest: Dest::None,
        retry: Reconnect::default(),
        next_try: Timestamp::EPOCH,
        connect_log: Quiet::default(),
        send_log: Quiet::default(),
    };
    loop {
        let now = clock.now();
        let stop = r.shared.lock().stop;
        if !tx.connected() && now >= tx.next_try {
            let limit = stop.map_or(CONNECT_TIMEOUT, |d| {
                d.saturating_duration_since(now).min(CONNECT_TIMEOUT)
            });
            if limit > Duration::ZERO {
                tx.connect(now, limit);
            }
        }
        let now = clock.now();
        let mut s = r.shared.lock();
        if let Some(deadline) = s.stop.filter(|d| now >= *d) {
            // Out of time: what is left is counted, not sent.
            let mut left = packer.pending();
            while let Some(b) = s.queue.pop() {
                left += b.count;
                let len = b.lines.len();
                s.queue.done(len);
            }
            r.counters.buffered.set(0);
            drop(s);
            r.counters
                .dropped(relay_drop_reason::STOP_DEADLINE)
                .inc_by(left);
            // With the lines of a write the deadline cut short.
            let left = left + tx.cut;
            if left > 0 {
                tracing::warn!(relay = r.name(), lines = left, deadline_ns = deadline.as_nanos(), "Relay stop deadline passed: lines still buffered are not sent (counted in rollstat_relay_lines_dropped_total{{reason=\"stop_deadline\"}}).");
            }
            return;
        }
        let batch = if tx.connected() { s.queue.pop() } else { None };
        let Some(batch) = batch else {
            let due = packer.due(interval);
            if tx.connected() && (due.is_some_and(|d| now >= d) || s.stop.is_some()) {
                // A partly filled datagram that waited long enough, or the
                // last one at stop.
                drop(s);
                packer.flush(&mut |d, n| tx.send(d, n, now));
                let s = r.shared.lock();
                if s.stop.is_some() && s.queue.is_empty() {
                    return;
                }
                continue;
            }
            if s.stop.is_some() && s.queue.is_empty() && packer.pending() == 0 {
                return;
            }
            let mut wait = IDLE_WAIT;
            if let Some(d) = due {
                wait = wait.min(d.saturating_duration_since(now));
            }
            if !tx.connected() {
                wait = wait.min(tx.next_try.saturating_duration_since(now));
            }
            if let Some(d) = s.stop {
                wait = wait.min(d.saturating_duration_since(now));
            }
            if wait > Duration::ZERO {
                r.wake.wait_for(&mut s, wait);
            }
            continue;
        };
        drop(s);
        tx.check_closed(now);
        let mut too_long = 0;
        for line in batch_lines(&batch.lines) {
            if packer.push(line, now, &mut |d, n| tx.send(d, n, now)) == Packed::TooLong {
                too_long += 1;
            }
        }
        if too_long > 0 {
            r.counters
                .dropped(relay_drop_reason::TOO_LONG)
                .inc_by(too_long);
        }
        if packer.due(interval).is_some_and(|d| now >= d) {
            packer.flush(&mut |d, n| tx.send(d, n, now));
        }
        let mut s = r.shared.lock();
        s.queue.done(batch.lines.len());
        r.counters.buffered.set(s.queue.bytes() as i64);
        give_back(&mut s, batch.lines);
    }
}

/// How long the next TCP write may wait for the socket: at most
/// [`WRITE_POLL`], what is left of [`WRITE_TIMEOUT`] since the last
/// progress (zero: it has run out), and what is left before the stop's
/// deadline (`None`: it has passed).
fn write_wait(now: Timestamp, progress: Timestamp, stop: Option<Timestamp>) -> Option<Duration> {
    let stalled = now.saturating_duration_since(progress);
    let mut wait = WRITE_TIMEOUT.saturating_sub(stalled).min(WRITE_POLL);
    if let Some(deadline) = stop {
        if now >= deadline {
            return None;
        }
        wait = wait.min(deadline.saturating_duration_since(now));
    }
    Some(wait)
}

#[cfg(test)]
mod tests {
    use super::super::Outbox;
    use super::*;
    use crate::config::Config;
    use crate::telemetry::Telemetry;
    use crate::SystemClock;

    fn relays(toml: &str) -> (Relays, Telemetry) {
        let cfg = Config::parse(toml).unwrap();
        let t = Telemetry::new().unwrap();
        (Relays::new(&cfg.relays, &t.relay).unwrap(), t)
    }

    #[test]
    fn udp_lines_arrive_packed_and_a_stop_sends_the_last_partial_datagram() {
        let dest = UdpSocket::bind("127.0.0.1:0").unwrap();
        dest.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (rs, t) = relays(&format!(
            "[[relay]]\nname = \"d\"\naddress = \"{}\"\nmax_datagram_bytes = 100\nflush_interval_ms = 60000\n",
            dest.local_addr().unwrap()
        ));
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
        let senders = spawn(&rs, clock.clone()).unwrap();
        let mut out = Outbox::default();
        for i in 0..50 {
            rs.offer(format!("m{i:02}:1|c").as_bytes(), "m", false, &mut out);
        }
        rs.hand_off(&mut out);
        // 50 lines of 8 bytes in datagrams of at most 100 (a byte of it the
        // marker): 12 per datagram.
        // The last 2 wait for the (minute-long) flush interval, or the stop.
        rs.stop(clock.now() + Duration::from_secs(5));
        senders.join();
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        while got.len() < 50 {
            let n = dest.recv(&mut buf).unwrap();
            assert!(n <= 100, "a datagram of {n} bytes");
            got.extend(batch_lines(&buf[..n]).map(|l| String::from_utf8(l.to_vec()).unwrap()));
        }
        let want: Vec<String> = (0..50).map(|i| format!("m{i:02}:1|c")).collect();
        assert_eq!(got, want);
        let c = t.relay.counters("d");
        assert_eq!((c.lines_sent.get(), c.datagrams_sent.get()), (50, 5));
        // 50 lines of 8 bytes and each datagram's marker.
        assert_eq!(c.bytes_sent.get(), 405);
        assert_eq!(c.buffered.get(), 0);
    }

    #[test]
    fn a_tcp_destination_nobody_listens_on_costs_only_counted_lines_at_stop() {
        // A port just freed: nobody listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (rs, t) = relays(&format!(
            "[[relay]]\nname = \"down\"\nprotocol = \"tcp\"\naddress = \"127.0.0.1:{port}\"\n"
        ));
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
        let senders = spawn(&rs, clock.clone()).unwrap();
        let mut out = Outbox::default();
        for _ in 0..30 {
            rs.offer(b"a:1|c", "a", false, &mut out);
        }
        rs.hand_off(&mut out);
        rs.stop(clock.now() + Duration::from_millis(300));
        senders.join();
        let c = t.relay.counters("down");
        assert_eq!(c.lines_sent.get(), 0);
        assert_eq!(c.dropped(relay_drop_reason::STOP_DEADLINE).get(), 30);
        assert_eq!(c.connected.get(), 0);
        assert_eq!(c.buffered.get(), 0);
    }

    #[test]
    fn a_tcp_write_waits_a_poll_at_most_and_never_past_the_deadline() {
        let t = Timestamp::from_secs(100);
        let ms = Duration::from_millis;
        // Not stopping: a poll at a time, until 5 s without progress.
        assert_eq!(write_wait(t, t, None), Some(WRITE_POLL));
        assert_eq!(write_wait(t + ms(4980), t, None), Some(ms(20)));
        assert_eq!(write_wait(t + WRITE_TIMEOUT, t, None), Some(Duration::ZERO));
        // Stopping: never past the deadline, which ends the write.
        let stop = Some(t + ms(1000));
        assert_eq!(write_wait(t + ms(990), t + ms(900), stop), Some(ms(10)));
        assert_eq!(write_wait(t + ms(100), t, stop), Some(WRITE_POLL));
        assert_eq!(write_wait(t + ms(1000), t, stop), None);
    }

    #[test]
    fn a_stop_cuts_a_tcp_write_blocked_on_a_destination_that_never_reads() {
        // Accepts (the kernel does, from the backlog) and never reads.
        let dest = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (rs, t) = relays(&format!(
            "[[relay]]\nname = \"stuck\"\nprotocol = \"tcp\"\naddress = \"{}\"\nmax_datagram_bytes = 65507\nbuffer_bytes = 16777216\n",
            dest.local_addr().unwrap()
        ));
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
        let senders = spawn(&rs, clock.clone()).unwrap();
        // 16 MB of lines: far more than both socket buffers hold.
        let line = [b'x'; 1000];
        let mut out = Outbox::default();
        for _ in 0..16_000 {
            rs.offer(&line, "x", false, &mut out);
        }
        rs.hand_off(&mut out);
        let c = t.relay.counters("stuck");
        // Until the writes block: sending stalls with lines still buffered.
        let mut last = u64::MAX;
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let sent = c.lines_sent.get();
            if sent == last && c.buffered.get() > 0 {
                break;
            }
            last = sent;
        }
        let begun = clock.now();
        rs.stop(begun + Duration::from_millis(300));
        senders.join();
        let took = clock.now().saturating_duration_since(begun);
        assert!(
            took < Duration::from_millis(300) + 2 * WRITE_POLL,
            "the stop took {took:?}"
        );
        let cut = c.dropped(relay_drop_reason::STOP_DEADLINE).get();
        assert_eq!(c.lines_sent.get() + cut, 16_000);
        assert!(cut > 0);
        assert_eq!(c.dropped(relay_drop_reason::CONNECTION_LOST).get(), 0);
        drop(dest);
    }

    #[test]
    fn a_warning_is_logged_first_then_at_most_every_ten_seconds_with_the_count() {
        let mut q = Quiet::default();
        let t = Timestamp::from_secs(100);
        assert_eq!(q.log(t), Some(0));
        assert_eq!(q.log(t + Duration::from_secs(1)), None);
        assert_eq!(q.log(t + Duration::from_secs(9)), None);
        assert_eq!(q.log(t + Duration::from_secs(10)), Some(2));
        assert_eq!(q.log(t + Duration::from_secs(11)), None);
    }
}
