//! `[[windows]]`: the named rolling windows every series keeps, read into
//! [`NamedWindow`]s.

use std::time::Duration;

use super::reader::{Problems, Table};
use crate::series::NamedWindow;
use crate::window::WindowSpec;

pub(super) const KEYS: &[&str] = &["name", "buckets", "interval_ms", "ignore_current"];

pub(super) fn default_window() -> NamedWindow {
    NamedWindow {
        name: "10s".to_string(),
        // 10 x 1 s is a valid shape.
        spec: WindowSpec::new(10, Duration::from_secs(1)).unwrap_or_else(|_| unreachable!()),
    }
}

pub(super) fn valid_label_value(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// `[[windows]]`: each named, unique, buildable; none given keeps the
/// default window.
pub(super) fn read(top: &mut Table<'_, '_>, p: &mut Problems<'_>, windows: &mut Vec<NamedWindow>) {
    let window_tables = top.tables(p, "windows");
    if !window_tables.is_empty() {
        windows.clear();
    }
    let mut seen_names: Vec<String> = Vec::new();
    for mut t in window_tables {
        let name = t.string(p, "name");
        let buckets = t.int(p, "buckets", 1, 100_000);
        let interval = t.int(p, "interval_ms", 1, 86_400_000);
        let ignore = t.bool(p, "ignore_current").unwrap_or(false);
        let start = t.start();
        let path = t.key_path("");
        t.finish(p, KEYS);
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
            Ok(spec) => windows.push(NamedWindow {
                name,
                spec: spec.ignore_current(ignore),
            }),
            Err(e) => p.at(start, &format!("{path}buckets"), e.to_string()),
        }
    }
}

/// Refuses a `[series] ttl_secs` shorter than the longest window (`ttl_at`:
/// where it is written).
pub(super) fn check_ttl(
    windows: &[NamedWindow],
    ttl: Duration,
    ttl_at: Option<(usize, String)>,
    p: &mut Problems<'_>,
) {
    // A series that expires while a window still holds its samples
    // would lose them from that window, and its counter would restart at
    // 0 while the window still showed its increments.
    if let Some(longest) = windows.iter().max_by_key(|w| w.spec.length()) {
        if ttl < longest.spec.length() {
            let (off, key) = ttl_at.unwrap_or((0, "series.ttl_secs".to_string()));
            p.at(
            off,
            &key,
            format!(
                "{}s is shorter than window `{}` ({}s): a series would expire while the window still holds its samples; set ttl_secs to at least {}",
                ttl.as_secs(),
                longest.name,
                longest.spec.length().as_secs_f64(),
                longest.spec.length().as_secs_f64().ceil(),
            ),
        );
        }
    }
}
