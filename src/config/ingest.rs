//! `[ingest]`: how lines are read (readers, caps, deadlines, tag styles,
//! allowed sources), read into [`Ingest`].

use std::time::Duration;

use super::reader::{Problems, Table};
use super::{AllowedSources, SourceNet};
use crate::parse::TagStyles;

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

pub(super) const KEYS: &[&str] = &[
    "udp_readers",
    "udp_workers",
    "udp_recv_buffer_bytes",
    "tcp_max_connections",
    "tcp_idle_timeout_secs",
    "max_line_bytes",
    "http_max_body_bytes",
    "tag_styles",
    "allowed_sources",
    "drain_timeout_ms",
];

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

/// `[ingest]`: readers, caps, deadlines, tag styles, allowed sources.
pub(super) fn read(t: &mut Table<'_, '_>, p: &mut Problems<'_>, i: &mut Ingest) {
    if let Some(n) = t.int(p, "udp_readers", 1, 64) {
        i.udp_readers = n as usize;
    }
    if let Some(n) = t.int(p, "udp_workers", 0, 64) {
        i.udp_workers = n as usize;
    }
    if let Some(n) = t.int(p, "udp_recv_buffer_bytes", 4096, 1 << 30) {
        i.udp_recv_buffer_bytes = n as usize;
    }
    if let Some(n) = t.int(p, "tcp_max_connections", 1, 1_000_000) {
        i.tcp_max_connections = n as usize;
    }
    if let Some(n) = t.int(p, "tcp_idle_timeout_secs", 1, 7 * 86_400) {
        i.tcp_idle_timeout = Duration::from_secs(n);
    }
    if let Some(n) = t.int(p, "max_line_bytes", 64, 16 << 20) {
        i.max_line_bytes = n as usize;
    }
    if let Some(n) = t.int(p, "http_max_body_bytes", 1024, 1 << 30) {
        i.http_max_body_bytes = n as usize;
    }
    if let Some(n) = t.int(p, "drain_timeout_ms", 1, 600_000) {
        i.drain_timeout = Duration::from_millis(n);
    }
    if let Some(names) = t.strings(p, "tag_styles") {
        i.tag_styles = TagStyles::NONE;
        for (name, off) in names {
            match TagStyles::from_name(&name) {
                Some(s) => i.tag_styles = i.tag_styles.with(s),
                None => {
                    let known: Vec<&str> = TagStyles::ALL.names().collect();
                    p.at(
                        off,
                        "ingest.tag_styles",
                        format!(
                            "unknown tag style `{name}`; use any of {} ([] reads no tags)",
                            known.join(", ")
                        ),
                    );
                }
            }
        }
    }
    if let Some(entries) = t.strings(p, "allowed_sources") {
        let mut nets = Vec::new();
        for (n, (entry, off)) in entries.into_iter().enumerate() {
            match SourceNet::parse(&entry) {
                Ok(n) => nets.push(n),
                Err(e) => p.at(
                    off,
                    &format!("ingest.allowed_sources[{n}]"),
                    format!("`{entry}`: {e}"),
                ),
            }
        }
        i.allowed_sources = AllowedSources::new(nets);
    }
}
