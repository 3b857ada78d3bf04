//! A mapping rule's summary: `observer = "summary"` and its `summary_*`
//! keys, read into a [`SummarySpec`] (statsd_exporter's `summary_options`
//! become the same).

use std::time::Duration;

use super::reader::{Problems, Table};
use crate::window::WindowSpec;

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

/// A rule's `observer` and `summary_*` keys.
pub(super) fn read(
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
