//! `[redis]` read from config text: every key, and every problem named with
//! its key and line, never quoting a password.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::Config;
use crate::store::{RedisConfig, RedisTarget};

/// A directory for this test's files, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d =
            std::env::temp_dir().join(format!("rollstat-redis-cfg-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    /// Writes `text` to `name` and returns its path as TOML-ready text.
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn redis(section: &str) -> RedisConfig {
    Config::parse(&format!("[redis]\n{section}\n"))
        .unwrap_or_else(|e| panic!("{section}\n{e}"))
        .redis
        .unwrap()
}

/// The problems of `[redis]` + `section`, as text.
fn problems(section: &str) -> String {
    match Config::parse(&format!("[redis]\n{section}\n")) {
        Ok(c) => panic!("accepted: {section}\n{:?}", c.redis),
        Err(e) => e.to_string(),
    }
}

/// A PEM file of `label` whose block is a DER SEQUENCE of `n` bytes.
fn pem(label: &str, n: u8) -> String {
    // 0x30 n, then n zero bytes: base64 of 3-byte groups.
    let mut der = vec![0x30, n];
    der.extend(std::iter::repeat_n(0, usize::from(n)));
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = String::new();
    for c in der.chunks(3) {
        let v = c
            .iter()
            .chain(std::iter::repeat(&0))
            .take(3)
            .fold(0u32, |a, &b| (a << 8) | u32::from(b));
        for i in 0..4 {
            b64.push(if i <= c.len() {
                A[((v >> (18 - 6 * i)) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    format!("-----BEGIN {label}-----\n{b64}\n-----END {label}-----\n")
}

#[test]
fn defaults_and_plain_keys() {
    let r = redis("url = \"redis://127.0.0.1:6379\"");
    assert_eq!(r, RedisConfig::url("redis://127.0.0.1:6379"));
    assert_eq!((r.username, r.password), (None, None));
    assert_eq!(r.tls, Default::default());
    let r = redis(
        "cluster_nodes = [\"redis://a:7000\", \"redis://b:7001\"]\ntimeout_ms = 250\nsync_interval_ms = 500\nsync_timeout_ms = 750\nfinal_sync_timeout_ms = 3000\nkey_prefix = \"fleet-1\"\nmax_shared_series = 50\nmax_shared_label_bytes = 300",
    );
    assert_eq!(
        r.target,
        RedisTarget::Cluster(vec!["redis://a:7000".into(), "redis://b:7001".into()])
    );
    assert_eq!(r.timeout, Duration::from_millis(250));
    assert_eq!(r.sync_interval, Duration::from_millis(500));
    assert_eq!(r.sync_timeout, Duration::from_millis(750));
    assert_eq!(r.final_sync_timeout, Duration::from_millis(3000));
    assert_eq!((r.max_shared_series, r.max_shared_label_bytes), (50, 300));
    assert_eq!(r.key_prefix, "fleet-1");
}

#[test]
fn credentials_in_the_url_move_out_of_it_and_never_print() {
    let r = redis("url = \"redis://app:s3cr%2Ft@10.0.0.1:6379/2\"");
    assert_eq!(r.target, RedisTarget::Url("redis://10.0.0.1:6379/2".into()));
    assert_eq!(r.username.as_deref(), Some("app"));
    let pw = r.password.clone().unwrap();
    assert_eq!(pw.secret.expose(), "s3cr/t");
    assert_eq!(pw.source, "the URL");
    let debug = format!("{r:?}");
    assert!(!debug.contains("s3cr"), "{debug}");
    // A cluster's credentials, the same on every node that gives them.
    let r = redis(
        "cluster_nodes = [\"redis://:pw@a:7000\", \"redis://b:7001\", \"redis://:pw@c:7002\"]",
    );
    assert_eq!(r.password.unwrap().secret.expose(), "pw");
    assert_eq!(
        r.target,
        RedisTarget::Cluster(vec![
            "redis://a:7000".into(),
            "redis://b:7001".into(),
            "redis://c:7002".into()
        ])
    );
    // A target made in code keeps its URL, but prints it redacted.
    let c = RedisConfig::url("redis://u:hunter2@h:1");
    assert!(!format!("{c:?}").contains("hunter2"));
    assert_eq!(c.target.describe(), "`redis://u:***@h:1`");
}

#[test]
fn username_and_password_from_a_file() {
    let d = Dir::new("file");
    let f = d.file("pw", "from-file\n");
    let r = redis(&format!(
        "url = \"redis://h:6379\"\nusername = \"rollstat\"\npassword_file = \"{f}\""
    ));
    assert_eq!(r.username.as_deref(), Some("rollstat"));
    let pw = r.password.unwrap();
    assert_eq!(pw.secret.expose(), "from-file");
    assert_eq!(pw.source, format!("redis.password_file ({f})"));
    // A password alone is the `default` user's (requirepass).
    let r = redis(&format!(
        "url = \"redis://h:6379\"\npassword_file = \"{f}\""
    ));
    assert_eq!(r.username, None);
    assert!(r.password.is_some());
}

#[test]
fn password_from_the_environment() {
    std::env::set_var("ROLLSTAT_TEST_REDIS_CFG_PW", "from-env");
    let r = redis(
        "cluster_nodes = [\"redis://a:7000\"]\nusername = \"app\"\npassword_env = \"ROLLSTAT_TEST_REDIS_CFG_PW\"",
    );
    let pw = r.password.unwrap();
    assert_eq!(pw.secret.expose(), "from-env");
    assert_eq!(pw.source, "redis.password_env (ROLLSTAT_TEST_REDIS_CFG_PW)");
    let e = problems("url = \"redis://h\"\n\npassword_env = \"ROLLSTAT_TEST_REDIS_CFG_UNSET\"");
    assert!(
        e.contains("line 4: `redis.password_env`") && e.contains("is not set"),
        "{e}"
    );
}

#[test]
fn tls_files_are_read_with_a_rediss_target() {
    let d = Dir::new("tls");
    let ca = d.file("ca.pem", &pem("CERTIFICATE", 40));
    let cert = d.file("client.pem", &pem("CERTIFICATE", 50));
    let key = d.file("client.key", &pem("PRIVATE KEY", 60));
    let r = redis(&format!(
        "url = \"rediss://cache:6380\"\nca_file = \"{ca}\"\nclient_cert_file = \"{cert}\"\nclient_key_file = \"{key}\""
    ));
    assert!(r.target.is_tls());
    assert_eq!(r.tls.ca.as_ref().unwrap().path, PathBuf::from(&ca));
    let client = r.tls.client.as_ref().unwrap();
    assert_eq!(client.cert.pem, pem("CERTIFICATE", 50).into_bytes());
    assert_eq!(client.key.path, PathBuf::from(&key));
    assert!(!format!("{r:?}").contains("BEGIN"), "file bytes in Debug");
    // The CA alone (the server does not ask for a client certificate).
    let r = redis(&format!(
        "cluster_nodes = [\"rediss://a:7000\", \"rediss://b:7000\"]\nca_file = \"{ca}\""
    ));
    assert!(r.tls.ca.is_some() && r.tls.client.is_none());
    // rediss:// without files: the system's roots.
    assert_eq!(
        redis("url = \"rediss://cache:6380\"").tls,
        Default::default()
    );
}

#[test]
fn every_problem_names_its_key_and_line() {
    let d = Dir::new("problems");
    let pw = d.file("pw", "pa55\n");
    let empty = d.file("empty", "\n");
    let ca = d.file("ca.pem", &pem("CERTIFICATE", 40));
    let key = d.file("k.pem", &pem("PRIVATE KEY", 40));
    let bad = d.file("bad.pem", "not pem\n");
    let missing = d.path("missing.pem");
    std::env::set_var("ROLLSTAT_TEST_REDIS_CFG_PW2", "x");
    for (section, line, key_path, says) in [
        ("url = \"127.0.0.1:6379\"", 2, "redis.url", "redis://127.0.0.1:6379"),
        ("url = \"http://h\"", 2, "redis.url", "scheme `http`"),
        ("url = \"redis://h/#insecure\"", 2, "redis.url", "redis.ca_file"),
        ("url = \"redis://h/?db=2\"", 2, "redis.url", "parameter `db`"),
        ("cluster_nodes = [\"redis://a:1\",\n \"rediss://b:2\"]", 3, "redis.cluster_nodes", "mixes redis:// and rediss://"),
        ("cluster_nodes = [\"unix:///s.sock\"]", 2, "redis.cluster_nodes", "over TCP"),
        ("cluster_nodes = [\"redis://a:1/3\"]", 2, "redis.cluster_nodes", "only database 0"),
        ("cluster_nodes = [\"redis://a:1\", \"redis://b:1/?protocol=3\"]", 2, "redis.cluster_nodes", "another protocol"),
        ("cluster_nodes = [\"redis://:x@a:1\", \"redis://:y@b:1\"]", 2, "redis.cluster_nodes", "another password"),
        ("cluster_nodes = [\"redis://u:x@a:1\", \"redis://v:x@b:1\"]", 2, "redis.cluster_nodes", "another username"),
        ("url = \"redis://h\"\ncluster_nodes = [\"redis://a:1\"]", 2, "redis.url", "not both"),
        ("timeout_ms = 5", 1, "redis.url", "needs `url"),
        ("url = \"redis://h\"\nsync_timeout_ms = 0", 3, "redis.sync_timeout_ms", ""),
        ("url = \"redis://h\"\nfinal_sync_timeout_ms = 60001", 3, "redis.final_sync_timeout_ms", ""),
        ("url = \"redis://h\"\nmax_shared_series = 0", 3, "redis.max_shared_series", ""),
        ("url = \"redis://h\"\nmax_shared_label_bytes = \"big\"", 3, "redis.max_shared_label_bytes", ""),
        ("url = \"redis://h\"\nusername = \"app\"", 3, "redis.username", "needs a password"),
        ("url = \"redis://app@h\"", 2, "redis.url", "needs a password"),
        ("url = \"redis://u:p@h\"\nusername = \"app\"", 3, "redis.username", "also given in `redis.url`"),
        ("url = \"redis://h\"\nusername = \"two words\"\npassword_env = \"ROLLSTAT_TEST_REDIS_CFG_PW2\"", 3, "redis.username", "non-empty word"),
        (&format!("url = \"redis://:p@h\"\npassword_file = \"{pw}\""), 3, "redis.password_file", "also given by `redis.url`"),
        (&format!("url = \"redis://h\"\npassword_file = \"{pw}\"\npassword_env = \"ROLLSTAT_TEST_REDIS_CFG_PW2\""), 4, "redis.password_env", "also given by `redis.password_file`"),
        (&format!("url = \"redis://h\"\npassword_file = \"{missing}\""), 3, "redis.password_file", "cannot read"),
        (&format!("url = \"redis://h\"\npassword_file = \"{empty}\""), 3, "redis.password_file", "is empty"),
        ("url = \"redis://h\"\npassword_file = \"\"", 3, "redis.password_file", "give the path"),
        ("url = \"redis://h\"\npassword_env = \"\"", 3, "redis.password_env", "not an environment variable name"),
        (&format!("url = \"redis://h\"\nca_file = \"{ca}\""), 3, "redis.ca_file", "not rediss://"),
        (&format!("url = \"unix:///s.sock\"\nclient_key_file = \"{key}\""), 3, "redis.client_key_file", "is for TLS"),
        (&format!("url = \"rediss://h\"\nca_file = \"{missing}\""), 3, "redis.ca_file", "cannot read"),
        (&format!("url = \"rediss://h\"\nca_file = \"{bad}\""), 3, "redis.ca_file", "holds no certificate"),
        (&format!("url = \"rediss://h\"\nca_file = \"{key}\""), 3, "redis.ca_file", "holds no certificate"),
        (&format!("url = \"rediss://h\"\nclient_cert_file = \"{ca}\""), 3, "redis.client_cert_file", "needs its key"),
        (&format!("url = \"rediss://h\"\nclient_key_file = \"{key}\""), 3, "redis.client_key_file", "needs its certificate"),
        (&format!("url = \"rediss://h\"\nclient_cert_file = \"{ca}\"\nclient_key_file = \"{ca}\""), 4, "redis.client_key_file", "holds no private key"),
        ("url = \"rediss://h\"\nca_file = \"\"", 3, "redis.ca_file", "give the path"),
        ("url = \"redis://h\"\npassword = \"pa55\"", 3, "redis.password", "unknown key"),
    ] {
        let e = problems(section);
        let want = format!("line {line}: `{key_path}`: ");
        assert!(
            e.lines().any(|l| l.contains(&want) && l.contains(says)),
            "{section}\nwant {want}... {says}\ngot:\n{e}"
        );
    }
}

#[test]
fn no_problem_quotes_a_password() {
    std::env::set_var("ROLLSTAT_TEST_REDIS_CFG_PW3", "pa55word");
    for section in [
        "url = \"redis://u:pa55word@h/x\"",
        "url = \"redis://u:pa55word@0.0.0.0\"",
        "url = \"http://u:pa55word@h\"",
        "url = \"redis://u:pa55word@h/#insecure\"",
        "cluster_nodes = [\"redis://:pa55word@a:1\", \"rediss://b:1\"]",
        "cluster_nodes = [\"unix:///s?pass=pa55word\"]",
        "url = \"redis://u:pa55word@h\"\nusername = \"v\"",
        "url = \"redis://:pa55word@h\"\npassword_env = \"ROLLSTAT_TEST_REDIS_CFG_PW3\"",
        "url = \"redis://h\"\npassword_env = \"pa55word\"",
        "url = \"redis://h\"\npassword_file = \"pa55word\"",
    ] {
        let e = problems(section);
        assert!(!e.contains("pa55word"), "{section}\n{e}");
    }
}
