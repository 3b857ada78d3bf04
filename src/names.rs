//! Prometheus-safe names, decided once when a series is born.
//!
//! * Metric names: every character outside `[a-zA-Z0-9_:]` becomes `_`
//!   (`api.requests` → `api_requests`), a leading digit gets a `_` prefix.
//! * Label names: outside `[a-zA-Z0-9_]` becomes `_`, a leading digit gets a
//!   `_` prefix; names Prometheus reserves (`__*`) and the labels rollstat's
//!   windowed families use themselves (`metric`, `window`, `q`, `le`,
//!   `quantile`) get a `tag_` prefix so a tag can never shadow them.

/// Labels the windowed families (and histograms) set themselves.
pub const RESERVED_LABELS: [&str; 5] = ["metric", "window", "q", "le", "quantile"];

/// Whether `s` is a valid Prometheus label name.
#[must_use]
pub fn is_valid_label_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// A valid Prometheus metric name for a statsd name.
#[must_use]
pub fn metric_name(statsd: &str) -> String {
    sanitized(statsd, 1, |c| {
        c.is_ascii_alphanumeric() || c == '_' || c == ':'
    })
}

/// Whether a tag key may be published as it was sent where the scraper
/// takes UTF-8 names (`escaping=allow-utf-8`): any key but one Prometheus
/// reserves (`__*`), one of [`RESERVED_LABELS`], or an empty one. The
/// others are published as [`label_name`] makes them in every scheme.
#[must_use]
pub fn may_keep_as_sent(tag: &str) -> bool {
    !tag.is_empty() && !tag.starts_with("__") && !RESERVED_LABELS.contains(&tag)
}

/// A valid label name for a tag key, never one of [`RESERVED_LABELS`].
#[must_use]
pub fn label_name(tag: &str) -> String {
    let mut out = sanitized(tag, 4, |c| c.is_ascii_alphanumeric() || c == '_');
    if out.starts_with("__") || RESERVED_LABELS.contains(&out.as_str()) {
        out.insert_str(0, "tag_");
    }
    out
}

/// A metric name as statsd_exporter writes it (its `EscapeMetricName`):
/// every character outside `[a-zA-Z0-9_]` becomes `_`, except the second
/// `-` of a `--`, which is dropped; a leading digit gets a `_` before it.
/// (`a--b.c:d` → `a_b_c_d`, where [`metric_name`] keeps `a__b_c:d`.)
#[must_use]
pub fn exporter_metric_name(statsd: &str) -> String {
    let mut out = String::with_capacity(statsd.len() + 1);
    if statsd.bytes().next().is_none_or(|c| c.is_ascii_digit()) {
        out.push('_');
    }
    let mut prev = '\0';
    for c in statsd.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else if !(c == '-' && prev == '-') {
            out.push('_');
        }
        prev = c;
    }
    out
}

/// A label name for a tag key as statsd_exporter writes it
/// ([`exporter_metric_name`]), never one of [`RESERVED_LABELS`].
#[must_use]
pub fn exporter_label_name(tag: &str) -> String {
    let mut out = exporter_metric_name(tag);
    if out.starts_with("__") || RESERVED_LABELS.contains(&out.as_str()) {
        out.insert_str(0, "tag_");
    }
    out
}

/// `s` with every character `keep` refuses turned into `_`, behind a `_`
/// when `s` is empty or starts with a digit; with room for `spare` more bytes.
fn sanitized(s: &str, spare: usize, keep: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(s.len() + spare);
    if s.bytes().next().is_none_or(|c| c.is_ascii_digit()) {
        out.push('_');
    }
    out.extend(s.chars().map(|c| if keep(c) { c } else { '_' }));
    out
}

/// Every name a statsd series of `kind` with Prometheus name `prom` exposes
/// or reserves, in either text format: the family name itself (OpenMetrics
/// names a counter family `x` for its `x_total` samples) and every sample
/// name, `_created` included. Two series may share a name only if their
/// kinds and base names agree, so the first type seen for a name owns all of
/// them: a gauge `x` cannot sit beside a counter `x` (one family `x` of two
/// types in OpenMetrics, and one `metric="x"` of two types in the windowed
/// families), nor a gauge `x_count` beside a histogram `x`.
#[must_use]
pub fn exposed_names(kind: crate::parse::MetricKind, prom: &str) -> Vec<String> {
    use crate::parse::MetricKind as K;
    match kind {
        K::Counter => vec![
            prom.to_string(),
            format!("{prom}_total"),
            format!("{prom}_created"),
        ],
        K::Gauge => vec![prom.to_string()],
        K::Timer | K::Histogram | K::Distribution => vec![
            prom.to_string(),
            format!("{prom}_bucket"),
            format!("{prom}_sum"),
            format!("{prom}_count"),
            format!("{prom}_created"),
        ],
        // Sets publish windowed families only, but keep their name so that a
        // later counter or gauge of the same name is refused consistently.
        K::Set => vec![prom.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statsd_names_become_metric_names() {
        assert_eq!(metric_name("api.requests"), "api_requests");
        assert_eq!(metric_name("9lives-x"), "_9lives_x");
        assert_eq!(metric_name("a:b/c"), "a:b_c");
        assert_eq!(metric_name("héllo"), "h_llo");
        assert_eq!(metric_name(""), "_");
    }

    #[test]
    fn statsd_exporter_names_collapse_double_dashes_and_drop_colons() {
        assert_eq!(exporter_metric_name("a--b.c:d"), "a_b_c_d");
        assert_eq!(exporter_metric_name("a---b"), "a_b");
        assert_eq!(exporter_metric_name("9lives"), "_9lives");
        assert_eq!(exporter_metric_name("api.hits"), "api_hits");
        assert_eq!(exporter_label_name("content--type"), "content_type");
        assert_eq!(exporter_label_name("quantile"), "tag_quantile");
    }

    #[test]
    fn tags_never_shadow_our_labels() {
        assert_eq!(label_name("route"), "route");
        assert_eq!(label_name("metric"), "tag_metric");
        assert_eq!(label_name("window"), "tag_window");
        assert_eq!(label_name("__name__"), "tag___name__");
        assert_eq!(label_name("content-type"), "content_type");
        assert_eq!(label_name("1x"), "_1x");
        assert!(is_valid_label_name("ok_1"));
        assert!(!is_valid_label_name("1ok"));
        assert!(!is_valid_label_name(""));
    }
}
