//! Access control, in-process: the router of a daemon built without
//! sockets, asked as a browser, a scraper and a client would ask it. Every
//! route group (read, write, admin) in every mode (open, protected, off),
//! wrong and right credentials, the Host and Origin rules, the JSON
//! content types, and the breaker decision that only a POST takes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Method, Request, Response, StatusCode};
use axum::Router;
use base64::Engine;
use http_body_util::BodyExt;
use rollstat::config::Config;
use rollstat::daemon::State;
use rollstat::ManualClock;
use rollstat_testkit::TempDir;
use tower::ServiceExt;

const TOKEN: &str = "9f2c4e6a8b0d1f3e5a7c9e1b3d5f7a9c";
const OTHER_TOKEN: &str = "0000111122223333444455556666777788";
const PASSWORD: &str = "correct horse battery staple";

/// A daemon on the shipped config.toml with `extra` replacing its
/// `[http.auth.*]` tables, credentials files in `dir`.
struct Fixture {
    _dir: TempDir,
    state: Arc<State>,
    router: Router,
    clock: ManualClock,
    tokens: PathBuf,
}

fn shipped_text() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("config.toml")).unwrap()
}

/// The shipped config with its `[http.auth.*]` tables replaced by `auth`
/// (which may name `{tokens}` and `{users}`), and `http_extra` added to
/// `[http]`.
fn fixture(auth: &str, http_extra: &str) -> Fixture {
    let dir = TempDir::new("rollstat-access");
    let tokens = dir.path().join("tokens");
    let users = dir.path().join("users");
    std::fs::write(&tokens, format!("# the test's token\n{TOKEN}\n")).unwrap();
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    std::fs::write(&users, format!("alice:{hash}\n")).unwrap();
    let text = shipped_text();
    let start = text
        .find("# [http.auth.read]")
        .expect("config.toml shows [http.auth.read]");
    let end = text[start..].find("\n[series]").unwrap() + start;
    let auth = auth
        .replace("{tokens}", &tokens.display().to_string())
        .replace("{users}", &users.display().to_string());
    let text = format!("{}{auth}\n{}", &text[..start], &text[end..]);
    // `http_extra` sets its own lists.
    let text = text
        .replace("allowed_hosts = []\n", "")
        .replace("allowed_origins = []\n", "");
    let text = text.replace(
        "max_concurrent_api_reads = 4\n",
        &format!("max_concurrent_api_reads = 4\n{http_extra}\n"),
    );
    let path = dir.path().join("config.toml");
    std::fs::write(&path, &text).unwrap();
    let cfg = Config::load(&path).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let clock = ManualClock::new();
    let state = Arc::new(State::build(cfg, Some(path), Arc::new(clock.clone())).unwrap());
    let router = state.router(None);
    Fixture {
        _dir: dir,
        state,
        router,
        clock,
        tokens,
    }
}

/// One request: method, path, headers, body.
async fn call(
    f: &Fixture,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let mut req = Request::builder().method(method).uri(path);
    // What every HTTP/1.1 client sends; the tests that check Host set their own.
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req = req.header(header::HOST, "127.0.0.1:9102");
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .header(header::CONTENT_LENGTH, body.len())
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp: Response<Body> = f.router.clone().oneshot(req).await.unwrap();
    let (parts, b) = resp.into_parts();
    let bytes = b.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

fn refused(f: &Fixture, reason: &str) -> u64 {
    f.state.telemetry.http_refused.get(reason)
}

fn basic(user: &str, pw: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"))
    )
}

/// A request of each group: what it asks and the status an allowed one gets.
fn sample(
    group: &str,
) -> (
    Method,
    &'static str,
    Vec<(&'static str, &'static str)>,
    &'static str,
    StatusCode,
) {
    match group {
        "read" => (Method::GET, "/api/v1/limits", vec![], "", StatusCode::OK),
        "write" => (
            Method::POST,
            "/api/v1/breakers/checkout/outcomes",
            vec![("content-type", "application/json")],
            r#"{"success": 1}"#,
            StatusCode::OK,
        ),
        _ => (Method::POST, "/-/reload", vec![], "", StatusCode::OK),
    }
}

#[tokio::test]
async fn every_group_in_every_mode_with_wrong_and_right_credentials() {
    for group in ["read", "write", "admin"] {
        for mode in ["open", "protected", "off"] {
            let table = match mode {
                "protected" => format!(
                    "[http.auth.{group}]\naccess = \"protected\"\ntokens_file = \"{{tokens}}\"\nusers_file = \"{{users}}\"\n"
                ),
                m => format!("[http.auth.{group}]\naccess = \"{m}\"\n"),
            };
            let f = fixture(&table, "");
            let (method, path, hdrs, body, ok) = sample(group);
            let ask = |auth: Option<String>| {
                let mut h: Vec<(String, String)> = hdrs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                if let Some(a) = auth {
                    h.push(("authorization".into(), a));
                }
                (method.clone(), h)
            };
            let send = |auth: Option<String>| {
                let (m, h) = ask(auth);
                let f = &f;
                async move {
                    let h: Vec<(&str, &str)> =
                        h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                    call(f, m, path, &h, body).await
                }
            };
            let ctx = format!("{group} {mode}");
            match mode {
                "open" => {
                    let (code, _, b) = send(None).await;
                    assert_eq!(code, ok, "{ctx}: {b}");
                }
                "off" => {
                    let (code, _, b) = send(Some(format!("Bearer {TOKEN}"))).await;
                    assert_eq!(code, StatusCode::FORBIDDEN, "{ctx}: {b}");
                    assert!(
                        b.contains(&format!("[http.auth.{group}]"))
                            || b.contains("lifecycle API is off"),
                        "{ctx}: {b}"
                    );
                    assert_eq!(refused(&f, "route_group_off"), 1, "{ctx}");
                }
                _ => {
                    let (code, h, b) = send(None).await;
                    assert_eq!(code, StatusCode::UNAUTHORIZED, "{ctx}: {b}");
                    let challenges: Vec<_> = h
                        .get_all(header::WWW_AUTHENTICATE)
                        .iter()
                        .map(|v| v.to_str().unwrap().to_string())
                        .collect();
                    assert_eq!(
                        challenges.len(),
                        2,
                        "{ctx}: Basic and Bearer challenges: {challenges:?}"
                    );
                    assert_eq!(refused(&f, "unauthenticated"), 1, "{ctx}");
                    for wrong in [
                        format!("Bearer {OTHER_TOKEN}"),
                        basic("alice", "wrong"),
                        basic("mallory", PASSWORD),
                        "Digest username=alice".to_string(),
                    ] {
                        let (code, _, b) = send(Some(wrong.clone())).await;
                        assert_eq!(code, StatusCode::UNAUTHORIZED, "{ctx} {wrong}: {b}");
                        assert!(
                            !b.contains("wrong") && !b.contains(OTHER_TOKEN),
                            "{ctx}: the answer echoes a credential: {b}"
                        );
                    }
                    assert_eq!(refused(&f, "bad_credentials"), 4, "{ctx}");
                    let (code, _, b) = send(Some(format!("Bearer {TOKEN}"))).await;
                    assert_eq!(code, ok, "{ctx} token: {b}");
                    // Twice: the second basic-auth check is the remembered one.
                    for _ in 0..2 {
                        let (code, _, b) = send(Some(basic("alice", PASSWORD))).await;
                        assert_eq!(code, ok, "{ctx} basic: {b}");
                    }
                }
            }
            // Whatever the groups, /healthz answers probes.
            let (code, _, _) = call(&f, Method::GET, "/healthz", &[], "").await;
            assert_eq!(code, StatusCode::OK, "{ctx}: /healthz");
        }
    }
}

#[tokio::test]
async fn each_route_is_in_the_group_its_method_says() {
    let f = fixture(
        "[http.auth.read]\naccess = \"off\"\n[http.auth.write]\naccess = \"protected\"\ntokens_file = \"{tokens}\"\n",
        "",
    );
    let reads = [
        "/metrics",
        "/api/v1/series?match=*",
        "/api/v1/metrics",
        "/api/v1/breakers",
        "/api/v1/breakers/checkout",
        "/api/v1/breakers/checkout/decision",
        "/api/v1/limits",
        "/",
        "/assets/app.js",
        "/assets/style.css",
    ];
    for p in reads {
        let (code, _, b) = call(&f, Method::GET, p, &[], "").await;
        assert_eq!(code, StatusCode::FORBIDDEN, "GET {p} is a read: {b}");
    }
    let writes = [
        "/api/v1/ingest",
        "/api/v1/breakers/checkout/outcomes",
        "/api/v1/breakers/checkout/decision",
        "/api/v1/limits/api/acquire?key=a",
    ];
    for p in writes {
        let (code, _, b) = call(&f, Method::POST, p, &[], "").await;
        assert_eq!(code, StatusCode::UNAUTHORIZED, "POST {p} is a write: {b}");
    }
    // The shipped admin group is off, by POST and PUT.
    for m in [Method::POST, Method::PUT] {
        let (code, _, b) = call(&f, m.clone(), "/-/reload", &[], "").await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{m} /-/reload: {b}");
        assert!(
            b.contains("lifecycle API is off") && b.contains("SIGHUP"),
            "{b}"
        );
    }
}

#[tokio::test]
async fn the_shipped_config_refuses_reload_over_http_but_sighup_path_still_reloads() {
    let f = fixture(&shipped_auth(), "");
    let (code, _, body) = call(&f, Method::POST, "/-/reload", &[], "").await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(refused(&f, "route_group_off"), 1);
    // What SIGHUP calls.
    f.state.reloader.reload().expect("the file reloads");
}

/// The shipped `[http.auth.*]` tables, as they are.
fn shipped_auth() -> String {
    let text = shipped_text();
    let start = text.find("# [http.auth.read]").unwrap();
    let end = text[start..].find("\n[series]").unwrap() + start;
    text[start..end].to_string()
}

#[tokio::test]
async fn a_rebinding_host_or_a_cross_site_origin_changes_nothing() {
    let f = fixture(&shipped_auth(), "allowed_hosts = [\"rollstat.internal\"]\nallowed_origins = [\"https://grafana.example.com\"]");
    let outcomes = "/api/v1/breakers/checkout/outcomes";
    let failures = r#"{"failure": 10}"#;
    let json = ("content-type", "application/json");
    // DNS rebinding: the page's own name in Host.
    let (code, _, b) = call(
        &f,
        Method::POST,
        outcomes,
        &[("host", "evil.example:9102"), json],
        failures,
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{b}");
    assert!(b.contains("allowed_hosts"), "{b}");
    // Even a read: a rebinding page would read /metrics.
    let (code, _, _) = call(&f, Method::GET, "/metrics", &[("host", "evil.example")], "").await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(refused(&f, "host_not_allowed"), 2);
    // A form post from another site (text/plain needs no preflight).
    let (code, _, b) = call(
        &f,
        Method::POST,
        outcomes,
        &[
            ("origin", "http://evil.example"),
            ("content-type", "text/plain"),
        ],
        failures,
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{b}");
    let (code, _, _) = call(
        &f,
        Method::POST,
        outcomes,
        &[("origin", "null"), json],
        failures,
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(refused(&f, "origin_not_allowed"), 2);
    // Nothing moved.
    let (_, _, b) = call(&f, Method::GET, "/api/v1/breakers/checkout", &[], "").await;
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v["failures"], 0, "{b}");
    assert_eq!(v["state"], "closed", "{b}");

    // The names and origins the daemon answers to.
    for host in [
        "127.0.0.1:9102",
        "[::1]:9102",
        "localhost:9102",
        "rollstat.internal:9102",
    ] {
        let (code, _, b) = call(&f, Method::GET, "/api/v1/limits", &[("host", host)], "").await;
        assert_eq!(code, StatusCode::OK, "{host}: {b}");
    }
    // The live page's own requests carry its own origin.
    let (code, h, _) = call(
        &f,
        Method::GET,
        "/api/v1/breakers",
        &[("origin", "http://127.0.0.1:9102")],
        "",
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        h.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none(),
        "same origin needs no CORS"
    );
    // A listed origin gets CORS headers, and its preflight an answer.
    let grafana = ("origin", "https://grafana.example.com");
    let (code, h, _) = call(&f, Method::GET, "/api/v1/breakers", &[grafana], "").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        h[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "https://grafana.example.com"
    );
    assert_eq!(h[header::VARY], "Origin");
    let pre = [
        grafana,
        ("access-control-request-method", "POST"),
        ("access-control-request-headers", "content-type"),
    ];
    let (code, h, _) = call(&f, Method::OPTIONS, outcomes, &pre, "").await;
    assert_eq!(code, StatusCode::NO_CONTENT);
    assert_eq!(h[header::ACCESS_CONTROL_ALLOW_METHODS], "GET, POST");
    let (code, _, _) = call(
        &f,
        Method::OPTIONS,
        outcomes,
        &[
            ("origin", "http://evil.example"),
            ("access-control-request-method", "POST"),
        ],
        "",
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    let (code, _, b) = call(&f, Method::POST, outcomes, &[grafana, json], failures).await;
    assert_eq!(code, StatusCode::OK, "{b}");
}

#[tokio::test]
async fn json_routes_refuse_other_content_types_with_415() {
    let f = fixture(&shipped_auth(), "");
    let outcomes = "/api/v1/breakers/checkout/outcomes";
    let body = r#"{"failure": 10}"#;
    for ct in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let (code, _, b) = call(&f, Method::POST, outcomes, &[("content-type", ct)], body).await;
        assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct}: {b}");
        assert!(b.contains("application/json"), "{b}");
    }
    // No Content-Type with a body is not JSON either.
    let (code, _, _) = call(&f, Method::POST, outcomes, &[], body).await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(refused(&f, "unsupported_media_type"), 4);
    let (_, _, b) = call(&f, Method::GET, "/api/v1/breakers/checkout", &[], "").await;
    assert!(b.contains("\"failures\":0"), "nothing recorded: {b}");
    let (code, _, b) = call(
        &f,
        Method::POST,
        outcomes,
        &[("content-type", "application/json; charset=utf-8")],
        body,
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{b}");

    let acquire = "/api/v1/limits/api/acquire";
    let (code, _, _) = call(
        &f,
        Method::POST,
        acquire,
        &[("content-type", "text/plain")],
        r#"{"key":"a"}"#,
    )
    .await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (code, _, b) = call(
        &f,
        Method::POST,
        acquire,
        &[("content-type", "application/json")],
        r#"{"key":"a"}"#,
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{b}");
    // The query form needs no body and no type.
    let (code, _, b) = call(&f, Method::POST, &format!("{acquire}?key=a"), &[], "").await;
    assert_eq!(code, StatusCode::OK, "{b}");
    // Ingest keeps taking statsd text.
    let (code, _, b) = call(
        &f,
        Method::POST,
        "/api/v1/ingest",
        &[("content-type", "text/plain")],
        "a.b:1|c\n",
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{b}");
}

#[tokio::test]
async fn only_a_post_takes_a_half_open_trial_permit() {
    let f = fixture(&shipped_auth(), "");
    let json = [("content-type", "application/json")];
    let (code, _, _) = call(
        &f,
        Method::POST,
        "/api/v1/breakers/checkout/outcomes",
        &json,
        r#"{"failure": 10}"#,
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    f.clock.advance(Duration::from_millis(5001));
    f.state.tick();
    let decision = "/api/v1/breakers/checkout/decision";
    let field = |b: &str, k: &str| serde_json::from_str::<serde_json::Value>(b).unwrap()[k].clone();
    // Any number of GETs (a prefetch, an <img>) take nothing.
    for _ in 0..10 {
        let (code, _, b) = call(&f, Method::GET, decision, &[], "").await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(field(&b, "decision"), "allow", "{b}");
        assert_eq!(field(&b, "taken"), false, "{b}");
        assert_eq!(field(&b, "state"), "half_open", "{b}");
    }
    // half_open_trials = 3: three POSTs take them, the fourth is shed.
    let mut got = Vec::new();
    for _ in 0..4 {
        let (_, _, b) = call(&f, Method::POST, decision, &[], "").await;
        assert_eq!(field(&b, "taken"), true, "{b}");
        got.push(field(&b, "decision"));
    }
    assert_eq!(got, ["allow", "allow", "allow", "shed"]);
    // And a GET now says what a POST would.
    let (_, _, b) = call(&f, Method::GET, decision, &[], "").await;
    assert_eq!(field(&b, "decision"), "shed", "{b}");
}

#[tokio::test]
async fn the_live_page_is_served_with_a_strict_policy() {
    let f = fixture(&shipped_auth(), "");
    for p in ["/", "/assets/app.js", "/assets/style.css"] {
        let (code, h, _) = call(&f, Method::GET, p, &[], "").await;
        assert_eq!(code, StatusCode::OK, "{p}");
        let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        for part in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(part), "{p}: {csp}");
        }
        assert!(!csp.contains("unsafe"), "{csp}");
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{p}");
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY", "{p}");
    }
    // nosniff on every answer, refusals included.
    let (_, h, _) = call(&f, Method::GET, "/metrics", &[("host", "evil.example")], "").await;
    assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
}

#[tokio::test]
async fn a_reload_takes_new_credentials_and_drops_old_ones() {
    let f = fixture(
        "[http.auth.write]\naccess = \"protected\"\ntokens_file = \"{tokens}\"\n",
        "",
    );
    let acquire = "/api/v1/limits/api/acquire?key=a";
    let bearer = |t: &str| format!("Bearer {t}");
    let (code, _, _) = call(
        &f,
        Method::POST,
        acquire,
        &[("authorization", &bearer(TOKEN))],
        "",
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    std::fs::write(&f.tokens, format!("{OTHER_TOKEN}\n")).unwrap();
    f.state.reloader.reload().expect("reload");
    let (code, _, _) = call(
        &f,
        Method::POST,
        acquire,
        &[("authorization", &bearer(TOKEN))],
        "",
    )
    .await;
    assert_eq!(code, StatusCode::UNAUTHORIZED, "the old token is gone");
    let (code, _, _) = call(
        &f,
        Method::POST,
        acquire,
        &[("authorization", &bearer(OTHER_TOKEN))],
        "",
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    // A tokens file that became bad fails the reload; the last good one stays.
    std::fs::write(&f.tokens, "short\n").unwrap();
    let err = f
        .state
        .reloader
        .reload()
        .expect_err("a short token fails the reload");
    let msg = rollstat::error::Causes(&err).to_string();
    assert!(
        msg.contains("http.auth.write.tokens_file") && msg.contains(":1:"),
        "{msg}"
    );
    assert!(!msg.contains("short\n"), "{msg}");
    let (code, _, _) = call(
        &f,
        Method::POST,
        acquire,
        &[("authorization", &bearer(OTHER_TOKEN))],
        "",
    )
    .await;
    assert_eq!(code, StatusCode::OK);
}

/// A web config file (exporter-toolkit's YAML) with user `prom`, in its own
/// directory.
fn web_config() -> (TempDir, String) {
    let dir = TempDir::new("rollstat-webconfig");
    let path = dir.path().join("web.yml");
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    std::fs::write(
        &path,
        format!("# as node_exporter takes it\nbasic_auth_users:\n  prom: {hash}\n"),
    )
    .unwrap();
    let key = format!("web_config_file = \"{}\"", path.display());
    (dir, key)
}

#[tokio::test]
async fn a_web_config_users_protect_read_and_write_unless_config_toml_opens_them() {
    let (_web, key) = web_config();
    // No [http.auth.*] in config.toml: read and write need the file's
    // users, admin stays off.
    let f = fixture("", &key);
    for group in ["read", "write"] {
        let (method, path, hdrs, body, ok) = sample(group);
        for (auth, want) in [
            (None, StatusCode::UNAUTHORIZED),
            (Some(basic("prom", "wrong")), StatusCode::UNAUTHORIZED),
            (Some(basic("prom", PASSWORD)), ok),
        ] {
            let mut h: Vec<(&str, &str)> = hdrs.to_vec();
            if let Some(a) = &auth {
                h.push(("authorization", a));
            }
            let (code, resp, b) = call(&f, method.clone(), path, &h, body).await;
            assert_eq!(code, want, "{group} {auth:?}: {b}");
            if auth.is_none() {
                let challenges: Vec<_> = resp.get_all(header::WWW_AUTHENTICATE).iter().collect();
                assert_eq!(challenges.len(), 1, "{group}: Basic only: {challenges:?}");
            }
        }
    }
    let (code, _, b) = call(
        &f,
        Method::POST,
        "/-/reload",
        &[("authorization", &basic("prom", PASSWORD))],
        "",
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "admin stays off: {b}");

    // An explicit open read group wins; write, not set, is still protected.
    let f = fixture("[http.auth.read]\naccess = \"open\"\n", &key);
    let (code, _, b) = call(&f, Method::GET, "/api/v1/limits", &[], "").await;
    assert_eq!(code, StatusCode::OK, "{b}");
    let (method, path, hdrs, body, _) = sample("write");
    let (code, _, b) = call(&f, method, path, &hdrs, body).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED, "{b}");
}

#[tokio::test]
async fn a_web_config_headers_are_set_on_every_answer_in_place_of_the_daemons_own() {
    let dir = TempDir::new("rollstat-webconfig-headers");
    let path = dir.path().join("web.yml");
    std::fs::write(
        &path,
        "http_server_config:\n  headers:\n    Strict-Transport-Security: max-age=31536000\n    Content-Security-Policy: default-src 'self'\n",
    )
    .unwrap();
    let f = fixture(
        &shipped_auth(),
        &format!("web_config_file = \"{}\"", path.display()),
    );
    for (method, p, hdrs) in [
        (Method::GET, "/", vec![]),
        (Method::GET, "/metrics", vec![]),
        // A refusal too.
        (Method::GET, "/metrics", vec![("host", "evil.example")]),
    ] {
        let (_, h, _) = call(&f, method, p, &hdrs, "").await;
        assert_eq!(
            h[header::STRICT_TRANSPORT_SECURITY],
            "max-age=31536000",
            "{p}"
        );
        assert_eq!(
            h[header::CONTENT_SECURITY_POLICY],
            "default-src 'self'",
            "{p}"
        );
        assert_eq!(h.get_all(header::CONTENT_SECURITY_POLICY).iter().count(), 1);
    }
}
