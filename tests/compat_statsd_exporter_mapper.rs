//! statsd_exporter's own mapper scenarios run through rollstat's real path:
//! each scenario's YAML written to a file and loaded by `[statsd_exporter]
//! mapping_file` (`Config::parse`), a `Plan` and a `Registry` made of that
//! config, and one line `<statsdMetric>:1|<type>` per check, parsed as the
//! daemon parses it (its tag styles, statsd_exporter's mode) and ingested;
//! what a check reads comes from the series born (`SeriesMeta`). Each
//! scenario states that rollstat does what statsd_exporter does, or what it
//! does instead and why (the table is
//! `tests/reference/statsd_exporter_mappings.rs`, whose header says what
//! the Go test checks and how the harness keeps its semantics).
//!
//! What a check reads, in rollstat's terms:
//! * `present`: a rule of the file took the name: the first rule of the
//!   config (as the plan tries them) whose type and pattern match, unless it
//!   is the `**` rule rollstat makes of the file's `defaults` for the names
//!   no rule maps (it has no `name`). A line no rule takes must keep its own
//!   name and get no labels;
//! * `name`: the series' `metric` (the rule's `name` rendered, before
//!   escaping); a drop rule's line makes no series, so has none;
//! * `labels`: the series' labels (no tags are sent), empty values left
//!   out on both sides (Prometheus reads `l=""` as no label `l`);
//! * `ttl`: the series' own expiry (the config has one 1 s window, so a
//!   rule's ttl is not raised to a longer window's length);
//! * `metricType`: the matched rule's `match_type`;
//! * quantiles, `maxAge`, `ageBuckets`, `bufCap`: the series' summary;
//!   `buckets`: its histogram bounds; `scale`: its scale (1 for unset).

#[path = "reference/statsd_exporter_mappings.rs"]
mod reference;

use std::collections::BTreeMap;
use std::sync::Arc;

use reference::{Check, GoAction, GoTest, Rollstat, Scenario, SCENARIOS};
use rollstat::clock::Timestamp;
use rollstat::config::Config;
use rollstat::parse::{parse_datagram_with, Line, MetricKind, ParseOptions};
use rollstat::series::{Action, Mapping};
use rollstat::series::{Applied, KeyBuf, Plan, Registry, SeriesMeta};
use rollstat_testkit::TempDir;

/// The table's windows: one of 1 s, shorter than any rule's ttl.
const SHORT_WINDOW: &str = "[[windows]]\nname = \"1s\"\nbuckets = 1\ninterval_ms = 1000\n";

/// The windows of the sample config.toml (10 s and 1 m).
const SAMPLE_WINDOWS: &str = include_str!("common/two_windows.toml");

/// A config with `windows` loading the mapping file `path`.
fn config_text(windows: &str, path: &std::path::Path) -> String {
    format!(
        "{windows}\n[statsd_exporter]\nmapping_file = {}\n",
        toml_string(&path.display().to_string())
    )
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// What one line became.
enum Got {
    /// The line did not parse, or the registry refused it.
    Refused(String),
    /// A drop rule took it.
    Dropped,
    /// The series it made.
    Series(Arc<SeriesMeta>),
}

/// The statsd type a check's line is sent as (see the table's header).
fn line_type(c: &Check) -> &'static str {
    match c.metric_type {
        Some("counter") => "c",
        Some("gauge") => "g",
        Some(_) => "h",
        None if c.quantiles.is_some()
            || c.max_age.is_some()
            || c.age_buckets.is_some()
            || c.buf_cap.is_some()
            || c.buckets.is_some() =>
        {
            "h"
        }
        None => "c",
    }
}

/// A loaded scenario: the config and a registry of its plan.
struct Loaded {
    cfg: Config,
    registry: Registry,
    opts: ParseOptions,
    buf: KeyBuf,
}

impl Loaded {
    fn new(cfg: Config) -> Loaded {
        let opts = ParseOptions::default()
            .tag_styles(cfg.ingest.tag_styles)
            .statsd_exporter(cfg.exporter_compatible());
        let registry = Registry::new(Plan::new(cfg.series_settings()), 1);
        Loaded {
            cfg,
            registry,
            opts,
            buf: KeyBuf::default(),
        }
    }

    /// Ingests `line` at `now`.
    fn ingest(&mut self, line: &str, now: Timestamp) -> Got {
        let mut room = String::new();
        let mut lines = parse_datagram_with(line.as_bytes(), self.opts);
        let s = match lines.next_with_room(&mut room) {
            Some(Ok(Line::Sample(s))) => s,
            Some(Ok(Line::Skipped(k))) => return Got::Refused(k.reason().to_string()),
            Some(Err(e)) => return Got::Refused(e.reason().to_string()),
            None => return Got::Refused("empty".to_string()),
        };
        match self.registry.ingest(&s, now, &mut self.buf) {
            Err(r) => Got::Refused(r.reason().to_string()),
            Ok(Applied::DroppedByMapping) => Got::Dropped,
            Ok(Applied::Stored) => {
                let mut born = None;
                self.registry.visit(|m, _| {
                    if m.created == now {
                        born = Some(m.clone());
                    }
                });
                match born {
                    Some(m) => Got::Series(m),
                    None => Got::Refused("folded into an older series".to_string()),
                }
            }
        }
    }

    /// The rule the plan tries first that takes `name` of `kind`: its index
    /// in the config's mappings.
    fn rule(&self, name: &str, kind: MetricKind) -> Option<&Mapping> {
        let mut caps = Vec::new();
        self.cfg.mappings.iter().find(|m| {
            m.match_type.is_none_or(|k| k.contains(kind)) && m.pattern.matches(name, &mut caps)
        })
    }
}

fn kind_of(t: &str) -> MetricKind {
    match t {
        "c" => MetricKind::Counter,
        "g" => MetricKind::Gauge,
        _ => MetricKind::Histogram,
    }
}

/// Labels as Prometheus reads them: no empty values, sorted.
fn normalised<'a>(labels: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = labels
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.sort();
    v
}

/// Comparisons made, by what they compare.
#[derive(Default, Debug)]
struct Tally {
    compared: BTreeMap<&'static str, usize>,
}

impl Tally {
    fn compared(&mut self, what: &'static str) {
        *self.compared.entry(what).or_default() += 1;
    }
}

/// What in check `c` differs from statsd_exporter, in words (`Ok`: same).
fn check(l: &mut Loaded, c: &Check, now: Timestamp, tally: &mut Tally) -> Result<(), String> {
    let t = line_type(c);
    let line = format!("{}:1|{t}", c.statsd_metric);
    let got = l.ingest(&line, now);
    let rule = l.rule(c.statsd_metric, kind_of(t));
    // The `**` rule made of `defaults` has no `name`: no rule took it.
    let present = rule.is_some_and(|m| m.rename.is_some());
    let mut compare = |what: &'static str, ok: bool, detail: String| -> Result<(), String> {
        tally.compared(what);
        if ok {
            Ok(())
        } else {
            Err(format!("{line}: {what}: {detail}"))
        }
    };
    let meta = match &got {
        Got::Refused(r) => return Err(format!("{line}: refused ({r})")),
        Got::Dropped => None,
        Got::Series(m) => Some(m.clone()),
    };
    if !present {
        if let Some(m) = &meta {
            // rollstat's own sense of "no rule": its own name, no labels.
            assert_eq!(m.metric, c.statsd_metric, "{line}: unmapped, renamed");
        }
    }
    if c.not_present {
        compare("notPresent", !present, "a rule took it".to_string())?;
    }
    if let (true, Some(want)) = (present, c.name) {
        let have = meta.as_ref().map(|m| m.metric.as_str());
        compare(
            "name",
            have == Some(want),
            format!("{have:?}, want {want:?}"),
        )?;
    }
    if let Some(want) = c.labels {
        let have = normalised(
            meta.iter()
                .flat_map(|m| m.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        );
        let want = normalised(want.iter().copied());
        compare("labels", have == want, format!("{have:?}, want {want:?}"))?;
    }
    if let Some(want) = c.ttl {
        let have = meta.as_ref().and_then(|m| m.ttl);
        compare(
            "ttl",
            have == Some(want),
            format!("{have:?}, want {want:?}"),
        )?;
    }
    if let Some(want) = c.metric_type {
        let have = rule.and_then(|m| m.match_type).map(|k| k.as_str());
        compare(
            "metricType",
            have == Some(want),
            format!("{have:?}, want {want:?}"),
        )?;
    }
    if let Some(want) = c.buckets {
        let have = meta.as_ref().map(|m| m.histogram_buckets.to_vec());
        compare(
            "buckets",
            have.as_deref() == Some(want),
            format!("{have:?}, want {want:?}"),
        )?;
    }
    let summary = meta.as_ref().and_then(|m| m.summary.clone());
    if let Some(want) = c.quantiles {
        let have = summary.as_ref().map(|s| s.quantiles.clone());
        let qs: Vec<f64> = want.iter().map(|q| q.0).collect();
        compare(
            "quantiles",
            have.as_ref() == Some(&qs),
            format!("{have:?}, want {qs:?}"),
        )?;
        let have = summary.as_ref().map(|s| s.errors.clone());
        let errors: Vec<f64> = want.iter().map(|q| q.1).collect();
        compare(
            "quantile errors",
            have.as_ref() == Some(&errors),
            format!("{have:?}, want {errors:?}"),
        )?;
    }
    if let Some(want) = c.max_age {
        let have = summary.as_ref().map(|s| s.max_age);
        compare(
            "maxAge",
            have == Some(want),
            format!("{have:?}, want {want:?}"),
        )?;
    }
    if let Some(want) = c.age_buckets {
        let have = summary.as_ref().map(|s| s.window.size());
        compare(
            "ageBuckets",
            have == Some(want as usize),
            format!("{have:?}, want {want}"),
        )?;
    }
    if let Some(want) = c.buf_cap {
        let have = summary.as_ref().map(|s| s.buf_cap);
        compare(
            "bufCap",
            have == Some(want as usize),
            format!("{have:?}, want {want}"),
        )?;
    }
    if present {
        // A drop rule's scale is the rule's; a series' is its own.
        let have = match &meta {
            Some(m) => m.scale,
            None => rule.and_then(|m| m.scale).unwrap_or(1.0),
        };
        let want = c.scale.unwrap_or(1.0);
        compare("scale", have == want, format!("{have}, want {want}"))?;
    }
    Ok(())
}

/// What in scenario `s` differs from statsd_exporter (`None`: same), on the
/// table's window.
fn run(s: &Scenario, tally: &mut Tally) -> Option<String> {
    run_on(SHORT_WINDOW, s, tally)
}

/// What in scenario `s` differs from statsd_exporter on `windows`.
fn run_on(windows: &str, s: &Scenario, tally: &mut Tally) -> Option<String> {
    let dir = TempDir::new("compat-mapper");
    let file = dir.path().join("mapping.yml");
    std::fs::write(&file, s.config).unwrap();
    let cfg = match (Config::parse(&config_text(windows, &file)), s.config_bad) {
        (Err(e), true) => {
            tally.compared("refused");
            let text = e.to_string();
            return match s.refused_with {
                Some(want) if text.contains(want) => None,
                Some(want) => Some(format!("refused, but not with {want:?}: {text}")),
                None => Some(format!("refused; the table must say with what: {text}")),
            };
        }
        (Err(e), false) => return Some(format!("refused: {e}")),
        (Ok(_), true) => return Some("loaded, statsd_exporter refuses it".to_string()),
        (Ok(cfg), false) => cfg,
    };
    tally.compared("loaded");
    let mut l = Loaded::new(cfg);
    if let Some(want) = s.action {
        tally.compared("action");
        let have = l.cfg.mappings.first().map(|m| m.action);
        let want_action = match want {
            GoAction::Map => Action::Keep,
            GoAction::Drop => Action::Drop,
        };
        if have != Some(want_action) {
            return Some(format!("first rule's action {have:?}, want {want:?}"));
        }
    }
    let mut t = 0;
    for round in 0..s.rounds {
        for c in s.checks {
            t += 1;
            let now = Timestamp::from_secs(t);
            if round == 0 {
                if let Err(d) = check(&mut l, c, now, tally) {
                    return Some(d);
                }
                continue;
            }
            // Later rounds (`TestMultipleMatches`): the line finds the
            // series the first round made, whose name was checked.
            let before = l.registry.len();
            let line = format!("{}:1|{}", c.statsd_metric, line_type(c));
            tally.compared("later round");
            match l.ingest(&line, now) {
                Got::Refused(r) if l.registry.len() == before && r.starts_with("folded") => {}
                _ => return Some(format!("{line}: round {round} made a new series")),
            }
        }
    }
    None
}

/// Whether scenario `s` stands as the table says: `Ok(true)` differing as
/// documented, `Ok(false)` the same, `Err` with what is wrong.
fn judge(s: &Scenario, tally: &mut Tally) -> Result<bool, String> {
    let got = run(s, tally);
    match (&s.rollstat, got) {
        (Rollstat::Same, None) => Ok(false),
        (Rollstat::Same, Some(d)) => Err(format!("{}: {d}", s.name)),
        (Rollstat::Differs { why, rollstat, .. }, _) if why.is_empty() || rollstat.is_empty() => {
            Err(format!(
                "{}: a difference needs what rollstat does and why",
                s.name
            ))
        }
        (Rollstat::Differs { .. }, None) => Err(format!(
            "{}: marked as differing, but rollstat now does what statsd_exporter does",
            s.name
        )),
        (Rollstat::Differs { differs, .. }, Some(d)) if d.contains(differs) => Ok(true),
        (Rollstat::Differs { differs, .. }, Some(d)) => Err(format!(
            "{}: differs otherwise than documented: {d} (documented: {differs})",
            s.name
        )),
    }
}

#[test]
fn statsd_exporters_mapper_scenarios_map_as_the_table_says() {
    let mut failures = Vec::new();
    let mut tally = Tally::default();
    let (mut same, mut differs) = (0, 0);
    for s in SCENARIOS {
        match judge(s, &mut tally) {
            Ok(false) => same += 1,
            Ok(true) => differs += 1,
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let count = |t: GoTest| SCENARIOS.iter().filter(|s| s.test == t).count();
    assert_eq!(
        (
            count(GoTest::MetricMapperYaml),
            count(GoTest::Action),
            count(GoTest::MultipleMatches)
        ),
        (54, 6, 1),
        "statsd_exporter ac592b1e33's TestMetricMapperYAML, TestAction, TestMultipleMatches"
    );
    let checks: usize = SCENARIOS.iter().map(|s| s.checks.len()).sum();
    assert_eq!(checks, 70, "mapping checks (66 + TestMultipleMatches' 4)");
    assert_eq!((same, differs), (61, 0), "scenarios the same / differing");
    // What was compared, by field: every check the Go loop makes.
    let want: BTreeMap<&str, usize> = [
        ("loaded", 50),
        ("refused", 11),
        ("action", 4),
        ("notPresent", 1),
        ("name", 59),
        ("labels", 66),
        ("ttl", 3),
        ("metricType", 2),
        ("buckets", 6),
        ("quantiles", 13),
        ("quantile errors", 13),
        ("maxAge", 10),
        ("ageBuckets", 10),
        ("bufCap", 10),
        ("scale", 62),
        ("later round", 36),
    ]
    .into_iter()
    .collect();
    assert_eq!(tally.compared, want);
    assert_eq!(want.values().sum::<usize>(), 356);
}

/// The table stays true both ways: a row marked as differing fails once
/// rollstat does what statsd_exporter does, and a row whose difference is
/// not the documented one fails too.
#[test]
fn a_row_marked_differing_fails_when_rollstat_agrees_or_differs_otherwise() {
    let same = SCENARIOS
        .iter()
        .find(|s| s.name == "Config with 'scale' field")
        .unwrap();
    let marked = |differs: &'static str| Scenario {
        rollstat: Rollstat::Differs {
            differs,
            rollstat: "a made-up difference",
            why: "to test the harness",
        },
        checks: same.checks,
        ..*same
    };
    let err = judge(&marked("scale"), &mut Tally::default()).unwrap_err();
    assert!(err.contains("now does what statsd_exporter does"), "{err}");

    const WRONG: &[Check] = &[Check {
        statsd_metric: "grpc_server.Foo.Bar.latency_ms",
        name: Some("grpc_server_handling_seconds"),
        labels: Some(&[("grpc_service", "Foo"), ("grpc_method", "Bar")]),
        scale: Some(0.002),
        ..reference::CHECK
    }];
    let wrong = |differs| Scenario {
        checks: WRONG,
        ..marked(differs)
    };
    assert_eq!(
        judge(&wrong("scale: 0.001, want 0.002"), &mut Tally::default()),
        Ok(true)
    );
    let err = judge(&wrong("labels"), &mut Tally::default()).unwrap_err();
    assert!(err.contains("differs otherwise than documented"), "{err}");
}

/// The table runs on one 1 s window. On longer windows (the sample
/// config's 10 s and 1 m) a rule's ttl shorter than the longest window is
/// raised to it (a series lives until its windows have drained, and all
/// its families go together; check-config warns): the two scenarios whose
/// ttl is under a minute then differ by that, and nothing else does.
#[test]
fn on_the_sample_configs_windows_only_a_ttl_under_a_minute_differs_and_lasts_the_minute() {
    let differ: Vec<(&str, String)> = SCENARIOS
        .iter()
        .filter_map(|s| run_on(SAMPLE_WINDOWS, s, &mut Tally::default()).map(|d| (s.name, d)))
        .collect();
    assert_eq!(
        differ,
        [
            (
                "Config that has a ttl",
                "web.localhost:1|c: ttl: Some(60s), want 10s".to_string()
            ),
            (
                "Config that override a default ttl",
                "web.localhost:1|c: ttl: Some(60s), want 5s".to_string()
            ),
        ]
    );
}

/// Beyond the Go test: the two names it writes for lines no rule takes
/// (and never reads) are what statsd_exporter publishes for them, its
/// escaped statsd name; rollstat's family name for them is the same.
#[test]
fn the_names_the_go_test_writes_for_unmapped_lines_are_rollstats_family_names() {
    let mut seen = 0;
    for s in SCENARIOS {
        let dir = TempDir::new("compat-mapper-unmapped");
        let file = dir.path().join("mapping.yml");
        std::fs::write(&file, s.config).unwrap();
        let Ok(cfg) = Config::parse(&config_text(SHORT_WINDOW, &file)) else {
            continue;
        };
        let mut l = Loaded::new(cfg);
        for (i, c) in s.checks.iter().enumerate() {
            let t = line_type(c);
            let unmapped = l
                .rule(c.statsd_metric, kind_of(t))
                .is_none_or(|m| m.rename.is_none());
            let got = l.ingest(
                &format!("{}:1|{t}", c.statsd_metric),
                Timestamp::from_secs(i as u64 + 1),
            );
            let (true, Some(want), Got::Series(m)) = (unmapped, c.name, got) else {
                continue;
            };
            assert_eq!(&*m.prom_name, want, "{}: {}", s.name, c.statsd_metric);
            seen += 1;
        }
    }
    assert_eq!(seen, 2, "test.1.2 and test.web-server.foo.bar");
}

/// Beyond the Go test, which reads a summary's `max_age`, `age_buckets`
/// and `buf_cap` only where the file sets them: where it sets none,
/// statsd_exporter leaves them 0 and client_golang takes `DefMaxAge` (10
/// minutes), `DefAgeBuckets` (5) and `DefBufCap` (500); so does rollstat.
#[test]
fn a_summary_the_file_gives_no_options_gets_the_go_clients_defaults() {
    let s = SCENARIOS
        .iter()
        .find(|s| s.name == "Config with good observertype and no defaults")
        .unwrap();
    let dir = TempDir::new("compat-mapper-defaults");
    let file = dir.path().join("mapping.yml");
    std::fs::write(&file, s.config).unwrap();
    let mut l = Loaded::new(Config::parse(&config_text(SHORT_WINDOW, &file)).unwrap());
    let Got::Series(m) = l.ingest("test1.*.*:1|h", Timestamp::from_secs(1)) else {
        panic!("no series");
    };
    let spec = m.summary.as_ref().expect("a summary");
    assert_eq!(
        (spec.max_age, spec.window.size(), spec.buf_cap),
        (std::time::Duration::from_secs(600), 5, 500)
    );
    assert_eq!(spec.errors, [0.05, 0.01, 0.001]);
}
