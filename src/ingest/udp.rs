//! statsd over UDP: several reader threads on one port (SO_REUSEPORT), each
//! draining its socket in batches with one clock reading per batch.
//!
//! Blocking OS threads rather than async tasks: a UDP reader has nothing else
//! to wait for, and a thread per core with a blocking `recv` is the cheapest
//! way to drain a socket. A read timeout lets the threads notice shutdown.
//!
//! With `[ingest] allowed_sources` set, each socket is read with its
//! sender's address ([`Screened`]): a datagram from outside the list is
//! dropped before parsing and counted in
//! `rollstat_udp_datagrams_dropped_total{reason="source_not_allowed"}`. With
//! the list empty (the default) the readers never ask for the address.

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, recvmsg, setsockopt, sockopt, MsgFlags, SockaddrStorage};
use socket2::{Domain, Protocol, Socket, Type};

use super::fault::Faulty;
use super::reader::{self, Source, BATCH, POLL};
use super::route::{self, Router};
use super::stop::Stop;
use super::supervise::Supervisor;
use super::AllowedSources;
use super::Ingestor;
use crate::telemetry::{udp_drop_reason, ReasonCounters, Transport};

/// Bound UDP sockets sharing one port.
pub struct UdpSockets {
    /// One per reader.
    pub sockets: Vec<UdpSocket>,
    /// The address actually bound (port 0 resolved).
    pub local_addr: SocketAddr,
    /// SO_RCVBUF the kernel granted (Linux reports twice the size asked
    /// for: the other half accounts for its own bookkeeping).
    pub recv_buffer: usize,
    /// Whether the size was forced past `net.core.rmem_max`
    /// (`SO_RCVBUFFORCE`, which needs `CAP_NET_ADMIN`).
    pub forced: bool,
}

impl UdpSockets {
    /// Whether the kernel granted less than `asked` (Linux grants twice
    /// what it accepts, so a granted size under twice `asked` was capped).
    #[must_use]
    pub fn capped(&self, asked: usize) -> bool {
        self.recv_buffer < asked.saturating_mul(2)
    }
}

/// Binds `readers` sockets on `addr` with SO_REUSEPORT and asks for
/// `recv_buffer` bytes of receive buffer each.
pub fn bind(addr: SocketAddr, readers: usize, recv_buffer: usize) -> io::Result<UdpSockets> {
    let mut sockets = Vec::with_capacity(readers);
    let mut local = addr;
    let mut granted = 0;
    let mut forced = false;
    for _ in 0..readers.max(1) {
        let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        s.set_reuse_port(true)?;
        // The kernel caps this at net.core.rmem_max; not fatal.
        let _ = s.set_recv_buffer_size(recv_buffer);
        granted = s.recv_buffer_size().unwrap_or(0);
        if granted < recv_buffer.saturating_mul(2) {
            // A privileged daemon may go past the cap, as configured;
            // otherwise the daemon logs the cap and how to raise it.
            let size = i32::try_from(recv_buffer).unwrap_or(i32::MAX) as usize;
            if setsockopt(&s, sockopt::RcvBufForce, &size).is_ok() {
                granted = s.recv_buffer_size().unwrap_or(granted);
                forced = true;
            }
        }
        s.bind(&local.into())?;
        if let Some(a) = s.local_addr()?.as_socket() {
            local = a;
        }
        let u: UdpSocket = s.into();
        u.set_read_timeout(Some(POLL))?;
        sockets.push(u);
    }
    Ok(UdpSockets {
        sockets,
        local_addr: local,
        recv_buffer: granted,
        forced,
    })
}

/// Starts one reader thread per socket and, with `workers > 0`, that many
/// ingest workers the readers route lines to ([`route`](super::route));
/// with `workers == 0` each reader parses and applies what it receives. The
/// threads stop when `stop` begins, after draining what the kernel already
/// queued (until its deadline). Datagrams from outside a non-empty
/// `allowed` are dropped and counted. A reader that panics is restarted by
/// `sup`.
pub fn spawn(
    sockets: Vec<UdpSocket>,
    ingestor: Arc<Ingestor>,
    stop: Arc<Stop>,
    workers: usize,
    allowed: &AllowedSources,
    sup: &Supervisor,
) -> io::Result<Vec<JoinHandle<()>>> {
    let (pool, mut handles) = if workers > 0 {
        let (pool, handles) = route::spawn_workers(workers, &ingestor)?;
        (Some(pool), handles)
    } else {
        (None, Vec::new())
    };
    for (i, sock) in sockets.into_iter().enumerate() {
        let ing = ingestor.clone();
        let st = stop.clone();
        let pool = pool.clone();
        let screen =
            (!allowed.is_empty()).then(|| (allowed.clone(), ing.telemetry.udp_dropped.clone()));
        let faults = sup.faults.clone();
        handles.push(sup.spawn(
            format!("rollstat-udp-{i}"),
            "udp_reader",
            stop.clone(),
            move || {
                // A fresh router per run: one that panicked may hold
                // half-routed lines (they are lost with the panic).
                let router = pool.clone().map(Router::new);
                match &screen {
                    None => {
                        let mut src = Faulty {
                            src: Reading(&sock),
                            faults: &faults,
                            point: "udp_reader",
                        };
                        reader::run(&mut src, &ing, &st, router, Transport::Udp);
                    }
                    Some((allowed, dropped)) => {
                        let mut src = Faulty {
                            src: Screened {
                                sock: &sock,
                                allowed: allowed.clone(),
                                dropped: dropped.clone(),
                            },
                            faults: &faults,
                            point: "udp_reader",
                        };
                        reader::run(&mut src, &ing, &st, router, Transport::Udp);
                    }
                }
            },
        )?);
    }
    Ok(handles)
}

/// A UDP socket as a reader's [`Source`]. Its read timeout is [`POLL`]; a
/// shorter wait (a reader with lines pending for the workers) polls first.
struct Reading<'a>(&'a UdpSocket);

impl Source for Reading<'_> {
    fn recv(&mut self, buf: &mut [u8], wait: Option<Duration>) -> io::Result<Option<usize>> {
        let quiet = reader::nothing_yet;
        match wait {
            Some(t) if t >= POLL => match self.0.recv(buf) {
                Ok(n) => Ok(Some(n)),
                Err(e) if quiet(&e) => Ok(None),
                Err(e) => Err(e),
            },
            Some(t) => {
                let t = PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX);
                let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
                match poll(&mut fds, t) {
                    Ok(0) | Err(Errno::EINTR) => Ok(None),
                    Ok(_) => self.recv(buf, None),
                    Err(e) => Err(e.into()),
                }
            }
            // MSG_DONTWAIT per call: toggling O_NONBLOCK around a drain cost
            // two fcntl per round.
            None => loop {
                match recv(self.0.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT) {
                    Ok(n) => return Ok(Some(n)),
                    // A signal is not an empty queue (the shutdown drain
                    // stops at the first `None`).
                    Err(Errno::EINTR) => continue,
                    Err(Errno::EAGAIN) => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
            },
        }
    }
}

/// A UDP socket as a reader's [`Source`], read with each sender's address,
/// with [`Reading`]'s waits and system calls: a wait is a blocking
/// `recvfrom` (or `poll`, then `recvfrom`), a drain `recvmsg` with
/// `MSG_DONTWAIT` (`recvfrom` takes no flags in nix, and the crate forbids
/// the unsafe call). A datagram from outside `allowed` is dropped unread and
/// counted, and the next one read in its place.
struct Screened<'a> {
    sock: &'a UdpSocket,
    allowed: AllowedSources,
    dropped: ReasonCounters,
}

impl Screened<'_> {
    /// Whether a datagram from `from` is kept; counts it if not.
    fn keep(&self, from: Option<IpAddr>) -> bool {
        let ok = from.is_some_and(|ip| self.allowed.allows(ip));
        if !ok {
            self.dropped.inc(udp_drop_reason::SOURCE_NOT_ALLOWED);
        }
        ok
    }
}

impl Source for Screened<'_> {
    fn recv(&mut self, buf: &mut [u8], wait: Option<Duration>) -> io::Result<Option<usize>> {
        if let Some(t) = wait {
            if t < POLL {
                let t = PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX);
                let mut fds = [PollFd::new(self.sock.as_fd(), PollFlags::POLLIN)];
                match poll(&mut fds, t) {
                    Ok(0) | Err(Errno::EINTR) => return Ok(None),
                    Ok(_) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            // Blocking up to the read timeout (POLL); at once after poll.
            match self.sock.recv_from(buf) {
                Ok((n, from)) if self.keep(Some(from.ip())) => return Ok(Some(n)),
                Ok(_) => {}
                Err(e) if reader::nothing_yet(&e) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        // At most a round's worth of refused datagrams per call: a flood
        // from outside cannot keep the reader from checking for shutdown.
        for _ in 0..BATCH {
            let mut iov = [IoSliceMut::new(buf)];
            let flags = MsgFlags::MSG_DONTWAIT;
            let (n, from) =
                match recvmsg::<SockaddrStorage>(self.sock.as_raw_fd(), &mut iov, None, flags) {
                    Ok(m) => (m.bytes, m.address),
                    // A signal is not an empty queue (as in Reading).
                    Err(Errno::EINTR) => continue,
                    Err(Errno::EAGAIN) => return Ok(None),
                    Err(e) => return Err(e.into()),
                };
            if self.keep(from.as_ref().and_then(source_ip)) {
                return Ok(Some(n));
            }
        }
        Ok(None)
    }
}

/// The IP address of a datagram's sender.
fn source_ip(a: &SockaddrStorage) -> Option<IpAddr> {
    a.as_sockaddr_in()
        .map(|v4| IpAddr::V4(v4.ip()))
        .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
}

/// Datagrams the kernel dropped on sockets bound to `port`, summed over
/// `/proc/net/udp` and `/proc/net/udp6` (Linux). `None` elsewhere.
#[must_use]
pub fn kernel_drops(port: u16) -> Option<u64> {
    sum_proc_net_udp(port, drops_in)
}

/// Bytes still queued for reading on sockets bound to `port` (the
/// `rx_queue` column of `/proc/net/udp` and `/proc/net/udp6`: kernel
/// memory, a little more than the payload). `None` off Linux.
#[must_use]
pub fn queued_bytes(port: u16) -> Option<u64> {
    sum_proc_net_udp(port, queued_in)
}

/// `column(text, port)` summed over `/proc/net/udp` and `/proc/net/udp6`;
/// `None` if neither can be read (not Linux).
fn sum_proc_net_udp(port: u16, column: fn(&str, u16) -> u64) -> Option<u64> {
    let mut total = None;
    for path in ["/proc/net/udp", "/proc/net/udp6"] {
        if let Ok(text) = std::fs::read_to_string(path) {
            *total.get_or_insert(0) += column(&text, port);
        }
    }
    total
}

/// Sums the `rx_queue` part of the `tx_queue:rx_queue` column of
/// `/proc/net/udp`-format `text` for `port`.
#[must_use]
pub fn queued_in(text: &str, port: u16) -> u64 {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let p = u16::from_str_radix(cols.get(1)?.rsplit(':').next()?, 16).ok()?;
            let rx = cols.get(4)?.split(':').nth(1)?;
            (p == port)
                .then(|| u64::from_str_radix(rx, 16).ok())
                .flatten()
        })
        .sum()
}

/// Sums the `drops` column of `/proc/net/udp`-format `text` for `port`.
#[must_use]
pub fn drops_in(text: &str, port: u16) -> u64 {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let local = cols.get(1)?;
            let p = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
            (p == port)
                .then(|| cols.last()?.parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screened_socket_drops_and_counts_senders_outside_the_list() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(POLL)).unwrap();
        let to = sock.local_addr().unwrap();
        let from = |ip: &str| UdpSocket::bind((ip, 0)).unwrap();
        from("127.0.0.1").send_to(b"out:1|c", to).unwrap();
        from("127.0.0.2").send_to(b"in:1|c", to).unwrap();
        from("127.0.0.3").send_to(b"out:2|c", to).unwrap();
        let tel = crate::telemetry::Telemetry::new().unwrap();
        let nets = ["127.0.0.2", "10.0.0.0/8", "::1"];
        let mut src = Screened {
            sock: &sock,
            allowed: AllowedSources::new(
                nets.iter()
                    .map(|n| crate::ingest::SourceNet::parse(n).unwrap())
                    .collect(),
            ),
            dropped: tel.udp_dropped.clone(),
        };
        let mut buf = [0u8; 64];
        assert_eq!(src.recv(&mut buf, Some(POLL)).unwrap(), Some(6));
        assert_eq!(&buf[..6], b"in:1|c");
        assert_eq!(src.recv(&mut buf, None).unwrap(), None);
        assert_eq!(tel.udp_dropped.get(udp_drop_reason::SOURCE_NOT_ALLOWED), 2);
        // Nothing queued: the wait ends empty.
        let quick = Duration::from_millis(5);
        assert_eq!(src.recv(&mut buf, Some(quick)).unwrap(), None);
    }

    #[test]
    fn proc_net_udp_drops_are_summed_for_our_port_only() {
        let text = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  1: 0100007F:1FBD 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1234 2 0000000000000000 17\n\
  2: 0100007F:1FBD 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1235 2 0000000000000000 3\n\
  3: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1236 2 0000000000000000 99\n";
        assert_eq!(drops_in(text, 8125), 20);
        assert_eq!(drops_in(text, 53), 99);
        assert_eq!(drops_in(text, 1), 0);
        let queued = text.replace("00000000:00000000", "00000000:00000100");
        assert_eq!(queued_in(&queued, 8125), 512);
        assert_eq!(queued_in(text, 8125), 0);
    }
}
