//! The Grafana dashboards in `dashboards/` are what `generate.py` writes,
//! are importable (datasource as a variable, no fixed UID), every panel's
//! PromQL passes `promtool check rules`, and every query returns data from a
//! real Prometheus scraping a real rollstat under a steady load (every
//! statsd type, a breaker that trips, a limit being hit, its windows shared
//! through a real redis-server; without redis-server, off CI, the Redis-only
//! families ([`DATA_ONLY_WITH_REDIS`]) are only parsed). Then,
//! against the same Prometheus: each timeseries panel's series get distinct
//! legends, and each table, its transformations applied as Grafana applies
//! them ([`table_rows`] models merge and organize only), has one complete row
//! per label set.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::redis_server::{have_redis, Redis};
use crate::support::{
    repo, require_tool, run, Daemon, Load, Prometheus, TempDir, LOAD_CONFIG, LOAD_METRICS,
};

const DASHBOARDS: [&str; 4] = [
    "overview.json",
    "explorer.json",
    "breakers.json",
    "limits.json",
];

/// Families that exist only with a `[redis]` section (the Redis store and the
/// fleet-wide windows): when redis-server is not installed (off CI only),
/// the test's daemon has no Redis, so expressions naming them must parse
/// (promtool) but are not required to return data, and the legend and table
/// checks skip their panels. Each entry must match at least
/// one dashboard expression, so the list cannot outlive the panels.
const DATA_ONLY_WITH_REDIS: [&str; 4] = [
    "rollstat_store_",
    "rollstat_fleet_window_",
    "rollstat_fleet_unshared_series",
    "rollstat_fleet_partial_windows",
];

fn needs_redis(expr: &str) -> bool {
    DATA_ONLY_WITH_REDIS.iter().any(|f| expr.contains(f))
}

/// One panel's queries: (refId, expr, legendFormat), and its transformations.
struct Panel {
    at: String,
    kind: String,
    targets: Vec<(String, String, String)>,
    transformations: Vec<Value>,
}

fn panels_of(name: &str, d: &Value) -> Vec<Panel> {
    let mut out = Vec::new();
    let mut stack: Vec<Value> = d["panels"].as_array().cloned().unwrap_or_default();
    while let Some(p) = stack.pop() {
        stack.extend(p["panels"].as_array().cloned().unwrap_or_default());
        let targets: Vec<(String, String, String)> = p["targets"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|t| {
                let s = |k: &str| t[k].as_str().unwrap_or("").to_string();
                (s("refId"), s("expr"), s("legendFormat"))
            })
            .collect();
        if targets.is_empty() {
            continue;
        }
        out.push(Panel {
            at: format!("{name} / {}", p["title"].as_str().unwrap_or("?")),
            kind: p["type"].as_str().unwrap_or("").to_string(),
            targets,
            transformations: p["transformations"].as_array().cloned().unwrap_or_default(),
        });
    }
    out
}

/// A series' name as Grafana's Prometheus datasource gives it: the
/// legendFormat with each `{{label}}` replaced by the label's value (empty
/// when missing); an empty legendFormat gives `name{l="v", ...}`.
fn legend(format: &str, metric: &Value) -> String {
    let labels = metric.as_object().cloned().unwrap_or_default();
    let value = |k: &str| {
        labels
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    if format.is_empty() {
        let rest: Vec<String> = labels
            .iter()
            .filter(|(k, _)| *k != "__name__")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        return format!("{}{{{}}}", value("__name__"), rest.join(", "));
    }
    let mut out = String::new();
    let mut rest = format;
    while let Some(i) = rest.find("{{") {
        out += &rest[..i];
        match rest[i + 2..].find("}}") {
            Some(j) => {
                out += &value(rest[i + 2..i + 2 + j].trim());
                rest = &rest[i + 2 + j + 2..];
            }
            None => {
                out += &rest[i..];
                rest = "";
            }
        }
    }
    out + rest
}

/// One table row: field name to cell.
type Row = BTreeMap<String, String>;

/// A table panel's result as Grafana builds it, modelling only the
/// transformations these dashboards use: each instant `format: table` query
/// is a frame with Time, one field per label and `Value` (`Value #<refId>`
/// with several queries); Grafana sends a panel's queries with one evaluation
/// time, so Time is equal across frames. `merge` joins rows of all frames on
/// equal values of the fields they have in common (value fields excluded),
/// a row without a match stays a row of its own with empty cells; `organize`
/// drops `excludeByName` fields and applies `renameByName`. Any other
/// transformation fails the test, so a new one gets modelled first.
fn table_rows(
    frames: &[(String, Vec<Value>)],
    transformations: &[Value],
) -> (Vec<String>, Vec<Row>) {
    let value_field = |r: &str| {
        if frames.len() == 1 {
            "Value".to_string()
        } else {
            format!("Value #{r}")
        }
    };
    let frame_rows: Vec<(Vec<String>, Vec<Row>)> = frames
        .iter()
        .map(|(r, series)| {
            let mut fields: BTreeSet<String> = BTreeSet::new();
            let rows: Vec<Row> = series
                .iter()
                .map(|s| {
                    let mut row = Row::new();
                    row.insert("Time".into(), "t".into());
                    for (k, v) in s["metric"].as_object().cloned().unwrap_or_default() {
                        row.insert(k, v.as_str().unwrap_or("").to_string());
                    }
                    row.insert(
                        value_field(r),
                        s["value"][1].as_str().unwrap_or("").to_string(),
                    );
                    fields.extend(row.keys().cloned());
                    row
                })
                .collect();
            (fields.into_iter().collect(), rows)
        })
        .collect();
    let mut fields: Vec<String> = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    let merge = transformations.iter().any(|t| t["id"] == "merge");
    for (i, (ff, fr)) in frame_rows.iter().enumerate() {
        let common: Vec<&String> = ff
            .iter()
            .filter(|f| fields.contains(f) && !f.starts_with("Value"))
            .collect();
        for r in fr {
            let hit = if merge && i > 0 {
                rows.iter_mut().find(|e| {
                    common.iter().all(|c| e.get(*c) == r.get(*c))
                        && !r
                            .keys()
                            .any(|k| k.starts_with("Value") && e.contains_key(k))
                })
            } else {
                None
            };
            match hit {
                Some(e) => e.extend(r.clone()),
                None => rows.push(r.clone()),
            }
        }
        for f in ff {
            if !fields.contains(f) {
                fields.push(f.clone());
            }
        }
        if !merge && i > 0 {
            panic!("a table with several queries and no merge: Grafana shows one frame at a time");
        }
    }
    for t in transformations {
        match t["id"].as_str() {
            Some("merge") => {}
            Some("organize") => {
                let o = &t["options"];
                fields.retain(|f| o["excludeByName"][f] != true);
                for f in fields.iter_mut() {
                    if let Some(n) = o["renameByName"][f.as_str()].as_str() {
                        *f = n.to_string();
                    }
                }
                for r in rows.iter_mut() {
                    let old = std::mem::take(r);
                    for (k, v) in old {
                        if o["excludeByName"][&k] == true {
                            continue;
                        }
                        let k = o["renameByName"][&k]
                            .as_str()
                            .map(String::from)
                            .unwrap_or(k);
                        r.insert(k, v);
                    }
                }
            }
            other => panic!("transformation {other:?} is not modelled by this test"),
        }
    }
    (fields, rows)
}

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
    // Grafana's pattern for sharing outside an instance: the UI import asks
    // for the `DS_PROMETHEUS` input and writes it where `${DS_PROMETHEUS}`
    // stands, the datasource variable's default.
    let ds_var = vars.iter().any(|v| {
        v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"
            && v["current"]["value"] == "${DS_PROMETHEUS}"
    });
    let input = d["__inputs"].as_array().is_some_and(|a| {
        a.iter().any(|i| {
            i["name"] == "DS_PROMETHEUS"
                && i["type"] == "datasource"
                && i["pluginId"] == "prometheus"
        })
    });
    let requires = d["__requires"].as_array().is_some_and(|a| {
        a.iter()
            .any(|r| r["type"] == "datasource" && r["id"] == "prometheus")
    });
    if !input || !requires {
        problems.push(format!(
            "{name}: no DS_PROMETHEUS datasource input in __inputs (pluginId prometheus) or no prometheus in __requires: the UI import would not ask for the datasource"
        ));
    }
    if !ds_var {
        problems.push(format!(
            "{name}: no `datasource` variable of type datasource (query prometheus, default ${{DS_PROMETHEUS}})"
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
    // With redis-server installed (always under CI), the daemon shares the
    // load's windows through it, so the Redis and fleet panels are checked
    // like the others; without it they are only parsed.
    let redis = if have_redis() { Redis::start() } else { None };
    let config = match &redis {
        Some(r) => format!(
            "{LOAD_CONFIG}\n[redis]\n{}\nsync_interval_ms = 100\n\n[[mappings]]\nmatch = \"load.**\"\nshared = true\n",
            r.section()
        ),
        None => LOAD_CONFIG.to_string(),
    };
    let exempt = |e: &str| redis.is_none() && needs_redis(e);
    let daemon = Daemon::start_with(&config);
    let _load = Load::start(&daemon);
    let prom = Prometheus::start(daemon.http);
    let instance = daemon.http.to_string();

    // 5. Every query returns data. Samples need a few scrapes (rates need two,
    // the breaker needs to trip), so retry the empty ones until a deadline.
    let deadline = Instant::now() + Duration::from_secs(45);
    for f in DATA_ONLY_WITH_REDIS {
        assert!(
            queries.iter().any(|q| q.expr.contains(f)),
            "DATA_ONLY_WITH_REDIS names {f}, which no dashboard query uses: drop it"
        );
    }
    let mut pending: Vec<Query> = queries
        .iter()
        .filter(|q| !exempt(&q.expr))
        .cloned()
        .collect();
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

    // 6. Legends: within each timeseries panel, the series Prometheus returns
    // get distinct names once Grafana substitutes their labels.
    let mut legends_checked = 0;
    let mut tables_checked = 0;
    for name in DASHBOARDS {
        for p in panels_of(name, &load_dashboard(name)) {
            if p.targets.iter().any(|(_, e, _)| exempt(e)) {
                continue;
            }
            let expanded: Vec<Vec<String>> = p
                .targets
                .iter()
                .map(|(_, e, _)| expand(e, &instance))
                .collect();
            let n = expanded.iter().map(Vec::len).max().unwrap_or(1);
            for k in 0..n {
                let at = |i: usize| &expanded[i][k.min(expanded[i].len() - 1)];
                if p.kind == "timeseries" || p.kind == "state-timeline" {
                    let mut seen: BTreeMap<String, String> = BTreeMap::new();
                    for (i, (_, _, lf)) in p.targets.iter().enumerate() {
                        for s in prom.query_result(at(i)).expect("query") {
                            let l = legend(lf, &s["metric"]);
                            if let Some(prev) = seen.insert(l.clone(), at(i).clone()) {
                                panic!(
                                    "{}: two series get the legend `{l}` (from `{prev}` and `{}`): {}",
                                    p.at,
                                    at(i),
                                    s["metric"]
                                );
                            }
                        }
                    }
                    legends_checked += 1;
                }
                if p.kind == "table" {
                    let frames: Vec<(String, Vec<Value>)> = p
                        .targets
                        .iter()
                        .enumerate()
                        .map(|(i, (r, _, _))| (r.clone(), prom.query_result(at(i)).expect("query")))
                        .collect();
                    let mut tag_sets = BTreeSet::new();
                    // The first query names the rows (one per label set);
                    // the others add cells to them.
                    for (_, series) in &frames[..1] {
                        for s in series {
                            let mut m = s["metric"].as_object().cloned().unwrap_or_default();
                            m.remove("__name__");
                            tag_sets.insert(Value::Object(m).to_string());
                        }
                    }
                    let (fields, rows) = table_rows(&frames, &p.transformations);
                    assert_eq!(
                        rows.len(),
                        tag_sets.len(),
                        "{}: {} rows for {} label sets (k = {k}): {rows:?}",
                        p.at,
                        rows.len(),
                        tag_sets.len()
                    );
                    for r in &rows {
                        for f in &fields {
                            assert!(
                                r.get(f).is_some_and(|v| !v.is_empty()),
                                "{}: a row without {f}: {r:?} (fields {fields:?})",
                                p.at
                            );
                        }
                    }
                    if !rows.is_empty() {
                        tables_checked += 1;
                    }
                }
            }
        }
    }
    assert!(
        legends_checked >= 20,
        "only {legends_checked} legend checks ran"
    );
    assert!(
        tables_checked >= 3,
        "only {tables_checked} table checks ran"
    );

    // 7. And the same check catches a misspelt family name or label name.
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
