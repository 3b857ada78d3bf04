//! Every relative link of README.md and docs/ leads somewhere: the file or
//! directory exists, and an anchor (`page.md#anchor`, `#anchor`) is one of
//! the target page's headings as GitHub names them. Files named in code
//! spans (`` `tests/it/relay.rs` ``) exist too.

use std::collections::BTreeMap;
use std::path::Path;

use super::markdown::{anchors, links, pages, prose, Page};
use crate::support::repo;

#[test]
fn links_and_anchors_resolve() {
    let pages = pages();
    let by_path: BTreeMap<_, _> = pages
        .iter()
        .map(|p| (repo().join(&p.rel), anchors(&p.text)))
        .collect();
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in &pages {
        for (line, target) in links(&page.text) {
            if is_external(&target) {
                continue;
            }
            checked += 1;
            if let Err(e) = resolve(page, &target, &by_path) {
                bad.push(format!("{}:{line}: ({target}): {e}", page.rel));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} relative links found: is the reader broken?"
    );
    assert!(
        bad.is_empty(),
        "{} broken links:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

fn is_external(target: &str) -> bool {
    target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:")
}

fn resolve(
    page: &Page,
    target: &str,
    anchors: &BTreeMap<std::path::PathBuf, std::collections::BTreeSet<String>>,
) -> Result<(), String> {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        repo().join(&page.rel)
    } else {
        page.dir().join(path)
    };
    let file = normalise(&file);
    if !file.exists() {
        return Err(format!("{} does not exist", shown(&file)));
    }
    let Some(anchor) = anchor else {
        return Ok(());
    };
    let Some(known) = anchors.get(&file) else {
        return Err(format!(
            "an anchor into {}, which is not a docs page",
            shown(&file)
        ));
    };
    if known.contains(anchor) {
        Ok(())
    } else {
        Err(format!(
            "no heading of {} has the anchor #{anchor}",
            shown(&file)
        ))
    }
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalise(p: &Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

fn shown(p: &Path) -> String {
    p.strip_prefix(repo()).unwrap_or(p).display().to_string()
}

/// Paths of the repository named in code spans (`` `src/fleet.rs` ``,
/// `` `tests/it/redis.rs` ``) exist, so a moved or renamed file cannot
/// leave the docs pointing at nothing.
#[test]
fn files_named_in_the_docs_exist() {
    const ROOTS: [&str; 10] = [
        "src/",
        "tests/",
        "benches/",
        "fuzz/",
        "contrib/",
        "tools/",
        "crates/",
        "examples/",
        "dashboards/",
        "proto/",
    ];
    let mut bad = Vec::new();
    for page in pages() {
        for (n, l) in prose(&page.text).iter().enumerate() {
            for span in l.split('`').skip(1).step_by(2) {
                let looks_like_path = ROOTS.iter().any(|r| span.starts_with(r))
                    && !span.contains(char::is_whitespace)
                    && !span.contains(['*', '<', '$', ':']);
                // `examples/ingest_profile` names the example `ingest_profile.rs`.
                let exists =
                    repo().join(span).exists() || repo().join(format!("{span}.rs")).exists();
                if looks_like_path && !exists {
                    bad.push(format!("{}:{}: `{span}` does not exist", page.rel, n + 1));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The words a user-facing page must not carry: session history and issue
/// numbers belong in CHANGELOG.md and the commits.
#[test]
fn no_session_history_in_the_docs() {
    let banned = ["this vm", "this machine", "this session", "issue #"];
    let mut bad = Vec::new();
    for page in pages() {
        let lines: Vec<&str> = page.text.lines().collect();
        for (n, l) in lines.iter().enumerate() {
            // The line and the start of the next: a phrase that a line
            // break splits counts too (where it starts).
            let own = l.trim_end().to_lowercase();
            let next = lines.get(n + 1).map_or("", |x| x.trim_start());
            let low = format!("{own} {}", next.to_lowercase());
            for b in banned {
                if let Some(at) = low.find(b).filter(|&at| at < own.len()) {
                    let issue_number = b != "issue #"
                        || low[at + b.len()..].starts_with(|c: char| c.is_ascii_digit());
                    if issue_number {
                        bad.push(format!("{}:{}: `{b}`: {l}", page.rel, n + 1));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
