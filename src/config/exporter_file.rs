//! `[statsd_exporter]`: the naming of cumulative families and a
//! statsd_exporter mapping file, read as it is.

use std::path::PathBuf;

use super::reader::{Problems, Table};
use super::{statsd_exporter, ttl_note, yaml, Config, NamedWindow};

/// `[statsd_exporter] mapping_file`, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatsdExporterFile {
    /// The file, as given.
    pub path: PathBuf,
    /// How many rules it holds (the last ones of [`Config::mappings`]).
    pub rules: usize,
    /// What it means that rollstat does differently (for check-config).
    pub warnings: Vec<String>,
}

pub(super) const KEYS: &[&str] = &["mapping_file", "cumulative_names"];

/// `[statsd_exporter] mapping_file`: the file read and its rules compiled
/// (on the default windows); `None` when unset or when it has problems
/// (recorded, each with the file's line).
fn read_exporter_file(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    windows: &[NamedWindow],
) -> Option<(PathBuf, statsd_exporter::ExporterRules)> {
    let off = t.raw("mapping_file").map_or(t.start(), |v| v.span().start);
    let key = t.key_path("mapping_file");
    let (path, rules) =
        yaml::read_named_file(t, p, "mapping_file", |text, _| statsd_exporter::parse(text))?;
    let mut ok = true;
    let mut rules = rules;
    let mut notes = Vec::new();
    for r in &rules.rules {
        if let Err(e) = r.to_mapping() {
            p.at(off, &key, format!("{path}:{}: `name, labels`: {e}", r.line));
            ok = false;
        }
        let note = r.ttl.and_then(|ttl| ttl_note(ttl, windows.iter()));
        if let (Some(n), Some((line, k))) = (note, &r.ttl_at) {
            let n = format!("line {line}: `{k}`: {n}");
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
    }
    rules.warnings.extend(notes);
    ok.then_some((PathBuf::from(path), rules))
}

/// `[statsd_exporter]`: the naming and the mapping file, its rules added
/// to `cfg.mappings`.
pub(super) fn read(t: &mut Table<'_, '_>, p: &mut Problems<'_>, cfg: &mut Config) {
    if let Some((names, off)) = t.string(p, "cumulative_names") {
        match names.as_str() {
            "rollstat" => {}
            "statsd_exporter" => cfg.exporter_names = true,
            _ => p.at(
                off,
                &t.key_path("cumulative_names"),
                format!("unknown naming `{names}`; use \"rollstat\" (the default) or \"statsd_exporter\""),
            ),
        }
    }
    if let Some((file, rules)) = read_exporter_file(t, p, &cfg.windows) {
        cfg.statsd_exporter = Some(StatsdExporterFile {
            path: file,
            rules: rules.rules.len(),
            warnings: rules.warnings.clone(),
        });
        for r in &rules.rules {
            // Each compiled when read (`read_exporter_file`).
            if let Ok(m) = r.to_mapping() {
                cfg.mappings.push(m);
            }
        }
    }
}
