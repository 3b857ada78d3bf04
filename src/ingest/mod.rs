//! Ingest: bytes from a socket or a request body into the series registry.
//!
//! Every transport ends in [`Ingestor::ingest`]: parse a buffer of statsd
//! lines (one result per line, so a bad line never loses its neighbours),
//! apply each sample at the `now` read once for the batch, and count every
//! outcome in the worker's [`LocalCounts`]. The transports own sockets and
//! framing only.

pub(crate) mod backoff;
pub mod fault;
pub mod otlp;
pub mod otlp_grpc;
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod otlp_service;
pub(crate) mod reader;
pub mod route;
pub mod settings;
pub mod sources;
pub(crate) mod stop;
pub(crate) mod supervise;
pub(crate) mod tcp;
pub(crate) mod udp;
pub(crate) mod unix;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use self::settings::{GroupRef, Ingest, Listen, UnixGroup, DEFAULT_UNIX_MODE};
pub use self::sources::{AllowedSources, SourceNet, SourceNetError};
use crate::clock::{Clock, Timestamp};
use crate::escape::Escaped;
use crate::parse::{parse_datagram_with, Line, ParseError, ParseOptions};
use crate::relay::{line_around, Outbox, Relays};
use crate::series::{Applied, KeyBuf, Registry};
use crate::service::ServiceHandle;
use crate::telemetry::{LocalCounts, Telemetry, Transport};

/// Shared by every ingest worker.
pub struct Ingestor {
    /// Where samples go.
    pub registry: Arc<Registry>,
    /// Where counts go.
    pub telemetry: Arc<Telemetry>,
    /// Read once per batch.
    pub clock: Arc<dyn Clock>,
    /// Breakers and limits (breakers listen to ingested samples).
    pub services: Arc<ServiceHandle>,
    /// How statsd text is parsed (`[ingest] tag_styles`), on every transport.
    parse: ParseOptions,
    /// `[[relay]]` destinations accepted lines are copied to; `None`: none.
    relays: Option<Arc<Relays>>,
    /// When a bad line was last logged (Unix nanos), for rate limiting.
    last_logged: AtomicU64,
    /// Bad lines not logged since.
    suppressed: AtomicU64,
}

/// At most one bad-line log message per this many nanoseconds (10 s).
const LOG_EVERY_NANOS: u64 = 10_000_000_000;

/// A rejected line of a batch (the first, for error messages), by its
/// number among the batch's non-empty lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstError {
    /// 1-based line number within the batch.
    pub line: usize,
    /// What was wrong.
    pub error: ParseError,
}

/// One worker's reusable state: key buffer and pending counts.
#[derive(Default)]
pub struct Worker {
    /// Scratch for series keys.
    pub keys: KeyBuf,
    /// Counts not yet flushed.
    pub counts: LocalCounts,
    /// Lines for the relays not yet handed off.
    pub relay: Outbox,
    /// The bytes being ingested came through a rollstat relay (their
    /// datagram or TCP connection began with the relay marker): applied,
    /// not relayed again. Set by the transport.
    pub relayed: bool,
}

impl Ingestor {
    /// An ingestor over shared state.
    #[must_use]
    pub fn new(
        registry: Arc<Registry>,
        telemetry: Arc<Telemetry>,
        clock: Arc<dyn Clock>,
        services: Arc<ServiceHandle>,
    ) -> Self {
        Ingestor {
            registry,
            telemetry,
            clock,
            services,
            parse: ParseOptions::default(),
            relays: None,
            last_logged: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// This ingestor, parsing statsd text with `opts` (default: every tag
    /// style).
    #[must_use]
    pub fn with_parse_options(mut self, opts: ParseOptions) -> Self {
        self.parse = opts;
        self
    }

    /// This ingestor, copying accepted lines to `relays`.
    #[must_use]
    pub fn with_relays(mut self, relays: Option<Arc<Relays>>) -> Self {
        self.relays = relays;
        self
    }

    /// Whether `first_bytes` (a datagram, or a TCP connection's first
    /// read) came through a rollstat relay and this daemon relays: its
    /// lines must then not be relayed again.
    #[must_use]
    pub fn came_relayed(&self, first_bytes: &[u8]) -> bool {
        self.relays.is_some() && crate::relay::is_relayed(first_bytes)
    }

    /// The options statsd text is parsed with.
    #[must_use]
    pub fn parse_options(&self) -> ParseOptions {
        self.parse
    }

    /// Logs a rejected line at most once per 10 s, with how many were not
    /// logged in between, so a flood of bad lines cannot flood the log. Every
    /// rejection is counted in the self-metrics regardless.
    pub fn note_bad_line(
        &self,
        t: Transport,
        first: Option<FirstError>,
        buf: &[u8],
        now: Timestamp,
    ) {
        let Some(f) = first else { return };
        let last = self.last_logged.load(Ordering::Relaxed);
        if now.as_nanos() < last.saturating_add(LOG_EVERY_NANOS)
            || self
                .last_logged
                .compare_exchange(last, now.as_nanos(), Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let line = buf
            .split(|&b| b == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .nth(f.line - 1)
            .unwrap_or(b"");
        let suppressed = self.suppressed.swap(0, Ordering::Relaxed);
        tracing::warn!(
            transport = t.as_str(),
            reason = f.error.reason(),
            // Escaped: a `\r` or ESC from the network must not reach the log.
            line = %Escaped::new(line),
            suppressed,
            "Rejected a statsd line: {}. Counted in rollstat_ingest_rejected_lines_total; further bad lines are logged at most every 10s.",
            f.error
        );
    }

    /// Parses `buf` with the configured options and applies every good line
    /// at `now`. Returns the first parse error, if any (the other lines are
    /// applied regardless).
    pub fn ingest(&self, buf: &[u8], now: Timestamp, w: &mut Worker) -> Option<FirstError> {
        self.ingest_with(buf, self.parse, now, w)
    }

    /// [`ingest`](Self::ingest) with other parse options (the JSON ingest
    /// body, whose tags are rendered as DogStatsD tags, is read with all).
    pub fn ingest_with(
        &self,
        buf: &[u8],
        opts: ParseOptions,
        now: Timestamp,
        w: &mut Worker,
    ) -> Option<FirstError> {
        let mut first = None;
        self.ingest_reporting(buf, opts, now, w, |e| {
            first.get_or_insert(e);
        });
        first
    }

    /// [`ingest_with`](Self::ingest_with), calling `rejected` for every
    /// rejected line in order (not only the first): the HTTP ingest handler
    /// reports each one.
    pub fn ingest_reporting(
        &self,
        buf: &[u8],
        opts: ParseOptions,
        now: Timestamp,
        w: &mut Worker,
        mut rejected: impl FnMut(FirstError),
    ) {
        let services = self.services.current();
        let breakers = services.breakers.has_feeds().then_some(&services.breakers);
        // Room for a line whose SignalFx tags sit in the middle of its name
        // (`foo.[k=v]test`); allocated only if such a line comes.
        let mut room = String::new();
        let relays = self.relays.as_deref();
        let mut lines = parse_datagram_with(buf, opts);
        let mut i = 0;
        while let Some(line) = lines.next_with_room(&mut room) {
            let applied = self.apply_line(i, line, breakers, now, w, &mut rejected);
            i += 1;
            let (Some(relays), Some((name, dropped))) = (relays, applied) else {
                continue;
            };
            // The sample's name borrows from `buf`: its line is found around
            // it, as the client sent it.
            if w.relayed {
                relays.refuse_relayed(name, dropped, &mut w.relay);
                continue;
            }
            match line_around(buf, name.as_bytes()) {
                Some(raw) => relays.offer(raw, name, dropped, &mut w.relay),
                None => {
                    // A SignalFx block mid-name: the sample was read from
                    // its line rejoined in `room` (`[k=v]foo.test:1|c`, the
                    // same sample), which is relayed. Rare: the name is
                    // copied to end its borrow of `room`.
                    let name = name.to_owned();
                    relays.offer(room.trim().as_bytes(), &name, dropped, &mut w.relay);
                }
            }
        }
    }

    /// Applies the `i`-th line of a batch; for a sample, its name and
    /// whether a `drop` mapping rule matched it.
    #[inline]
    fn apply_line<'a>(
        &self,
        i: usize,
        line: Result<Line<'a>, ParseError>,
        breakers: Option<&crate::service::Breakers>,
        now: Timestamp,
        w: &mut Worker,
        rejected: &mut impl FnMut(FirstError),
    ) -> Option<(&'a str, bool)> {
        match line {
            Ok(Line::Sample(s)) => {
                if let Some(b) = breakers {
                    b.observe(&s);
                }
                let dropped = match self.registry.ingest(&s, now, &mut w.keys) {
                    Ok(Applied::Stored) => {
                        w.counts.lines += 1;
                        false
                    }
                    Ok(Applied::DroppedByMapping) => {
                        w.counts.dropped_by_mapping += 1;
                        true
                    }
                    Err(r) => {
                        w.counts.refuse(r);
                        false
                    }
                };
                Some((s.name, dropped))
            }
            Ok(Line::Skipped(k)) => {
                w.counts.skip(k);
                None
            }
            Err(e) => {
                w.counts.reject(e);
                rejected(FirstError {
                    line: i + 1,
                    error: e,
                });
                None
            }
        }
    }

    /// Reads the clock once.
    #[must_use]
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Hands a worker's relay lines off, and flushes its counts (in that
    /// order: a line counted as accepted has reached its relay's buffer,
    /// or its drop is counted).
    pub fn flush(&self, t: Transport, w: &mut Worker) {
        if let Some(r) = &self.relays {
            r.hand_off(&mut w.relay);
        }
        self.telemetry.flush(t, &mut w.counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::config::Config;
    use crate::relay::batch_lines;
    use crate::series::{Plan, Registry};
    use crate::service::Services;

    fn ingestor(toml: &str) -> Ingestor {
        let cfg = Config::parse(toml).unwrap();
        let clock = ManualClock::new();
        let services = Services::new(cfg.service_settings(), clock.now(), None).unwrap();
        let telemetry = Arc::new(Telemetry::new().unwrap());
        let relays = Relays::new(&cfg.relays, &telemetry.relay).map(Arc::new);
        Ingestor::new(
            Arc::new(Registry::new(Plan::new(cfg.series_settings()), 4)),
            telemetry,
            Arc::new(clock),
            Arc::new(ServiceHandle::new(services)),
        )
        .with_relays(relays)
    }

    const MIXED: &[u8] =
        b"a:1|c|#k:v\r\n\n  bad\ndebug.x:2|g\n_e{1,1}:t|x\nb:3|ms|@0.5\nc:\xff|c\n";

    #[test]
    fn with_a_relay_every_line_counts_as_without_and_only_samples_are_relayed() {
        let plain = ingestor("[[mappings]]\nmatch = \"debug.*\"\naction = \"drop\"\n");
        let relayed = ingestor(
            "[[mappings]]\nmatch = \"debug.*\"\naction = \"drop\"\n[[relay]]\naddress = \"127.0.0.1:1\"\n[[relay]]\naddress = \"127.0.0.1:2\"\nafter_mapping = true\n",
        );
        let mut errors = [Vec::new(), Vec::new()];
        for (i, ing) in [&plain, &relayed].into_iter().enumerate() {
            let mut w = Worker::default();
            ing.ingest_reporting(MIXED, ing.parse_options(), ing.now(), &mut w, |e| {
                errors[i].push(e);
            });
            ing.flush(Transport::Udp, &mut w);
        }
        assert_eq!(errors[0], errors[1]);
        assert_eq!(errors[0].len(), 2);
        let (a, b) = (&plain.telemetry, &relayed.telemetry);
        assert_eq!(a.lines(Transport::Udp), 2);
        assert_eq!(b.lines(Transport::Udp), 2);
        let relays = relayed.relays.as_ref().unwrap();
        let queued: Vec<Vec<String>> = relays
            .iter()
            .map(|r| {
                let mut s = r.shared.lock();
                let mut out = Vec::new();
                while let Some(b) = s.queue.pop() {
                    out.extend(
                        batch_lines(&b.lines).map(|l| String::from_utf8_lossy(l).into_owned()),
                    );
                }
                out
            })
            .collect();
        assert_eq!(queued[0], ["a:1|c|#k:v", "debug.x:2|g", "b:3|ms|@0.5"]);
        assert_eq!(queued[1], ["a:1|c|#k:v", "b:3|ms|@0.5"]);
    }

    #[test]
    fn lines_relayed_before_are_applied_and_counted_not_relayed_again() {
        use crate::telemetry::relay_drop_reason::RELAYED_BEFORE;
        let ing = ingestor(
            "[[mappings]]\nmatch = \"debug.*\"\naction = \"drop\"\n[[relay]]\nname = \"all\"\naddress = \"127.0.0.1:1\"\n[[relay]]\nname = \"kept\"\naddress = \"127.0.0.1:2\"\nafter_mapping = true\n",
        );
        let mut w = Worker {
            relayed: true,
            ..Worker::default()
        };
        ing.ingest(MIXED, ing.now(), &mut w);
        ing.flush(Transport::Udp, &mut w);
        assert_eq!(ing.telemetry.lines(Transport::Udp), 2);
        let relays = ing.relays.as_ref().unwrap();
        assert!(relays.iter().all(|r| r.shared.lock().queue.is_empty()));
        let counted = |name: &str| {
            ing.telemetry
                .relay
                .counters(name)
                .dropped(RELAYED_BEFORE)
                .get()
        };
        assert_eq!((counted("all"), counted("kept")), (3, 2));
    }
}
