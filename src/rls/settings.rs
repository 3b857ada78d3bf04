//! What `[rls]` and envoyproxy/ratelimit's YAML files configure: the
//! domains, their descriptor trees and the rate limit on each node, as
//! `config` reads them.

use std::path::PathBuf;
use std::time::Duration;

use crate::series::NamedWindow;
use crate::service::StoreFallback;
use crate::window::WindowSpec;

/// A rate limit's unit, with the numbers of
/// `envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateUnit {
    /// `SECOND` (1).
    Second,
    /// `MINUTE` (2).
    Minute,
    /// `HOUR` (3).
    Hour,
    /// `DAY` (4).
    Day,
    /// `WEEK` (7).
    Week,
    /// `MONTH` (5): 30 days, as envoyproxy/ratelimit counts it.
    Month,
}

impl RateUnit {
    /// Every unit, in the order of their length.
    pub const ALL: [RateUnit; 6] = [
        RateUnit::Second,
        RateUnit::Minute,
        RateUnit::Hour,
        RateUnit::Day,
        RateUnit::Week,
        RateUnit::Month,
    ];

    /// The sliding window a limit in this unit enforces.
    #[must_use]
    pub fn window(self) -> Duration {
        let day = 86_400;
        Duration::from_secs(match self {
            RateUnit::Second => 1,
            RateUnit::Minute => 60,
            RateUnit::Hour => 3_600,
            RateUnit::Day => day,
            RateUnit::Week => 7 * day,
            RateUnit::Month => 30 * day,
        })
    }

    /// The unit's name in the YAML files and the protobuf enum (`SECOND`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RateUnit::Second => "SECOND",
            RateUnit::Minute => "MINUTE",
            RateUnit::Hour => "HOUR",
            RateUnit::Day => "DAY",
            RateUnit::Week => "WEEK",
            RateUnit::Month => "MONTH",
        }
    }

    /// The number of the unit in the protobuf enum.
    #[must_use]
    pub fn number(self) -> i32 {
        match self {
            RateUnit::Second => 1,
            RateUnit::Minute => 2,
            RateUnit::Hour => 3,
            RateUnit::Day => 4,
            RateUnit::Month => 5,
            RateUnit::Week => 7,
        }
    }

    /// The unit of a protobuf enum number; `None` for `UNKNOWN` (0),
    /// `YEAR` (6, refused: see [`RateUnit::parse`]) and numbers not in the enum.
    #[must_use]
    pub fn from_number(n: i32) -> Option<RateUnit> {
        RateUnit::ALL.into_iter().find(|u| u.number() == n)
    }

    /// The unit named `s` in any case, as envoyproxy/ratelimit reads it
    /// (`second`, `Minute`, `HOUR`). `YEAR` is refused: a sliding window of
    /// a year would hold every admission for a year; a fixed yearly quota
    /// is not what rollstat's exact limits are for.
    #[must_use]
    pub fn parse(s: &str) -> Option<RateUnit> {
        RateUnit::ALL
            .into_iter()
            .find(|u| u.as_str().eq_ignore_ascii_case(s))
    }
}

/// A node's `rate_limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimitSpec {
    /// `requests_per_unit`: at most this many hits in any window of one
    /// `unit` (0 refuses every hit, as the reference service does).
    pub requests_per_unit: u32,
    /// `unit`; `None` exactly when `unlimited`.
    pub unit: Option<RateUnit>,
    /// `unlimited: true`: every hit passes (and is counted).
    pub unlimited: bool,
    /// `name`, answered as `current_limit.name` and used by `replaces`.
    pub name: Option<String>,
    /// `replaces: [{name}]`: the named limits this one stands in for when
    /// both apply to one request.
    pub replaces: Vec<String>,
}

/// One entry of a `descriptors` list, with the ones nested under it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescriptorRule {
    /// `key`.
    pub key: String,
    /// `value`, if given; one that contains `*` is a wildcard (each `*`
    /// matches any run of characters).
    pub value: Option<String>,
    /// `rate_limit`, if this node has one.
    pub rate_limit: Option<RateLimitSpec>,
    /// `shadow_mode`: decided and counted, but always answered OK.
    pub shadow_mode: bool,
    /// `detailed_metric`: the metrics name the request's own values.
    pub detailed_metric: bool,
    /// `value_to_metric`: the metrics name the request's value where this
    /// node matched it by its key alone or by a wildcard.
    pub value_to_metric: bool,
    /// `descriptors`: the nodes one entry deeper.
    pub descriptors: Vec<DescriptorRule>,
    /// The node's line in its file, for messages.
    pub line: usize,
}

/// One config file: a `domain` and its descriptor tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainRules {
    /// `domain`.
    pub domain: String,
    /// `descriptors`.
    pub descriptors: Vec<DescriptorRule>,
    /// The file it came from.
    pub file: PathBuf,
}

/// `[rls]`: Envoy's rate-limit service, on when `grpc` is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RlsSettings {
    /// `grpc`: where `envoy.service.ratelimit.v3.RateLimitService` and
    /// `grpc.health.v1.Health` listen (h2c).
    pub grpc: std::net::SocketAddr,
    /// `config_dir`: the directory of envoyproxy/ratelimit config files.
    pub config_dir: Option<PathBuf>,
    /// What those files hold, one domain each.
    pub domains: Vec<DomainRules>,
    /// `response_headers`: answer the IETF `RateLimit` and
    /// `RateLimit-Policy` fields of the descriptor closest to its limit.
    pub response_headers: bool,
    /// `max_keys`: distinct descriptor values each rule keeps history for.
    pub max_keys: usize,
    /// `max_descriptors`: descriptors in one request.
    pub max_descriptors: usize,
    /// `max_entries`: entries in one descriptor.
    pub max_entries: usize,
    /// `max_value_bytes`: bytes of one entry's key or value.
    pub max_value_bytes: usize,
    /// `max_request_bytes`: bytes of one encoded request.
    pub max_request_bytes: usize,
    /// `[rls.tls]`: the listener speaks TLS only, with these files.
    pub tls: Option<crate::tls::TlsConfig>,
    /// `shared`: every rule is decided in the `[redis]` store, one limit
    /// for the whole fleet.
    pub shared: bool,
    /// `on_store_error`: the answer while that store fails.
    pub on_store_error: StoreFallback,
    /// `approximate`: domains and rule paths (`edge`, `edge.api_key`)
    /// whose rules use the approximate sliding counter (a few integers per
    /// key) instead of the exact sliding log.
    pub approximate: Vec<String>,
    /// `max_detailed_series`: names of request values each rule with
    /// `detailed_metric` or `value_to_metric` counts its hits under.
    pub max_detailed_series: usize,
    /// The `[[windows]]` the hits' rates are read over.
    pub windows: Vec<NamedWindow>,
    /// What one client may hold of the listener (taken at start).
    pub listener: ListenerCaps,
}

/// The gRPC listener's caps and deadlines, read once at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerCaps {
    /// `max_connections`: connections served at once; one past it is sent
    /// a GOAWAY and closed (`connection_cap`).
    pub max_connections: usize,
    /// `max_streams_per_connection`: calls one connection may hold open
    /// (SETTINGS_MAX_CONCURRENT_STREAMS; more are refused with
    /// REFUSED_STREAM).
    pub max_streams_per_connection: u32,
    /// `call_timeout_ms`: the longest a call may take, past which it is
    /// answered with an error status.
    pub call_timeout: Duration,
    /// `handshake_timeout_ms`: the longest a new connection may take to
    /// finish its TLS handshake and send the HTTP/2 preface.
    pub handshake_timeout: Duration,
    /// `keepalive_interval_ms`: a connection that sent nothing this long is
    /// pinged.
    pub keepalive_interval: Duration,
    /// `keepalive_timeout_ms`: a ping unanswered this long closes the
    /// connection.
    pub keepalive_timeout: Duration,
    /// `max_connection_age_ms`: a connection this old is closed, calls in
    /// flight on it included; `None` (0, the default): never. What bounds
    /// a client that keeps its flow-control window shut (its answers held
    /// in the server until it closes).
    pub max_connection_age: Option<Duration>,
}

impl Default for ListenerCaps {
    fn default() -> ListenerCaps {
        ListenerCaps {
            max_connections: 1024,
            max_streams_per_connection: 256,
            call_timeout: Duration::from_secs(1),
            handshake_timeout: Duration::from_secs(10),
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            max_connection_age: None,
        }
    }
}

impl RlsSettings {
    /// The defaults, listening on `grpc`.
    #[must_use]
    pub fn new(grpc: std::net::SocketAddr) -> RlsSettings {
        RlsSettings {
            grpc,
            config_dir: None,
            domains: Vec::new(),
            response_headers: false,
            max_keys: 100_000,
            max_descriptors: 64,
            max_entries: 16,
            max_value_bytes: 1024,
            max_request_bytes: 65_536,
            tls: None,
            shared: false,
            on_store_error: StoreFallback::Local,
            approximate: Vec::new(),
            max_detailed_series: 1000,
            windows: vec![NamedWindow {
                name: "10s".into(),
                // 10 x 1 s is a valid shape (the built-in series window).
                spec: WindowSpec::new(10, Duration::from_secs(1))
                    .unwrap_or_else(|_| unreachable!()),
            }],
            listener: ListenerCaps::default(),
        }
    }
}
