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
//! A [`Glob`] is matched in time linear in the name's length (no
//! backtracking; [`Glob`] describes the algorithm and
//! [`Glob::step_bound`] its bound), and is at most [`MAX_GLOB_BYTES`] long with at most
//! [`MAX_GLOB_WILDCARDS`] wildcards, so neither a hostile name nor a hostile
//! `?match=` pattern can make matching slow.
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
//!
//! # Layout
//!
//! * `glob.rs`: [`Glob`], its validation and its linear-time matcher;
//! * `regex.rs`: [`NameRegex`];
//! * `template.rs`: [`Template`];
//! * `error.rs`: why a glob, regex or template is refused ([`GlobError`],
//!   [`RegexError`], [`TemplateError`]);
//! * this file: [`Matcher`], either kind of pattern, as a mapping rule holds it.

mod error;
mod glob;
mod regex;
mod template;

pub use self::error::{GlobError, RegexError, TemplateError};
pub use self::glob::{Glob, MAX_GLOB_BYTES, MAX_GLOB_WILDCARDS};
pub use self::regex::NameRegex;
pub use self::template::Template;

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
    ///
    /// # Errors
    ///
    /// [`TemplateError`]: bad syntax, or a capture this matcher lacks.
    pub fn template(&self, s: &str) -> Result<Template, TemplateError> {
        match self {
            Matcher::Glob(g) => Template::new(s, g.captures()),
            Matcher::Regex(r) => {
                Template::compile(s, r.captures(), "regex", |name| r.group_index(name))
            }
        }
    }
}

/// The captures `m` finds in `name`, owned; `None` if it does not match.
#[cfg(test)]
fn captures_of(m: &Matcher, name: &str) -> Option<Vec<String>> {
    let mut c = Vec::new();
    m.matches(name, &mut c)
        .then(|| c.iter().map(|s| s.to_string()).collect())
}

#[cfg(test)]
mod tests;
