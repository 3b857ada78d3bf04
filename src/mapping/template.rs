//! [`Template`]: a string with capture references (`$1`, `${2}`, `${name}`),
//! rendered with the captures of a match.

use super::TemplateError;

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
    /// Compiles `s` for a glob with `captures` wildcards.
    ///
    /// # Errors
    ///
    /// [`TemplateError`]: bad syntax, or a reference beyond the captures.
    pub fn new(s: &str, captures: usize) -> Result<Template, TemplateError> {
        Template::compile(s, captures, "glob", |_| None)
    }

    /// Compiles `s` for a pattern (`what`: "glob" or "regex", for messages)
    /// with `captures` numbered captures; `named` gives the number of a named
    /// capture, for `${name}`.
    ///
    /// # Errors
    ///
    /// [`TemplateError`]: bad syntax, or a capture the pattern lacks.
    pub fn compile(
        s: &str,
        captures: usize,
        what: &'static str,
        named: impl Fn(&str) -> Option<usize>,
    ) -> Result<Template, TemplateError> {
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
                        None => return Err(TemplateError::Unclosed(s.to_string())),
                    }
                } else {
                    let len = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    (&s[i + 1..i + 1 + len], i + 1 + len)
                };
                let n = match reference.parse::<usize>() {
                    Ok(n) if n == 0 || n > captures => {
                        return Err(TemplateError::NoSuchNumber {
                            template: s.to_string(),
                            number: n,
                            pattern: what,
                            captures,
                        })
                    }
                    Ok(n) => n,
                    Err(_) if reference.is_empty() => {
                        return Err(TemplateError::MissingNumber(s.to_string()))
                    }
                    Err(_) => named(reference).ok_or_else(|| TemplateError::NoSuchName {
                        template: s.to_string(),
                        name: reference.to_string(),
                        pattern: what,
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

    #[test]
    fn bad_templates_explain_themselves() {
        assert!(Template::new("x_$2", 1)
            .unwrap_err()
            .to_string()
            .contains("1 capture"));
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
