//! statsd over UDP: several reader threads on one port (SO_REUSEPORT), each
//! draining its socket in batches with one clock reading per batch.
//!
//! Blocking OS threads rather than async tasks: a UDP reader has nothing else
//! to wait for, and a thread per core with a blocking `recv` is the cheapest
//! way to drain a socket. A read timeout lets the threads notice shutdown.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, setsockopt, sockopt, MsgFlags};
use socket2::{Domain, Protocol, Socket, Type};

use super::route::{self, Router};
use super::{Ingestor, Worker};
use crate::telemetry::Transport;

/// Largest datagram accepted (the IPv4 UDP payload limit).
pub const MAX_DATAGRAM: usize = 65_507;
/// Datagrams drained per batch before the clock is read again.
pub const BATCH: usize = 64;
/// How often an idle reader checks for shutdown.
const POLL: Duration = Duration::from_millis(100);

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
/// threads stop when `stop` is set, after processing what they already
/// received.
pub fn spawn(
    sockets: Vec<UdpSocket>,
    ingestor: Arc<Ingestor>,
    stop: Arc<AtomicBool>,
    workers: usize,
) -> io::Result<Vec<JoinHandle<()>>> {
    let (pool, mut handles) = if workers > 0 {
        let (pool, handles) = route::spawn_workers(workers, &ingestor)?;
        (Some(pool), handles)
    } else {
        (None, Vec::new())
    };
    for (i, sock) in sockets.into_iter().enumerate() {
        let ing = ingestor.clone();
        let stop = stop.clone();
        let router = pool.clone().map(Router::new);
        handles.push(
            std::thread::Builder::new()
                .name(format!("rollstat-udp-{i}"))
                .spawn(move || match router {
                    Some(r) => route_reader(&sock, &ing, &stop, r),
                    None => reader(&sock, &ing, &stop),
                })?,
        );
    }
    Ok(handles)
}

/// Receives in batches and routes the lines to the workers. Waits on
/// `poll` rather than a blocking `recv` so that a quiet socket hands over
/// what is pending after [`route::MAX_AGE`].
fn route_reader(sock: &UdpSocket, ing: &Ingestor, stop: &AtomicBool, mut r: Router) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut w = Worker::default();
    let idle = PollTimeout::try_from(POLL).unwrap_or(PollTimeout::MAX);
    let pending = PollTimeout::try_from(route::MAX_AGE).unwrap_or(PollTimeout::MAX);
    while !stop.load(Ordering::Relaxed) {
        let timeout = if r.has_pending() { pending } else { idle };
        let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) => {
                // Quiet for the timeout: nothing pending is kept longer.
                r.hand_over_all();
                continue;
            }
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "Waiting on the UDP socket failed; retrying.");
                std::thread::sleep(POLL);
                continue;
            }
        }
        let now = ing.now();
        let mut taken = 0;
        while taken < BATCH {
            match recv(sock.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
                Ok(n) => {
                    taken += 1;
                    r.route(&buf[..n], now);
                }
                Err(_) => break,
            }
        }
        w.counts.packets += taken as u64;
        ing.flush(Transport::Udp, &mut w);
        r.hand_over_older(now);
    }
    // Shutting down: route what the kernel already queued; dropping the
    // router hands everything over, and the workers finish it.
    let now = ing.now();
    while let Ok(n) = recv(sock.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
        w.counts.packets += 1;
        r.route(&buf[..n], now);
    }
    ing.flush(Transport::Udp, &mut w);
}

fn reader(sock: &UdpSocket, ing: &Ingestor, stop: &AtomicBool) {
    let fd = sock.as_raw_fd();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut w = Worker::default();
    while !stop.load(Ordering::Relaxed) {
        // Block for the first datagram of a batch.
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                tracing::warn!(error = %e, "UDP receive failed; retrying.");
                std::thread::sleep(POLL);
                continue;
            }
        };
        let now = ing.now();
        w.counts.packets += 1;
        let first = ing.ingest(&buf[..n], now, &mut w);
        ing.note_bad_line(Transport::Udp, first, &buf[..n], now);
        // Then drain what is already queued: MSG_DONTWAIT per call, where
        // toggling O_NONBLOCK around the drain cost two fcntl per batch.
        let mut taken = 1;
        while taken < BATCH {
            match recv(fd, &mut buf, MsgFlags::MSG_DONTWAIT) {
                Ok(n) => {
                    taken += 1;
                    w.counts.packets += 1;
                    let first = ing.ingest(&buf[..n], now, &mut w);
                    ing.note_bad_line(Transport::Udp, first, &buf[..n], now);
                }
                Err(_) => break,
            }
        }
        ing.flush(Transport::Udp, &mut w);
    }
    // Shutting down: process what the kernel already queued, then stop.
    if sock.set_nonblocking(true).is_ok() {
        let now = ing.now();
        while let Ok(n) = sock.recv(&mut buf) {
            w.counts.packets += 1;
            ing.ingest(&buf[..n], now, &mut w);
        }
    }
    ing.flush(Transport::Udp, &mut w);
}

/// Datagrams the kernel dropped on sockets bound to `port`, summed over
/// `/proc/net/udp` and `/proc/net/udp6` (Linux). `None` elsewhere.
#[must_use]
pub fn kernel_drops(port: u16) -> Option<u64> {
    let mut total = None;
    for path in ["/proc/net/udp", "/proc/net/udp6"] {
        if let Ok(text) = std::fs::read_to_string(path) {
            let t = total.get_or_insert(0);
            *t += drops_in(&text, port);
        }
    }
    total
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
    fn proc_net_udp_drops_are_summed_for_our_port_only() {
        let text = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  1: 0100007F:1FBD 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1234 2 0000000000000000 17\n\
  2: 0100007F:1FBD 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1235 2 0000000000000000 3\n\
  3: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1236 2 0000000000000000 99\n";
        assert_eq!(drops_in(text, 8125), 20);
        assert_eq!(drops_in(text, 53), 99);
        assert_eq!(drops_in(text, 1), 0);
    }
}
