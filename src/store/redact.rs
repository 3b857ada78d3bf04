//! Passwords out of URLs before they are printed: a Redis URL in a log
//! line, a config summary or a client's error message shows `***`.

use std::fmt::Write as _;

/// `s` with the password of a URL replaced by `***`: `redis://user:***@host`,
/// `redis://:***@host`, and the value of a `pass=` or `password=` parameter.
/// Conservative: everything between `://` and the last `@` counts as the
/// credentials, so a broken URL is redacted too (more than needed, never
/// less). Text without `://` only has its parameters redacted.
#[must_use]
pub fn redact_url(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let rest = match s.find("://") {
        Some(i) => {
            out.push_str(&s[..i + 3]);
            let after = &s[i + 3..];
            match after.rfind('@') {
                Some(at) => {
                    let user_info = &after[..at];
                    if let Some(colon) = user_info.find(':') {
                        out.push_str(&user_info[..colon]);
                        out.push_str(":***");
                    } else {
                        out.push_str(user_info);
                    }
                    &after[at..]
                }
                None => after,
            }
        }
        None => s,
    };
    // The parameters that carry a password (`unix://...?pass=`).
    let mut tail = rest;
    while let Some(i) = find_secret_param(tail) {
        let (head, from) = tail.split_at(i);
        out.push_str(head);
        let eq = from.find('=').map_or(from.len(), |e| e + 1);
        out.push_str(&from[..eq]);
        out.push_str("***");
        let end = from[eq..].find(['&', '#']).map_or(from.len(), |e| eq + e);
        tail = &from[end..];
    }
    out.push_str(tail);
    out
}

/// `text` with every URL in it (a run of non-space characters around `://`)
/// passed through [`redact_url`]: for messages that may quote a URL, such as
/// a Redis client's error.
#[must_use]
pub fn redact_urls_in(text: &str) -> String {
    let is_scheme = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.');
    let ends = |c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | '<' | '>');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let start = rest[..i]
            .char_indices()
            .rev()
            .take_while(|(_, c)| is_scheme(*c))
            .last()
            .map_or(i, |(j, _)| j);
        let end = rest[i..].find(ends).map_or(rest.len(), |e| i + e);
        out.push_str(&rest[..start]);
        let _ = write!(out, "{}", redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Where the next `pass=` or `password=` parameter starts in `s` (after a
/// `?` or `&`).
fn find_secret_param(s: &str) -> Option<usize> {
    let mut best: Option<usize> = None;
    for name in ["pass=", "password="] {
        let mut from = 0;
        while let Some(i) = s[from..].find(name) {
            let at = from + i;
            if at > 0 && matches!(s.as_bytes()[at - 1], b'?' | b'&') {
                best = Some(best.map_or(at, |b| b.min(at)));
                break;
            }
            from = at + name.len();
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_printed_without_their_password() {
        for (s, want) in [
            ("redis://user:pa55@h:6379/0", "redis://user:***@h:6379/0"),
            ("rediss://:pa55@h:6380", "rediss://:***@h:6380"),
            ("redis://user@h", "redis://user@h"),
            ("redis://h:6379", "redis://h:6379"),
            ("redis://u:p@ss@h", "redis://u:***@h"),
            (
                "unix:///s?db=1&pass=pa55&user=u",
                "unix:///s?db=1&pass=***&user=u",
            ),
            ("unix:///s?pass=pa55", "unix:///s?pass=***"),
            ("redis://h/?password=pa55#x", "redis://h/?password=***#x"),
            ("not a url", "not a url"),
            ("redis://h/?bypass=1", "redis://h/?bypass=1"),
        ] {
            assert_eq!(redact_url(s), want, "{s}");
        }
    }

    #[test]
    fn urls_inside_a_message_are_redacted() {
        let m =
            "failed to connect to `redis://app:pa55@10.0.0.1:6379` and redis://:x@h (os error 111)";
        assert_eq!(
            redact_urls_in(m),
            "failed to connect to `redis://app:***@10.0.0.1:6379` and redis://:***@h (os error 111)"
        );
        assert_eq!(redact_urls_in("no url here"), "no url here");
        assert_eq!(redact_urls_in("://odd"), "://odd");
    }
}
