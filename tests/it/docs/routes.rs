//! docs/http-api.md's route table names every path the HTTP router
//! serves, and nothing else: the paths of the `.route("...")` calls in
//! src/ (the router's and the live page's), outside test code, against the
//! paths in the table's first column.

use std::collections::BTreeSet;

use super::markdown::{cells, prose, ticked, Page};
use super::source::code_outside_tests;

const PAGE: &str = "docs/http-api.md";

#[test]
fn http_api_lists_every_route() {
    let served = routed_paths();
    let documented = documented_paths();
    assert!(
        served.len() >= 15,
        "only {} routes found in src/: {served:?}",
        served.len()
    );
    let missing: Vec<_> = served.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&served).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{PAGE}'s route table and the router disagree: served but not listed {missing:?}; listed but not served {extra:?}"
    );
}

/// The first argument of every `.route(` call in src/, outside test code.
fn routed_paths() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, code) in code_outside_tests() {
        for call in code.split(".route(").skip(1) {
            if let Some(rest) = call.trim_start().strip_prefix('"') {
                out.insert(rest[..rest.find('"').unwrap()].to_string());
            }
        }
    }
    out
}

/// The paths in the route table's first column: `` `GET /a?x=1` `` gives
/// `/a`.
fn documented_paths() -> BTreeSet<String> {
    let page = Page::read(PAGE);
    let lines = prose(&page.text);
    let head = lines
        .iter()
        .position(|l| l.starts_with("| route |"))
        .expect("the route table");
    let mut out = BTreeSet::new();
    for row in lines[head + 2..].iter().take_while(|l| l.starts_with('|')) {
        for span in ticked(&cells(row)[0]) {
            for word in span.split_whitespace().filter(|w| w.starts_with('/')) {
                out.insert(word.split('?').next().unwrap().to_string());
            }
        }
    }
    out
}
