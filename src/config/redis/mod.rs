//! `[redis]`: how to reach the shared store (one server or a cluster), as
//! whom (username, password from a file or an environment variable), over
//! what (TLS files), its deadline, sync interval and key prefix, read into
//! [`RedisConfig`] (the store's type). Reading and checking them is the
//! config's job, so that `check-config` finds every problem it can before
//! a start:
//!
//! * `address.rs`: each URL checked as the Redis client reads it, its
//!   credentials taken out.
//! * `secret.rs`: the password read from `password_file` or `password_env`.
//! * `tls_files.rs`: the PEM files of `ca_file`, `client_cert_file` and
//!   `client_key_file`, read and checked.
//!
//! Credentials never stay in a URL: `redis://user:pass@host` is kept as
//! `redis://host` with [`RedisConfig::username`] and
//! [`RedisConfig::password`].

mod address;
mod secret;
mod tls_files;

use std::path::Path;
use std::time::Duration;

use self::address::Address;
use self::tls_files::Holds;
use super::reader::{Problems, Table};
use super::windows::valid_label_value;
use crate::store::{
    redact_url, ClientIdentity, Password, RedisConfig, RedisTarget, RedisTls, Secret,
};

/// What the URLs of the target say, once checked.
struct Target {
    target: RedisTarget,
    tls: bool,
    /// (username, password, offset of the URL that gave them).
    username: Option<(String, usize)>,
    password: Option<(String, usize)>,
    /// The key that holds the URL(s): `redis.url` or `redis.cluster_nodes`.
    key: String,
}

/// Reads `[redis]`: the target, credentials, TLS files, deadlines.
pub(super) fn read_redis(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<RedisConfig> {
    let target = read_target(t, p);
    let mut cfg = RedisConfig::url(String::new());
    if let Some(ms) = t.int(p, "timeout_ms", 1, 60_000) {
        cfg.timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = t.int(p, "sync_interval_ms", 10, 3_600_000) {
        cfg.sync_interval = Duration::from_millis(ms);
    }
    if let Some(ms) = t.int(p, "sync_timeout_ms", 1, 60_000) {
        cfg.sync_timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = t.int(p, "final_sync_timeout_ms", 1, 60_000) {
        cfg.final_sync_timeout = Duration::from_millis(ms);
    }
    if let Some(n) = t.int(p, "max_shared_series", 1, 10_000_000) {
        cfg.max_shared_series = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(n) = t.int(p, "max_shared_label_bytes", 16, 1_048_576) {
        cfg.max_shared_label_bytes = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(n) = t.int(p, "max_shared_bins", 16, 4097) {
        cfg.max_shared_bins = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some((s, off)) = t.string(p, "key_prefix") {
        if valid_label_value(&s) {
            cfg.key_prefix = s;
        } else {
            p.at(
                off,
                &t.key_path("key_prefix"),
                "use 1-32 letters, digits, '_', '.' or '-'",
            );
        }
    }
    let credentials = read_credentials(t, p, target.as_ref());
    let tls = read_tls(t, p, target.as_ref());
    let target = target?;
    let (username, password) = credentials?;
    cfg.target = target.target;
    cfg.username = username;
    cfg.password = password;
    cfg.tls = tls?;
    Some(cfg)
}

/// `url` or `cluster_nodes`, each URL checked; a cluster's nodes must agree.
fn read_target(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<Target> {
    let url = t.string(p, "url");
    let nodes = t.strings(p, "cluster_nodes");
    let check = |p: &mut Problems<'_>, key: &str, s: &str, off: usize| match address::parse(s) {
        Ok(a) => Some(a),
        Err(e) => {
            p.at(off, key, format!("`{}` {e}", redact_url(s)));
            None
        }
    };
    match (url, nodes) {
        (Some((u, off)), None) => {
            let key = t.key_path("url");
            let a = check(p, &key, &u, off)?;
            Some(Target {
                tls: a.tls,
                username: a.username.map(|u| (u, off)),
                password: a.password.map(|pw| (pw, off)),
                target: RedisTarget::Url(a.url),
                key,
            })
        }
        (None, Some(ns)) if !ns.is_empty() => {
            let key = t.key_path("cluster_nodes");
            let parsed: Vec<(Address, usize)> = ns
                .iter()
                .filter_map(|(n, off)| check(p, &key, n, *off).map(|a| (a, *off)))
                .collect();
            if parsed.len() != ns.len() {
                return None;
            }
            cluster(p, &key, parsed)
        }
        (Some((_, off)), Some(_)) => {
            p.at(
                off,
                &t.key_path("url"),
                "give `url` (one server) or `cluster_nodes` (Redis Cluster), not both",
            );
            None
        }
        _ => {
            p.at(t.start(), &t.key_path("url"), "`[redis]` needs `url = \"redis://host:port\"` or `cluster_nodes = [\"redis://host:port\", ...]`");
            None
        }
    }
}

/// The seed nodes of a cluster, which the client requires to agree on TLS,
/// credentials and protocol; a cluster has only database 0 and no Unix
/// sockets.
fn cluster(p: &mut Problems<'_>, key: &str, nodes: Vec<(Address, usize)>) -> Option<Target> {
    let mut ok = true;
    let (first, _) = &nodes[0];
    let (tls, protocol) = (first.tls, first.protocol);
    let mut username: Option<(String, usize)> = None;
    let mut password: Option<(String, usize)> = None;
    for (a, off) in &nodes {
        let mut problem = |m: &str| {
            p.at(*off, key, format!("`{}`: {m}", redact_url(&a.url)));
            ok = false;
        };
        if a.unix {
            problem("a cluster is reached over TCP (the nodes announce IP addresses); use redis:// or rediss://");
            continue;
        }
        if a.tls != tls {
            problem("mixes redis:// and rediss:// nodes; use one scheme for every node");
        }
        if a.protocol != protocol {
            problem("asks for another protocol than the first node; give every node the same `protocol`");
        }
        if a.db != 0 {
            problem("names a database, but Redis Cluster has only database 0; remove the `/db`");
        }
        for (got, seen, what) in [
            (&a.username, &mut username, "username"),
            (&a.password, &mut password, "password"),
        ] {
            match (got, seen.as_ref()) {
                (Some(g), Some((s, _))) if g != s => problem(&format!(
                    "has another {what} than an earlier node; the client uses one for every node (better: `redis.username` and `redis.password_file`)"
                )),
                (Some(g), None) => *seen = Some((g.clone(), *off)),
                _ => {}
            }
        }
    }
    ok.then(|| Target {
        tls,
        username,
        password,
        target: RedisTarget::Cluster(nodes.into_iter().map(|(a, _)| a.url).collect()),
        key: key.to_string(),
    })
}

/// `username`, `password_file`, `password_env` and the URL's credentials:
/// one username at most, one password source at most, and no username
/// without a password. `None` if something is wrong.
#[allow(clippy::type_complexity)]
fn read_credentials(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    target: Option<&Target>,
) -> Option<(Option<String>, Option<Password>)> {
    let mut ok = true;
    let from_url = |x: Option<&(String, usize)>| x.cloned();
    let url_key = target.map_or_else(|| t.key_path("url"), |x| x.key.clone());
    let url_user = target.and_then(|x| from_url(x.username.as_ref()));
    let url_pass = target.and_then(|x| from_url(x.password.as_ref()));

    // The username.
    let mut username = url_user.clone().map(|(u, _)| u);
    let mut user_at = url_user.as_ref().map(|(_, off)| (*off, url_key.clone()));
    if let Some((u, off)) = t.string(p, "username") {
        let key = t.key_path("username");
        if url_user.is_some() {
            p.at(off, &key, format!("the username is also given in `{url_key}`; give it once (here, and remove it from the URL)"));
            ok = false;
        } else if u.is_empty() || u.chars().any(|c| c.is_whitespace() || c.is_control()) {
            p.at(off, &key, "a Redis username is a non-empty word without spaces (the ACL user, e.g. \"rollstat\")");
            ok = false;
        } else {
            username = Some(u);
            user_at = Some((off, key));
        }
    }

    // The password: from the URL, a file or a variable; one at most.
    let mut sources: Vec<(usize, String, Result<Secret, String>, String)> = Vec::new();
    if let Some((pw, off)) = url_pass {
        sources.push((off, url_key.clone(), Ok(Secret::new(pw)), "the URL".into()));
    }
    if let Some((path, off)) = t.string(p, "password_file") {
        let key = t.key_path("password_file");
        let source = format!("{key} ({path})");
        let r = if path.is_empty() {
            Err("give the path of a file that holds the password".into())
        } else {
            secret::from_file(Path::new(&path))
        };
        sources.push((off, key, r, source));
    }
    if let Some((name, off)) = t.string(p, "password_env") {
        let key = t.key_path("password_env");
        let r = secret::from_env(&name);
        let source = if r.is_ok() {
            format!("{key} ({name})")
        } else {
            key.clone()
        };
        sources.push((off, key, r, source));
    }
    let mut password = None;
    for (i, (off, key, r, source)) in sources.iter().enumerate() {
        if i > 0 {
            let first = &sources[0].1;
            p.at(*off, key, format!("the password is also given by `{first}`; give it one way only (a file or an environment variable, not in the URL)"));
            ok = false;
            continue;
        }
        match r {
            Ok(s) => {
                password = Some(Password {
                    secret: s.clone(),
                    source: source.clone(),
                });
            }
            Err(e) => {
                p.at(*off, key, e.clone());
                ok = false;
            }
        }
    }
    if password.is_none() && ok {
        if let Some((off, key)) = user_at {
            p.at(off, &key, "a username needs a password: add `password_file` (a file holding it) or `password_env` (the variable holding it)");
            ok = false;
        }
    }
    ok.then_some((username, password))
}

/// `ca_file`, `client_cert_file` and `client_key_file`: read, checked, and
/// only with a `rediss://` target.
fn read_tls(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    target: Option<&Target>,
) -> Option<RedisTls> {
    let mut ok = true;
    let mut file = |t: &mut Table<'_, '_>, p: &mut Problems<'_>, key: &str, what: Holds| {
        let (path, off) = t.string(p, key)?;
        let key = t.key_path(key);
        if let Some(target) = target.filter(|x| !x.tls) {
            p.at(off, &key, format!("is for TLS, but `{}` is not rediss://; use rediss:// (and the server's TLS port) or remove this key", target.key));
            ok = false;
            return None;
        }
        let r = if path.is_empty() {
            Err("give the path of a PEM file".to_string())
        } else {
            tls_files::read(Path::new(&path), what)
        };
        match r {
            Ok(f) => Some((f, off, key)),
            Err(e) => {
                p.at(off, &key, e);
                ok = false;
                None
            }
        }
    };
    let ca = file(t, p, "ca_file", Holds::Certificates);
    let cert = file(t, p, "client_cert_file", Holds::Certificates);
    let key = file(t, p, "client_key_file", Holds::PrivateKey);
    let client = match (cert, key) {
        (Some((cert, ..)), Some((key, ..))) => Some(ClientIdentity { cert, key }),
        (Some((_, off, k)), None) => {
            if t.raw("client_key_file").is_none() {
                p.at(
                    off,
                    &k,
                    "a client certificate needs its key: add `client_key_file`",
                );
            }
            ok = false;
            None
        }
        (None, Some((_, off, k))) => {
            if t.raw("client_cert_file").is_none() {
                p.at(
                    off,
                    &k,
                    "a client key needs its certificate: add `client_cert_file`",
                );
            }
            ok = false;
            None
        }
        (None, None) => None,
    };
    ok.then(|| RedisTls {
        ca: ca.map(|x| x.0),
        client,
    })
}

#[cfg(test)]
mod tests;

pub(super) const KEYS: &[&str] = &[
    "url",
    "cluster_nodes",
    "timeout_ms",
    "sync_interval_ms",
    "sync_timeout_ms",
    "final_sync_timeout_ms",
    "key_prefix",
    "username",
    "password_file",
    "password_env",
    "ca_file",
    "client_cert_file",
    "client_key_file",
    "max_shared_series",
    "max_shared_label_bytes",
    "max_shared_bins",
];
