//! docs/operations.md lists every family the daemon publishes about itself
//! (everything on /metrics but the families of statsd series), each with
//! its type and label names.
//!
//! A real daemon runs the sample config plus a `[redis]` nobody listens on
//! (the store families appear, the store down), a `[[relay]]` (the relay
//! families) and a shared mapping rule (the fleet's); no statsd line is
//! sent, so every family on its /metrics is one of rollstat's own. The test
//! compares, both ways, that scrape with the tables between
//! `<!-- self-metrics:start -->` and `<!-- self-metrics:end -->`. A
//! documented family that scrape cannot show (counted only after a Redis
//! call succeeds, or at stop) must be named in the code instead: a
//! `"rollstat_..."` literal outside test code, and every such literal must
//! have a row. The HTTP API page's error table names exactly the
//! refusal reasons on /metrics.

use std::collections::{BTreeMap, BTreeSet};

use super::markdown::{cells, ticked, Page};
use super::source::code_outside_tests;
use crate::support::{free_port, sample_config_on_port_0, Daemon};

const PAGE: &str = "docs/operations.md";

/// A family: its type and label names (`le` and `quantile` left out).
type Families = BTreeMap<String, (String, BTreeSet<String>)>;

#[test]
fn operations_lists_every_self_metric() {
    let config = format!(
        "{}\n[redis]\nurl = \"redis://127.0.0.1:{}\"\n\n[[relay]]\naddress = \"127.0.0.1:9\"\n\n[[mappings]]\nmatch = \"shared.**\"\nshared = true\n\n[rls]\ngrpc = \"127.0.0.1:0\"\n\n[[outputs]]\nkind = \"remote_write\"\nurl = \"http://127.0.0.1:9/api/v1/write\"\n",
        sample_config_on_port_0(),
        free_port()
    );
    let d = Daemon::start_with(&config);
    let r = d.get("/metrics", &[]);
    assert_eq!(r.status, 200, "GET /metrics: {}", r.text());
    let scraped = families(&r.text());
    let documented = documented();
    let declared = declared_in_code();
    let mut bad = Vec::new();
    for (name, (ty, labels)) in &scraped {
        match documented.get(name) {
            None => bad.push(format!("`{name}` ({ty}, labels {labels:?}) is on /metrics but has no row")),
            Some((dty, dl)) if dty != ty || dl != labels => bad.push(format!(
                "`{name}`: /metrics has it as {ty} with labels {labels:?}, its row says {dty} with {dl:?}"
            )),
            Some(_) => {}
        }
    }
    for name in documented.keys() {
        if !scraped.contains_key(name) && !declared.contains(name) {
            bad.push(format!(
                "`{name}` has a row, but is neither on /metrics nor named in src/"
            ));
        }
    }
    for name in &declared {
        if !documented.contains_key(name) {
            bad.push(format!("`{name}` is named in src/ but has no row"));
        }
    }
    bad.extend(refusal_reasons(&r.text()));
    assert!(
        scraped.len() > 50,
        "only {} families scraped",
        scraped.len()
    );
    assert!(
        bad.is_empty(),
        "the docs and the daemon disagree:\n{}",
        bad.join("\n")
    );
}

/// The families of a text 0.0.4 scrape.
fn families(text: &str) -> Families {
    let mut out = Families::new();
    let mut current = String::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap();
            current = name.to_string();
            out.insert(current.clone(), (ty.to_string(), BTreeSet::new()));
        } else if !l.starts_with('#') && !l.is_empty() {
            let labels = out.get_mut(&current).map(|f| &mut f.1).unwrap();
            if let Some((_, rest)) = l.split_once('{') {
                labels.extend(label_names(rest));
            }
        }
    }
    out.retain(|n, _| {
        !n.starts_with("rollstat_window_") && !n.starts_with("rollstat_fleet_window_")
    });
    out
}

/// The label names of `a="x",b="y\"z"} 1`.
fn label_names(rest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut s = rest;
    while let Some((name, after)) = s.split_once("=\"") {
        let name = name.trim_start_matches(',').trim();
        if name != "le" && name != "quantile" {
            names.push(name.to_string());
        }
        let mut end = 0;
        let bytes = after.as_bytes();
        while end < bytes.len() && bytes[end] != b'"' {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        s = &after[(end + 1).min(after.len())..];
        if s.starts_with('}') {
            break;
        }
    }
    names
}

/// The rows of the self-metrics tables: family -> (type, label names).
fn documented() -> Families {
    let page = Page::read(PAGE);
    let start = page
        .text
        .find("<!-- self-metrics:start -->")
        .expect("start marker");
    let end = page
        .text
        .find("<!-- self-metrics:end -->")
        .expect("end marker");
    let mut out = Families::new();
    for l in page.text[start..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
    {
        let c = cells(l);
        let name = ticked(&c[0]).remove(0);
        let labels = ticked(&c[2]).into_iter().collect();
        let prev = out.insert(name.clone(), (c[1].clone(), labels));
        assert!(prev.is_none(), "{PAGE}: `{name}` has two rows");
    }
    out
}

/// Every `"rollstat_..."` family name literal in src/ outside test code,
/// but the series families (`rollstat_window_*`, `rollstat_fleet_window_*`).
fn declared_in_code() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, code) in code_outside_tests() {
        for piece in code.split("\"rollstat_").skip(1) {
            let name: String = piece
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            let closed = piece[name.len()..].starts_with('"');
            let series = name.starts_with("window_") || name.starts_with("fleet_window_");
            if closed && !series && !name.is_empty() && !name.ends_with('_') {
                out.insert(format!("rollstat_{name}"));
            }
        }
    }
    out
}

/// docs/http-api.md's error table names exactly the reasons of
/// `rollstat_http_requests_refused_total` (all present at 0).
fn refusal_reasons(scrape: &str) -> Vec<String> {
    const FAMILY: &str = "rollstat_http_requests_refused_total{reason=\"";
    let served: BTreeSet<String> = scrape
        .lines()
        .filter_map(|l| l.strip_prefix(FAMILY)?.split('"').next())
        .map(str::to_string)
        .collect();
    let page = Page::read("docs/http-api.md");
    let documented: BTreeSet<String> = page
        .text
        .lines()
        .skip_while(|l| !l.starts_with("| status | reason |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| ticked(&cells(l)[1]).first().cloned())
        .collect();
    let mut bad = Vec::new();
    for r in served.difference(&documented) {
        bad.push(format!(
            "docs/http-api.md: refusal reason `{r}` is on /metrics but not in the error table"
        ));
    }
    for r in documented.difference(&served) {
        bad.push(format!(
            "docs/http-api.md: refusal reason `{r}` is in the error table but not on /metrics"
        ));
    }
    if served.is_empty() {
        bad.push("no rollstat_http_requests_refused_total on /metrics".into());
    }
    bad
}
