//! A `[[relay]]` pointed at the daemon's own listeners: every line it
//! relays would come back, be accepted and relayed again, without end (one
//! line became millions a second). Such a relay is refused.
//!
//! Pure: which addresses a destination stands for and which addresses are
//! this host's are asked of the caller. [`Config::parse`](super::Config::parse)
//! (and so a reload) asks nothing of the host: IP literals and the name
//! `localhost`, with loopback and wildcard addresses as this host's;
//! `check-config` and the start resolve every name and also count as this
//! host's any address a socket can bind (`daemon/listeners.rs`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::ConfigProblem;
use crate::ingest::Listen;
use crate::relay::{RelayDef, RelayProtocol};

/// One of the daemon's own listeners a relay must not reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnListener {
    /// Its config key, e.g. `listen.statsd_udp`.
    pub key: &'static str,
    /// What reaches it: a UDP relay the UDP listener, a TCP relay the TCP
    /// and HTTP listeners.
    pub protocol: RelayProtocol,
    /// Where it listens (as configured, or as bound).
    pub addr: SocketAddr,
}

/// The listeners of `[listen]`, as configured.
#[must_use]
pub fn own_listeners(listen: &Listen) -> Vec<OwnListener> {
    listeners_at(listen.statsd_udp, listen.statsd_tcp, Some(listen.http))
}

/// The listeners at these addresses (`None`: off).
#[must_use]
pub fn listeners_at(
    udp: Option<SocketAddr>,
    tcp: Option<SocketAddr>,
    http: Option<SocketAddr>,
) -> Vec<OwnListener> {
    let mut out = Vec::new();
    let mut add = |key, protocol, addr: Option<SocketAddr>| {
        if let Some(addr) = addr {
            out.push(OwnListener {
                key,
                protocol,
                addr,
            });
        }
    };
    add("listen.statsd_udp", RelayProtocol::Udp, udp);
    add("listen.statsd_tcp", RelayProtocol::Tcp, tcp);
    add("listen.http", RelayProtocol::Tcp, http);
    out
}

/// The address without its IPv4-mapped IPv6 form (`::ffff:127.0.0.1`).
fn plain(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    }
}

/// Whether a datagram or connection sent to `dest` arrives at a socket
/// listening on `listener`; `local(ip)`: whether `ip` is this host's.
///
/// The same port (not 0, which a listener binds anew each start), and: the
/// same address; or a wildcard listener (`0.0.0.0` takes every local IPv4
/// address, `::` every local address) and a local destination; or the
/// wildcard as destination, which reaches this host's loopback.
#[must_use]
pub fn reaches(dest: SocketAddr, listener: SocketAddr, local: &dyn Fn(IpAddr) -> bool) -> bool {
    if dest.port() == 0 || dest.port() != listener.port() {
        return false;
    }
    let (d, l) = (plain(dest.ip()), plain(listener.ip()));
    if d == l {
        return true;
    }
    if l.is_unspecified() {
        let family = l.is_ipv6() || d.is_ipv4();
        return family && (d.is_unspecified() || local(d));
    }
    d.is_unspecified() && l.is_loopback()
}

/// What a host-free reading takes as this host's: loopback and wildcard
/// addresses.
#[must_use]
pub fn surely_local(ip: IpAddr) -> bool {
    let ip = plain(ip);
    ip.is_loopback() || ip.is_unspecified()
}

/// The addresses a relay's destination stands for without asking the
/// host: its IP literal, or the loopback addresses for `localhost`
/// (RFC 6761); none for another name.
#[must_use]
pub fn known_addresses(r: &RelayDef) -> Vec<SocketAddr> {
    if let Some(a) = r.literal {
        return vec![a];
    }
    match r.address.rsplit_once(':') {
        Some((host, port)) if host.eq_ignore_ascii_case("localhost") => {
            let port = port.parse().unwrap_or(0);
            vec![
                SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                SocketAddr::from((Ipv6Addr::LOCALHOST, port)),
            ]
        }
        _ => Vec::new(),
    }
}

/// One problem per relay whose destination reaches one of `own`:
/// `addresses(r)` gives what the relay's address stands for, `local(ip)`
/// whether an address is this host's.
#[must_use]
pub fn problems(
    relays: &[RelayDef],
    own: &[OwnListener],
    addresses: &dyn Fn(&RelayDef) -> Vec<SocketAddr>,
    local: &dyn Fn(IpAddr) -> bool,
) -> Vec<ConfigProblem> {
    let mut out = Vec::new();
    for (i, r) in relays.iter().enumerate() {
        let hit = addresses(r).into_iter().find_map(|dest| {
            own.iter()
                .find(|l| l.protocol == r.protocol && reaches(dest, l.addr, local))
                .map(|l| (dest, l))
        });
        let Some((dest, l)) = hit else { continue };
        let via = if r.literal.is_some() {
            String::new()
        } else {
            format!(" (it stands for {dest})")
        };
        out.push(ConfigProblem {
            line: r.address_line,
            key: format!("relay[{i}].address"),
            message: format!(
                "`{}`{via} is this daemon's own {} listener (`{}` = \"{}\"): every line relayed there would come back and be relayed again, without end. Point the relay at another statsd server, or remove it",
                r.address,
                r.protocol.as_str(),
                l.key,
                l.addr
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_destination_reaches_the_same_address_a_wildcard_or_from_the_wildcard() {
        let local = |ip: IpAddr| surely_local(ip) || ip == "10.1.2.3".parse::<IpAddr>().unwrap();
        let yes = [
            ("127.0.0.1:8125", "127.0.0.1:8125"),
            ("127.0.0.1:8125", "0.0.0.0:8125"),
            ("10.1.2.3:8125", "0.0.0.0:8125"),
            ("[::1]:8125", "[::]:8125"),
            ("127.0.0.1:8125", "[::]:8125"),
            ("[::ffff:127.0.0.1]:8125", "127.0.0.1:8125"),
            ("0.0.0.0:8125", "127.0.0.1:8125"),
            ("0.0.0.0:8125", "0.0.0.0:8125"),
        ];
        for (d, l) in yes {
            assert!(reaches(a(d), a(l), &local), "{d} -> {l}");
        }
        let no = [
            ("127.0.0.1:8126", "127.0.0.1:8125"),
            ("127.0.0.2:8125", "127.0.0.1:8125"),
            ("10.9.9.9:8125", "0.0.0.0:8125"),
            ("[::1]:8125", "0.0.0.0:8125"),
            ("0.0.0.0:8125", "10.1.2.3:8125"),
            ("127.0.0.1:0", "127.0.0.1:0"),
        ];
        for (d, l) in no {
            assert!(!reaches(a(d), a(l), &local), "{d} -> {l}");
        }
    }

    #[test]
    fn the_file_alone_refuses_literals_and_localhost_on_the_same_protocol() {
        let cfg = |relays: &str| {
            format!(
                "[listen]\nstatsd_udp = \"0.0.0.0:8125\"\nstatsd_tcp = \"127.0.0.1:8126\"\nhttp = \"127.0.0.1:9102\"\n{relays}"
            )
        };
        let refused = |relays: &str| match Config::parse(&cfg(relays)) {
            Ok(_) => Vec::new(),
            Err(e) => e.problems.iter().map(ToString::to_string).collect(),
        };
        let p = refused(
            "[[relay]]\naddress = \"localhost:8125\"\n[[relay]]\nprotocol = \"tcp\"\naddress = \"127.0.0.1:9102\"\n[[relay]]\naddress = \"127.0.0.1:8126\"\n[[relay]]\nprotocol = \"tcp\"\naddress = \"statsd.internal:8126\"\n",
        );
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(p[0].starts_with("line 6: `relay[0].address`: `localhost:8125` (it stands for 127.0.0.1:8125) is this daemon's own udp listener (`listen.statsd_udp` = \"0.0.0.0:8125\")"), "{p:#?}");
        assert!(
            p[1].contains("line 9: `relay[1].address`: `127.0.0.1:9102` is this daemon's own tcp listener (`listen.http`"),
            "{p:#?}"
        );
        // A UDP relay to the TCP port, and a name, are not refused here.
        assert!(refused("[[relay]]\naddress = \"127.0.0.1:8126\"\n").is_empty());
    }
}
