//! Redis as production runs it: a password, an ACL user, TLS;
//! against real `redis-server` processes started on free loopback ports
//! ([`crate::redis_server`]).
//!
//! * `requirepass`: the password from `redis.password_file` opens the
//!   server; a wrong one (from a file or in the URL) gives
//!   `rollstat_store_up 0`, a caller sees only "the shared store is
//!   unavailable" with a stable reason, and neither password ever appears in
//!   the daemon's stderr, `/metrics` or an HTTP body.
//! * An ACL user limited to `~rollstat:*` and the commands rollstat sends,
//!   with `redis.username` and `redis.password_env`: shared limits (both
//!   algorithms) and a shared window work and every key is under the prefix;
//!   another key prefix is refused by the server (`reason: denied`).
//! * TLS only (`--port 0 --tls-port`), certificates made with rcgen: a
//!   server requiring a client certificate, with `ca_file`,
//!   `client_cert_file` and `client_key_file`, decides shared limits
//!   (`"source": "redis"`); a CA that did not sign the server's certificate
//!   keeps the store down; a three-node TLS cluster shares a limit.
//! * `check-config` refuses what would fail at start (a key that does not
//!   match its certificate, a password given twice, `#insecure`) and never
//!   prints a password.

use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::redis::config;
use crate::redis_server::{have_redis, Cluster, Pki, Redis, ServerTls};
use crate::support::{free_port, run, wait_true, Daemon, TempDir};

/// A password nobody could guess in a log by chance.
fn secret(tag: &str) -> String {
    let n = RandomState::new().hash_one((tag, std::process::id()));
    format!("{tag}-{n:016x}")
}

/// Writes `text` to `dir/name`; its path as TOML-ready text.
fn file(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Two shared limits that fail closed: `api` (the exact log) and `approx`
/// (the approximate counter).
const LIMITS: &str = r#"
[[limits]]
name = "api"
shared = true
on_store_error = "deny"
rules = [{ max = 100, window_ms = 1000 }]

[[limits]]
name = "approx"
algorithm = "approximate"
shared = true
on_store_error = "deny"
rules = [{ max = 100, window_ms = 1000 }]
"#;

/// One acquire on `limit` for `key`: (status, body).
fn acquire(d: &Daemon, limit: &str, key: &str) -> (u16, String) {
    let r = d.post(
        &format!("/api/v1/limits/{limit}/acquire"),
        "application/json",
        format!("{{\"key\": \"{key}\"}}").as_bytes(),
    );
    (r.status, r.text())
}

/// The log line of the failure that marked the store down.
fn failure_line(d: &Daemon) -> String {
    d.log()
        .lines()
        .find(|l| l.contains("The shared store (Redis) failed"))
        .unwrap_or_default()
        .to_string()
}

/// Every text the daemon shows: its stderr, a scrape, the limits API and
/// one acquire answer.
fn everything_shown(d: &Daemon) -> String {
    [
        d.log(),
        d.get("/metrics", &[]).text(),
        d.get("/api/v1/limits", &[]).text(),
        acquire(d, "api", "shown").1,
    ]
    .join("\n")
}

fn assert_hidden(shown: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(!shown.contains(s), "a password is shown:\n{shown}");
    }
}

#[test]
fn requirepass_the_password_from_a_file_opens_the_server_and_a_wrong_one_is_never_shown() {
    if !have_redis() {
        return;
    }
    let (right, wrong) = (secret("right"), secret("wrong"));
    let redis = Redis::start_full(free_port(), Vec::new(), None, Some(right.clone()));
    let dir = TempDir::new("redis-pw");
    let right_file = file(dir.path(), "right", &format!("{right}\n"));
    let wrong_file = file(dir.path(), "wrong", &format!("{wrong}\r\n"));
    let url = redis.url();

    let d = Daemon::start_with(&config(
        &format!("url = \"{url}\"\npassword_file = \"{right_file}\""),
        LIMITS,
    ));
    for limit in ["api", "approx"] {
        let (code, body) = acquire(&d, limit, "alice");
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("\"source\":\"redis\""), "{body}");
    }
    wait_true(Duration::from_secs(5), "rollstat_store_up 1", || {
        d.metric("rollstat_store_up ") == Some(1.0)
    });
    assert_ne!(redis.cli_command(&["DBSIZE"]), "0");
    assert_hidden(&everything_shown(&d), &[&right]);

    // A wrong password, from a file and in the URL.
    let port = redis.port;
    for (how, section) in [
        (
            "file",
            format!("url = \"{url}\"\npassword_file = \"{wrong_file}\""),
        ),
        (
            "url",
            format!("url = \"redis://:{wrong}@127.0.0.1:{port}\""),
        ),
    ] {
        let d = Daemon::start_with(&config(&section, LIMITS));
        let (code, body) = acquire(&d, "api", "bob");
        assert_eq!(code, 503, "{how}: {body}");
        assert!(
            body.contains("the shared store is unavailable") && body.contains("auth"),
            "{how}: the answer should say why, without the client's text: {body}"
        );
        wait_true(Duration::from_secs(5), "rollstat_store_up 0", || {
            d.metric("rollstat_store_up ") == Some(0.0)
        });
        wait_true(Duration::from_secs(5), "the failure's log line", || {
            d.log().contains("reason=\"auth\"")
        });
        let shown = everything_shown(&d);
        assert_hidden(&shown, &[&right, &wrong]);
        println!("wrong password ({how}): {body}\n  {}", failure_line(&d));
        if how == "file" {
            assert!(
                shown.contains("redis.password_file"),
                "the hint names the key: {shown}"
            );
        }
    }
    assert_eq!(redis.cli_command(&["PING"]), "PONG");
}

#[test]
fn an_acl_user_from_password_env_works_within_its_key_prefix_and_is_refused_outside() {
    if !have_redis() {
        return;
    }
    let (admin, user_pw) = (secret("admin"), secret("user"));
    // The commands rollstat sends, and those its Lua scripts call, as the
    // store lists them (one argument each: redis-server joins them into
    // the `user` directive).
    let acl = format!(
        "rollstat on >{user_pw} ~rollstat:* resetchannels -@all {}",
        rollstat::store::redis::ACL_COMMANDS
    );
    let mut args = vec!["--user".to_string()];
    args.extend(acl.split(' ').filter(|a| !a.is_empty()).map(String::from));
    let redis = Redis::start_full(free_port(), args, None, Some(admin.clone()));
    let env = format!("ROLLSTAT_IT_REDIS_PASSWORD={user_pw}");
    let section = |prefix: &str| {
        format!(
            "url = \"{}\"\nusername = \"rollstat\"\npassword_env = \"ROLLSTAT_IT_REDIS_PASSWORD\"\n\
             key_prefix = \"{prefix}\"\ntimeout_ms = 300\nsync_interval_ms = 100",
            redis.url()
        )
    };
    let shared_window = r#"
[[windows]]
name = "w"
buckets = 10
interval_ms = 1000

[[mappings]]
match = "api.requests"
shared = true
"#;
    let d = Daemon::start_wrapped(
        &config(&section("rollstat"), &format!("{LIMITS}{shared_window}")),
        &["env", &env],
    );
    for limit in ["api", "approx"] {
        let (code, body) = acquire(&d, limit, "carol");
        assert_eq!(code, 200, "{limit}: {body}");
        assert!(body.contains("\"source\":\"redis\""), "{body}");
    }
    d.send_udp(b"api.requests:1|c\napi.requests:1|c\napi.requests:1|c");
    wait_true(
        Duration::from_secs(10),
        "the fleet view of the shared window",
        || {
            d.metric("rollstat_fleet_window_samples{metric=\"api.requests\",window=\"w\"}")
                == Some(3.0)
        },
    );
    assert_eq!(d.metric("rollstat_store_up "), Some(1.0));
    let keys = redis.cli_command(&["--no-raw", "KEYS", "*"]);
    assert!(!keys.is_empty());
    for k in keys.lines() {
        assert!(k.contains("\"rollstat:"), "a key outside the prefix: {k}");
    }
    assert_eq!(redis.cli_command(&["ACL", "LOG"]), "", "nothing was denied");
    assert_hidden(&everything_shown(&d), &[&user_pw, &admin]);

    // The same user under another prefix: the server refuses the keys.
    let other = Daemon::start_wrapped(&config(&section("other"), LIMITS), &["env", &env]);
    let (code, body) = acquire(&other, "api", "dave");
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("denied"), "{body}");
    wait_true(Duration::from_secs(5), "the failure's log line", || {
        other.log().contains("reason=\"denied\"")
    });
    assert!(
        other.log().contains("other:*"),
        "the hint names the keys: {}",
        other.log()
    );
    assert_hidden(&everything_shown(&other), &[&user_pw, &admin]);
    println!("another prefix: {body}\n  {}", failure_line(&other));
}

/// The `[redis]` lines of a TLS target with the CA and client certificate
/// of `f`.
fn tls_section(target: &str, f: &ServerTls) -> String {
    format!(
        "{target}\nca_file = \"{}\"\nclient_cert_file = \"{}\"\nclient_key_file = \"{}\"\ntimeout_ms = 1000",
        f.ca.display(),
        f.client_cert.display(),
        f.client_key.display()
    )
}

/// `rollstat check-config` on `text`: its exit code and everything it
/// printed.
fn check_config(text: &str) -> (Option<i32>, String) {
    let dir = TempDir::new("redis-check");
    let path = dir.path().join("rollstat.toml");
    std::fs::write(&path, text).unwrap();
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("check-config")
            .arg(&path),
        b"",
        Duration::from_secs(10),
    );
    (out.status.code(), format!("{}{}", out.stdout, out.stderr))
}

#[test]
fn rediss_with_a_ca_file_and_a_client_certificate_decides_shared_limits() {
    if !have_redis() {
        return;
    }
    let dir = TempDir::new("redis-tls");
    let pki = Pki::new(dir.path());
    let redis = Redis::start_full(free_port(), Vec::new(), Some(pki.files.clone()), None);
    let cfg = config(
        &tls_section(&format!("url = \"{}\"", redis.url()), &pki.files),
        LIMITS,
    );
    let (code, text) = check_config(&cfg);
    assert_eq!(code, Some(0), "{text}");

    let d = Daemon::start_with(&cfg);
    for limit in ["api", "approx"] {
        for key in ["k1", "k2"] {
            let (code, body) = acquire(&d, limit, key);
            assert_eq!(code, 200, "{body}");
            assert!(body.contains("\"source\":\"redis\""), "{body}");
        }
    }
    assert_eq!(d.metric("rollstat_store_up "), Some(1.0));
    assert_ne!(redis.cli_command(&["DBSIZE"]), "0");

    // A CA that did not sign the server's certificate: the store stays down.
    let other_dir = TempDir::new("redis-tls-other");
    let other = Pki::new(other_dir.path());
    let mut wrong = pki.files.clone();
    wrong.ca = other.files.ca.clone();
    let bad = Daemon::start_with(&config(
        &tls_section(&format!("url = \"{}\"", redis.url()), &wrong),
        LIMITS,
    ));
    let (code, body) = acquire(&bad, "api", "k1");
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("connection"), "{body}");
    wait_true(Duration::from_secs(5), "rollstat_store_up 0", || {
        bad.metric("rollstat_store_up ") == Some(0.0)
    });
    assert!(bad.log().contains("redis.ca_file"), "{}", bad.log());
    println!("another CA: {body}\n  {}", failure_line(&bad));
}

#[test]
fn a_tls_cluster_shares_one_limit_over_rediss() {
    if !have_redis() {
        return;
    }
    let dir = TempDir::new("redis-tls-cluster");
    let pki = Pki::new(dir.path());
    let Some(cluster) = Cluster::start_full(Some(pki.files.clone())) else {
        return;
    };
    let nodes: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("\"{}\"", n.url()))
        .collect();
    let target = format!("cluster_nodes = [{}]", nodes.join(", "));
    assert!(target.contains("rediss://"));
    let d = Daemon::start_with(&config(&tls_section(&target, &pki.files), LIMITS));
    for k in 0..30 {
        let (code, body) = acquire(&d, "api", &format!("user{k}"));
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("\"source\":\"redis\""), "{body}");
    }
    assert_eq!(cluster.nodes_holding_keys(), 3, "keys on every node");
    assert_eq!(d.metric("rollstat_store_up "), Some(1.0));
}

#[test]
fn check_config_refuses_what_would_fail_at_start_and_never_prints_a_password() {
    let dir = TempDir::new("redis-check-bad");
    let (a, b) = (Pki::new(dir.path()), {
        let d = dir.path().join("b");
        std::fs::create_dir_all(&d).unwrap();
        Pki::new(&d)
    });
    let pw = secret("pw");
    let pw_file = file(dir.path(), "pw", &pw);
    let mismatched = format!(
        "url = \"rediss://127.0.0.1:6380\"\nca_file = \"{}\"\nclient_cert_file = \"{}\"\nclient_key_file = \"{}\"",
        a.files.ca.display(),
        a.files.client_cert.display(),
        b.files.client_key.display()
    );
    for (section, says) in [
        (mismatched.as_str(), "redis.client_key_file"),
        (
            &format!("url = \"redis://u:{pw}@127.0.0.1:6379\"\npassword_file = \"{pw_file}\""),
            "line 9: `redis.password_file`",
        ),
        (
            &format!("url = \"rediss://:{pw}@127.0.0.1:6380/#insecure\""),
            "line 8: `redis.url`",
        ),
        (
            &format!(
                "url = \"redis://127.0.0.1:6379\"\nca_file = \"{}\"",
                a.files.ca.display()
            ),
            "line 9: `redis.ca_file`",
        ),
    ] {
        let (code, text) = check_config(&config(section, ""));
        assert_eq!(code, Some(2), "{section}\n{text}");
        assert!(text.contains(says), "{section}\n{text}");
        assert_hidden(&text, &[&pw]);
    }
}
