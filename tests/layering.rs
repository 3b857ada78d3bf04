//! The layering rule, checked: every import in `src/` points down the data
//! flow, the cores name no I/O crate, and no two files of one folder import
//! each other in a circle.
//!
//! The layers, from the ground up (a module may name only modules on a
//! lower floor; modules on one floor never name each other):
//!
//! ```text
//! 11 cli                         the binary's subcommands (src/main.rs
//!                                dispatches; they name the crate as `rollstat::`)
//! 10 daemon                      wiring: build, bind, spawn, wait, stop
//!  9 reload fdlimit              config reloads; the open-file limit
//!  8 config                      config.toml read into the settings each
//!                                module below owns
//!  7 http                        the HTTP router and its handlers
//!  6 ingest output               sockets to the registry; [[outputs]]: pushes to
//!                                remote-write and OTLP receivers
//!  5 expose relay rls            /metrics, OpenMetrics, JSON, the page; lines
//!                                copied to other statsd servers; Envoy's rate-limit service
//!  4 fleet service telemetry     shared windows; named breakers and limits; self-metrics
//!  3 series store tls host probe the registry of series; Redis (shared limits and
//!                                window buckets); the listeners' TLS settings;
//!                                this host's memory; `rollstat probe`
//!  2 stats breaker               windowed statistics; circuit breakers
//!  1 window limit names          rolling windows; rate limiters; Prometheus names
//!  0 access clock escape error   the pure pieces; the self-metric table and the
//!    parse sketch mapping family one family builder; files read under a cap
//!    file
//! ```
//!
//! The reading is textual (every `crate::<module>` path outside comments,
//! `use crate::{a, b}` groups included), which is all the rule needs.
//! `src/main.rs` and its `src/cli/` are the binary and stand above everything.
//!
//! One exception, for test code only (a `tests.rs` file, or a
//! `#[cfg(test)] mod` block): it may name `config`, to build its fixtures
//! from TOML as a user writes them. Nothing else may point up, in tests or
//! not.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Floor of each top-level module of `src/` (see the module docs).
const FLOORS: &[(&str, u8)] = &[
    ("access", 0),
    ("clock", 0),
    ("escape", 0),
    ("error", 0),
    ("parse", 0),
    ("sketch", 0),
    ("mapping", 0),
    ("family", 0),
    ("file", 0),
    ("window", 1),
    ("limit", 1),
    ("names", 1),
    ("stats", 2),
    ("otlp", 2),
    ("breaker", 2),
    ("series", 3),
    ("store", 3),
    ("tls", 3),
    ("host", 3),
    ("probe", 3),
    ("fleet", 4),
    ("service", 4),
    ("telemetry", 4),
    ("expose", 5),
    ("relay", 5),
    ("rls", 5),
    ("ingest", 6),
    ("output", 6),
    ("http", 7),
    ("config", 8),
    ("reload", 9),
    ("fdlimit", 9),
    ("daemon", 10),
    ("cli", 11),
];

/// Modules that hold algorithms and data, not I/O: they may not name an
/// async runtime, an HTTP stack, Redis or the prometheus crate.
const CORES: &[&str] = &[
    "access", "clock", "escape", "error", "parse", "sketch", "mapping", "window", "limit", "names",
    "otlp", "stats", "breaker", "config", "series",
];

/// Crates the cores may not name.
const IO_CRATES: &[&str] = &[
    "tokio",
    "axum",
    "hyper",
    "hyper_util",
    "tower",
    "tower_http",
    "redis",
    "prometheus",
    "socket2",
    "nix",
    "rustls",
    "tokio_rustls",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read src/") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The text of a Rust file with comments and string literals blanked out
/// (line breaks kept, so line numbers still hold).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_lines = |s: &[u8], out: &mut String| {
        for &c in s {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n);
            keep_lines(&b[i..end], &mut out);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let end = text[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
            keep_lines(&b[i..end], &mut out);
            i = end;
        } else if b[i] == b'"'
            || (b[i] == b'r' && b.get(i + 1).is_some_and(|&c| c == b'"' || c == b'#'))
        {
            // A string: plain ("...\"...") or raw (r"..." / r#"..."#).
            let start = i;
            if b[i] == b'r' {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                let close: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let open = i + 1 + hashes + 1;
                i = text[open..]
                    .find(&close)
                    .map_or(b.len(), |n| open + n + close.len());
            } else {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
            }
            keep_lines(&b[start..i], &mut out);
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            // A char literal such as '"' (lifetimes are left alone).
            out.push_str("   ");
            i += 3;
        } else {
            let n = text[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[i..i + n]);
            i += n;
        }
    }
    out
}

/// Every `(line, path)` that a file names after `prefix` (e.g. `crate::`):
/// `crate::a::b` gives `a::b`; `crate::{a, b::{c}}` gives `a` and `b`.
fn named_after(code: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        // `self::redis::` or `super::x::` names a submodule, not a crate.
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group only.
            let mut depth = 0usize;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push((line, std::mem::take(&mut item).trim().to_string()));
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 && c != '{' {
                    item.push(c);
                }
            }
            if !item.trim().is_empty() {
                out.push((line, item.trim().to_string()));
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push((line, name));
        }
    }
    out
}

/// The top-level module a file of `src/` belongs to (`series/state.rs` →
/// `series`), or `None` for the crate root and the binary.
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main" | "bin")).then(|| name.to_string())
}

/// The module test code may name from any floor (see the module docs).
const TEST_FIXTURES: &str = "config";

/// Which lines of `code` (from `code_only`) are test code: all of a
/// `tests.rs` file; in other files, each `#[cfg(test)] mod … { … }` block.
fn test_lines(code: &str, rel: &Path) -> Vec<bool> {
    let lines = code.matches('\n').count() + 2;
    if rel.file_stem().is_some_and(|s| s == "tests") {
        return vec![true; lines];
    }
    let mut out = vec![false; lines];
    for (at, _) in code.match_indices("#[cfg(test)]") {
        let after = code[at + "#[cfg(test)]".len()..].trim_start();
        if !(after.starts_with("mod ") || after.starts_with("pub(crate) mod ")) {
            continue;
        }
        let Some(open) = code[at..].find('{').map(|o| at + o) else {
            continue;
        };
        let mut depth = 0usize;
        let mut end = code.len();
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let first = code[..at].matches('\n').count() + 1;
        let last = code[..end].matches('\n').count() + 1;
        for flag in &mut out[first..=last] {
            *flag = true;
        }
    }
    out
}

fn floor(module: &str) -> Option<u8> {
    FLOORS.iter().find(|(m, _)| *m == module).map(|(_, f)| *f)
}

#[test]
fn every_module_of_src_has_a_floor() {
    let mut missing = BTreeSet::new();
    for file in rust_files(&src()) {
        let rel = file.strip_prefix(src()).unwrap().to_path_buf();
        if let Some(m) = module_of(&rel) {
            if floor(&m).is_none() {
                missing.insert(m);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "give these modules a floor in tests/layering.rs (and docs/architecture.md): {missing:?}"
    );
}

#[test]
fn every_import_points_down_the_data_flow() {
    let mut wrong = String::new();
    for file in rust_files(&src()) {
        let rel = file.strip_prefix(src()).unwrap().to_path_buf();
        let Some(me) = module_of(&rel) else { continue };
        let Some(my_floor) = floor(&me) else { continue };
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
        let in_test = test_lines(&code, &rel);
        for (line, path) in named_after(&code, "crate::") {
            let target = path.split("::").next().unwrap_or_default();
            if target == me || target.is_empty() || target.starts_with(char::is_uppercase) {
                continue; // within the module, or a re-export of the crate root
            }
            if target == TEST_FIXTURES && in_test[line] {
                continue; // a test building its fixture from TOML
            }
            match floor(target) {
                Some(f) if f < my_floor => {}
                Some(f) => {
                    let _ = writeln!(
                        wrong,
                        "  src/{}:{line}: `{me}` (floor {my_floor}) names `crate::{path}` (floor {f})",
                        rel.display()
                    );
                }
                None => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up the data flow or across one floor:\n{wrong}\
         Move the shared item down to the lower module, or the caller up."
    );
}

#[test]
fn the_cores_name_no_runtime_http_redis_or_prometheus_crate() {
    let mut wrong = String::new();
    for file in rust_files(&src()) {
        let rel = file.strip_prefix(src()).unwrap().to_path_buf();
        let Some(me) = module_of(&rel) else { continue };
        if !CORES.contains(&me.as_str()) {
            continue;
        }
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
        for krate in IO_CRATES {
            for (line, path) in named_after(&code, &format!("{krate}::")) {
                let _ = writeln!(wrong, "  src/{}:{line}: {krate}::{path}", rel.display());
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "core modules ({CORES:?}) must stay free of I/O crates:\n{wrong}"
    );
}

#[test]
fn no_two_files_of_one_folder_import_each_other_in_a_circle() {
    // Sibling files (not `mod.rs`, which declares them) of each folder, and
    // which siblings each one names (`super::x` or `crate::folder::x`).
    let mut folders: BTreeMap<PathBuf, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in rust_files(&src()) {
        let rel = file.strip_prefix(src()).unwrap().to_path_buf();
        let Some(dir) = rel.parent().filter(|d| !d.as_os_str().is_empty()) else {
            continue;
        };
        let stem = rel.file_stem().unwrap().to_str().unwrap().to_string();
        if stem == "mod" || stem == "tests" {
            continue;
        }
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
        let folder_path = format!("crate::{}::", dir.to_str().unwrap().replace('/', "::"));
        let mut names = BTreeSet::new();
        for prefix in ["super::", folder_path.as_str()] {
            for (_, path) in named_after(&code, prefix) {
                names.insert(path.split("::").next().unwrap_or_default().to_string());
            }
        }
        folders
            .entry(dir.to_path_buf())
            .or_default()
            .insert(stem, names);
    }
    let mut circles = String::new();
    for (dir, files) in &folders {
        for (a, names) in files {
            for b in names.iter().filter(|b| *b != a && files.contains_key(*b)) {
                if a < b && files[b].contains(a) {
                    let _ = writeln!(circles, "  src/{}: {a}.rs <-> {b}.rs", dir.display());
                }
            }
        }
    }
    assert!(
        circles.is_empty(),
        "files that import each other (move what both need into one of them, or into mod.rs):\n{circles}"
    );
}

#[test]
fn the_reader_of_imports_sees_groups_paths_and_skips_comments_and_strings() {
    let code = code_only(
        "use crate::{a, b::{c, d}, e::F};\n// crate::commented\nlet s = \"crate::quoted\";\nlet x = crate::g::h(); let y = notcrate::z;\n/* crate::block */ let c = '\"'; crate::i::J",
    );
    let names: Vec<String> = named_after(&code, "crate::")
        .into_iter()
        .map(|(l, p)| format!("{l}:{}", p.split("::").next().unwrap_or_default()))
        .collect();
    assert_eq!(names, ["1:a", "1:b", "1:e", "4:g", "5:i"], "{code}");
}

#[test]
fn test_code_is_a_tests_file_or_a_cfg_test_mod_block() {
    let code = code_only(
        "use crate::a;\nfn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() { let x = '{'; }\n    use crate::config::Config;\n}\nfn after() {}\n#[cfg(test)]\nfn helper() {}\n",
    );
    let lines = test_lines(&code, Path::new("x/plan.rs"));
    let marked: Vec<usize> = (1..=10).filter(|&l| lines[l]).collect();
    assert_eq!(marked, [3, 4, 5, 6, 7], "{code}");
    assert!(test_lines("fn a() {}\n", Path::new("x/tests.rs"))[1]);
}

/// Which modules each module names (`true`: only its test code does).
fn imports_between_modules() -> BTreeMap<String, BTreeMap<String, bool>> {
    let mut out: BTreeMap<String, BTreeMap<String, bool>> = BTreeMap::new();
    for file in rust_files(&src()) {
        let rel = file.strip_prefix(src()).unwrap().to_path_buf();
        let Some(me) = module_of(&rel) else { continue };
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
        let in_test = test_lines(&code, &rel);
        // The binary's files name the library as `rollstat::`.
        let prefix = if me == "cli" { "rollstat::" } else { "crate::" };
        for (line, path) in named_after(&code, prefix) {
            let target = path.split("::").next().unwrap_or_default();
            if target == me || floor(target).is_none() {
                continue;
            }
            let only_tests = out
                .entry(me.clone())
                .or_default()
                .entry(target.to_string())
                .or_insert(true);
            *only_tests &= in_test[line];
        }
    }
    out
}

#[test]
fn the_architecture_page_lists_the_imports_as_they_stand() {
    let mut want = String::new();
    for (me, targets) in imports_between_modules() {
        let names: Vec<String> = targets
            .iter()
            .map(|(t, only_tests)| {
                if *only_tests {
                    format!("{t} (tests)")
                } else {
                    t.clone()
                }
            })
            .collect();
        let _ = writeln!(want, "{me:<9} -> {}", names.join(", "));
    }
    let page = std::fs::read_to_string(src().join("../docs/architecture.md")).unwrap();
    let start = page
        .find("The imports between folders")
        .and_then(|at| {
            page[at..]
                .find("```text\n")
                .map(|o| at + o + "```text\n".len())
        })
        .expect("docs/architecture.md: the imports block");
    let end = start
        + page[start..]
            .find("```")
            .expect("the end of the imports block");
    assert_eq!(
        &page[start..end],
        want,
        "docs/architecture.md's imports block is out of date; it should read:\n{want}"
    );
}
