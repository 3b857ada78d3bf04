//! What a YAML file may cost before any tree is built: a pass over the
//! parser's events (no tree, no recursion) that refuses a file nested
//! deeper than [`MAX_DEPTH`] or whose aliases would expand to more than
//! [`MAX_ALIAS_NODES`] nodes.
//!
//! Every node counts, mapping keys included: an anchor's size is the number
//! of nodes under it once its own aliases are expanded, and each alias adds
//! that size again. So `a1: &a1 { ? [*a0, *a0, ...] : 1 }` (aliases inside
//! a complex key) is charged like any list, and a billion-laughs file is
//! refused after reading its few hundred bytes once, in time linear in
//! them. An alias also nests: its anchor's depth adds to where it stands.
//!
//! The files rollstat reads in YAML (statsd_exporter mapping files,
//! exporter-toolkit web configs) nest a handful of levels and rarely use
//! anchors at all; both caps are far above what such a file needs.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScanError};

/// The deepest nesting of lists and mappings a YAML file may have (the
/// statsd_exporter mapping files and web configs rollstat reads need 5).
pub const MAX_DEPTH: usize = 64;

/// How many nodes all the aliases of a YAML file may expand to, in total.
pub const MAX_ALIAS_NODES: u64 = 100_000;

/// Why a YAML file is refused before it is read into a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The file's own syntax is wrong (the parser's message).
    Syntax { line: usize, message: String },
    /// Lists and mappings nest deeper than [`MAX_DEPTH`].
    TooDeep { line: usize },
    /// Aliases expand to more than [`MAX_ALIAS_NODES`] nodes.
    TooManyAliasNodes { line: usize },
}

impl Refusal {
    /// The 1-based line the refusal points at.
    #[must_use]
    pub fn line(&self) -> usize {
        match self {
            Refusal::Syntax { line, .. }
            | Refusal::TooDeep { line }
            | Refusal::TooManyAliasNodes { line } => *line,
        }
    }

    /// The stable reason a refused reload is counted under.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Syntax { .. } => "syntax",
            Refusal::TooDeep { .. } => "too_deep",
            Refusal::TooManyAliasNodes { .. } => "alias_budget",
        }
    }

    /// What is wrong and what to do.
    #[must_use]
    pub fn message(&self) -> String {
        match self {
            Refusal::Syntax { message, .. } => message.clone(),
            Refusal::TooDeep { .. } => format!(
                "lists and mappings nest deeper than {MAX_DEPTH} levels here (counting what aliases bring in); rollstat refuses the file before reading it"
            ),
            Refusal::TooManyAliasNodes { .. } => format!(
                "aliases (`*name`) expand to more than {MAX_ALIAS_NODES} nodes by here (keys included); write the values out or use fewer nested aliases"
            ),
        }
    }
}

/// An open list or mapping: its anchor, its size so far (itself and every
/// node under it, aliases expanded) and its depth below itself.
struct Open {
    anchor: usize,
    nodes: u64,
    below: usize,
}

/// A finished node: its expanded size, and how many levels of lists and
/// mappings it is (0 for a scalar).
#[derive(Clone, Copy)]
struct Anchored {
    nodes: u64,
    levels: usize,
}

/// Walks `text`'s events once: `Ok` when the file is within both caps.
///
/// # Errors
///
/// [`Refusal`]: the first syntax error, or where a cap is crossed.
pub fn check(text: &str) -> Result<(), Refusal> {
    let mut open: Vec<Open> = Vec::new();
    let mut anchors: HashMap<usize, Anchored> = HashMap::new();
    let mut expanded: u64 = 0;
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(syntax)?;
        let line = span.start.line();
        let done = match event {
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if open.len() >= MAX_DEPTH {
                    return Err(Refusal::TooDeep { line });
                }
                open.push(Open {
                    anchor,
                    nodes: 1,
                    below: 0,
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match open.pop() {
                Some(o) => {
                    let a = Anchored {
                        nodes: o.nodes,
                        levels: 1 + o.below,
                    };
                    if o.anchor > 0 {
                        anchors.insert(o.anchor, a);
                    }
                    a
                }
                None => continue,
            },
            Event::Scalar(_, _, anchor, _) => {
                let a = Anchored {
                    nodes: 1,
                    levels: 0,
                };
                if anchor > 0 {
                    anchors.insert(anchor, a);
                }
                a
            }
            Event::Alias(id) => {
                let a = anchors.get(&id).copied().unwrap_or(Anchored {
                    nodes: 1,
                    levels: 0,
                });
                expanded = expanded.saturating_add(a.nodes);
                if expanded > MAX_ALIAS_NODES {
                    return Err(Refusal::TooManyAliasNodes { line });
                }
                if open.len() + a.levels > MAX_DEPTH {
                    return Err(Refusal::TooDeep { line });
                }
                a
            }
            _ => continue,
        };
        if let Some(parent) = open.last_mut() {
            parent.nodes = parent.nodes.saturating_add(done.nodes);
            parent.below = parent.below.max(done.levels);
        }
    }
    Ok(())
}

fn syntax(e: ScanError) -> Refusal {
    Refusal::Syntax {
        line: e.marker().line(),
        message: e.info().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested_lists(levels: usize) -> String {
        format!("mappings:\n  {}x\n", "- ".repeat(levels))
    }

    /// `a0` a list of ten strings, then each `a{i}` a mapping whose one key
    /// is a list of ten aliases of `a{i-1}`: the complex-key alias bomb.
    fn key_bomb(levels: usize) -> String {
        let mut s = format!("a0: &a0 [{}]\n", ["\"x\""; 10].join(", "));
        for i in 1..=levels {
            let prev = format!("*a{}", i - 1);
            s += &format!("a{i}: &a{i} {{ ? [{}] : 1 }}\n", vec![prev; 10].join(", "));
        }
        s
    }

    #[test]
    fn a_file_of_ordinary_depth_and_no_aliases_passes() {
        let text = "mappings:\n- match: a.*.b\n  name: x\n  labels:\n    k: $1\n";
        assert_eq!(check(text), Ok(()));
    }

    #[test]
    fn nesting_up_to_the_cap_passes_and_one_more_level_is_refused() {
        // `mappings:` is one mapping, each `- ` one list.
        assert_eq!(check(&nested_lists(MAX_DEPTH - 1)), Ok(()));
        assert_eq!(
            check(&nested_lists(MAX_DEPTH)),
            Err(Refusal::TooDeep { line: 2 })
        );
    }

    #[test]
    fn twenty_thousand_levels_are_refused_without_recursion() {
        assert!(matches!(
            check(&nested_lists(20_000)),
            Err(Refusal::TooDeep { .. })
        ));
        // Flow lists: the scanner stops at 255 levels itself; below that,
        // the cap does.
        let flow = |n| format!("a: {}{}\n", "[".repeat(n), "]".repeat(n));
        let e = check(&flow(200));
        assert!(matches!(e, Err(Refusal::TooDeep { .. })), "{e:?}");
        assert!(check(&flow(20_000)).is_err());
    }

    #[test]
    fn aliases_inside_mapping_keys_are_charged() {
        // 3 levels: about 12,600 nodes through aliases, fine; 4: 126,000;
        // 7 (483 bytes): 10^7 strings, refused after reading it once.
        assert_eq!(check(&key_bomb(3)), Ok(()));
        assert!(matches!(
            check(&key_bomb(4)),
            Err(Refusal::TooManyAliasNodes { .. })
        ));
        assert!(matches!(
            check(&key_bomb(7)),
            Err(Refusal::TooManyAliasNodes { .. })
        ));
    }

    #[test]
    fn the_classic_billion_laughs_is_refused() {
        let mut s = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for (i, c) in ('b'..='i').enumerate() {
            let prev = char::from(b'a' + u8::try_from(i).unwrap());
            s += &format!("{c}: &{c} [{}]\n", vec![format!("*{prev}"); 9].join(","));
        }
        assert!(matches!(check(&s), Err(Refusal::TooManyAliasNodes { .. })));
    }

    #[test]
    fn an_alias_of_a_deep_anchor_counts_its_depth_where_it_stands() {
        // A 40-deep anchor, used 30 levels down: 70 in all.
        let deep = format!("{}1{}", "[".repeat(40), "]".repeat(40));
        let text = format!("a: &d {deep}\nb: {}*d{}\n", "[".repeat(30), "]".repeat(30));
        assert!(matches!(check(&text), Err(Refusal::TooDeep { line: 2 })));
        let text = format!("a: &d {deep}\nb: [[*d]]\n");
        assert_eq!(check(&text), Ok(()));
    }

    #[test]
    fn a_syntax_error_is_named_with_its_line() {
        let e = check("a: 1\nb: [unclosed\n").unwrap_err();
        assert!(matches!(e, Refusal::Syntax { .. }), "{e:?}");
        assert!(e.line() >= 2, "{e:?}");
    }

    #[test]
    fn an_anchor_used_often_within_the_budget_passes() {
        let mut s = String::from("base: &b {k: v, j: w}\nlist:\n");
        for _ in 0..1000 {
            s += "- *b\n";
        }
        assert_eq!(check(&s), Ok(()));
    }
}
