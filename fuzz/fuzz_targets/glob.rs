//! glob: any pattern against any name. Compiling never panics; a match
//! takes at most the proven step bound; `may_match` never rules out a
//! match; and on patterns and names small enough for it, the answer and
//! every capture equal the backtracking matcher's (the brute-force model of
//! tests/glob.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rollstat::mapping::Glob;

#[path = "../../tests/reference/glob_backtracking.rs"]
mod model;

fn spans(name: &str, caps: &[&str]) -> Vec<(usize, usize)> {
    caps.iter()
        .map(|c| {
            let start = c.as_ptr() as usize - name.as_ptr() as usize;
            (start, start + c.len())
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (pattern, name) = text.split_once('\n').unwrap_or((text, ""));
    let Ok(glob) = Glob::new(pattern) else {
        return;
    };
    let mut caps = Vec::new();
    let (matched, steps) = glob.matches_counting(name, &mut caps);
    assert!(
        steps <= glob.step_bound(name.len()),
        "{steps} steps over the bound"
    );
    assert_eq!(matched, glob.is_match(name));
    if matched {
        assert!(glob.may_match(name), "may_match ruled out a match");
        assert_eq!(caps.len(), glob.captures());
    }
    let toks = model::tokens(pattern);
    let wilds = toks
        .iter()
        .filter(|t| !matches!(t, model::Tok::Lit(_)))
        .count();
    // The model is exponential: keep it to what it answers in microseconds.
    if wilds <= 5 && name.len() <= 48 {
        let mut want = Vec::new();
        let expected = model::matches(&toks, name, &mut want);
        assert_eq!(matched, expected, "pattern {pattern:?} name {name:?}");
        if matched {
            assert_eq!(spans(name, &caps), spans(name, &want), "captures differ");
        }
    }
});
