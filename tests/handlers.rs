//! The HTTP handlers, in-process: a daemon [`State`] built from the shipped
//! `config.toml` without sockets, its router driven request by request
//! under a [`ManualClock`]. Time moves only when a test says so, so limit
//! windows, breaker transitions and series expiry are exact, and the whole
//! file runs in milliseconds. (The transport around the router, deadlines
//! and connection caps, is tested against the real binary in `tests/it`.)

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, Response, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use rollstat::config::Config;
use rollstat::daemon::State;
use rollstat::{Clock, ManualClock};
use tower::ServiceExt;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The state of a daemon on the shipped config, and its router.
fn shipped() -> (Arc<State>, Router, ManualClock) {
    let cfg = Config::load(&repo().join("config.toml")).expect("config.toml loads");
    build(cfg, None)
}

fn build(cfg: Config, path: Option<PathBuf>) -> (Arc<State>, Router, ManualClock) {
    let clock = ManualClock::new();
    let state = Arc::new(State::build(cfg, path, Arc::new(clock.clone())).expect("state builds"));
    let router = state.router(None);
    (state, router, clock)
}

async fn send(router: &Router, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
    let resp: Response<Body> = router.clone().oneshot(req).await.expect("infallible");
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.expect("body").to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

async fn get(router: &Router, path: &str) -> (StatusCode, axum::http::HeaderMap, String) {
    send(router, Request::get(path).body(Body::empty()).unwrap()).await
}

async fn post(
    router: &Router,
    path: &str,
    content_type: &str,
    body: &str,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let req = Request::post(path)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CONTENT_LENGTH, body.len())
        .body(Body::from(body.to_string()))
        .unwrap();
    send(router, req).await
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

#[tokio::test]
async fn the_shipped_api_limit_admits_100_a_second_with_ratelimit_headers_then_refuses() {
    let (_state, router, clock) = shipped();
    let acquire = "/api/v1/limits/api/acquire?key=alice";
    for i in 0..100 {
        let (code, headers, body) = post(&router, acquire, "application/json", "").await;
        assert_eq!(code, StatusCode::OK, "request {i}: {body}");
        assert_eq!(
            headers["ratelimit-policy"], "\"api.0\";q=100;w=1, \"api.1\";q=1000;w=60",
            "{headers:?}"
        );
        assert_eq!(json(&body)["remaining"], 99 - i);
        assert_eq!(json(&body)["source"], "local");
    }
    let (code, headers, body) = post(&router, acquire, "application/json", "").await;
    assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(headers[header::RETRY_AFTER], "1");
    assert!(
        headers["ratelimit"].to_str().unwrap().contains(";r=0;"),
        "{headers:?}"
    );
    // Another key has its own budget.
    let (code, _, _) = post(&router, "/api/v1/limits/api/acquire?key=bob", "", "").await;
    assert_eq!(code, StatusCode::OK);
    // One second later the first 100 have left the 1 s rule.
    clock.advance(Duration::from_secs(1));
    let (code, _, body) = post(&router, acquire, "application/json", "").await;
    assert_eq!(code, StatusCode::OK, "{body}");
    // A limit the config does not name is a 404 that says so.
    let (code, _, body) = post(&router, "/api/v1/limits/nope/acquire?key=a", "", "").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(body.contains("no limit named `nope`"), "{body}");
}

#[tokio::test]
async fn the_checkout_breaker_opens_on_failures_and_half_opens_after_open_duration() {
    let (state, router, clock) = shipped();
    let decision = "/api/v1/breakers/checkout/decision";
    let (code, _, body) = get(&router, decision).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(json(&body)["decision"], "allow");
    assert_eq!(json(&body)["state"], "closed");
    // 10 calls (min_calls), all failed: over the 0.5 threshold.
    let (code, _, body) = post(
        &router,
        "/api/v1/breakers/checkout/outcomes",
        "application/json",
        r#"{"success": 0, "failure": 10}"#,
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let (_, _, body) = get(&router, decision).await;
    assert_eq!(json(&body)["state"], "open", "{body}");
    assert_eq!(json(&body)["decision"], "shed");
    // open_duration_ms = 5000: still open just before, half-open after.
    clock.advance(Duration::from_millis(4999));
    state.tick();
    assert_eq!(json(&get(&router, decision).await.2)["state"], "open");
    clock.advance(Duration::from_millis(2));
    state.tick();
    let (_, _, body) = get(&router, decision).await;
    assert_eq!(json(&body)["state"], "half_open", "{body}");
    assert_eq!(
        json(&body)["decision"],
        "allow",
        "a half-open trial: {body}"
    );
    // Outcomes that are not counts are refused and record nothing.
    let (code, _, body) = post(
        &router,
        "/api/v1/breakers/checkout/outcomes",
        "application/json",
        r#"{"success": -1}"#,
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(body.contains("success"), "{body}");
}

#[tokio::test]
async fn json_ingest_applies_good_samples_reports_bad_ones_and_metrics_shows_them() {
    let (state, router, clock) = shipped();
    let body = r#"[
        {"name": "api.users.latency", "type": "timer", "value": 12.5},
        {"name": "orders", "type": "counter", "value": 3, "tags": {"region": "eu"}},
        {"name": "orders", "type": "counter", "value": "three"}
    ]"#;
    let (code, _, answer) = post(&router, "/api/v1/ingest", "application/json", body).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{answer}");
    let a = json(&answer);
    assert_eq!(
        (a["accepted"].as_u64(), a["rejected"].as_u64()),
        (Some(2), Some(1)),
        "{answer}"
    );
    assert_eq!(a["errors"][0]["index"], 2, "{answer}");
    // Statsd text goes the same way.
    let (code, _, answer) = post(
        &router,
        "/api/v1/ingest",
        "text/plain",
        "orders:2|c|#region:eu\n",
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{answer}");
    // A media type that is neither is refused whole.
    let (code, _, _) = post(&router, "/api/v1/ingest", "application/xml", "<x/>").await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    clock.advance(Duration::from_secs(1));
    let (code, headers, text) = get(&router, "/metrics").await;
    assert_eq!(code, StatusCode::OK);
    assert!(headers[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    assert!(text.contains("orders_total{region=\"eu\"} 5\n"), "{text}");
    // The mapping rule of config.toml: api.*.latency -> api.latency{endpoint}.
    assert!(
        text.contains(
            "rollstat_window_samples{metric=\"api.latency\",window=\"10s\",endpoint=\"users\"} 1\n"
        ),
        "{text}"
    );
    assert_eq!(state.registry.len(), 2);
}

#[tokio::test]
async fn idle_series_expire_after_the_ttl_and_leave_metrics() {
    let (state, router, clock) = shipped();
    let (code, _, _) = post(&router, "/api/v1/ingest", "text/plain", "idle.gauge:1|g\n").await;
    assert_eq!(code, StatusCode::OK);
    assert!(get(&router, "/metrics").await.2.contains("idle_gauge 1\n"));
    // config.toml: ttl_secs = 600.
    clock.advance(Duration::from_secs(599));
    assert_eq!(state.sweep(), 0);
    clock.advance(Duration::from_secs(2));
    assert_eq!(state.sweep(), 1);
    assert!(!get(&router, "/metrics").await.2.contains("idle_gauge"));
}

#[tokio::test]
async fn reload_reads_the_file_again_and_keeps_the_old_config_when_it_is_wrong() {
    let dir = std::env::temp_dir().join(format!("rollstat-handlers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.toml");
    // The shipped config with the lifecycle API turned on.
    let shipped = std::fs::read_to_string(repo().join("config.toml"))
        .unwrap()
        .replace(
            "[http.auth.admin]\naccess = \"off\"",
            "[http.auth.admin]\naccess = \"open\"",
        );
    assert!(shipped.contains("[http.auth.admin]\naccess = \"open\""));
    std::fs::write(&path, &shipped).unwrap();
    let cfg = Config::load(&path).unwrap();
    let (_state, router, clock) = build(cfg, Some(path.clone()));
    let max = |body: &str| json(body)[0]["rules"][0]["max"].as_u64();
    assert_eq!(max(&get(&router, "/api/v1/limits").await.2), Some(100));

    std::fs::write(&path, shipped.replace("max = 100,", "max = 7,")).unwrap();
    let (code, _, body) = post(&router, "/-/reload", "", "").await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(max(&get(&router, "/api/v1/limits").await.2), Some(7));

    std::fs::write(&path, "[[windows]]\nname = 3\n").unwrap();
    let (code, _, body) = post(&router, "/-/reload", "", "").await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.contains("the previous config stays in force"),
        "{body}"
    );
    assert_eq!(max(&get(&router, "/api/v1/limits").await.2), Some(7));
    let _ = clock.now();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn ready_waits_for_the_daemon_to_serve_and_healthy_does_not() {
    let (state, router, _clock) = shipped();
    // Built, not yet serving: no listener or task runs.
    let (code, _, body) = get(&router, "/-/ready").await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("starting or stopping"), "{body}");
    let (code, _, body) = get(&router, "/-/healthy").await;
    assert_eq!(
        (code, body.as_str()),
        (StatusCode::OK, "rollstat is Healthy.\n")
    );
    state
        .serving
        .store(true, std::sync::atomic::Ordering::Release);
    let (code, _, body) = get(&router, "/-/ready").await;
    assert_eq!(
        (code, body.as_str()),
        (StatusCode::OK, "rollstat is Ready.\n")
    );
}

/// Label names of a text-format sample line (`name{a="x",b="y"} 1`), the
/// histogram's `le` left out.
fn label_names(sample: &str) -> Vec<String> {
    let Some(open) = sample.find('{') else {
        return Vec::new();
    };
    let close = sample.rfind('}').expect("a closed label set");
    let mut names = Vec::new();
    let mut rest = &sample[open + 1..close];
    while let Some(eq) = rest.find("=\"") {
        let name = rest[..eq].trim_start_matches(',');
        // Skip the quoted value, escapes included.
        let value = &rest[eq + 2..];
        let mut end = 0;
        let bytes = value.as_bytes();
        while bytes[end] != b'"' {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        if name != "le" {
            names.push(name.to_string());
        }
        rest = &value[end + 1..];
    }
    names.sort();
    names
}

#[tokio::test]
async fn every_rollstat_family_on_metrics_is_a_row_of_the_table_with_its_type_and_labels() {
    use rollstat::family::table::{self, ALL, FLEET, WINDOWED};
    let mut text = std::fs::read_to_string(repo().join("config.toml")).unwrap();
    // Redis (never reached here) and a relay, so that their families are
    // registered too.
    text.push_str(
        "\n[redis]\nurl = \"redis://127.0.0.1:1\"\n[[relay]]\naddress = \"127.0.0.1:9\"\n",
    );
    let cfg = Config::parse(&text).expect("the config parses");
    let (_state, router, _clock) = build(cfg, None);
    // A limit decision, so that every limit family has samples; a timer
    // and a set, so that every windowed family has some.
    post(
        &router,
        "/api/v1/limits/api/acquire?key=k",
        "application/json",
        "",
    )
    .await;
    let lines = "api.a.latency:3|ms|#env:x\nusers:u1|s\n";
    post(&router, "/api/v1/ingest", "text/plain", lines).await;
    let (_, _, body) = get(&router, "/metrics").await;
    let mut seen = std::collections::BTreeSet::new();
    let mut current = None;
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            let windowed = WINDOWED.iter().chain(FLEET).find(|f| f.name == name);
            current = ALL.iter().find(|f| f.name == name).map(|f| (f, false));
            current = current.or(windowed.map(|f| (f, true)));
            let rollstat = name.starts_with("rollstat_");
            assert!(
                !rollstat || current.is_some(),
                "{name} is not in rollstat::family::table"
            );
            if let Some((f, _)) = current {
                assert_eq!(kind, f.kind.as_str(), "{name}");
                seen.insert(f.name);
            }
        } else if let (Some((f, windowed)), false) = (current, line.starts_with('#')) {
            let mut want: Vec<String> = f.labels.iter().map(|l| l.to_string()).collect();
            let mut have = label_names(line);
            if windowed {
                // Then the series' own tags (the mapping's and the line's).
                have.retain(|l| !["endpoint", "env"].contains(&l.as_str()));
            }
            want.sort();
            assert_eq!(have, want, "{line}");
        }
    }
    assert!(WINDOWED.iter().all(|f| seen.contains(f.name)), "{seen:?}");
    // Every other row is there. Families whose labels no call has used
    // yet have no series, so are left out; the sketches' limit is set by
    // the binary at start, from the machine's memory.
    let unseen: Vec<&str> = ALL
        .iter()
        .map(|f| f.name)
        .filter(|n| !seen.contains(n))
        .collect();
    assert_eq!(
        unseen,
        [
            table::OUTPUT_BATCHES_TOTAL.name,
            table::OUTPUT_SAMPLES_TOTAL.name,
            table::OUTPUT_SENT_BYTES_TOTAL.name,
            table::OUTPUT_RETRIES_TOTAL.name,
            table::OUTPUT_QUEUE_BYTES.name,
            table::OUTPUT_LAST_SUCCESS_SECONDS.name,
            table::OUTPUT_UNWRITTEN_SAMPLES_TOTAL.name,
            table::OUTPUT_PROTOCOL.name,
            table::OUTPUT_PUSH_SECONDS.name,
            table::SKETCH_MEMORY_LIMIT_BYTES.name,
            table::STORE_ERRORS_TOTAL.name,
            table::STORE_SKIPPED_TOTAL.name,
            table::STORE_CALLS_TOTAL.name,
            table::STORE_FINAL_SYNC_TOTAL.name,
            // The rate-limit service's: this config has no [rls].
            table::RLS_REQUESTS_TOTAL.name,
            table::RLS_HITS_TOTAL.name,
            table::RLS_SHARED_TOTAL.name,
            table::RLS_HITS_RATE.name,
            table::RLS_DETAIL_DROPPED_TOTAL.name,
            table::RLS_CONNECTIONS.name,
            table::RLS_REFUSED_TOTAL.name,
        ]
    );
}
