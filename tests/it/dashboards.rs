//! The Grafana dashboards in `dashboards/` are what `generate.py` writes,
//! are importable (datasource as a variable, no fixed UID), every panel's
//! PromQL passes `promtool check rules`, and every query returns data from a
//! real Prometheus scraping a real rollstat under a steady load (every
//! statsd type, a breaker that trips, a limit being hit).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{
    repo, require_tool, run, Daemon, Load, Prometheus, TempDir, LOAD_CONFIG, LOAD_METRICS,
};

const DASHBOARDS: [&str; 4] = [
    "overview.json",
    "explorer.json",
    "breakers.json",
    "limits.json",
];

/// One PromQL expression found in a dashboard.
#[derive(Debug, Clone)]
struct Query {
    /// `overview.json / Lines accepted by transport / A`.
    at: String,
    /// As written, with Grafana variables.
    expr: String,
    /// For `label_values(sel, label)` variable queries: the label.
    label: Option<String>,
}

fn load_dashboard(name: &str) -> Value {
    let path = repo().join("dashboards").join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"))
}

/// Runs `cmd` to completion within 30 s, returning (success, stdout + stderr).
fn run_30s(cmd: &mut Command) -> (bool, String) {
    let out = run(cmd, b"", Duration::from_secs(30));
    (out.status.success(), out.stdout + &out.stderr)
}

/// `$name` and `${name}` references in `s`.
fn variables_in(s: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        rest = &rest[i + 1..];
        let name: String = if let Some(r) = rest.strip_prefix('{') {
            r.chars().take_while(|c| *c != '}' && *c != ':').collect()
        } else {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        };
        out.insert(name);
    }
    out
}

/// Every problem with one dashboard's structure, and its queries.
fn inspect(name: &str, d: &Value) -> (Vec<String>, Vec<Query>) {
    let mut problems = Vec::new();
    let mut queries = Vec::new();
    for key in ["title", "uid"] {
        if d[key].as_str().is_none_or(str::is_empty) {
            problems.push(format!("{name}: no `{key}`"));
        }
    }
    if d["schemaVersion"].as_u64().unwrap_or(0) < 36 {
        problems.push(format!("{name}: schemaVersion below 36"));
    }
    if !d["id"].is_null() {
        problems.push(format!(
            "{name}: `id` must be null so that import creates a new dashboard"
        ));
    }
    let vars = d["templating"]["list"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut defined: BTreeSet<String> = ["__rate_interval", "__interval", "__range"]
        .map(String::from)
        .into();
    let ds_var = vars.iter().any(|v| {
        v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus"
    });
    if !ds_var {
        problems.push(format!(
            "{name}: no `datasource` variable of type datasource (query prometheus)"
        ));
    }
    for v in &vars {
        defined.insert(v["name"].as_str().unwrap_or_default().to_string());
        if v["type"] == "query" {
            let q = v["query"]["query"]
                .as_str()
                .or(v["query"].as_str())
                .unwrap_or("");
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|r| r.strip_suffix(')'))
                .and_then(|r| r.rsplit_once(','));
            match inner {
                Some((sel, label)) => queries.push(Query {
                    at: format!("{name} / variable {}", v["name"]),
                    expr: sel.trim().to_string(),
                    label: Some(label.trim().to_string()),
                }),
                None => problems.push(format!(
                    "{name}: variable {} is not label_values(selector, label): {q}",
                    v["name"]
                )),
            }
        }
    }
    // No fixed datasource UID anywhere: every `uid` below the top level is
    // the variable (or Grafana's built-in annotation source).
    fn uids(v: &Value, path: &str, top: bool, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if k == "uid" && !top {
                        let ok = matches!(x.as_str(), Some("${datasource}" | "-- Grafana --"));
                        if !ok {
                            out.push(format!("{path}.uid = {x} (a fixed UID)"));
                        }
                    }
                    uids(x, &format!("{path}.{k}"), false, out);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    uids(x, &format!("{path}[{i}]"), false, out);
                }
            }
            _ => {}
        }
    }
    uids(d, name, true, &mut problems);
    // Panels, rows included.
    let mut ids = BTreeSet::new();
    let mut stack: Vec<Value> = d["panels"].as_array().cloned().unwrap_or_default();
    if stack.is_empty() {
        problems.push(format!("{name}: no panels"));
    }
    while let Some(p) = stack.pop() {
        let title = p["title"].as_str().unwrap_or("?").to_string();
        if !ids.insert(p["id"].as_u64().unwrap_or(0)) {
            problems.push(format!("{name} / {title}: duplicate or missing panel id"));
        }
        let g = &p["gridPos"];
        let (x, w, h) = (g["x"].as_u64(), g["w"].as_u64(), g["h"].as_u64());
        if !matches!((x, w, h), (Some(x), Some(w), Some(h)) if w > 0 && h > 0 && x + w <= 24) {
            problems.push(format!("{name} / {title}: bad gridPos {g}"));
        }
        if p["type"] == "row" {
            stack.extend(p["panels"].as_array().cloned().unwrap_or_default());
            continue;
        }
        if p["datasource"]["uid"] != "${datasource}" {
            problems.push(format!(
                "{name} / {title}: datasource is not ${{datasource}}"
            ));
        }
        let targets = p["targets"].as_array().cloned().unwrap_or_default();
        if targets.is_empty() {
            problems.push(format!("{name} / {title}: no targets"));
        }
        for t in targets {
            match t["expr"].as_str() {
                Some(e) if !e.trim().is_empty() => queries.push(Query {
                    at: format!("{name} / {title} / {}", t["refId"].as_str().unwrap_or("?")),
                    expr: e.to_string(),
                    label: None,
                }),
                _ => problems.push(format!("{name} / {title}: a target without `expr`")),
            }
        }
    }
    for q in &queries {
        for v in variables_in(&q.expr) {
            if !defined.contains(&v) {
                problems.push(format!("{}: uses ${v}, which no variable defines", q.at));
            }
        }
    }
    (problems, queries)
}

/// The concrete expressions a Grafana expression stands for: macros fixed,
/// the multi-value variables set to the one instance, breaker and limit the
/// test runs (not `.*`, so that a misspelt label name matches nothing),
/// `$metric` and `$window` over what the load sends. Panics if a `$` survives.
fn expand(expr: &str, instance: &str) -> Vec<String> {
    let fixed = [
        ("$__rate_interval", "1m"),
        ("$__interval", "15s"),
        ("$__range", "5m"),
        ("$instance", instance),
        ("$breaker", "checkout"),
        ("$limit", "api"),
    ];
    let mut base = expr.to_string();
    for (k, v) in fixed {
        base = base.replace(k, v);
    }
    let mut out = vec![base];
    for (var, values) in [
        ("$metric", &LOAD_METRICS[..]),
        ("$window", &["10s", "1m"][..]),
    ] {
        if out[0].contains(var) {
            out = out
                .iter()
                .flat_map(|e| values.iter().map(move |v| e.replace(var, v)))
                .collect();
        }
    }
    for e in &out {
        assert!(!e.contains('$'), "unexpanded variable left in `{e}`");
    }
    out
}

/// Writes `exprs` as recording rules and runs `promtool check rules`.
fn promtool_check(exprs: &[String], dir: &Path) -> (bool, String) {
    let mut yaml = String::from("groups:\n  - name: dashboards\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        // A JSON string is a valid YAML double-quoted scalar.
        yaml += &format!(
            "      - record: dashboard:query_{i}\n        expr: {}\n",
            json!(e)
        );
    }
    let file = dir.join("dashboard-rules.yml");
    std::fs::write(&file, yaml).expect("write rules");
    run_30s(
        Command::new(require_tool("promtool"))
            .arg("check")
            .arg("rules")
            .arg(&file),
    )
}

#[test]
fn every_dashboard_query_returns_data_from_a_real_prometheus_scraping_rollstat() {
    let started = Instant::now();
    let promtool = require_tool("promtool");
    let python = require_tool("python3");
    // Started in step 4; missing, it fails the test before the slow steps.
    require_tool("prometheus");

    // 1. The committed JSON is what the generator writes.
    let (ok, out) = run_30s(
        Command::new(python)
            .arg(repo().join("dashboards/generate.py"))
            .arg("--check"),
    );
    assert!(ok, "dashboards/*.json are stale:\n{out}");

    // 2. Structure, and every query.
    let mut problems = Vec::new();
    let mut queries = Vec::new();
    for name in DASHBOARDS {
        let (p, q) = inspect(name, &load_dashboard(name));
        problems.extend(p);
        queries.extend(q);
    }
    assert!(
        problems.is_empty(),
        "dashboard problems:\n{}",
        problems.join("\n")
    );
    assert!(queries.len() >= 30, "only {} queries found", queries.len());

    // 3. promtool parses every expression, and would catch a broken one.
    let dir = TempDir::new("dashboards");
    let located: Vec<(String, String)> = queries
        .iter()
        .flat_map(|q| {
            expand(&q.expr, "127.0.0.1:9102")
                .into_iter()
                .map(|e| (q.at.clone(), e))
        })
        .collect();
    let all: Vec<String> = located.iter().map(|(_, e)| e.clone()).collect();
    let (ok, out) = promtool_check(&all, dir.path());
    if !ok {
        let named: Vec<String> = located
            .iter()
            .enumerate()
            .filter(|(i, _)| out.contains(&format!("query_{i}\"")))
            .map(|(i, (at, e))| format!("query_{i} is {at}: {e}"))
            .collect();
        panic!(
            "promtool check rules rejected a dashboard query:\n{out}\n{}",
            named.join("\n")
        );
    }
    let broken = all
        .iter()
        .find_map(|e| e.strip_suffix(')'))
        .expect("an expression ending in `)`")
        .to_string();
    let (ok, out) = promtool_check(std::slice::from_ref(&broken), dir.path());
    assert!(!ok, "promtool accepted the broken `{broken}`: {out}");
    let (ok, out) = run_30s(
        Command::new(&promtool)
            .arg("check")
            .arg("config")
            .arg(repo().join("dashboards/prometheus.yml")),
    );
    assert!(ok, "dashboards/prometheus.yml: {out}");

    // 4. A real rollstat under load, scraped every second by a real Prometheus.
    let daemon = Daemon::start_with(LOAD_CONFIG);
    let _load = Load::start(&daemon);
    let prom = Prometheus::start(daemon.http);
    let instance = daemon.http.to_string();

    // 5. Every query returns data. Samples need a few scrapes (rates need two,
    // the breaker needs to trip), so retry the empty ones until a deadline.
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut pending: Vec<Query> = queries.clone();
    let mut last_empty: Vec<String> = Vec::new();
    loop {
        last_empty.clear();
        let mut still = Vec::new();
        for q in pending {
            let mut found = false;
            for e in expand(&q.expr, &instance) {
                match prom.query_result(&e) {
                    Err(err) => panic!("{}: Prometheus rejected `{e}`: {err}", q.at),
                    Ok(series) if series.is_empty() => {}
                    Ok(series) => {
                        if let Some(label) = &q.label {
                            assert!(
                                series.iter().all(|s| s["metric"][label].is_string()),
                                "{}: `{e}` has series without the label {label}: {series:?}",
                                q.at
                            );
                        }
                        found = true;
                        break;
                    }
                }
            }
            if !found {
                last_empty.push(format!("{}: `{}`", q.at, q.expr));
                still.push(q);
            }
        }
        pending = still;
        if pending.is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    assert!(
        pending.is_empty(),
        "these dashboard queries returned no data from Prometheus within 45 s:\n{}",
        last_empty.join("\n")
    );

    // 6. And the same check catches a misspelt family name or label name.
    let with_label = queries
        .iter()
        .find(|q| q.expr.contains("instance=~"))
        .expect("a query filtered by instance");
    for typo in [
        queries[0].expr.replacen("rollstat_", "rollstat_x", 1),
        with_label.expr.replacen("instance=~", "instanse=~", 1),
    ] {
        for e in expand(&typo, &instance) {
            assert!(
                prom.query_result(&e).expect("query").is_empty(),
                "a misspelt query `{e}` returned data: the check would miss typos"
            );
        }
    }
    eprintln!(
        "checked {} dashboard queries ({} expressions) in {:.1?}",
        queries.len(),
        all.len(),
        started.elapsed()
    );
}
