//! What `[[breakers]]` and `[[limits]]` configure: the named breakers and
//! keyed limits this service runs, as `config` reads them.

use std::time::Duration;

use crate::breaker::{ErrorRateConfig, SreConfig};

/// `half_open_max_wait_ms` when a breaker does not set it: a half-open
/// breaker whose trials' outcomes have not all come back 30 s after it
/// half-opened opens again (and half-opens again after
/// `open_duration_ms`). Finite, so that trials handed out to clients that
/// crashed, or whose outcome lines were lost on UDP, cannot hold a breaker
/// half-open for ever; long enough for a slow trial call to report.
pub const DEFAULT_HALF_OPEN_MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Which breaker algorithm, with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum BreakerKind {
    /// Google SRE adaptive throttling (go-zero's googlebreaker).
    Sre(SreConfig),
    /// Closed / open / half-open on the failure (and slow-call) rate.
    ErrorRate(ErrorRateConfig),
}

/// A counter whose tag marks each increment as a success or a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutcomeTag {
    /// The counter's statsd name.
    pub metric: String,
    /// The tag whose value tells the outcome.
    pub tag: String,
    /// Tag values meaning success.
    pub success_values: Vec<String>,
    /// Tag values meaning failure.
    pub failure_values: Vec<String>,
}

/// Where a breaker's outcomes come from (besides `POST .../outcomes`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BreakerInputs {
    /// Counter of all calls.
    pub requests_metric: Option<String>,
    /// Counter of failed calls (a subset of the requests).
    pub failures_metric: Option<String>,
    /// One counter with an outcome tag.
    pub outcome: Option<OutcomeTag>,
    /// A timer whose samples above `slow_call` are slow calls.
    pub latency_metric: Option<String>,
}

/// One `[[breakers]]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct BreakerDef {
    /// Unique name: the `breaker` label and the URL segment.
    pub name: String,
    /// Algorithm and parameters.
    pub kind: BreakerKind,
    /// statsd inputs.
    pub inputs: BreakerInputs,
}

/// Exact sliding log or approximate sliding counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitAlgorithm {
    /// At most N in any interval of length W.
    Exact,
    /// Previous fixed window weighted by overlap plus the current one.
    Approximate,
}

/// One `[[limits]]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitDef {
    /// Unique name: the `limit` label and the URL segment.
    pub name: String,
    /// The algorithm.
    pub algorithm: LimitAlgorithm,
    /// (max, window) pairs, all enforced at once.
    pub rules: Vec<(u32, Duration)>,
    /// Most keys tracked.
    pub max_keys: usize,
    /// At the cap with no idle key: deny new keys (`true`, the default) or,
    /// opted in with `overflow = "evict_least_recent"`, evict the least
    /// recently used key (`false`), forgetting its history.
    pub reject_new_keys: bool,
    /// Decided in the shared store (`[redis]`) rather than in this process.
    pub shared: bool,
    /// What a shared limit does when the store fails or times out.
    pub on_store_error: StoreFallback,
}

/// What a shared limit answers when the shared store cannot decide.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StoreFallback {
    /// Decide with this instance's own limiter (each instance then enforces
    /// the limit alone), answering `"source": "local"`.
    #[default]
    Local,
    /// Deny (fail closed): 503 with `Retry-After`.
    Deny,
    /// Admit (fail open).
    Allow,
}

impl StoreFallback {
    /// The config spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            StoreFallback::Local => "local",
            StoreFallback::Deny => "deny",
            StoreFallback::Allow => "allow",
        }
    }
}

/// What the services are built from, borrowed from wherever it was read:
/// `[[breakers]]` and `[[limits]]`.
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a> {
    /// The named breakers.
    pub breakers: &'a [BreakerDef],
    /// The keyed limits.
    pub limits: &'a [LimitDef],
}
