//! The little of Markdown the docs tests need, read as GitHub renders it:
//! fenced code blocks (with their info string and the HTML comment just
//! before them), headings and their anchors, inline links, and tables.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::support::repo;

/// One Markdown file of the docs, as text.
pub struct Page {
    /// The path from the repository's root, e.g. `docs/redis.md`.
    pub rel: String,
    pub text: String,
}

impl Page {
    pub fn read(rel: &str) -> Page {
        let text =
            std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"));
        Page {
            rel: rel.to_string(),
            text,
        }
    }

    /// The directory the page's relative links start from.
    pub fn dir(&self) -> PathBuf {
        repo().join(&self.rel).parent().unwrap().to_path_buf()
    }
}

/// README.md and every `.md` under `docs/`, README first.
pub fn pages() -> Vec<Page> {
    let mut rels = vec!["README.md".to_string()];
    let mut found = Vec::new();
    walk(&repo().join("docs"), &mut found);
    found.sort();
    for p in found {
        let rel = p
            .strip_prefix(repo())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        rels.push(rel);
    }
    rels.iter().map(|r| Page::read(r)).collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// A fenced code block.
#[derive(Debug)]
pub struct Block {
    /// The info string's first word (`sh`, `toml`, ...), may be empty.
    pub lang: String,
    /// The HTML comment on the last non-blank line before the fence,
    /// without `<!--` and `-->` (e.g. `runnable`), if there is one.
    pub marker: Option<String>,
    /// The 1-based line of the opening fence.
    pub line: usize,
    /// The content, the fence's indentation removed.
    pub code: String,
}

/// Every fenced code block of `text`, in order.
pub fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some((indent, fence, info)) = opening(lines[i]) else {
            i += 1;
            continue;
        };
        let start = i;
        let mut code = String::new();
        i += 1;
        while i < lines.len() && !closes(lines[i], &fence) {
            let l = lines[i];
            let cut = l.len() - l.trim_start().len();
            code.push_str(&l[cut.min(indent)..]);
            code.push('\n');
            i += 1;
        }
        out.push(Block {
            lang: info.split_whitespace().next().unwrap_or("").to_string(),
            marker: marker_before(&lines, start),
            line: start + 1,
            code,
        });
        i += 1;
    }
    out
}

/// `(indentation, fence, info string)` when `line` opens a fenced block.
fn opening(line: &str) -> Option<(usize, String, String)> {
    let t = line.trim_start();
    let indent = line.len() - t.len();
    for c in ['`', '~'] {
        let n = t.chars().take_while(|&x| x == c).count();
        if n >= 3 {
            return Some((indent, c.to_string().repeat(n), t[n..].trim().to_string()));
        }
    }
    None
}

fn closes(line: &str, fence: &str) -> bool {
    let t = line.trim();
    t.starts_with(fence)
        && t.trim_start_matches(fence.chars().next().unwrap())
            .is_empty()
}

fn marker_before(lines: &[&str], fence: usize) -> Option<String> {
    let prev = lines[..fence].iter().rev().find(|l| !l.trim().is_empty())?;
    let t = prev.trim();
    let inner = t.strip_prefix("<!--")?.strip_suffix("-->")?;
    Some(inner.trim().to_string())
}

/// The text outside fenced code blocks, code lines blanked (so line
/// numbers stay), for reading headings, links and tables.
pub fn prose(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for l in text.lines() {
        match &fence {
            Some(f) => {
                if closes(l, f) {
                    fence = None;
                }
                out.push(String::new());
            }
            None => {
                if let Some((_, f, _)) = opening(l) {
                    fence = Some(f);
                    out.push(String::new());
                } else {
                    out.push(l.to_string());
                }
            }
        }
    }
    out
}

/// The anchors GitHub gives the headings of `text`: the heading's text
/// without its Markdown, lower-cased, every character but letters, digits,
/// `-`, `_` and spaces removed, spaces turned into `-`; a repeated anchor
/// gets `-1`, `-2`, ...
pub fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for l in prose(text) {
        let t = l.trim_start();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !t[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&plain(&t[hashes..]));
        let mut a = base.clone();
        let mut n = 1;
        while seen.contains(&a) {
            a = format!("{base}-{n}");
            n += 1;
        }
        seen.insert(a);
    }
    seen
}

/// A heading's text as GitHub shows it: link targets, code ticks and
/// emphasis marks dropped.
fn plain(heading: &str) -> String {
    let mut s = String::new();
    let mut rest = heading.trim();
    while let Some(open) = rest.find('[') {
        match link_at(&rest[open..]) {
            Some((text, _, len)) => {
                s.push_str(&rest[..open]);
                s.push_str(&text);
                rest = &rest[open + len..];
            }
            None => {
                s.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    s.push_str(rest);
    s.replace(['`', '*'], "")
}

pub fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// `(text, target, length)` of an inline link `[text](target)` at the
/// start of `s`.
fn link_at(s: &str) -> Option<(String, String, usize)> {
    let mut depth = 0;
    let mut close = None;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close?;
    let after = &s[close + 1..];
    let inner = after.strip_prefix('(')?;
    let end = inner.find(')')?;
    let target = inner[..end]
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_string();
    Some((s[1..close].to_string(), target, close + 2 + end + 1))
}

/// Every inline link and image target outside code, with its 1-based line.
pub fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, l) in prose(text).iter().enumerate() {
        let l = without_code_spans(l);
        let mut rest = l.as_str();
        while let Some(open) = rest.find('[') {
            match link_at(&rest[open..]) {
                Some((text, target, len)) => {
                    out.push((n + 1, target));
                    // A link's text may hold an image or another link.
                    out.extend(links(&text).into_iter().map(|(_, t)| (n + 1, t)));
                    rest = &rest[open + len..];
                }
                None => rest = &rest[open + 1..],
            }
        }
    }
    out
}

/// `line` with the insides of its code spans blanked.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(c);
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// The rows of the table that follows the line `<!-- {marker} -->` in
/// `text` (header and separator skipped), each split into trimmed cells.
pub fn table_after(text: &str, marker: &str) -> Option<Vec<Vec<String>>> {
    let lines = prose(text);
    let at = lines
        .iter()
        .position(|l| l.trim() == format!("<!-- {marker} -->"))?;
    let rows = lines[at + 1..]
        .iter()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.trim_start().starts_with('|'))
        .skip(2)
        .map(|l| cells(l))
        .collect();
    Some(rows)
}

/// The cells of a table row (`\|` is a bar inside a cell).
pub fn cells(row: &str) -> Vec<String> {
    let t = row.trim().trim_start_matches('|').trim_end_matches('|');
    let mut out = vec![String::new()];
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&'|') {
            out.last_mut().unwrap().push('|');
            chars.next();
        } else if c == '|' {
            out.push(String::new());
        } else {
            out.last_mut().unwrap().push(c);
        }
    }
    out.iter().map(|c| c.trim().to_string()).collect()
}

/// The names in backticks in `cell`: `` `a`, `b` `` gives `a`, `b`.
pub fn ticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn anchors_follow_github() {
    let a = anchors(
        "# What you get on /metrics\n## Formats, names and native histograms\n### `[http.auth]` and `[http.auth.<group>]`\n## Coming from statsd_exporter\n## Stop\n## Stop\n```\n# not a heading\n```\n",
    );
    let want = [
        "what-you-get-on-metrics",
        "formats-names-and-native-histograms",
        "httpauth-and-httpauthgroup",
        "coming-from-statsd_exporter",
        "stop",
        "stop-1",
    ];
    assert_eq!(a, want.iter().map(|s| s.to_string()).collect());
}

#[test]
fn links_skip_code() {
    let l =
        links("see [a](x.md#y) and `[b](no.md)`\n```\n[c](no.md)\n```\n[![img](p.png)](q.md)\n");
    let targets: Vec<&str> = l.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(targets, ["x.md#y", "q.md", "p.png"]);
}
