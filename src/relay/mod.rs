//! Relays: every accepted statsd line copied, as the client sent it, to
//! other statsd servers (`[[relay]]`), so that rollstat can sit in front of
//! an existing pipeline (statsd_exporter's `--statsd.relay.address`).
//!
//! The ingest path never waits for a relay:
//!
//! * each ingest worker (a UDP reader or worker, a TCP connection, the Unix
//!   reader, an HTTP ingest request) appends the lines it accepted to its
//!   own [`Outbox`], one [`Batch`] per relay: a copy of the line's bytes
//!   into a reused buffer, no allocation per line, no lock;
//! * the outbox is handed off when the worker flushes its counts (once per
//!   round of datagrams, TCP read or request) or when a batch reaches
//!   [`HANDOFF_BYTES`]: one short lock per relay to queue the whole batch
//!   in a [`ByteQueue`] bounded in bytes (`buffer_bytes`), and take a spare
//!   buffer back. A batch that does not fit is dropped whole and its lines
//!   counted (`reason="buffer_full"`); the lock is never held during I/O;
//! * one sender thread per relay (`sender.rs`) takes batches, packs their
//!   lines into datagrams of at most `max_datagram_bytes` ([`Packer`]),
//!   sends a partly filled one after `flush_interval_ms`, and counts what
//!   it sent and what it lost.
//!
//! Which lines: every line the parser accepted as a sample (events,
//! service checks and rejected lines are not relayed; statsd_exporter
//! relays raw lines before parsing, bad ones included), from every
//! transport (UDP, TCP, Unix, HTTP ingest: the JSON body as the statsd
//! lines it is rendered to), whether or not the registry then stored it
//! (a series cap is this instance's, not the destination's); with `match`
//! or `match_regex`, only lines whose name (tags stripped) matches; with
//! `after_mapping = true`, not the lines a `drop` mapping rule matches. A
//! kept line is relayed as received, not renamed by its mapping rule.
//!
//! Loops: every datagram (and TCP write) a relay sends begins with
//! [`MARKER`], an empty line statsd receivers skip; lines that arrive in a
//! datagram or TCP connection beginning with it are applied but not
//! relayed again ([`Relays::refuse_relayed`], `reason="relayed_before"`),
//! so relays that point at each other pass each line once. A relay to the
//! daemon's own listener is refused by the config (`config/relay_loop.rs`).
//!
//! # Layout
//!
//! * `pack.rs`: the pure parts: [`Packer`], [`ByteQueue`], [`line_around`]
//!   (a sample's raw line), the reconnect back-off;
//! * `sender.rs`: the sender threads, UDP and TCP, and their stop;
//! * this file: [`Relays`], built without I/O, and the hot path.

mod pack;
mod sender;
pub mod settings;

use parking_lot::{Condvar, Mutex};

pub use self::pack::{
    batch_lines, is_relayed, line_around, raw_lines, Batch, ByteQueue, Packed, Packer, Reconnect,
    MARKER,
};
pub use self::sender::{spawn, Senders};
pub use self::settings::{
    RelayDef, RelayProtocol, DEFAULT_RELAY_BUFFER, DEFAULT_RELAY_DATAGRAM, DEFAULT_RELAY_FLUSH,
    MAX_RELAY_DATAGRAM, MIN_RELAY_BUFFER,
};
use crate::clock::Timestamp;
use crate::mapping::Matcher;
use crate::telemetry::{relay_drop_reason, RelayCounters, RelayFamilies};

/// A worker's batch for one relay is handed off once it holds this much.
pub const HANDOFF_BYTES: usize = 16 * 1024;
/// Spare batch buffers kept per relay for the workers to fill again.
const SPARES: usize = 16;

/// Which names a relay takes.
#[derive(Debug)]
enum Filter {
    All,
    Glob(crate::mapping::Glob),
    /// Anchored like `match_regex` in mappings; `is_match` needs no
    /// capture vector.
    Regex(regex::Regex),
}

impl Filter {
    fn of(m: Option<&Matcher>) -> Filter {
        match m {
            None => Filter::All,
            Some(Matcher::Glob(g)) => Filter::Glob(g.clone()),
            // The pattern compiled as a mapping rule already.
            Some(Matcher::Regex(r)) => regex::Regex::new(&format!("^(?:{})$", r.as_str()))
                .map_or(Filter::All, Filter::Regex),
        }
    }

    #[inline]
    fn matches(&self, name: &str) -> bool {
        match self {
            Filter::All => true,
            // The prefix and suffix test first: most names fail it.
            Filter::Glob(g) => g.may_match(name) && g.is_match(name),
            Filter::Regex(r) => r.is_match(name),
        }
    }
}

/// What the ingest path and a relay's sender share.
pub(crate) struct Shared {
    pub(crate) queue: ByteQueue,
    /// Buffers the sender is done with, for workers to fill again.
    pub(crate) spares: Vec<Vec<u8>>,
    /// Set at stop: send what is held until this time, then drop the rest.
    pub(crate) stop: Option<Timestamp>,
}

/// One `[[relay]]` destination.
pub struct Relay {
    pub(crate) def: RelayDef,
    filter: Filter,
    /// Longest line relayed (`max_datagram_bytes` less its `\n` and the
    /// datagram's [`MARKER`]).
    max_line: usize,
    pub(crate) shared: Mutex<Shared>,
    /// Wakes the sender: a batch was queued, or the stop began.
    pub(crate) wake: Condvar,
    pub(crate) counters: RelayCounters,
}

impl Relay {
    fn new(def: &RelayDef, counters: RelayCounters) -> Relay {
        Relay {
            filter: Filter::of(def.filter.as_ref()),
            max_line: def.max_datagram_bytes.saturating_sub(1 + MARKER.len()),
            shared: Mutex::new(Shared {
                queue: ByteQueue::new(def.buffer_bytes),
                spares: Vec::new(),
                stop: None,
            }),
            wake: Condvar::new(),
            counters,
            def: def.clone(),
        }
    }

    /// Whether this relay takes the line of `name`.
    #[inline]
    fn takes(&self, name: &str, dropped_by_mapping: bool) -> bool {
        !(dropped_by_mapping && self.def.after_mapping) && self.filter.matches(name)
    }

    /// The relay's name (its `relay` label).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// UDP or TCP.
    #[must_use]
    pub fn protocol(&self) -> RelayProtocol {
        self.def.protocol
    }

    /// Queues `batch` for the sender, or drops and counts it when the
    /// buffer is full; `batch` is left empty either way, with a buffer to
    /// fill. Never waits for the sender (the lock is held for a queue push).
    fn hand_off(&self, batch: &mut Batch) {
        if batch.is_empty() {
            return;
        }
        let full = std::mem::take(batch);
        let count = full.count;
        let mut s = self.shared.lock();
        match s.queue.push(full) {
            Ok(()) => {
                batch.lines = s.spares.pop().unwrap_or_default();
                self.counters.buffered.set(s.queue.bytes() as i64);
                drop(s);
                self.wake.notify_one();
            }
            Err(mut back) => {
                drop(s);
                self.counters
                    .dropped(relay_drop_reason::BUFFER_FULL)
                    .inc_by(count);
                back.lines.clear();
                back.count = 0;
                *batch = back;
            }
        }
    }
}

/// Every `[[relay]]` of the config: shared by the ingest workers (which
/// queue lines) and the sender threads (which send them). Built without
/// I/O; [`spawn`] starts the senders.
pub struct Relays {
    relays: Vec<std::sync::Arc<Relay>>,
}

/// One ingest worker's lines not yet handed off, per relay, and lines
/// too long to relay, not yet counted.
#[derive(Debug, Default)]
pub struct Outbox {
    batches: Vec<Batch>,
    too_long: Vec<u64>,
    /// Lines relayed before, not relayed again, not yet counted.
    relayed_before: Vec<u64>,
}

impl Relays {
    /// The relays of `defs`, counting into `families`; `None` for none,
    /// so that the ingest path tests one `Option`.
    #[must_use]
    pub fn new(defs: &[RelayDef], families: &RelayFamilies) -> Option<Relays> {
        (!defs.is_empty()).then(|| Relays {
            relays: defs
                .iter()
                .map(|d| std::sync::Arc::new(Relay::new(d, families.counters(&d.name))))
                .collect(),
        })
    }

    /// The relays, in config order.
    pub fn iter(&self) -> impl Iterator<Item = &std::sync::Arc<Relay>> {
        self.relays.iter()
    }

    /// Offers one accepted sample line (`line` as received, trimmed;
    /// `name` its statsd name, tags stripped) to every relay whose filter
    /// takes it. `dropped_by_mapping`: a `drop` rule matched it.
    #[inline]
    pub fn offer(&self, line: &[u8], name: &str, dropped_by_mapping: bool, out: &mut Outbox) {
        self.size(out);
        for (i, r) in self.relays.iter().enumerate() {
            if !r.takes(name, dropped_by_mapping) {
                continue;
            }
            if line.len() > r.max_line {
                out.too_long[i] += 1;
                continue;
            }
            let b = &mut out.batches[i];
            if b.lines.len() + line.len() + 1 > HANDOFF_BYTES {
                r.hand_off(b);
            }
            b.push(line);
        }
    }

    /// A line that came through a rollstat relay ([`is_relayed`]): not
    /// relayed again, counted `relayed_before` by every relay that would
    /// have taken it.
    pub fn refuse_relayed(&self, name: &str, dropped_by_mapping: bool, out: &mut Outbox) {
        self.size(out);
        for (i, r) in self.relays.iter().enumerate() {
            if r.takes(name, dropped_by_mapping) {
                out.relayed_before[i] += 1;
            }
        }
    }

    /// Gives `out` a slot per relay.
    #[inline]
    fn size(&self, out: &mut Outbox) {
        if out.batches.len() < self.relays.len() {
            out.batches.resize_with(self.relays.len(), Batch::default);
            out.too_long.resize(self.relays.len(), 0);
            out.relayed_before.resize(self.relays.len(), 0);
        }
    }

    /// Hands every pending batch of `out` to its relay, and counts the
    /// lines too long to relay and those relayed before.
    pub fn hand_off(&self, out: &mut Outbox) {
        for (i, b) in out.batches.iter_mut().enumerate() {
            self.relays[i].hand_off(b);
        }
        for (i, n) in out.too_long.iter_mut().enumerate() {
            if *n > 0 {
                self.relays[i]
                    .counters
                    .dropped(relay_drop_reason::TOO_LONG)
                    .inc_by(*n);
                *n = 0;
            }
        }
        for (i, n) in out.relayed_before.iter_mut().enumerate() {
            if *n > 0 {
                self.relays[i]
                    .counters
                    .dropped(relay_drop_reason::RELAYED_BEFORE)
                    .inc_by(*n);
                *n = 0;
            }
        }
    }

    /// Tells every sender to send what it holds until `deadline` (the
    /// daemon's clock), then stop.
    pub fn stop(&self, deadline: Timestamp) {
        for r in &self.relays {
            r.shared.lock().stop = Some(deadline);
            r.wake.notify_all();
        }
    }
}

/// Gives a buffer back to `relay` for reuse (the sender is done with it).
pub(crate) fn give_back(s: &mut Shared, mut buf: Vec<u8>) {
    // A buffer that grew for a long line does not keep its size.
    if s.spares.len() < SPARES && buf.capacity() <= 4 * HANDOFF_BYTES {
        buf.clear();
        s.spares.push(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::telemetry::Telemetry;

    fn relays(toml: &str) -> (Relays, Telemetry) {
        let cfg = Config::parse(toml).unwrap();
        let t = Telemetry::new().unwrap();
        (Relays::new(&cfg.relays, &t.relay).unwrap(), t)
    }

    fn queued(r: &Relay) -> Vec<String> {
        let mut s = r.shared.lock();
        let mut out = Vec::new();
        while let Some(b) = s.queue.pop() {
            out.extend(batch_lines(&b.lines).map(|l| String::from_utf8_lossy(l).into_owned()));
        }
        out
    }

    #[test]
    fn no_relay_configured_is_none() {
        let t = Telemetry::new().unwrap();
        assert!(Relays::new(&[], &t.relay).is_none());
    }

    #[test]
    fn lines_are_filtered_per_relay_and_handed_off_whole() {
        let (rs, _t) = relays(
            r#"
[[relay]]
name = "all"
address = "127.0.0.1:1"
[[relay]]
name = "api"
address = "127.0.0.1:2"
match = "api.*"
[[relay]]
name = "kept"
address = "127.0.0.1:3"
after_mapping = true
[[relay]]
name = "re"
address = "127.0.0.1:4"
match_regex = "web|api\\.x"
"#,
        );
        let mut out = Outbox::default();
        rs.offer(b"api.x:1|c|#k:v", "api.x", false, &mut out);
        rs.offer(b"web:2|g", "web", false, &mut out);
        rs.offer(b"debug.y:1|c", "debug.y", true, &mut out);
        // Nothing is queued before the hand-off.
        assert!(queued(&rs.relays[0]).is_empty());
        rs.hand_off(&mut out);
        let all: Vec<Vec<String>> = rs.relays.iter().map(|r| queued(r)).collect();
        assert_eq!(all[0], ["api.x:1|c|#k:v", "web:2|g", "debug.y:1|c"]);
        assert_eq!(all[1], ["api.x:1|c|#k:v"]);
        assert_eq!(all[2], ["api.x:1|c|#k:v", "web:2|g"]);
        assert_eq!(all[3], ["api.x:1|c|#k:v", "web:2|g"]);
    }

    #[test]
    fn a_full_buffer_drops_and_counts_whole_batches_and_a_long_line_is_counted() {
        let (rs, t) = relays(
            "[[relay]]\nname = \"r\"\naddress = \"127.0.0.1:1\"\nbuffer_bytes = 131072\nmax_datagram_bytes = 100\n",
        );
        let line = [b'x'; 98]; // 100 bytes with its \n and the marker: the longest relayed
        let mut out = Outbox::default();
        // 2000 lines of 99 bytes: 198 kB offered to a 128 KiB buffer.
        for _ in 0..2000 {
            rs.offer(&line, "x", false, &mut out);
        }
        rs.offer(&[b'y'; 99], "y", false, &mut out);
        rs.hand_off(&mut out);
        let c = t.relay.counters("r");
        let kept = queued(&rs.relays[0]).len() as u64;
        let dropped = c.dropped(relay_drop_reason::BUFFER_FULL).get();
        assert_eq!(kept + dropped, 2000);
        // Whole hand-offs of 165 lines (16 KiB) fit 8 times in 128 KiB.
        assert_eq!(kept, 8 * 165);
        assert_eq!(c.dropped(relay_drop_reason::TOO_LONG).get(), 1);
        assert_eq!(c.buffered.get(), 8 * 165 * 99);
    }
}
