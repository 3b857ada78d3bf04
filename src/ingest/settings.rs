//! What `[listen]` and `[ingest]` configure: where statsd (and HTTP) is
//! listened for, and how lines are read, as `config` reads them.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::sources::AllowedSources;
use crate::parse::TagStyles;

/// `[listen]`: empty strings turn a listener off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listen {
    /// statsd over UDP.
    pub statsd_udp: Option<SocketAddr>,
    /// statsd over TCP, newline framed.
    pub statsd_tcp: Option<SocketAddr>,
    /// statsd over a Unix datagram socket.
    pub statsd_unix: Option<PathBuf>,
    /// HTTP: /metrics, the JSON API, ingest.
    pub http: SocketAddr,
    /// OTLP/HTTP: `POST /v1/metrics` (off unless set).
    pub otlp_http: Option<SocketAddr>,
    /// OTLP/gRPC: `MetricsService/Export` (off unless set).
    pub otlp_grpc: Option<SocketAddr>,
    /// Permission bits of the Unix socket file (`statsd_unix_mode`, an
    /// octal string in the file; at most `0o777`).
    pub statsd_unix_mode: u32,
    /// Group of the Unix socket file (`statsd_unix_group`); `None`: the
    /// daemon's own group.
    pub statsd_unix_group: Option<UnixGroup>,
}

/// The default `listen.statsd_unix_mode`: the socket's owner (the daemon's
/// user) and its group may send, nobody else (sending on a Unix socket
/// needs write permission on its file).
pub const DEFAULT_UNIX_MODE: u32 = 0o660;

/// `listen.statsd_unix_group`: a group, and the line it is given on. The
/// config cannot look a name up on the host (that is a system call): the
/// daemon does at start, and `check-config` with this line.
#[derive(Clone, Debug)]
pub struct UnixGroup {
    /// The group as written.
    pub group: GroupRef,
    /// 1-based line of the key.
    pub line: usize,
}

/// The same group, wherever it is written: a reload that only moves the key
/// changes nothing.
impl PartialEq for UnixGroup {
    fn eq(&self, other: &Self) -> bool {
        self.group == other.group
    }
}

impl Eq for UnixGroup {}

/// A group by name or by number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupRef {
    /// A group name, looked up on the host.
    Name(String),
    /// A numeric group id, used as it is (it needs no entry in the group
    /// database, as in many containers).
    Id(u32),
}

impl fmt::Display for GroupRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupRef::Name(n) => write!(f, "`{n}`"),
            GroupRef::Id(g) => write!(f, "gid {g}"),
        }
    }
}

impl Default for Listen {
    fn default() -> Self {
        Listen {
            statsd_udp: Some(SocketAddr::from(([127, 0, 0, 1], 8125))),
            statsd_tcp: Some(SocketAddr::from(([127, 0, 0, 1], 8125))),
            statsd_unix: None,
            http: SocketAddr::from(([127, 0, 0, 1], 9102)),
            otlp_http: None,
            otlp_grpc: None,
            statsd_unix_mode: DEFAULT_UNIX_MODE,
            statsd_unix_group: None,
        }
    }
}

/// `[ingest]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ingest {
    /// UDP reader tasks sharing the port through SO_REUSEPORT.
    pub udp_readers: usize,
    /// Ingest workers the UDP readers route lines to by metric name; 0 =
    /// the readers parse and apply what they receive themselves.
    pub udp_workers: usize,
    /// SO_RCVBUF asked for each UDP socket (the kernel may grant less; logged).
    pub udp_recv_buffer_bytes: usize,
    /// Open TCP statsd connections at most; a client beyond it is accepted,
    /// closed at once and counted (`reason="connection_cap"`).
    pub tcp_max_connections: usize,
    /// A TCP statsd connection that sends nothing for this long is closed
    /// (its last line applied) and counted (`reason="idle_timeout"`).
    pub tcp_idle_timeout: Duration,
    /// Longest TCP line accepted; longer lines are rejected as `line_too_long`.
    pub max_line_bytes: usize,
    /// Largest HTTP ingest body (413 above).
    pub http_max_body_bytes: usize,
    /// statsd tag syntaxes read on every transport (statsd text; the JSON
    /// ingest body has tags of its own and ignores this).
    pub tag_styles: TagStyles,
    /// Source networks the statsd UDP and TCP listeners accept; empty:
    /// every sender. Others are dropped (UDP) or closed at accept (TCP)
    /// and counted under `reason="source_not_allowed"`.
    pub allowed_sources: AllowedSources,
    /// At stop, the statsd receivers (UDP and Unix readers, TCP
    /// connections) drain what the kernel already queued for at most this
    /// long (`drain_timeout_ms`); what is left is counted and logged.
    pub drain_timeout: Duration,
}

impl Default for Ingest {
    fn default() -> Self {
        Ingest {
            udp_readers: 2,
            udp_workers: 2,
            udp_recv_buffer_bytes: 8 << 20,
            tcp_max_connections: 1024,
            tcp_idle_timeout: Duration::from_secs(600),
            max_line_bytes: 64 << 10,
            http_max_body_bytes: 4 << 20,
            tag_styles: TagStyles::ALL,
            allowed_sources: AllowedSources::default(),
            drain_timeout: Duration::from_millis(5000),
        }
    }
}
