//! How rollstat shows an error to a person: its message, then each cause
//! under it, once.
//!
//! Every boundary has its own `thiserror` enum whose message says what
//! failed and what to do, and which keeps the lower error as its
//! [`source`](std::error::Error::source) rather than pasting its text in.
//! [`Causes`] walks that chain where it is shown: `rollstat` on stderr
//! (`error: ...`), the reload log and `POST /-/reload`'s answer.

use std::error::Error;
use std::fmt;

/// Shows an error and its chain of causes, one per line:
///
/// ```text
/// cannot build the breakers and limits of the config
///   caused by: limit `api` ([[limits]]) cannot be built from its `rules`; fix the rule named below
///   caused by: a rate limit must admit at least 1 request per window; got max = 0 (...)
/// ```
///
/// A cause whose text its parent's message already quotes (`...: {source}`,
/// as some errors of other crates do) is not repeated.
#[derive(Clone, Copy)]
pub struct Causes<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Causes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = self.0.to_string();
        f.write_str(&shown)?;
        let mut next = self.0.source();
        while let Some(cause) = next {
            let text = cause.to_string();
            if !shown.contains(&text) {
                write!(f, "\n  caused by: {text}")?;
            }
            shown = text;
            next = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot start: {0}")]
    struct Quotes(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("the daemon stopped")]
    struct Top(#[source] Quotes);

    #[test]
    fn each_cause_gets_its_own_line_and_a_quoted_one_is_not_repeated() {
        let io = || std::io::Error::other("port in use");
        let e = Top(Quotes(io()));
        assert_eq!(
            Causes(&e).to_string(),
            "the daemon stopped\n  caused by: cannot start: port in use"
        );
        #[derive(Debug, thiserror::Error)]
        #[error("cannot bind")]
        struct Plain(#[source] std::io::Error);
        assert_eq!(
            Causes(&Plain(io())).to_string(),
            "cannot bind\n  caused by: port in use"
        );
        assert_eq!(Causes(&io()).to_string(), "port in use");
    }
}
