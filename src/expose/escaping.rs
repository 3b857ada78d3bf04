//! Metric and label names as a scrape's escaping scheme wants them
//! ([`Escaping`], chosen by `negotiate.rs`), and the quoting the 1.0.0 text
//! formats give names outside the legacy character set.
//!
//! # Legacy names
//!
//! A legacy metric name is `[a-zA-Z_:][a-zA-Z0-9_:]*` and a legacy label
//! name `[a-zA-Z_][a-zA-Z0-9_]*`, neither empty
//! ([`is_legacy_metric_name`], [`is_legacy_label_name`]). Every
//! exposition format can carry them as they are.
//!
//! # Schemes
//!
//! The rules are prometheus/common's `model.EscapeName`, character for
//! character (a character is a Unicode scalar value; "invalid" means not
//! allowed at its place by the legacy pattern, so a leading digit is
//! invalid):
//!
//! * [`Escaping::AllowUtf8`]: the name as it is.
//! * [`Escaping::Underscores`]: a legacy name as it is; otherwise each
//!   invalid character becomes one `_` (`metric.name/with/slashes` →
//!   `metric_name_with_slashes`, `0abc` → `_abc`, `花火` → `__`).
//! * [`Escaping::Dots`]: every name, legacy or not, is rewritten: `.`
//!   becomes `_dot_`, `_` becomes `__`, every other invalid character
//!   becomes `__` (`mysystem.prod.load_total` →
//!   `mysystem_dot_prod_dot_load__total`, `no:escaping_required` →
//!   `no:escaping__required`, `label with 😱` → `label__with____`).
//! * [`Escaping::Values`]: a legacy name as it is; otherwise `U__`, then
//!   each character: a valid one as it is, `_` as `__`, an invalid one as
//!   `_`, its code point in lower-case hexadecimal without leading zeros,
//!   `_` (`mysystem.prod` → `U__mysystem_2e_prod`, `label with 😱` →
//!   `U__label_20_with_20__1f631_`, `0abc` → `U___30_abc`).
//!
//! Where the sources disagree, the code of prometheus/common (with its
//! `model/metric_test.go`) decides over the prose of the Prometheus
//! "escaping schemes" page (`docs/instrumenting/escaping_schemes.md`):
//!
//! * Dots turns an invalid character other than `.` into `__`; the page
//!   says a single `_`. Neither is reversible (`a b` and `a_b` both give
//!   `a__b`; with a single `_`, `a dot b` and `a.b` would both give
//!   `a_dot_b`); the code's choice is what Go targets send.
//! * Values writes the code point in lower case (`_2e_`); the page's
//!   example shows `_2E_`. Unescaping accepts both.
//! * Dots rewrites legacy names too, as `EscapeName` does and as the page
//!   says ("existing underscores MUST be replaced"). Only so is the scheme
//!   reversible where it can be: with legacy names left alone,
//!   `a_dot_b` (legacy) and `a.b` would both give `a_dot_b`. (client_golang's
//!   `EscapeMetricFamily` skips legacy names before calling `EscapeName`, so
//!   a Go target sends `no:escaping_required` unchanged under Dots.)
//!
//! Label names follow the same rules with the label pattern: `:` is
//! invalid in a label name, so `a:b` becomes `a_b` (Underscores), `a__b`
//! (Dots) or `U__a_3a_b` (Values). prometheus/common judges label names by
//! the metric pattern, which lets `:` through into a name Prometheus's own
//! text parser refuses; here every output is a legacy label name.
//!
//! Every non-empty name escaped by Underscores, Dots or Values is a legacy
//! name of its kind. Values is reversible: distinct names give distinct
//! results, except that a legacy name that itself looks escaped
//! (`U___2e_`) is left alone and so reads the same as the name it would
//! decode to (`.`), a flaw of the scheme itself. Dots is reversible on
//! names made only of legacy characters and `.` that do not start with a
//! digit.
//!
//! An empty name stays empty in every scheme (as in `EscapeName`): it is
//! no name, and no scheme can make it a valid one without inventing one.
//!
//! # Quoting
//!
//! The 1.0.0 text formats (text 1.0.0, OpenMetrics 1.0.0) write a name that
//! is not legacy in double quotes (metric names inside the braces:
//! `{"http.server.requests","http.request.method"="get"} 171`), with `\`,
//! `"` and a line feed escaped as `\\`, `\"` and `\n` ([`write_quoted`],
//! the same rule as label values; prometheus/common's `writeName`). Under
//! [`Escaping::AllowUtf8`] [`needs_quotes_metric`] and
//! [`needs_quotes_label`] say which names need it: those that are not
//! legacy names of their kind (the empty name included, written `""`).
//!
//! # Cost
//!
//! This runs for every series of every scrape. Each function appends to
//! the caller's buffer and allocates nothing else; a name that needs no
//! change (the usual case) is checked with one branch-free pass over its
//! bytes and copied whole.

use super::negotiate::Escaping;

/// Bit of [`CLASS`]: the byte may start a legacy metric name (`[a-zA-Z_:]`).
const METRIC_START: u8 = 1;
/// Bit of [`CLASS`]: the byte may follow in a legacy metric name
/// (`[a-zA-Z0-9_:]`).
const METRIC_REST: u8 = 2;
/// Bit of [`CLASS`]: the byte may start a legacy label name (`[a-zA-Z_]`).
const LABEL_START: u8 = 4;
/// Bit of [`CLASS`]: the byte may follow in a legacy label name
/// (`[a-zA-Z0-9_]`).
const LABEL_REST: u8 = 8;

/// What each byte may be in a legacy name; 0 for every non-ASCII byte.
const CLASS: [u8; 256] = {
    let mut class = [0u8; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        if c.is_ascii_alphabetic() || c == b'_' {
            class[b] = METRIC_START | METRIC_REST | LABEL_START | LABEL_REST;
        } else if c.is_ascii_digit() {
            class[b] = METRIC_REST | LABEL_REST;
        } else if c == b':' {
            class[b] = METRIC_START | METRIC_REST;
        }
        b += 1;
    }
    class
};

/// Which legacy pattern a name is held to: the [`CLASS`] bits for its first
/// byte and for the others.
#[derive(Clone, Copy)]
struct Kind {
    start: u8,
    rest: u8,
}

/// Metric names: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
const METRIC: Kind = Kind {
    start: METRIC_START,
    rest: METRIC_REST,
};
/// Label names: `[a-zA-Z_][a-zA-Z0-9_]*`.
const LABEL: Kind = Kind {
    start: LABEL_START,
    rest: LABEL_REST,
};

impl Kind {
    /// Whether byte `b` at byte offset `at` of a name is valid there.
    #[inline]
    fn valid(self, b: u8, at: usize) -> bool {
        let bit = if at == 0 { self.start } else { self.rest };
        CLASS[usize::from(b)] & bit != 0
    }

    /// Whether `s` is a non-empty legacy name of this kind.
    #[inline]
    fn is_legacy(self, s: &str) -> bool {
        let Some((&first, rest)) = s.as_bytes().split_first() else {
            return false;
        };
        // Names are short: a branch-free pass (which the compiler
        // vectorises) beats a search with an early exit.
        let rest_ok = rest
            .iter()
            .fold(true, |ok, &b| ok & (CLASS[usize::from(b)] & self.rest != 0));
        (CLASS[usize::from(first)] & self.start != 0) & rest_ok
    }
}

/// Whether `s` is a legacy metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`, not
/// empty.
#[must_use]
pub fn is_legacy_metric_name(s: &str) -> bool {
    METRIC.is_legacy(s)
}

/// Whether `s` is a legacy label name: `[a-zA-Z_][a-zA-Z0-9_]*`, not
/// empty.
#[must_use]
pub fn is_legacy_label_name(s: &str) -> bool {
    LABEL.is_legacy(s)
}

/// Appends metric name `name` as `scheme` writes it (see the [module
/// docs](self)); [`Escaping::AllowUtf8`] appends it as it is (quoting is
/// the caller's, see [`needs_quotes_metric`]).
pub fn escape_metric_name(out: &mut Vec<u8>, name: &str, scheme: Escaping) {
    escape(out, name, scheme, METRIC);
}

/// Appends label name `name` as `scheme` writes it: the rules of
/// [`escape_metric_name`] with the label pattern, where `:` is invalid.
pub fn escape_label_name(out: &mut Vec<u8>, name: &str, scheme: Escaping) {
    escape(out, name, scheme, LABEL);
}

/// Whether a metric name must be quoted in the 1.0.0 text formats under
/// [`Escaping::AllowUtf8`]: it is not a legacy metric name (the empty name
/// included).
#[must_use]
pub fn needs_quotes_metric(name: &str) -> bool {
    !is_legacy_metric_name(name)
}

/// Whether a label name must be quoted in the 1.0.0 text formats under
/// [`Escaping::AllowUtf8`]: it is not a legacy label name (so `a:b` is
/// quoted, the empty name too).
#[must_use]
pub fn needs_quotes_label(name: &str) -> bool {
    !is_legacy_label_name(name)
}

/// Appends `s` in double quotes, `\` as `\\`, `"` as `\"` and a line feed
/// as `\n`; every other character (UTF-8 included) as it is.
pub fn write_quoted(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let clean = !bytes.iter().fold(false, |hit, &b| {
        hit | (b == b'\\') | (b == b'"') | (b == b'\n')
    });
    if clean {
        out.extend_from_slice(bytes);
    } else {
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let escaped: &[u8] = match b {
                b'\\' => b"\\\\",
                b'"' => b"\\\"",
                b'\n' => b"\\n",
                _ => continue,
            };
            out.extend_from_slice(&bytes[start..i]);
            out.extend_from_slice(escaped);
            start = i + 1;
        }
        out.extend_from_slice(&bytes[start..]);
    }
    out.push(b'"');
}

/// Whether `b` is a UTF-8 continuation byte (not the first of a character).
#[inline]
fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// The scheme's rule for a name of `kind`, appended to `out`.
fn escape(out: &mut Vec<u8>, name: &str, scheme: Escaping, kind: Kind) {
    let bytes = name.as_bytes();
    match scheme {
        Escaping::AllowUtf8 => out.extend_from_slice(bytes),
        Escaping::Underscores => {
            if kind.is_legacy(name) {
                out.extend_from_slice(bytes);
                return;
            }
            out.reserve(bytes.len());
            // One `_` per invalid character: a character starts at every
            // byte that is not a continuation byte, and only ASCII is valid.
            for (i, &b) in bytes.iter().enumerate() {
                if kind.valid(b, i) {
                    out.push(b);
                } else if !is_continuation(b) {
                    out.push(b'_');
                }
            }
        }
        Escaping::Dots => {
            if kind.is_legacy(name) && !bytes.contains(&b'_') {
                out.extend_from_slice(bytes);
                return;
            }
            out.reserve(bytes.len() + bytes.len() / 2);
            for (i, &b) in bytes.iter().enumerate() {
                if b == b'_' {
                    out.extend_from_slice(b"__");
                } else if b == b'.' {
                    out.extend_from_slice(b"_dot_");
                } else if kind.valid(b, i) {
                    out.push(b);
                } else if !is_continuation(b) {
                    out.extend_from_slice(b"__");
                }
            }
        }
        Escaping::Values => {
            if kind.is_legacy(name) || name.is_empty() {
                out.extend_from_slice(bytes);
                return;
            }
            out.reserve(bytes.len() + 8);
            out.extend_from_slice(b"U__");
            for (i, c) in name.char_indices() {
                // Valid characters are ASCII, so `c as u8` is `c` when it is.
                let b = if c.is_ascii() { c as u8 } else { 0x80 };
                if b == b'_' {
                    out.extend_from_slice(b"__");
                } else if kind.valid(b, i) {
                    out.push(b);
                } else {
                    out.push(b'_');
                    push_hex(out, u32::from(c));
                    out.push(b'_');
                }
            }
        }
    }
}

/// Appends `v` in lower-case hexadecimal without leading zeros (`0` for 0).
fn push_hex(out: &mut Vec<u8>, v: u32) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // A code point has at most 6 hex digits (U+10FFFF).
    let mut buf = [0u8; 8];
    let mut n = buf.len();
    let mut v = v;
    loop {
        n -= 1;
        buf[n] = DIGITS[(v & 0xF) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[n..]);
}

#[cfg(test)]
mod tests;
