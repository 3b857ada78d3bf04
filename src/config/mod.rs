//! The daemon's configuration: `config.toml` in, typed values out.
//!
//! Two stages, as in ripgrep's low/high args: `reader` walks the TOML tree
//! with its byte spans and turns every key into a typed value or a
//! [`ConfigProblem`] naming the key and the line; [`Config::parse`] gathers
//! **all** problems before failing, so an operator fixes a file in one pass.
//! Unknown keys are problems. The sample `config.toml` at the repository root
//! documents every key, and a test loads it.

mod access;
pub mod exposure;
pub mod file;
mod go_regex;
mod go_template;
mod reader;
mod redis;
mod relay;
pub mod relay_loop;
mod signals;
mod sources;
pub mod statsd_exporter;
mod tls;
pub mod web;
mod yaml;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use self::redis::read_redis;
pub use self::redis::{
    redact_url, redact_urls_in, ClientIdentity, Password, PemFile, RedisConfig, RedisTarget,
    RedisTls, Secret,
};
pub use reader::ConfigProblem;
use reader::{Problems, Table};
pub use relay::{RelayDef, RelayProtocol, MAX_RELAY_DATAGRAM};
pub use signals::{
    BreakerDef, BreakerInputs, BreakerKind, LimitAlgorithm, LimitDef, OutcomeTag, StoreFallback,
};
pub use sources::{AllowedSources, SourceNet, SourceNetError};
pub use tls::{ClientAuth, TlsConfig, TlsVersion};

use crate::access::Access;
use crate::mapping::{Glob, Matcher, NameRegex, Template};
use crate::parse::{MetricKind, TagStyles};
use crate::window::WindowSpec;

/// Everything the daemon needs, validated.
#[derive(Clone, Debug)]
pub struct Config {
    /// Sockets to listen on.
    pub listen: Listen,
    /// Ingest limits.
    pub ingest: Ingest,
    /// HTTP connection deadlines and caps.
    pub http: HttpLimits,
    /// Series lifetime, cap and published statistics.
    pub series: SeriesConfig,
    /// Default windows kept for every series (at least one).
    pub windows: Vec<NamedWindow>,
    /// Mapping rules, first match wins.
    pub mappings: Vec<Mapping>,
    /// Circuit breakers fed by outcomes.
    pub breakers: Vec<BreakerDef>,
    /// Keyed sliding-window rate limits.
    pub limits: Vec<LimitDef>,
    /// The shared store, if `[redis]` is given.
    pub redis: Option<RedisConfig>,
    /// `[statsd_exporter] mapping_file`, if given: its rules are at the end
    /// of [`mappings`](Self::mappings).
    pub statsd_exporter: Option<StatsdExporterFile>,
    /// `[statsd_exporter] cumulative_names = "statsd_exporter"`: the
    /// cumulative families named as statsd_exporter names them.
    pub exporter_names: bool,
    /// Other statsd servers accepted lines are copied to (`[[relay]]`).
    pub relays: Vec<RelayDef>,
}

impl Config {
    /// statsd_exporter's compatibility mode: a statsd_exporter mapping file
    /// or its names (`cumulative_names = "statsd_exporter"`). Lines are then
    /// read as statsd_exporter reads them where rollstat's own rule differs:
    /// a tag without a value is left out, and a name with a lone SignalFx
    /// bracket is the whole name.
    #[must_use]
    pub fn exporter_compatible(&self) -> bool {
        self.exporter_names || self.statsd_exporter.is_some()
    }

    /// A `[[mappings]]` rule's `ttl_secs` shorter than one of its windows:
    /// accepted, its series living until that window has drained (the
    /// mapping file's rules say so in their own warnings, with the file's
    /// line).
    #[must_use]
    pub fn ttl_warnings(&self) -> Vec<String> {
        let own = self.mappings.len() - self.statsd_exporter.as_ref().map_or(0, |f| f.rules);
        self.mappings[..own]
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let ids = m
                    .windows
                    .clone()
                    .unwrap_or_else(|| (0..self.windows.len()).collect());
                let note = ttl_note(m.ttl?, ids.iter().map(|&w| &self.windows[w]))?;
                Some(format!(
                    "[[mappings]] #{} (match `{}`): ttl_secs = {}",
                    i + 1,
                    m.pattern.as_str(),
                    note
                ))
            })
            .collect()
    }
}

/// `[statsd_exporter] mapping_file`, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatsdExporterFile {
    /// The file, as given.
    pub path: PathBuf,
    /// How many rules it holds (the last ones of [`Config::mappings`]).
    pub rules: usize,
    /// What it means that rollstat does differently (for check-config).
    pub warnings: Vec<String>,
}

/// The statsd types a mapping rule matches (`match_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindSet(u8);

impl KindSet {
    /// Timers, histograms and distributions: statsd_exporter's `observer`.
    pub const OBSERVER: KindSet = KindSet(
        1 << MetricKind::Timer as u8
            | 1 << MetricKind::Histogram as u8
            | 1 << MetricKind::Distribution as u8,
    );

    /// No type.
    pub const EMPTY: KindSet = KindSet(0);

    /// Just `k`.
    #[must_use]
    pub const fn one(k: MetricKind) -> KindSet {
        KindSet(1 << k as u8)
    }

    /// This set and `k`.
    #[must_use]
    pub const fn with(self, k: MetricKind) -> KindSet {
        KindSet(self.0 | 1 << k as u8)
    }

    /// Whether `k` is in the set.
    #[must_use]
    pub const fn contains(self, k: MetricKind) -> bool {
        self.0 & (1 << k as u8) != 0
    }

    /// The `match_type` value that names this set.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        if self == KindSet::OBSERVER {
            return "observer";
        }
        MetricKind::ALL
            .into_iter()
            .find(|&k| self == KindSet::one(k))
            .map_or("observer", MetricKind::as_str)
    }
}

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

/// `[http]`: deadlines on every phase of an HTTP connection, and caps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Open HTTP connections at most; a client beyond it gets `503` and its
    /// connection closed, counted (`reason="connection_cap"`).
    pub max_connections: usize,
    /// From accept (a new connection) or from the first byte of a request
    /// (a kept-alive one) until the request's head is complete.
    pub header_timeout: Duration,
    /// From the end of the head until the whole request body has arrived.
    pub body_timeout: Duration,
    /// A kept-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// A response write that makes no progress for this long (the client
    /// stopped reading) closes the connection.
    pub write_timeout: Duration,
    /// A response that holds a slot (a `/metrics` scrape, a registry read)
    /// is sent within this, or its connection is closed and the slot freed;
    /// a scrape uses the scraper's own `X-Prometheus-Scrape-Timeout-Seconds`
    /// when it sends one.
    pub response_timeout: Duration,
    /// `GET /api/v1/series` and `/api/v1/metrics` running at once; more get
    /// `503` with `Retry-After: 1`.
    pub max_concurrent_api_reads: usize,
    /// Who may use which routes (`[http.auth.*]`), and the Host and Origin
    /// rules (`allowed_hosts`, `allowed_origins`). Unlike the rest of
    /// `[http]`, taken at every reload.
    pub access: Access,
    /// `[http.tls]`: HTTPS only, with these files; `None`: plain HTTP.
    pub tls: Option<TlsConfig>,
    /// `web_config_file`: an exporter-toolkit web config file, read as it
    /// is. Its `basic_auth_users` are in `access` already; its TLS part is
    /// here.
    pub web: Option<web::WebConfig>,
}

/// `[series]`.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesConfig {
    /// A series not written for this long is removed.
    pub ttl: Duration,
    /// At most this many series; new ones beyond it are refused and counted.
    pub max_series: usize,
    /// At most this many series of one published metric name; `None`: only
    /// `max_series` applies.
    pub max_series_per_metric: Option<usize>,
    /// Most bytes of labels (names and values, after mapping) a new series
    /// may have.
    pub max_label_bytes: usize,
    /// Quantiles published for timers, histograms and distributions.
    pub quantiles: Vec<f64>,
    /// Upper bounds of the cumulative Prometheus histogram buckets for timers
    /// (seconds), histograms and distributions.
    pub histogram_buckets: Vec<f64>,
    /// Native (exponential) histograms beside the classic buckets, served
    /// over protobuf: the bucket growth factor (`0`: none), the most
    /// populated buckets before the resolution halves, and which statsd
    /// types get one.
    pub native_histograms: NativeHistograms,
    /// `name_escaping = "as_asked"` (true, the default): names escaped as
    /// each scraper's `Accept` asks (Prometheus 3: UTF-8 names as sent);
    /// `"underscores"` (false): today's sanitised names for every scraper.
    pub names_as_asked: bool,
    /// `max_memory_bytes`: what the registry may hold in all (series,
    /// windows, sketches); the sketches get what `max_series` series at
    /// their worst leave of it. `None`: half of the machine's memory, as
    /// the daemon finds it at start.
    pub max_memory_bytes: Option<u64>,
}

/// `[series] native_histogram_*`: what a series of one of `types` gets
/// unless its mapping rule says otherwise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NativeHistograms {
    /// Each bucket's upper bound is at most this many times its lower
    /// bound (the schema is the largest whose factor does not exceed it);
    /// `0`: no native histograms.
    pub bucket_factor: f64,
    /// Populated buckets at most; past it the resolution halves.
    pub max_buckets: u32,
    /// The statsd types that get one (timers, histograms, distributions).
    pub types: KindSet,
}

impl NativeHistograms {
    /// Off unless configured (as statsd_exporter: a factor of 0); 160
    /// buckets (statsd_exporter's starter config, OpenTelemetry's and
    /// Mimir's default); every observer type.
    pub const DEFAULT: NativeHistograms = NativeHistograms {
        bucket_factor: 0.0,
        max_buckets: 160,
        types: KindSet::OBSERVER,
    };
}

impl Config {
    /// What `check-config` says of the names on `/metrics`.
    #[must_use]
    pub fn names_summary(&self) -> &'static str {
        if self.exporter_names {
            "names on /metrics: statsd_exporter's, escaped with underscores for every scraper ([statsd_exporter] cumulative_names)"
        } else if self.series.names_as_asked {
            "names on /metrics: as each scraper asks (Prometheus 3: UTF-8 names and tag keys as sent; set series.name_escaping = \"underscores\" to keep the sanitised ones)"
        } else {
            "names on /metrics: sanitised (underscores) for every scraper (series.name_escaping)"
        }
    }

    /// What `check-config` says of native histograms: which types get one,
    /// at which schema and bucket limit, and how many rules set their own.
    #[must_use]
    pub fn native_histograms_summary(&self) -> String {
        let n = &self.series.native_histograms;
        let own = self
            .mappings
            .iter()
            .filter(|m| m.native_bucket_factor.is_some() || m.native_max_buckets.is_some())
            .count();
        let rules = match own {
            0 => String::new(),
            1 => "; 1 mapping rule sets its own".to_string(),
            k => format!("; {k} mapping rules set their own"),
        };
        let types: Vec<&str> = MetricKind::ALL
            .into_iter()
            .filter(|k| n.types.contains(*k))
            .map(MetricKind::as_str)
            .collect();
        match crate::sketch::native::schema_for_factor(n.bucket_factor) {
            Some(schema) => format!(
                "native histograms (protobuf scrapes): {} at schema {schema} (bucket factor {}), at most {} buckets{rules}",
                types.join(", "),
                n.bucket_factor,
                n.max_buckets
            ),
            None => format!("native histograms: off (series.native_histogram_bucket_factor = 0){rules}"),
        }
    }
}

/// Largest `native_histogram_max_buckets`: schema 8 over the whole range
/// of a double would need far more, but a series this wide costs ~512 KiB
/// already; "no limit" is not offered, since one sender could then grow a
/// single series without bound.
pub const MAX_NATIVE_BUCKETS: u64 = 32_768;

/// One `[[windows]]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedWindow {
    /// The `window` label value, e.g. `10s`.
    pub name: String,
    /// Buckets, interval, ignore-current.
    pub spec: WindowSpec,
}

/// What a matching mapping rule does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Keep the series (possibly renamed, relabelled, with its own windows).
    Keep,
    /// Drop matching lines (counted as `dropped_by_mapping`).
    Drop,
}

/// One `[[mappings]]` rule.
#[derive(Clone, Debug)]
pub struct Mapping {
    /// What the statsd name must match: a glob (`match`: `*` within one
    /// dot-separated component, `**` across components) or a regex anchored
    /// to the whole name (`match_regex`); captures are `$1`, `$2`... and, for
    /// a regex's named groups, `${name}`.
    pub pattern: Matcher,
    /// Only lines of these statsd types match, if set (`match_type`: one
    /// type, or `observer` for timers, histograms and distributions).
    pub match_type: Option<KindSet>,
    /// Keep or drop.
    pub action: Action,
    /// New statsd name (the `metric` label and the cumulative family name).
    pub rename: Option<Template>,
    /// Extra labels, values may use captures.
    pub labels: Vec<(String, Template)>,
    /// Indices into [`Config::windows`] kept for matching series, if set.
    pub windows: Option<Vec<usize>>,
    /// Matching series also publish a fleet view of their windows, merged
    /// through the shared store (`[redis]`).
    pub shared: bool,
    /// A tag named like one of `labels` keeps its value (statsd_exporter's
    /// `honor_labels`); otherwise the mapping label replaces it.
    pub honor_labels: bool,
    /// The series' own expiry instead of `[series] ttl_secs`; zero: never.
    pub ttl: Option<Duration>,
    /// The series' cumulative histogram bounds instead of `[series]
    /// histogram_buckets`.
    pub histogram_buckets: Option<std::sync::Arc<[f64]>>,
    /// Values are multiplied by this (statsd_exporter's `scale`), after a
    /// timer's milliseconds become seconds.
    pub scale: Option<f64>,
    /// The HELP text of the series' cumulative family.
    pub help: Option<std::sync::Arc<str>>,
    /// Timers, histograms and distributions published as a Prometheus
    /// summary instead of a histogram (`observer = "summary"`).
    pub summary: Option<std::sync::Arc<SummarySpec>>,
    /// The series' native histogram bucket factor instead of `[series]
    /// native_histogram_bucket_factor` (`0`: none), for a timer, histogram
    /// or distribution whatever `native_histogram_types` says.
    pub native_bucket_factor: Option<f64>,
    /// The series' `native_histogram_max_buckets`.
    pub native_max_buckets: Option<u32>,
}

/// A cumulative family published as a Prometheus summary, as
/// statsd_exporter's default observer does: quantiles over the last
/// `max_age` (in `age_buckets` streams, as the Go client keeps them:
/// [`AgedSummary`](crate::window::summary::AgedSummary)), each within its
/// objective's rank error; `_sum` and `_count` since the series was born.
#[derive(Clone, Debug, PartialEq)]
pub struct SummarySpec {
    /// The published quantiles, each in (0, 1).
    pub quantiles: Vec<f64>,
    /// Each quantile's rank error (its objective's `error`), in `[0, 1)`.
    pub errors: Vec<f64>,
    /// `max_age` as written (the window's length is this split into whole
    /// nanosecond buckets, which may round it down).
    pub max_age: Duration,
    /// The streams' count and how often the oldest is emptied.
    pub window: WindowSpec,
    /// Values batched before they are merged into the streams
    /// (statsd_exporter's `buf_cap`; a scrape sees them all either way).
    pub buf_cap: usize,
}

/// The Go client's batch of values before a merge (`DefBufCap`), which
/// statsd_exporter takes when `buf_cap` is unset or 0.
pub const DEFAULT_SUMMARY_BUF_CAP: usize = 500;

/// The most values a summary batches (`buf_cap`, either form of a mapping).
pub const MAX_SUMMARY_BUF_CAP: usize = 100_000;

impl SummarySpec {
    /// statsd_exporter's defaults: 0.5 (error 0.05), 0.9 (0.01), 0.99
    /// (0.001) over 10 minutes in 5 buckets, batches of 500.
    #[must_use]
    pub fn exporter_default() -> SummarySpec {
        SummarySpec::new(
            &[(0.5, 0.05), (0.9, 0.01), (0.99, 0.001)],
            Duration::from_secs(600),
            5,
            DEFAULT_SUMMARY_BUF_CAP,
        )
        .unwrap_or_else(|_| unreachable!("valid constants"))
    }

    /// `objectives` (quantile, rank error) over `max_age` in `age_buckets`
    /// buckets, merged in batches of `buf_cap` (0: the default).
    ///
    /// # Errors
    ///
    /// Why the window cannot be built (a bucket shorter than 1 ms...).
    pub fn new(
        objectives: &[(f64, f64)],
        max_age: Duration,
        age_buckets: usize,
        buf_cap: usize,
    ) -> Result<Self, String> {
        let interval = max_age / u32::try_from(age_buckets.max(1)).map_err(|e| e.to_string())?;
        let window = WindowSpec::new(age_buckets, interval).map_err(|e| e.to_string())?;
        if max_age > MAX_SUMMARY_AGE {
            return Err(format!(
                "max_age {}s is more than {}s (100 years)",
                max_age.as_secs(),
                MAX_SUMMARY_AGE.as_secs()
            ));
        }
        if max_age.subsec_nanos() % 1_000_000 != 0 {
            return Err(format!(
                "max_age {max_age:?} is not a whole number of milliseconds"
            ));
        }
        if let Some((q, e)) = objectives.iter().find(|(_, e)| !(0.0..1.0).contains(e)) {
            return Err(format!(
                "quantile {q}: error {e} is not a rank error in [0, 1)"
            ));
        }
        if buf_cap > MAX_SUMMARY_BUF_CAP {
            return Err(format!(
                "buf_cap {buf_cap} is more than {MAX_SUMMARY_BUF_CAP}"
            ));
        }
        Ok(SummarySpec {
            quantiles: objectives.iter().map(|o| o.0).collect(),
            errors: objectives.iter().map(|o| o.1).collect(),
            max_age,
            window,
            buf_cap: if buf_cap == 0 {
                DEFAULT_SUMMARY_BUF_CAP
            } else {
                buf_cap
            },
        })
    }

    /// The rank error the streams keep: the smallest an objective asks
    /// (0 when there are none: exact).
    #[must_use]
    pub fn epsilon(&self) -> f64 {
        self.errors.iter().copied().reduce(f64::min).unwrap_or(0.0)
    }
}

/// The longest summary `max_age` either form of a mapping takes (100
/// years): the same bound for a statsd_exporter file's `max_age` and
/// config.toml's `summary_max_age_secs` / `summary_max_age_ms`.
pub const MAX_SUMMARY_AGE: Duration = Duration::from_secs(100 * 365 * 86_400);

/// All the problems found in a config file.
#[derive(Debug, Clone)]
pub struct ConfigError {
    /// The file, if the config came from one.
    pub path: Option<PathBuf>,
    /// Every problem, in file order.
    pub problems: Vec<ConfigProblem>,
    /// Why a file was refused before it was read, as the stable reason of
    /// `rollstat_config_reload_refusals_total` ([`file::FileError::reason`],
    /// [`budget::Refusal::reason`](yaml::budget::Refusal::reason)); `None`
    /// when every file was read and the problems are in what they say.
    pub refusal: Option<&'static str>,
}

impl ConfigError {
    /// The stable reason a reload counts this error under: the refusal of
    /// a file, or `invalid` (the files were read; what they say is wrong).
    #[must_use]
    pub fn reason(&self) -> &'static str {
        self.refusal.unwrap_or("invalid")
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "config".to_string());
        write!(f, "{} problem(s) in {file}:", self.problems.len())?;
        for p in &self.problems {
            write!(f, "\n  {file}: {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

const LISTEN_KEYS: &[&str] = &[
    "statsd_udp",
    "statsd_tcp",
    "statsd_unix",
    "http",
    "statsd_unix_mode",
    "statsd_unix_group",
];
const INGEST_KEYS: &[&str] = &[
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
const HTTP_KEYS: &[&str] = &[
    "max_connections",
    "header_timeout_ms",
    "body_timeout_ms",
    "idle_timeout_ms",
    "write_timeout_ms",
    "response_timeout_ms",
    "max_concurrent_api_reads",
    "allowed_hosts",
    "allowed_origins",
    "auth",
    "tls",
    "web_config_file",
];
const SERIES_KEYS: &[&str] = &[
    "ttl_secs",
    "max_series",
    "max_series_per_metric",
    "max_label_bytes",
    "quantiles",
    "histogram_buckets",
    "native_histogram_bucket_factor",
    "native_histogram_max_buckets",
    "native_histogram_types",
    "name_escaping",
    "max_memory_bytes",
];
const WINDOW_KEYS: &[&str] = &["name", "buckets", "interval_ms", "ignore_current"];
const MAPPING_KEYS: &[&str] = &[
    "match",
    "match_regex",
    "match_type",
    "action",
    "rename",
    "labels",
    "windows",
    "shared",
    "honor_labels",
    "ttl_secs",
    "histogram_buckets",
    "scale",
    "help",
    "observer",
    "summary_quantiles",
    "summary_errors",
    "summary_max_age_secs",
    "summary_max_age_ms",
    "summary_buf_cap",
    "summary_age_buckets",
    "native_histogram_bucket_factor",
    "native_histogram_max_buckets",
];
const STATSD_EXPORTER_KEYS: &[&str] = &["mapping_file", "cumulative_names"];
const TOP_KEYS: &[&str] = &[
    "listen",
    "ingest",
    "http",
    "series",
    "windows",
    "mappings",
    "breakers",
    "limits",
    "redis",
    "statsd_exporter",
    "relay",
];
const REDIS_KEYS: &[&str] = &[
    "url",
    "cluster_nodes",
    "timeout_ms",
    "sync_interval_ms",
    "sync_timeout_ms",
    "final_sync_timeout_ms",
    "key_prefix",
    "username",
    "password_file",
    "password_env",
    "ca_file",
    "client_cert_file",
    "client_key_file",
    "max_shared_series",
    "max_shared_label_bytes",
];

/// Prometheus' default histogram buckets (seconds).
pub const DEFAULT_HISTOGRAM_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

impl Default for Listen {
    fn default() -> Self {
        Listen {
            statsd_udp: Some(SocketAddr::from(([127, 0, 0, 1], 8125))),
            statsd_tcp: Some(SocketAddr::from(([127, 0, 0, 1], 8125))),
            statsd_unix: None,
            http: SocketAddr::from(([127, 0, 0, 1], 9102)),
            statsd_unix_mode: DEFAULT_UNIX_MODE,
            statsd_unix_group: None,
        }
    }
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

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(75),
            write_timeout: Duration::from_secs(30),
            response_timeout: Duration::from_secs(60),
            max_concurrent_api_reads: 4,
            access: Access::default(),
            tls: None,
            web: None,
        }
    }
}

impl Default for SeriesConfig {
    fn default() -> Self {
        SeriesConfig {
            ttl: Duration::from_secs(600),
            max_series: 100_000,
            max_series_per_metric: None,
            max_label_bytes: 2048,
            quantiles: vec![0.5, 0.9, 0.99],
            histogram_buckets: DEFAULT_HISTOGRAM_BUCKETS.to_vec(),
            native_histograms: NativeHistograms::DEFAULT,
            names_as_asked: true,
            max_memory_bytes: None,
        }
    }
}

impl Default for Config {
    /// The built-in defaults: listeners on loopback, one `10s` window of ten
    /// 1 s buckets, no mappings.
    fn default() -> Self {
        Config {
            listen: Listen::default(),
            ingest: Ingest::default(),
            http: HttpLimits::default(),
            series: SeriesConfig::default(),
            windows: vec![default_window()],
            mappings: Vec::new(),
            breakers: Vec::new(),
            limits: Vec::new(),
            redis: None,
            statsd_exporter: None,
            exporter_names: false,
            relays: Vec::new(),
        }
    }
}

fn default_window() -> NamedWindow {
    NamedWindow {
        name: "10s".to_string(),
        // 10 x 1 s is a valid shape.
        spec: WindowSpec::new(10, Duration::from_secs(1)).unwrap_or_else(|_| unreachable!()),
    }
}

impl Config {
    /// Reads and validates the config at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let src = file::read_text(path).map_err(|e| ConfigError {
            path: Some(path.to_path_buf()),
            refusal: Some(e.reason()),
            problems: vec![ConfigProblem {
                line: 0,
                key: "(file)".to_string(),
                message: format!("cannot read the file: {e}; check the path given to --config"),
            }],
        })?;
        Config::parse(&src).map_err(|mut e| {
            e.path = Some(path.to_path_buf());
            e
        })
    }

    /// Parses and validates config text, reporting every problem at once.
    pub fn parse(src: &str) -> Result<Config, ConfigError> {
        let mut p = Problems::new(src);
        let doc = match toml::de::DeTable::parse(src) {
            Ok(doc) => doc,
            Err(e) => {
                let line = e.span().map(|s| p.line_of(s.start)).unwrap_or(0);
                // The toml crate's own nesting cap (its only error that
                // says "recursion").
                let deep = e.message().contains("recursion");
                let message = if deep {
                    format!("{}: arrays and inline tables nest too deeply here; rollstat refuses the file before reading it", e.message())
                } else {
                    e.message().to_string()
                };
                return Err(ConfigError {
                    path: None,
                    problems: vec![ConfigProblem {
                        line,
                        key: "(syntax)".to_string(),
                        message,
                    }],
                    refusal: Some(if deep { "too_deep" } else { "syntax" }),
                });
            }
        };
        let mut top = Table::new(doc.get_ref(), "", 0);
        let mut cfg = Config::default();

        if let Some(mut t) = top.table(&mut p, "listen") {
            let addr = |t: &mut Table<'_, '_>,
                        p: &mut Problems<'_>,
                        key: &str,
                        current: Option<SocketAddr>| {
                match t.string(p, key) {
                    None => current,
                    Some((s, _)) if s.is_empty() => None,
                    Some((s, off)) => match s.parse::<SocketAddr>() {
                        Ok(a) => Some(a),
                        Err(_) => {
                            p.at(off, &t.key_path(key), format!("`{s}` is not an IP:port address (e.g. \"127.0.0.1:8125\"; \"\" turns it off)"));
                            current
                        }
                    },
                }
            };
            cfg.listen.statsd_udp = addr(&mut t, &mut p, "statsd_udp", cfg.listen.statsd_udp);
            cfg.listen.statsd_tcp = addr(&mut t, &mut p, "statsd_tcp", cfg.listen.statsd_tcp);
            match addr(&mut t, &mut p, "http", Some(cfg.listen.http)) {
                Some(a) => cfg.listen.http = a,
                None => p.at(
                    t.start(),
                    &t.key_path("http"),
                    "the HTTP listener cannot be turned off: /metrics lives there",
                ),
            }
            if let Some((s, off)) = t.string(&mut p, "statsd_unix") {
                cfg.listen.statsd_unix = (!s.is_empty()).then(|| PathBuf::from(&s));
                if let Some(problem) = cfg.listen.statsd_unix.as_deref().and_then(unix_dir_problem)
                {
                    p.at(off, &t.key_path("statsd_unix"), problem);
                }
            }
            if let Some(mode) = read_unix_mode(&mut t, &mut p) {
                cfg.listen.statsd_unix_mode = mode;
            }
            cfg.listen.statsd_unix_group = read_unix_group(&mut t, &mut p);
            t.finish(&mut p, LISTEN_KEYS);
        }

        if let Some(mut t) = top.table(&mut p, "ingest") {
            let i = &mut cfg.ingest;
            if let Some(n) = t.int(&mut p, "udp_readers", 1, 64) {
                i.udp_readers = n as usize;
            }
            if let Some(n) = t.int(&mut p, "udp_workers", 0, 64) {
                i.udp_workers = n as usize;
            }
            if let Some(n) = t.int(&mut p, "udp_recv_buffer_bytes", 4096, 1 << 30) {
                i.udp_recv_buffer_bytes = n as usize;
            }
            if let Some(n) = t.int(&mut p, "tcp_max_connections", 1, 1_000_000) {
                i.tcp_max_connections = n as usize;
            }
            if let Some(n) = t.int(&mut p, "tcp_idle_timeout_secs", 1, 7 * 86_400) {
                i.tcp_idle_timeout = Duration::from_secs(n);
            }
            if let Some(n) = t.int(&mut p, "max_line_bytes", 64, 16 << 20) {
                i.max_line_bytes = n as usize;
            }
            if let Some(n) = t.int(&mut p, "http_max_body_bytes", 1024, 1 << 30) {
                i.http_max_body_bytes = n as usize;
            }
            if let Some(n) = t.int(&mut p, "drain_timeout_ms", 1, 600_000) {
                i.drain_timeout = Duration::from_millis(n);
            }
            if let Some(names) = t.strings(&mut p, "tag_styles") {
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
            if let Some(entries) = t.strings(&mut p, "allowed_sources") {
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
            t.finish(&mut p, INGEST_KEYS);
        }

        if let Some(mut t) = top.table(&mut p, "http") {
            let h = &mut cfg.http;
            if let Some(n) = t.int(&mut p, "max_connections", 1, 1_000_000) {
                h.max_connections = n as usize;
            }
            for (key, field) in [
                ("header_timeout_ms", &mut h.header_timeout),
                ("body_timeout_ms", &mut h.body_timeout),
                ("idle_timeout_ms", &mut h.idle_timeout),
                ("write_timeout_ms", &mut h.write_timeout),
                ("response_timeout_ms", &mut h.response_timeout),
            ] {
                if let Some(ms) = t.int(&mut p, key, 1, 3_600_000) {
                    *field = Duration::from_millis(ms);
                }
            }
            if let Some(n) = t.int(&mut p, "max_concurrent_api_reads", 1, 1024) {
                h.max_concurrent_api_reads = n as usize;
            }
            let web_at = t.raw("web_config_file").map(|v| v.span().start);
            h.web = web::read_web_config(&mut t, &mut p);
            access::read_access(&mut t, &mut p, &mut h.access, h.web.as_ref());
            let tls_table = t.table(&mut p, "tls");
            let tls_at = tls_table.as_ref().map(Table::start);
            if let Some(mut tt) = tls_table {
                h.tls = tls::read_tls(&mut tt, &mut p);
                tt.finish(&mut p, tls::TLS_KEYS);
            }
            // A web config's tls_server_config is the listener's TLS, as
            // for exporter-toolkit; with [http.tls] too, which one wins
            // would be a guess.
            if let Some(wt) = h.web.as_ref().and_then(|w| w.tls.as_ref()) {
                match tls_at {
                    Some(at) => p.at(
                        at.max(web_at.unwrap_or(0)),
                        &t.key_path("tls"),
                        "both [http.tls] and the tls_server_config of http.web_config_file set the listener's TLS; keep one",
                    ),
                    None => h.tls = Some(wt.tls_config()),
                }
            }
            t.finish(&mut p, HTTP_KEYS);
        }

        // Where `ttl_secs` is, to name it if it is shorter than a window.
        let mut ttl_at = None;
        if let Some(mut t) = top.table(&mut p, "series") {
            let s = &mut cfg.series;
            ttl_at = t
                .raw("ttl_secs")
                .map(|v| (v.span().start, t.key_path("ttl_secs")));
            if let Some(n) = t.int(&mut p, "ttl_secs", 1, 30 * 86_400) {
                s.ttl = Duration::from_secs(n);
            }
            if let Some(n) = t.int(&mut p, "max_series", 1, 100_000_000) {
                s.max_series = n as usize;
            }
            if let Some(n) = t.int(&mut p, "max_series_per_metric", 1, 100_000_000) {
                s.max_series_per_metric = Some(n as usize);
            }
            if let Some(n) = t.int(&mut p, "max_label_bytes", 64, 1 << 20) {
                s.max_label_bytes = n as usize;
            }
            if let Some(n) = t.int(&mut p, "max_memory_bytes", 1 << 24, 1 << 50) {
                s.max_memory_bytes = Some(n);
            }
            if let Some(qs) = t.floats(&mut p, "quantiles") {
                let mut ok = Vec::new();
                for (q, off) in qs {
                    if q > 0.0 && q < 1.0 {
                        ok.push(q);
                    } else {
                        p.at(off, "series.quantiles", format!("{q} is not a quantile: use values strictly between 0 and 1 (min and max are published anyway)"));
                    }
                }
                ok.sort_by(f64::total_cmp);
                ok.dedup();
                s.quantiles = ok;
            }
            if let Some(bs) = t.floats(&mut p, "histogram_buckets") {
                let vals: Vec<f64> = bs.iter().map(|(b, _)| *b).collect();
                if vals.is_empty() || vals.windows(2).any(|w| w[0] >= w[1]) {
                    let off = bs.first().map(|b| b.1).unwrap_or(t.start());
                    p.at(off, "series.histogram_buckets", "must be a non-empty list of strictly increasing upper bounds (e.g. [0.01, 0.1, 1, 10])");
                } else {
                    s.histogram_buckets = vals;
                }
            }
            if let Some(f) = native_factor(&mut t, &mut p) {
                s.native_histograms.bucket_factor = f;
            }
            if let Some(n) = t.int(
                &mut p,
                "native_histogram_max_buckets",
                1,
                MAX_NATIVE_BUCKETS,
            ) {
                s.native_histograms.max_buckets = n as u32;
            }
            if let Some(types) = t.strings(&mut p, "native_histogram_types") {
                let mut set = KindSet::EMPTY;
                for (name, off) in types {
                    match MetricKind::ALL.into_iter().find(|k| k.as_str() == name) {
                        Some(k) if KindSet::OBSERVER.contains(k) => set = set.with(k),
                        _ => p.at(
                            off,
                            "series.native_histogram_types",
                            format!("`{name}` cannot have a native histogram; the types that can are timer, histogram and distribution"),
                        ),
                    }
                }
                s.native_histograms.types = set;
            }
            if let Some((v, off)) = t.string(&mut p, "name_escaping") {
                match v.as_str() {
                    "as_asked" => s.names_as_asked = true,
                    "underscores" => s.names_as_asked = false,
                    other => p.at(
                        off,
                        "series.name_escaping",
                        format!("`{other}` is not a choice: \"as_asked\" (names as each scraper asks, UTF-8 for Prometheus 3) or \"underscores\" (the sanitised names for every scraper)"),
                    ),
                }
            }
            t.finish(&mut p, SERIES_KEYS);
        }

        let window_tables = top.tables(&mut p, "windows");
        if !window_tables.is_empty() {
            cfg.windows.clear();
        }
        let mut seen_names: Vec<String> = Vec::new();
        for mut t in window_tables {
            let name = t.string(&mut p, "name");
            let buckets = t.int(&mut p, "buckets", 1, 100_000);
            let interval = t.int(&mut p, "interval_ms", 1, 86_400_000);
            let ignore = t.bool(&mut p, "ignore_current").unwrap_or(false);
            let start = t.start();
            let path = t.key_path("");
            t.finish(&mut p, WINDOW_KEYS);
            let Some((name, name_off)) = name else {
                p.at(
                    start,
                    &format!("{path}name"),
                    "every window needs a name, its `window` label (e.g. \"10s\")",
                );
                continue;
            };
            if !valid_label_value(&name) {
                p.at(
                    name_off,
                    &format!("{path}name"),
                    "use a short name of letters, digits, '_', '.' or '-' (e.g. \"10s\")",
                );
                continue;
            }
            if seen_names.contains(&name) {
                p.at(
                    name_off,
                    &format!("{path}name"),
                    format!("window name `{name}` is used twice; names must be unique"),
                );
                continue;
            }
            seen_names.push(name.clone());
            let (Some(buckets), Some(interval)) = (buckets, interval) else {
                if buckets.is_none() && interval.is_none() {
                    p.at(
                        start,
                        &format!("{path}buckets"),
                        "every window needs `buckets` and `interval_ms`",
                    );
                }
                continue;
            };
            match WindowSpec::new(buckets as usize, Duration::from_millis(interval)) {
                Ok(spec) => cfg.windows.push(NamedWindow {
                    name,
                    spec: spec.ignore_current(ignore),
                }),
                Err(e) => p.at(start, &format!("{path}buckets"), e.to_string()),
            }
        }

        // A series that expires while a window still holds its samples
        // would lose them from that window, and its counter would restart at
        // 0 while the window still showed its increments.
        if let Some(longest) = cfg.windows.iter().max_by_key(|w| w.spec.length()) {
            if cfg.series.ttl < longest.spec.length() {
                let (off, key) = ttl_at.unwrap_or((0, "series.ttl_secs".to_string()));
                p.at(
                    off,
                    &key,
                    format!(
                        "{}s is shorter than window `{}` ({}s): a series would expire while the window still holds its samples; set ttl_secs to at least {}",
                        cfg.series.ttl.as_secs(),
                        longest.name,
                        longest.spec.length().as_secs_f64(),
                        longest.spec.length().as_secs_f64().ceil(),
                    ),
                );
            }
        }

        if let Some(mut t) = top.table(&mut p, "redis") {
            cfg.redis = read_redis(&mut t, &mut p);
            t.finish(&mut p, REDIS_KEYS);
        }
        for mut t in top.tables(&mut p, "mappings") {
            if let Some(m) = read_mapping(&mut t, &mut p, &cfg.windows, cfg.redis.is_some()) {
                cfg.mappings.push(m);
            }
            t.finish(&mut p, MAPPING_KEYS);
        }
        if let Some(mut t) = top.table(&mut p, "statsd_exporter") {
            if let Some((names, off)) = t.string(&mut p, "cumulative_names") {
                match names.as_str() {
                    "rollstat" => {}
                    "statsd_exporter" => cfg.exporter_names = true,
                    _ => p.at(
                        off,
                        &t.key_path("cumulative_names"),
                        format!("unknown naming `{names}`; use \"rollstat\" (the default) or \"statsd_exporter\""),
                    ),
                }
            }
            if let Some((file, rules)) = read_exporter_file(&mut t, &mut p, &cfg.windows) {
                cfg.statsd_exporter = Some(StatsdExporterFile {
                    path: file,
                    rules: rules.rules.len(),
                    warnings: rules.warnings.clone(),
                });
                for r in &rules.rules {
                    // Each compiled when read (`read_exporter_file`).
                    if let Ok(m) = r.to_mapping() {
                        cfg.mappings.push(m);
                    }
                }
            }
            t.finish(&mut p, STATSD_EXPORTER_KEYS);
        }

        let mut names = Vec::new();
        for mut t in top.tables(&mut p, "breakers") {
            if let Some(b) = signals::read_breaker(&mut t, &mut p, &mut names) {
                cfg.breakers.push(b);
            }
            t.finish(&mut p, signals::BREAKER_KEYS);
        }
        let mut names = Vec::new();
        for mut t in top.tables(&mut p, "limits") {
            if let Some(l) = signals::read_limit(&mut t, &mut p, &mut names, cfg.redis.is_some()) {
                cfg.limits.push(l);
            }
            t.finish(&mut p, signals::LIMIT_KEYS);
        }
        let mut names = Vec::new();
        for mut t in top.tables(&mut p, "relay") {
            if let Some(r) = relay::read_relay(&mut t, &mut p, &mut names) {
                cfg.relays.push(r);
            }
            t.finish(&mut p, relay::RELAY_KEYS);
        }
        // A relay to this daemon's own listener, as far as the file tells
        // (check-config and the start resolve names too).
        p.list.extend(relay_loop::problems(
            &cfg.relays,
            &relay_loop::own_listeners(&cfg.listen),
            &relay_loop::known_addresses,
            &relay_loop::surely_local,
        ));

        top.finish(&mut p, TOP_KEYS);
        if p.list.is_empty() {
            Ok(cfg)
        } else {
            p.list.sort_by_key(|x| x.line);
            Err(ConfigError {
                path: None,
                problems: p.list,
                refusal: p.refusal,
            })
        }
    }
}

fn read_mapping(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    windows: &[NamedWindow],
    redis_configured: bool,
) -> Option<Mapping> {
    let start = t.start();
    let pattern = match read_matcher(t, p) {
        Ok(Some(m)) => Some(m),
        Err(()) => None,
        Ok(None) => {
            p.at(
                start,
                &t.key_path("match"),
                "every mapping needs a `match` glob (e.g. \"api.*.requests\") or a `match_regex` (e.g. \"api\\\\.(\\\\w+)\\\\.requests\")",
            );
            None
        }
    };
    let match_type = t.string(p, "match_type").and_then(|(s, off)| {
        if s == "observer" {
            return Some(KindSet::OBSERVER);
        }
        let k = MetricKind::ALL.into_iter().find(|k| k.as_str() == s);
        if k.is_none() {
            let names: Vec<&str> = MetricKind::ALL.iter().map(|k| k.as_str()).collect();
            p.at(
                off,
                &t.key_path("match_type"),
                format!(
                    "unknown statsd type `{s}`; use one of {}, or observer (timer, histogram and distribution)",
                    names.join(", ")
                ),
            );
        }
        k.map(KindSet::one)
    });
    let action = match t.string(p, "action") {
        None => Action::Keep,
        Some((s, _)) if s == "keep" => Action::Keep,
        Some((s, _)) if s == "drop" => Action::Drop,
        Some((s, off)) => {
            p.at(
                off,
                &t.key_path("action"),
                format!("unknown action `{s}`; use \"keep\" or \"drop\""),
            );
            Action::Keep
        }
    };
    let template = |p: &mut Problems<'_>, key: &str, s: &str, off: usize| {
        let compiled = match &pattern {
            Some(m) => m.template(s),
            // The pattern's own problem is reported already: check only the
            // template's syntax, not its captures, to avoid a cascade.
            None => Template::compile(s, usize::MAX, "pattern", |_| Some(1)),
        };
        compiled.map_err(|e| p.at(off, key, e.to_string())).ok()
    };
    let rename = t
        .string(p, "rename")
        .and_then(|(s, off)| template(p, &t.key_path("rename"), &s, off));
    let mut labels = Vec::new();
    if let Some(mut lt) = t.table(p, "labels") {
        for (k, v, off) in lt.string_pairs(p) {
            if !crate::names::is_valid_label_name(&k) {
                p.at(
                    off,
                    &lt.key_path(&k),
                    "not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)",
                );
                continue;
            }
            if k.starts_with("__") {
                p.at(
                    off,
                    &lt.key_path(&k),
                    "label names starting with `__` are reserved for Prometheus' own use; pick another name",
                );
                continue;
            }
            if crate::names::RESERVED_LABELS.contains(&k.as_str()) {
                p.at(
                    off,
                    &lt.key_path(&k),
                    format!(
                        "`{k}` is a label rollstat sets itself ({}); pick another name",
                        crate::names::RESERVED_LABELS.join(", ")
                    ),
                );
                continue;
            }
            if let Some(tpl) = template(p, &lt.key_path(&k), &v, off) {
                labels.push((k, tpl));
            }
        }
        lt.finish(p, &[]);
    }
    let windows_sel = t.strings(p, "windows").map(|names| {
        names
            .into_iter()
            .filter_map(|(n, off)| {
                let i = windows.iter().position(|w| w.name == n);
                if i.is_none() {
                    let known: Vec<&str> = windows.iter().map(|w| w.name.as_str()).collect();
                    p.at(
                        off,
                        &t.key_path("windows"),
                        format!("no window named `{n}`; defined: {}", known.join(", ")),
                    );
                }
                i
            })
            .collect::<Vec<_>>()
    });
    let shared_off = t.raw("shared").map(|v| v.span().start);
    let shared = t.bool(p, "shared").unwrap_or(false);
    if let (true, false, Some(off)) = (shared, redis_configured, shared_off) {
        p.at(
            off,
            &t.key_path("shared"),
            "a shared mapping needs a `[redis]` section (url = \"redis://127.0.0.1:6379\" or cluster_nodes = [...])",
        );
    }
    let honor_labels = t.bool(p, "honor_labels").unwrap_or(false);
    // A TTL shorter than a window is a warning (`Config::ttl_warnings`):
    // the series lives until its longest window has drained.
    let ttl = t
        .int(p, "ttl_secs", 0, 10 * 365 * 86_400)
        .map(Duration::from_secs);
    let histogram_buckets = t.floats(p, "histogram_buckets").and_then(|bs| {
        let vals: Vec<f64> = bs.iter().map(|(b, _)| *b).collect();
        if vals.is_empty() || vals.windows(2).any(|w| w[0] >= w[1]) {
            let off = bs.first().map_or(start, |b| b.1);
            p.at(
                off,
                &t.key_path("histogram_buckets"),
                "must be a non-empty list of strictly increasing upper bounds (e.g. [0.01, 0.1, 1, 10])",
            );
            None
        } else {
            Some(vals.into())
        }
    });
    let scale = t.float(p, "scale", f64::MIN_POSITIVE, f64::MAX);
    let help = t.string(p, "help").and_then(|(h, off)| {
        if h.contains('\n') || h.len() > 1024 {
            p.at(off, &t.key_path("help"), "one line of at most 1024 bytes");
            None
        } else {
            Some(h.into())
        }
    });
    let summary = read_summary(t, p);
    let native_bucket_factor = native_factor(t, p);
    let native_max_buckets = t
        .int(p, "native_histogram_max_buckets", 1, MAX_NATIVE_BUCKETS)
        .map(|n| n as u32);
    Some(Mapping {
        native_bucket_factor,
        native_max_buckets,
        shared,
        pattern: pattern?,
        match_type,
        action,
        rename,
        labels,
        windows: windows_sel,
        honor_labels,
        ttl,
        histogram_buckets,
        scale,
        help,
        summary,
    })
}

/// `native_histogram_bucket_factor` of `[series]` or a rule: `0` (none) or
/// a factor above 1 (up to 65536, where the coarsest schema, -4, already
/// applies).
fn native_factor(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<f64> {
    let key = "native_histogram_bucket_factor";
    let off = t.raw(key).map(|v| v.span().start)?;
    let f = t.float(p, key, 0.0, 65_536.0)?;
    if f != 0.0 && f <= 1.0 {
        p.at(
            off,
            &t.key_path(key),
            format!("{f} is not a growth factor: use a number above 1 (1.1: each bucket at most 10% wider than the one below) or 0 for no native histograms"),
        );
        return None;
    }
    Some(f)
}

/// A rule's `observer` and `summary_*` keys.
fn read_summary(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
) -> Option<std::sync::Arc<SummarySpec>> {
    // Every key is read before any problem returns, so that none of them
    // is then reported as unknown.
    let observer = t.string(p, "observer");
    let quantiles = t.floats(p, "summary_quantiles");
    let errors = t.floats(p, "summary_errors");
    let buf_cap = t.int(p, "summary_buf_cap", 0, MAX_SUMMARY_BUF_CAP as u64);
    let age_buckets = t.int(p, "summary_age_buckets", 1, 1000);
    let max_secs = MAX_SUMMARY_AGE.as_secs();
    let max_age = match (
        t.int(p, "summary_max_age_secs", 1, max_secs),
        t.int(p, "summary_max_age_ms", 1, max_secs * 1000),
    ) {
        (Some(_), Some(_)) => {
            p.at(
                t.start(),
                &t.key_path("summary_max_age_ms"),
                "set summary_max_age_secs or summary_max_age_ms, not both",
            );
            return None;
        }
        (Some(s), None) => Some(Duration::from_secs(s)),
        (None, ms) => ms.map(Duration::from_millis),
    };
    let summary = match &observer {
        None => false,
        Some((o, _)) if o == "histogram" => false,
        Some((o, _)) if o == "summary" => true,
        Some((o, off)) => {
            p.at(
                *off,
                &t.key_path("observer"),
                format!("unknown observer `{o}`; use \"histogram\" (the default) or \"summary\""),
            );
            false
        }
    };
    if !summary {
        if let Some(off) = [
            "summary_quantiles",
            "summary_errors",
            "summary_buf_cap",
            "summary_max_age_secs",
            "summary_max_age_ms",
            "summary_age_buckets",
        ]
        .iter()
        .find_map(|k| t.raw(k).map(|v| v.span().start))
        {
            p.at(
                off,
                &t.key_path("observer"),
                "summary_* keys need observer = \"summary\"",
            );
        }
        return None;
    }
    let d = SummarySpec::exporter_default();
    let qs: Vec<f64> = match quantiles {
        None => d.quantiles.clone(),
        Some(qs) => {
            let bad = qs.iter().find(|(q, _)| !(*q > 0.0 && *q < 1.0));
            if let Some((q, off)) = bad {
                p.at(
                    *off,
                    &t.key_path("summary_quantiles"),
                    format!("{q} is not strictly between 0 and 1"),
                );
                return None;
            }
            qs.into_iter().map(|(q, _)| q).collect()
        }
    };
    let objectives = summary_objectives(t, p, &qs, errors, &d)?;
    let age = max_age.unwrap_or(d.max_age);
    let buckets = age_buckets.map_or(d.window.size(), |b| b as usize);
    let buf_cap = buf_cap.map_or(d.buf_cap, |b| b as usize);
    match SummarySpec::new(&objectives, age, buckets, buf_cap) {
        Ok(s) => Some(std::sync::Arc::new(s)),
        Err(e) => {
            p.at(t.start(), &t.key_path("summary_max_age_secs"), e);
            None
        }
    }
}

/// Pairs `summary_quantiles` with `summary_errors` (one each, in order).
/// Without `summary_errors`: statsd_exporter's errors for its default
/// quantiles, else 0.001 for each.
fn summary_objectives(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    qs: &[f64],
    errors: Option<Vec<(f64, usize)>>,
    d: &SummarySpec,
) -> Option<Vec<(f64, f64)>> {
    let Some(errors) = errors else {
        let default_error = |q: f64| {
            d.quantiles
                .iter()
                .position(|&dq| dq == q)
                .map_or(DEFAULT_SUMMARY_ERROR, |i| d.errors[i])
        };
        return Some(qs.iter().map(|&q| (q, default_error(q))).collect());
    };
    if errors.len() != qs.len() {
        let off = errors.first().map_or(t.start(), |e| e.1);
        p.at(
            off,
            &t.key_path("summary_errors"),
            format!(
                "{} errors for {} quantiles: give one rank error per quantile, in order",
                errors.len(),
                qs.len()
            ),
        );
        return None;
    }
    if let Some((e, off)) = errors.iter().find(|(e, _)| !(0.0..1.0).contains(e)) {
        p.at(
            *off,
            &t.key_path("summary_errors"),
            format!("{e} is not a rank error in [0, 1) (0.01: within 1% of the values' ranks)"),
        );
        return None;
    }
    Some(qs.iter().copied().zip(errors.iter().map(|e| e.0)).collect())
}

/// A quantile's rank error in config.toml when `summary_errors` is not
/// given and statsd_exporter's defaults name none for it.
pub const DEFAULT_SUMMARY_ERROR: f64 = 0.001;

/// `match` (a glob) or `match_regex` (a regex anchored to the whole name),
/// never both: `Ok(None)` when neither is given, `Err(())` when the one
/// given is refused (the problem recorded with its key and line).
pub(super) fn read_matcher(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
) -> Result<Option<Matcher>, ()> {
    match (t.string(p, "match"), t.string(p, "match_regex")) {
        (None, None) => Ok(None),
        (Some((s, off)), None) => Glob::new(&s)
            .map(|g| Some(Matcher::Glob(g)))
            .map_err(|e| p.at(off, &t.key_path("match"), e.to_string())),
        (None, Some((s, off))) => {
            NameRegex::new(&s)
                .map(|r| Some(Matcher::Regex(r)))
                .map_err(|e| {
                    // The crate's message may draw a caret under the pattern over
                    // several lines: keep them, indented under the problem.
                    let e = e.to_string().replace('\n', "\n      ");
                    p.at(
                        off,
                        &t.key_path("match_regex"),
                        format!("invalid regex: {e}"),
                    );
                })
        }
        (Some(_), Some((_, off))) => {
            p.at(
                off,
                &t.key_path("match_regex"),
                "give `match` (a glob) or `match_regex` (a regex), not both",
            );
            Err(())
        }
    }
}

/// Why a series' own `ttl` cannot go with its windows: it would expire
/// while a window still holds its samples. Zero (never expire) always can.
pub(crate) fn ttl_note<'w>(
    ttl: Duration,
    windows: impl Iterator<Item = &'w NamedWindow>,
) -> Option<String> {
    let longest = windows.max_by_key(|w| w.spec.length())?;
    (!ttl.is_zero() && ttl < longest.spec.length()).then(|| {
        format!(
            "{}s is shorter than window `{}` ({}s): its series expire when they have been idle that long, once the window has drained, not after {}s (every family, cumulative and windowed, goes together)",
            ttl.as_secs_f64(),
            longest.name,
            longest.spec.length().as_secs_f64(),
            ttl.as_secs_f64(),
        )
    })
}

/// `[statsd_exporter] mapping_file`: the file read and its rules compiled
/// (on the default windows); `None` when unset or when it has problems
/// (recorded, each with the file's line).
fn read_exporter_file(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    windows: &[NamedWindow],
) -> Option<(PathBuf, statsd_exporter::ExporterRules)> {
    let off = t.raw("mapping_file").map_or(t.start(), |v| v.span().start);
    let key = t.key_path("mapping_file");
    let (path, rules) =
        yaml::read_named_file(t, p, "mapping_file", |text, _| statsd_exporter::parse(text))?;
    let mut ok = true;
    let mut rules = rules;
    let mut notes = Vec::new();
    for r in &rules.rules {
        if let Err(e) = r.to_mapping() {
            p.at(off, &key, format!("{path}:{}: `name, labels`: {e}", r.line));
            ok = false;
        }
        let note = r.ttl.and_then(|ttl| ttl_note(ttl, windows.iter()));
        if let (Some(n), Some((line, k))) = (note, &r.ttl_at) {
            let n = format!("line {line}: `{k}`: {n}");
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
    }
    rules.warnings.extend(notes);
    ok.then_some((PathBuf::from(path), rules))
}

/// Why the Unix socket cannot be made at `path`, judged from its directory
/// (the socket itself may exist: a stale one is replaced at start).
fn unix_dir_problem(path: &Path) -> Option<String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.file_name().is_none() {
        return Some(format!(
            "`{}` names no file; give the socket's path, e.g. \"/run/rollstat/statsd.sock\"",
            path.display()
        ));
    }
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => None,
        Ok(_) => Some(format!("`{}` is not a directory", dir.display())),
        Err(e) => Some(format!(
            "its directory `{}` cannot be used: {e}; create it (systemd: RuntimeDirectory=rollstat) or choose another path",
            dir.display()
        )),
    }
}

/// `listen.statsd_unix_mode`: an octal string (`"0660"`, `"660"`,
/// `"0o660"`) or a TOML octal integer (`0o660`), at most `0o777`. A decimal
/// integer is refused: `660` would be `0o1224`, surely not what was meant.
fn read_unix_mode(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<u32> {
    const KEY: &str = "statsd_unix_mode";
    let v = t.raw(KEY)?;
    let off = v.span().start;
    let hint = "give the mode as an octal string of permission bits, e.g. \"0660\" (owner and group may send) or \"0600\" (owner only)";
    let parsed = match v.get_ref() {
        toml::de::DeValue::String(s) => {
            let digits = s.strip_prefix("0o").unwrap_or(s);
            if digits.is_empty()
                || digits.len() > 4
                || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b))
            {
                Err(format!("`{s}` is not an octal mode; {hint}"))
            } else {
                u32::from_str_radix(digits, 8).map_err(|e| e.to_string())
            }
        }
        toml::de::DeValue::Integer(i) if i.radix() == 8 => {
            u32::from_str_radix(i.as_str(), 8).map_err(|e| e.to_string())
        }
        toml::de::DeValue::Integer(i) => Err(format!(
            "`{i}` is an integer, which TOML reads as decimal, not as a mode; {hint}"
        )),
        _ => Err(hint.to_string()),
    };
    match parsed {
        Ok(m) if m <= 0o777 => Some(m),
        Ok(m) => {
            p.at(
                off,
                &t.key_path(KEY),
                format!("{m:#o} has bits above 0o777 (setuid, setgid, sticky), which mean nothing on a socket; {hint}"),
            );
            None
        }
        Err(msg) => {
            p.at(off, &t.key_path(KEY), msg);
            None
        }
    }
}

/// `listen.statsd_unix_group`: a name, or a numeric gid (a string of
/// digits or an integer); `""` is the daemon's own group.
fn read_unix_group(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<UnixGroup> {
    const KEY: &str = "statsd_unix_group";
    let v = t.raw(KEY)?;
    let off = v.span().start;
    let line = p.line_of(off);
    let group = match v.get_ref() {
        toml::de::DeValue::String(s) if s.is_empty() => return None,
        toml::de::DeValue::String(s) if s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().ok().map(GroupRef::Id)
        }
        toml::de::DeValue::String(s) => Some(GroupRef::Name(s.to_string())),
        toml::de::DeValue::Integer(i) => u32::from_str_radix(i.as_str(), i.radix())
            .ok()
            .map(GroupRef::Id),
        _ => None,
    };
    if group.is_none() {
        p.at(
            off,
            &t.key_path(KEY),
            "give a group name (e.g. \"statsd\") or a numeric gid below 4294967296; \"\" (the default) keeps the daemon's own group",
        );
    }
    group.map(|group| UnixGroup { group, line })
}

fn valid_label_value(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

#[cfg(test)]
mod tests;
