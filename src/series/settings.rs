//! What `[series]`, `[[windows]]` and `[[mappings]]` configure: the
//! registry's caps and published statistics, the named windows, the rules
//! on statsd names and the summaries they may ask for, as `config` reads
//! them. [`Plan`](super::Plan) is built from these.

use std::time::Duration;

use crate::mapping::{Matcher, Template};
use crate::parse::MetricKind;
use crate::window::WindowSpec;

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

/// Largest `native_histogram_max_buckets`: schema 8 over the whole range
/// of a double would need far more, but a series this wide costs ~512 KiB
/// already; "no limit" is not offered, since one sender could then grow a
/// single series without bound.
pub const MAX_NATIVE_BUCKETS: u64 = 32_768;

/// Prometheus' default histogram buckets (seconds).
pub const DEFAULT_HISTOGRAM_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

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

/// One `[[windows]]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedWindow {
    /// The `window` label value, e.g. `10s`.
    pub name: String,
    /// Buckets, interval, ignore-current.
    pub spec: WindowSpec,
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
    /// Indices into the default windows (`[[windows]]`) kept for matching
    /// series, if set.
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

/// A quantile's rank error in config.toml when `summary_errors` is not
/// given and statsd_exporter's defaults name none for it.
pub const DEFAULT_SUMMARY_ERROR: f64 = 0.001;

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

/// What a registry is built from, borrowed from wherever it was read:
/// `[series]`, `[[windows]]`, `[[mappings]]`, and statsd_exporter's names
/// and reading of lines when asked for.
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a> {
    /// `[series]`.
    pub series: &'a SeriesConfig,
    /// The default windows of every series (at least one).
    pub windows: &'a [NamedWindow],
    /// The mapping rules, first match wins.
    pub mappings: &'a [Mapping],
    /// The cumulative families named as statsd_exporter names them.
    pub exporter_names: bool,
    /// Lines read as statsd_exporter reads them where rollstat's own rule
    /// differs (a tag without a value is left out).
    pub exporter_compatible: bool,
}
