//! `[series]`: the registry's caps, quantiles, histogram buckets, native
//! histograms and name escaping, read into [`SeriesConfig`].

use std::time::Duration;

use super::reader::{Problems, Table};
use super::KindSet;
use crate::parse::MetricKind;
use crate::series::{SeriesConfig, MAX_NATIVE_BUCKETS};

pub(super) const KEYS: &[&str] = &[
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

/// `native_histogram_bucket_factor` of `[series]` or a rule: `0` (none) or
/// a factor above 1 (up to 65536, where the coarsest schema, -4, already
/// applies).
pub(super) fn native_factor(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<f64> {
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

/// `[series]`: caps, quantiles, buckets, native histograms, names;
/// returns where `ttl_secs` is written, to name it if a window outlives it.
pub(super) fn read(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    s: &mut SeriesConfig,
) -> Option<(usize, String)> {
    let ttl_at = t
        .raw("ttl_secs")
        .map(|v| (v.span().start, t.key_path("ttl_secs")));
    if let Some(n) = t.int(p, "ttl_secs", 1, 30 * 86_400) {
        s.ttl = Duration::from_secs(n);
    }
    if let Some(n) = t.int(p, "max_series", 1, 100_000_000) {
        s.max_series = n as usize;
    }
    if let Some(n) = t.int(p, "max_series_per_metric", 1, 100_000_000) {
        s.max_series_per_metric = Some(n as usize);
    }
    if let Some(n) = t.int(p, "max_label_bytes", 64, 1 << 20) {
        s.max_label_bytes = n as usize;
    }
    if let Some(n) = t.int(p, "max_memory_bytes", 1 << 24, 1 << 50) {
        s.max_memory_bytes = Some(n);
    }
    if let Some(qs) = t.floats(p, "quantiles") {
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
    if let Some(bs) = t.floats(p, "histogram_buckets") {
        let vals: Vec<f64> = bs.iter().map(|(b, _)| *b).collect();
        if vals.is_empty() || vals.windows(2).any(|w| w[0] >= w[1]) {
            let off = bs.first().map(|b| b.1).unwrap_or(t.start());
            p.at(off, "series.histogram_buckets", "must be a non-empty list of strictly increasing upper bounds (e.g. [0.01, 0.1, 1, 10])");
        } else {
            s.histogram_buckets = vals;
        }
    }
    if let Some(f) = native_factor(t, p) {
        s.native_histograms.bucket_factor = f;
    }
    if let Some(n) = t.int(p, "native_histogram_max_buckets", 1, MAX_NATIVE_BUCKETS) {
        s.native_histograms.max_buckets = n as u32;
    }
    if let Some(types) = t.strings(p, "native_histogram_types") {
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
    if let Some((v, off)) = t.string(p, "name_escaping") {
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
    ttl_at
}
