//! Mapping rules on statsd names: globs or regular expressions with
//! captures, and templates that use them. Pure functions; the series registry
//! applies them once, when a series is created (and again for live series
//! after a config reload), never per line.
//!
//! Glob syntax (statsd_exporter users will recognise it):
//! * `*` matches any run of characters except `.` (one name component, or part of it);
//! * `**` matches any run of characters, dots included;
//! * every other character matches itself.
//!
//! Each `*` or `**` is a capture, `$1`, `$2`... (or `${1}`) in templates.
//!
//! A [`NameRegex`] is the `regex` crate's syntax, **anchored to the whole
//! name** (`api\.(\w+)` matches `api.users`, not `xapi.users.count`): it is
//! compiled as `^(?:pattern)$`. Its groups are `$1`, `$2`... in templates, and
//! a named group `(?P<route>...)` is also `${route}`. The crate guarantees
//! matching in time linear in the name (no backtracking), so a hostile name
//! cannot make a rule slow. [`Matcher`] is either kind.
//!
//! In templates `$$` is a literal `$`; a group that took no part in the match
//! renders as the empty string.

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

/// A compiled regular expression on statsd names, anchored to the whole name.
#[derive(Clone)]
pub struct NameRegex {
    source: String,
    re: regex::Regex,
}

impl NameRegex {
    /// Compiles `pattern` (the `regex` crate's syntax), anchored at both
    /// ends. The error is the crate's message about `pattern` as written.
    pub fn new(pattern: &str) -> Result<NameRegex, String> {
        if pattern.is_empty() {
            return Err("an empty regex matches no name; use \".+\" to match every name".into());
        }
        // Compiled alone first, so that an error points into the text the
        // user wrote rather than into the anchored form.
        regex::Regex::new(pattern).map_err(|e| e.to_string())?;
        let re = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| e.to_string())?;
        Ok(NameRegex {
            source: pattern.to_string(),
            re,
        })
    }

    /// Number of groups (`$1`..`$n`), named ones included.
    #[must_use]
    pub fn captures(&self) -> usize {
        self.re.captures_len() - 1
    }

    /// The number (1-based) of the group named `name`.
    #[must_use]
    pub fn group_index(&self, name: &str) -> Option<usize> {
        self.re.capture_names().position(|n| n == Some(name))
    }

    /// The pattern as written (not anchored).
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `name` matches as a whole; on success `caps` holds groups 1..n
    /// (`""` for a group that did not take part).
    pub fn matches<'n>(&self, name: &'n str, caps: &mut Vec<&'n str>) -> bool {
        caps.clear();
        let Some(c) = self.re.captures(name) else {
            return false;
        };
        caps.extend(c.iter().skip(1).map(|m| m.map_or("", |m| m.as_str())));
        true
    }
}

impl fmt::Debug for NameRegex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NameRegex({:?})", self.source)
    }
}

/// What a mapping rule matches names with: a glob or an anchored regex.
#[derive(Clone, Debug)]
pub enum Matcher {
    /// `match = "api.*.requests"`.
    Glob(Glob),
    /// `match_regex = "api\\.(\\w+)\\.requests"`.
    Regex(NameRegex),
}

impl Matcher {
    /// Whether `name` matches; on success `caps` holds the captures.
    pub fn matches<'n>(&self, name: &'n str, caps: &mut Vec<&'n str>) -> bool {
        match self {
            Matcher::Glob(g) => g.matches(name, caps),
            Matcher::Regex(r) => r.matches(name, caps),
        }
    }

    /// The pattern as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Matcher::Glob(g) => g.as_str(),
            Matcher::Regex(r) => r.as_str(),
        }
    }

    /// Compiles a template against this matcher's captures (numbered, and
    /// named for a regex).
    pub fn template(&self, s: &str) -> Result<Template, String> {
        match self {
            Matcher::Glob(g) => Template::new(s, g.captures()),
            Matcher::Regex(r) => {
                Template::compile(s, r.captures(), "regex", |name| r.group_index(name))
            }
        }
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
    /// Compiles `s` for a glob with `captures` wildcards; references beyond
    /// them are errors.
    pub fn new(s: &str, captures: usize) -> Result<Template, String> {
        Template::compile(s, captures, "glob", |_| None)
    }

    /// Compiles `s` for a pattern (`what`: "glob" or "regex", for messages)
    /// with `captures` numbered captures; `named` gives the number of a named
    /// capture, for `${name}`.
    pub fn compile(
        s: &str,
        captures: usize,
        what: &str,
        named: impl Fn(&str) -> Option<usize>,
    ) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'$' && b.get(i + 1) == Some(&b'$') {
                text.push('$');
                i += 2;
            } else if b[i] == b'$' {
                let (reference, next) = if b.get(i + 1) == Some(&b'{') {
                    match s[i + 2..].find('}') {
                        Some(close) => (&s[i + 2..i + 2 + close], i + 3 + close),
                        None => return Err(format!("`{s}`: unclosed `${{`")),
                    }
                } else {
                    let len = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    (&s[i + 1..i + 1 + len], i + 1 + len)
                };
                let n = match reference.parse::<usize>() {
                    Ok(n) if n == 0 || n > captures => {
                        return Err(format!(
                            "`{s}` uses ${n} but the {what} has {captures} capture(s)"
                        ))
                    }
                    Ok(n) => n,
                    Err(_) if reference.is_empty() => return Err(format!(
                        "`{s}`: `$` must be followed by a capture number, e.g. $1 (write $$ for a literal $)"
                    )),
                    Err(_) => named(reference).ok_or_else(|| {
                        format!("`{s}` uses ${{{reference}}} but the {what} has no capture named `{reference}`")
                    })?,
                };
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

    fn regex_caps(re: &str, name: &str) -> Option<Vec<String>> {
        let r = NameRegex::new(re).unwrap();
        let mut c = Vec::new();
        r.matches(name, &mut c)
            .then(|| c.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn regexes_match_the_whole_name_and_capture_groups() {
        assert_eq!(
            regex_caps(r"api\.(\w+)\.latency", "api.users.latency"),
            Some(vec!["users".into()])
        );
        // Anchored at both ends: no match inside a longer name.
        assert_eq!(regex_caps(r"api\.(\w+)", "xapi.users"), None);
        assert_eq!(regex_caps(r"api\.(\w+)", "api.users.count"), None);
        assert_eq!(regex_caps(r"api\.\w+|db\.\w+", "api.x"), Some(vec![]));
        // An alternation is anchored as a whole, not only its first branch.
        assert_eq!(regex_caps(r"api\.\w+|db\.\w+", "db.x.y"), None);
        // A group that took no part renders as "".
        assert_eq!(
            regex_caps(r"(a)?b(\d+)", "b12"),
            Some(vec!["".into(), "12".into()])
        );
        // Multibyte names are matched as text.
        assert_eq!(
            regex_caps(r"caf(.)\.(.+)", "caf\u{e9}.\u{65e5}"),
            Some(vec!["\u{e9}".into(), "\u{65e5}".into()])
        );
        // Explicit anchors are harmless.
        assert_eq!(regex_caps(r"^a\.b$", "a.b"), Some(vec![]));
    }

    #[test]
    fn named_and_numbered_regex_groups_feed_templates_like_glob_captures() {
        let m =
            Matcher::Regex(NameRegex::new(r"(?P<svc>[a-z]+)\.(\w+)\.(?<stat>count|time)").unwrap());
        let mut caps = Vec::new();
        assert!(m.matches("checkout.pay.time", &mut caps));
        let t = m.template("${svc}_$2.${stat}").unwrap();
        assert_eq!(t.render(&caps), "checkout_pay.time");
        // ${1} and ${svc} are the same group.
        assert_eq!(
            m.template("${1}-$1-${svc}").unwrap().render(&caps),
            "checkout-checkout-checkout"
        );
        assert_eq!(m.template("cost $$5").unwrap().render(&caps), "cost $5");
        let e = m.template("${nope}").unwrap_err();
        assert!(e.contains("no capture named `nope`"), "{e}");
        let e = m.template("$4").unwrap_err();
        assert!(e.contains("the regex has 3 capture(s)"), "{e}");
        // A glob has no named captures.
        let g = Matcher::Glob(Glob::new("a.*").unwrap());
        assert!(g
            .template("${svc}")
            .unwrap_err()
            .contains("glob has no capture named"));
        assert_eq!(g.template("x_$1").unwrap().render(&["y"]), "x_y");
    }

    #[test]
    fn bad_regexes_keep_the_crate_message_about_the_text_as_written() {
        let e = NameRegex::new("api.(unclosed").unwrap_err();
        assert!(e.contains("unclosed group"), "{e}");
        // The caret diagram shows the user's pattern, not the anchored form.
        assert!(e.contains("api.(unclosed"), "{e}");
        assert!(!e.contains("(?:"), "{e}");
        assert!(NameRegex::new("").unwrap_err().contains("empty regex"));
        assert!(NameRegex::new(r"a\").is_err());
    }

    #[test]
    fn templates_render_captures() {
        let t = Template::new("svc_${1}_$2.total", 2).unwrap();
        assert_eq!(t.render(&["a", "b"]), "svc_a_b.total");
        assert_eq!(Template::new("plain", 0).unwrap().render(&[]), "plain");
    }
}
