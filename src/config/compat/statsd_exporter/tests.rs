use std::time::Duration;

use super::*;
use crate::config::Config;

/// Every honoured feature of the format, in one file (line numbers matter).
const FILE: &str = r#"defaults:
  observer_type: histogram
  ttl: 1h
  histogram_options:
    buckets: [0.01, 0.1, 1]
mappings:
- match: "(.*)\\.(.*)--(.*)\\.status\\.(.*)\\.count"
  match_type: regex
  name: "request_total"
  labels:
    hostname: "${1}"
    exec: "$2"
    protocol: "${3}"
    code: "$4"
- match: test.dispatcher.*.*.*
  name: "dispatcher_events_total"
  labels:
    processor: "$1"
    action: "$2"
    outcome: "$3"
    job: "test_dispatcher"
- match: "*.signup.*.*"
  name: "signup_events_total"
  honor_labels: true
  labels:
    provider: "$2"
    outcome: "$3"
    job: "${1}_server"
- match: test.timing.*.*.*
  match_metric_type: observer
  name: "my_timer"
  ttl: 10m
  histogram_options:
    buckets: [0.005, 0.5, 5]
  labels:
    provider: "$2"
- match: debug.*
  name: "dropped"
  action: drop
"#;

fn rules() -> ExporterRules {
    parse(FILE).expect("the file reads")
}

/// The index of the rule that took a name, its Prometheus name, its labels.
type Mapped = (usize, String, Vec<(String, String)>);

/// What rule `rules` gives `name` of `kind` (first match, as the registry
/// tries them): its index, Prometheus name and labels.
fn apply(rules: &[Mapping], name: &str, kind: MetricKind) -> Option<Mapped> {
    let mut caps = Vec::new();
    let (i, m) = rules.iter().enumerate().find(|(_, m)| {
        m.match_type.is_none_or(|k| k.contains(kind)) && m.pattern.matches(name, &mut caps)
    })?;
    let mut labels: Vec<(String, String)> = m
        .labels
        .iter()
        .map(|(k, t)| (k.clone(), t.render(&caps)))
        .collect();
    labels.sort();
    Some((i, m.rename.as_ref()?.render(&caps), labels))
}

fn compiled(r: &ExporterRules) -> Vec<Mapping> {
    r.rules
        .iter()
        .map(|r| r.to_mapping().expect("compiles"))
        .collect()
}

#[test]
fn globs_are_tried_before_regexes_as_statsd_exporter_tries_them() {
    let r = rules();
    let lines: Vec<usize> = r.rules.iter().map(|r| r.line).collect();
    // The regex (line 7) comes after the four globs; the defaults' rule for
    // unmapped names (ttl 1h) last.
    assert_eq!(lines, [15, 22, 29, 37, 7, 0]);
    assert!(r.rules[5].unmapped && r.rules[5].pattern == Pattern::Glob("**".into()));
    assert_eq!(r.rules[5].ttl, Some(Duration::from_secs(3600)));
    // observer_type: histogram in defaults: no summary, no summary note.
    assert!(r.rules.iter().all(|r| r.summary.is_none()));
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn the_documented_examples_map_as_statsd_exporter_maps_them() {
    let m = compiled(&rules());
    let got = apply(
        &m,
        "test.dispatcher.FooProcessor.send.success",
        MetricKind::Counter,
    )
    .unwrap();
    assert_eq!(got.1, "dispatcher_events_total");
    assert_eq!(
        got.2,
        [
            ("action".into(), "send".into()),
            ("job".into(), "test_dispatcher".into()),
            ("outcome".into(), "success".into()),
            ("processor".into(), "FooProcessor".into()),
        ]
    );
    let got = apply(
        &m,
        "foo_product.signup.facebook.failure",
        MetricKind::Counter,
    )
    .unwrap();
    assert_eq!(got.1, "signup_events_total");
    assert_eq!(got.2[0], ("job".into(), "foo_product_server".into()));
    // The regex matches inside the name, as Go's does (no anchors).
    let got = apply(
        &m,
        "xyz.web1.exec--http.status.500.count",
        MetricKind::Counter,
    )
    .unwrap();
    assert_eq!(got.1, "request_total");
    assert_eq!(
        got.2,
        [
            ("code".into(), "500".into()),
            ("exec".into(), "exec".into()),
            ("hostname".into(), "xyz.web1".into()),
            ("protocol".into(), "http".into()),
        ]
    );
    // match_metric_type: observer takes timers, not counters.
    assert_eq!(
        apply(&m, "test.timing.a.b.c", MetricKind::Timer).unwrap().1,
        "my_timer"
    );
    assert_eq!(
        apply(&m, "test.timing.a.b.c", MetricKind::Histogram)
            .unwrap()
            .1,
        "my_timer"
    );
    assert!(apply(&m, "test.timing.a.b.c", MetricKind::Counter).is_none());
    // `*` is one whole part: one part too many or too few is no match.
    assert!(apply(&m, "test.dispatcher.a.b", MetricKind::Counter).is_none());
    assert!(apply(&m, "test.dispatcher.a.b.c.d", MetricKind::Counter).is_none());
    assert_eq!(m[3].action, Action::Drop);
}

#[test]
fn options_of_the_rule_and_of_defaults_are_kept() {
    let r = rules();
    let timer = &r.rules[2];
    assert_eq!(timer.ttl, Some(Duration::from_secs(600)));
    assert_eq!(timer.buckets.as_deref(), Some(&[0.005, 0.5, 5.0][..]));
    assert_eq!(timer.kinds, Some(KindSet::OBSERVER));
    let dispatcher = &r.rules[0];
    assert_eq!(dispatcher.ttl, Some(Duration::from_secs(3600)));
    assert_eq!(dispatcher.buckets.as_deref(), Some(&[0.01, 0.1, 1.0][..]));
    assert!(r.rules[1].honor_labels && !dispatcher.honor_labels);
}

#[test]
fn glob_disable_ordering_prefers_literal_parts() {
    let file = "defaults:\n  glob_disable_ordering: true\nmappings:\n- match: a.*.*\n  name: wild\n- match: a.b.*\n  name: literal\n- match: a.*.c\n  name: late\n";
    let r = parse(file).unwrap();
    let m = compiled(&r);
    assert_eq!(
        apply(&m, "a.b.c", MetricKind::Counter).unwrap().1,
        "literal"
    );
    assert_eq!(apply(&m, "a.x.c", MetricKind::Counter).unwrap().1, "late");
    assert_eq!(apply(&m, "a.x.y", MetricKind::Counter).unwrap().1, "wild");
    // With ordering (the default), the first in the file wins.
    let ordered = file.replace(
        "glob_disable_ordering: true",
        "glob_disable_ordering: false",
    );
    let m = compiled(&parse(&ordered).unwrap());
    assert_eq!(apply(&m, "a.b.c", MetricKind::Counter).unwrap().1, "wild");
}

/// The problems of `file` as (line, key), and all messages.
fn problems(file: &str) -> (Vec<(usize, String)>, String) {
    let probs = parse(file).expect_err("problems");
    let keys = probs.iter().map(|p| (p.line, p.key.clone())).collect();
    let text = probs
        .iter()
        .map(|p| format!("{}: {}: {}", p.line, p.key, p.message))
        .collect::<Vec<_>>()
        .join("\n");
    (keys, text)
}

#[test]
fn what_rollstat_cannot_honour_is_refused_with_its_line_and_why() {
    let file = r#"mappings:
- match: a.*
  name: a
  observer_type: histogram
- match: b.*
  name: b
  summary_options:
    quantiles: [{quantile: 1.5}]
- match: c.*
  name: c
  scale: -2
  help: "C things"
- match: d.*
  name: d
  observer_type: histogram
  histogram_options:
    native_histogram_bucket_factor: fast
- match: e*x.*
  name: e
- match: f.*
  labels:
    x: y
- match: "g(("
  match_type: regex
  name: g
- match: h.*
  name: h
  labels:
    "1bad": x
  ttl: soon
  colour: blue
"#;
    let (keys, text) = problems(file);
    let k = |l: usize, s: &str| (l, s.to_string());
    assert_eq!(
        keys,
        [
            k(8, "mappings[1].summary_options.quantiles[0].quantile"),
            k(11, "mappings[2].scale"),
            k(
                17,
                "mappings[3].histogram_options.native_histogram_bucket_factor"
            ),
            k(18, "mappings[4].match"),
            k(20, "mappings[5].name"),
            k(22, "mappings[5].labels.x"),
            k(23, "mappings[6].match"),
            k(29, "mappings[7].labels.1bad"),
            k(30, "mappings[7].ttl"),
            k(31, "mappings[7].colour"),
        ],
        "{text}"
    );
    for says in [
        "strictly between 0 and 1",
        "invalid match: e*x.*",
        "didn't set a metric name",
        "invalid regex",
        "unknown key",
    ] {
        assert!(text.contains(says), "{says} in\n{text}");
    }
}

#[test]
fn templates_read_as_each_match_type_reads_them() {
    let file = "mappings:\n- match: 'svc\\.(?P<app>\\w+)\\.(\\w+)'\n  match_type: regex\n  name: '${2}_total'\n  labels:\n    app: '${app}'\n    whole: '$0'\n    odd: '$1x'\n- match: svc.*.*\n  name: 'g_${2}_$1x'\n";
    let m = compiled(&parse(file).unwrap());
    let got = apply(&m, "pre.svc.web.hits", MetricKind::Counter).unwrap();
    assert_eq!(
        got.0, 1,
        "the glob is tried first but does not match `pre.svc...`"
    );
    assert_eq!(got.1, "hits_total");
    assert_eq!(
        got.2,
        [
            ("app".into(), "web".into()),
            ("odd".into(), String::new()),
            ("whole".into(), "svc.web.hits".into()),
        ]
    );
    // statsd_exporter's metricNameRE takes numbered references only.
    let (keys, _) =
        problems("mappings:\n- match: '(?P<a>x)'\n  match_type: regex\n  name: '${a}'\n");
    assert_eq!(keys, [(4, "mappings[0].name".to_string())]);
    // The glob's `$1x` is a reference statsd_exporter drops whole.
    assert_eq!(
        apply(&m, "svc.web.hits", MetricKind::Counter).unwrap().1,
        "g_hits_"
    );
}

#[test]
fn summaries_are_the_default_observer_with_statsd_exporters_options() {
    let r = parse("defaults:\n  ttl: 30m\n  summary_options:\n    max_age: 1m\nmappings:\n- match: a.*\n  name: a\n- match: b.*\n  name: b\n  summary_options:\n    quantiles:\n    - quantile: 0.75\n      error: 0.01\n    age_buckets: 3\n    buf_cap: 500\n- match: c.*\n  name: c\n  observer_type: histogram\n  histogram_options:\n    buckets: [1, 2]\n").unwrap();
    let s = |i: usize| r.rules[i].summary.clone();
    // No observer_type: a summary, statsd_exporter's quantiles, the
    // defaults' max_age, 5 age buckets.
    let a = s(0).unwrap();
    assert_eq!(a.quantiles, [0.5, 0.9, 0.99]);
    assert_eq!(a.window.length(), Duration::from_secs(60));
    assert_eq!(a.window.size(), 5);
    // The rule's own options, the rest from the defaults.
    let b = s(1).unwrap();
    assert_eq!(b.quantiles, [0.75]);
    assert_eq!(
        (b.window.length(), b.window.size()),
        (Duration::from_secs(60), 3)
    );
    assert!(s(2).is_none() && r.rules[2].buckets.is_some());
    // Unmapped names: a summary too, and the defaults' ttl.
    let u = r.rules.last().unwrap();
    assert!(u.unmapped && u.summary.is_some() && u.ttl == Some(Duration::from_secs(1800)));
    // Each quantile keeps its rank error; buf_cap is kept.
    assert_eq!(a.errors, [0.05, 0.01, 0.001]);
    assert_eq!((b.errors.as_slice(), b.buf_cap), ([0.01].as_slice(), 500));
    assert_eq!(a.buf_cap, 500, "the Go client's default");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    // convert-mapping writes them as [[mappings]] keys that read back alike.
    let toml = r.to_toml(std::path::Path::new("m.yml"));
    let cfg = Config::parse(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    let back: Vec<_> = cfg
        .mappings
        .iter()
        .map(|m| m.summary.as_deref().cloned())
        .collect();
    let want: Vec<_> = r.rules.iter().map(|r| r.summary.clone()).collect();
    assert_eq!(back, want, "{toml}");
    // Histogram options on a summary rule are statsd_exporter's error too.
    let (keys, _) =
        problems("mappings:\n- match: a.*\n  name: a\n  histogram_options:\n    buckets: [1]\n");
    assert_eq!(keys, [(4, "mappings[0].histogram_options".to_string())]);
}

/// A temp file holding `text`, removed when dropped.
struct Temp(std::path::PathBuf);

impl Temp {
    fn new(name: &str, text: &str) -> Temp {
        let p = std::env::temp_dir().join(format!("rollstat-se-{name}-{}.yml", std::process::id()));
        std::fs::write(&p, text).unwrap();
        Temp(p)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn the_converted_toml_maps_every_name_as_the_file_does() {
    let f = Temp::new("convert", FILE);
    let n = rules().rules.len();
    let windows = "[[windows]]\nname = \"10s\"\nbuckets = 10\ninterval_ms = 1000\n";
    let from_yaml = Config::parse(&format!(
        "{windows}[statsd_exporter]\nmapping_file = \"{}\"\n",
        f.0.display()
    ))
    .expect("loads the mapping file");
    let toml = rules().to_toml(&f.0);
    let from_toml =
        Config::parse(&format!("{windows}{toml}")).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    assert_eq!(from_yaml.mappings.len(), n);
    assert_eq!(from_yaml.statsd_exporter.as_ref().unwrap().rules, n);
    assert_eq!(from_toml.mappings.len(), n);
    for (name, kind) in [
        (
            "test.dispatcher.FooProcessor.send.success",
            MetricKind::Counter,
        ),
        ("foo_product.signup.facebook.failure", MetricKind::Counter),
        ("xyz.web1.exec--http.status.500.count", MetricKind::Counter),
        ("test.timing.a.b.c", MetricKind::Timer),
        ("test.timing.a.b.c", MetricKind::Counter),
        ("debug.x", MetricKind::Gauge),
        ("unmapped.name", MetricKind::Gauge),
    ] {
        assert_eq!(
            apply(&from_yaml.mappings, name, kind),
            apply(&from_toml.mappings, name, kind),
            "{name}"
        );
    }
    for (a, b) in from_yaml.mappings.iter().zip(&from_toml.mappings) {
        assert_eq!(a.ttl, b.ttl);
        assert_eq!(a.histogram_buckets, b.histogram_buckets);
        assert_eq!(a.honor_labels, b.honor_labels);
        assert_eq!(a.action, b.action);
        assert_eq!(a.summary, b.summary);
        assert_eq!(a.native_bucket_factor, b.native_bucket_factor);
        assert_eq!(a.native_max_buckets, b.native_max_buckets);
    }
}

#[test]
fn native_histograms_are_given_as_statsd_exporter_gives_them() {
    let file = "defaults:\n  observer_type: histogram\n  histogram_options:\n    native_histogram_bucket_factor: 1.5\n    native_histogram_max_buckets: 100\nmappings:\n- match: own.*\n  name: own\n  histogram_options:\n    native_histogram_bucket_factor: 2\n    native_histogram_max_buckets: 0\n- match: off.*\n  name: off\n  histogram_options:\n    native_histogram_bucket_factor: 1\n- match: zero.*\n  name: zero\n  histogram_options:\n    native_histogram_bucket_factor: 0\n    native_histogram_max_buckets: 40000\n- match: inherit.*\n  name: inherit\n- match: summ.*\n  name: summ\n  observer_type: summary\n";
    let rules = parse(file).expect("the file reads");
    let m = compiled(&rules);
    let native = |i: usize| (m[i].native_bucket_factor, m[i].native_max_buckets);
    // The rule's own factor; a limit of 0 takes the defaults'.
    assert_eq!(native(0), (Some(2.0), Some(100)));
    // A factor of 1 or less: none, as client_golang reads it.
    assert_eq!(native(1), (Some(0.0), Some(100)));
    // A factor of 0 takes the defaults'; a limit is at most 32768.
    assert_eq!(native(2), (Some(1.5), Some(32_768)));
    // Nothing of its own: the defaults'.
    assert_eq!(native(3), (Some(1.5), Some(100)));
    // A summary has no native histogram.
    assert_eq!(native(4), (None, None));
    // Names no rule maps get the defaults'.
    assert_eq!(native(m.len() - 1), (Some(1.5), Some(100)));
    // convert-mapping writes them, and config.toml reads them back.
    let toml = rules.to_toml(std::path::Path::new("m.yml"));
    assert!(
        toml.contains("native_histogram_bucket_factor = 2.0"),
        "{toml}"
    );
    assert!(
        toml.contains("native_histogram_max_buckets = 32768"),
        "{toml}"
    );
    let cfg = Config::parse(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    for (a, b) in cfg.mappings.iter().zip(&m) {
        assert_eq!(a.native_bucket_factor, b.native_bucket_factor);
        assert_eq!(a.native_max_buckets, b.native_max_buckets);
    }
    // A file that says nothing of them: statsd_exporter's own 1.1 and 256
    // for every histogram, rule or not.
    let plain = "defaults:\n  observer_type: histogram\nmappings:\n- match: a.*\n  name: a\n";
    let m = compiled(&parse(plain).unwrap());
    for r in &m {
        assert_eq!(
            (r.native_bucket_factor, r.native_max_buckets),
            (Some(1.1), Some(256))
        );
    }
}

#[test]
fn a_ttl_shorter_than_a_window_is_a_warning_at_the_files_line() {
    let f = Temp::new("ttl", "mappings:\n- match: a.*\n  name: a\n  ttl: 5s\n");
    let cfg = Config::parse(&format!(
        "[[windows]]\nname = \"1m\"\nbuckets = 60\ninterval_ms = 1000\n[series]\nttl_secs = 600\n[statsd_exporter]\nmapping_file = \"{}\"\n",
        f.0.display()
    ))
    .expect("accepted");
    let w = &cfg.statsd_exporter.as_ref().unwrap().warnings;
    assert!(
        w.iter()
            .any(|w| w.starts_with("line 4: `mappings[0].ttl`: 5s is shorter than window `1m`")),
        "{w:?}"
    );
    // The rule keeps the TTL as written; the registry's plan lengthens it.
    assert_eq!(cfg.mappings[0].ttl, Some(Duration::from_secs(5)));
    assert!(
        cfg.ttl_warnings().is_empty(),
        "the file's own warning says it"
    );
    let native = Config::parse(
        "[[windows]]\nname = \"1m\"\nbuckets = 60\ninterval_ms = 1000\n[[mappings]]\nmatch = \"a.*\"\nttl_secs = 5\n",
    )
    .expect("accepted");
    assert_eq!(
        native.ttl_warnings(),
        vec!["[[mappings]] #1 (match `a.*`): ttl_secs = 5s is shorter than window `1m` (60s): its series expire when they have been idle that long, once the window has drained, not after 5s (every family, cumulative and windowed, goes together)".to_string()]
    );
}

#[test]
fn scale_and_help_are_kept_and_converted() {
    let r = parse("mappings:\n- match: size.*\n  name: size_bytes\n  scale: 1024\n  help: \"Sizes, in bytes\"\n  observer_type: histogram\n").unwrap();
    assert_eq!(r.rules[0].scale, Some(1024.0));
    assert_eq!(r.rules[0].help.as_deref(), Some("Sizes, in bytes"));
    let m = r.rules[0].to_mapping().unwrap();
    assert_eq!(m.scale, Some(1024.0));
    let toml = r.to_toml(std::path::Path::new("m.yml"));
    assert!(
        toml.contains("scale = 1024.0\nhelp = \"Sizes, in bytes\"\n"),
        "{toml}"
    );
    let cfg = Config::parse(&toml).unwrap();
    assert_eq!(cfg.mappings[0].scale, Some(1024.0));
    assert_eq!(cfg.mappings[0].help.as_deref(), Some("Sizes, in bytes"));
}

#[test]
fn keys_older_exporters_read_are_read_as_they_did() {
    let r = parse("defaults:\n  timer_type: histogram\n  buckets: [1, 2]\nmappings:\n- match: a.*\n  name: a\n- match: b.*\n  name: b\n  timer_type: summary\n  quantiles:\n  - quantile: 0.3\n    error: 0.01\n- match: c.*\n  name: c\n  match_metric_type: timer\n  buckets: [5]\n").unwrap();
    assert_eq!(r.rules[0].buckets.as_deref(), Some(&[1.0, 2.0][..]));
    assert!(r.rules[0].summary.is_none());
    assert_eq!(r.rules[1].summary.as_ref().unwrap().quantiles, [0.3]);
    assert_eq!(r.rules[2].kinds, Some(KindSet::OBSERVER));
    assert_eq!(r.rules[2].buckets.as_deref(), Some(&[5.0][..]));
    // Both spellings at once were statsd_exporter's error too.
    let (keys, _) = problems("mappings:\n- match: a.*\n  name: a\n  observer_type: histogram\n  buckets: [1]\n  histogram_options:\n    buckets: [2]\n");
    assert_eq!(keys, [(5, "mappings[0].buckets".to_string())]);
}

#[test]
fn labels_named_like_rollstats_own_take_the_tag_prefix_and_dunder_ones_are_refused() {
    assert_eq!(label_key("metric"), LabelKey::Renamed("tag_metric".into()));
    assert_eq!(label_key("le"), LabelKey::Renamed("tag_le".into()));
    assert_eq!(
        label_key("quantile"),
        LabelKey::Renamed("tag_quantile".into())
    );
    assert_eq!(label_key("window"), LabelKey::Renamed("tag_window".into()));
    assert_eq!(label_key("__name__"), LabelKey::Reserved);
    assert_eq!(label_key("q"), LabelKey::Invalid);
    assert_eq!(label_key("metrics"), LabelKey::AsIs);
    let r = parse("mappings:\n- match: a.*\n  name: a\n  labels:\n    metric: \"$1\"\n").unwrap();
    assert_eq!(
        r.rules[0].labels,
        vec![("tag_metric".into(), "${1}".into())]
    );
    assert!(
        r.warnings[0].starts_with("line 5: `mappings[0].labels.metric`"),
        "{:?}",
        r.warnings
    );
    let (keys, _) = problems("mappings:\n- match: a.*\n  name: a\n  labels:\n    __x: \"$1\"\n");
    assert_eq!(keys, vec![(5, "mappings[0].labels.__x".to_string())]);
}
