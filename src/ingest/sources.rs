//! `[ingest] allowed_sources`: the source addresses the statsd UDP and TCP
//! listeners accept, as a list of networks (`10.1.0.0/16`, `::1`).
//!
//! Parsed with std alone (an address, a `/`, a prefix length): the matching
//! is a mask and a compare, and a crate for it would be more code to review
//! than this file. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a
//! dual-stack socket reports for an IPv4 sender) matches the IPv4 rules, and
//! a rule written as one (`::ffff:10.0.0.0/104`) is an IPv4 rule.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// One network: an address and a prefix length, host bits zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceNet {
    /// An IPv4 network (`net` already masked).
    V4 {
        /// The network address.
        net: u32,
        /// Prefix length, 0..=32.
        prefix: u8,
    },
    /// An IPv6 network (`net` already masked).
    V6 {
        /// The network address.
        net: u128,
        /// Prefix length, 0..=128.
        prefix: u8,
    },
}

/// Why an `allowed_sources` entry was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceNetError {
    /// Not an address, nor an address and a prefix.
    NotAnAddress,
    /// A prefix longer than the address, or not a number.
    BadPrefix,
    /// Bits set past the prefix: the network it most likely means.
    HostBits(SourceNet),
}

impl fmt::Display for SourceNetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceNetError::NotAnAddress => f.write_str(
                "not an IP address or network; write an address (\"127.0.0.1\", \"::1\") or a network in CIDR form (\"10.1.0.0/16\", \"fd00::/8\"); host names are not resolved",
            ),
            SourceNetError::BadPrefix => f.write_str(
                "the prefix after `/` must be a number from 0 to 32 for IPv4, 0 to 128 for IPv6",
            ),
            SourceNetError::HostBits(net) => write!(
                f,
                "has bits set after the prefix, so it is not a network; did you mean \"{net}\"?"
            ),
        }
    }
}

fn mask32(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

fn mask128(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0)
}

impl SourceNet {
    /// Reads `"a.b.c.d"`, `"a.b.c.d/n"`, `"x::y"` or `"x::y/n"`. A bare
    /// address is a network of one address.
    pub fn parse(s: &str) -> Result<SourceNet, SourceNetError> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| SourceNetError::NotAnAddress)?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.trim().parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(SourceNetError::BadPrefix),
            },
        };
        let net = match addr {
            IpAddr::V4(a) => {
                let bits = u32::from(a);
                let net = SourceNet::V4 {
                    net: bits & mask32(prefix),
                    prefix,
                };
                if bits & !mask32(prefix) != 0 {
                    return Err(SourceNetError::HostBits(net));
                }
                net
            }
            IpAddr::V6(a) => {
                let bits = u128::from(a);
                let net = SourceNet::V6 {
                    net: bits & mask128(prefix),
                    prefix,
                };
                if bits & !mask128(prefix) != 0 {
                    return Err(SourceNetError::HostBits(net));
                }
                net
            }
        };
        Ok(net.canonical())
    }

    /// An IPv6 rule inside `::ffff:0:0/96` as the IPv4 rule it means.
    fn canonical(self) -> SourceNet {
        match self {
            SourceNet::V6 { net, prefix } if prefix >= 96 && net >> 32 == 0xffff => SourceNet::V4 {
                net: (net & 0xffff_ffff) as u32,
                prefix: prefix - 96,
            },
            other => other,
        }
    }

    /// Whether `ip` (already canonical: IPv4-mapped as IPv4) is in this
    /// network.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (*self, ip) {
            (SourceNet::V4 { net, prefix }, IpAddr::V4(a)) => u32::from(a) & mask32(prefix) == net,
            (SourceNet::V6 { net, prefix }, IpAddr::V6(a)) => {
                u128::from(a) & mask128(prefix) == net
            }
            _ => false,
        }
    }
}

impl fmt::Display for SourceNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SourceNet::V4 { net, prefix } => write!(f, "{}/{prefix}", Ipv4Addr::from(net)),
            SourceNet::V6 { net, prefix } => write!(f, "{}/{prefix}", Ipv6Addr::from(net)),
        }
    }
}

/// The networks a statsd sender may come from; empty (the default) allows
/// every sender. Cheap to clone (shared).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedSources(Arc<[SourceNet]>);

impl AllowedSources {
    /// A list of networks.
    #[must_use]
    pub fn new(nets: Vec<SourceNet>) -> Self {
        AllowedSources(nets.into())
    }

    /// Whether the list is empty (every sender allowed).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The networks, in config order.
    #[must_use]
    pub fn nets(&self) -> &[SourceNet] {
        &self.0
    }

    /// Whether a sender at `ip` is allowed: the list is empty, or a network
    /// in it holds `ip` (an IPv4-mapped IPv6 address is read as IPv4).
    #[must_use]
    pub fn allows(&self, ip: IpAddr) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let ip = ip.to_canonical();
        self.0.iter().any(|n| n.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn list(nets: &[&str]) -> AllowedSources {
        AllowedSources::new(nets.iter().map(|n| SourceNet::parse(n).unwrap()).collect())
    }

    #[test]
    fn networks_and_bare_addresses_match_what_they_hold() {
        let l = list(&["127.0.0.0/8", "10.1.0.0/16", "::1", "fd00::/8"]);
        for yes in [
            "127.0.0.1",
            "127.255.0.9",
            "10.1.200.3",
            "::1",
            "fd12:3456::1",
        ] {
            assert!(l.allows(ip(yes)), "{yes}");
        }
        for no in ["10.2.0.1", "192.168.1.1", "::2", "fe80::1", "0.0.0.0"] {
            assert!(!l.allows(ip(no)), "{no}");
        }
    }

    #[test]
    fn an_ipv4_mapped_sender_matches_the_ipv4_rules_and_a_mapped_rule_is_ipv4() {
        let l = list(&["10.0.0.0/8"]);
        assert!(l.allows(ip("::ffff:10.9.8.7")));
        assert!(!l.allows(ip("::ffff:11.0.0.1")));
        assert_eq!(
            SourceNet::parse("::ffff:10.0.0.0/104").unwrap(),
            SourceNet::parse("10.0.0.0/8").unwrap()
        );
        assert!(list(&["::ffff:127.0.0.1"]).allows(ip("127.0.0.1")));
    }

    #[test]
    fn the_empty_list_allows_everyone_and_slash_zero_allows_one_family() {
        assert!(AllowedSources::default().allows(ip("203.0.113.9")));
        let v4 = list(&["0.0.0.0/0"]);
        assert!(v4.allows(ip("203.0.113.9")));
        assert!(!v4.allows(ip("2001:db8::1")));
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        assert_eq!(
            SourceNet::parse("localhost"),
            Err(SourceNetError::NotAnAddress)
        );
        assert_eq!(
            SourceNet::parse("10.0.0.0/33"),
            Err(SourceNetError::BadPrefix)
        );
        assert_eq!(SourceNet::parse("::/129"), Err(SourceNetError::BadPrefix));
        assert_eq!(
            SourceNet::parse("10.0.0.0/x"),
            Err(SourceNetError::BadPrefix)
        );
        let e = SourceNet::parse("10.1.2.3/16").unwrap_err();
        assert!(e.to_string().contains("\"10.1.0.0/16\""), "{e}");
        assert_eq!(
            SourceNet::parse("fd00::1/8").unwrap_err().to_string(),
            "has bits set after the prefix, so it is not a network; did you mean \"fd00::/8\"?"
        );
    }
}
