//! envoyproxy/ratelimit's YAML config files, read as they are: one file is
//! one `domain` and its descriptor tree ([`parse`]); a directory of them is
//! what the reference service loads from its runtime directory
//! ([`read_dir`]).
//!
//! The rules are those of the reference's `src/config/config_impl.go`
//! (commit f2fb15770f7f), each refused with the reference's own words at
//! the start of the message, then the file's line, the key path and what
//! to do; every problem of a file is reported at once, not only the first.
//!
//! | key | here |
//! | --- | --- |
//! | `domain` | required, not empty (`config file cannot have empty domain`); one domain per file, never in two files (`duplicate domain`: the reference's `MERGE_DOMAIN_CONFIG` is off by default, and rollstat does not merge) |
//! | `descriptors[].key` | required (`descriptor has empty key`) |
//! | `descriptors[].value` | optional; a `*` anywhere in it is a wildcard. Key and value together (`key_value`) are unique in one list (`duplicate descriptor composite key`) |
//! | `rate_limit.unit` | `second`, `minute`, `hour`, `day`, `week`, `month` (30 days), in any case; `year` is refused (rollstat's limits are exact sliding windows); required unless `unlimited` (`invalid rate limit unit`), refused with it (`should not specify rate limit unit when unlimited`) |
//! | `rate_limit.requests_per_unit` | a whole number from 0 to 4294967295 (0 refuses every request) |
//! | `rate_limit.unlimited`, `name`, `replaces[].name` | kept; a `replaces` entry is not empty and does not name its own limit |
//! | `shadow_mode`, `detailed_metric`, `value_to_metric` | kept, and honoured as the reference does (the last two name the hits on /metrics: `rls::detail`) |
//! | `quota_mode: true`, `share_threshold: true`, a non-empty `metadata` | refused: rollstat does not honour them (`false` and an empty `metadata` are accepted, as they change nothing) |
//!
//! Where rollstat is stricter than the reference, on purpose:
//!
//! * a key of the format in the wrong place (`unit` directly under a
//!   descriptor, `key` inside `rate_limit`) is refused; the reference checks
//!   every key against one flat list and then silently ignores a misplaced
//!   one, so the file would not mean what it says;
//! * YAML is read as YAML 1.2 (saphyr) where the reference reads YAML 1.1
//!   (`gopkg.in/yaml.v2`). The differences that matter are bridged: the
//!   boolean keys also take 1.1's unquoted `yes`/`no`/`on`/`off`/`y`/`n`,
//!   and a number or boolean written as `key`, `value` or `domain` is kept
//!   as written (`value: 010` is the string `010`, as Go reads it).
//!   Duplicate keys in one mapping and a second YAML document are refused.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use saphyr::{MarkedYaml, Scalar, YamlData};

/// A problem in one file: its line, the YAML key path, what is wrong.
pub use super::yaml::YamlProblem;
use super::yaml::{load_document, type_name, Reader};
use crate::rls::{DescriptorRule, DomainRules, RateLimitSpec, RateUnit};

#[cfg(test)]
mod tests;

/// The reference's `validKeys`: every key its files may hold, anywhere.
const VALID_KEYS: &[&str] = &[
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "quota_mode",
    "name",
    "replaces",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];
const TOP_KEYS: &[&str] = &["domain", "descriptors"];
const DESCRIPTOR_KEYS: &[&str] = &[
    "key",
    "value",
    "rate_limit",
    "descriptors",
    "shadow_mode",
    "detailed_metric",
    "value_to_metric",
    "quota_mode",
    "share_threshold",
    "metadata",
];
const RATE_LIMIT_KEYS: &[&str] = &["requests_per_unit", "unit", "unlimited", "name", "replaces"];
const REPLACES_KEYS: &[&str] = &["name"];

/// A problem in one file of a config directory: the file, and the problem
/// in it (line 0: the file as a whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileProblem {
    /// The file (or the directory itself, when it cannot be listed).
    pub file: PathBuf,
    /// Its line, key path and message.
    pub problem: YamlProblem,
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.problem;
        write!(
            f,
            "{}:{}: `{}`: {}",
            self.file.display(),
            p.line,
            p.key,
            p.message
        )
    }
}

/// Reads the text of the envoyproxy/ratelimit config file at `path` (kept
/// in the result, for messages): every problem found, or its domain and
/// descriptor tree.
pub fn parse(text: &str, path: &Path) -> Result<DomainRules, Vec<YamlProblem>> {
    parse_with_line(text, path).map(|(rules, _)| rules)
}

/// [`parse`], with the line of `domain` (for `duplicate domain`).
fn parse_with_line(text: &str, path: &Path) -> Result<(DomainRules, usize), Vec<YamlProblem>> {
    let mut r = Reader::default();
    let Ok(doc) = load_document(&mut r, text, "a rate limit config file") else {
        return Err(r.problems);
    };
    let mut f = File {
        r,
        src: Source::new(text),
    };
    let mut domain = (String::new(), 1);
    let mut descriptors = Vec::new();
    if let Some(doc) = &doc {
        let entries = f.r.entries(doc, "");
        for (k, line, v) in &entries {
            match k.as_str() {
                "domain" => {
                    domain = (f.scalar_text(v, "domain").unwrap_or_default(), *line);
                }
                "descriptors" => {}
                _ => f.misplaced(*line, k, TOP_KEYS, "the top of the file"),
            }
        }
        // Composite keys in messages start with the domain, wherever it is.
        let parent = format!("{}.", domain.0);
        for (k, _, v) in &entries {
            if k == "descriptors" {
                descriptors = f.descriptors(v, "descriptors", &parent);
            }
        }
    }
    if domain.0.is_empty() {
        f.r.at(
            domain.1,
            "domain",
            "config file cannot have empty domain: add `domain: <name>` at the top of the file (the domain Envoy's rate limit filter sends)",
        );
    }
    if !f.r.problems.is_empty() {
        f.r.problems.sort_by_key(|p| p.line);
        return Err(f.r.problems);
    }
    let rules = DomainRules {
        domain: domain.0,
        descriptors,
        file: path.to_path_buf(),
    };
    Ok((rules, domain.1))
}

/// Reads the envoyproxy/ratelimit config files of `dir`: every problem of
/// every file (each naming its file), or one [`DomainRules`] per file, in
/// the order of the files' names.
///
/// What the reference reads there: its runtime loader (lyft/goruntime,
/// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY/`) walks the
/// directory with Go's `filepath.Walk` and loads **every** regular file it
/// finds as a config file, whatever its name ends with and in
/// subdirectories too, though its README says `*.yaml`; with
/// `RUNTIME_IGNOREDOTFILES=true` it skips the files and directories whose
/// names start with `.`. A Kubernetes ConfigMap mount holds
/// `config.yaml -> ..data/config.yaml`, `..data -> ..2026_12_02_...` and
/// that timestamped directory: without that setting, the reference reads
/// each file twice (once through the symlink, once inside the hidden
/// directory) and refuses the second as a `duplicate domain`.
///
/// Here: the names starting with `.` are skipped (that setting, always);
/// the `*.yaml` and `*.yml` entries directly in `dir` are read, symlinks
/// followed (so the ConfigMap layout reads each file once), each with
/// [`crate::file::read_text`] (regular files only, under its size cap).
/// Any other entry the reference would load (a file of another name, a
/// subdirectory) is a problem rather than silently left out.
pub fn read_dir(dir: &Path) -> Result<Vec<DomainRules>, Vec<FileProblem>> {
    let mut problems = Vec::new();
    let mut out = Vec::new();
    let mut seen: HashMap<String, (PathBuf, usize)> = HashMap::new();
    for path in config_files(dir, &mut problems) {
        let text = match crate::file::read_text(&path) {
            Ok(text) => text,
            Err(e) => {
                let message = format!("cannot read it: {e}");
                problems.push(file_problem(&path, 0, message, Some(e.reason())));
                continue;
            }
        };
        match parse_with_line(&text, &path) {
            Ok((rules, line)) => {
                if let Some((first, first_line)) = seen.get(&rules.domain) {
                    let message = format!(
                        "duplicate domain '{}' in config file: {}:{first_line} has it already; rollstat does not merge files (envoyproxy/ratelimit neither, unless MERGE_DOMAIN_CONFIG is on): put its descriptors in one file",
                        rules.domain,
                        first.display()
                    );
                    problems.push(FileProblem {
                        file: path.clone(),
                        problem: problem(line, "domain", message, None),
                    });
                    continue;
                }
                seen.insert(rules.domain.clone(), (path, line));
                out.push(rules);
            }
            Err(found) => problems.extend(found.into_iter().map(|problem| FileProblem {
                file: path.clone(),
                problem,
            })),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        // In name order; a file's own problems stay in line order.
        problems.sort_by(|a, b| a.file.cmp(&b.file));
        Err(problems)
    }
}

/// The `*.yaml` and `*.yml` entries of `dir` (not starting with `.`), in
/// name order; the other entries that are not hidden are problems.
fn config_files(dir: &Path, problems: &mut Vec<FileProblem>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            let message = format!(
                "cannot list the directory: {e}; it holds envoyproxy/ratelimit config files (*.yaml)"
            );
            problems.push(file_problem(dir, 0, message, Some("unreadable")));
            return Vec::new();
        }
    };
    let mut names: Vec<_> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    names.sort();
    let mut files = Vec::new();
    for name in names {
        let shown = name.to_string_lossy();
        if shown.starts_with('.') {
            continue;
        }
        let path = dir.join(&name);
        let yaml = shown.ends_with(".yaml") || shown.ends_with(".yml");
        let is_dir = std::fs::metadata(&path).is_ok_and(|m| m.is_dir());
        let message = if is_dir {
            "a directory: rollstat reads only the files directly in the config directory (envoyproxy/ratelimit reads subdirectories too); move its files up"
        } else if !yaml {
            "not a .yaml or .yml file: envoyproxy/ratelimit would load it as a config file, rollstat reads only *.yaml and *.yml; rename it, or move it out of the directory"
        } else {
            // A file, or a dangling symlink (read_text says why).
            files.push(path);
            continue;
        };
        problems.push(file_problem(&path, 0, message.into(), None));
    }
    files
}

fn problem(line: usize, key: &str, message: String, refusal: Option<&'static str>) -> YamlProblem {
    YamlProblem {
        line,
        key: key.to_string(),
        message,
        refusal,
    }
}

fn file_problem(
    file: &Path,
    line: usize,
    message: String,
    refusal: Option<&'static str>,
) -> FileProblem {
    FileProblem {
        file: file.to_path_buf(),
        problem: problem(line, "(file)", message, refusal),
    }
}

/// One file being read: its problems and its text.
struct File<'t> {
    r: Reader,
    src: Source<'t>,
}

impl File<'_> {
    /// A key that is not one of `known` here: unknown to the reference
    /// too, or one of its keys in the wrong place (`place`).
    fn misplaced(&mut self, line: usize, key_path: &str, known: &[&str], place: &str) {
        let k = key_path.rsplit('.').next().unwrap_or(key_path);
        if VALID_KEYS.contains(&k) {
            self.r.at(
                line,
                key_path,
                format!(
                    "`{k}` does not belong at {place} (keys here: {}); envoyproxy/ratelimit would ignore it here, so the file would not mean what it says: move it or remove it",
                    known.join(", ")
                ),
            );
        } else {
            self.r.at(
                line,
                key_path,
                format!(
                    "config error, unknown key '{k}' (envoyproxy/ratelimit refuses it too); keys here: {}",
                    known.join(", ")
                ),
            );
        }
    }

    /// The items of a list that holds mappings (`- key: ...`).
    fn maps<'a, 'i>(&mut self, node: &'a MarkedYaml<'i>, path: &str) -> Vec<&'a MarkedYaml<'i>> {
        match &node.data {
            YamlData::Sequence(items) => {
                let mut out = Vec::new();
                for item in items {
                    if matches!(item.data, YamlData::Mapping(_)) {
                        out.push(item);
                    } else {
                        self.r.at(
                            item.span.start.line(),
                            path,
                            format!(
                                "config error, yaml file contains list of type other than map: found {}; each entry is a mapping (`- key: ...`)",
                                type_name(item)
                            ),
                        );
                    }
                }
                out
            }
            YamlData::Value(Scalar::Null) => Vec::new(),
            _ => {
                self.r.at(
                    node.span.start.line(),
                    path,
                    format!(
                        "expected a list (`- key: ...` lines), found {}",
                        type_name(node)
                    ),
                );
                Vec::new()
            }
        }
    }

    /// A `descriptors` list at `path`, under the composite key `parent`
    /// (`domain.key_value.`).
    fn descriptors(
        &mut self,
        node: &MarkedYaml<'_>,
        path: &str,
        parent: &str,
    ) -> Vec<DescriptorRule> {
        let mut out = Vec::new();
        let mut composite: HashMap<String, usize> = HashMap::new();
        let items = self.maps(node, path);
        for (i, item) in items.into_iter().enumerate() {
            let at = format!("{path}[{i}]");
            let Some(rule) = self.descriptor(item, &at, parent) else {
                continue;
            };
            let mut final_key = rule.key.clone();
            if let Some(value) = &rule.value {
                final_key = format!("{final_key}_{value}");
            }
            if let Some(first) = composite.get(&final_key) {
                self.r.at(
                    rule.line,
                    &at,
                    format!(
                        "duplicate descriptor composite key '{parent}{final_key}': the descriptor at line {first} has the same key and value (`key_value`); remove one, or merge them"
                    ),
                );
                continue;
            }
            composite.insert(final_key, rule.line);
            out.push(rule);
        }
        out
    }

    /// One descriptor; `None` when it has no key (a problem).
    fn descriptor(
        &mut self,
        node: &MarkedYaml<'_>,
        path: &str,
        parent: &str,
    ) -> Option<DescriptorRule> {
        let line = node.span.start.line();
        let mut rule = DescriptorRule {
            key: String::new(),
            value: None,
            rate_limit: None,
            shadow_mode: false,
            detailed_metric: false,
            value_to_metric: false,
            descriptors: Vec::new(),
            line,
        };
        let entries = self.r.entries(node, path);
        for (k, kline, v) in &entries {
            let key = format!("{path}.{k}");
            match k.as_str() {
                "key" => rule.key = self.scalar_text(v, &key).unwrap_or_default(),
                "value" => {
                    rule.value = self.scalar_text(v, &key).filter(|s| !s.is_empty());
                }
                "rate_limit" => rule.rate_limit = self.rate_limit(v, *kline, &key),
                "descriptors" => {}
                "shadow_mode" => rule.shadow_mode = self.bool(v, &key),
                "detailed_metric" => rule.detailed_metric = self.bool(v, &key),
                "value_to_metric" => rule.value_to_metric = self.bool(v, &key),
                "quota_mode" | "share_threshold" => self.unhonoured_flag(v, *kline, &key, k),
                "metadata" => self.metadata(v, *kline, &key),
                _ => self.misplaced(*kline, &key, DESCRIPTOR_KEYS, "a descriptor"),
            }
        }
        if rule.key.is_empty() {
            self.r.at(
                line,
                path,
                "descriptor has empty key: every descriptor needs a `key` (the descriptor entry's key Envoy sends); add one",
            );
            return None;
        }
        let mut child_parent = format!("{parent}{}", rule.key);
        if let Some(value) = &rule.value {
            child_parent = format!("{child_parent}_{value}");
        }
        child_parent.push('.');
        for (k, _, v) in &entries {
            if k == "descriptors" {
                let key = format!("{path}.descriptors");
                rule.descriptors = self.descriptors(v, &key, &child_parent);
            }
        }
        Some(rule)
    }

    /// A `rate_limit` mapping; `None` when it is empty (`rate_limit:`
    /// with nothing under it, as the reference reads it) or has problems.
    /// `line`: the line of the `rate_limit` key.
    fn rate_limit(
        &mut self,
        node: &MarkedYaml<'_>,
        line: usize,
        path: &str,
    ) -> Option<RateLimitSpec> {
        if matches!(node.data, YamlData::Value(Scalar::Null)) {
            return None;
        }
        let before = self.r.problems.len();
        let mut spec = RateLimitSpec {
            requests_per_unit: 0,
            unit: None,
            unlimited: false,
            name: None,
            replaces: Vec::new(),
        };
        let mut unit: Option<(String, usize)> = None;
        let mut replaces: Vec<(String, usize)> = Vec::new();
        for (k, kline, v) in self.r.entries(node, path) {
            let key = format!("{path}.{k}");
            match k.as_str() {
                "requests_per_unit" => spec.requests_per_unit = self.u32(v, &key),
                "unit" => unit = Some((self.scalar_text(v, &key).unwrap_or_default(), kline)),
                "unlimited" => spec.unlimited = self.bool(v, &key),
                "name" => spec.name = self.scalar_text(v, &key).filter(|s| !s.is_empty()),
                "replaces" => replaces = self.replaces(v, &key),
                _ => self.misplaced(kline, &key, RATE_LIMIT_KEYS, "`rate_limit`"),
            }
        }
        spec.unit = self.unit(unit, spec.unlimited, line, path);
        for (name, rline) in replaces {
            let key = format!("{path}.replaces");
            if name.is_empty() {
                self.r.at(
                    rline,
                    &key,
                    "should not have an empty replaces entry: give each entry the `name` of the limit it replaces",
                );
            } else if spec.name.as_deref() == Some(name.as_str()) {
                self.r.at(
                    rline,
                    &key,
                    format!("replaces should not contain name of same descriptor ('{name}'): a limit cannot replace itself; name another descriptor's limit"),
                );
            } else {
                spec.replaces.push(name);
            }
        }
        (self.r.problems.len() == before).then_some(spec)
    }

    /// `unit`, checked against `unlimited` as the reference checks it.
    fn unit(
        &mut self,
        unit: Option<(String, usize)>,
        unlimited: bool,
        line: usize,
        path: &str,
    ) -> Option<RateUnit> {
        let (text, uline) = unit.unwrap_or((String::new(), line));
        let key = format!("{path}.unit");
        // Go's strings.ToUpper, then the enum's names: `ſecond` is SECOND.
        let parsed = RateUnit::parse(&text.to_uppercase());
        let year = text.to_uppercase() == "YEAR";
        if unlimited {
            // The reference refuses a valid unit beside `unlimited` and
            // ignores one it does not know.
            if parsed.is_some() || year {
                self.r.at(
                    uline,
                    &key,
                    "should not specify rate limit unit when unlimited: remove `unit` (and `requests_per_unit`), or remove `unlimited: true`",
                );
            }
            return None;
        }
        if year {
            self.r.at(
                uline,
                &key,
                format!("unit '{text}' is not supported by rollstat: its limits are exact sliding windows, and a window of a year would keep every request it admits for a year; use `month` (30 days), or `day` with a proportionally smaller requests_per_unit"),
            );
        } else if parsed.is_none() {
            let found = if text.is_empty() {
                "none given".to_string()
            } else {
                format!("'{text}'")
            };
            self.r.at(
                uline,
                &key,
                format!("invalid rate limit unit {found}: use second, minute, hour, day, week or month (any case), or `unlimited: true`"),
            );
        }
        parsed
    }

    /// `replaces`: each entry's `name` and line.
    fn replaces(&mut self, node: &MarkedYaml<'_>, path: &str) -> Vec<(String, usize)> {
        let mut out = Vec::new();
        for (i, item) in self.maps(node, path).into_iter().enumerate() {
            let at = format!("{path}[{i}]");
            // An entry's line is its `name`'s (saphyr may place a mapping
            // whose last value is empty past it).
            let (mut name, mut line) = (String::new(), item.span.start.line());
            for (k, kline, v) in self.r.entries(item, &at) {
                let key = format!("{at}.{k}");
                match k.as_str() {
                    "name" => {
                        name = self.scalar_text(v, &key).unwrap_or_default();
                        line = kline;
                    }
                    _ => self.misplaced(kline, &key, REPLACES_KEYS, "a `replaces` entry"),
                }
            }
            out.push((name, line));
        }
        out
    }

    /// `quota_mode` or `share_threshold`: `false` changes nothing; `true`
    /// is not honoured.
    fn unhonoured_flag(&mut self, v: &MarkedYaml<'_>, line: usize, key: &str, k: &str) {
        if !self.bool(v, key) {
            return;
        }
        let what = if k == "quota_mode" {
            "a quota mode limit (over-limit requests answered OK, with the quota bucket in the response metadata)"
        } else {
            "one counter shared by every value a wildcard matches"
        };
        self.r.at(
            line,
            key,
            format!("`{k}: true` is not supported by rollstat ({what} is not implemented): remove it, or set it to false, to have rollstat enforce the limit as an ordinary one"),
        );
    }

    /// `metadata`: only an empty one is accepted.
    fn metadata(&mut self, v: &MarkedYaml<'_>, line: usize, key: &str) {
        let empty = match &v.data {
            YamlData::Value(Scalar::Null) => true,
            YamlData::Mapping(m) => m.is_empty(),
            _ => false,
        };
        if !empty {
            self.r.at(
                line,
                key,
                "`metadata` is not supported by rollstat (it would be returned in the rate limit response's dynamic metadata): remove it",
            );
        }
    }

    /// A string, or a number or boolean as written (Go reads a scalar into
    /// a string field as its text); a null is `""`.
    fn scalar_text(&mut self, v: &MarkedYaml<'_>, key: &str) -> Option<String> {
        match &v.data {
            YamlData::Value(Scalar::Integer(_) | Scalar::Boolean(_)) => {
                self.src.raw(v).map(str::to_string)
            }
            _ => self.r.scalar_text(v, key),
        }
    }

    /// A boolean, YAML 1.1's unquoted `yes`/`no`/`on`/`off`/`y`/`n`
    /// included (the reference reads YAML 1.1); a null is `false`.
    fn bool(&mut self, v: &MarkedYaml<'_>, key: &str) -> bool {
        match &v.data {
            YamlData::Value(Scalar::Boolean(b)) => *b,
            YamlData::Value(Scalar::Null) => false,
            YamlData::Value(Scalar::String(s)) if !self.src.quoted(v) => match yaml11_bool(s) {
                Some(b) => b,
                None => {
                    self.r.bool(v, key);
                    false
                }
            },
            _ => {
                self.r.bool(v, key);
                false
            }
        }
    }

    /// `requests_per_unit`: 0 to `u32::MAX`; a null is 0.
    fn u32(&mut self, v: &MarkedYaml<'_>, key: &str) -> u32 {
        match &v.data {
            YamlData::Value(Scalar::Integer(n)) if u32::try_from(*n).is_ok() => {
                u32::try_from(*n).unwrap_or(0)
            }
            YamlData::Value(Scalar::Null) => 0,
            _ => {
                self.r.at(
                    v.span.start.line(),
                    key,
                    format!(
                        "expected a whole number from 0 to 4294967295, found {}",
                        type_name(v)
                    ),
                );
                0
            }
        }
    }
}

/// YAML 1.1's booleans (as `gopkg.in/yaml.v2` resolves them).
fn yaml11_bool(s: &str) -> Option<bool> {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

/// A file's text, to read a scalar as it is written: saphyr's markers
/// count characters, so the characters wider than a byte are kept aside.
struct Source<'t> {
    text: &'t str,
    /// (character index, bytes beyond one per character up to and
    /// including it) of each character wider than one byte.
    wide: Vec<(usize, usize)>,
}

impl<'t> Source<'t> {
    fn new(text: &'t str) -> Source<'t> {
        let mut wide = Vec::new();
        let mut extra = 0;
        for (i, c) in text.chars().enumerate() {
            if c.len_utf8() > 1 {
                extra += c.len_utf8() - 1;
                wide.push((i, extra));
            }
        }
        Source { text, wide }
    }

    fn byte(&self, char_index: usize) -> usize {
        let n = self.wide.partition_point(|(c, _)| *c < char_index);
        match n {
            0 => char_index,
            _ => char_index + self.wide[n - 1].1,
        }
    }

    /// The node's text as written, without trailing blanks.
    fn raw(&self, v: &MarkedYaml<'_>) -> Option<&'t str> {
        let (a, b) = (
            self.byte(v.span.start.index()),
            self.byte(v.span.end.index()),
        );
        self.text.get(a..b).map(str::trim_end)
    }

    fn quoted(&self, v: &MarkedYaml<'_>) -> bool {
        self.raw(v)
            .is_some_and(|s| s.starts_with('"') || s.starts_with('\''))
    }
}
