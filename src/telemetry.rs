//! Self-metrics: every drop and error is a named, counted event. Every
//! family is declared once, in [`crate::family::table`]; this file
//! registers them ([`Telemetry::new`]) and reads the registry's at scrape
//! time.
//!
//! Ingest workers count into a plain [`LocalCounts`] per batch and flush it
//! with a handful of atomic adds, so the hot path never touches a label map.
//! Values the registry already keeps (series, created, expired, refused) are
//! read at scrape time by [`registry_families`], which the series collector
//! appends to every scrape.

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{Histogram, IntCounter, IntCounterVec, IntGauge, Registry};

use crate::family::table as t;
use crate::family::{counter, gauge, pair, Family};
use crate::otlp::Reject;
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
    /// OTLP data points, over HTTP or gRPC.
    Otlp,
}

impl Transport {
    /// All transports, in label order.
    pub const ALL: [Transport; 5] = [
        Transport::Udp,
        Transport::Tcp,
        Transport::Unix,
        Transport::Http,
        Transport::Otlp,
    ];

    /// The `transport` label.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Unix => "unix",
            Transport::Http => "http",
            Transport::Otlp => "otlp",
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

/// Why the OTLP/gRPC listener refused or closed a connection
/// (`rollstat_otlp_grpc_refused_total{reason}`), as the rate-limit
/// service's gRPC listener counts them.
pub const GRPC_CONNECTION_REASONS: [&str; 6] = [
    "tls_handshake",
    "connection_cap",
    "preface_timeout",
    "bad_preface",
    "connection_age",
    "busy",
];

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
    /// `POST /v1/metrics` (OTLP) with a body that does not decode as an
    /// `ExportMetricsServiceRequest` in its Content-Type's encoding: 400.
    pub const BAD_OTLP: &str = "bad_otlp";
    /// `POST /v1/metrics` while OTLP requests were applied in every slot
    /// for a second: 429 with `Retry-After: 1`.
    pub const OTLP_BUSY: &str = "otlp_busy";
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
    pub const ALL: [&str; 20] = [
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
        BAD_OTLP,
        OTLP_BUSY,
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
        family: &Family,
        reasons: &'static [&'static str],
    ) -> prometheus::Result<ReasonCounters> {
        Ok(ReasonCounters {
            reasons,
            counters: counter_values(r, family, reasons)?,
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
/// ([`JsonSampleError::ALL_REASONS`]), then OTLP data points'
/// ([`Reject::ALL_REASONS`]). A fixed list: all exist at 0.
pub const REJECT_REASONS: [&str; REJECT_COUNT] = {
    let mut out = [""; REJECT_COUNT];
    let mut i = 0;
    let lists: [&[&str]; 3] = [
        &ParseError::ALL_REASONS,
        &JsonSampleError::ALL_REASONS,
        &Reject::ALL_REASONS,
    ];
    let mut l = 0;
    while l < lists.len() {
        let mut j = 0;
        while j < lists[l].len() {
            out[i] = lists[l][j];
            i += 1;
            j += 1;
        }
        l += 1;
    }
    out
};

const REJECT_COUNT: usize =
    ParseError::ALL_REASONS.len() + JsonSampleError::ALL_REASONS.len() + Reject::ALL_REASONS.len();

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

    /// Counts one OTLP data point refused.
    pub fn reject_point(&mut self, r: Reject) {
        if let Some(i) = REJECT_REASONS.iter().position(|x| *x == r.reason()) {
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
    /// `rollstat_otlp_streams`.
    pub otlp_streams: IntGauge,
    /// `rollstat_otlp_stream_resets_total`.
    pub otlp_stream_resets: IntCounter,
    /// `rollstat_otlp_grpc_connections`.
    pub otlp_grpc_connections: IntGauge,
    /// `rollstat_otlp_grpc_refused_total{reason}`.
    pub otlp_grpc_refused: ReasonCounters,
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
        Ok(RelayFamilies {
            lines_sent: add(r, t::RELAY_LINES_SENT_TOTAL.int_counter_vec()?)?,
            datagrams_sent: add(r, t::RELAY_DATAGRAMS_SENT_TOTAL.int_counter_vec()?)?,
            bytes_sent: add(r, t::RELAY_BYTES_SENT_TOTAL.int_counter_vec()?)?,
            dropped: add(r, t::RELAY_LINES_DROPPED_TOTAL.int_counter_vec()?)?,
            buffered: add(r, t::RELAY_BUFFERED_BYTES.int_gauge_vec()?)?,
            connected: add(r, t::RELAY_CONNECTED.int_gauge_vec()?)?,
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
pub const TASKS: [&str; 8] = [
    "sweep",
    "tick",
    "store_sync",
    "clock",
    "sighup_reload",
    "output",
    "udp_reader",
    "unix_reader",
];

/// Registers `c` in `r`.
fn add<C: Collector + Clone + 'static>(r: &Registry, c: C) -> prometheus::Result<C> {
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

/// The counters of a one-label `family` under each of `values`, created
/// at zero.
fn counter_values(
    r: &Registry,
    family: &Family,
    values: &[&str],
) -> prometheus::Result<Vec<IntCounter>> {
    let v = add(r, family.int_counter_vec()?)?;
    values
        .iter()
        .map(|x| v.get_metric_with_label_values(&[x]))
        .collect()
}

/// A labelled counter family with each of `values` created at zero.
fn counters_at_zero(
    r: &Registry,
    family: &Family,
    values: &[&str],
) -> prometheus::Result<IntCounterVec> {
    let v = add(r, family.int_counter_vec()?)?;
    for x in values {
        v.with_label_values(&[x]);
    }
    Ok(v)
}

/// `rollstat_build_info` and the `process_*` families.
fn register_process(r: &Registry) -> prometheus::Result<()> {
    // As Prometheus' own binaries publish `prometheus_build_info`: join
    // it on `instance` to see which build each instance runs.
    let info = [build::VERSION, build::COMMIT, build::RUSTC, build::PROFILE];
    let build = add(r, t::BUILD_INFO.const_gauge(&info)?)?;
    build.set(1);
    // process_*: CPU seconds, resident and virtual memory, open and
    // maximum file descriptors, start time, as every Prometheus
    // exporter publishes them (read from /proc at each scrape).
    r.register(Box::new(
        prometheus::process_collector::ProcessCollector::for_self(),
    ))
}

/// Bounds of `rollstat_scrape_duration_seconds` (seconds).
const SCRAPE_BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];

impl Telemetry {
    /// Registers every self-metric ([`crate::family::table`]), with all
    /// label values at zero.
    pub fn new() -> prometheus::Result<Telemetry> {
        let r = Registry::new();
        let transports: Vec<&str> = Transport::ALL.iter().map(|x| x.as_str()).collect();
        let last_reload_success = add(&r, t::CONFIG_LAST_RELOAD_SUCCESS.int_gauge()?)?;
        last_reload_success.set(1);
        register_process(&r)?;
        Ok(Telemetry {
            lines: counter_values(&r, &t::INGEST_LINES_TOTAL, &transports)?,
            packets: counter_values(&r, &t::INGEST_PACKETS_TOTAL, &transports)?,
            rejected: counter_values(&r, &t::INGEST_REJECTED_LINES_TOTAL, &REJECT_REASONS)?,
            framing: counter_values(&r, &t::INGEST_FRAMING_ERRORS_TOTAL, &FRAMING_REASONS)?,
            skipped: counter_values(&r, &t::INGEST_SKIPPED_LINES_TOTAL, &SkipKind::ALL_REASONS)?,
            dropped_by_mapping: add(&r, t::INGEST_DROPPED_BY_MAPPING_TOTAL.int_counter()?)?,
            reloads: counters_at_zero(&r, &t::CONFIG_RELOADS_TOTAL, &["ok", "error"])?,
            // Its reasons are published at 0 by the reloader (src/reload.rs).
            reload_refusals: add(&r, t::CONFIG_RELOAD_REFUSALS_TOTAL.int_counter_vec()?)?,
            last_reload_success,
            scrape_duration: add(
                &r,
                t::SCRAPE_DURATION_SECONDS.histogram(SCRAPE_BUCKETS.to_vec())?,
            )?,
            scrapes_rejected: add(&r, t::SCRAPES_REJECTED_TOTAL.int_counter()?)?,
            scrape_series_left_out: add(&r, t::SCRAPE_SERIES_LEFT_OUT_TOTAL.int_counter()?)?,
            udp_kernel_drops: add(&r, t::UDP_KERNEL_DROPS.int_gauge()?)?,
            udp_recv_buffer: add(&r, t::UDP_RECEIVE_BUFFER_BYTES.int_gauge()?)?,
            udp_worker_queue_full: add(&r, t::UDP_WORKER_QUEUE_FULL_TOTAL.int_counter()?)?,
            udp_worker_lost_lines: add(&r, t::UDP_WORKER_LOST_LINES_TOTAL.int_counter()?)?,
            udp_routed_datagrams: add(&r, t::UDP_ROUTED_DATAGRAMS_TOTAL.int_counter()?)?,
            udp_dropped: ReasonCounters::register(
                &r,
                &t::UDP_DATAGRAMS_DROPPED_TOTAL,
                &udp_drop_reason::ALL,
            )?,
            http_connections: add(&r, t::HTTP_CONNECTIONS.int_gauge()?)?,
            http_closed: ReasonCounters::register(
                &r,
                &t::HTTP_CONNECTIONS_CLOSED_TOTAL,
                &close_reason::HTTP,
            )?,
            http_refused: ReasonCounters::register(
                &r,
                &t::HTTP_REQUESTS_REFUSED_TOTAL,
                &refuse_reason::ALL,
            )?,
            http_accept_errors: add(&r, t::HTTP_ACCEPT_ERRORS_TOTAL.int_counter()?)?,
            tcp_connections: add(&r, t::TCP_CONNECTIONS.int_gauge()?)?,
            tcp_closed: ReasonCounters::register(
                &r,
                &t::TCP_CONNECTIONS_CLOSED_TOTAL,
                &close_reason::TCP,
            )?,
            tcp_accept_errors: add(&r, t::TCP_ACCEPT_ERRORS_TOTAL.int_counter()?)?,
            task_panics: counters_at_zero(&r, &t::TASK_PANICS_TOTAL, &TASKS)?,
            clock_offset: add(&r, t::CLOCK_OFFSET_SECONDS.gauge()?)?,
            shutdown_drain_deadline: counters_at_zero(
                &r,
                &t::SHUTDOWN_DRAIN_DEADLINE_TOTAL,
                &["udp", "unix", "tcp"],
            )?,
            relay: RelayFamilies::register(&r)?,
            otlp_streams: add(&r, t::OTLP_STREAMS.int_gauge()?)?,
            otlp_stream_resets: add(&r, t::OTLP_STREAM_RESETS_TOTAL.int_counter()?)?,
            otlp_grpc_connections: add(&r, t::OTLP_GRPC_CONNECTIONS.int_gauge()?)?,
            otlp_grpc_refused: ReasonCounters::register(
                &r,
                &t::OTLP_GRPC_REFUSED_TOTAL,
                &GRPC_CONNECTION_REASONS,
            )?,
            registry: r,
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

/// An unlabelled counter sample, or one with the label `k` = `v`.
fn counter_of(n: u64, label: Option<(&str, &str)>) -> prometheus::proto::Metric {
    let labels = label.map(|(k, v)| vec![pair(k, v)]).unwrap_or_default();
    counter(labels, n as f64)
}

/// An unlabelled gauge sample.
fn gauge_of(v: f64) -> Vec<prometheus::proto::Metric> {
    vec![gauge(Vec::new(), v)]
}

/// The series registry's own statistics, read at scrape time (the series
/// collector appends them: a registry takes one description-less collector).
#[must_use]
pub fn registry_families(series: &SeriesRegistry) -> Vec<MetricFamily> {
    use std::sync::atomic::Ordering::Relaxed;
    let c = &series.counters;
    let one = |n: &std::sync::atomic::AtomicU64| vec![counter_of(n.load(Relaxed), None)];
    let refused = Refusal::ALL_REASONS
        .iter()
        .zip(&c.refused)
        .map(|(r, n)| counter_of(n.load(Relaxed), Some(("reason", r))))
        .collect();
    let replanned = Replanned::ALL_OUTCOMES
        .iter()
        .zip(&c.replanned)
        .map(|(o, n)| counter_of(n.load(Relaxed), Some(("outcome", o))))
        .collect();
    let valueless = counter_of(
        c.valueless_tags.load(Relaxed),
        Some(("reason", "valueless")),
    );
    vec![
        t::SERIES.of(gauge_of(series.len() as f64)),
        t::SERIES_CREATED_TOTAL.of(one(&c.created)),
        t::SERIES_EXPIRED_TOTAL.of(one(&c.expired)),
        t::SERIES_TAGS_DROPPED_TOTAL.of(one(&c.tags_dropped)),
        t::INGEST_TAGS_DROPPED_TOTAL.of(vec![valueless]),
        t::SERIES_REFUSED_TOTAL.of(refused),
        t::SERIES_NEGATIVE_INCREMENTS_TOTAL.of(one(&c.negative_increments)),
        t::SERIES_REPLANNED_TOTAL.of(replanned),
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
    let coarsened = [
        ("quantile", Coarsened::Quantile),
        ("distinct", Coarsened::Distinct),
    ]
    .iter()
    .map(|(k, c)| counter_of(b.coarsened(*c), Some(("kind", k))))
    .collect();
    let mut out = vec![t::SKETCH_MEMORY_BYTES.of(gauge_of(b.used() as f64))];
    if let Some(limit) = b.limit() {
        out.push(t::SKETCH_MEMORY_LIMIT_BYTES.of(gauge_of(limit as f64)));
    }
    out.push(t::SKETCH_COARSENED_TOTAL.of(coarsened));
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
        let (parser, rest) = REJECT_REASONS.split_at(ParseError::ALL_REASONS.len());
        let (json, otlp) = rest.split_at(JsonSampleError::ALL_REASONS.len());
        assert_eq!(parser, ParseError::ALL_REASONS);
        assert_eq!(json, JsonSampleError::ALL_REASONS);
        assert_eq!(otlp, Reject::ALL_REASONS);
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
