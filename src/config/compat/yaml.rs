//! Reading YAML files with their lines: the helpers shared by the files
//! config.toml names in YAML (`[http] web_config_file`, exporter-toolkit's
//! format; `[statsd_exporter] mapping_file`, statsd_exporter's). Each
//! problem names the file's line and the dotted YAML key path.
//!
//! YAML is read with `saphyr` (YAML 1.2): every node keeps its line,
//! duplicate keys are errors, and depth and alias expansion are bounded
//! before any tree is built ([`budget`]). YAML 1.1's
//! `yes`/`no` booleans are strings in 1.2: a key that wants a boolean says
//! so.

use std::time::Duration;

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};

use crate::config::reader::{Problems, Table};

pub mod budget;

/// A problem in a YAML file: its line, the YAML key path, what is wrong
/// (never a secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YamlProblem {
    /// 1-based line in the YAML file (0: the file as a whole).
    pub line: usize,
    /// Dotted YAML key path, e.g. `tls_server_config.cipher_suites`.
    pub key: String,
    /// What is wrong and what to do.
    pub message: String,
    /// Set when the file was refused before it was read into a tree
    /// (nested too deep, too many alias nodes, bad syntax): the stable
    /// reason a reload counts.
    pub refusal: Option<&'static str>,
}

/// Reads the YAML file that config.toml's `key` (in table `t`) names, and
/// parses its text with `parse` (given the text and the path): `None` when
/// the key is unset or `""`, or when the file cannot be read or has
/// problems, each recorded at the key as `path:line: \`yaml key\`: why`.
pub(in crate::config) fn read_named_file<T>(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    key: &str,
    parse: impl FnOnce(&str, &str) -> Result<T, Vec<YamlProblem>>,
) -> Option<(String, T)> {
    let (path, off) = t.string(p, key)?;
    if path.is_empty() {
        return None;
    }
    let key = t.key_path(key);
    let text = match crate::file::read_text(std::path::Path::new(&path)) {
        Ok(text) => text,
        Err(e) => {
            p.refused(
                off,
                &key,
                format!(
                    "cannot read `{path}`: {e}; the daemon reads it at start and at every reload"
                ),
                e.reason(),
            );
            return None;
        }
    };
    match parse(&text, &path) {
        Ok(v) => Some((path, v)),
        Err(problems) => {
            for yp in problems {
                let message = format!("{path}:{}: `{}`: {}", yp.line, yp.key, yp.message);
                match yp.refusal {
                    Some(reason) => p.refused(off, &key, message, reason),
                    None => p.at(off, &key, message),
                }
            }
            None
        }
    }
}

/// The one YAML document of `text`, read with its lines: `Err` (recorded
/// in `r`) on a syntax error; a second document is a problem too (`what`
/// names the file's kind in its message); `None` for an empty file.
pub(in crate::config) fn load_document<'i>(
    r: &mut Reader,
    text: &'i str,
    what: &str,
) -> Result<Option<MarkedYaml<'i>>, ()> {
    r.last_line = last_line(text);
    // Depth and aliases are bounded before saphyr builds a tree.
    if let Err(refusal) = budget::check(text) {
        let key = match refusal {
            budget::Refusal::Syntax { .. } => "(syntax)",
            _ => "(file)",
        };
        r.refused(refusal.line(), key, refusal.message(), refusal.reason());
        return Err(());
    }
    let docs = match MarkedYaml::load_from_str(text) {
        Ok(docs) => docs,
        Err(e) => {
            r.at(e.marker().line(), "(syntax)", e.info());
            return Err(());
        }
    };
    if docs.len() > 1 {
        r.at(
            docs[1].span.start.line(),
            "(file)",
            format!("{what} is one YAML document; remove the second `---` and what follows"),
        );
    }
    Ok(docs.into_iter().next())
}

/// The number of the last line of `text` as YAML numbers lines (a lone
/// `\r` breaks a line too).
fn last_line(text: &str) -> usize {
    let crlf = text.matches("\r\n").count();
    text.matches(['\n', '\r']).count() - crlf + 1
}

/// Collects the problems of one YAML file while its nodes are read.
#[derive(Default)]
pub(in crate::config) struct Reader {
    pub(in crate::config) problems: Vec<YamlProblem>,
    /// The text's last line once [`load_document`] has seen it (0: not
    /// yet): the parser numbers what sits at the very end one line past
    /// it, and no problem may name a line the operator's editor lacks.
    last_line: usize,
}

impl Reader {
    pub(in crate::config) fn at(&mut self, line: usize, key: &str, message: impl Into<String>) {
        let line = if self.last_line > 0 {
            line.min(self.last_line)
        } else {
            line
        };
        self.problems.push(YamlProblem {
            line,
            key: key.to_string(),
            message: message.into(),
            refusal: None,
        });
    }

    /// A problem that refuses the whole file before it is read into a
    /// tree, under a stable `reason`.
    pub(in crate::config) fn refused(
        &mut self,
        line: usize,
        key: &str,
        message: impl Into<String>,
        reason: &'static str,
    ) {
        self.at(line, key, message);
        if let Some(last) = self.problems.last_mut() {
            last.refusal = Some(reason);
        }
    }

    pub(in crate::config) fn unknown(&mut self, line: usize, key: &str, known: &[&str]) {
        self.at(
            line,
            key,
            format!("unknown key; known keys here: {}", known.join(", ")),
        );
    }

    /// The (key, key's line, value) entries of a mapping; a null node (a
    /// key with nothing under it) has none, as in exporter-toolkit.
    pub(in crate::config) fn entries<'a, 'i>(
        &mut self,
        node: &'a MarkedYaml<'i>,
        path: &str,
    ) -> Vec<(String, usize, &'a MarkedYaml<'i>)> {
        let shown = if path.is_empty() { "(file)" } else { path };
        match &node.data {
            YamlData::Mapping(m) => {
                let mut out = Vec::new();
                for (k, v) in m {
                    let line = k.span.start.line();
                    match &k.data {
                        YamlData::Value(Scalar::String(s)) => out.push((s.to_string(), line, v)),
                        _ => self.at(
                            line,
                            shown,
                            format!("a key here is a string, found {}; quote it", type_name(k)),
                        ),
                    }
                }
                out
            }
            YamlData::Value(Scalar::Null) => Vec::new(),
            _ => {
                self.at(
                    node.span.start.line(),
                    shown,
                    format!(
                        "expected a mapping (key: value lines), found {}",
                        type_name(node)
                    ),
                );
                Vec::new()
            }
        }
    }

    pub(in crate::config) fn string(&mut self, v: &MarkedYaml<'_>, key: &str) -> Option<String> {
        match &v.data {
            YamlData::Value(Scalar::String(s)) => Some(s.to_string()),
            _ => {
                self.at(
                    v.span.start.line(),
                    key,
                    format!("expected a string, found {}", type_name(v)),
                );
                None
            }
        }
    }

    /// A string, or an integer or boolean as written (YAML leaves `1`
    /// unquoted; Go reads it into a string field as "1").
    pub(in crate::config) fn scalar_text(
        &mut self,
        v: &MarkedYaml<'_>,
        key: &str,
    ) -> Option<String> {
        match &v.data {
            YamlData::Value(Scalar::Integer(n)) => Some(n.to_string()),
            YamlData::Value(Scalar::Boolean(b)) => Some(b.to_string()),
            YamlData::Value(Scalar::Null) => Some(String::new()),
            _ => self.string(v, key),
        }
    }

    pub(in crate::config) fn bool(&mut self, v: &MarkedYaml<'_>, key: &str) -> Option<bool> {
        match &v.data {
            YamlData::Value(Scalar::Boolean(b)) => Some(*b),
            _ => {
                self.at(
                    v.span.start.line(),
                    key,
                    format!("expected true or false, found {}", type_name(v)),
                );
                None
            }
        }
    }
}

pub(in crate::config) fn type_name(v: &MarkedYaml<'_>) -> String {
    match &v.data {
        YamlData::Value(Scalar::String(s)) if s.chars().count() <= 40 => {
            format!("the string `{s}`")
        }
        YamlData::Value(Scalar::String(_)) => "a string".into(),
        YamlData::Value(Scalar::Integer(_)) => "an integer".into(),
        YamlData::Value(Scalar::FloatingPoint(_)) => "a number".into(),
        YamlData::Value(Scalar::Boolean(_)) => "a boolean".into(),
        YamlData::Value(Scalar::Null) => "nothing".into(),
        YamlData::Sequence(_) => "a list".into(),
        YamlData::Mapping(_) => "a mapping".into(),
        _ => "a tagged or unreadable value".into(),
    }
}

/// A Go duration string (`time.ParseDuration`: `300ms`, `1.5h`, `2h45m`,
/// `-1m`, `0`; units ns, us, µs, ms, s, m, h): whether it is negative, and
/// its length (saturating). `None` if Go would refuse it.
pub(in crate::config) fn go_duration(s: &str) -> Option<(bool, Duration)> {
    let negative = s.starts_with('-');
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    if s == "0" {
        return Some((negative, Duration::ZERO));
    }
    if s.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(n);
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return None;
        }
        let u = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(u);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let whole: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let mut part = whole.saturating_mul(scale);
        let mut unit_frac = scale;
        for d in frac.bytes().take(30) {
            unit_frac /= 10;
            part = part.saturating_add(u128::from(d - b'0') * unit_frac);
        }
        total = total.saturating_add(part);
        rest = tail;
    }
    let nanos = u64::try_from(total).unwrap_or(u64::MAX);
    Some((negative, Duration::from_nanos(nanos)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_read_as_time_parse_duration_reads_them() {
        let d = |s| go_duration(s).map(|(n, d)| (n, d.as_nanos()));
        assert_eq!(d("0"), Some((false, 0)));
        assert_eq!(d("1h30m"), Some((false, 5_400_000_000_000)));
        assert_eq!(d("1.5h"), Some((false, 5_400_000_000_000)));
        assert_eq!(d("300ms"), Some((false, 300_000_000)));
        assert_eq!(d(".5s"), Some((false, 500_000_000)));
        assert_eq!(d("-1m"), Some((true, 60_000_000_000)));
        assert_eq!(d("2µs"), Some((false, 2_000)));
        assert_eq!(d("0s"), Some((false, 0)));
        for bad in ["", "1", "h", "1d", "1.2.3s", ".s", "1h-2m"] {
            assert_eq!(d(bad), None, "{bad}");
        }
    }
}

#[cfg(test)]
mod end_of_text {
    use super::*;

    #[test]
    fn a_syntax_error_at_the_end_points_at_the_last_line() {
        for (text, last) in [
            ("[", 1),
            ("a: 1\n[", 2),
            ("a: 1\r[", 2),
            ("a: 1\r\nb: [", 2),
        ] {
            let mut r = Reader::default();
            assert!(load_document(&mut r, text, "a file").is_err(), "{text:?}");
            assert_eq!(r.problems[0].line, last, "{text:?}: {:?}", r.problems);
        }
        // A null key at the very end: the reader's own problem, not the
        // parser's, is held to the last line too.
        let problems = super::super::statsd_exporter::parse("\n ? ").unwrap_err();
        assert!(problems.iter().all(|p| p.line <= 2), "{problems:?}");
    }
}
