//! Lookups that envoyproxy/ratelimit's own tests expect of its
//! `test/config/basic_config.yaml` and `wildcard.yaml` (its
//! `test/config/config_test.go`), on the same trees built by hand.

use std::path::PathBuf;

use super::*;
use crate::rls::settings::RateUnit;

fn node(
    key: &str,
    value: Option<&str>,
    limit: Option<u32>,
    below: Vec<DescriptorRule>,
) -> DescriptorRule {
    DescriptorRule {
        key: key.into(),
        value: value.map(Into::into),
        rate_limit: limit.map(|n| RateLimitSpec {
            requests_per_unit: n,
            unit: Some(RateUnit::Minute),
            unlimited: false,
            name: None,
            replaces: Vec::new(),
        }),
        shadow_mode: false,
        detailed_metric: false,
        value_to_metric: false,
        descriptors: below,
        line: 1,
    }
}

fn domains(descriptors: Vec<DescriptorRule>) -> Domains {
    Domains::new(&[DomainRules {
        domain: "test-domain".into(),
        descriptors,
        file: PathBuf::from("test.yaml"),
    }])
}

/// The limit found for `entries` and where it sits, or `None`.
fn find(d: &Domains, entries: &[(&str, &str)]) -> Option<(u32, String)> {
    d.find("test-domain", entries.iter().copied())
        .map(|r| (r.spec.requests_per_unit, r.path.clone()))
}

fn basic() -> Domains {
    domains(vec![
        node(
            "key1",
            Some("value1"),
            None,
            vec![
                node("subkey1", None, Some(5), vec![]),
                node("subkey1", Some("subvalue1"), Some(10), vec![]),
            ],
        ),
        node("key2", None, Some(20), vec![]),
        node("key2", Some("value2"), Some(30), vec![]),
        node("key2", Some("value3"), None, vec![]),
        node("key3", None, Some(1), vec![]),
        node(
            "key5",
            Some("value5"),
            Some(15),
            vec![node("subkey5", Some("subvalue5"), Some(25), vec![])],
        ),
    ])
}

#[test]
fn the_reference_services_basic_lookups() {
    let d = basic();
    assert!(d.find("foo_domain", [("key1", "value1")]).is_none());
    assert!(d.find("test-domain", []).is_none());
    assert_eq!(find(&d, &[("key1", "something")]), None);
    assert_eq!(
        find(&d, &[("key1", "value1")]),
        None,
        "no limit on the node itself"
    );
    assert_eq!(
        find(&d, &[("key2", "value2"), ("subkey", "subvalue")]),
        None,
        "deeper than the tree"
    );
    assert_eq!(
        find(&d, &[("key5", "value5"), ("subkey5", "subvalue")]),
        None,
        "stops above a limit"
    );
    let sub = |v| find(&d, &[("key1", "value1"), ("subkey1", v)]);
    assert_eq!(
        sub("something"),
        Some((5, "test-domain.key1_value1.subkey1".into()))
    );
    assert_eq!(
        sub("subvalue1"),
        Some((10, "test-domain.key1_value1.subkey1_subvalue1".into()))
    );
    assert_eq!(
        find(&d, &[("key2", "something")]),
        Some((20, "test-domain.key2".into()))
    );
    assert_eq!(
        find(&d, &[("key2", "value2")]),
        Some((30, "test-domain.key2_value2".into()))
    );
    assert_eq!(
        find(&d, &[("key2", "value3")]),
        None,
        "a node without a limit allows the value"
    );
    assert_eq!(
        find(&d, &[("key3", "foo")]),
        Some((1, "test-domain.key3".into()))
    );
    assert_eq!(
        find(&d, &[("key5", "value5")]),
        Some((15, "test-domain.key5_value5".into()))
    );
    assert_eq!(
        find(&d, &[("key5", "value5"), ("subkey5", "subvalue5")]),
        Some((25, "test-domain.key5_value5.subkey5_subvalue5".into()))
    );
}

fn wildcards() -> Domains {
    domains(vec![
        node("wild", Some("foo*"), Some(20), vec![]),
        node("noWild", Some("foo"), Some(20), vec![]),
        node("noVal", None, Some(20), vec![]),
        node("midWild", Some("bar*b"), Some(20), vec![]),
        node("multiWild", Some("foo*bar*baz"), Some(10), vec![]),
        node(
            "nestedWild",
            Some("val1"),
            None,
            vec![node("wild", Some("goo*"), Some(20), vec![])],
        ),
    ])
}

#[test]
fn the_reference_services_wildcard_lookups() {
    let d = wildcards();
    let path = |e: &[(&str, &str)]| find(&d, e).map(|(_, p)| p);
    assert_eq!(
        path(&[("noVal", "foo1")]).as_deref(),
        Some("test-domain.noVal")
    );
    assert_eq!(
        path(&[("wild", "foo1")]).as_deref(),
        Some("test-domain.wild_foo*")
    );
    assert_eq!(
        path(&[("wild", "foo")]).as_deref(),
        Some("test-domain.wild_foo*"),
        "* matches nothing too"
    );
    assert_eq!(
        path(&[("nestedWild", "val1"), ("wild", "goo2")]).as_deref(),
        Some("test-domain.nestedWild_val1.wild_goo*")
    );
    assert_eq!(path(&[("wild", "bar")]), None);
    assert_eq!(
        path(&[("noWild", "foo1")]),
        None,
        "a value without * is exact"
    );
    assert_eq!(
        path(&[("midWild", "barab")]).as_deref(),
        Some("test-domain.midWild_bar*b")
    );
    assert_eq!(
        path(&[("midWild", "bar123b")]).as_deref(),
        Some("test-domain.midWild_bar*b")
    );
    assert_eq!(
        path(&[("midWild", "barb")]).as_deref(),
        Some("test-domain.midWild_bar*b")
    );
    assert_eq!(
        path(&[("midWild", "bar")]),
        None,
        "the fixed parts may not overlap"
    );
    assert_eq!(
        path(&[("multiWild", "foo1bar2baz")]).as_deref(),
        Some("test-domain.multiWild_foo*bar*baz")
    );
    assert_eq!(
        path(&[("multiWild", "foobarbaz")]).as_deref(),
        Some("test-domain.multiWild_foo*bar*baz")
    );
    assert_eq!(
        path(&[("multiWild", "foobazbar")]),
        None,
        "the middle parts in order"
    );
}

#[test]
fn wildcard_match_agrees_with_a_regex_model() {
    // Brute force: a pattern's parts, each `*` as `.*`, anchored, against
    // every string of up to 5 characters over a small alphabet.
    let patterns = ["a*", "*a", "a*b", "a*b*a", "*", "**", "ab", "a**b", "*ab*"];
    let alphabet = ['a', 'b'];
    let mut strings = vec![String::new()];
    for len in 1..=5 {
        let mut next = Vec::new();
        for s in strings.iter().filter(|s| s.len() == len - 1) {
            for c in alphabet {
                next.push(format!("{s}{c}"));
            }
        }
        strings.extend(next);
    }
    for p in patterns {
        let parts: Vec<String> = p.split('*').map(str::to_string).collect();
        for s in &strings {
            assert_eq!(wildcard_match(&parts, s), model(p, s), "{p} against {s:?}");
        }
    }
}

/// `*` matches any run: the classic backtracking definition.
fn model(p: &str, s: &str) -> bool {
    match p.chars().next() {
        None => s.is_empty(),
        Some('*') => (0..=s.len()).any(|i| model(&p[1..], &s[i..])),
        Some(c) => s.starts_with(c) && model(&p[1..], &s[1..]),
    }
}

/// `node` with `value_to_metric` (and `detailed_metric`) set.
fn flagged(mut n: DescriptorRule, value_to_metric: bool, detailed: bool) -> DescriptorRule {
    n.value_to_metric = value_to_metric;
    n.detailed_metric = detailed;
    n
}

/// The stat name of `entries` below the domain: the rule's path where
/// the rule names no request values.
fn stat(d: &Domains, entries: &[(&str, &str)]) -> String {
    let rule = d
        .find("test-domain", entries.iter().copied())
        .expect("a rule");
    let owned: Vec<(String, String)> = entries
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    d.stat_name("test-domain", rule, &owned)
        .unwrap_or_else(|| rule.path["test-domain.".len()..].to_string())
}

// envoyproxy/ratelimit's `TestValueToMetric_*` (test/config/config_test.go).
#[test]
fn value_to_metric_names_values_as_the_reference_service_does() {
    let subject = node("subject_id", None, Some(60), vec![]);
    let method = flagged(node("http_method", None, None, vec![subject]), true, false);
    let d = domains(vec![flagged(
        node("route", None, None, vec![method]),
        true,
        false,
    )]);
    let req = [
        ("route", "draw"),
        ("http_method", "GET"),
        ("subject_id", "123"),
    ];
    assert_eq!(stat(&d, &req), "route_draw.http_method_GET.subject_id");

    // Only a middle level flagged: the levels above and below keep their key.
    let k3 = node("k3", None, Some(1), vec![]);
    let k2 = flagged(node("k2", None, None, vec![k3]), true, false);
    let d = domains(vec![node("k1", None, None, vec![k2])]);
    assert_eq!(
        stat(&d, &[("k1", "X"), ("k2", "Y"), ("k3", "Z")]),
        "k1.k2_Y.k3"
    );

    // No flag anywhere: the rule's path.
    let k2 = node("k2", None, Some(1), vec![]);
    let d = domains(vec![node("k1", None, None, vec![k2])]);
    assert_eq!(stat(&d, &[("k1", "X"), ("k2", "Y")]), "k1.k2");

    // A configured value is named as configured, flag or not.
    let subject = node("subject_id", None, Some(60), vec![]);
    let get = flagged(
        node("http_method", Some("GET"), None, vec![subject]),
        true,
        false,
    );
    let d = domains(vec![flagged(
        node("route", None, None, vec![get]),
        true,
        false,
    )]);
    let req = [
        ("route", "api"),
        ("http_method", "GET"),
        ("subject_id", "s"),
    ];
    assert_eq!(stat(&d, &req), "route_api.http_method_GET.subject_id");

    // A wildcard: the request's value with the flag, the pattern without.
    let resource = node("resource", None, Some(100), vec![]);
    let read = flagged(
        node("action", Some("read*"), None, vec![resource.clone()]),
        true,
        false,
    );
    let write = node("action", Some("write*"), None, vec![resource]);
    let d = domains(vec![flagged(
        node("user", None, None, vec![read, write]),
        true,
        false,
    )]);
    let req = [("user", "alice"), ("action", "readAll"), ("resource", "r")];
    assert_eq!(stat(&d, &req), "user_alice.action_readAll.resource");
    let req = [("user", "bob"), ("action", "writeOne"), ("resource", "r")];
    assert_eq!(stat(&d, &req), "user_bob.action_write*.resource");
}

// `TestValueToMetric_DoesNotOverrideDetailedMetric`, and detailed alone.
#[test]
fn detailed_metric_names_every_entry_whatever_value_to_metric_says() {
    let subject = flagged(node("subject_id", None, Some(60), vec![]), false, true);
    let method = flagged(node("http_method", None, None, vec![subject]), true, false);
    let d = domains(vec![flagged(
        node("route", None, None, vec![method]),
        true,
        false,
    )]);
    let req = [
        ("route", "draw"),
        ("http_method", "GET"),
        ("subject_id", "123"),
    ];
    assert_eq!(stat(&d, &req), "route_draw.http_method_GET.subject_id_123");

    let d = domains(vec![flagged(
        node("key", Some("v*"), Some(1), vec![]),
        false,
        true,
    )]);
    assert_eq!(stat(&d, &[("key", "v9")]), "key_v9");
}
