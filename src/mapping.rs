//! Mapping rules on statsd names: globs with captures, and templates that use
//! them. Pure functions; the series registry applies them once, when a series
//! is created, never per line.
//!
//! Glob syntax (statsd_exporter users will recognise it):
//! * `*` matches any run of characters except `.` (one name component, or part of it);
//! * `**` matches any run of characters, dots included;
//! * every other character matches itself.
//!
//! Each `*` or `**` is a capture, `$1`, `$2`... (or `${1}`) in templates.

use std::fmt;

/// A compiled glob.
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    source: String,
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Star,
    DoubleStar,
}

impl Glob {
    /// Compiles `pattern`; the error says what to fix.
    pub fn new(pattern: &str) -> Result<Glob, String> {
        if pattern.is_empty() {
            return Err("an empty glob matches nothing; use \"**\" to match every name".into());
        }
        if pattern.contains("***") {
            return Err(format!(
                "`{pattern}`: use `*` (one component) or `**` (any depth), not `***`"
            ));
        }
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '*' {
                if !lit.is_empty() {
                    parts.push(Part::Literal(std::mem::take(&mut lit)));
                }
                if chars.peek() == Some(&'*') {
                    chars.next();
                    parts.push(Part::DoubleStar);
                } else {
                    parts.push(Part::Star);
                }
            } else if c.is_control() {
                return Err(format!("`{pattern}` contains a control character"));
            } else {
                lit.push(c);
            }
        }
        if !lit.is_empty() {
            parts.push(Part::Literal(lit));
        }
        if parts.windows(2).any(|w| {
            matches!(
                w,
                [Part::Star | Part::DoubleStar, Part::Star | Part::DoubleStar]
            )
        }) {
            return Err(format!(
                "`{pattern}`: two wildcards in a row are ambiguous; put a literal between them"
            ));
        }
        Ok(Glob {
            source: pattern.to_string(),
            parts,
        })
    }

    /// Number of captures (wildcards).
    #[must_use]
    pub fn captures(&self) -> usize {
        self.parts
            .iter()
            .filter(|p| !matches!(p, Part::Literal(_)))
            .count()
    }

    /// The pattern as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `name` matches; on success `caps` holds the captured parts.
    pub fn matches<'n>(&self, name: &'n str, caps: &mut Vec<&'n str>) -> bool {
        caps.clear();
        match_from(&self.parts, name, caps)
    }

    /// Whether `name` matches (no captures kept).
    #[must_use]
    pub fn is_match(&self, name: &str) -> bool {
        let mut caps = Vec::new();
        self.matches(name, &mut caps)
    }
}

fn match_from<'n>(parts: &[Part], name: &'n str, caps: &mut Vec<&'n str>) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return name.is_empty();
    };
    match first {
        Part::Literal(l) => name
            .strip_prefix(l.as_str())
            .is_some_and(|tail| match_from(rest, tail, caps)),
        Part::Star | Part::DoubleStar => {
            let limit = if *first == Part::Star {
                name.find('.').unwrap_or(name.len())
            } else {
                name.len()
            };
            // Longest match first (greedy), backtracking on failure.
            let mut ends: Vec<usize> = name[..limit].char_indices().map(|(i, _)| i).collect();
            ends.push(limit);
            for &end in ends.iter().rev() {
                caps.push(&name[..end]);
                if match_from(rest, &name[end..], caps) {
                    return true;
                }
                caps.pop();
            }
            false
        }
    }
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.source)
    }
}

/// A string with capture references (`$1`, `${2}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Capture(usize),
}

impl Template {
    /// Compiles `s`; references beyond `captures` are errors.
    pub fn new(s: &str, captures: usize) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'$' {
                let (num, next) = if b.get(i + 1) == Some(&b'{') {
                    match s[i + 2..].find('}') {
                        Some(close) => (&s[i + 2..i + 2 + close], i + 3 + close),
                        None => return Err(format!("`{s}`: unclosed `${{`")),
                    }
                } else {
                    let len = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    (&s[i + 1..i + 1 + len], i + 1 + len)
                };
                let n: usize = num
                    .parse()
                    .map_err(|_| format!("`{s}`: `$` must be followed by a capture number, e.g. $1 (write $$ for a literal $)"))?;
                if n == 0 || n > captures {
                    return Err(format!(
                        "`{s}` uses ${n} but the glob has {captures} capture(s)"
                    ));
                }
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Capture(n - 1));
                i = next;
            } else {
                let ch = s[i..].chars().next().unwrap_or('\u{fffd}');
                text.push(ch);
                i += ch.len_utf8();
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Template { pieces })
    }

    /// Renders with the captures of a match.
    #[must_use]
    pub fn render(&self, caps: &[&str]) -> String {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Capture(i) => out.push_str(caps.get(*i).copied().unwrap_or("")),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(g: &str, name: &str) -> Option<Vec<String>> {
        let g = Glob::new(g).unwrap();
        let mut c = Vec::new();
        g.matches(name, &mut c)
            .then(|| c.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn star_matches_within_one_component_and_double_star_across() {
        assert_eq!(
            caps("api.*.latency", "api.users.latency"),
            Some(vec!["users".into()])
        );
        assert_eq!(caps("api.*.latency", "api.v1.users.latency"), None);
        assert_eq!(
            caps("api.**.latency", "api.v1.users.latency"),
            Some(vec!["v1.users".into()])
        );
        assert_eq!(caps("*", "a.b"), None);
        assert_eq!(caps("**", "a.b"), Some(vec!["a.b".into()]));
        assert_eq!(caps("db.*_ms", "db.query_ms"), Some(vec!["query".into()]));
        assert_eq!(caps("exact.name", "exact.name"), Some(vec![]));
        assert_eq!(caps("exact.name", "exact.names"), None);
        assert_eq!(caps("a.*.*", "a.x.y"), Some(vec!["x".into(), "y".into()]));
    }

    #[test]
    fn bad_globs_and_templates_explain_themselves() {
        assert!(Glob::new("").unwrap_err().contains("\"**\""));
        assert!(Glob::new("a.***").is_err());
        assert!(Glob::new("a.***").is_err());
        assert!(Template::new("x_$2", 1).unwrap_err().contains("1 capture"));
        assert!(Template::new("x_$", 1).is_err());
        assert!(Template::new("x_${1", 1).is_err());
    }

    #[test]
    fn templates_render_captures() {
        let t = Template::new("svc_${1}_$2.total", 2).unwrap();
        assert_eq!(t.render(&["a", "b"]), "svc_a_b.total");
        assert_eq!(Template::new("plain", 0).unwrap().render(&[]), "plain");
    }
}
