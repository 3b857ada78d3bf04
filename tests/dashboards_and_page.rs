//! Issue 6, shown working end to end:
//!
//! * the Grafana dashboards in `dashboards/` are what `generate.py` writes,
//!   are importable (datasource as a variable, no fixed UID), every panel's
//!   PromQL passes `promtool check rules`, and every query returns data from
//!   a real Prometheus scraping a real rollstat under a steady load (every
//!   statsd type, a breaker that trips, a limit being hit);
//! * the live page at `/`, driven by chromedriver in headless Chromium, draws
//!   real data for a picked metric without a console error, and is saved as
//!   a screenshot (`ROLLSTAT_UPDATE_SCREENSHOT=1` also refreshes
//!   `docs/live-page.png`).
//!
//! Needs the Debian packages `prometheus`, `chromium` and `chromium-driver`
//! (`.ci/install-page-deps`); fails, never skips, without them.

// These tests run real processes on the real clock: deadlines need `Instant`.
#![allow(clippy::disallowed_methods)]

#[path = "dashboards_and_page/support.rs"]
mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{
    base64_decode, free_port, get_json, http, repo, require_tool, wait_until, Daemon, Load, Proc,
    TempDir, LOAD_METRICS,
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

/// Runs `cmd` to completion within `limit`, returning (success, output).
fn run(mut cmd: Command, limit: Duration) -> (bool, String) {
    let dir = TempDir::new("run");
    let what = format!("{cmd:?}");
    cmd.stdin(Stdio::null());
    let mut p = Proc::spawn("cmd", cmd, dir.path());
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = p.child.try_wait().expect("wait") {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "{what} ran longer than {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = std::fs::read_to_string(dir.path().join("cmd.out")).unwrap_or_default()
        + &std::fs::read_to_string(dir.path().join("cmd.err")).unwrap_or_default();
    (status.success(), out)
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

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
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
    let mut cmd = Command::new(require_tool("promtool"));
    cmd.arg("check").arg("rules").arg(&file);
    run(cmd, Duration::from_secs(30))
}

/// Evaluates `expr` now. `Ok(series)` on success (possibly empty); `Err` on
/// a parse or execution error.
fn prom_query(prom: SocketAddr, expr: &str) -> Result<Vec<Value>, String> {
    let r = http(
        "GET",
        prom,
        &format!("/api/v1/query?query={}", urlencode(expr)),
        None,
    )?;
    let v: Value = serde_json::from_str(&r.body)
        .map_err(|e| format!("HTTP {}: not JSON ({e}): {}", r.status, r.body))?;
    if r.status != 200 || v["status"] != "success" {
        return Err(format!("HTTP {}: {}", r.status, v["error"]));
    }
    match v["data"]["resultType"].as_str() {
        Some("scalar" | "string") => Ok(vec![v["data"]["result"].clone()]),
        _ => Ok(v["data"]["result"].as_array().cloned().unwrap_or_default()),
    }
}

#[test]
fn every_dashboard_query_returns_data_from_a_real_prometheus_scraping_rollstat() {
    let started = Instant::now();
    let promtool = require_tool("promtool");
    let prometheus = require_tool("prometheus");
    let python = require_tool("python3");

    // 1. The committed JSON is what the generator writes.
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("dashboards/generate.py"))
        .arg("--check");
    let (ok, out) = run(cmd, Duration::from_secs(30));
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
    let (ok, out) = {
        let mut cmd = Command::new(&promtool);
        cmd.arg("check")
            .arg("config")
            .arg(repo().join("dashboards/prometheus.yml"));
        run(cmd, Duration::from_secs(30))
    };
    assert!(ok, "dashboards/prometheus.yml: {out}");

    // 4. A real rollstat under load, scraped every second by a real Prometheus.
    let daemon = Daemon::start();
    let _load = Load::start(&daemon);
    let port = free_port();
    let prom: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    std::fs::write(
        dir.path().join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: rollstat\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: [\"{}\"]\n",
            daemon.http
        ),
    )
    .expect("write prometheus.yml");
    let mut cmd = Command::new(prometheus);
    cmd.arg(format!(
        "--config.file={}",
        dir.path().join("prometheus.yml").display()
    ))
    .arg(format!(
        "--storage.tsdb.path={}",
        dir.path().join("data").display()
    ))
    .arg(format!("--web.listen-address={prom}"))
    .arg("--log.level=warn");
    let mut server = Proc::spawn("prometheus", cmd, dir.path());
    let instance = daemon.http.to_string();
    wait_until(
        Duration::from_secs(30),
        Duration::from_millis(200),
        "Prometheus /-/ready",
        || {
            server.assert_running(dir.path());
            match http("GET", prom, "/-/ready", None) {
                Ok(r) if r.status == 200 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    );

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
                match prom_query(prom, &e) {
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
                prom_query(prom, &e).expect("query").is_empty(),
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

// === the live page ===

/// A chromedriver session on headless Chromium.
struct Browser {
    driver: SocketAddr,
    session: String,
    _proc: Proc,
    _dir: TempDir,
}

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Browser {
    fn start() -> Browser {
        let chromedriver = require_tool("chromedriver");
        let chromium = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .map(String::from)
            .unwrap_or_else(|| require_tool("chromium").display().to_string());
        let dir = TempDir::new("browser");
        let port = free_port();
        let driver: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let mut cmd = Command::new(chromedriver);
        cmd.arg(format!("--port={port}"));
        let mut proc = Proc::spawn("chromedriver", cmd, dir.path());
        wait_until(
            Duration::from_secs(20),
            Duration::from_millis(100),
            "chromedriver /status",
            || {
                proc.assert_running(dir.path());
                let v = get_json(driver, "/status")?;
                if v["value"]["ready"] == true {
                    Ok(())
                } else {
                    Err(v.to_string())
                }
            },
        );
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1280,900",
                    format!("--user-data-dir={}", dir.path().join("profile").display()),
                ],
            },
        }}});
        let r = http("POST", driver, "/session", Some(&caps.to_string())).expect("POST /session");
        let v: Value = serde_json::from_str(&r.body).expect("session JSON");
        let session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromedriver could not start Chromium: {}", r.body))
            .to_string();
        Browser {
            driver,
            session,
            _proc: proc,
            _dir: dir,
        }
    }

    /// A WebDriver command; the `value` of a success, else the error.
    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let path = format!("/session/{}{path}", self.session);
        let body = body.map(|b| b.to_string());
        let r = http(method, self.driver, &path, body.as_deref())?;
        let v: Value = serde_json::from_str(&r.body)
            .map_err(|e| format!("{method} {path}: not JSON ({e}): {}", r.body))?;
        if r.status == 200 {
            Ok(v["value"].clone())
        } else {
            Err(format!(
                "{method} {path}: HTTP {}: {}",
                r.status, v["value"]["message"]
            ))
        }
    }

    fn script(&self, js: &str) -> Result<Value, String> {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": js, "args": []})),
        )
    }

    fn find(&self, css: &str) -> Result<String, String> {
        let v = self.cmd(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        )?;
        v[ELEMENT]
            .as_str()
            .map(String::from)
            .ok_or_else(|| format!("no element id for {css}: {v}"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Closes Chromium; chromedriver is killed by its Proc afterwards.
        let _ = http(
            "DELETE",
            self.driver,
            &format!("/session/{}", self.session),
            None,
        );
    }
}

#[test]
fn the_live_page_draws_real_data_in_headless_chromium_without_console_errors() {
    let started = Instant::now();
    let daemon = Daemon::start();
    let _load = Load::start(&daemon);
    let b = Browser::start();
    b.cmd(
        "POST",
        "/url",
        Some(json!({"url": format!("http://{}/", daemon.http)})),
    )
    .expect("open the page");

    // The metric list fills from the API.
    wait_until(
        Duration::from_secs(20),
        Duration::from_millis(200),
        "the metric list to show every load metric",
        || {
            let n = b.script(
                "return document.querySelectorAll('#metrics li[data-metric^=\"load.\"]').length",
            )?;
            if n.as_u64().unwrap_or(0) >= LOAD_METRICS.len() as u64 {
                Ok(())
            } else {
                Err(format!("{n} load metrics listed"))
            }
        },
    );
    // Search, then pick two metrics by clicking them (the list re-renders
    // every few seconds, so a click may meet a stale element: retry).
    let search = b.find("#search").expect("search box");
    b.cmd(
        "POST",
        &format!("/element/{search}/value"),
        Some(json!({"text": "load."})),
    )
    .expect("type into the search box");
    for m in ["load.latency", "load.requests"] {
        wait_until(
            Duration::from_secs(10),
            Duration::from_millis(100),
            &format!("a click on {m} to pick it"),
            || {
                let li = b.find(&format!("li[data-metric=\"{m}\"]"))?;
                b.cmd("POST", &format!("/element/{li}/click"), Some(json!({})))?;
                let on = b.script(&format!(
                    "return !!document.querySelector('li.on[data-metric=\"{m}\"]')"
                ))?;
                if on == true {
                    Ok(())
                } else {
                    Err("not marked as picked".into())
                }
            },
        );
    }

    // Charts draw real data: every canvas of the timer (rate, average,
    // quantiles) has at least 8 points, and the breaker and limit show up.
    // For the README's picture, wait for half a minute of history.
    let refresh_docs = std::env::var_os("ROLLSTAT_UPDATE_SCREENSHOT").is_some();
    let min_points = if refresh_docs { 30 } else { 8 };
    let points = wait_until(
        Duration::from_secs(if refresh_docs { 90 } else { 40 }),
        Duration::from_millis(250),
        "the charts of load.latency to draw enough seconds of data",
        || {
            let v = b.script(
                "return [...document.querySelectorAll('canvas[data-metric=\"load.latency\"]')].map(c => +(c.dataset.points || 0))",
            )?;
            let pts: Vec<u64> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default();
            if pts.len() >= 3 && pts.iter().all(|p| *p >= min_points) {
                Ok(pts)
            } else {
                Err(format!("points per canvas: {pts:?}"))
            }
        },
    );
    let signals = b
        .script(
            "return {state: document.querySelector('#breakers .st')?.textContent, \
             denied: parseInt(document.querySelector('#limits td.bad')?.textContent || '0')}",
        )
        .expect("read the signals");
    assert!(
        signals["state"].is_string(),
        "no breaker state on the page: {signals}"
    );
    assert!(
        signals["denied"].as_u64().unwrap_or(0) > 0,
        "the page shows no denied decisions for the limit: {signals}"
    );

    // No console errors (JavaScript exceptions, failed loads, console.error).
    let logs = b
        .cmd("POST", "/se/log", Some(json!({"type": "browser"})))
        .expect("read the browser console log");
    let errors: Vec<&Value> = logs
        .as_array()
        .map(|a| a.iter().filter(|e| e["level"] == "SEVERE").collect())
        .unwrap_or_default();
    assert!(
        errors.is_empty(),
        "console errors on the live page: {errors:#?}"
    );

    // Screenshot.
    let png = b.cmd("GET", "/screenshot", None).expect("screenshot");
    let png = base64_decode(png.as_str().expect("base64 string")).expect("decode screenshot");
    assert!(png.starts_with(b"\x89PNG"), "the screenshot is not a PNG");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    std::fs::create_dir_all(&target).expect("target dir");
    let shot = target.join("page-screenshot.png");
    std::fs::write(&shot, &png).expect("write screenshot");
    if refresh_docs {
        std::fs::create_dir_all(repo().join("docs")).expect("docs dir");
        std::fs::write(repo().join("docs/live-page.png"), &png).expect("write docs/live-page.png");
    }
    eprintln!(
        "live page: points per chart {points:?}, signals {signals}, screenshot {} ({} bytes), {:.1?}",
        shot.display(),
        png.len(),
        started.elapsed()
    );
}
