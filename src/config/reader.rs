//! A small reader over a span-carrying TOML tree that collects every problem.
//!
//! serde stops at the first error and loses where a value came from once it is
//! converted. This reader walks `toml::de::DeTable` (which keeps byte spans),
//! converts each key to its type, and records every problem with its key path
//! and line: unknown keys, wrong types, out-of-range values. The caller then
//! sees all of them at once.

use std::collections::HashSet;
use std::fmt;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// 1-based line in the file (0 when the problem has no single place).
    pub line: usize,
    /// Dotted key path, e.g. `windows[1].buckets`.
    pub key: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: `{}`: {}", self.line, self.key, self.message)
        } else {
            write!(f, "`{}`: {}", self.key, self.message)
        }
    }
}

/// Collects problems while the config is read.
pub struct Problems<'s> {
    src: &'s str,
    pub(super) list: Vec<ConfigProblem>,
    /// The first file refused before it was read (its stable reason).
    pub(super) refusal: Option<&'static str>,
}

impl<'s> Problems<'s> {
    pub fn new(src: &'s str) -> Self {
        Problems {
            src,
            list: Vec::new(),
            refusal: None,
        }
    }

    pub fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.src.len());
        self.src.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// A problem with a file the config names that was refused before it
    /// was read (too large, not a regular file, nested too deep...):
    /// `reason` is what a reload counts it under.
    pub fn refused(
        &mut self,
        offset: usize,
        key: &str,
        message: impl Into<String>,
        reason: &'static str,
    ) {
        self.refusal.get_or_insert(reason);
        self.at(offset, key, message);
    }

    pub fn at(&mut self, offset: usize, key: &str, message: impl Into<String>) {
        let line = self.line_of(offset);
        self.list.push(ConfigProblem {
            line,
            key: key.to_string(),
            message: message.into(),
        });
    }
}

/// A view of one TOML table: typed getters that record problems, and a
/// `finish` that reports every key nobody asked for.
pub struct Table<'t, 'i> {
    table: &'t DeTable<'i>,
    path: String,
    start: usize,
    used: HashSet<String>,
}

impl<'t, 'i> Table<'t, 'i> {
    pub fn new(table: &'t DeTable<'i>, path: impl Into<String>, start: usize) -> Self {
        Table {
            table,
            path: path.into(),
            start,
            used: HashSet::new(),
        }
    }

    /// Key path of `key` in this table.
    pub fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{}", self.path, key)
        }
    }

    /// Byte offset where this table starts (for problems about the table).
    pub fn start(&self) -> usize {
        self.start
    }

    pub fn raw(&mut self, key: &str) -> Option<&'t Spanned<DeValue<'i>>> {
        self.used.insert(key.to_string());
        self.table
            .iter()
            .find(|(k, _)| k.get_ref().as_ref() == key)
            .map(|(_, v)| v)
    }

    fn wrong_type(&self, p: &mut Problems<'_>, key: &str, v: &Spanned<DeValue<'_>>, want: &str) {
        p.at(
            v.span().start,
            &self.key_path(key),
            format!("expected {want}, found {}", type_name(v.get_ref())),
        );
    }

    pub fn string(&mut self, p: &mut Problems<'_>, key: &str) -> Option<(String, usize)> {
        let v = self.raw(key)?;
        let s = string_of(v);
        if s.is_none() {
            self.wrong_type(p, key, v, "a string");
        }
        s
    }

    pub fn bool(&mut self, p: &mut Problems<'_>, key: &str) -> Option<bool> {
        let v = self.raw(key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(p, key, v, "true or false");
                None
            }
        }
    }

    /// An integer in `min..=max`.
    pub fn int(&mut self, p: &mut Problems<'_>, key: &str, min: u64, max: u64) -> Option<u64> {
        let v = self.raw(key)?;
        let DeValue::Integer(i) = v.get_ref() else {
            self.wrong_type(p, key, v, "an integer");
            return None;
        };
        match u64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                p.at(
                    v.span().start,
                    &self.key_path(key),
                    format!("must be an integer from {min} to {max}, got {i}"),
                );
                None
            }
        }
    }

    /// A number (integers accepted) in `min..=max`.
    pub fn float(&mut self, p: &mut Problems<'_>, key: &str, min: f64, max: f64) -> Option<f64> {
        let v = self.raw(key)?;
        let Some((f, off)) = float_of(v) else {
            self.wrong_type(p, key, v, "a number");
            return None;
        };
        if f.is_finite() && (min..=max).contains(&f) {
            Some(f)
        } else {
            p.at(
                off,
                &self.key_path(key),
                format!("must be a number from {min} to {max}, got {f}"),
            );
            None
        }
    }

    /// An array of tables (`[[key]]`), each as a `Table`.
    pub fn tables(&mut self, p: &mut Problems<'_>, key: &str) -> Vec<Table<'t, 'i>> {
        let path = self.key_path(key);
        let Some(v) = self.raw(key) else {
            return Vec::new();
        };
        match v.get_ref() {
            DeValue::Array(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| match item.get_ref() {
                    DeValue::Table(t) => {
                        Some(Table::new(t, format!("{path}[{i}]"), item.span().start))
                    }
                    other => {
                        p.at(
                            item.span().start,
                            &format!("{path}[{i}]"),
                            format!("expected a table ([[{key}]]), found {}", type_name(other)),
                        );
                        None
                    }
                })
                .collect(),
            other => {
                p.at(
                    v.span().start,
                    &path,
                    format!(
                        "expected an array of tables ([[{key}]]), found {}",
                        type_name(other)
                    ),
                );
                Vec::new()
            }
        }
    }

    /// A sub-table (`[key]` or `key = { ... }`).
    pub fn table(&mut self, p: &mut Problems<'_>, key: &str) -> Option<Table<'t, 'i>> {
        let path = self.key_path(key);
        let v = self.raw(key)?;
        match v.get_ref() {
            DeValue::Table(t) => Some(Table::new(t, path, v.span().start)),
            other => {
                p.at(
                    v.span().start,
                    &path,
                    format!("expected a table, found {}", type_name(other)),
                );
                None
            }
        }
    }

    /// An array of strings.
    pub fn strings(&mut self, p: &mut Problems<'_>, key: &str) -> Option<Vec<(String, usize)>> {
        self.array(p, key, "an array of strings", "a string", string_of)
    }

    /// An array of numbers.
    pub fn floats(&mut self, p: &mut Problems<'_>, key: &str) -> Option<Vec<(f64, usize)>> {
        self.array(p, key, "an array of numbers", "a number", float_of)
    }

    /// An array (`want` says of what) whose items `item` reads; an item it
    /// cannot read (not `want_item`) is a problem at that item.
    fn array<T>(
        &mut self,
        p: &mut Problems<'_>,
        key: &str,
        want: &str,
        want_item: &str,
        item: impl Fn(&Spanned<DeValue<'_>>) -> Option<T>,
    ) -> Option<Vec<T>> {
        let path = self.key_path(key);
        let v = self.raw(key)?;
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong_type(p, key, v, want);
            return None;
        };
        let mut out = Vec::new();
        for (i, it) in items.iter().enumerate() {
            match item(it) {
                Some(x) => out.push(x),
                None => p.at(
                    it.span().start,
                    &format!("{path}[{i}]"),
                    format!("expected {want_item}, found {}", type_name(it.get_ref())),
                ),
            }
        }
        Some(out)
    }

    /// Every (key, string value) pair of this table; other value types are
    /// problems.
    pub fn string_pairs(&mut self, p: &mut Problems<'_>) -> Vec<(String, String, usize)> {
        let mut out = Vec::new();
        for (k, v) in self.table.iter() {
            let key = k.get_ref().to_string();
            self.used.insert(key.clone());
            match v.get_ref() {
                DeValue::String(s) => out.push((key, s.to_string(), k.span().start)),
                other => p.at(
                    v.span().start,
                    &self.key_path(&key),
                    format!("expected a string, found {}", type_name(other)),
                ),
            }
        }
        out
    }

    /// Reports every key that was never read as unknown.
    pub fn finish(self, p: &mut Problems<'_>, known: &[&str]) {
        for (k, _) in self.table.iter() {
            let key = k.get_ref().as_ref();
            // A known key left unread: a problem earlier in the table
            // stopped the reading (and is reported), not an unknown key.
            if !self.used.contains(key) && !known.contains(&key) {
                let hint = if known.is_empty() {
                    String::new()
                } else {
                    format!("; known keys here: {}", known.join(", "))
                };
                p.at(
                    k.span().start,
                    &self.key_path(key),
                    format!("unknown key{hint}"),
                );
            }
        }
    }
}

/// A string, and where it starts.
fn string_of(v: &Spanned<DeValue<'_>>) -> Option<(String, usize)> {
    match v.get_ref() {
        DeValue::String(s) => Some((s.to_string(), v.span().start)),
        _ => None,
    }
}

fn float_of(v: &Spanned<DeValue<'_>>) -> Option<(f64, usize)> {
    let off = v.span().start;
    match v.get_ref() {
        DeValue::Float(f) => f
            .as_str()
            .replace('_', "")
            .parse::<f64>()
            .ok()
            .map(|x| (x, off)),
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
            .ok()
            .map(|x| (x as f64, off)),
        _ => None,
    }
}

fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}
