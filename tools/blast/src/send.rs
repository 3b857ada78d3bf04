//! The senders: pre-rendered datagrams sent over UDP at a set rate or as
//! fast as possible, one `send` per datagram or, with GSO, one per run of
//! up to 64 equal-size datagrams. Bounded by a duration and a datagram
//! count.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use rollstat::{Clock, SystemClock, Timestamp};

/// Datagrams sent between two looks at the clock (at least one send).
const CHUNK: u64 = 32;

/// Datagrams per GSO send, at most (the kernel's limit is 64 segments of
/// one send, and 64 KiB in all).
const GSO_SEGMENTS: usize = 64;

/// What one sender did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sent {
    pub datagrams: u64,
    pub lines: u64,
    pub errors: u64,
    pub elapsed: Duration,
}

/// What one `send` carries: a datagram, or with GSO several of one size.
struct Send {
    bytes: Vec<u8>,
    datagrams: u64,
    lines: u64,
}

/// The sends of one pass over `datagrams` starting at `offset`: one per
/// datagram, or with `gso` runs of up to [`GSO_SEGMENTS`] concatenated.
fn sends(datagrams: &[(Vec<u8>, u64)], offset: usize, gso: bool) -> io::Result<Vec<Send>> {
    let n = datagrams.len();
    let order = (0..n).map(|k| &datagrams[(offset + k) % n]);
    if !gso {
        return Ok(order
            .map(|(d, lines)| Send {
                bytes: d.clone(),
                datagrams: 1,
                lines: *lines,
            })
            .collect());
    }
    let size = datagrams[0].0.len();
    if datagrams.iter().any(|d| d.0.len() != size) {
        return Err(io::Error::other(
            "--gso needs every datagram the same size: use --lines-per-datagram 1 and --tags 0 with fewer than a million names",
        ));
    }
    let per_send = GSO_SEGMENTS.min(65_000 / size.max(1)).max(1);
    let all: Vec<_> = order.collect();
    Ok(all
        .chunks(per_send)
        .map(|run| Send {
            bytes: run.iter().flat_map(|d| d.0.iter().copied()).collect(),
            datagrams: run.len() as u64,
            lines: run.iter().map(|d| d.1).sum(),
        })
        .collect())
}

/// How one sender thread sends.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// Lines per second; 0 = as fast as possible.
    pub rate: f64,
    pub duration: Duration,
    pub max_datagrams: u64,
    pub gso: bool,
    /// Sockets (source ports) used in turn, one send each.
    pub flows: usize,
}

/// Sends `datagrams` in turn, starting at `offset`, to `target`: at most
/// `max_datagrams` of them (one GSO send more at most, as it is not split).
pub fn sender(
    target: SocketAddr,
    datagrams: &[(Vec<u8>, u64)],
    offset: usize,
    pace: Pace,
) -> io::Result<Sent> {
    let Pace {
        rate,
        duration,
        max_datagrams,
        gso,
        flows,
    } = pace;
    let mut socks = Vec::with_capacity(flows.max(1));
    for _ in 0..flows.max(1) {
        let sock = UdpSocket::bind(if target.is_ipv4() {
            "127.0.0.1:0"
        } else {
            "[::1]:0"
        })?;
        sock.connect(target)?;
        if gso {
            let size = i32::try_from(datagrams[0].0.len()).unwrap_or(i32::MAX);
            nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::UdpGsoSegment, &size)
                .map_err(|e| io::Error::other(format!("--gso: setting UDP_SEGMENT failed: {e}")))?;
        }
        socks.push(sock);
    }
    let sends = sends(datagrams, offset, gso)?;
    let mut flow = 0;
    let clock = SystemClock::new();
    let start = clock.now();
    let mut s = Sent::default();
    let mut i = 0;
    loop {
        let mut round = 0;
        while round < CHUNK {
            let send = &sends[i];
            round += send.datagrams;
            let sock = &socks[flow];
            flow = if flow + 1 == socks.len() { 0 } else { flow + 1 };
            match sock.send(&send.bytes) {
                Ok(_) => {
                    s.datagrams += send.datagrams;
                    s.lines += send.lines;
                }
                Err(_) => s.errors += send.datagrams,
            }
            i += 1;
            if i == sends.len() {
                i = 0;
            }
            if s.datagrams + s.errors >= max_datagrams {
                break;
            }
        }
        let elapsed = since(&clock, start);
        if elapsed >= duration || s.datagrams + s.errors >= max_datagrams {
            s.elapsed = elapsed;
            return Ok(s);
        }
        if rate > 0.0 {
            let due = Duration::from_secs_f64(s.lines as f64 / rate);
            if due > elapsed {
                std::thread::sleep((due - elapsed).min(duration - elapsed));
            }
        }
    }
}

/// Time on `clock` since `t`.
pub fn since(clock: &SystemClock, t: Timestamp) -> Duration {
    Duration::from_nanos(clock.now().as_nanos().saturating_sub(t.as_nanos()))
}

#[cfg(test)]
mod tests {
    use rollstat_testkit::fixtures::{render_datagrams, Kind};

    use super::*;

    #[test]
    fn gso_sends_group_one_pass_of_equal_datagrams() {
        let d = render_datagrams(150, 0, Kind::Counter, 1, 1432);
        let plain = sends(&d, 5, false).unwrap();
        assert_eq!(plain.len(), 150);
        assert_eq!(plain[0].bytes, d[5].0);
        let gso = sends(&d, 5, true).unwrap();
        assert_eq!(
            gso.iter().map(|s| s.datagrams).collect::<Vec<_>>(),
            [64, 64, 22]
        );
        assert_eq!(gso.iter().map(|s| s.lines).sum::<u64>(), 150);
        assert_eq!(&gso[0].bytes[..d[5].0.len()], &d[5].0[..]);
        // Datagrams of several sizes cannot be one GSO send.
        let mixed = render_datagrams(150, 2, Kind::Counter, 1, 1432);
        assert!(sends(&mixed, 0, true).is_err());
    }

    #[test]
    fn a_gso_send_arrives_as_separate_datagrams() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let d = render_datagrams(100, 0, Kind::Counter, 1, 1432);
        let target = rx.local_addr().unwrap();
        let pace = Pace {
            rate: 0.0,
            duration: Duration::from_secs(5),
            max_datagrams: 128,
            gso: true,
            flows: 1,
        };
        let sent = sender(target, &d, 0, pace).unwrap();
        // The cap is checked after each send, and a GSO send is not split:
        // 64 + 36 + 64.
        assert_eq!(sent.datagrams, 164);
        let mut buf = [0u8; 2048];
        for k in 0..164 {
            let n = rx.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &d[k % 100].0[..], "datagram {k}");
        }
    }

    /// Every line the tool can send is a sample to rollstat's parser.
    #[test]
    fn every_rendered_line_parses() {
        use rollstat::parse::{parse_datagram, Line};
        for kind in Kind::ALL {
            for (d, n) in render_datagrams(200, 3, kind, 80, 1432) {
                let ok = parse_datagram(&d)
                    .filter(|l| matches!(l, Ok(Line::Sample(_))))
                    .count();
                assert_eq!(ok as u64, n, "{kind:?}");
            }
        }
    }
}
