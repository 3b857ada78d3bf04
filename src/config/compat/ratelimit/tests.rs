use super::*;

fn load(text: &str) -> Result<DomainRules, Vec<YamlProblem>> {
    parse(text, Path::new("t.yaml"))
}

/// The problems of `text`, as `line: message` (the test's view of them).
fn problems(text: &str) -> Vec<(usize, String)> {
    load(text)
        .expect_err("the file should be refused")
        .into_iter()
        .map(|p| (p.line, p.message))
        .collect()
}

fn one_problem(text: &str, line: usize, starts: &str) {
    let found = problems(text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, line, "{found:?}");
    assert!(found[0].1.starts_with(starts), "{found:?}");
}

#[test]
fn a_file_with_every_kept_key_loads_with_its_tree() {
    let rules = load(
        "domain: d\n\
         descriptors:\n\
         \x20 - key: a\n\
         \x20   value: v*\n\
         \x20   shadow_mode: true\n\
         \x20   detailed_metric: true\n\
         \x20   value_to_metric: yes\n\
         \x20   rate_limit:\n\
         \x20     unit: Minute\n\
         \x20     requests_per_unit: 7\n\
         \x20     name: lim\n\
         \x20     replaces:\n\
         \x20       - name: other\n\
         \x20   descriptors:\n\
         \x20     - key: b\n\
         \x20       rate_limit:\n\
         \x20         unlimited: true\n",
    )
    .unwrap();
    assert_eq!(rules.domain, "d");
    assert_eq!(rules.file, Path::new("t.yaml"));
    let a = &rules.descriptors[0];
    assert_eq!(
        (a.key.as_str(), a.value.as_deref(), a.line),
        ("a", Some("v*"), 3)
    );
    assert!(a.shadow_mode && a.detailed_metric && a.value_to_metric);
    let rl = a.rate_limit.as_ref().unwrap();
    assert_eq!(rl.unit, Some(RateUnit::Minute));
    assert_eq!(rl.requests_per_unit, 7);
    assert_eq!(rl.name.as_deref(), Some("lim"));
    assert_eq!(rl.replaces, ["other"]);
    let b = &a.descriptors[0];
    assert_eq!(
        (b.key.as_str(), b.value.as_deref(), b.line),
        ("b", None, 15)
    );
    let unlimited = b.rate_limit.as_ref().unwrap();
    assert!(unlimited.unlimited);
    assert_eq!(unlimited.unit, None);
}

#[test]
fn an_empty_value_is_no_value_and_a_descriptor_may_have_no_limit() {
    let rules =
        load("domain: d\ndescriptors:\n  - key: a\n    value: \"\"\n  - key: b\n    value:\n")
            .unwrap();
    assert_eq!(rules.descriptors[0].value, None);
    assert_eq!(rules.descriptors[1].value, None);
    assert_eq!(rules.descriptors[1].rate_limit, None);
    // `rate_limit:` with nothing under it is no limit, as in the reference.
    let rules = load("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n").unwrap();
    assert_eq!(rules.descriptors[0].rate_limit, None);
}

#[test]
fn numbers_and_booleans_as_keys_and_values_are_kept_as_written() {
    let rules = load(
        "domain: 42\ndescriptors:\n  - key: zip\n    value: 01234\n  - key: hex\n    value: 0x1F # hex\n  - key: flag\n    value: True\n  - key: ünï\n    value: 007\n",
    )
    .unwrap();
    assert_eq!(rules.domain, "42");
    let values: Vec<_> = rules
        .descriptors
        .iter()
        .map(|d| d.value.clone().unwrap())
        .collect();
    assert_eq!(values, ["01234", "0x1F", "True", "007"]);
    assert_eq!(rules.descriptors[3].key, "ünï");
    // In flow style too, and at the very end of the text.
    let rules =
        load("domain: d\ndescriptors: [{key: ä, value: 010}, {key: 7, value: false}]").unwrap();
    let pairs: Vec<_> = rules
        .descriptors
        .iter()
        .map(|d| (d.key.as_str(), d.value.as_deref().unwrap()))
        .collect();
    assert_eq!(pairs, [("ä", "010"), ("7", "false")]);
    let rules = load("descriptors: []\ndomain: 0x10").unwrap();
    assert_eq!(rules.domain, "0x10");
}

#[test]
fn a_float_as_a_value_is_refused_as_the_reference_refuses_it() {
    one_problem(
        "domain: d\ndescriptors:\n  - key: a\n    value: 1.5\n",
        4,
        "expected a string",
    );
}

#[test]
fn yaml_1_1_booleans_are_read_unquoted_only() {
    for (text, want) in [
        ("on", true),
        ("No", false),
        ("y", true),
        ("OFF", false),
        ("false", false),
    ] {
        let rules = load(&format!(
            "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: {text}\n"
        ))
        .unwrap();
        assert_eq!(rules.descriptors[0].shadow_mode, want, "{text}");
    }
    one_problem(
        "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: \"yes\"\n",
        4,
        "expected true or false",
    );
    one_problem(
        "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: maybe\n",
        4,
        "expected true or false",
    );
}

#[test]
fn a_descriptor_without_a_key_is_refused() {
    one_problem(
        "domain: d\ndescriptors:\n  - value: v\n",
        3,
        "descriptor has empty key",
    );
    one_problem(
        "domain: d\ndescriptors:\n  - key: \"\"\n",
        3,
        "descriptor has empty key",
    );
}

#[test]
fn the_same_key_and_value_twice_in_one_list_is_refused_with_its_full_key() {
    one_problem(
        "domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - key: a\n        value: b\n      - key: a\n        value: b\n",
        7,
        "duplicate descriptor composite key 'd.k.a_b'",
    );
    // The reference's composite key is key_value: these two collide too.
    one_problem(
        "domain: d\ndescriptors:\n  - key: a_b\n  - key: a\n    value: b\n",
        4,
        "duplicate descriptor composite key 'd.a_b'",
    );
    // The same key at two levels is fine.
    load("domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: a\n").unwrap();
}

#[test]
fn a_file_without_a_domain_is_refused() {
    one_problem("descriptors:\n", 1, "config file cannot have empty domain");
    one_problem("", 1, "config file cannot have empty domain");
    one_problem("domain: \"\"\n", 1, "config file cannot have empty domain");
}

#[test]
fn units_are_read_in_any_case_and_year_is_refused_with_why() {
    for (text, unit) in [
        ("second", RateUnit::Second),
        ("MINUTE", RateUnit::Minute),
        ("Hour", RateUnit::Hour),
        ("day", RateUnit::Day),
        ("week", RateUnit::Week),
        ("month", RateUnit::Month),
    ] {
        let rules = load(&format!("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: {text}\n      requests_per_unit: 1\n")).unwrap();
        assert_eq!(
            rules.descriptors[0].rate_limit.as_ref().unwrap().unit,
            Some(unit)
        );
    }
    assert_eq!(RateUnit::Month.window().as_secs(), 30 * 86_400);
    // Go upper-cases with Unicode's rules: `ſ` (long s) is `S`.
    let rules = load("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: ſecond\n      requests_per_unit: 1\n").unwrap();
    assert_eq!(
        rules.descriptors[0].rate_limit.as_ref().unwrap().unit,
        Some(RateUnit::Second)
    );
    let unit = |u: &str| {
        format!("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: {u}\n      requests_per_unit: 1\n")
    };
    one_problem(&unit("foo"), 5, "invalid rate limit unit 'foo'");
    one_problem(&unit("unknown"), 5, "invalid rate limit unit 'unknown'");
    one_problem(&unit("year"), 5, "unit 'year' is not supported by rollstat");
    let found = problems(&unit("Year"));
    assert!(found[0].1.contains("use `month`"), "{found:?}");
    one_problem(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      requests_per_unit: 1\n",
        4,
        "invalid rate limit unit none given",
    );
}

#[test]
fn unlimited_takes_no_unit() {
    let text = "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: day\n";
    one_problem(text, 6, "should not specify rate limit unit when unlimited");
    let text = "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: year\n";
    one_problem(text, 6, "should not specify rate limit unit when unlimited");
    // The reference ignores a unit it does not know beside `unlimited`.
    let text = "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: fortnight\n";
    assert!(
        load(text).unwrap().descriptors[0]
            .rate_limit
            .as_ref()
            .unwrap()
            .unlimited
    );
}

#[test]
fn requests_per_unit_is_a_u32() {
    let rpu = |n: &str| {
        format!("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: {n}\n")
    };
    let max = load(&rpu("4294967295")).unwrap();
    assert_eq!(
        max.descriptors[0]
            .rate_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        u32::MAX
    );
    for bad in ["4294967296", "-1", "\"5\"", "1.5", "[1]"] {
        one_problem(&rpu(bad), 6, "expected a whole number from 0 to 4294967295");
    }
}

#[test]
fn replaces_entries_are_named_and_not_the_limit_itself() {
    let rl = |r: &str| {
        format!("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      name: self\n      unit: second\n      requests_per_unit: 1\n      replaces:\n{r}")
    };
    one_problem(
        &rl("        - name:\n"),
        9,
        "should not have an empty replaces entry",
    );
    one_problem(
        &rl("        - name: self\n"),
        9,
        "replaces should not contain name of same descriptor ('self')",
    );
    one_problem(
        &rl("        - self\n"),
        9,
        "config error, yaml file contains list of type other than map",
    );
}

#[test]
fn lists_hold_mappings() {
    let found = problems("domain: d\ndescriptors:\n  - a\n  - b\n");
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.iter().all(|(_, m)| m.starts_with(
        "config error, yaml file contains list of type other than map: found the string"
    )));
    one_problem("domain: d\ndescriptors:\n  key: a\n", 3, "expected a list");
}

#[test]
fn keys_are_strings() {
    one_problem(
        "domain: d\n0.25: x\n",
        2,
        "a key here is a string, found a number",
    );
}

#[test]
fn unknown_keys_and_misplaced_ones_are_refused() {
    one_problem(
        "domain: d\ndescriptors:\n  - key: a\n    ratelimit:\n      unit: day\n",
        4,
        "config error, unknown key 'ratelimit'",
    );
    one_problem(
        "domain: d\ndescriptors:\n  - key: a\n    unit: day\n",
        4,
        "`unit` does not belong at a descriptor",
    );
    one_problem(
        "domain: d\nkey: a\n",
        2,
        "`key` does not belong at the top of the file",
    );
    one_problem(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      replaces:\n        - name: x\n          unit: day\n",
        8,
        "`unit` does not belong at a `replaces` entry",
    );
}

#[test]
fn unhonoured_keys_name_their_line_and_false_or_empty_is_accepted() {
    let d = |extra: &str| format!("domain: d\ndescriptors:\n  - key: a\n    value: v*\n{extra}");
    one_problem(
        &d("    share_threshold: true\n"),
        5,
        "`share_threshold: true` is not supported by rollstat",
    );
    one_problem(
        &d("    quota_mode: true\n"),
        5,
        "`quota_mode: true` is not supported by rollstat",
    );
    one_problem(
        &d("    metadata:\n      name: x\n"),
        5,
        "`metadata` is not supported by rollstat",
    );
    load(&d(
        "    share_threshold: false\n    quota_mode: false\n    metadata: {}\n",
    ))
    .unwrap();
    load(&d("    metadata:\n")).unwrap();
}

#[test]
fn every_problem_of_a_file_is_reported_in_line_order() {
    let found = problems(
        "descriptors:\n  - value: v\n  - key: b\n    rate_limit:\n      unit: foo\n  - key: c\n    quota_mode: true\n    bogus: 1\n",
    );
    let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [1, 2, 5, 7, 8], "{found:?}");
}

#[test]
fn syntax_errors_and_hostile_nesting_are_problems_not_panics() {
    let found = load("'''\n").unwrap_err();
    assert_eq!(found[0].key, "(syntax)");
    assert_eq!(found[0].refusal, Some("syntax"));
    let deep = format!(
        "domain: d\ndescriptors: {}{}\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    assert_eq!(load(&deep).unwrap_err()[0].refusal, Some("too_deep"));
    // Descriptors nested 20 deep (41 YAML levels) are read; 40 deep is
    // past the budget and refused before any tree is built.
    let nested = |n: usize| {
        let mut text = String::from("domain: d\ndescriptors:\n");
        for i in 0..n {
            let pad = "    ".repeat(i);
            text.push_str(&format!("{pad}  - key: k{i}\n"));
            if i + 1 < n {
                text.push_str(&format!("{pad}    descriptors:\n"));
            }
        }
        text
    };
    let mut rules = load(&nested(20)).unwrap().descriptors;
    let mut depth = 0;
    while let Some(first) = rules.pop() {
        depth += 1;
        rules = first.descriptors;
    }
    assert_eq!(depth, 20);
    assert_eq!(load(&nested(40)).unwrap_err()[0].refusal, Some("too_deep"));
}

/// A scratch directory, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("rollstat-rls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.0.join(name), text).unwrap();
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn domains(dir: &Path) -> Vec<String> {
    read_dir(dir)
        .unwrap()
        .into_iter()
        .map(|d| d.domain)
        .collect()
}

#[test]
fn a_directory_reads_its_yaml_files_in_name_order() {
    let dir = Dir::new("order");
    dir.write("b.yml", "domain: second\n");
    dir.write("a.yaml", "domain: first\n");
    dir.write(".hidden.yaml", "domain: hidden\n");
    assert_eq!(domains(&dir.0), ["first", "second"]);
}

#[test]
fn a_kubernetes_configmap_mount_reads_each_file_once() {
    let dir = Dir::new("configmap");
    let stamped = dir.0.join("..2026_12_02_03_00_00.123456789");
    std::fs::create_dir(&stamped).unwrap();
    std::fs::write(stamped.join("one.yaml"), "domain: one\n").unwrap();
    std::fs::write(stamped.join("two.yaml"), "domain: two\n").unwrap();
    std::os::unix::fs::symlink("..2026_12_02_03_00_00.123456789", dir.0.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/one.yaml", dir.0.join("one.yaml")).unwrap();
    std::os::unix::fs::symlink("..data/two.yaml", dir.0.join("two.yaml")).unwrap();
    assert_eq!(domains(&dir.0), ["one", "two"]);
}

#[test]
fn a_domain_in_two_files_is_refused_at_the_second() {
    let dir = Dir::new("dup");
    dir.write("a.yaml", "# first\ndomain: d\n");
    dir.write("b.yaml", "\n\n\ndomain: d\n");
    let found = read_dir(&dir.0).unwrap_err();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].file, dir.0.join("b.yaml"));
    assert_eq!(found[0].problem.line, 4);
    let shown = found[0].to_string();
    assert!(
        shown.contains("duplicate domain 'd' in config file"),
        "{shown}"
    );
    assert!(shown.contains("a.yaml:2 has it already"), "{shown}");
}

#[test]
fn every_file_s_problems_name_the_file() {
    let dir = Dir::new("many");
    dir.write("a.yaml", "descriptors:\n");
    dir.write("b.yaml", "domain: d\ndescriptors:\n  - value: x\n");
    dir.write("c.yaml", "domain: ok\n");
    dir.write("notes.txt", "hello\n");
    std::fs::create_dir(dir.0.join("sub")).unwrap();
    std::os::unix::fs::symlink("missing.yaml", dir.0.join("dangling.yaml")).unwrap();
    let found = read_dir(&dir.0).unwrap_err();
    let named: Vec<(String, usize)> = found
        .iter()
        .map(|p| {
            (
                p.file.file_name().unwrap().to_string_lossy().into_owned(),
                p.problem.line,
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            ("a.yaml".to_string(), 1),
            ("b.yaml".to_string(), 3),
            ("dangling.yaml".to_string(), 0),
            ("notes.txt".to_string(), 0),
            ("sub".to_string(), 0),
        ],
        "{found:?}"
    );
    assert_eq!(found[2].problem.refusal, Some("unreadable"));
    assert!(found[3]
        .problem
        .message
        .starts_with("not a .yaml or .yml file"));
    assert!(found[4].problem.message.starts_with("a directory"));
}

#[test]
fn a_directory_that_cannot_be_listed_is_one_problem() {
    let found = read_dir(Path::new("/nonexistent/rollstat-rls")).unwrap_err();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].problem.refusal, Some("unreadable"));
}
