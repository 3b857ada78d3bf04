//! What a `[[relay]]` table configures: one other statsd server that
//! accepted lines are copied to, as `config` reads it.

use std::net::SocketAddr;
use std::time::Duration;

use crate::mapping::Matcher;

/// The largest datagram a relay sends (the IPv4 UDP payload limit).
pub const MAX_RELAY_DATAGRAM: usize = 65_507;

/// `max_datagram_bytes` when unset: statsd_exporter's
/// `--statsd.relay.packet-length` default, below a 1500-byte Ethernet MTU.
pub const DEFAULT_RELAY_DATAGRAM: usize = 1400;

/// `buffer_bytes` when unset: 1 MiB of lines waiting per destination.
pub const DEFAULT_RELAY_BUFFER: usize = 1 << 20;

/// The smallest `buffer_bytes`: two hand-offs of the largest size (a
/// hand-off holds up to 16 KiB of lines, or one line up to
/// [`MAX_RELAY_DATAGRAM`]), so that one hand-off always fits an empty
/// buffer.
pub const MIN_RELAY_BUFFER: usize = 128 << 10;

/// `flush_interval_ms` when unset.
pub const DEFAULT_RELAY_FLUSH: Duration = Duration::from_millis(100);

/// How lines reach a relay destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelayProtocol {
    /// statsd over UDP: lines packed into datagrams.
    Udp,
    /// statsd over TCP: newline-terminated lines on one connection.
    Tcp,
}

impl RelayProtocol {
    /// The config spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RelayProtocol::Udp => "udp",
            RelayProtocol::Tcp => "tcp",
        }
    }
}

/// One `[[relay]]` entry.
#[derive(Clone, Debug)]
pub struct RelayDef {
    /// The `relay` label of its metrics (default: the address).
    pub name: String,
    /// `host:port` as written (a host name is resolved at start, and again
    /// at each TCP reconnect).
    pub address: String,
    /// The address when it is an IP literal.
    pub literal: Option<SocketAddr>,
    /// 1-based line of `address` (for `check-config`'s resolution problem).
    pub address_line: usize,
    /// UDP or TCP.
    pub protocol: RelayProtocol,
    /// Largest datagram (UDP) or write (TCP), lines and their `\n`
    /// included; a longer line is not relayed (`reason="too_long"`).
    pub max_datagram_bytes: usize,
    /// Lines waiting for this destination at most, in bytes; beyond it new
    /// lines are dropped (`reason="buffer_full"`).
    pub buffer_bytes: usize,
    /// How long a partly filled datagram may wait for more lines.
    pub flush_interval: Duration,
    /// Only names matching this are relayed (`match` or `match_regex`).
    pub filter: Option<Matcher>,
    /// Lines a `drop` mapping rule matches are not relayed.
    pub after_mapping: bool,
}

/// The same relay, wherever it is written: a reload that only moves it
/// changes nothing.
impl PartialEq for RelayDef {
    fn eq(&self, o: &Self) -> bool {
        self.name == o.name
            && self.address == o.address
            && self.protocol == o.protocol
            && self.max_datagram_bytes == o.max_datagram_bytes
            && self.buffer_bytes == o.buffer_bytes
            && self.flush_interval == o.flush_interval
            && self.filter.as_ref().map(Matcher::as_str) == o.filter.as_ref().map(Matcher::as_str)
            && matches!(
                (&self.filter, &o.filter),
                (None, None)
                    | (Some(Matcher::Glob(_)), Some(Matcher::Glob(_)))
                    | (Some(Matcher::Regex(_)), Some(Matcher::Regex(_)))
            )
            && self.after_mapping == o.after_mapping
    }
}
