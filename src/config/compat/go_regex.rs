//! A statsd_exporter rule's `match` under `match_type: regex`, read as Go's
//! RE2 syntax (`regexp/syntax`) and written in the `regex` crate's.
//!
//! The two syntaxes mostly agree; where they do not, the Go reading wins:
//!
//! | Go | here |
//! | --- | --- |
//! | `\d`, `\w`, `\s`, `\b` (and negations) are ASCII | spelled as ASCII classes (`[0-9]`, `(?-u:\b)`) |
//! | `&&`, `--`, `~~` in a class are literal characters | escaped (the crate reads them as set operations) |
//! | `\<`, `\>` and other escaped punctuation are the character | the character, escaped where needed |
//! | `\Q...\E` is literal text | each character escaped |
//! | octal `\0`, `\012`, `\12` | `\x{a}` |
//! | flags `i`, `m`, `s`, `U` only | any other flag (`x`, `u`, `R`) refused |
//! | a repeat count above 1000 is an error | refused |
//!
//! Anything else is passed through, and the crate's own parser then refuses
//! what is invalid in both (an unbalanced `)`, a backreference `\1`).

use std::fmt::Write as _;

/// The largest repeat count Go's RE2 takes (`{n}`, `{n,m}`).
const MAX_REPEAT: u32 = 1000;

/// `p`, a Go regex, in the `regex` crate's syntax; `Err` with why when Go
/// would refuse it for a reason the crate would not see.
pub fn translate(p: &str) -> Result<String, String> {
    let c: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 8);
    let mut i = 0;
    // Inside a class: where it began (for `[]a]`, whose first `]` is text).
    let mut class: Option<usize> = None;
    while i < c.len() {
        let ch = c[i];
        match (ch, class) {
            ('\\', _) => i = escape(&c, i, class.is_some(), &mut out)?,
            ('[', None) => {
                class = Some(i);
                out.push('[');
                i += 1;
                if c.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if c.get(i) == Some(&']') {
                    out.push_str("\\]");
                    i += 1;
                }
            }
            ('[', Some(_)) if c.get(i + 1) == Some(&':') => {
                // `[:alpha:]`: copied to its closing `:]`.
                let end = (i + 2..c.len().saturating_sub(1))
                    .find(|&j| c[j] == ':' && c[j + 1] == ']')
                    .map_or(c.len(), |j| j + 2);
                out.extend(&c[i..end]);
                i = end;
            }
            ('[', Some(_)) => {
                out.push_str("\\[");
                i += 1;
            }
            (']', Some(_)) => {
                class = None;
                out.push(']');
                i += 1;
            }
            ('&' | '~', Some(_)) | ('-', Some(_)) if c.get(i + 1) == Some(&ch) => {
                // A set operation to the crate, two characters to Go.
                out.push('\\');
                out.push(ch);
                i += 1;
            }
            ('(', None) if c.get(i + 1) == Some(&'?') => {
                flags(&c, i)?;
                out.push(ch);
                i += 1;
            }
            ('{', None) => {
                repeat(&c, i)?;
                out.push(ch);
                i += 1;
            }
            _ => {
                out.push(ch);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// The escape at `c[i]` (a `\`) written to `out`; the index after it.
fn escape(c: &[char], i: usize, in_class: bool, out: &mut String) -> Result<usize, String> {
    let Some(&e) = c.get(i + 1) else {
        return Err("trailing backslash at end of expression".into());
    };
    let ascii = |set: &str, negated: bool, out: &mut String| match (in_class, negated) {
        (true, false) => out.push_str(set),
        (_, true) => {
            let _ = write!(out, "[^{set}]");
        }
        (false, false) => {
            let _ = write!(out, "[{set}]");
        }
    };
    match e {
        'd' | 'D' => ascii("0-9", e == 'D', out),
        'w' | 'W' => ascii("0-9A-Za-z_", e == 'W', out),
        's' | 'S' => ascii("\\t\\n\\f\\r ", e == 'S', out),
        'b' | 'B' if !in_class => {
            let _ = write!(out, "(?-u:\\{e})");
        }
        'Q' => {
            // Literal to `\E` or the end.
            let mut j = i + 2;
            while j < c.len() && !(c[j] == '\\' && c.get(j + 1) == Some(&'E')) {
                push_literal(out, c[j]);
                j += 1;
            }
            return Ok((j + 2).min(c.len()));
        }
        '0'..='7' => {
            // Go: `\0`, or two or three octal digits; a lone `\1`..`\7` is
            // a backreference, which both refuse.
            let digits = c[i + 1..]
                .iter()
                .take(3)
                .take_while(|d| ('0'..='7').contains(*d))
                .count();
            if e != '0' && digits == 1 {
                return Err(format!(
                    "invalid escape sequence `\\{e}` (a backreference: RE2 has none)"
                ));
            }
            let text: String = c[i + 1..i + 1 + digits].iter().collect();
            let v = u32::from_str_radix(&text, 8).unwrap_or(0);
            let _ = write!(out, "\\x{{{v:x}}}");
            return Ok(i + 1 + digits);
        }
        c if c.is_ascii_punctuation() => push_literal(out, c),
        _ => {
            out.push('\\');
            out.push(e);
        }
    }
    Ok(i + 2)
}

/// `c` as a literal: escaped if the crate would read it otherwise.
fn push_literal(out: &mut String, c: char) {
    // The crate's meta characters (`regex_syntax::is_meta_character`).
    if "\\.+*?()|[]{}^$#&-~".contains(c) {
        out.push('\\');
    }
    out.push(c);
}

/// Checks the flags of a group `(?...` at `c[i]`: Go takes `i`, `m`, `s`,
/// `U` (and names, `(?P<n>` and `(?<n>`).
fn flags(c: &[char], i: usize) -> Result<(), String> {
    if let Some('P' | '<') = c.get(i + 2) {
        return Ok(());
    }
    for &f in c[i + 2..].iter().take_while(|f| !matches!(f, ':' | ')')) {
        if !matches!(f, 'i' | 'm' | 's' | 'U' | '-') {
            return Err(format!(
                "invalid or unsupported Perl syntax: flag `{f}` (Go's RE2 takes i, m, s and U)"
            ));
        }
    }
    Ok(())
}

/// Checks a repeat `{n}`, `{n,}` or `{n,m}` at `c[i]` against Go's limit;
/// a `{` that does not start one is a literal, as in Go.
fn repeat(c: &[char], i: usize) -> Result<(), String> {
    let Some(len) = c[i + 1..].iter().position(|&x| x == '}') else {
        return Ok(());
    };
    let body: String = c[i + 1..i + 1 + len].iter().collect();
    let mut parts = body.splitn(2, ',');
    let lo = parts.next().unwrap_or_default();
    let hi = parts.next();
    let is_num = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !is_num(lo) || hi.is_some_and(|h| !h.is_empty() && !is_num(h)) {
        return Ok(());
    }
    let too_big = |s: &str| s.parse::<u32>().map_or(true, |n| n > MAX_REPEAT);
    if too_big(lo) || hi.is_some_and(|h| !h.is_empty() && too_big(h)) {
        return Err(format!(
            "invalid repeat count `{{{body}}}`: Go's RE2 takes at most {MAX_REPEAT}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(p: &str) -> String {
        let t = translate(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        regex::Regex::new(&t).unwrap_or_else(|e| panic!("{p} as {t}: {e}"));
        t
    }

    #[test]
    fn ordinary_patterns_pass_through() {
        for p in [
            "(.*)\\.(.*)--(.*)\\.status\\.(.*)\\.count",
            "^a(?P<x>b+)c{2,3}$",
            "[a-z]+|x{3}",
            "(?i)abc",
            "[[:alpha:]]",
        ] {
            assert_eq!(ok(p), p);
        }
    }

    #[test]
    fn go_readings_win_where_the_syntaxes_differ() {
        let m = |p: &str, s: &str| {
            regex::Regex::new(&format!("^(?:{})$", ok(p)))
                .unwrap()
                .is_match(s)
        };
        // ASCII classes, as in Go.
        assert!(!m("\\d", "٣"));
        assert!(m("\\d\\w", "3x"));
        assert!(!m("\\w", "é"));
        assert!(m("[\\d.]+", "1.5"));
        // Set operations are characters.
        assert!(m("[a&&b]", "&"));
        assert!(m("[a--b]+", "a-b"));
        // Escaped punctuation is the character.
        assert!(m("\\<a\\>", "<a>"));
        assert!(m("\\Qa.b\\E", "a.b"));
        assert!(!m("\\Qa.b\\E", "axb"));
        assert!(m("\\012", "\n"));
        assert!(m("[]a]+", "]a"));
    }

    #[test]
    fn what_go_refuses_is_refused() {
        for (p, why) in [
            ("(?x)a b", "flag `x`"),
            ("a{1001}", "at most 1000"),
            ("a{1,2000}", "at most 1000"),
            ("(a)\\1", "backreference"),
            ("a\\", "trailing backslash"),
        ] {
            let e = translate(p).expect_err(p);
            assert!(e.contains(why), "{p}: {e}");
        }
        // Both engines refuse an unbalanced group: the crate's parser
        // sees the user's text unchanged.
        let t = translate("api)|(.*").unwrap();
        assert_eq!(t, "api)|(.*");
        assert!(regex::Regex::new(&t).is_err());
    }
}
