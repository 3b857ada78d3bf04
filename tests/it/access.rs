//! Access control against the real binary on the shipped config.toml: a
//! cross-site form post and a DNS-rebinding request change nothing, the
//! lifecycle API is off (SIGHUP still reloads), and protected groups take
//! bearer tokens and bcrypt users from files, whose secrets never reach
//! the log or an answer.

use std::time::Duration;

use base64::Engine;
use rollstat_testkit::TempDir;

use crate::support::*;

const TOKEN: &str = "5b0c1d2e3f405162738495a6b7c8d9eaf";
const PASSWORD: &str = "a passphrase nobody logs";

#[test]
fn on_the_shipped_config_cross_site_and_rebinding_requests_change_nothing_and_reload_is_off() {
    let d = Daemon::start_with(&sample_config_on_port_0());
    let failures = b"{\"failure\": 10}";
    let outcomes = "/api/v1/breakers/checkout/outcomes";
    // A form on another site posting text/plain (no preflight needed).
    let r = http(
        d.http,
        "POST",
        outcomes,
        &[
            ("Origin", "http://evil.example"),
            ("Content-Type", "text/plain"),
        ],
        failures,
    );
    assert_eq!(r.status, 403, "{}", r.text());
    // The same page after rebinding evil.example to 127.0.0.1.
    let r = http(
        d.http,
        "POST",
        outcomes,
        &[
            ("Host", "evil.example:9102"),
            ("Content-Type", "application/json"),
        ],
        failures,
    );
    assert_eq!(r.status, 403, "{}", r.text());
    let r = http(
        d.http,
        "GET",
        "/metrics",
        &[("Host", "evil.example:9102")],
        b"",
    );
    assert_eq!(r.status, 403);
    // A JSON route with a text body.
    let r = d.post(outcomes, "text/plain", failures);
    assert_eq!(r.status, 415, "{}", r.text());
    // Nothing moved the breaker.
    let b = d.get("/api/v1/breakers/checkout", &[]).text();
    assert!(
        b.contains("\"state\":\"closed\"") && b.contains("\"failures\":0"),
        "{b}"
    );
    // The lifecycle API is off; SIGHUP reloads.
    let r = d.post("/-/reload", "", b"");
    assert_eq!(r.status, 403, "{}", r.text());
    let s = d.scrape();
    for (reason, n) in [
        ("origin_not_allowed", 1.0),
        ("host_not_allowed", 2.0),
        ("unsupported_media_type", 1.0),
        ("route_group_off", 1.0),
    ] {
        assert_eq!(
            s.must(
                "rollstat_http_requests_refused_total",
                &[("reason", reason)]
            ),
            n,
            "{reason}"
        );
    }
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the SIGHUP reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "ok")]) == Some(1.0)
    });
    // The daemon's own page still works, with its policy.
    let r = d.get("/", &[]);
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-security-policy")
            .is_some_and(|c| c.contains("frame-ancestors 'none'")),
        "{:?}",
        r.headers
    );
}

#[test]
fn protected_groups_take_tokens_and_bcrypt_users_from_files_and_never_log_them() {
    let dir = TempDir::new("rollstat-it-access");
    let tokens = dir.path().join("write.tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let users = dir.path().join("users");
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    std::fs::write(&users, format!("prometheus:{hash}\n")).unwrap();
    let cfg = format!(
        "{TEST_CONFIG}\n[http.auth.read]\naccess = \"protected\"\nusers_file = \"{}\"\n\
         [http.auth.write]\naccess = \"protected\"\ntokens_file = \"{}\"\n",
        users.display(),
        tokens.display()
    );
    // TEST_CONFIG opens the admin group; this test protects read and write.
    let d = Daemon::start_with(&cfg);
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("prometheus:{PASSWORD}"))
    );
    let bearer = format!("Bearer {TOKEN}");
    // Reads: a user; writes: a token.
    let r = d.get("/metrics", &[]);
    assert_eq!(r.status, 401);
    assert!(r
        .header("www-authenticate")
        .is_some_and(|w| w.starts_with("Basic")));
    let r = d.get("/metrics", &[("Authorization", &basic)]);
    assert_eq!(r.status, 200);
    let ingest = |auth: &[(&str, &str)]| {
        let mut h = vec![("Content-Type", "text/plain")];
        h.extend_from_slice(auth);
        http(
            d.http,
            "POST",
            "/api/v1/ingest",
            &h,
            b"protected.hits:1|c\n",
        )
    };
    assert_eq!(ingest(&[]).status, 401);
    assert_eq!(
        ingest(&[("Authorization", "Bearer not-the-token-at-all-0000")]).status,
        401
    );
    assert_eq!(
        ingest(&[("Authorization", &basic)]).status,
        401,
        "a read user cannot write"
    );
    assert_eq!(ingest(&[("Authorization", &bearer)]).status, 200);
    let m = http(d.http, "GET", "/metrics", &[("Authorization", &basic)], b"").text();
    assert!(m.contains("protected_hits_total 1"), "{m}");
    assert!(
        m.contains("rollstat_http_requests_refused_total{reason=\"bad_credentials\"} 2"),
        "{m}"
    );
    // /healthz stays open for probes.
    assert_eq!(d.get("/healthz", &[]).status, 200);
    let log = d.log();
    for secret in [TOKEN, PASSWORD, &hash] {
        assert!(!log.contains(secret), "the log shows a secret:\n{log}");
    }
}
