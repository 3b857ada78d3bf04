//! Ingest: bytes from a socket or a request body into the series registry.
//!
//! Every transport ends in [`Ingestor::ingest`]: parse a buffer of statsd
//! lines (one result per line, so a bad line never loses its neighbours),
//! apply each sample at the `now` read once for the batch, and count every
//! outcome in the worker's [`LocalCounts`]. The transports own sockets and
//! framing only.

pub(crate) mod backoff;
pub mod fault;
pub(crate) mod reader;
pub mod route;
pub(crate) mod stop;
pub(crate) mod supervise;
pub(crate) mod tcp;
pub(crate) mod udp;
pub(crate) mod unix;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::clock::{Clock, Timestamp};
use crate::escape::Escaped;
use crate::parse::{parse_datagram_with, Line, ParseError, ParseOptions};
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
        let mut lines = parse_datagram_with(buf, opts);
        let mut i = 0;
        while let Some(line) = lines.next_with_room(&mut room) {
            i += 1;
            match line {
                Ok(Line::Sample(s)) => {
                    if let Some(b) = breakers {
                        b.observe(&s);
                    }
                    match self.registry.ingest(&s, now, &mut w.keys) {
                        Ok(Applied::Stored) => w.counts.lines += 1,
                        Ok(Applied::DroppedByMapping) => w.counts.dropped_by_mapping += 1,
                        Err(r) => w.counts.refuse(r),
                    }
                }
                Ok(Line::Skipped(k)) => w.counts.skip(k),
                Err(e) => {
                    w.counts.reject(e);
                    rejected(FirstError { line: i, error: e });
                }
            }
        }
    }

    /// Reads the clock once.
    #[must_use]
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Flushes a worker's counts.
    pub fn flush(&self, t: Transport, w: &mut Worker) {
        self.telemetry.flush(t, &mut w.counts);
    }
}
