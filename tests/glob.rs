//! Glob matching: the linear-time matcher against a brute-force reference,
//! and its step count against the proven bound.
//!
//! The reference is the recursive backtracking matcher rollstat used before
//! (each wildcard tries every end, longest first): it states the semantics
//! directly, greedy captures included, and is exponential on patterns like
//! `*a*a*a*a*b`, which is why it was replaced. Step counts stand in for time:
//! no test here measures a clock.

use proptest::prelude::*;
use rollstat::mapping::{Glob, MAX_GLOB_WILDCARDS};

#[path = "reference/glob_backtracking.rs"]
mod model;
use model::Tok;

fn source(toks: &[Tok]) -> String {
    toks.iter()
        .map(|t| match t {
            Tok::Lit(l) => l.as_str(),
            Tok::Star => "*",
            Tok::DoubleStar => "**",
        })
        .collect()
}

/// The old matcher: try every end of each wildcard, longest first.
fn reference<'n>(toks: &[Tok], name: &'n str, caps: &mut Vec<&'n str>) -> bool {
    model::matches(toks, name, caps)
}

/// Where each capture sits in `name`, as byte ranges: equal captures at
/// different places are different answers.
fn spans(name: &str, caps: &[&str]) -> Vec<(usize, usize)> {
    caps.iter()
        .map(|c| {
            let start = c.as_ptr() as usize - name.as_ptr() as usize;
            (start, start + c.len())
        })
        .collect()
}

const ALPHABET: [char; 5] = ['a', 'b', '.', '\u{e9}', '\u{65e5}'];

fn text(len: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(&ALPHABET[..]), len)
        .prop_map(|cs| cs.into_iter().collect())
}

/// A valid glob: an optional literal, then up to 6 wildcards each followed
/// by a literal (the last one's optional).
fn glob() -> impl Strategy<Value = Vec<Tok>> {
    (
        prop::option::of(text(1..4)),
        prop::collection::vec((any::<bool>(), text(1..4)), 0..=6),
        any::<bool>(),
    )
        .prop_map(|(head, wilds, ends_with_wildcard)| {
            let mut toks: Vec<Tok> = head.into_iter().map(Tok::Lit).collect();
            let count = wilds.len();
            for (i, (double, lit)) in wilds.into_iter().enumerate() {
                toks.push(if double { Tok::DoubleStar } else { Tok::Star });
                if i + 1 < count || !ends_with_wildcard {
                    toks.push(Tok::Lit(lit));
                }
            }
            if toks.is_empty() {
                toks.push(Tok::Lit("a".into()));
            }
            toks
        })
}

/// A glob and a name: either random, or the glob filled in (a `*` with a
/// dot-free run, a `**` with anything) and then maybe one character changed,
/// so that matches and near misses are both common.
fn case() -> impl Strategy<Value = (Vec<Tok>, String)> {
    glob().prop_flat_map(|toks| {
        let fills = prop::collection::vec(text(0..5), toks.len());
        let edit = prop::option::of((any::<prop::sample::Index>(), text(0..2)));
        let filled = (fills, edit).prop_map({
            let toks = toks.clone();
            move |(fills, edit)| {
                let mut name = String::new();
                for (t, fill) in toks.iter().zip(fills) {
                    match t {
                        Tok::Lit(l) => name.push_str(l),
                        Tok::Star => name.extend(fill.chars().filter(|&c| c != '.')),
                        Tok::DoubleStar => name.push_str(&fill),
                    }
                }
                if let Some((at, with)) = edit {
                    let mut cs: Vec<char> = name.chars().collect();
                    if cs.is_empty() {
                        cs.extend(with.chars());
                    } else {
                        let i = at.index(cs.len());
                        cs.splice(i..=i, with.chars());
                    }
                    name = cs.into_iter().collect();
                }
                name
            }
        });
        let name = prop_oneof![1 => text(0..40), 3 => filled];
        (Just(toks), name)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn linear_matcher_agrees_with_backtracking_reference((toks, name) in case()) {
        let pattern = source(&toks);
        let glob = Glob::new(&pattern).unwrap();
        prop_assert_eq!(glob.captures(), toks.iter().filter(|t| !matches!(t, Tok::Lit(_))).count());

        let mut want = Vec::new();
        let want_match = reference(&toks, &name, &mut want);

        let mut got = Vec::new();
        let (got_match, steps) = glob.matches_counting(&name, &mut got);
        prop_assert_eq!(got_match, want_match, "`{}` on {:?}", pattern, name);
        prop_assert_eq!(spans(&name, &got), spans(&name, &want), "`{}` on {:?}", pattern, name);
        prop_assert!(steps <= glob.step_bound(name.len()), "{} > {}", steps, glob.step_bound(name.len()));
        for (start, end) in spans(&name, &got) {
            prop_assert!(name.is_char_boundary(start) && name.is_char_boundary(end));
        }

        let (is_match, steps) = glob.is_match_counting(&name);
        prop_assert_eq!(is_match, want_match);
        prop_assert!(steps <= glob.step_bound(name.len()));
        prop_assert_eq!(glob.is_match(&name), want_match);
        // The cheap pre-check never rejects a name that matches.
        prop_assert!(!want_match || glob.may_match(&name), "`{}` on {:?}", pattern, name);
        let mut plain = Vec::new();
        prop_assert_eq!(glob.matches(&name, &mut plain), want_match);
        prop_assert_eq!(plain, got);
    }
}

/// Steps to match `pattern` against each of `names`, checked against the
/// bound, with the answers.
fn steps(pattern: &str, names: &[String]) -> Vec<(bool, u64)> {
    let glob = Glob::new(pattern).unwrap();
    names
        .iter()
        .map(|name| {
            let mut caps = Vec::new();
            let (ok, steps) = glob.matches_counting(name, &mut caps);
            assert!(
                steps <= glob.step_bound(name.len()),
                "`{pattern}` on {} bytes: {steps} steps > bound {}",
                name.len(),
                glob.step_bound(name.len())
            );
            let (is_match, is_match_steps) = glob.is_match_counting(name);
            assert_eq!(is_match, ok);
            assert!(is_match_steps <= steps);
            (ok, steps)
        })
        .collect()
}

const LENGTHS: [usize; 4] = [200, 2_000, 20_000, 65_536];

#[test]
fn pathological_globs_take_steps_linear_in_the_name() {
    let pathological = "*a*a*a*a*a*a*a*a*b";
    // All 'a's: the suffix `b` rejects the name at once.
    let all_a: Vec<String> = LENGTHS.iter().map(|&n| "a".repeat(n)).collect();
    let s = steps(pathological, &all_a);
    assert!(s.iter().all(|&(ok, steps)| !ok && steps <= 3), "{s:?}");

    // The backtracking matcher's worst case: the suffix matches but the
    // middle cannot (no `*` crosses the dot), so every split was tried.
    let dotted: Vec<String> = LENGTHS
        .iter()
        .map(|&n| format!("{}.b", "a".repeat(n - 2)))
        .collect();
    // A match: the greedy walk runs over full rows.
    let matching: Vec<String> = LENGTHS
        .iter()
        .map(|&n| format!("{}b", "a".repeat(n - 1)))
        .collect();
    let double = "*a*a*a*a*a*a*a*a**b";
    for (pattern, names, want) in [
        (pathological, &dotted, false),
        (pathological, &matching, true),
        (double, &dotted, true),
        (double, &matching, true),
    ] {
        let s = steps(pattern, names);
        assert!(s.iter().all(|&(ok, _)| ok == want), "`{pattern}`: {s:?}");
        // Ten times the name, about ten times the steps (not a hundred).
        let ratio = s[2].1 as f64 / s[1].1 as f64;
        assert!((9.0..=10.5).contains(&ratio), "`{pattern}`: {s:?}");
        let ratio = s[3].1 as f64 / s[2].1 as f64;
        assert!((3.0..=3.5).contains(&ratio), "`{pattern}`: {s:?}");
    }
}

#[test]
fn many_wildcards_on_a_long_name_stay_within_the_bound() {
    let pattern = vec!["*"; MAX_GLOB_WILDCARDS].join("a");
    let glob = Glob::new(&pattern).unwrap();
    let name = "a".repeat(65_536);
    let mut caps = Vec::new();
    let (ok, steps) = glob.matches_counting(&name, &mut caps);
    assert!(ok);
    assert_eq!(caps.len(), MAX_GLOB_WILDCARDS);
    assert_eq!(caps[0].len(), 65_536 - (MAX_GLOB_WILDCARDS - 1));
    assert!(steps <= glob.step_bound(name.len()), "{steps}");
}
