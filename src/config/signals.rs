//! `[[breakers]]` and `[[limits]]`: the signal services' configuration.

use std::time::Duration;

use super::reader::{Problems, Table};
use crate::breaker::{ErrorRateConfig, SlowCallConfig, SreConfig};
use crate::service::{
    BreakerDef, BreakerInputs, BreakerKind, LimitAlgorithm, LimitDef, OutcomeTag,
    DEFAULT_HALF_OPEN_MAX_WAIT,
};

pub(super) const BREAKER_KEYS: &[&str] = &[
    "name",
    "kind",
    "requests_metric",
    "failures_metric",
    "outcome_metric",
    "outcome_tag",
    "success_values",
    "failure_values",
    "latency_metric",
    "slow_call_ms",
    "slow_call_rate_threshold",
    "window_ms",
    "buckets",
    "k",
    "min_k",
    "protection",
    "force_pass_ms",
    "min_calls",
    "failure_rate_threshold",
    "open_duration_ms",
    "half_open_trials",
    "half_open_max_wait_ms",
];

pub(super) const LIMIT_KEYS: &[&str] = &[
    "name",
    "algorithm",
    "rules",
    "max_keys",
    "overflow",
    "shared",
    "on_store_error",
];

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// Reads a breaker's or limit's `name`: valid in URLs and labels, unique.
fn read_name(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    seen: &mut Vec<String>,
    what: &str,
) -> Option<String> {
    match t.string(p, "name") {
        Some((n, off)) if !valid_name(&n) => {
            p.at(
                off,
                &t.key_path("name"),
                "use 1-64 letters, digits, '_', '.' or '-' (it appears in URLs and labels)",
            );
            None
        }
        Some((n, off)) if seen.contains(&n) => {
            p.at(
                off,
                &t.key_path("name"),
                format!("{what} name `{n}` is used twice"),
            );
            None
        }
        Some((n, _)) => {
            seen.push(n.clone());
            Some(n)
        }
        None => {
            p.at(
                t.start(),
                &t.key_path("name"),
                format!("every {what} needs a `name`"),
            );
            None
        }
    }
}

/// The keys only an SRE breaker reads.
const SRE_KEYS: &[&str] = &["k", "min_k", "protection", "force_pass_ms"];
/// The keys only an error-rate breaker reads.
const ERROR_RATE_KEYS: &[&str] = &[
    "min_calls",
    "failure_rate_threshold",
    "open_duration_ms",
    "half_open_trials",
    "half_open_max_wait_ms",
    "slow_call_rate_threshold",
];

/// Reports each of `keys` (which only a breaker of `kind` reads) that the
/// table sets.
fn only_for_kind(t: &mut Table<'_, '_>, p: &mut Problems<'_>, kind: &str, keys: &[&str]) {
    for k in keys {
        if let Some(v) = t.raw(k) {
            p.at(
                v.span().start,
                &t.key_path(k),
                format!("only for kind = \"{kind}\""),
            );
        }
    }
}

/// The breaker kind if its settings validated; else their problem, at the
/// table's start under `kind`.
fn valid_kind<E: std::fmt::Display>(
    t: &Table<'_, '_>,
    p: &mut Problems<'_>,
    kind: Result<BreakerKind, E>,
) -> Option<BreakerKind> {
    kind.map_err(|e| p.at(t.start(), &t.key_path("kind"), e.to_string()))
        .ok()
}

/// A breaker's keys both kinds take.
struct Shared {
    window: Option<Duration>,
    buckets: Option<usize>,
    slow_ms: Option<Duration>,
    slow_rate: Option<f64>,
}

/// A key in milliseconds, 1 ms to a day.
fn millis(t: &mut Table<'_, '_>, p: &mut Problems<'_>, key: &str) -> Option<Duration> {
    t.int(p, key, 1, 86_400_000).map(Duration::from_millis)
}

/// Reads one `[[breakers]]` table.
pub(super) fn read_breaker(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    seen: &mut Vec<String>,
) -> Option<BreakerDef> {
    let start = t.start();
    let name = read_name(t, p, seen, "breaker");
    let kind_s = t.string(p, "kind");
    let shared = Shared {
        window: millis(t, p, "window_ms"),
        buckets: t.int(p, "buckets", 1, 10_000).map(|b| b as usize),
        slow_ms: millis(t, p, "slow_call_ms"),
        slow_rate: t.float(p, "slow_call_rate_threshold", 0.0, 1.0),
    };
    let kind = match kind_s {
        Some((k, _)) if k == "sre" => read_sre(t, p, &shared),
        Some((k, _)) if k == "error_rate" => read_error_rate(t, p, &shared),
        Some((k, off)) => {
            p.at(
                off,
                &t.key_path("kind"),
                format!("unknown breaker kind `{k}`; use \"sre\" or \"error_rate\""),
            );
            None
        }
        None => {
            p.at(
                start,
                &t.key_path("kind"),
                "every breaker needs a `kind`: \"sre\" or \"error_rate\"",
            );
            None
        }
    };
    let inputs = read_inputs(t, p, shared.slow_ms.is_some());
    Some(BreakerDef {
        name: name?,
        kind: kind?,
        inputs,
    })
}

/// `kind = "sre"`: go-zero's Google SRE throttle.
fn read_sre(t: &mut Table<'_, '_>, p: &mut Problems<'_>, shared: &Shared) -> Option<BreakerKind> {
    let mut c = SreConfig::default();
    if let Some(w) = shared.window {
        c.window = w;
    }
    if let Some(b) = shared.buckets {
        c.buckets = b;
    }
    if let Some(k) = t.float(p, "k", 1.0, 100.0) {
        c.k = k;
    }
    if let Some(k) = t.float(p, "min_k", 1.0, 100.0) {
        c.min_k = k;
    }
    if let Some(n) = t.int(p, "protection", 0, 1_000_000) {
        c.protection = n;
    }
    if let Some(d) = millis(t, p, "force_pass_ms") {
        c.force_pass = d;
    }
    only_for_kind(t, p, "error_rate", ERROR_RATE_KEYS);
    valid_kind(t, p, c.validate().map(|_| BreakerKind::Sre(c)))
}

/// `kind = "error_rate"`: the error-rate (and slow-call) breaker.
fn read_error_rate(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    shared: &Shared,
) -> Option<BreakerKind> {
    let mut c = ErrorRateConfig {
        half_open_max_wait: Some(DEFAULT_HALF_OPEN_MAX_WAIT),
        ..ErrorRateConfig::default()
    };
    if let Some(w) = shared.window {
        c.window = w;
    }
    if let Some(b) = shared.buckets {
        c.buckets = b;
    }
    if let Some(n) = t.int(p, "min_calls", 1, 1_000_000_000) {
        c.min_calls = n;
    }
    if let Some(f) = t.float(p, "failure_rate_threshold", 0.0, 1.0) {
        c.failure_rate_threshold = f;
    }
    if let Some(d) = millis(t, p, "open_duration_ms") {
        c.open_duration = d;
    }
    if let Some(n) = t.int(p, "half_open_trials", 1, 1_000_000) {
        c.half_open_trials = n as u32;
    }
    if let Some(d) = millis(t, p, "half_open_max_wait_ms") {
        c.half_open_max_wait = Some(d);
    }
    if let Some(d) = shared.slow_ms {
        c.slow_call = Some(SlowCallConfig {
            duration: d,
            rate_threshold: shared.slow_rate.unwrap_or(1.0),
        });
    }
    only_for_kind(t, p, "sre", SRE_KEYS);
    valid_kind(t, p, c.validate().map(|_| BreakerKind::ErrorRate(c)))
}

/// The metrics a breaker reads: requests and failures, an outcome tag, a
/// latency (which needs `slow_call_ms`: `has_slow_ms`).
fn read_inputs(t: &mut Table<'_, '_>, p: &mut Problems<'_>, has_slow_ms: bool) -> BreakerInputs {
    let start = t.start();
    let mut inputs = BreakerInputs {
        requests_metric: t.string(p, "requests_metric").map(|x| x.0),
        failures_metric: t.string(p, "failures_metric").map(|x| x.0),
        outcome: None,
        latency_metric: t.string(p, "latency_metric").map(|x| x.0),
    };
    if inputs.failures_metric.is_some() && inputs.requests_metric.is_none() {
        p.at(
            start,
            &t.key_path("failures_metric"),
            "needs `requests_metric` too (failures are a subset of the requests)",
        );
    }
    if inputs.latency_metric.is_some() && !has_slow_ms {
        p.at(
            start,
            &t.key_path("latency_metric"),
            "needs `slow_call_ms`: samples above it are slow calls",
        );
    }
    inputs.outcome = read_outcome(t, p);
    inputs
}

/// `outcome_metric` with `outcome_tag` and its success and failure values.
fn read_outcome(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<OutcomeTag> {
    let outcome_metric = t.string(p, "outcome_metric");
    let outcome_tag = t.string(p, "outcome_tag");
    let success = t.strings(p, "success_values");
    let failure = t.strings(p, "failure_values");
    match (outcome_metric, outcome_tag) {
        (Some((m, _)), Some((tag, _))) => {
            let vals = |v: Option<Vec<(String, usize)>>, d: &[&str]| {
                v.map(|v| v.into_iter().map(|x| x.0).collect())
                    .unwrap_or_else(|| d.iter().map(|s| s.to_string()).collect())
            };
            Some(OutcomeTag {
                metric: m,
                tag,
                success_values: vals(success, &["ok", "success", "true"]),
                failure_values: vals(failure, &["error", "failure", "fail", "false"]),
            })
        }
        (None, None) => None,
        _ => {
            p.at(
                t.start(),
                &t.key_path("outcome_metric"),
                "`outcome_metric` and `outcome_tag` go together",
            );
            None
        }
    }
}

/// Reads one `[[limits]]` table.
pub(super) fn read_limit(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    seen: &mut Vec<String>,
    redis_configured: bool,
) -> Option<LimitDef> {
    let start = t.start();
    let name = read_name(t, p, seen, "limit");
    let algorithm = match t.string(p, "algorithm") {
        None => Some(LimitAlgorithm::Exact),
        Some((a, _)) if a == "exact" => Some(LimitAlgorithm::Exact),
        Some((a, _)) if a == "approximate" => Some(LimitAlgorithm::Approximate),
        Some((a, off)) => {
            p.at(off, &t.key_path("algorithm"), format!("unknown algorithm `{a}`; use \"exact\" (sliding log) or \"approximate\" (sliding counter)"));
            None
        }
    };
    let mut rules = Vec::new();
    let rule_tables = t.tables(p, "rules");
    if rule_tables.is_empty() {
        p.at(
            start,
            &t.key_path("rules"),
            "every limit needs `rules = [{ max = 100, window_ms = 1000 }, ...]`",
        );
    }
    for mut r in rule_tables {
        let max = r.int(p, "max", 1, u64::from(u32::MAX));
        let w = r.int(p, "window_ms", 1, 86_400_000 * 31);
        let (rstart, rpath) = (r.start(), r.key_path("max"));
        let wpath = r.key_path("window_ms");
        r.finish(p, &["max", "window_ms"]);
        if let (Some(max), Some(w)) = (max, w) {
            let w = Duration::from_millis(w);
            if rules.iter().any(|&(_, x)| x == w) {
                // Only the smaller max could ever bind; and a shared limit
                // keeps one Redis history per window.
                p.at(
                    rstart,
                    &wpath,
                    format!("two rules of this limit have window_ms = {}; only the smaller max can ever bind, keep one rule per window", w.as_millis()),
                );
            }
            rules.push((max as u32, w));
        } else if max.is_none() && w.is_none() {
            p.at(rstart, &rpath, "a rule needs `max` and `window_ms`");
        }
    }
    let max_keys = t
        .int(p, "max_keys", 1, 100_000_000)
        .map_or(100_000, |n| n as usize);
    // Refusing new keys is the default: evicting a key with history in its
    // window lets any client that sends new keys reset others' limits.
    let reject_new_keys = match t.string(p, "overflow") {
        None => true,
        Some((o, _)) if o == "evict_least_recent" => false,
        Some((o, _)) if o == "reject_new_keys" => true,
        Some((o, off)) => {
            p.at(off, &t.key_path("overflow"), format!("unknown overflow policy `{o}`; use \"evict_least_recent\" or \"reject_new_keys\""));
            false
        }
    };
    let shared = super::store_use::read_shared(t, p, redis_configured, "a shared limit");
    let on_store_error = super::store_use::read_on_store_error(t, p);
    if rules.is_empty() {
        return None;
    }
    Some(LimitDef {
        name: name?,
        algorithm: algorithm?,
        rules,
        max_keys,
        reject_new_keys,
        shared,
        on_store_error,
    })
}
