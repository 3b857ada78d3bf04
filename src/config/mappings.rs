//! `[[mappings]]`: rules on statsd names (match, rename, labels, windows,
//! sharing, expiry, buckets, summaries), read into [`Mapping`]s.

use std::time::Duration;

use super::reader::{Problems, Table};
use super::series::native_factor;
use crate::mapping::{Glob, Matcher, NameRegex, Template};
use crate::parse::MetricKind;
use crate::series::{Action, KindSet, Mapping, NamedWindow, MAX_NATIVE_BUCKETS};

pub(super) const KEYS: &[&str] = &[
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

/// One `[[mappings]]` rule (`windows`: the config's, for `windows = [...]`;
/// `redis_configured`: whether `shared` can work). `None` when its pattern
/// is refused (every problem recorded).
pub(super) fn read(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    windows: &[NamedWindow],
    redis_configured: bool,
) -> Option<Mapping> {
    let pattern = read_pattern(t, p);
    let match_type = read_match_type(t, p);
    let action = read_action(t, p);
    let rename = t
        .string(p, "rename")
        .and_then(|(s, off)| template(pattern.as_ref(), p, &t.key_path("rename"), &s, off));
    let labels = read_labels(t, p, pattern.as_ref());
    let windows_sel = read_window_names(t, p, windows);
    let shared = super::store_use::read_shared(t, p, redis_configured, "a shared mapping");
    let honor_labels = t.bool(p, "honor_labels").unwrap_or(false);
    // A TTL shorter than a window is a warning (`Config::ttl_warnings`):
    // the series lives until its longest window has drained.
    let ttl = t
        .int(p, "ttl_secs", 0, 10 * 365 * 86_400)
        .map(Duration::from_secs);
    let histogram_buckets = read_bounds(t, p);
    let scale = t.float(p, "scale", f64::MIN_POSITIVE, f64::MAX);
    let help = read_help(t, p);
    let summary = super::summary::read(t, p);
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

/// `match` or `match_regex`, one of them required.
fn read_pattern(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<Matcher> {
    match read_matcher(t, p) {
        Ok(Some(m)) => Some(m),
        Err(()) => None,
        Ok(None) => {
            p.at(
                t.start(),
                &t.key_path("match"),
                "every mapping needs a `match` glob (e.g. \"api.*.requests\") or a `match_regex` (e.g. \"api\\\\.(\\\\w+)\\\\.requests\")",
            );
            None
        }
    }
}

/// `match_type`: one statsd type, or `observer`.
fn read_match_type(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<KindSet> {
    let (s, off) = t.string(p, "match_type")?;
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
}

/// `action`: keep (the default) or drop.
fn read_action(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Action {
    match t.string(p, "action") {
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
    }
}

/// A template on `pattern`'s captures. With the pattern refused (its
/// problem reported already) only the template's syntax is checked, not
/// its captures, to avoid a cascade.
fn template(
    pattern: Option<&Matcher>,
    p: &mut Problems<'_>,
    key: &str,
    s: &str,
    off: usize,
) -> Option<Template> {
    let compiled = match pattern {
        Some(m) => m.template(s),
        None => Template::compile(s, usize::MAX, "pattern", |_| Some(1)),
    };
    compiled.map_err(|e| p.at(off, key, e.to_string())).ok()
}

/// `[mappings.labels]`: valid, unreserved names, template values.
fn read_labels(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    pattern: Option<&Matcher>,
) -> Vec<(String, Template)> {
    let mut labels = Vec::new();
    let Some(mut lt) = t.table(p, "labels") else {
        return labels;
    };
    for (k, v, off) in lt.string_pairs(p) {
        if let Some(why) = label_name_problem(&k) {
            p.at(off, &lt.key_path(&k), why);
        } else if let Some(tpl) = template(pattern, p, &lt.key_path(&k), &v, off) {
            labels.push((k, tpl));
        }
    }
    lt.finish(p, &[]);
    labels
}

/// Why `k` cannot be a mapping label's name, if it cannot.
fn label_name_problem(k: &str) -> Option<String> {
    if !crate::names::is_valid_label_name(k) {
        return Some("not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)".into());
    }
    if k.starts_with("__") {
        return Some("label names starting with `__` are reserved for Prometheus' own use; pick another name".into());
    }
    crate::names::RESERVED_LABELS.contains(&k).then(|| {
        format!(
            "`{k}` is a label rollstat sets itself ({}); pick another name",
            crate::names::RESERVED_LABELS.join(", ")
        )
    })
}

/// `windows = [...]`: indices of the named windows.
fn read_window_names(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    windows: &[NamedWindow],
) -> Option<Vec<usize>> {
    let names = t.strings(p, "windows")?;
    let mut ids = Vec::new();
    for (n, off) in names {
        match windows.iter().position(|w| w.name == n) {
            Some(i) => ids.push(i),
            None => {
                let known: Vec<&str> = windows.iter().map(|w| w.name.as_str()).collect();
                p.at(
                    off,
                    &t.key_path("windows"),
                    format!("no window named `{n}`; defined: {}", known.join(", ")),
                );
            }
        }
    }
    Some(ids)
}

/// `histogram_buckets`: strictly increasing upper bounds.
fn read_bounds(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<std::sync::Arc<[f64]>> {
    let bs = t.floats(p, "histogram_buckets")?;
    let vals: Vec<f64> = bs.iter().map(|(b, _)| *b).collect();
    if vals.is_empty() || vals.windows(2).any(|w| w[0] >= w[1]) {
        let off = bs.first().map_or(t.start(), |b| b.1);
        p.at(
            off,
            &t.key_path("histogram_buckets"),
            "must be a non-empty list of strictly increasing upper bounds (e.g. [0.01, 0.1, 1, 10])",
        );
        return None;
    }
    Some(vals.into())
}

/// `help`: one line of at most 1024 bytes.
fn read_help(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<std::sync::Arc<str>> {
    let (h, off) = t.string(p, "help")?;
    if h.contains('\n') || h.len() > 1024 {
        p.at(off, &t.key_path("help"), "one line of at most 1024 bytes");
        return None;
    }
    Some(h.into())
}

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
