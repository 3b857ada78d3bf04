//! [`NameRegex`]: the `regex` crate's syntax, anchored to the whole name.

use std::fmt;

use super::RegexError;

/// A compiled regular expression on statsd names, anchored to the whole name.
#[derive(Clone)]
pub struct NameRegex {
    source: String,
    re: regex::Regex,
}

impl NameRegex {
    /// Compiles `pattern` (the `regex` crate's syntax), anchored at both
    /// ends.
    ///
    /// # Errors
    ///
    /// [`RegexError`]: an empty pattern, or the crate's message about
    /// `pattern` as written.
    pub fn new(pattern: &str) -> Result<NameRegex, RegexError> {
        if pattern.is_empty() {
            return Err(RegexError::Empty);
        }
        // Compiled alone first, so that an error points into the text the
        // user wrote rather than into the anchored form.
        regex::Regex::new(pattern)?;
        let re = regex::Regex::new(&format!("^(?:{pattern})$"))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::{captures_of, Matcher};

    fn regex_caps(re: &str, name: &str) -> Option<Vec<String>> {
        captures_of(&Matcher::Regex(NameRegex::new(re).unwrap()), name)
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
    fn bad_regexes_keep_the_crate_message_about_the_text_as_written() {
        let e = NameRegex::new("api.(unclosed").unwrap_err().to_string();
        assert!(e.contains("unclosed group"), "{e}");
        // The caret diagram shows the user's pattern, not the anchored form.
        assert!(e.contains("api.(unclosed"), "{e}");
        assert!(!e.contains("(?:"), "{e}");
        assert!(NameRegex::new("")
            .unwrap_err()
            .to_string()
            .contains("empty regex"));
        assert!(NameRegex::new(r"a\").is_err());
    }
}
