use super::*;
use proptest::prelude::*;

use Escaping::{AllowUtf8, Dots, Underscores, Values};

fn metric(name: &str, scheme: Escaping) -> String {
    let mut out = Vec::new();
    escape_metric_name(&mut out, name, scheme);
    String::from_utf8(out).expect("escaped names are UTF-8")
}

fn label(name: &str, scheme: Escaping) -> String {
    let mut out = Vec::new();
    escape_label_name(&mut out, name, scheme);
    String::from_utf8(out).expect("escaped names are UTF-8")
}

fn quoted(s: &str) -> String {
    let mut out = Vec::new();
    write_quoted(&mut out, s);
    String::from_utf8(out).expect("quoted names are UTF-8")
}

/// prometheus/common `model/metric_test.go` `TestEscapeName` (input,
/// underscores, dots, values), and the escaping-schemes page's examples.
#[test]
fn upstream_examples() {
    for (input, underscores, dots, values) in [
        // metric_test.go "empty string".
        ("", "", "", ""),
        // "legacy valid name": Dots doubles the underscore anyway.
        (
            "no:escaping_required",
            "no:escaping_required",
            "no:escaping__required",
            "no:escaping_required",
        ),
        // "name with dots".
        (
            "mysystem.prod.west.cpu.load",
            "mysystem_prod_west_cpu_load",
            "mysystem_dot_prod_dot_west_dot_cpu_dot_load",
            "U__mysystem_2e_prod_2e_west_2e_cpu_2e_load",
        ),
        // "name with dots and underscore".
        (
            "mysystem.prod.west.cpu.load_total",
            "mysystem_prod_west_cpu_load_total",
            "mysystem_dot_prod_dot_west_dot_cpu_dot_load__total",
            "U__mysystem_2e_prod_2e_west_2e_cpu_2e_load__total",
        ),
        // "name with dots and colon".
        (
            "http.status:sum",
            "http_status:sum",
            "http_dot_status:sum",
            "U__http_2e_status:sum",
        ),
        // "name with spaces and emoji".
        (
            "label with 😱",
            "label_with__",
            "label__with____",
            "U__label_20_with_20__1f631_",
        ),
        // "name with unicode characters > 0x100".
        ("花火", "__", "____", "U___82b1__706b_"),
        // "name with spaces and edge-case value".
        (
            "label with \u{100}",
            "label_with__",
            "label__with____",
            "U__label_20_with_20__100_",
        ),
        // escaping_schemes.md: underscores example.
        (
            "metric.name/with/slashes",
            "metric_name_with_slashes",
            "metric_dot_name__with__slashes",
            "U__metric_2e_name_2f_with_2f_slashes",
        ),
        // escaping_schemes.md: dots example.
        (
            "metric.name.with.dots",
            "metric_name_with_dots",
            "metric_dot_name_dot_with_dot_dots",
            "U__metric_2e_name_2e_with_2e_dots",
        ),
        // escaping_schemes.md: values example (`U__metric_2E_name` there, lower case in the code).
        (
            "metric.name",
            "metric_name",
            "metric_dot_name",
            "U__metric_2e_name",
        ),
        // A leading digit is invalid; further digits are not.
        ("0abc9", "_abc9", "__abc9", "U___30_abc9"),
        // A single invalid character.
        (".", "_", "_dot_", "U___2e_"),
        // Control characters and the quote.
        ("a\n\"b", "a__b", "a____b", "U__a_a__22_b"),
        // The largest code point, and U+FFFD itself.
        ("\u{10FFFF}\u{FFFD}", "__", "____", "U___10ffff__fffd_"),
    ] {
        assert_eq!(
            metric(input, Underscores),
            underscores,
            "underscores {input:?}"
        );
        assert_eq!(metric(input, Dots), dots, "dots {input:?}");
        assert_eq!(metric(input, Values), values, "values {input:?}");
        assert_eq!(metric(input, AllowUtf8), input, "allow-utf-8 {input:?}");
        assert_eq!(unescape_values(values).as_deref(), Some(input));
    }
}

/// Label names: the same rules, `:` invalid.
#[test]
fn label_names() {
    for (input, underscores, dots, values) in [
        ("", "", "", ""),
        ("tag", "tag", "tag", "tag"),
        ("a:b", "a_b", "a__b", "U__a_3a_b"),
        (":a", "_a", "__a", "U___3a_a"),
        (
            "http.request.method",
            "http_request_method",
            "http_dot_request_dot_method",
            "U__http_2e_request_2e_method",
        ),
        ("a_b", "a_b", "a__b", "a_b"),
        ("0a", "_a", "__a", "U___30_a"),
        ("é", "_", "__", "U___e9_"),
    ] {
        assert_eq!(
            label(input, Underscores),
            underscores,
            "underscores {input:?}"
        );
        assert_eq!(label(input, Dots), dots, "dots {input:?}");
        assert_eq!(label(input, Values), values, "values {input:?}");
        assert_eq!(label(input, AllowUtf8), input, "allow-utf-8 {input:?}");
    }
    // The same `a:b` is a legacy metric name.
    assert_eq!(metric("a:b", Underscores), "a:b");
    assert_eq!(metric("a:b", Values), "a:b");
    assert_eq!(metric("a:b", Dots), "a:b");
}

#[test]
fn legacy_patterns() {
    for (s, as_metric, as_label) in [
        ("", false, false),
        ("a", true, true),
        ("_", true, true),
        (":", true, false),
        ("a:b", true, false),
        ("abc_XYZ_019", true, true),
        ("0", false, false),
        ("0a", false, false),
        ("a0", true, true),
        ("a.b", false, false),
        ("a-b", false, false),
        ("a b", false, false),
        ("é", false, false),
        ("aé", false, false),
        ("__name__", true, true),
    ] {
        assert_eq!(is_legacy_metric_name(s), as_metric, "metric {s:?}");
        assert_eq!(is_legacy_label_name(s), as_label, "label {s:?}");
        assert_eq!(needs_quotes_metric(s), !as_metric, "metric {s:?}");
        assert_eq!(needs_quotes_label(s), !as_label, "label {s:?}");
    }
}

#[test]
fn quoting() {
    assert_eq!(quoted(""), "\"\"");
    assert_eq!(quoted("http.server.requests"), "\"http.server.requests\"");
    assert_eq!(quoted("a\"b\\c\nd"), "\"a\\\"b\\\\c\\nd\"");
    assert_eq!(quoted("花火 😱\t\r"), "\"花火 😱\t\r\"");
    assert_eq!(quoted("\\"), "\"\\\\\"");
    assert_eq!(quoted("\"\""), "\"\\\"\\\"\"");
}

/// Output is appended, never replacing what the buffer held.
#[test]
fn appends() {
    let mut out = b"x ".to_vec();
    escape_metric_name(&mut out, "a.b", Values);
    out.push(b' ');
    escape_label_name(&mut out, "ok", Dots);
    out.push(b' ');
    escape_label_name(&mut out, "c.d", Underscores);
    out.push(b' ');
    write_quoted(&mut out, "q");
    assert_eq!(out, b"x U__a_2e_b ok c_d \"q\"");
}

/// Names at the scale of a scrape (100k series, every scheme, metric and
/// label): completes, and the output is what the reference gives.
#[test]
fn many_names() {
    let names: Vec<String> = (0..100_000)
        .map(|i| match i % 4 {
            0 => format!("rollstat_series_{i}_total"),
            1 => format!("http.server.requests.{i}"),
            2 => format!("tag:{i}"),
            _ => format!("名前_{i}"),
        })
        .collect();
    let mut out = Vec::with_capacity(8 << 20);
    let mut want = String::with_capacity(8 << 20);
    for scheme in [AllowUtf8, Underscores, Dots, Values] {
        for n in &names {
            escape_metric_name(&mut out, n, scheme);
            escape_label_name(&mut out, n, scheme);
            want.push_str(&reference(n, scheme, false));
            want.push_str(&reference(n, scheme, true));
        }
    }
    assert!(out == want.as_bytes());
}

/// prometheus/common `UnescapeName` for Values, written here: `None` where
/// it would give its input back because it does not decode.
fn unescape_values(s: &str) -> Option<String> {
    let Some(body) = s.strip_prefix("U__") else {
        return Some(s.to_string());
    };
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '_' {
            out.push(c);
            continue;
        }
        let mut code = String::new();
        loop {
            match chars.next()? {
                '_' if code.is_empty() => {
                    out.push('_');
                    break;
                }
                '_' => {
                    out.push(char::from_u32(u32::from_str_radix(&code, 16).ok()?)?);
                    break;
                }
                h if h.is_ascii_hexdigit() && code.len() < 6 => code.push(h),
                _ => return None,
            }
        }
    }
    Some(out)
}

/// prometheus/common `UnescapeName` for Dots.
fn unescape_dots(s: &str) -> String {
    s.replace("_dot_", ".").replace("__", "_")
}

/// `EscapeName` as written in prometheus/common, character by character,
/// with the label pattern for label names: the reference the fast code is
/// held to.
fn reference(name: &str, scheme: Escaping, label: bool) -> String {
    let valid = |c: char, i: usize| {
        c.is_ascii_alphabetic() || c == '_' || (c == ':' && !label) || (c.is_ascii_digit() && i > 0)
    };
    let legacy = !name.is_empty() && name.char_indices().all(|(i, c)| valid(c, i));
    let mut out = String::new();
    match scheme {
        AllowUtf8 => out.push_str(name),
        Underscores if legacy => out.push_str(name),
        Underscores => {
            for (i, c) in name.char_indices() {
                out.push(if valid(c, i) { c } else { '_' });
            }
        }
        Dots => {
            for (i, c) in name.char_indices() {
                match c {
                    '_' => out.push_str("__"),
                    '.' => out.push_str("_dot_"),
                    c if valid(c, i) => out.push(c),
                    _ => out.push_str("__"),
                }
            }
        }
        Values if legacy || name.is_empty() => out.push_str(name),
        Values => {
            out.push_str("U__");
            for (i, c) in name.char_indices() {
                match c {
                    '_' => out.push_str("__"),
                    c if valid(c, i) => out.push(c),
                    c => out.push_str(&format!("_{:x}_", u32::from(c))),
                }
            }
        }
    }
    out
}

/// Names to try: any string, and strings made of the characters that
/// matter (legacy ones, `.`, `_`, `:`, digits, space, quote, non-ASCII).
fn any_name() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-zA-Z0-9_:. \"\\\\\n\u{e9}\u{82b1}\u{1f631}]{0,24}",
    ]
}

/// Names Dots can decode: legacy characters and `.`, no leading digit.
fn dots_name() -> impl Strategy<Value = String> {
    "([a-zA-Z_:.][a-zA-Z0-9_:.]{0,20})?"
}

const SCHEMES: [Escaping; 4] = [AllowUtf8, Underscores, Dots, Values];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The fast code is `EscapeName`'s rule, for both kinds of name.
    #[test]
    fn matches_reference(name in any_name()) {
        for scheme in SCHEMES {
            prop_assert_eq!(metric(&name, scheme), reference(&name, scheme, false), "{:?}", scheme);
            prop_assert_eq!(label(&name, scheme), reference(&name, scheme, true), "{:?}", scheme);
        }
    }

    /// (a) Every non-empty name escaped by a scheme other than AllowUtf8 is
    /// a legacy name of its kind.
    #[test]
    fn escaped_names_are_legacy(name in any_name()) {
        for scheme in [Underscores, Dots, Values] {
            if name.is_empty() {
                prop_assert_eq!(metric(&name, scheme), "");
                prop_assert_eq!(label(&name, scheme), "");
                continue;
            }
            let m = metric(&name, scheme);
            prop_assert!(is_legacy_metric_name(&m), "{:?} {:?} -> {:?}", scheme, name, m);
            let l = label(&name, scheme);
            prop_assert!(is_legacy_label_name(&l), "{:?} {:?} -> {:?}", scheme, name, l);
        }
    }

    /// (b) Values decodes back to every name that needs escaping (so
    /// distinct such names give distinct results), metric and label names
    /// alike. A legacy name is left as it is, even one that decodes to
    /// something else (`U__` reads as the empty name): the scheme's flaw.
    #[test]
    fn values_decodes_back(name in any_name()) {
        let m = metric(&name, Values);
        if is_legacy_metric_name(&name) {
            prop_assert_eq!(&m, &name);
        } else {
            prop_assert_eq!(unescape_values(&m), Some(name.clone()));
        }
        let l = label(&name, Values);
        if is_legacy_label_name(&name) {
            prop_assert_eq!(&l, &name);
        } else {
            prop_assert_eq!(unescape_values(&l), Some(name));
        }
    }

    /// (b) Values and Dots, pairwise: two distinct names give distinct
    /// results (Values: among names that are not legacy; Dots: among names
    /// of legacy characters and `.` without a leading digit).
    #[test]
    fn injective_on_pairs(a in any_name(), b in any_name(), da in dots_name(), db in dots_name()) {
        if a != b && needs_quotes_metric(&a) && needs_quotes_metric(&b) {
            prop_assert_ne!(metric(&a, Values), metric(&b, Values));
        }
        if a != b && needs_quotes_label(&a) && needs_quotes_label(&b) {
            prop_assert_ne!(label(&a, Values), label(&b, Values));
        }
        if da != db {
            prop_assert_ne!(metric(&da, Dots), metric(&db, Dots));
        }
    }

    /// (b) Dots decodes back on its domain: legacy characters and `.`, no
    /// leading digit (`:` excluded for label names, where it is invalid).
    #[test]
    fn dots_decodes_back(name in dots_name()) {
        prop_assert_eq!(unescape_dots(&metric(&name, Dots)), name.clone());
        let label_name = name.replace(':', "x");
        prop_assert_eq!(unescape_dots(&label(&label_name, Dots)), label_name);
    }

    /// (c) Legacy names are unchanged under Underscores and Values, and
    /// every name under AllowUtf8.
    #[test]
    fn legacy_names_unchanged(name in "[a-zA-Z_:][a-zA-Z0-9_:]{0,30}", any in any_name()) {
        for scheme in [Underscores, Values] {
            prop_assert_eq!(metric(&name, scheme), name.clone());
            if is_legacy_label_name(&name) {
                prop_assert_eq!(label(&name, scheme), name.clone());
            }
        }
        prop_assert_eq!(metric(&any, AllowUtf8), any.clone());
        prop_assert_eq!(label(&any, AllowUtf8), any);
    }

    /// Underscores replaces character for character.
    #[test]
    fn underscores_keeps_the_length(name in any_name()) {
        prop_assert_eq!(metric(&name, Underscores).len(), name.chars().count());
        prop_assert_eq!(label(&name, Underscores).len(), name.chars().count());
    }

    /// Quoting reads back: strip the quotes, undo the three escapes.
    #[test]
    fn quoting_reads_back(s in any_name()) {
        let q = quoted(&s);
        prop_assert!(q.len() >= 2 && q.starts_with('"') && q.ends_with('"'));
        let inner = &q[1..q.len() - 1];
        prop_assert!(!inner.contains('\n'));
        let mut back = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '"' {
                prop_assert!(false, "bare quote in {:?}", q);
            }
            if c == '\\' {
                match chars.next() {
                    Some('\\') => back.push('\\'),
                    Some('"') => back.push('"'),
                    Some('n') => back.push('\n'),
                    other => prop_assert!(false, "bad escape {:?} in {:?}", other, q),
                }
            } else {
                back.push(c);
            }
        }
        prop_assert_eq!(back, s);
    }
}

/// The scheme's documented limits, pinned so a change is noticed.
#[test]
fn documented_collisions() {
    // Dots: an invalid character and an underscore give the same result.
    assert_eq!(metric("a b", Dots), metric("a_b", Dots));
    // Dots: a leading digit and a leading underscore too.
    assert_eq!(metric("0a", Dots), metric("_a", Dots));
    // Values: a legacy name that looks escaped is left alone.
    assert_eq!(metric("U___2e_", Values), metric(".", Values));
    assert_eq!(metric("U__", Values), "U__");
    assert_eq!(unescape_values("U__").as_deref(), Some(""));
}
