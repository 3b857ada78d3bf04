//! `[statsd_exporter] mapping_file`: a prometheus/statsd_exporter mapping
//! file (YAML), read as it is, and turned into rollstat mapping rules with
//! the same meaning; `rollstat convert-mapping` prints the same rules as
//! `[[mappings]]` TOML.
//!
//! Every key of the documented format is honoured with statsd_exporter's
//! meaning, or refused with a problem naming the file's line, the key and
//! why; unknown keys are problems (statsd_exporter reads the file strictly
//! too). What each key becomes:
//!
//! | key | here |
//! | --- | --- |
//! | `mappings[].match` + `match_type: glob` | a glob: each dot-separated part is `*` (any one part, a capture) or literal, checked as statsd_exporter checks it |
//! | `match` + `match_type: regex` | Go's RE2 syntax, matched **anywhere** in the name (rollstat anchors: the regex `p` becomes `.*?(p).*`) |
//! | order | statsd_exporter tries every glob rule before any regex rule: so do the rules read here (globs in file order, then regexes in file order) |
//! | `defaults.glob_disable_ordering: true` | globs by specificity instead of file order: a literal part beats `*` at the first part where they differ |
//! | `name` | the Prometheus name (templates: `$1`, `${1}` for globs; Go's `$n`, `${n}`, `$name`, `${name}`, `$0` for regexes); required, also for `action: drop`, as statsd_exporter requires |
//! | `labels` | extra labels with templates; a mapping label replaces a tag of the same name |
//! | `honor_labels: true` | a tag of the same name wins over the mapping label |
//! | `match_metric_type` | `counter`, `gauge`, or `observer` (timers, histograms and distributions) |
//! | `action` | `map` (the default) or `drop` |
//! | `ttl` (rule or `defaults`) | the series' own expiry (Go duration, e.g. `1h30m`; `0`: never, statsd_exporter's default); unset: `[series] ttl_secs` |
//! | `observer_type: histogram`, `histogram_options.buckets` | a Prometheus histogram with these bounds (default: `[series] histogram_buckets`) |
//! | `scale` | every value multiplied by it (after a timer's milliseconds become seconds), above 0 |
//! | `help` | the HELP text of the series' cumulative family |
//! | `observer_type: summary` or unset (statsd_exporter's default), `summary_options` | a Prometheus summary kept as the Go client keeps it: `age_buckets` streams over `max_age`, each quantile within its objective's rank `error` (an objective without one is exact), values merged in batches of `buf_cap` (a scrape sees them all) |
//! | `defaults` for unmapped names | a last rule `**` with the defaults' observer type, `ttl` and buckets, as statsd_exporter gives them to names no rule maps |
//! | `timer_type`, top-level `buckets` and `quantiles`, `match_metric_type: timer` (statsd_exporter until 0.29) | read as `observer_type`, `histogram_options.buckets`, `summary_options.quantiles`, `observer` |
//! | `histogram_options.native_histogram_bucket_factor`, `native_histogram_max_buckets` | as statsd_exporter: every histogram has a native histogram, served over protobuf beside the classic buckets, with the rule's factor and limit where above 0, else `defaults`' where above 0, else 1.1 and 256; a factor of 1 or less: none; a limit above 32768 is 32768, rollstat's most |

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use saphyr::{MarkedYaml, Scalar, YamlData};

use super::yaml::{go_duration, load_document, type_name, Reader, YamlProblem};
use super::{go_regex, go_template};
use crate::mapping::{Glob, Matcher, NameRegex, Template};
use crate::parse::MetricKind;
use crate::series::{Action, KindSet, Mapping, SummarySpec};

/// A statsd_exporter mapping file, read: its rules in the order
/// statsd_exporter tries them, in rollstat's terms but not yet compiled.
#[derive(Clone, Debug, PartialEq)]
pub struct ExporterRules {
    /// The rules, in the order they are tried.
    pub rules: Vec<Rule>,
    /// What the file means that rollstat does differently (not problems).
    pub warnings: Vec<String>,
}

/// One rule of the file, in rollstat's syntax.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// The rule's line in the file.
    pub line: usize,
    /// A glob (`match`) or a whole-name regex (`match_regex`).
    pub pattern: Pattern,
    /// `match_metric_type`.
    pub kinds: Option<KindSet>,
    /// `action: drop`.
    pub drop: bool,
    /// `name`, as a rollstat template.
    pub name: String,
    /// `labels`, as rollstat templates, in file order.
    pub labels: Vec<(String, String)>,
    /// `honor_labels`.
    pub honor_labels: bool,
    /// `ttl` (of the rule, else of `defaults`); `Some(ZERO)`: never.
    pub ttl: Option<Duration>,
    /// Where that `ttl` is written: its line and key.
    pub ttl_at: Option<(usize, String)>,
    /// `histogram_options.buckets` (of the rule, else of `defaults`).
    pub buckets: Option<Vec<f64>>,
    /// A histogram's native histogram, as statsd_exporter gives it one
    /// ([`native`]): the bucket factor (`0`: none) and the bucket limit.
    /// `None` for a summary.
    pub native: Option<(f64, u32)>,
    /// `scale`.
    pub scale: Option<f64>,
    /// `help`.
    pub help: Option<String>,
    /// A summary (`observer_type: summary`, statsd_exporter's default) and
    /// its options; `None`: a histogram on `buckets`.
    pub summary: Option<SummarySpec>,
    /// The rule made of `defaults` for the names no rule maps (statsd_exporter
    /// gives them the defaults' observer type, ttl and buckets): `**`, no
    /// rename.
    pub unmapped: bool,
    /// What rollstat does differently with this rule (each naming the
    /// file's line): warnings, not problems.
    pub notes: Vec<String>,
}

/// A rule's pattern, in rollstat's syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// A glob (statsd_exporter's, which rollstat reads the same way).
    Glob(String),
    /// A regex anchored to the whole name (the translated `.*?(p).*`).
    Regex(String),
}

const TOP_KEYS: &[&str] = &["defaults", "mappings"];
const DEFAULT_KEYS: &[&str] = &[
    "observer_type",
    "timer_type",
    "buckets",
    "quantiles",
    "match_type",
    "glob_disable_ordering",
    "ttl",
    "summary_options",
    "histogram_options",
];
const RULE_KEYS: &[&str] = &[
    "match",
    "timer_type",
    "buckets",
    "quantiles",
    "name",
    "labels",
    "honor_labels",
    "observer_type",
    "match_type",
    "help",
    "action",
    "match_metric_type",
    "ttl",
    "summary_options",
    "histogram_options",
    "scale",
];
const SUMMARY_KEYS: &[&str] = &["quantiles", "max_age", "age_buckets", "buf_cap"];
const HISTOGRAM_KEYS: &[&str] = &[
    "buckets",
    "native_histogram_bucket_factor",
    "native_histogram_max_buckets",
];

/// What `defaults` sets for every rule.
#[derive(Default)]
struct Defaults {
    regex: bool,
    unordered: bool,
    ttl: Option<Duration>,
    ttl_at: Option<(usize, String)>,
    buckets: Option<Vec<f64>>,
    native_factor: Option<f64>,
    native_max: Option<u32>,
    /// `observer_type`: `Some(true)` histogram, `Some(false)` summary.
    histogram: Option<bool>,
    summary: SummaryOptions,
}

/// `summary_options`, as written (a rule's unset fields fall back to
/// `defaults`, then to statsd_exporter's own defaults).
#[derive(Clone, Default)]
struct SummaryOptions {
    /// `(quantile, error)` objectives.
    quantiles: Option<Vec<(f64, f64)>>,
    max_age: Option<Duration>,
    age_buckets: Option<usize>,
    buf_cap: Option<usize>,
}

/// Reads the text of a statsd_exporter mapping file: every problem found,
/// or its rules.
pub fn parse(text: &str) -> Result<ExporterRules, Vec<YamlProblem>> {
    let mut r = Reader::default();
    let Ok(doc) = load_document(&mut r, text, "a mapping file") else {
        return Err(r.problems);
    };
    let mut defaults = Defaults::default();
    let mut rules = Vec::new();
    if let Some(doc) = &doc {
        let entries = r.entries(doc, "");
        // `defaults` first wherever it is written: it applies to every rule.
        for (k, line, v) in &entries {
            match k.as_str() {
                "defaults" => defaults = read_defaults(&mut r, v),
                "mappings" => {}
                _ => r.unknown(*line, k, TOP_KEYS),
            }
        }
        for (k, _, v) in &entries {
            if k == "mappings" {
                rules = read_rules(&mut r, v, &defaults);
            }
        }
    }
    if !r.problems.is_empty() {
        r.problems.sort_by_key(|p| p.line);
        return Err(r.problems);
    }
    let warnings: Vec<String> = rules.iter().flat_map(|r| r.notes.clone()).collect();
    if let Some(rule) = unmapped_rule(&mut r, &defaults) {
        rules.push(rule);
    }
    if !r.problems.is_empty() {
        r.problems.sort_by_key(|p| p.line);
        return Err(r.problems);
    }
    Ok(ExporterRules { rules, warnings })
}

fn read_defaults(r: &mut Reader, node: &MarkedYaml<'_>) -> Defaults {
    let mut d = Defaults::default();
    let (mut legacy_observer, mut legacy_buckets, mut legacy_quantiles) = (None, None, None);
    for (k, line, v) in r.entries(node, "defaults") {
        let key = format!("defaults.{k}");
        match k.as_str() {
            "match_type" => d.regex = read_match_type(r, v, &key),
            "glob_disable_ordering" => d.unordered = r.bool(v, &key).unwrap_or(false),
            "ttl" => {
                d.ttl = read_ttl(r, v, &key);
                d.ttl_at = Some((line, key.clone()));
            }
            "observer_type" => d.histogram = read_observer(r, v, &key),
            "histogram_options" => {
                let h = read_histogram(r, v, &key);
                (d.buckets, d.native_factor, d.native_max) =
                    (h.buckets, h.native_factor, h.native_max);
            }
            "summary_options" => d.summary = read_summary_options(r, v, &key),
            // Keys statsd_exporter read until 0.29 (removed in March 2026):
            // the file may come from an older exporter.
            "timer_type" => legacy_observer = read_observer(r, v, &key),
            "buckets" => legacy_buckets = read_bounds(r, v, &key),
            "quantiles" => legacy_quantiles = read_quantiles(r, v, &key),
            _ => r.unknown(line, &key, DEFAULT_KEYS),
        }
    }
    // statsd_exporter's old rule: the new keys win over the deprecated ones.
    d.histogram = d.histogram.or(legacy_observer);
    d.buckets = d.buckets.or(legacy_buckets);
    if d.summary.quantiles.is_none() {
        d.summary.quantiles = legacy_quantiles;
    }
    d
}

fn read_rules(r: &mut Reader, node: &MarkedYaml<'_>, d: &Defaults) -> Vec<Rule> {
    let items: Vec<&MarkedYaml<'_>> = match &node.data {
        YamlData::Sequence(items) => items.iter().collect(),
        YamlData::Value(Scalar::Null) => Vec::new(),
        _ => {
            r.at(
                node.span.start.line(),
                "mappings",
                format!(
                    "expected a list of rules (`- match: ...`), found {}",
                    type_name(node)
                ),
            );
            return Vec::new();
        }
    };
    let mut globs = Vec::new();
    let mut regexes = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let line = item.span.start.line();
        let path = format!("mappings[{i}]");
        if let Some((rule, regex)) = read_rule(r, item, &path, line, d) {
            if regex {
                regexes.push(rule);
            } else {
                globs.push(rule);
            }
        }
    }
    if d.unordered {
        // The FSM without ordering prefers a literal part to `*` at the
        // first part where two globs differ (globs of different lengths
        // never match the same name). A stable sort keeps file order among
        // equals.
        globs.sort_by_key(|(_, key)| key.clone());
    }
    globs
        .into_iter()
        .map(|(rule, _)| rule)
        .chain(regexes.into_iter().map(|(rule, _)| rule))
        .collect()
}

/// A rule's keys as written, before they are checked together.
#[derive(Default)]
struct Written {
    matched: Option<(String, usize)>,
    regex: bool,
    name: Option<(String, usize)>,
    /// `(key, template as written, line)`.
    labels: Vec<(String, String, usize)>,
    honor_labels: bool,
    drop: bool,
    kinds: Option<KindSet>,
    ttl: Option<Duration>,
    ttl_at: Option<(usize, String)>,
    buckets: Option<Vec<f64>>,
    native_factor: Option<f64>,
    native_max: Option<u32>,
    observer: Option<bool>,
    legacy_observer: Option<bool>,
    legacy_buckets: Option<(Vec<f64>, usize)>,
    legacy_quantiles: Option<(Vec<(f64, f64)>, usize)>,
    summary_options: Option<SummaryOptions>,
    histogram_line: Option<usize>,
    summary_line: Option<usize>,
    scale: Option<f64>,
    help: Option<String>,
    notes: Vec<String>,
}

impl Written {
    /// Reads key `k` (at `kline`, path `key`) of a rule.
    fn read(&mut self, r: &mut Reader, k: &str, kline: usize, v: &MarkedYaml<'_>, key: String) {
        match k {
            "match" => self.matched = r.scalar_text(v, &key).map(|s| (s, kline)),
            "match_type" => self.regex = read_match_type(r, v, &key),
            "name" => self.name = r.scalar_text(v, &key).map(|s| (s, kline)),
            "labels" => self.read_labels(r, v, &key),
            "honor_labels" => self.honor_labels = r.bool(v, &key).unwrap_or(false),
            "action" => self.drop = read_action(r, v, kline, &key),
            "match_metric_type" => self.kinds = read_metric_type(r, v, kline, &key),
            "ttl" => {
                // A rule's 0 means "the default's" in statsd_exporter.
                if let Some(t) = read_ttl(r, v, &key).filter(|t| !t.is_zero()) {
                    self.ttl = Some(t);
                    self.ttl_at = Some((kline, key));
                }
            }
            "observer_type" => self.observer = read_observer(r, v, &key),
            // statsd_exporter until 0.29: `timer_type` (observer_type wins),
            // and `buckets` / `quantiles` outside their *_options (an error
            // beside the same key inside them).
            "timer_type" => self.legacy_observer = read_observer(r, v, &key),
            "buckets" => self.legacy_buckets = read_bounds(r, v, &key).map(|b| (b, kline)),
            "quantiles" => {
                self.legacy_quantiles = read_quantiles(r, v, &key).map(|q| (q, kline));
            }
            "histogram_options" => {
                self.histogram_line = Some(kline);
                let h = read_histogram(r, v, &key);
                (self.buckets, self.native_factor, self.native_max) =
                    (h.buckets, h.native_factor, h.native_max);
            }
            "summary_options" => {
                self.summary_line = Some(kline);
                self.summary_options = Some(read_summary_options(r, v, &key));
            }
            "scale" => self.scale = read_scale(r, v, kline, &key),
            "help" => {
                self.help = r.scalar_text(v, &key);
                if self
                    .help
                    .as_ref()
                    .is_some_and(|h| h.contains('\n') || h.len() > 1024)
                {
                    r.at(kline, &key, "one line of at most 1024 bytes");
                }
            }
            _ => r.unknown(kline, &key, RULE_KEYS),
        }
    }

    /// `labels`: each key checked (invalid, reserved, renamed, as is).
    fn read_labels(&mut self, r: &mut Reader, v: &MarkedYaml<'_>, key: &str) {
        for (lk, lline, lv) in r.entries(v, key) {
            let lkey = format!("{key}.{lk}");
            let Some(val) = r.scalar_text(lv, &lkey) else {
                continue;
            };
            match label_key(&lk) {
                LabelKey::Invalid => r.at(lline, &lkey, "invalid label key: statsd_exporter takes [a-zA-Z_][a-zA-Z0-9_]+ (two characters or more)"),
                LabelKey::Reserved => r.at(lline, &lkey, "label names starting with `__` are reserved for Prometheus' own use (statsd_exporter's client library refuses them too, so the rule could never publish a series); pick another name"),
                LabelKey::Renamed(to) => {
                    self.notes.push(renamed_note(lline, &lkey, &lk, &to));
                    self.labels.push((to, val, lline));
                }
                LabelKey::AsIs => self.labels.push((lk, val, lline)),
            }
        }
    }

    /// The deprecated `buckets` and `quantiles` where the new keys are not
    /// set (both set: statsd_exporter's error).
    fn take_legacy(&mut self, r: &mut Reader, path: &str) {
        if let Some((b, l)) = self.legacy_buckets.take() {
            if self.buckets.is_some() {
                r.at(
                    l,
                    &format!("{path}.buckets"),
                    "cannot use buckets in both the top level and histogram_options at the same time",
                );
            }
            self.buckets = Some(b);
        }
        if let Some((q, l)) = self.legacy_quantiles.take() {
            let opts = self
                .summary_options
                .get_or_insert_with(SummaryOptions::default);
            if opts.quantiles.is_some() {
                r.at(
                    l,
                    &format!("{path}.quantiles"),
                    "cannot use quantiles in both the top level and summary_options at the same time",
                );
            }
            opts.quantiles = Some(q);
        }
    }
}

/// `action`: `true` for drop.
fn read_action(r: &mut Reader, v: &MarkedYaml<'_>, line: usize, key: &str) -> bool {
    match r.string(v, key).as_deref() {
        Some("drop") => true,
        Some("map" | "") | None => false,
        Some(other) => {
            r.at(
                line,
                key,
                format!("invalid action type \"{other}\"; use map (the default) or drop"),
            );
            false
        }
    }
}

/// `match_metric_type`: counter, gauge, or observer (`timer` until 0.29).
fn read_metric_type(r: &mut Reader, v: &MarkedYaml<'_>, line: usize, key: &str) -> Option<KindSet> {
    match r.string(v, key).as_deref() {
        Some("counter") => Some(KindSet::one(MetricKind::Counter)),
        Some("gauge") => Some(KindSet::one(MetricKind::Gauge)),
        Some("observer" | "timer") => Some(KindSet::OBSERVER),
        Some(other) => {
            r.at(line, key, format!("invalid metric type '{other}'; use counter, gauge or observer (timers, histograms, distributions)"));
            None
        }
        None => None,
    }
}

/// `scale`: a number above 0.
fn read_scale(r: &mut Reader, v: &MarkedYaml<'_>, line: usize, key: &str) -> Option<f64> {
    let scale = match &v.data {
        YamlData::Value(Scalar::Integer(n)) => Some(*n as f64),
        YamlData::Value(Scalar::FloatingPoint(f)) => Some(f.into_inner()),
        _ => None,
    }
    .filter(|f| f.is_finite() && *f > 0.0);
    if scale.is_none() {
        r.at(
            line,
            key,
            format!(
                "expected a number above 0 (e.g. 0.001: milliseconds to seconds), found {}",
                type_name(v)
            ),
        );
    }
    scale
}

/// A rule's pattern in rollstat's terms, its glob's specificity key, and
/// its name and labels as rollstat templates.
type Compiled = (Pattern, Vec<u8>, String, Vec<(String, String, usize)>);

/// Compiles the rule's `match` (`m`, at `mline`) and translates its name
/// and label templates to the pattern's captures.
fn compile_pattern(
    r: &mut Reader,
    w: &Written,
    m: &str,
    mline: usize,
    key: &str,
    name: &str,
) -> Option<Compiled> {
    let labels = w.labels.clone();
    if w.regex {
        let go = go_pattern(r, m, mline, key)?;
        let translated = go_template::unanchored(&go);
        let re = match NameRegex::new(&translated) {
            Ok(re) => re,
            Err(e) => {
                r.at(mline, key, format!("invalid regex `{m}`: {e}"));
                return None;
            }
        };
        let groups = re.captures() - 1;
        let tpl = |s: &str| go_template::from_regex(s, groups, |n| re.group_index(n));
        let labels = labels
            .into_iter()
            .map(|(k, v, l)| (k, tpl(&v), l))
            .collect();
        return Some((Pattern::Regex(translated), Vec::new(), tpl(name), labels));
    }
    let Some(spec) = exporter_glob(m) else {
        r.at(mline, key, format!("invalid match: {m}: statsd_exporter's globs are dot-separated parts, each `*` or a name part ([a-zA-Z_][a-zA-Z0-9_-]*, later parts may start with a digit)"));
        return None;
    };
    let wildcards = spec.iter().filter(|&&w| w == 1).count();
    let tpl = |s: &str| go_template::from_glob(s, wildcards);
    let labels = labels
        .into_iter()
        .map(|(k, v, l)| (k, tpl(&v), l))
        .collect();
    Some((Pattern::Glob(m.to_string()), spec, tpl(name), labels))
}

/// One rule: with, for a glob, its specificity key (per part: literal 0,
/// `*` 1); whether it is a regex.
fn read_rule(
    r: &mut Reader,
    node: &MarkedYaml<'_>,
    path: &str,
    line: usize,
    d: &Defaults,
) -> Option<((Rule, Vec<u8>), bool)> {
    let before = r.problems.len();
    let mut w = Written {
        regex: d.regex,
        ttl: d.ttl,
        ttl_at: d.ttl_at.clone(),
        ..Written::default()
    };
    for (k, kline, v) in r.entries(node, path) {
        let key = format!("{path}.{k}");
        w.read(r, &k, kline, v, key);
    }
    let Some((name, name_line)) = w.name.clone().filter(|(n, _)| !n.is_empty()) else {
        r.at(
            line,
            &format!("{path}.name"),
            "metric mapping didn't set a metric name: every rule needs `name`, also with action: drop (statsd_exporter refuses the file too)",
        );
        return None;
    };
    let Some((m, mline)) = w.matched.clone() else {
        r.at(line, &format!("{path}.match"), "every rule needs `match`");
        return None;
    };
    if r.problems.len() > before {
        return None;
    }
    let key = format!("{path}.match");
    let (pattern, spec, name_tpl, labels) = compile_pattern(r, &w, &m, mline, &key, &name)?;
    if !is_exporter_metric_name(&name) {
        r.at(
            name_line,
            &format!("{path}.name"),
            format!("metric name '{name}' is not [a-zA-Z_][a-zA-Z0-9_]* with $n/${{n}} references, as statsd_exporter requires"),
        );
        return None;
    }
    w.take_legacy(r, path);
    // statsd_exporter: the rule's observer type, else the defaults', else
    // a summary; options of the other kind are an error.
    let histogram = w
        .observer
        .or(w.legacy_observer)
        .or(d.histogram)
        .unwrap_or(false);
    match (histogram, w.summary_line, w.histogram_line) {
        (true, Some(l), _) => r.at(l, &format!("{path}.summary_options"), "cannot use histogram observer and summary options at the same time"),
        (false, _, Some(l)) => r.at(l, &format!("{path}.histogram_options"), "cannot use summary observer and histogram options at the same time (statsd_exporter's default observer_type is summary: set observer_type: histogram)"),
        _ => {}
    }
    let summary = (!histogram)
        .then(|| summary_spec(r, line, path, w.summary_options.as_ref(), &d.summary))
        .flatten();
    if r.problems.len() > before {
        return None;
    }
    let rule = Rule {
        line,
        pattern,
        kinds: w.kinds,
        drop: w.drop,
        name: name_tpl,
        labels: labels.into_iter().map(|(k, v, _)| (k, v)).collect(),
        honor_labels: w.honor_labels,
        ttl: w.ttl,
        ttl_at: w.ttl_at,
        buckets: if histogram {
            w.buckets.or_else(|| d.buckets.clone())
        } else {
            None
        },
        native: histogram.then(|| native(w.native_factor, w.native_max, d)),
        scale: w.scale,
        help: w.help.filter(|h| !h.is_empty()),
        summary,
        unmapped: false,
        notes: w.notes,
    };
    Some(((rule, spec), w.regex))
}

/// The rule's regex `m` as Go's RE2 reads it, in the `regex` crate's
/// syntax ([`go_regex`]), checked on its own before it is anchored: a
/// problem (at `line`, quoting the user's text) if either engine refuses
/// it. Without this `api)|(.*` became `.*?(api)|(.*).*`, a catch-all.
fn go_pattern(r: &mut Reader, m: &str, line: usize, key: &str) -> Option<String> {
    let checked = go_regex::translate(m).and_then(|go| match regex::Regex::new(&go) {
        Ok(_) => Ok(go),
        // The crate's message on the user's own text where it reads it,
        // else on what Go's syntax became.
        Err(e) => Err(regex::Regex::new(m).err().unwrap_or(e).to_string()),
    });
    match checked {
        Ok(go) => Some(go),
        Err(e) => {
            r.at(
                line,
                key,
                format!("invalid regex `{m}` (Go's RE2 syntax, as statsd_exporter reads it): {e}"),
            );
            None
        }
    }
}

/// The summary of a rule whose options are `own` (unset fields from
/// `defaults`, then statsd_exporter's: 0.5, 0.9, 0.99 over 10 minutes in
/// 5 buckets).
fn summary_spec(
    r: &mut Reader,
    line: usize,
    path: &str,
    own: Option<&SummaryOptions>,
    defaults: &SummaryOptions,
) -> Option<SummarySpec> {
    let d = SummarySpec::exporter_default();
    let own = own.cloned().unwrap_or_default();
    let quantiles = own
        .quantiles
        .or_else(|| defaults.quantiles.clone())
        .unwrap_or_else(|| {
            d.quantiles
                .iter()
                .copied()
                .zip(d.errors.iter().copied())
                .collect()
        });
    let max_age = own.max_age.or(defaults.max_age).unwrap_or(d.max_age);
    let age_buckets = own
        .age_buckets
        .or(defaults.age_buckets)
        .unwrap_or(d.window.size());
    let buf_cap = own.buf_cap.or(defaults.buf_cap).unwrap_or(d.buf_cap);
    match SummarySpec::new(&quantiles, max_age, age_buckets, buf_cap) {
        Ok(s) => Some(s),
        Err(e) => {
            r.at(
                line,
                &format!("{path}.summary_options"),
                format!("summary options: {e}"),
            );
            None
        }
    }
}

/// `summary_options`: `quantiles` (`- quantile: 0.5` with an `error`),
/// `max_age` (a Go duration), `age_buckets`, `buf_cap` (0: the default).
fn read_summary_options(r: &mut Reader, node: &MarkedYaml<'_>, path: &str) -> SummaryOptions {
    let mut o = SummaryOptions::default();
    for (k, line, v) in r.entries(node, path) {
        let key = format!("{path}.{k}");
        match k.as_str() {
            "quantiles" => {
                if let Some(qs) = read_quantiles(r, v, &key) {
                    o.quantiles = Some(qs);
                }
            }
            "max_age" => {
                o.max_age = read_ttl(r, v, &key).filter(|d| !d.is_zero());
                // config.toml's summary_max_age_secs / _ms take the same.
                if let Some(age) = o.max_age {
                    if age > crate::series::MAX_SUMMARY_AGE || age.subsec_nanos() % 1_000_000 != 0 {
                        r.at(line, &key, format!("{age:?}: a summary's max_age is whole milliseconds, at most {}h (100 years), as config.toml's summary_max_age_secs takes", crate::series::MAX_SUMMARY_AGE.as_secs() / 3600));
                        o.max_age = None;
                    }
                }
            }
            "age_buckets" | "buf_cap" => {
                let most = if k == "age_buckets" {
                    1000
                } else {
                    crate::series::MAX_SUMMARY_BUF_CAP as i64
                };
                match &v.data {
                    YamlData::Value(Scalar::Integer(n)) if *n >= 0 && *n <= most => {
                        let n = Some(*n as usize).filter(|&n| n > 0);
                        if k == "age_buckets" {
                            o.age_buckets = n;
                        } else {
                            o.buf_cap = n;
                        }
                    }
                    _ => r.at(
                        line,
                        &key,
                        format!(
                            "expected a whole number from 0 to {most}, found {}",
                            type_name(v)
                        ),
                    ),
                }
            }
            _ => r.unknown(line, &key, SUMMARY_KEYS),
        }
    }
    o
}

/// The rule statsd_exporter's `defaults` make for the names no rule maps:
/// their observer type (a summary unless `defaults.observer_type` says
/// histogram), `ttl`, buckets and native histogram. There is always one:
/// a summary, or a histogram with statsd_exporter's native histogram.
fn unmapped_rule(r: &mut Reader, d: &Defaults) -> Option<Rule> {
    let histogram = d.histogram.unwrap_or(false);
    let summary = (!histogram)
        .then(|| summary_spec(r, 0, "defaults", None, &d.summary))
        .flatten();
    let buckets = if histogram { d.buckets.clone() } else { None };
    // A histogram always changes something: its native histogram.
    let native = histogram.then(|| native(None, None, d));
    Some(Rule {
        line: 0,
        pattern: Pattern::Glob("**".into()),
        kinds: None,
        drop: false,
        name: String::new(),
        labels: Vec::new(),
        honor_labels: false,
        ttl: d.ttl,
        ttl_at: d.ttl_at.clone(),
        buckets,
        native,
        scale: None,
        help: None,
        summary,
        unmapped: true,
        notes: Vec::new(),
    })
}

fn read_match_type(r: &mut Reader, v: &MarkedYaml<'_>, key: &str) -> bool {
    match r.string(v, key).as_deref() {
        Some("regex") => true,
        Some("glob" | "") | None => false,
        Some(other) => {
            r.at(
                v.span.start.line(),
                key,
                format!("invalid match type \"{other}\"; use glob (the default) or regex"),
            );
            false
        }
    }
}

/// `observer_type`: `Some(true)` for `histogram`, `Some(false)` for
/// `summary` (or blank, statsd_exporter's default).
fn read_observer(r: &mut Reader, v: &MarkedYaml<'_>, key: &str) -> Option<bool> {
    match r.string(v, key).as_deref() {
        Some("histogram") => Some(true),
        Some("summary" | "") => Some(false),
        Some(other) => {
            r.at(
                v.span.start.line(),
                key,
                format!("invalid observer type '{other}'; use histogram or summary"),
            );
            None
        }
        None => None,
    }
}

fn read_ttl(r: &mut Reader, v: &MarkedYaml<'_>, key: &str) -> Option<Duration> {
    let line = v.span.start.line();
    let t = match &v.data {
        // Go's yaml reads a bare integer into a Duration as nanoseconds.
        YamlData::Value(Scalar::Integer(n)) => u64::try_from(*n).ok().map(Duration::from_nanos),
        YamlData::Value(Scalar::String(s)) => {
            go_duration(s).filter(|(neg, _)| !neg).map(|(_, d)| d)
        }
        _ => None,
    };
    if t.is_none() {
        r.at(
            line,
            key,
            format!(
                "expected a duration such as 10m, 1h30m or 0 (never), found {}",
                type_name(v)
            ),
        );
    }
    t
}

/// The native histogram statsd_exporter gives a histogram whose rule wrote
/// `factor` and `max` (`pkg/mapper/mapper.go`, `pkg/registry/registry.go`):
/// the rule's where above 0, else `defaults`' where above 0, else 1.1 and
/// 256, statsd_exporter's own defaults (it serves native histograms unless
/// told otherwise). A factor of 1 or less is none, as client_golang reads
/// it (`0` here); a factor above 65536 is the coarsest schema already, and
/// a limit above 32768 is rollstat's most.
fn native(factor: Option<f64>, max: Option<u32>, d: &Defaults) -> (f64, u32) {
    let factor = factor
        .filter(|f| *f > 0.0)
        .or(d.native_factor.filter(|f| *f > 0.0))
        .unwrap_or(1.1);
    let max = max
        .filter(|n| *n > 0)
        .or(d.native_max.filter(|n| *n > 0))
        .unwrap_or(256);
    (
        if factor <= 1.0 {
            0.0
        } else {
            factor.min(65_536.0)
        },
        max.min(crate::series::MAX_NATIVE_BUCKETS as u32),
    )
}

/// `histogram_options`, as written.
#[derive(Default)]
struct HistogramOptions {
    buckets: Option<Vec<f64>>,
    native_factor: Option<f64>,
    native_max: Option<u32>,
}

fn read_histogram(r: &mut Reader, node: &MarkedYaml<'_>, path: &str) -> HistogramOptions {
    let mut h = HistogramOptions::default();
    for (k, line, v) in r.entries(node, path) {
        let key = format!("{path}.{k}");
        let number = match &v.data {
            YamlData::Value(Scalar::Integer(n)) => Some(*n as f64),
            YamlData::Value(Scalar::FloatingPoint(f)) => Some(f.into_inner()),
            _ => None,
        };
        match (k.as_str(), number) {
            ("buckets", _) => h.buckets = read_bounds(r, v, &key),
            // As written; `native` decides what they mean.
            ("native_histogram_bucket_factor", Some(f)) if f.is_finite() => {
                h.native_factor = Some(f);
            }
            ("native_histogram_max_buckets", Some(n))
                if n >= 0.0 && n.fract() == 0.0 && n <= u32::MAX as f64 =>
            {
                h.native_max = Some(n as u32);
            }
            ("native_histogram_bucket_factor", _) => r.at(
                line,
                &key,
                format!("expected a number (1.1: each bucket at most 10% wider than the one below; 1 or less: none), found {}", type_name(v)),
            ),
            ("native_histogram_max_buckets", _) => r.at(
                line,
                &key,
                format!("expected a whole number of buckets (e.g. 160), found {}", type_name(v)),
            ),
            _ => r.unknown(line, &key, HISTOGRAM_KEYS),
        }
    }
    h
}

/// A list of `- quantile: 0.5` (with an `error`, read and checked):
/// `None` when it is empty (statsd_exporter takes the defaults' then) or
/// has problems (recorded).
fn read_quantiles(r: &mut Reader, v: &MarkedYaml<'_>, key: &str) -> Option<Vec<(f64, f64)>> {
    let line = v.span.start.line();
    let YamlData::Sequence(items) = &v.data else {
        r.at(
            line,
            key,
            format!(
                "expected a list of `- quantile: 0.5` entries, found {}",
                type_name(v)
            ),
        );
        return None;
    };
    let mut qs = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let ikey = format!("{key}[{i}]");
        // An objective without `error` asks for none (Go's zero value):
        // an exact stream.
        let (mut quantile, mut error) = (None, 0.0);
        for (ik, iline, iv) in r.entries(item, &ikey) {
            let number = match &iv.data {
                YamlData::Value(Scalar::Integer(n)) => Some(*n as f64),
                YamlData::Value(Scalar::FloatingPoint(f)) => Some(f.into_inner()),
                _ => None,
            };
            match (ik.as_str(), number) {
                ("quantile", Some(q)) if q > 0.0 && q < 1.0 => quantile = Some(q),
                ("quantile", _) => r.at(
                    iline,
                    &format!("{ikey}.quantile"),
                    "a number strictly between 0 and 1",
                ),
                ("error", Some(e)) if (0.0..1.0).contains(&e) => error = e,
                ("error", _) => r.at(iline, &format!("{ikey}.error"), "a number in [0, 1)"),
                _ => r.unknown(iline, &format!("{ikey}.{ik}"), &["quantile", "error"]),
            }
        }
        if let Some(q) = quantile {
            qs.push((q, error));
        }
    }
    (!qs.is_empty()).then_some(qs)
}

/// A list of histogram upper bounds: `None` when it is empty
/// (statsd_exporter takes the defaults' then) or refused (recorded).
fn read_bounds(r: &mut Reader, v: &MarkedYaml<'_>, key: &str) -> Option<Vec<f64>> {
    let line = v.span.start.line();
    let YamlData::Sequence(items) = &v.data else {
        r.at(
            line,
            key,
            format!("expected a list of upper bounds, found {}", type_name(v)),
        );
        return None;
    };
    let vals: Option<Vec<f64>> = items
        .iter()
        .map(|it| match &it.data {
            YamlData::Value(Scalar::Integer(n)) => Some(*n as f64),
            YamlData::Value(Scalar::FloatingPoint(f)) => Some(f.into_inner()),
            _ => None,
        })
        .collect();
    match vals {
        Some(v) if v.is_empty() => None,
        Some(v) if v.iter().all(|b| b.is_finite()) && v.windows(2).all(|w| w[0] < w[1]) => Some(v),
        _ => {
            r.at(line, key, "must be a list of finite, strictly increasing upper bounds (the +Inf bucket is always there)");
            None
        }
    }
}

/// statsd_exporter's rule for a glob (`metricLineRE`): parts separated by
/// dots, each `*` or a name part, the first not starting with a digit.
/// Returns the parts' kinds (0 literal, 1 `*`), or `None` if refused.
fn exporter_glob(m: &str) -> Option<Vec<u8>> {
    let mut kinds = Vec::new();
    for (i, part) in m.split('.').enumerate() {
        if part == "*" {
            kinds.push(1);
            continue;
        }
        let mut b = part.bytes();
        let first_ok = match b.next() {
            Some(c) if i == 0 => c.is_ascii_alphabetic() || c == b'_',
            Some(c) => c.is_ascii_alphanumeric() || c == b'_',
            None => false,
        };
        if !first_ok || !b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-') {
            return None;
        }
        kinds.push(0);
    }
    Some(kinds)
}

/// What a rule's label key becomes.
#[derive(Debug, PartialEq, Eq)]
enum LabelKey {
    /// Published as written.
    AsIs,
    /// One of the labels rollstat's families set themselves
    /// ([`RESERVED_LABELS`](crate::names::RESERVED_LABELS)): published
    /// under this name (`tag_` before it), as a tag of that name is.
    Renamed(String),
    /// `__*`: Prometheus' own.
    Reserved,
    /// Not a label name statsd_exporter takes.
    Invalid,
}

/// What becomes of a rule's label key `k`. A `metric` label beside
/// rollstat's own `metric` (or `le` on a histogram, `quantile` on a
/// summary) would name a label twice, and Prometheus would drop the whole
/// scrape: such a key takes the `tag_` prefix a tag of that name takes,
/// on every family, so one label keeps one name.
fn label_key(k: &str) -> LabelKey {
    if !is_exporter_label_name(k) {
        LabelKey::Invalid
    } else if k.starts_with("__") {
        LabelKey::Reserved
    } else if crate::names::RESERVED_LABELS.contains(&k) {
        LabelKey::Renamed(format!("tag_{k}"))
    } else {
        LabelKey::AsIs
    }
}

/// The warning for a label key published under another name.
fn renamed_note(line: usize, key: &str, from: &str, to: &str) -> String {
    format!("line {line}: `{key}`: `{from}` is a label rollstat sets itself ({}): published as `{to}` on every family, as a tag named `{from}` is", crate::names::RESERVED_LABELS.join(", "))
}

/// statsd_exporter's `labelNameRE`: `^[a-zA-Z_][a-zA-Z0-9_]+$`.
fn is_exporter_label_name(s: &str) -> bool {
    s.len() >= 2 && crate::names::is_valid_label_name(s)
}

/// statsd_exporter's `metricNameRE` on a rule's `name` as written:
/// `[a-zA-Z_]` then `[a-zA-Z0-9_]`, and numbered references (`$1`, `${1}`)
/// anywhere.
fn is_exporter_metric_name(name: &str) -> bool {
    let b = name.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' {
            let mut j = i + 1;
            if b.get(j) == Some(&b'{') {
                j += 1;
            }
            let digits = b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return false;
            }
            j += digits;
            if b.get(j) == Some(&b'}') {
                j += 1;
            }
            i = j;
            continue;
        }
        let c = b[i];
        if !(c.is_ascii_alphabetic() || c == b'_' || (i > 0 && c.is_ascii_digit())) {
            return false;
        }
        i += 1;
    }
    !b.is_empty()
}

impl Rule {
    /// The rule as a compiled rollstat [`Mapping`] (on the default
    /// windows); `Err` with why if a template does not compile.
    pub fn to_mapping(&self) -> Result<Mapping, String> {
        let matcher = match &self.pattern {
            Pattern::Glob(g) => Matcher::Glob(Glob::new(g).map_err(|e| e.to_string())?),
            Pattern::Regex(re) => Matcher::Regex(NameRegex::new(re).map_err(|e| e.to_string())?),
        };
        let tpl = |s: &str| -> Result<Template, String> {
            matcher.template(s).map_err(|e| e.to_string())
        };
        Ok(Mapping {
            match_type: self.kinds,
            action: if self.drop {
                Action::Drop
            } else {
                Action::Keep
            },
            rename: if self.unmapped {
                None
            } else {
                Some(tpl(&self.name)?)
            },
            labels: self
                .labels
                .iter()
                .map(|(k, v)| Ok((k.clone(), tpl(v)?)))
                .collect::<Result<_, String>>()?,
            windows: None,
            shared: false,
            honor_labels: self.honor_labels,
            ttl: self.ttl,
            histogram_buckets: self.buckets.clone().map(Into::into),
            scale: self.scale,
            help: self.help.as_deref().map(Into::into),
            summary: self.summary.clone().map(std::sync::Arc::new),
            native_bucket_factor: self.native.map(|n| n.0),
            native_max_buckets: self.native.map(|n| n.1),
            pattern: matcher,
        })
    }

    /// The rule as a `[[mappings]]` table of config.toml.
    #[must_use]
    pub fn to_toml(&self, source: &str) -> String {
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        let mut out = if self.unmapped {
            format!("# {source}: its defaults, for the names no rule above maps\n[[mappings]]\n")
        } else {
            format!("# {source}, line {}\n[[mappings]]\n", self.line)
        };
        match &self.pattern {
            Pattern::Glob(g) => {
                let _ = writeln!(out, "match = {}", q(g));
            }
            Pattern::Regex(re) => {
                let _ = writeln!(out, "match_regex = {}", q(re));
            }
        }
        if let Some(k) = self.kinds {
            let _ = writeln!(out, "match_type = {}", q(k.as_str()));
        }
        if self.drop {
            out.push_str("action = \"drop\"\n");
        }
        if !self.unmapped {
            let _ = writeln!(out, "rename = {}", q(&self.name));
        }
        if !self.labels.is_empty() {
            let pairs: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k} = {}", q(v)))
                .collect();
            let _ = writeln!(out, "labels = {{ {} }}", pairs.join(", "));
        }
        if self.honor_labels {
            out.push_str("honor_labels = true\n");
        }
        if let Some(t) = self.ttl {
            let _ = writeln!(
                out,
                "ttl_secs = {}",
                t.as_secs() + u64::from(t.subsec_nanos() > 0)
            );
        }
        if let Some(k) = self.scale {
            let _ = writeln!(out, "scale = {}", toml::Value::Float(k));
        }
        if let Some(h) = &self.help {
            let _ = writeln!(out, "help = {}", q(h));
        }
        if let Some(sm) = &self.summary {
            out.push_str("observer = \"summary\"\n");
            let qs: Vec<String> = sm
                .quantiles
                .iter()
                .map(|v| toml::Value::Float(*v).to_string())
                .collect();
            let _ = writeln!(out, "summary_quantiles = [{}]", qs.join(", "));
            let errors: Vec<String> = sm
                .errors
                .iter()
                .map(|v| toml::Value::Float(*v).to_string())
                .collect();
            let _ = writeln!(out, "summary_errors = [{}]", errors.join(", "));
            // Exactly as written: whole seconds, else milliseconds (a
            // summary's age is whole milliseconds, `SummarySpec::new`).
            let age = sm.max_age;
            if age.subsec_nanos() == 0 {
                let _ = writeln!(out, "summary_max_age_secs = {}", age.as_secs());
            } else {
                let _ = writeln!(out, "summary_max_age_ms = {}", age.as_millis());
            }
            let _ = writeln!(out, "summary_age_buckets = {}", sm.window.size());
            let _ = writeln!(out, "summary_buf_cap = {}", sm.buf_cap);
        }
        if let Some(b) = &self.buckets {
            let vals: Vec<String> = b
                .iter()
                .map(|v| toml::Value::Float(*v).to_string())
                .collect();
            let _ = writeln!(out, "histogram_buckets = [{}]", vals.join(", "));
        }
        if let Some((f, n)) = self.native {
            let _ = writeln!(
                out,
                "native_histogram_bucket_factor = {}",
                toml::Value::Float(f)
            );
            let _ = writeln!(out, "native_histogram_max_buckets = {n}");
        }
        out
    }
}

impl ExporterRules {
    /// The whole file as config.toml `[[mappings]]` tables, in the order
    /// they are tried, with a header saying where they came from.
    #[must_use]
    pub fn to_toml(&self, source: &Path) -> String {
        let src = source.display().to_string();
        let mut out = format!(
            "# Mapping rules converted from the statsd_exporter mapping file {src}\n# by `rollstat convert-mapping`: paste them into config.toml in place of\n# [statsd_exporter] mapping_file. Globs come first, as statsd_exporter\n# tries them; a regex is anchored to the whole name by `.*?( ... ).*`.\n"
        );
        for w in &self.warnings {
            let _ = writeln!(out, "# Note: {w}");
        }
        for r in &self.rules {
            out.push('\n');
            out.push_str(&r.to_toml(&src));
        }
        out
    }
}

#[cfg(test)]
mod tests;
