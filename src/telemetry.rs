//! Self-metrics: every drop and error is a named, counted event.
//!
//! Ingest workers count into a plain [`LocalCounts`] per batch and flush it
//! with a handful of atomic adds, so the hot path never touches a label map.
//! Values the registry already keeps (series, created, expired, refused) are
//! read at scrape time by [`registry_families`], which the series collector
//! appends to every scrape.

use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry};

use crate::parse::{JsonSampleError, ParseError, SkipKind};
use crate::series::{Refusal, Registry as SeriesRegistry, Replanned};

/// What this binary was built from, as build.rs found it: published by
/// `rollstat --version` and the `rollstat_build_info` gauge.
pub mod build {
    /// The crate's version (Cargo.toml).
    pub const VERSION: &str = env!("CARGO_PKG_VERSION");
    /// The git commit (12 hex digits), `ROLLSTAT_BUILD_COMMIT` as a packager
    /// set it, or `unknown` when built outside a git work tree.
    pub const COMMIT: &str = env!("ROLLSTAT_GIT_COMMIT");
    /// The compiler's version, e.g. `1.85.0`.
    pub const RUSTC: &str = env!("ROLLSTAT_RUSTC_VERSION");
    /// `release` or `debug`.
    pub const PROFILE: &str = env!("ROLLSTAT_BUILD_PROFILE");
}

/// Where lines come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// statsd over UDP.
    Udp,
    /// statsd over TCP.
    Tcp,
    /// statsd over a Unix datagram socket.
    Unix,
    /// POST /api/v1/ingest.
    Http,
}

impl Transport {
    /// All transports, in label order.
    pub const ALL: [Transport; 4] = [
        Transport::Udp,
        Transport::Tcp,
        Transport::Unix,
        Transport::Http,
    ];

    /// The `transport` label.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Unix => "unix",
            Transport::Http => "http",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Why the daemon closed or refused a connection, HTTP or TCP statsd
/// (`rollstat_{http,tcp}_connections_closed_total{reason}`).
pub mod close_reason {
    /// A client beyond the open-connection cap, closed at once.
    pub const CONNECTION_CAP: &str = "connection_cap";
    /// HTTP: the request head did not arrive within `http.header_timeout_ms`.
    pub const HEADER_TIMEOUT: &str = "header_timeout";
    /// HTTP: the request body did not arrive within `http.body_timeout_ms`.
    pub const BODY_TIMEOUT: &str = "body_timeout";
    /// No request (HTTP) or no byte (TCP statsd) for the idle timeout.
    pub const IDLE_TIMEOUT: &str = "idle_timeout";
    /// HTTP: a write made no progress for `http.write_timeout_ms`.
    pub const WRITE_TIMEOUT: &str = "write_timeout";
    /// HTTPS: the TLS handshake failed (plain HTTP to the TLS port, a
    /// client that refused the certificate, no client certificate where
    /// one is required, no common version or cipher).
    pub const TLS_HANDSHAKE: &str = "tls_handshake";
    /// TCP statsd: a client whose address is not in
    /// `ingest.allowed_sources`, closed at accept.
    pub const SOURCE_NOT_ALLOWED: &str = "source_not_allowed";
    /// HTTP: every reason, in label order.
    pub const HTTP: [&str; 6] = [
        CONNECTION_CAP,
        HEADER_TIMEOUT,
        BODY_TIMEOUT,
        IDLE_TIMEOUT,
        WRITE_TIMEOUT,
        TLS_HANDSHAKE,
    ];
    /// TCP statsd: every reason, in label order.
    pub const TCP: [&str; 3] = [CONNECTION_CAP, IDLE_TIMEOUT, SOURCE_NOT_ALLOWED];
}

/// Why a UDP reader dropped a datagram unread
/// (`rollstat_udp_datagrams_dropped_total{reason}`; the kernel's own drops
/// are `rollstat_udp_kernel_drops`).
pub mod udp_drop_reason {
    /// A sender whose address is not in `ingest.allowed_sources`.
    pub const SOURCE_NOT_ALLOWED: &str = super::close_reason::SOURCE_NOT_ALLOWED;
    /// Every reason, in label order.
    pub const ALL: [&str; 1] = [SOURCE_NOT_ALLOWED];
}

/// Why an HTTP request was refused before its handler ran
/// (`rollstat_http_requests_refused_total{reason}`).
pub mod refuse_reason {
    /// A body (raw or decompressed) above `ingest.http_max_body_bytes`: 413.
    pub const BODY_TOO_LARGE: &str = "body_too_large";
    /// A `Content-Encoding` other than gzip or identity: 415.
    pub const UNSUPPORTED_ENCODING: &str = "unsupported_encoding";
    /// A gzip body that does not inflate: 400.
    pub const BAD_ENCODING: &str = "bad_encoding";
    /// `Content-Length` with `Transfer-Encoding` (a request-smuggling
    /// sign): 400.
    pub const AMBIGUOUS_FRAMING: &str = "ambiguous_framing";
    /// Too many `/api/v1/series` or `/api/v1/metrics` reads at once: 503.
    pub const API_BUSY: &str = "api_busy";
    /// A `?match=` glob over the length or wildcard caps, or malformed: 400.
    pub const BAD_PATTERN: &str = "bad_pattern";
    /// A request hyper could not parse and answered 400 (or 431) itself: a
    /// bad request line, two different `Content-Length` values, headers too
    /// long; or a body whose chunked framing is broken.
    pub const MALFORMED_REQUEST: &str = "malformed_request";
    /// More request bodies in flight than their shared memory budget, for
    /// longer than the body deadline: 503.
    pub const BODIES_BUSY: &str = "bodies_busy";
    /// A `limit` or `cursor` of `/api/v1/series` that is out of range or
    /// not one the server gave out: 400.
    pub const BAD_QUERY: &str = "bad_query";
    /// A `POST /api/v1/breakers/{name}/outcomes` body that is not
    /// `{"success", "failure", "slow"}` with whole counts from 0 to the cap
    /// (`service::breakers::MAX_OUTCOMES`), or whose `slow` exceeds
    /// `success`: 400.
    pub const BAD_OUTCOMES: &str = "bad_outcomes";
    /// `POST /api/v1/ingest` with a `Content-Type` that is neither statsd
    /// text (`text/plain`, `application/x-www-form-urlencoded`, none) nor
    /// `application/json`: 415.
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "unsupported_media_type";
    /// A route whose group (`[http.auth.*]`) is off, e.g. `/-/reload`
    /// while the lifecycle API is off: 403.
    pub const ROUTE_GROUP_OFF: &str = "route_group_off";
    /// A protected route without credentials: 401.
    pub const UNAUTHENTICATED: &str = "unauthenticated";
    /// A protected route with a token or user that matches nothing, or an
    /// unknown `Authorization` scheme: 401.
    pub const BAD_CREDENTIALS: &str = "bad_credentials";
    /// A basic-auth pair that needs bcrypt while the verifications allowed
    /// at once are all running: 503.
    pub const AUTH_BUSY: &str = "auth_busy";
    /// A `Host` that is a name the daemon does not answer to (DNS
    /// rebinding): 403.
    pub const HOST_NOT_ALLOWED: &str = "host_not_allowed";
    /// An `Origin` that is neither the daemon's own nor listed in
    /// `http.allowed_origins` (a cross-site request): 403.
    pub const ORIGIN_NOT_ALLOWED: &str = "origin_not_allowed";
    /// A rate-limit acquire whose request cannot be read: a bad
    /// percent-escape, a key or name that is not UTF-8 once decoded, an
    /// unknown or repeated parameter, a missing, empty or too long `key`, an
    /// `n` that is not a whole number up to 2^32 - 1, a body that is not the
    /// expected JSON: 400.
    pub const BAD_ACQUIRE: &str = "bad_acquire";
    /// Every reason, in label order.
    pub const ALL: [&str; 18] = [
        BODY_TOO_LARGE,
        UNSUPPORTED_ENCODING,
        BAD_ENCODING,
        AMBIGUOUS_FRAMING,
        API_BUSY,
        BAD_PATTERN,
        MALFORMED_REQUEST,
        BODIES_BUSY,
        BAD_QUERY,
        BAD_OUTCOMES,
        UNSUPPORTED_MEDIA_TYPE,
        ROUTE_GROUP_OFF,
        UNAUTHENTICATED,
        BAD_CREDENTIALS,
        AUTH_BUSY,
        HOST_NOT_ALLOWED,
        ORIGIN_NOT_ALLOWED,
        BAD_ACQUIRE,
    ];
}

/// A labelled counter family with every label value created at zero, and
/// lookup by label value.
#[derive(Clone)]
pub struct ReasonCounters {
    reasons: &'static [&'static str],
    counters: Vec<IntCounter>,
}

impl ReasonCounters {
    fn register(
        r: &Registry,
        name: &str,
        help: &str,
        reasons: &'static [&'static str],
    ) -> prometheus::Result<ReasonCounters> {
        Ok(ReasonCounters {
            reasons,
            counters: counter_vec(r, name, help, "reason", reasons)?,
        })
    }

    /// Counts one event under `reason` (one of the family's label values;
    /// anything else is a bug and is ignored).
    pub fn inc(&self, reason: &str) {
        if let Some(i) = self.reasons.iter().position(|r| *r == reason) {
            self.counters[i].inc();
        }
    }

    /// The count under `reason` (0 for an unknown reason).
    #[must_use]
    pub fn get(&self, reason: &str) -> u64 {
        self.reasons
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.counters[i].get())
    }
}

/// Every `reason` of `rollstat_ingest_rejected_lines_total`: the parser's
/// ([`ParseError::ALL_REASONS`]), then the JSON ingest body's own
/// ([`JsonSampleError::ALL_REASONS`]). A fixed list: all exist at 0.
pub const REJECT_REASONS: [&str;
    ParseError::ALL_REASONS.len() + JsonSampleError::ALL_REASONS.len()] = {
    let mut out = [""; ParseError::ALL_REASONS.len() + JsonSampleError::ALL_REASONS.len()];
    let mut i = 0;
    while i < ParseError::ALL_REASONS.len() {
        out[i] = ParseError::ALL_REASONS[i];
        i += 1;
    }
    let mut j = 0;
    while j < JsonSampleError::ALL_REASONS.len() {
        out[i + j] = JsonSampleError::ALL_REASONS[j];
        j += 1;
    }
    out
};

/// Rejections that happen before or around the parser.
pub const FRAMING_REASONS: [&str; 1] = ["line_too_long"];

/// Counts gathered by one worker for one batch, flushed at once.
#[derive(Debug, Default, Clone)]
pub struct LocalCounts {
    /// Accepted sample lines.
    pub lines: u64,
    /// Packets, datagrams, reads or requests.
    pub packets: u64,
    /// Rejected lines by reason ([`REJECT_REASONS`] order: the parser's,
    /// then the JSON ingest body's).
    pub rejected: [u64; REJECT_REASONS.len()],
    /// Lines rejected by framing (FRAMING_REASONS order).
    pub framing: [u64; FRAMING_REASONS.len()],
    /// Skipped events and service checks (SkipKind::ALL_REASONS order).
    pub skipped: [u64; 2],
    /// Lines dropped by a mapping rule.
    pub dropped_by_mapping: u64,
    /// Lines refused by the registry (Refusal::ALL_REASONS order); the
    /// registry counts these itself (`rollstat_series_refused_total`).
    pub refused: [u64; Refusal::ALL_REASONS.len()],
}

impl LocalCounts {
    /// Counts one parse error.
    pub fn reject(&mut self, e: ParseError) {
        if let Some(i) = ParseError::ALL_REASONS
            .iter()
            .position(|r| *r == e.reason())
        {
            self.rejected[i] += 1;
        }
    }

    /// Counts one JSON ingest sample rejected before it became a line.
    pub fn reject_json(&mut self, e: JsonSampleError) {
        if let Some(i) = REJECT_REASONS.iter().position(|r| *r == e.reason()) {
            self.rejected[i] += 1;
        }
    }

    /// Counts one skipped line.
    pub fn skip(&mut self, k: SkipKind) {
        self.skipped[usize::from(k == SkipKind::ServiceCheck)] += 1;
    }

    /// Counts one registry refusal.
    pub fn refuse(&mut self, r: Refusal) {
        if let Some(i) = Refusal::ALL_REASONS.iter().position(|x| *x == r.reason()) {
            self.refused[i] += 1;
        }
    }

    /// Total rejected lines (parse + framing + refused).
    #[must_use]
    pub fn total_rejected(&self) -> u64 {
        self.rejected.iter().sum::<u64>()
            + self.framing.iter().sum::<u64>()
            + self.refused.iter().sum::<u64>()
    }
}

/// The daemon's own metrics, registered in one `prometheus::Registry` that
/// also carries the series collector.
pub struct Telemetry {
    /// The registry `/metrics` gathers.
    pub registry: Registry,
    lines: Vec<IntCounter>,
    packets: Vec<IntCounter>,
    rejected: Vec<IntCounter>,
    framing: Vec<IntCounter>,
    skipped: Vec<IntCounter>,
    dropped_by_mapping: IntCounter,
    /// Config reloads by result (`ok`, `error`).
    pub reloads: IntCounterVec,
    /// Refused reloads by reason ([`ReloadError::reason`](crate::reload::ReloadError::reason)).
    pub reload_refusals: IntCounterVec,
    /// 1 if the last reload succeeded (or none happened), else 0.
    pub last_reload_success: IntGauge,
    /// Time to render /metrics.
    pub scrape_duration: Histogram,
    /// Scrapes answered 503 because too many were rendering.
    pub scrapes_rejected: IntCounter,
    /// Series a scrape left out of a cumulative family because another
    /// family of another type had the same name in the scrape's escaping.
    pub scrape_series_left_out: IntCounter,
    /// Kernel receive-queue drops on our UDP sockets (from /proc/net/udp).
    pub udp_kernel_drops: IntGauge,
    /// Receive buffer the kernel granted per UDP socket.
    pub udp_recv_buffer: IntGauge,
    /// Hand-overs that found an ingest worker's queue full (the reader
    /// waited).
    pub udp_worker_queue_full: IntCounter,
    /// Routed lines lost because their ingest worker had stopped (it
    /// panicked): never expected.
    pub udp_worker_lost_lines: IntCounter,
    /// Datagrams UDP readers routed to the ingest workers (they were
    /// behind) rather than applied themselves.
    pub udp_routed_datagrams: IntCounter,
    /// Open HTTP connections.
    pub http_connections: IntGauge,
    /// HTTP connections closed or refused by the daemon, by reason.
    pub http_closed: ReasonCounters,
    /// HTTP requests refused before their handler, by reason.
    pub http_refused: ReasonCounters,
    /// Failed accepts on the HTTP listener (e.g. EMFILE), each followed by
    /// a back-off.
    pub http_accept_errors: IntCounter,
    /// Open TCP statsd connections.
    pub tcp_connections: IntGauge,
    /// TCP statsd connections closed or refused by the daemon, by reason.
    pub tcp_closed: ReasonCounters,
    /// Failed accepts on the TCP statsd listener, each followed by a
    /// back-off.
    pub tcp_accept_errors: IntCounter,
    /// Datagrams UDP readers dropped before parsing, by reason.
    pub udp_dropped: ReasonCounters,
    /// Panics of the background tasks, by task ([`TASKS`]).
    pub task_panics: IntCounterVec,
    /// The wall clock minus the daemon's clock, in seconds.
    pub clock_offset: prometheus::Gauge,
    /// Stop drains the deadline cut short, by transport (`udp`, `unix`,
    /// `tcp`).
    pub shutdown_drain_deadline: IntCounterVec,
    /// `[[relay]]` destinations: their counts, by `relay` name.
    pub relay: RelayFamilies,
}

/// Why a line accepted for a relay did not reach it
/// (`rollstat_relay_lines_dropped_total{relay,reason}`).
pub mod relay_drop_reason {
    /// The relay's buffer (`buffer_bytes`) was full: the destination is
    /// slow or down. Dropped on the ingest path, which never waits.
    pub const BUFFER_FULL: &str = "buffer_full";
    /// A line longer than the relay's `max_datagram_bytes` (with its `\n`).
    pub const TOO_LONG: &str = "too_long";
    /// UDP: the send failed (e.g. `ECONNREFUSED`: nothing listens there).
    pub const SEND_ERROR: &str = "send_error";
    /// TCP: the write failed or timed out; the connection is closed and
    /// made again with back-off.
    pub const CONNECTION_LOST: &str = "connection_lost";
    /// At stop, still buffered when the relay's drain deadline passed.
    pub const STOP_DEADLINE: &str = "stop_deadline";
    /// The line reached this daemon through a rollstat relay (its datagram
    /// or TCP connection began with the relay marker, an empty line): it
    /// is applied here but not relayed again, so that relays pointing at
    /// each other cannot pass lines round without end.
    pub const RELAYED_BEFORE: &str = "relayed_before";
    /// Every reason, in label order.
    pub const ALL: [&str; 6] = [
        BUFFER_FULL,
        TOO_LONG,
        SEND_ERROR,
        CONNECTION_LOST,
        STOP_DEADLINE,
        RELAYED_BEFORE,
    ];
}

/// The `rollstat_relay_*` families; each relay takes its own counters with
/// [`RelayFamilies::counters`].
pub struct RelayFamilies {
    lines_sent: IntCounterVec,
    datagrams_sent: IntCounterVec,
    bytes_sent: IntCounterVec,
    dropped: IntCounterVec,
    buffered: prometheus::IntGaugeVec,
    connected: prometheus::IntGaugeVec,
}

/// One relay's counters (every drop reason created at 0).
#[derive(Clone)]
pub struct RelayCounters {
    /// Lines sent (in datagrams, or writes, that succeeded).
    pub lines_sent: IntCounter,
    /// Datagrams (UDP) or writes (TCP) sent.
    pub datagrams_sent: IntCounter,
    /// Bytes sent.
    pub bytes_sent: IntCounter,
    /// Lines dropped, in [`relay_drop_reason::ALL`] order.
    pub dropped: Vec<IntCounter>,
    /// Bytes of lines waiting for the destination.
    pub buffered: IntGauge,
    /// 1 while the destination is usable (UDP: resolved; TCP: connected).
    pub connected: IntGauge,
}

impl RelayCounters {
    /// The counter of `reason` (one of [`relay_drop_reason::ALL`]).
    #[must_use]
    pub fn dropped(&self, reason: &str) -> &IntCounter {
        let i = relay_drop_reason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(0);
        &self.dropped[i]
    }
}

impl RelayFamilies {
    fn register(r: &Registry) -> prometheus::Result<RelayFamilies> {
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let v = IntCounterVec::new(Opts::new(name, help), labels)?;
            r.register(Box::new(v.clone()))?;
            Ok::<_, prometheus::Error>(v)
        };
        let gauge = |name: &str, help: &str| {
            let v = prometheus::IntGaugeVec::new(Opts::new(name, help), &["relay"])?;
            r.register(Box::new(v.clone()))?;
            Ok::<_, prometheus::Error>(v)
        };
        Ok(RelayFamilies {
            lines_sent: counter(
                "rollstat_relay_lines_sent_total",
                "statsd lines sent to a [[relay]] destination, by relay (name, default its address). A UDP datagram counts as sent when the kernel took it.",
                &["relay"],
            )?,
            datagrams_sent: counter(
                "rollstat_relay_datagrams_sent_total",
                "Datagrams (UDP) or writes (TCP) sent to a [[relay]] destination, each at most its max_datagram_bytes, by relay.",
                &["relay"],
            )?,
            bytes_sent: counter(
                "rollstat_relay_bytes_sent_total",
                "Bytes of statsd lines sent to a [[relay]] destination, by relay.",
                &["relay"],
            )?,
            dropped: counter(
                "rollstat_relay_lines_dropped_total",
                "Lines meant for a [[relay]] destination that did not reach it, by relay and reason: buffer_full (buffer_bytes full: the destination is slow or down; ingest never waits), too_long (longer than max_datagram_bytes), send_error (UDP send failed, e.g. nothing listens), connection_lost (TCP write failed or timed out), stop_deadline (still buffered when the stop's deadline passed). Lines rollstat itself counts are not affected.",
                &["relay", "reason"],
            )?,
            buffered: gauge(
                "rollstat_relay_buffered_bytes",
                "Bytes of lines waiting for a [[relay]] destination (at most its buffer_bytes), by relay.",
            )?,
            connected: gauge(
                "rollstat_relay_connected",
                "1 while a [[relay]] destination is usable (UDP: address resolved; TCP: connected), else 0, by relay.",
            )?,
        })
    }

    /// The counters of the relay named `relay`, every reason at 0.
    #[must_use]
    pub fn counters(&self, relay: &str) -> RelayCounters {
        RelayCounters {
            lines_sent: self.lines_sent.with_label_values(&[relay]),
            datagrams_sent: self.datagrams_sent.with_label_values(&[relay]),
            bytes_sent: self.bytes_sent.with_label_values(&[relay]),
            dropped: relay_drop_reason::ALL
                .iter()
                .map(|r| self.dropped.with_label_values(&[relay, r]))
                .collect(),
            buffered: self.buffered.with_label_values(&[relay]),
            connected: self.connected.with_label_values(&[relay]),
        }
    }
}

/// The background tasks, as `rollstat_task_panics_total` names them.
pub const TASKS: [&str; 7] = [
    "sweep",
    "tick",
    "store_sync",
    "clock",
    "sighup_reload",
    "udp_reader",
    "unix_reader",
];

fn counter_vec(
    r: &Registry,
    name: &str,
    help: &str,
    label: &str,
    values: &[&str],
) -> prometheus::Result<Vec<IntCounter>> {
    let v = IntCounterVec::new(Opts::new(name, help), &[label])?;
    r.register(Box::new(v.clone()))?;
    values
        .iter()
        .map(|x| v.get_metric_with_label_values(&[x]))
        .collect()
}

impl Telemetry {
    /// Registers every self-metric, with all label values at zero.
    pub fn new() -> prometheus::Result<Telemetry> {
        let r = Registry::new();
        let transports: Vec<&str> = Transport::ALL.iter().map(|t| t.as_str()).collect();
        let lines = counter_vec(
            &r,
            "rollstat_ingest_lines_total",
            "statsd sample lines accepted, by transport.",
            "transport",
            &transports,
        )?;
        let packets = counter_vec(
            &r,
            "rollstat_ingest_packets_total",
            "Datagrams, TCP reads or HTTP requests received, by transport.",
            "transport",
            &transports,
        )?;
        let rejected = counter_vec(
            &r,
            "rollstat_ingest_rejected_lines_total",
            "Lines rejected by the statsd parser, or JSON ingest samples rejected before they became lines (bad_json_sample, reserved_character), by reason.",
            "reason",
            &REJECT_REASONS,
        )?;
        let framing = counter_vec(
            &r,
            "rollstat_ingest_framing_errors_total",
            "Lines rejected before parsing (TCP framing), by reason.",
            "reason",
            &FRAMING_REASONS,
        )?;
        let skipped = counter_vec(
            &r,
            "rollstat_ingest_skipped_lines_total",
            "DogStatsD events and service checks recognised and skipped, by kind.",
            "kind",
            &SkipKind::ALL_REASONS,
        )?;
        let dropped_by_mapping = IntCounter::new(
            "rollstat_ingest_dropped_by_mapping_total",
            "Lines dropped by a `drop` mapping rule.",
        )?;
        r.register(Box::new(dropped_by_mapping.clone()))?;
        let reloads = IntCounterVec::new(
            Opts::new(
                "rollstat_config_reloads_total",
                "Config reloads, by result.",
            ),
            &["result"],
        )?;
        r.register(Box::new(reloads.clone()))?;
        reloads.with_label_values(&["ok"]);
        reloads.with_label_values(&["error"]);
        let reload_refusals = IntCounterVec::new(
            Opts::new(
                "rollstat_config_reload_refusals_total",
                "Config reloads refused (the previous config stays in force), by reason: invalid (a file says something wrong), syntax, unreadable, not_regular (a FIFO, device or directory), too_large, not_utf8, too_deep (nesting), alias_budget (YAML aliases expand too far), services, redis, tls.",
            ),
            &["reason"],
        )?;
        r.register(Box::new(reload_refusals.clone()))?;
        // Its reasons are published at 0 by the reloader (src/reload.rs).
        let last_reload_success = IntGauge::new(
            "rollstat_config_last_reload_success",
            "1 if the last config reload succeeded (or none was tried), 0 if it failed.",
        )?;
        last_reload_success.set(1);
        r.register(Box::new(last_reload_success.clone()))?;
        let scrape_duration = Histogram::with_opts(
            HistogramOpts::new(
                "rollstat_scrape_duration_seconds",
                "Time to render /metrics.",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ]),
        )?;
        r.register(Box::new(scrape_duration.clone()))?;
        let scrapes_rejected = IntCounter::new(
            "rollstat_scrapes_rejected_total",
            "/metrics requests answered 503 because the most scrapes allowed at once were already rendering.",
        )?;
        r.register(Box::new(scrapes_rejected.clone()))?;
        let scrape_series_left_out = IntCounter::new(
            "rollstat_scrape_series_left_out_total",
            "Series left out of a scrape's cumulative families because a family of another type had the same name in the escaping the scraper asked for (under dots or values: statsd a.b and a_dot_b); the family that sorts first is kept.",
        )?;
        r.register(Box::new(scrape_series_left_out.clone()))?;
        let udp_kernel_drops = IntGauge::new("rollstat_udp_kernel_drops", "Datagrams the kernel dropped on rollstat's UDP sockets because their receive queue was full (from /proc/net/udp).")?;
        r.register(Box::new(udp_kernel_drops.clone()))?;
        let udp_recv_buffer = IntGauge::new(
            "rollstat_udp_receive_buffer_bytes",
            "Receive buffer the kernel granted each statsd UDP socket.",
        )?;
        r.register(Box::new(udp_recv_buffer.clone()))?;
        let udp_worker_queue_full = IntCounter::new(
            "rollstat_udp_worker_queue_full_total",
            "Times a UDP reader found an ingest worker's queue full and waited for it: the workers are behind, the socket's receive buffer absorbs the wait, and what does not fit is counted in rollstat_udp_kernel_drops.",
        )?;
        r.register(Box::new(udp_worker_queue_full.clone()))?;
        let udp_worker_lost_lines = IntCounter::new(
            "rollstat_udp_worker_lost_lines_total",
            "Routed statsd lines lost because their ingest worker had stopped (it panicked; see the log). Never expected: above 0 is a bug to report.",
        )?;
        r.register(Box::new(udp_worker_lost_lines.clone()))?;
        let udp_routed_datagrams = IntCounter::new(
            "rollstat_udp_routed_datagrams_total",
            "Datagrams a UDP reader routed to the ingest workers, rather than parsing them itself, because it had fallen behind (4 full drain rounds of 64 datagrams in a row) or lines it routed were not yet applied.",
        )?;
        r.register(Box::new(udp_routed_datagrams.clone()))?;
        let http_connections = IntGauge::new(
            "rollstat_http_connections",
            "Open connections to the HTTP listener (at most http.max_connections).",
        )?;
        r.register(Box::new(http_connections.clone()))?;
        let http_closed = ReasonCounters::register(
            &r,
            "rollstat_http_connections_closed_total",
            "HTTP connections the daemon closed or refused, by reason: connection_cap (beyond http.max_connections: 503, closed), header_timeout, body_timeout, idle_timeout, write_timeout (the [http] deadlines; header_timeout includes a TLS handshake not finished in time), tls_handshake (a failed TLS handshake: plain HTTP to an HTTPS listener, a client that refused the certificate or sent none where [http.tls] requires one).",
            &close_reason::HTTP,
        )?;
        let http_refused = ReasonCounters::register(
            &r,
            "rollstat_http_requests_refused_total",
            "HTTP requests refused, by reason: body_too_large (413), unsupported_encoding (415), bad_encoding (400), ambiguous_framing (Content-Length with Transfer-Encoding: 400), api_busy (503), bad_pattern (a ?match= glob: 400), malformed_request (hyper's own 400, e.g. two different Content-Length values, or a broken chunked body), bodies_busy (503), bad_query (a bad limit or cursor: 400), bad_outcomes (breaker outcomes that are not whole numbers up to the cap: 400), unsupported_media_type (an ingest Content-Type other than text/plain, application/x-www-form-urlencoded or application/json, or a JSON route's other than application/json: 415), route_group_off (the route's [http.auth] group is off, e.g. /-/reload by default: 403), unauthenticated (no credentials on a protected route: 401), bad_credentials (a token or user that matches nothing: 401), auth_busy (too many bcrypt verifications at once: 503), host_not_allowed (a Host name the daemon does not answer to: 403), origin_not_allowed (a cross-site Origin: 403), bad_acquire (a rate-limit acquire whose query, key or body cannot be read, e.g. a bad percent-escape or a key that is not UTF-8: 400). A body that does not arrive in time is counted in rollstat_http_connections_closed_total{reason=\"body_timeout\"}.",
            &refuse_reason::ALL,
        )?;
        let http_accept_errors = IntCounter::new(
            "rollstat_http_accept_errors_total",
            "Failed accepts on the HTTP listener (e.g. out of file descriptors), each followed by a back-off of up to 1 s.",
        )?;
        r.register(Box::new(http_accept_errors.clone()))?;
        let tcp_connections = IntGauge::new(
            "rollstat_tcp_connections",
            "Open statsd TCP connections (at most ingest.tcp_max_connections).",
        )?;
        r.register(Box::new(tcp_connections.clone()))?;
        let tcp_closed = ReasonCounters::register(
            &r,
            "rollstat_tcp_connections_closed_total",
            "statsd TCP connections the daemon closed or refused, by reason: connection_cap (beyond ingest.tcp_max_connections, closed at once), idle_timeout (nothing sent for ingest.tcp_idle_timeout_secs), source_not_allowed (a client address outside ingest.allowed_sources, closed at accept).",
            &close_reason::TCP,
        )?;
        let tcp_accept_errors = IntCounter::new(
            "rollstat_tcp_accept_errors_total",
            "Failed accepts on the statsd TCP listener (e.g. out of file descriptors), each followed by a back-off of up to 1 s.",
        )?;
        r.register(Box::new(tcp_accept_errors.clone()))?;
        let udp_dropped = ReasonCounters::register(
            &r,
            "rollstat_udp_datagrams_dropped_total",
            "statsd UDP datagrams a reader dropped unread, before parsing, by reason: source_not_allowed (a sender address outside ingest.allowed_sources). Not in rollstat_ingest_packets_total.",
            &udp_drop_reason::ALL,
        )?;
        // As Prometheus' own binaries publish `prometheus_build_info`: join
        // it on `instance` to see which build each instance runs.
        let build = IntGauge::with_opts(
            Opts::new(
                "rollstat_build_info",
                "A metric with a constant 1 value labelled by the version, git commit, rustc version and build profile rollstat was built from.",
            )
            .const_label("version", build::VERSION)
            .const_label("commit", build::COMMIT)
            .const_label("rustc", build::RUSTC)
            .const_label("profile", build::PROFILE),
        )?;
        build.set(1);
        r.register(Box::new(build))?;
        // process_*: CPU seconds, resident and virtual memory, open and
        // maximum file descriptors, start time, as every Prometheus
        // exporter publishes them (read from /proc at each scrape).
        r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        let task_panics = IntCounterVec::new(
            Opts::new(
                "rollstat_task_panics_total",
                "Panics of the daemon's background tasks, by task: sweep (idle series), tick (breakers), store_sync (shared windows), clock (the offset check), sighup_reload; and the statsd reader threads: udp_reader, unix_reader (restarted on the same socket). The task logs it and goes on at its next round; never expected.",
            ),
            &["task"],
        )?;
        for t in TASKS {
            task_panics.with_label_values(&[t]);
        }
        r.register(Box::new(task_panics.clone()))?;
        let clock_offset = prometheus::Gauge::new(
            "rollstat_clock_offset_seconds",
            "The wall clock minus the daemon's clock, in seconds, checked every second. The daemon's clock is the wall clock at start plus monotonic time since, so windows never jump; this moves when the wall clock is stepped (NTP, an operator), and a change of a second or more is logged.",
        )?;
        r.register(Box::new(clock_offset.clone()))?;
        let shutdown_drain_deadline = IntCounterVec::new(
            Opts::new(
                "rollstat_shutdown_drain_deadline_total",
                "Stop drains cut short by ingest.drain_timeout_ms, by transport (udp, unix, tcp): at stop, datagrams or bytes were still queued for that transport when the deadline passed, and were not applied. Counted once per transport per stop; the stop log says how much was drained and left.",
            ),
            &["transport"],
        )?;
        for t in ["udp", "unix", "tcp"] {
            shutdown_drain_deadline.with_label_values(&[t]);
        }
        r.register(Box::new(shutdown_drain_deadline.clone()))?;
        let relay = RelayFamilies::register(&r)?;
        Ok(Telemetry {
            relay,
            shutdown_drain_deadline,
            task_panics,
            clock_offset,
            registry: r,
            lines,
            packets,
            rejected,
            framing,
            skipped,
            dropped_by_mapping,
            reloads,
            reload_refusals,
            last_reload_success,
            scrape_duration,
            scrapes_rejected,
            scrape_series_left_out,
            udp_kernel_drops,
            udp_recv_buffer,
            udp_worker_queue_full,
            udp_worker_lost_lines,
            udp_routed_datagrams,
            http_connections,
            http_closed,
            http_refused,
            http_accept_errors,
            tcp_connections,
            tcp_closed,
            tcp_accept_errors,
            udp_dropped,
        })
    }

    /// Adds a worker's batch counts and zeroes them.
    pub fn flush(&self, t: Transport, c: &mut LocalCounts) {
        let i = t.index();
        if c.lines > 0 {
            self.lines[i].inc_by(c.lines);
        }
        if c.packets > 0 {
            self.packets[i].inc_by(c.packets);
        }
        for (n, ctr) in c.rejected.iter().zip(&self.rejected) {
            if *n > 0 {
                ctr.inc_by(*n);
            }
        }
        for (n, ctr) in c.framing.iter().zip(&self.framing) {
            if *n > 0 {
                ctr.inc_by(*n);
            }
        }
        for (n, ctr) in c.skipped.iter().zip(&self.skipped) {
            if *n > 0 {
                ctr.inc_by(*n);
            }
        }
        if c.dropped_by_mapping > 0 {
            self.dropped_by_mapping.inc_by(c.dropped_by_mapping);
        }
        *c = LocalCounts::default();
    }

    /// Lines accepted so far on `t` (for tests and the load tool).
    #[must_use]
    pub fn lines(&self, t: Transport) -> u64 {
        self.lines[t.index()].get()
    }
}

fn fam(name: &str, help: &str, t: MetricType, metrics: Vec<Metric>) -> MetricFamily {
    let mut f = MetricFamily::default();
    f.set_name(name.to_string());
    f.set_help(help.to_string());
    f.set_field_type(t);
    f.set_metric(metrics);
    f
}

fn counter_metric(v: f64, label: Option<(&str, &str)>) -> Metric {
    let mut c = Counter::default();
    c.set_value(v);
    let mut m = Metric::default();
    m.set_counter(c);
    if let Some((k, val)) = label {
        let mut l = LabelPair::default();
        l.set_name(k.to_string());
        l.set_value(val.to_string());
        m.set_label(vec![l]);
    }
    m
}

/// The series registry's own statistics, read at scrape time (the series
/// collector appends them: a registry takes one description-less collector).
#[must_use]
pub fn registry_families(series: &SeriesRegistry) -> Vec<MetricFamily> {
    use std::sync::atomic::Ordering::Relaxed;
    let c = &series.counters;
    let mut g = Gauge::default();
    g.set_value(series.len() as f64);
    let refused: Vec<Metric> = Refusal::ALL_REASONS
        .iter()
        .zip(&c.refused)
        .map(|(r, n)| counter_metric(n.load(Relaxed) as f64, Some(("reason", r))))
        .collect();
    let replanned: Vec<Metric> = Replanned::ALL_OUTCOMES
        .iter()
        .zip(&c.replanned)
        .map(|(o, n)| counter_metric(n.load(Relaxed) as f64, Some(("outcome", o))))
        .collect();
    vec![
            fam("rollstat_series", "Series held (name + tag set).", MetricType::GAUGE, vec![Metric::from_gauge(g)]),
            fam("rollstat_series_created_total", "Series created.", MetricType::COUNTER, vec![counter_metric(c.created.load(Relaxed) as f64, None)]),
            fam("rollstat_series_expired_total", "Series removed after their TTL without writes.", MetricType::COUNTER, vec![counter_metric(c.expired.load(Relaxed) as f64, None)]),
            fam("rollstat_series_tags_dropped_total", "Tags left out of a new series' labels because another tag on the line sanitised to the same label name (e.g. content-type and content_type).", MetricType::COUNTER, vec![counter_metric(c.tags_dropped.load(Relaxed) as f64, None)]),
            fam("rollstat_ingest_tags_dropped_total", "Tags left out of accepted lines, by reason: valueless (a tag without a value, |#canary or k=, under a statsd_exporter mapping file or cumulative_names = \"statsd_exporter\", as statsd_exporter leaves it out; otherwise such a tag is published as \"true\").", MetricType::COUNTER, vec![counter_metric(c.valueless_tags.load(Relaxed) as f64, Some(("reason", "valueless")))]),
        fam("rollstat_series_refused_total", "Lines refused by the series registry, by reason: type_conflict (the name belongs to another statsd type), series_cap (series.max_series), label_collision (another raw name or tag set publishes the same series), overflow (the line would make a stored number infinite), labels_too_large (series.max_label_bytes), metric_series_cap (series.max_series_per_metric).", MetricType::COUNTER, refused),
        fam("rollstat_series_negative_increments_total", "Counter lines with a negative increment (statsd decrement): folded into the windows (whose sums may go negative), left out of the cumulative _total, which only goes up.", MetricType::COUNTER, vec![counter_metric(c.negative_increments.load(Relaxed) as f64, None)]),
        fam("rollstat_series_replanned_total", "Existing series re-planned by config reloads, by outcome: kept (unchanged), rewindowed (new windows, cumulative values kept), removed (dropped, renamed or relabelled by the new rules).", MetricType::COUNTER, replanned),
        ]
    .into_iter()
    .chain(sketch_families())
    .collect()
}

/// The sketch budget's families (`[series] max_memory_bytes`): what the
/// quantile sketches and distinct counters hold, their limit, and the
/// values coarsened to stay under it.
fn sketch_families() -> Vec<MetricFamily> {
    use crate::sketch::budget::{self, Coarsened};
    // The process's budget (a unit test's own, on its thread).
    let b = budget::current();
    let gauge = |v: f64| {
        let mut g = Gauge::default();
        g.set_value(v);
        vec![Metric::from_gauge(g)]
    };
    let coarsened = [
        ("quantile", Coarsened::Quantile),
        ("distinct", Coarsened::Distinct),
    ]
    .iter()
    .map(|(k, c)| counter_metric(b.coarsened(*c) as f64, Some(("kind", k))))
    .collect();
    let mut out = vec![fam(
        "rollstat_sketch_memory_bytes",
        "Heap bytes the window buckets' quantile sketches and distinct counters hold.",
        MetricType::GAUGE,
        gauge(b.used() as f64),
    )];
    if let Some(limit) = b.limit() {
        out.push(fam("rollstat_sketch_memory_limit_bytes", "What the sketches may hold: series.max_memory_bytes less what series.max_series series need at their worst without sketches.", MetricType::GAUGE, gauge(limit as f64)));
    }
    out.push(fam("rollstat_sketch_coarsened_total", "Values that would have grown a sketch past rollstat_sketch_memory_limit_bytes, by kind: quantile (a timer, histogram or distribution value counted in the nearest bin the sketch has; sums, counts, min and max stay exact), distinct (a set member left out; the distinct count may be low).", MetricType::COUNTER, coarsened));
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_access_refusal_has_its_reason_in_the_refused_family() {
        use crate::access::Refusal;
        for r in [
            Refusal::GroupOff,
            Refusal::NoCredentials,
            Refusal::BadCredentials,
            Refusal::Host,
            Refusal::Origin,
        ] {
            assert!(refuse_reason::ALL.contains(&r.reason()), "{r:?}");
        }
    }

    use super::*;

    #[test]
    fn reject_reasons_are_the_parsers_then_the_json_samples_each_once() {
        let (parser, json) = REJECT_REASONS.split_at(ParseError::ALL_REASONS.len());
        assert_eq!(parser, ParseError::ALL_REASONS);
        assert_eq!(json, JsonSampleError::ALL_REASONS);
        let unique: std::collections::HashSet<_> = REJECT_REASONS.iter().collect();
        assert_eq!(unique.len(), REJECT_REASONS.len());
    }

    #[test]
    fn a_json_sample_rejection_is_counted_under_its_own_reason() {
        let mut c = LocalCounts::default();
        c.reject_json(JsonSampleError::ReservedCharacter);
        c.reject(ParseError::NonFiniteValue);
        let at = |r: &str| c.rejected[REJECT_REASONS.iter().position(|x| *x == r).unwrap()];
        assert_eq!((at("reserved_character"), at("non_finite_value")), (1, 1));
        assert_eq!(c.total_rejected(), 2);
    }
}
