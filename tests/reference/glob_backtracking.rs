//! The glob matcher rollstat used before the linear one: each wildcard tries
//! every end, longest first, backtracking on failure. It states the
//! semantics directly (greedy captures included) and is exponential on
//! patterns like `*a*a*a*a*b`, which is why it was replaced. Shared by the
//! property test (`tests/glob.rs`, as the brute-force model) and the bench
//! (`benches/glob.rs`, as the "before").

/// One token of a glob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// Text matched as is.
    Lit(String),
    /// `*`: any run without a `.`.
    Star,
    /// `**`: any run.
    DoubleStar,
}

/// The tokens of `pattern` (no validation: the linear matcher's job).
#[allow(dead_code)] // the property test builds its tokens itself
pub fn tokens(pattern: &str) -> Vec<Tok> {
    let mut toks = Vec::new();
    let mut lit = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '*' {
            if !lit.is_empty() {
                toks.push(Tok::Lit(std::mem::take(&mut lit)));
            }
            if chars.peek() == Some(&'*') {
                chars.next();
                toks.push(Tok::DoubleStar);
            } else {
                toks.push(Tok::Star);
            }
        } else {
            lit.push(c);
        }
    }
    if !lit.is_empty() {
        toks.push(Tok::Lit(lit));
    }
    toks
}

/// Whether `name` matches `toks`; on success `caps` holds the captures.
pub fn matches<'n>(toks: &[Tok], name: &'n str, caps: &mut Vec<&'n str>) -> bool {
    let Some((first, rest)) = toks.split_first() else {
        return name.is_empty();
    };
    match first {
        Tok::Lit(l) => name
            .strip_prefix(l.as_str())
            .is_some_and(|tail| matches(rest, tail, caps)),
        Tok::Star | Tok::DoubleStar => {
            let limit = if *first == Tok::Star {
                name.find('.').unwrap_or(name.len())
            } else {
                name.len()
            };
            // Longest first (greedy), backtracking on failure.
            let mut ends: Vec<usize> = name[..limit].char_indices().map(|(i, _)| i).collect();
            ends.push(limit);
            for &end in ends.iter().rev() {
                caps.push(&name[..end]);
                if matches(rest, &name[end..], caps) {
                    return true;
                }
                caps.pop();
            }
            false
        }
    }
}
