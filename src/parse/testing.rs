//! Helpers the parse unit tests share: parse a line that must be a sample,
//! or must be rejected (for a given reason), and compare a sample with the
//! fields expected.

use super::{parse_line, Line, MetricKind, Sample};

/// Expected fields of an accepted line.
pub(super) struct Want<'a> {
    name: &'a str,
    kind: MetricKind,
    values: &'a [f64],
    rate: f64,
    tags: &'a [(&'a str, &'a str)],
}

pub(super) fn w<'a>(
    name: &'a str,
    kind: MetricKind,
    values: &'a [f64],
    rate: f64,
    tags: &'a [(&'a str, &'a str)],
) -> Want<'a> {
    Want {
        name,
        kind,
        values,
        rate,
        tags,
    }
}

pub(super) fn sample(line: &str) -> Sample<'_> {
    match parse_line(line.as_bytes()) {
        Ok(Line::Sample(s)) => s,
        other => panic!("{line:?}: expected a sample, got {other:?}"),
    }
}

pub(super) fn reject(line: &[u8]) -> &'static str {
    match parse_line(line) {
        Err(e) => e.reason(),
        Ok(other) => panic!(
            "{:?}: expected a rejection, got {other:?}",
            String::from_utf8_lossy(line)
        ),
    }
}

/// Asserts that `line` is rejected for `reason`.
pub(super) fn rejects(line: &[u8], reason: &str) {
    assert_eq!(reject(line), reason, "{:?}", String::from_utf8_lossy(line));
}

pub(super) fn check(line: &str, want: &Want<'_>) {
    let s = sample(line);
    assert_eq!(s.name, want.name, "{line}");
    assert_eq!(s.kind, want.kind, "{line}");
    assert_eq!(s.values().collect::<Vec<_>>(), want.values, "{line}");
    assert_eq!(s.sample_rate, want.rate, "{line}");
    assert_eq!(s.tags().collect::<Vec<_>>(), want.tags, "{line}");
    assert_eq!(s.tags().len(), want.tags.len(), "{line}");
}
