//! statsd_exporter's two template languages, translated to rollstat's
//! ([`crate::mapping::Template`]: `${n}`, `${name}`, `$$` for a literal `$`).
//! Pure functions, no I/O.
//!
//! * A **glob** rule's `name` and label values go through statsd_exporter's
//!   `fsm.TemplateFormatter`: `$` then an optional `{`, the longest run of
//!   `[A-Za-z0-9_$]`, an optional `}`. A run that is a number from 1 to the
//!   number of wildcards is that capture; any other run (`$1x`, `$name`,
//!   `$$`, `$9` with two wildcards) is replaced by nothing. A `$` not
//!   followed by such a run is kept as it is.
//! * A **regex** rule's go through Go's `regexp.Expand`: `$$` is a `$`;
//!   `${name}` (letters, digits, `_` between the braces) or `$name` (the
//!   longest run of them) is group `name`: a number is that group (`$0` the
//!   whole match), a name the first group so named; a group that does not
//!   exist or took no part in the match gives nothing, so `$1x` is the
//!   (missing) group `1x`, not `$1` then `x`. A `$` that starts neither form
//!   is kept as it is.
//!
//! statsd_exporter matches a regex anywhere in the name; rollstat anchors
//! its regexes to the whole name. So a rule's regex `p` is translated to
//! `.*?(p).*` (the leftmost match, as Go finds it), which shifts every
//! numbered group by one: Go's `$n` is rollstat's `${n+1}`, and `$0` (the
//! part of the name that matched) is `${1}`.

/// A glob rule's template with `wildcards` captures, in rollstat's syntax.
#[must_use]
pub fn from_glob(t: &str, wildcards: usize) -> String {
    let b = t.as_bytes();
    let mut out = String::with_capacity(t.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' {
            let next = t[i..].find('$').map_or(t.len(), |n| i + n);
            push_literal(&mut out, &t[i..next]);
            i = next;
            continue;
        }
        let mut j = i + 1;
        if b.get(j) == Some(&b'{') {
            j += 1;
        }
        let run = b[j..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || **c == b'$')
            .count();
        if run == 0 {
            // No reference: statsd_exporter's pattern does not match here,
            // so the `$` (and a `{` after it) stay as written.
            out.push_str("$$");
            i += 1;
            continue;
        }
        let name = &t[j..j + run];
        j += run;
        if b.get(j) == Some(&b'}') {
            j += 1;
        }
        if let Some(n) = number(name).filter(|n| (1..=wildcards).contains(n)) {
            out.push_str(&format!("${{{n}}}"));
        }
        i = j;
    }
    out
}

/// A regex rule's template, in rollstat's syntax for the translated regex
/// `.*?(p).*`: `groups` is the number of groups of `p`, `named` gives the
/// number of a named group in the translated regex.
#[must_use]
pub fn from_regex(t: &str, groups: usize, named: impl Fn(&str) -> Option<usize>) -> String {
    let b = t.as_bytes();
    let mut out = String::with_capacity(t.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' {
            let next = t[i..].find('$').map_or(t.len(), |n| i + n);
            push_literal(&mut out, &t[i..next]);
            i = next;
            continue;
        }
        if b.get(i + 1) == Some(&b'$') {
            out.push_str("$$");
            i += 2;
            continue;
        }
        let word = |from: usize| {
            b[from..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count()
        };
        let (name, next) = if b.get(i + 1) == Some(&b'{') {
            let n = word(i + 2);
            if n == 0 || b.get(i + 2 + n) != Some(&b'}') {
                (None, i + 1)
            } else {
                (Some(&t[i + 2..i + 2 + n]), i + 3 + n)
            }
        } else {
            let n = word(i + 1);
            if n == 0 {
                (None, i + 1)
            } else {
                (Some(&t[i + 1..i + 1 + n]), i + 1 + n)
            }
        };
        let Some(name) = name else {
            // Malformed: Go keeps the `$` as text.
            out.push_str("$$");
            i = next;
            continue;
        };
        // `.*?(p).*`: group n of p is group n + 1 (and $0 is group 1).
        let group = match number(name) {
            Some(n) => (n <= groups).then_some(n + 1),
            None => named(name),
        };
        if let Some(g) = group {
            out.push_str(&format!("${{{g}}}"));
        }
        i = next;
    }
    out
}

/// `p` as rollstat's whole-name regex that finds what Go's unanchored
/// search finds: the leftmost match of `p`, as group 1.
#[must_use]
pub fn unanchored(p: &str) -> String {
    format!(".*?({p}).*")
}

/// `s` as a decimal number, if it is one (digits only, as Go's `Atoi` and
/// `regexp.Expand` read a reference); `None` for other text or overflow.
fn number(s: &str) -> Option<usize> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `s` as literal template text: `$` doubled.
fn push_literal(out: &mut String, s: &str) {
    for c in s.chars() {
        if c == '$' {
            out.push('$');
        }
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_templates_read_as_the_fsm_formatter_reads_them() {
        assert_eq!(from_glob("${1}_$2", 2), "${1}_${2}");
        // The run takes `_` and `$` too: `$1_foo` is one (unknown)
        // reference, as statsd_exporter's own test "Config with bad regex
        // reference" shows (label "$1_foo" becomes "").
        assert_eq!(from_glob("$1_foo", 1), "");
        assert_eq!(from_glob("foo_$1_${2}", 2), "foo_{2}");
        // Out of range, named, `$1x` (one run "1x") and `$$`: nothing (and the
        // run takes the letters after the reference: `$3b` is run "3b").
        assert_eq!(from_glob("a${3}b", 2), "ab");
        assert_eq!(from_glob("a$3b", 2), "a");
        assert_eq!(from_glob("a${name}b", 2), "ab");
        assert_eq!(from_glob("a$1x.b", 2), "a.b");
        assert_eq!(from_glob("a$$.b", 2), "a.b");
        assert_eq!(from_glob("$0", 2), "");
        // A brace on either side is optional.
        assert_eq!(from_glob("${1", 1), "${1}");
        assert_eq!(from_glob("$1}", 1), "${1}");
        // No reference: the `$` stays.
        assert_eq!(from_glob("cost$-usd", 1), "cost$$-usd");
        assert_eq!(from_glob("plain", 0), "plain");
    }

    #[test]
    fn regex_templates_read_as_go_expand_reads_them() {
        // In the translated regex `.*?((\w+)\.(?P<host>\w+))`, `host` is group 3.
        let named = |n: &str| (n == "host").then_some(3);
        assert_eq!(from_regex("$1", 2, named), "${2}");
        assert_eq!(from_regex("${2}_x", 2, named), "${3}_x");
        assert_eq!(from_regex("$0", 2, named), "${1}");
        assert_eq!(from_regex("${host}", 2, named), "${3}");
        assert_eq!(from_regex("$host", 2, named), "${3}");
        // `$1x` is group "1x", which does not exist.
        assert_eq!(from_regex("a$1xb", 2, named), "a");
        assert_eq!(from_regex("a${1}xb", 2, named), "a${2}xb");
        assert_eq!(from_regex("$3", 2, named), "");
        assert_eq!(from_regex("$nope", 2, named), "");
        // `$$` and malformed references are text.
        assert_eq!(from_regex("1$$", 2, named), "1$$");
        assert_eq!(from_regex("a$-b", 2, named), "a$$-b");
        assert_eq!(from_regex("a${-}b", 2, named), "a$${-}b");
    }

    #[test]
    fn translated_templates_compile_and_render_as_statsd_exporter_would() {
        use crate::mapping::{Glob, NameRegex};
        let g = Glob::new("svc.*.*").unwrap();
        let t = crate::mapping::Template::new(&from_glob("${2}_by_${1}", 2), g.captures()).unwrap();
        let mut caps = Vec::new();
        assert!(g.matches("svc.api.latency", &mut caps));
        assert_eq!(t.render(&caps), "latency_by_api");

        let r = NameRegex::new(&unanchored(r"(\w+)\.status\.(\d+)")).unwrap();
        let tpl = from_regex("${2}_${1}_$0", 2, |n| r.group_index(n));
        let t =
            crate::mapping::Template::compile(&tpl, r.captures(), "regex", |n| r.group_index(n))
                .unwrap();
        let mut caps = Vec::new();
        // Go finds the match inside the name: "web.status.200" of "x.web.status.200.count".
        assert!(r.matches("x.web.status.200.count", &mut caps));
        assert_eq!(t.render(&caps), "200_web_web.status.200");
    }
}
