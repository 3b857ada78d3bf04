//! A mapping rule's summary: `observer = "summary"` and its `summary_*`
//! keys, read into a [`SummarySpec`] (statsd_exporter's `summary_options`
//! become the same).

use std::time::Duration;

use super::reader::{Problems, Table};
use crate::series::{SummarySpec, DEFAULT_SUMMARY_ERROR, MAX_SUMMARY_AGE, MAX_SUMMARY_BUF_CAP};

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
