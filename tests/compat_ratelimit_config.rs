//! envoyproxy/ratelimit's own config files, read by rollstat's reader
//! (`rollstat::config::ratelimit`). The fixtures in
//! `tests/reference/ratelimit_configs/` are the reference's files byte for
//! byte (commit f2fb15770f7fd1c88ca6c3a1b58ee513917ace96) below one comment
//! line naming their source: every file of its `test/config/` and
//! `examples/ratelimit/config/`, and the YAML of its README's "Example 1"
//! to "Example 11" (so a fixture's line is the original's plus one).
//!
//! Each file either loads, or is refused as the reference refuses it (the
//! panic its `test/config/config_test.go` expects, next to the start of
//! rollstat's message), or is refused only because it sets a key rollstat
//! does not honour (`quota_mode`, `share_threshold`, `metadata`), each
//! listed with its line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rollstat::config::ratelimit::{parse, read_dir, YamlProblem};
use rollstat::rls::{DescriptorRule, DomainRules, RateUnit};

const COMMIT: &str = "f2fb15770f7fd1c88ca6c3a1b58ee513917ace96";

/// What a fixture does.
enum Expect {
    Loads,
    /// Refused as the reference refuses it: the reference's panic, then
    /// every problem rollstat reports (line, start of the message).
    Refused(&'static str, &'static [(usize, &'static str)]),
    /// Refused only for keys rollstat does not honour: (key, line) each.
    Unhonoured(&'static [(&'static str, usize)]),
}

use Expect::{Loads, Refused, Unhonoured};

const SHARE: &str = "share_threshold";

const CASES: &[(&str, Expect)] = &[
    ("examples/config.yaml", Loads),
    (
        "examples/example.yaml",
        Unhonoured(&[
            ("quota_mode", 90),
            ("metadata", 94),
            ("quota_mode", 99),
            ("metadata", 103),
        ]),
    ),
    (
        "test_config/bad_limit_unit.yaml",
        Refused(
            "bad_limit_unit.yaml: invalid rate limit unit 'foo'",
            &[(7, "invalid rate limit unit 'foo'")],
        ),
    ),
    (
        "test_config/bad_yaml.yaml",
        Refused(
            "bad_yaml.yaml: error loading config file: yaml: line 2: found unexpected end of stream",
            &[(2, "while scanning a quoted scalar, found unexpected end of stream")],
        ),
    ),
    ("test_config/basic_config.yaml", Loads),
    // Alone it loads; beside basic_config.yaml see DIRECTORIES.
    ("test_config/duplicate_domain.yaml", Loads),
    (
        "test_config/duplicate_key.yaml",
        Refused(
            "duplicate_key.yaml: duplicate descriptor composite key 'test-domain.key1_value1'",
            &[(7, "duplicate descriptor composite key 'test-domain.key1_value1'")],
        ),
    ),
    (
        "test_config/empty_domain.yaml",
        Refused(
            "empty_domain.yaml: config file cannot have empty domain",
            &[(1, "config file cannot have empty domain")],
        ),
    ),
    (
        "test_config/empty_key.yaml",
        Refused(
            "empty_key.yaml: descriptor has empty key",
            &[(4, "descriptor has empty key")],
        ),
    ),
    ("test_config/merge_domain_key1.yaml", Loads),
    ("test_config/merge_domain_key2.yaml", Loads),
    (
        "test_config/metadata.yaml",
        Unhonoured(&[("metadata", 13), ("metadata", 27)]),
    ),
    (
        "test_config/misspelled_key.yaml",
        Refused(
            "misspelled_key.yaml: config error, unknown key 'ratelimit'",
            &[(6, "config error, unknown key 'ratelimit'")],
        ),
    ),
    (
        "test_config/misspelled_key2.yaml",
        Refused(
            "misspelled_key2.yaml: config error, unknown key 'requestsperunit'",
            &[(8, "config error, unknown key 'requestsperunit'")],
        ),
    ),
    (
        "test_config/non_map_list.yaml",
        Refused(
            "non_map_list.yaml: config error, yaml file contains list of type other than map: a",
            &[
                (4, "config error, yaml file contains list of type other than map: found the string `a`"),
                (5, "config error, yaml file contains list of type other than map: found the string `b`"),
                (6, "config error, yaml file contains list of type other than map: found the string `c`"),
            ],
        ),
    ),
    (
        "test_config/non_string_key.yaml",
        Refused(
            "non_string_key.yaml: config error, key is not of type string: 0.25",
            // Without its `domain` key the file has no domain either.
            &[
                (1, "config file cannot have empty domain"),
                (2, "a key here is a string, found a number"),
            ],
        ),
    ),
    (
        "test_config/replaces_empty.yaml",
        Refused(
            "replaces_empty.yaml: should not have an empty replaces entry",
            &[(11, "should not have an empty replaces entry")],
        ),
    ),
    (
        "test_config/replaces_self.yaml",
        Refused(
            "replaces_self.yaml: replaces should not contain name of same descriptor",
            &[(11, "replaces should not contain name of same descriptor ('self')")],
        ),
    ),
    ("test_config/shadowmode_config.yaml", Loads),
    (
        "test_config/share_threshold.yaml",
        Unhonoured(&[
            (SHARE, 7),
            (SHARE, 16),
            (SHARE, 23),
            (SHARE, 27),
            (SHARE, 34),
            (SHARE, 44),
            (SHARE, 54),
            (SHARE, 67),
            (SHARE, 71),
            (SHARE, 85),
            (SHARE, 92),
            (SHARE, 99),
            (SHARE, 106),
            (SHARE, 114),
            (SHARE, 118),
        ]),
    ),
    (
        "test_config/unlimited_with_unit.yaml",
        Refused(
            "unlimited_with_unit.yaml: should not specify rate limit unit when unlimited",
            &[(7, "should not specify rate limit unit when unlimited")],
        ),
    ),
    ("test_config/wildcard.yaml", Loads),
    ("readme/example_1.yaml", Loads),
    ("readme/example_2.yaml", Loads),
    ("readme/example_3.yaml", Loads),
    ("readme/example_4a.yaml", Loads),
    ("readme/example_4b.yaml", Loads),
    ("readme/example_5.yaml", Loads),
    ("readme/example_6.yaml", Loads),
    ("readme/example_7.yaml", Loads),
    ("readme/example_8.yaml", Loads),
    ("readme/example_9a.yaml", Loads),
    ("readme/example_9b.yaml", Loads),
    ("readme/example_9c.yaml", Loads),
    ("readme/example_10a.yaml", Loads),
    ("readme/example_10b.yaml", Loads),
    // Its second rule's `share_threshold: false` (line 14) is accepted.
    ("readme/example_11a.yaml", Unhonoured(&[(SHARE, 7)])),
    ("readme/example_11b.yaml", Unhonoured(&[(SHARE, 6)])),
];

/// The reference's tests that load two files at once (MERGE_DOMAIN_CONFIG
/// off, its default): the files, the reference's panic, and the file and
/// line rollstat names.
const DIRECTORIES: &[(&[&str], &str, &str, usize)] = &[
    (
        &["basic_config.yaml", "duplicate_domain.yaml"],
        "duplicate_domain.yaml: duplicate domain 'test-domain' in config file",
        "duplicate_domain.yaml",
        2,
    ),
    (
        // TestDomainMerge merges these two with MERGE_DOMAIN_CONFIG on;
        // rollstat does not merge, as the reference does not by default.
        &["merge_domain_key1.yaml", "merge_domain_key2.yaml"],
        "merge_domain_key2.yaml: duplicate domain 'test-domain' in config file",
        "merge_domain_key2.yaml",
        3,
    ),
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/ratelimit_configs")
}

fn load(name: &str) -> Result<DomainRules, Vec<YamlProblem>> {
    let path = fixtures().join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    parse(&text, &path)
}

fn depth(rules: &[DescriptorRule]) -> usize {
    rules
        .iter()
        .map(|r| 1 + depth(&r.descriptors))
        .max()
        .unwrap_or(0)
}

fn find<'a>(rules: &'a [DescriptorRule], key: &str, value: Option<&str>) -> &'a DescriptorRule {
    rules
        .iter()
        .find(|r| r.key == key && r.value.as_deref() == value)
        .unwrap_or_else(|| panic!("no descriptor {key}={value:?}"))
}

#[test]
fn every_fixture_is_in_the_table_and_names_its_source() {
    let mut on_disk = BTreeSet::new();
    for sub in ["examples", "readme", "test_config"] {
        for entry in std::fs::read_dir(fixtures().join(sub)).unwrap() {
            let name = format!("{sub}/{}", entry.unwrap().file_name().to_string_lossy());
            let text = std::fs::read_to_string(fixtures().join(&name)).unwrap();
            let first = text.lines().next().unwrap();
            assert!(
                first.starts_with("# Source: envoyproxy/ratelimit, ") && first.contains(COMMIT),
                "{name}: {first}"
            );
            on_disk.insert(name);
        }
    }
    let listed: BTreeSet<String> = CASES.iter().map(|(f, _)| f.to_string()).collect();
    assert_eq!(on_disk, listed);
    // Every file of test/config/ and examples/ratelimit/config/, and the
    // 16 YAML blocks of the README's examples.
    assert_eq!(on_disk.len(), 38);
}

#[test]
fn each_fixture_loads_or_is_refused_as_the_table_says() {
    let (mut loads, mut refused, mut unhonoured) = (0, 0, 0);
    let mut unhonoured_keys = 0;
    for (name, expect) in CASES {
        let got = load(name);
        match expect {
            Loads => {
                let rules = got.unwrap_or_else(|p| panic!("{name}: {p:#?}"));
                assert!(!rules.domain.is_empty(), "{name}");
                loads += 1;
            }
            Refused(go, want) => {
                let problems = got.err().unwrap_or_else(|| panic!("{name} loaded"));
                assert_eq!(problems.len(), want.len(), "{name} ({go}): {problems:#?}");
                for (p, (line, start)) in problems.iter().zip(want.iter()) {
                    assert_eq!(p.line, *line, "{name}: {p:?}");
                    assert!(p.message.starts_with(start), "{name}: {p:?}");
                }
                refused += 1;
            }
            Unhonoured(keys) => {
                let problems = got.err().unwrap_or_else(|| panic!("{name} loaded"));
                let found: Vec<(String, usize)> = problems
                    .iter()
                    .map(|p| {
                        assert!(
                            p.message.contains("not supported by rollstat"),
                            "{name}: {p:?}"
                        );
                        let key = p.key.rsplit('.').next().unwrap().to_string();
                        (key, p.line)
                    })
                    .collect();
                let want: Vec<(String, usize)> =
                    keys.iter().map(|(k, l)| (k.to_string(), *l)).collect();
                assert_eq!(found, want, "{name}");
                unhonoured += 1;
                unhonoured_keys += keys.len();
            }
        }
    }
    assert_eq!(
        (loads, refused, unhonoured),
        (21, 12, 5),
        "loads, refused as the reference refuses, refused for an unhonoured key"
    );
    assert_eq!(unhonoured_keys, 23);
}

#[test]
fn the_syntax_error_is_refused_before_any_tree_is_built() {
    let problems = load("test_config/bad_yaml.yaml").unwrap_err();
    assert_eq!(problems[0].key, "(syntax)");
    assert_eq!(problems[0].refusal, Some("syntax"));
}

/// A scratch copy of some fixtures, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_domain_in_two_files_is_refused_as_the_reference_refuses_it() {
    for (i, (files, go, file, line)) in DIRECTORIES.iter().enumerate() {
        let dir = Scratch(
            std::env::temp_dir().join(format!("rollstat-rls-table-{i}-{}", std::process::id())),
        );
        std::fs::create_dir_all(&dir.0).unwrap();
        for f in *files {
            std::fs::copy(fixtures().join("test_config").join(f), dir.0.join(f)).unwrap();
        }
        let problems = read_dir(&dir.0).unwrap_err();
        assert_eq!(problems.len(), 1, "{go}: {problems:#?}");
        assert_eq!(problems[0].file, dir.0.join(file), "{go}");
        assert_eq!(problems[0].problem.line, *line, "{go}");
        let shown = problems[0].to_string();
        assert!(
            shown.contains("duplicate domain 'test-domain' in config file"),
            "{shown}"
        );
    }
}

#[test]
fn the_reference_examples_directory_loads_as_the_reference_loads_it_less_quota_mode() {
    // examples/ratelimit/config/ as a directory: config.yaml loads,
    // example.yaml is refused for its quota_mode and metadata.
    let problems = read_dir(&fixtures().join("examples")).unwrap_err();
    assert!(problems.iter().all(|p| p.file.ends_with("example.yaml")));
    assert_eq!(problems.len(), 4);
}

#[test]
fn the_loaded_trees_hold_what_the_files_say() {
    let basic = load("test_config/basic_config.yaml").unwrap();
    assert_eq!(basic.domain, "test-domain");
    assert_eq!(basic.descriptors.len(), 9);
    assert_eq!(depth(&basic.descriptors), 2);
    let key1 = find(&basic.descriptors, "key1", Some("value1"));
    assert_eq!(key1.rate_limit, None);
    let sub = find(&key1.descriptors, "subkey1", None)
        .rate_limit
        .clone()
        .unwrap();
    assert_eq!(
        (sub.unit, sub.requests_per_unit),
        (Some(RateUnit::Second), 5)
    );
    let key4 = find(&basic.descriptors, "key4", None)
        .rate_limit
        .clone()
        .unwrap();
    assert_eq!(key4.name.as_deref(), Some("key4_rate_limit"));
    assert_eq!(key4.unit, Some(RateUnit::Day));
    let key6 = find(&basic.descriptors, "key6", None)
        .rate_limit
        .clone()
        .unwrap();
    assert!(key6.unlimited && key6.unit.is_none());
    assert!(find(&basic.descriptors, "key7", None).detailed_metric);
    assert_eq!(
        find(&basic.descriptors, "key2", Some("value3")).rate_limit,
        None
    );

    let wild = load("test_config/wildcard.yaml").unwrap();
    assert_eq!(find(&wild.descriptors, "wild", Some("foo*")).key, "wild");
    assert_eq!(
        find(&wild.descriptors, "multiWild", Some("foo*bar*baz"))
            .rate_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        10
    );
    let nested = find(&wild.descriptors, "nestedWild", Some("val1"));
    find(&nested.descriptors, "wild", Some("goo*"));

    let shadow = load("test_config/shadowmode_config.yaml").unwrap();
    assert!(find(&shadow.descriptors, "key2", None).shadow_mode);
    assert!(!find(&shadow.descriptors, "key2", Some("value2")).shadow_mode);
    let key1 = find(&shadow.descriptors, "key1", Some("value1"));
    assert!(find(&key1.descriptors, "subkey1", Some("subvalue1")).shadow_mode);
    assert!(!find(&key1.descriptors, "subkey1", None).shadow_mode);

    // A `---` document start below the source comment.
    let mongo = load("examples/config.yaml").unwrap();
    assert_eq!(mongo.domain, "mongo_cps");
    assert_eq!(mongo.descriptors.len(), 2);

    let blacklist = load("readme/example_3.yaml").unwrap();
    let ip = find(&blacklist.descriptors, "remote_address", Some("50.0.0.5"));
    assert_eq!(ip.rate_limit.as_ref().unwrap().requests_per_unit, 0);

    let replaces = load("readme/example_7.yaml").unwrap();
    let key2 = find(&replaces.descriptors, "key_2", Some("value_2"));
    let user = find(&key2.descriptors, "user", Some("bkthomps"));
    assert_eq!(
        user.rate_limit.as_ref().unwrap().replaces,
        ["specific_limit"]
    );

    let metrics = load("readme/example_10a.yaml").unwrap();
    assert_eq!(depth(&metrics.descriptors), 3);
    let route = find(&metrics.descriptors, "route", None);
    assert!(route.value_to_metric);
    assert!(find(&route.descriptors, "http_method", None).value_to_metric);

    let middle = load("readme/example_9b.yaml").unwrap();
    find(&middle.descriptors, "path", Some("/api/*/action"));
}
