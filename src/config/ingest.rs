//! `[ingest]`: how lines are read (readers, caps, deadlines, tag styles,
//! allowed sources), read into [`Ingest`].

use std::time::Duration;

use super::reader::{Problems, Table};
use super::{AllowedSources, SourceNet};
use crate::ingest::Ingest;
use crate::parse::TagStyles;

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
