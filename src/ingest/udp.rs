//! statsd over UDP: several reader threads on one port (SO_REUSEPORT), each
//! draining its socket in batches with one clock reading per batch.
//!
//! Blocking OS threads rather than async tasks: a UDP reader has nothing else
//! to wait for, and a thread per core with a blocking `recv` is the cheapest
//! way to drain a socket. A read timeout lets the threads notice shutdown.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, setsockopt, sockopt, MsgFlags};
use socket2::{Domain, Protocol, Socket, Type};

use super::reader::{self, Source, POLL};
use super::route::{self, Router};
use super::Ingestor;

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
                .spawn(move || {
                    reader::run(&mut Reading(&sock), &ing, &stop, router);
                })?,
        );
    }
    Ok(handles)
}

/// A UDP socket as a reader's [`Source`]. Its read timeout is [`POLL`]; a
/// shorter wait (a reader with lines pending for the workers) polls first.
struct Reading<'a>(&'a UdpSocket);

impl Source for Reading<'_> {
    fn recv(&mut self, buf: &mut [u8], wait: Option<Duration>) -> io::Result<Option<usize>> {
        let quiet = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
            )
        };
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
