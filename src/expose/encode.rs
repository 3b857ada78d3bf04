//! How the two text formats spell things: escaped label values and HELP
//! texts, labels, a family's header lines, numbers. What is published is
//! [`super::families`]' business; this file only writes it.
//!
//! # Escapers
//!
//! One per format, each the rule of its specification; every other
//! character (UTF-8 included) passes as it is.
//!
//! * **Text format 0.0.4** (Prometheus "Exposition formats", text-based
//!   format): a label value escapes `\` as `\\`, `"` as `\"` and a line
//!   feed as `\n`; a HELP text escapes `\` as `\\` and a line feed as `\n`,
//!   and leaves `"` as it is ([`escape_text_label_value`],
//!   [`escape_text_help`]). The `prometheus` crate's `TextEncoder`, which
//!   writes the families built in the crate's model
//!   ([`super::prometheus`]), applies this same rule with its own code.
//! * **OpenMetrics 1.0** (the ABNF's `escaped-string`, for label values
//!   and HELP texts alike): `\` as `\\`, `"` as `\"`, a line feed as `\n`
//!   ([`escape_openmetrics`]). Both the text writer and the OpenMetrics
//!   encoder of crate-model families ([`super::openmetrics`]) use it.
//!
//! [`Format::escape_label_value`] and [`Format::escape_help`] pick the
//! format's rule. No statsd name or tag holds a line feed (the parser
//! refuses control characters), but the escapers do not count on it.

use std::io::Write as _;

/// The exposition format to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4 (what the crate's `TextEncoder` writes).
    Prometheus,
    /// OpenMetrics 1.0 text, without the final `# EOF` (the caller ends the
    /// whole exposition with it).
    OpenMetrics,
}

impl Format {
    /// Appends `v` as a label value escaped by this format's rule (the
    /// quotes around it are the caller's).
    pub(crate) fn escape_label_value(self, out: &mut impl Sink, v: &str) {
        match self {
            Format::Prometheus => escape_text_label_value(out, v),
            Format::OpenMetrics => escape_openmetrics(out, v),
        }
    }

    /// Appends `help` as a HELP text escaped by this format's rule.
    pub(crate) fn escape_help(self, out: &mut impl Sink, help: &str) {
        match self {
            Format::Prometheus => escape_text_help(out, help),
            Format::OpenMetrics => escape_openmetrics(out, help),
        }
    }
}

/// Text being written: the text writer's byte buffers, or the `String` the
/// OpenMetrics encoder of crate-model families fills.
pub(crate) trait Sink {
    /// Appends `s`.
    fn put(&mut self, s: &str);
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, s: &str) {
        self.extend_from_slice(s.as_bytes());
    }
}

impl Sink for String {
    #[inline]
    fn put(&mut self, s: &str) {
        self.push_str(s);
    }
}

/// Text format 0.0.4, label value: `\` → `\\`, `"` → `\"`, line feed →
/// `\n`.
pub(crate) fn escape_text_label_value(out: &mut impl Sink, v: &str) {
    escape(out, v, true);
}

/// Text format 0.0.4, HELP text: `\` → `\\`, line feed → `\n`; a `"`
/// stays as it is.
pub(crate) fn escape_text_help(out: &mut impl Sink, help: &str) {
    escape(out, help, false);
}

/// OpenMetrics 1.0 `escaped-string` (label values and HELP texts): `\` →
/// `\\`, `"` → `\"`, line feed → `\n`.
pub(crate) fn escape_openmetrics(out: &mut impl Sink, s: &str) {
    escape(out, s, true);
}

/// Backslash and line feed escaped, and `"` too if `quote`.
fn escape(out: &mut impl Sink, s: &str, quote: bool) {
    let bytes = s.as_bytes();
    // Names and label values are short: a branch-free pass (which the
    // compiler vectorises) beats a search with an early exit.
    let clean = !bytes.iter().fold(false, |hit, &b| {
        hit | (b == b'\\') | (b == b'\n') | (quote & (b == b'"'))
    });
    if clean {
        out.put(s);
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escaped = match b {
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'"' if quote => "\\\"",
            _ => continue,
        };
        // The escaped characters are ASCII, so `start` and `i` fall on
        // character boundaries.
        out.put(&s[start..i]);
        out.put(escaped);
        start = i + 1;
    }
    out.put(&s[start..]);
}

/// Appends the label `name="value"`, the value escaped by `format`'s rule.
pub(crate) fn label(out: &mut impl Sink, format: Format, name: &str, value: &str) {
    out.put(name);
    out.put("=\"");
    format.escape_label_value(out, value);
    out.put("\"");
}

/// Appends a family's `# HELP` and `# TYPE` lines, in the order each format
/// puts them (text 0.0.4: HELP first, as the crate's encoder; OpenMetrics:
/// TYPE first, as its specification recommends). The name is `name[0]`
/// followed by `name[1]` (a base and a suffix such as `_total`). The HELP
/// text is `before`, then `metric` escaped by `format`'s rule, then
/// `after`: `before` and `after` are fixed texts with nothing to escape.
pub(crate) fn header(
    h: &mut Vec<u8>,
    format: Format,
    name: [&[u8]; 2],
    kind: &str,
    before: &str,
    metric: &str,
    after: &str,
) {
    // `# HELP name ` or `# TYPE name `.
    let start = |h: &mut Vec<u8>, what: &[u8]| {
        h.extend_from_slice(what);
        h.extend_from_slice(name[0]);
        h.extend_from_slice(name[1]);
        h.push(b' ');
    };
    let help_line = |h: &mut Vec<u8>| {
        start(h, b"# HELP ");
        h.extend_from_slice(before.as_bytes());
        format.escape_help(h, metric);
        h.extend_from_slice(after.as_bytes());
        h.push(b'\n');
    };
    let type_line = |h: &mut Vec<u8>| {
        start(h, b"# TYPE ");
        h.extend_from_slice(kind.as_bytes());
        h.push(b'\n');
    };
    match format {
        Format::Prometheus => {
            help_line(h);
            type_line(h);
        }
        Format::OpenMetrics => {
            type_line(h);
            help_line(h);
        }
    }
}

/// How both text formats spell a non-finite value (`+Inf`, `-Inf`, `NaN`;
/// Rust's `Display` would write `inf`), or `None` for a finite one.
pub(crate) fn non_finite(x: f64) -> Option<&'static str> {
    if x.is_finite() {
        None
    } else if x.is_nan() {
        Some("NaN")
    } else if x > 0.0 {
        Some("+Inf")
    } else {
        Some("-Inf")
    }
}

/// A sample value in plain decimal, never an exponent, like the crate's
/// encoder (Rust's shortest round-trip `Display`). Integers below 1e16, the
/// common case, go through `itoa`; other values between 1e-5 and 1e16
/// through `ryu`, which writes shortest round-trip digits without an
/// exponent in that range (where two shortest forms exist it may pick the
/// other last digit than `Display`: the same f64 either way); the rest
/// through `Display` itself.
///
/// Non-finite values are spelled by [`non_finite`]. The registry never
/// stores one in a cumulative family (a line that would is refused as
/// `overflow`); this is the spelling should one reach a writer anyway.
pub(crate) fn number(out: &mut Vec<u8>, x: f64) {
    const PLAIN: std::ops::Range<f64> = 1e-5..1e16;
    if let Some(s) = non_finite(x) {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    let a = x.abs();
    if x.fract() == 0.0 && a < PLAIN.end && !(x == 0.0 && x.is_sign_negative()) {
        // Exact: an integral f64 below 1e16 fits an i64.
        out.extend_from_slice(itoa::Buffer::new().format(x as i64).as_bytes());
    } else if PLAIN.contains(&a) {
        out.extend_from_slice(ryu::Buffer::new().format_finite(x).as_bytes());
    } else {
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{x}");
    }
}

/// A whole count (histogram buckets, `_count`).
pub(crate) fn integer(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(x: f64) -> String {
        let mut v = Vec::new();
        number(&mut v, x);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn numbers_match_display() {
        for x in [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.1,
            2.5,
            1e-7,
            1e21,
            123_456_789.0,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            -9_007_199_254_740_993.0,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            assert_eq!(num(x), x.to_string(), "{x}");
        }
    }

    #[test]
    fn non_finite_values_are_spelled_as_the_formats_require() {
        assert_eq!(num(f64::INFINITY), "+Inf");
        assert_eq!(num(f64::NEG_INFINITY), "-Inf");
        assert_eq!(num(f64::NAN), "NaN");
        assert_eq!(non_finite(1e308), None);
    }

    #[test]
    fn every_value_round_trips_in_plain_decimal() {
        // A deterministic spread over all f64 bit patterns, and over the
        // range ryu serves.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut differ = 0;
        for i in 0..400_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = if i % 2 == 0 {
                f64::from_bits(x)
            } else {
                let m = (x >> 11) as f64 / (1u64 << 53) as f64 + 0.5;
                m * 10f64.powi((x % 23) as i32 - 6)
            };
            if !v.is_finite() {
                continue;
            }
            let s = num(v);
            assert!(!s.contains(['e', 'E']), "{s}");
            assert_eq!(
                s.parse::<f64>().unwrap().to_bits(),
                v.to_bits(),
                "{s} for {v:e}"
            );
            // Same length as Display: both are shortest round-trip digits.
            assert_eq!(s.len(), v.to_string().len(), "{s} vs {v}");
            differ += usize::from(s != v.to_string());
        }
        // Where two shortest forms exist ryu and Display may pick different
        // last digits (about 0.5% of these values): same f64, same length.
        assert!(
            differ < 4_000,
            "{differ} values written differently from Display"
        );
    }

    fn escaped(f: fn(&mut Vec<u8>, &str), s: &str) -> String {
        let mut v = Vec::new();
        f(&mut v, s);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn text_label_values_escape_backslash_quote_and_newline() {
        let f = |o: &mut Vec<u8>, s: &str| escape_text_label_value(o, s);
        assert_eq!(escaped(f, "a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(
            escaped(f, "caf\u{e9} \u{1f680}\t'"),
            "caf\u{e9} \u{1f680}\t'"
        );
        assert_eq!(escaped(f, "\\\"\n"), "\\\\\\\"\\n");
    }

    #[test]
    fn text_help_escapes_backslash_and_newline_and_keeps_quotes() {
        let f = |o: &mut Vec<u8>, s: &str| escape_text_help(o, s);
        assert_eq!(escaped(f, "say \"hi\"\n\\"), "say \"hi\"\\n\\\\");
    }

    #[test]
    fn openmetrics_escapes_backslash_quote_and_newline_everywhere() {
        let f = |o: &mut Vec<u8>, s: &str| escape_openmetrics(o, s);
        assert_eq!(
            escaped(f, "say \"hi\"\n\\\u{fc}"),
            "say \\\"hi\\\"\\n\\\\\u{fc}"
        );
        let mut s = String::new();
        escape_openmetrics(&mut s, "a\"b");
        assert_eq!(s, "a\\\"b");
    }

    #[test]
    fn each_format_picks_its_own_rule() {
        let help = |f: Format| {
            let mut v = Vec::new();
            f.escape_help(&mut v, "\"");
            v
        };
        assert_eq!(help(Format::Prometheus), b"\"");
        assert_eq!(help(Format::OpenMetrics), b"\\\"");
        let mut l = Vec::new();
        label(&mut l, Format::Prometheus, "k", "a\"b");
        assert_eq!(l, b"k=\"a\\\"b\"");
    }
}
