//! docs/configuration.md lists exactly the keys the config reader accepts.
//!
//! Each key table there follows a marker `<!-- keys: PATH -->` (`top`,
//! `[listen]`, `[[windows]]`, `[[limits]].rules`, ...). For each path the
//! test asks the real binary, through `rollstat check-config`, in both
//! directions:
//!
//! * every key of the table is accepted there (a file that sets them all
//!   gets no "unknown key" problem for any of them);
//! * every key the reader names for that table (the "known keys here"
//!   list of an unknown key's problem) has a row.
//!
//! A probe key that must be refused guards against a reader that stopped
//! early. Every key whose type is a table (or an array of tables) must have
//! its own marked table.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use super::markdown::{table_after, ticked, Page};
use crate::support::{run, TempDir};

const PROBE: &str = "zz_docs_probe";
const PAGE: &str = "docs/configuration.md";

#[test]
fn config_reference_lists_every_key() {
    let page = Page::read(PAGE);
    let paths = marked_paths(&page.text);
    assert!(
        paths.len() >= 15,
        "only {} key tables found in {PAGE}",
        paths.len()
    );
    let dir = TempDir::new("docs-keys");
    let mut bad = Vec::new();
    for path in &paths {
        let rows = table_after(&page.text, &format!("keys: {path}")).unwrap();
        let keys: Vec<String> = rows
            .iter()
            .filter_map(|r| ticked(&r[0]).first().cloned())
            .collect();
        bad.extend(compare(dir.path(), path, &keys));
        for r in &rows {
            if let Some(sub) = sub_table(path, &ticked(&r[0])[0], &r[1]) {
                if !paths.iter().any(|p| p.split(' ').any(|q| q == sub)) {
                    bad.push(format!("`{sub}` is a table, but {PAGE} has no `<!-- keys: {sub} -->` table of its keys"));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{PAGE} and the config reader disagree:\n{}",
        bad.join("\n")
    );
}

/// The paths of every `<!-- keys: ... -->` marker, in order. One marker
/// may name several tables that share their keys (`[http.auth.read]
/// [http.auth.write]`); each is probed.
fn marked_paths(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("<!-- keys: ")?.strip_suffix(" -->"))
        .map(str::to_string)
        .collect()
}

/// The table path a row of `path` opens, if its type says it is a table.
fn sub_table(path: &str, key: &str, ty: &str) -> Option<String> {
    let table = ty == "table" || ty.starts_with("table ") && !ty.starts_with("table of");
    let array = ty.contains("array of tables");
    let inline = ty.contains("array of inline tables");
    let parent = path.split(' ').next().unwrap();
    let (open, close) = if array { ("[[", "]]") } else { ("[", "]") };
    if parent == "top" && (table || array) {
        return Some(format!("{open}{key}{close}"));
    }
    let inner = parent.trim_start_matches('[').trim_end_matches(']');
    if inline {
        return Some(format!("{parent}.{key}"));
    }
    (table || array).then(|| format!("{open}{inner}.{key}{close}"))
}

/// The problems between the documented `keys` of `paths` and the reader.
fn compare(dir: &std::path::Path, paths: &str, keys: &[String]) -> Vec<String> {
    let documented: BTreeSet<&str> = keys.iter().map(String::as_str).collect();
    let mut bad = Vec::new();
    for path in paths.split(' ') {
        let mut accepted = BTreeSet::new();
        let mut known = BTreeSet::new();
        for ctx in &contexts(path) {
            // One probe alone: the reader's own list of this table's keys.
            let (unknown, hint) = probe(dir, path, ctx, &[]);
            if !unknown.contains(PROBE) || hint.is_empty() {
                bad.push(format!("{path}: the probe key was not refused with a list of known keys (context {ctx:?})"));
            }
            known.extend(hint);
            // Then each key on its own (some exclude each other), beside
            // the probe that shows the reader got to the end. A key is
            // accepted if some context takes it (an SRE key under
            // kind = "sre").
            for k in keys.iter().filter(|k| !ctx.contains(&format!("\n{k} = "))) {
                let (unknown, _) = probe(dir, path, ctx, std::slice::from_ref(k));
                if unknown.contains(PROBE) && !unknown.contains(k) {
                    accepted.insert(k.as_str());
                }
            }
            accepted.extend(
                documented
                    .iter()
                    .filter(|k| ctx.contains(&format!("\n{k} = "))),
            );
        }
        for k in documented.difference(&accepted) {
            bad.push(format!(
                "{path}: `{k}` has a row, but the config reader refuses it as an unknown key"
            ));
        }
        for k in known {
            if !documented.contains(k.as_str()) {
                bad.push(format!(
                    "{path}: the config reader accepts `{k}`, which has no row"
                ));
            }
        }
    }
    bad
}

/// The keys an `[[outputs]]` entry needs.
const OUTPUT: &str = "kind = \"remote_write\"\nurl = \"https://127.0.0.1:9/api/v1/write\"\n";

/// The lines a key of `path` needs around it, one string per context to
/// try (a breaker's keys depend on its kind).
fn contexts(path: &str) -> Vec<String> {
    match path {
        "top" => vec![String::new()],
        "[[breakers]]" => vec![
            "[[breakers]]\nname = \"b\"\nkind = \"sre\"\n".into(),
            "[[breakers]]\nname = \"b\"\nkind = \"error_rate\"\n".into(),
        ],
        "[[limits]].rules" => vec!["[[limits]]\nname = \"l\"\n".into()],
        // The summary keys are read for a summary; a relay's others once
        // its address is good.
        "[[mappings]]" => vec![
            "[[mappings]]\nmatch = \"a\"\n".into(),
            "[[mappings]]\nmatch = \"a\"\nobserver = \"summary\"\n".into(),
        ],
        "[[relay]]" => vec!["[[relay]]\naddress = \"127.0.0.1:9\"\n".into()],
        // An output's other keys are read once its kind and url are good;
        // its sub-tables are those of an `[[outputs]]` entry.
        "[[outputs]]" => vec![format!("[[outputs]]\n{OUTPUT}")],
        "[outputs.tls]" => vec![format!("[[outputs]]\n{OUTPUT}[outputs.tls]\n")],
        "[outputs.basic_auth]" => vec![format!("[[outputs]]\n{OUTPUT}[outputs.basic_auth]\n")],
        // [rls.tls] is read once the service is on.
        "[rls.tls]" => vec!["[rls]\ngrpc = \"127.0.0.1:0\"\n[rls.tls]\n".into()],
        p => vec![format!("{p}\n")],
    }
}

/// Runs check-config on a file that sets every key of `keys` (but those
/// the context sets) and the probe; returns the keys reported unknown and
/// the reader's "known keys here" list.
fn probe(
    dir: &std::path::Path,
    path: &str,
    ctx: &str,
    keys: &[String],
) -> (BTreeSet<String>, Vec<String>) {
    let mut set: Vec<&str> = keys.iter().map(String::as_str).collect();
    set.push(PROBE);
    let body = if path == "[[limits]].rules" {
        let inner: Vec<String> = set.iter().map(|k| format!("{k} = 1")).collect();
        format!("{ctx}rules = [{{ {} }}]\n", inner.join(", "))
    } else {
        let lines: Vec<String> = set.iter().map(|k| format!("{k} = 1\n")).collect();
        format!("{ctx}{}", lines.concat())
    };
    let file = dir.join("keys.toml");
    std::fs::write(&file, &body).unwrap();
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("check-config")
            .arg(&file),
        b"",
        Duration::from_secs(30),
    );
    let text = format!("{}{}", out.stdout, out.stderr);
    let mut unknown = BTreeSet::new();
    let mut hint = Vec::new();
    for l in text.lines().filter(|l| l.contains(": unknown key")) {
        let Some(key) = ticked(l).first().cloned() else {
            continue;
        };
        let leaf = key.rsplit('.').next().unwrap().to_string();
        if leaf == PROBE {
            if let Some((_, list)) = l.split_once("known keys here: ") {
                hint = list.split(", ").map(|s| s.trim().to_string()).collect();
            }
        }
        unknown.insert(leaf);
    }
    (unknown, hint)
}
