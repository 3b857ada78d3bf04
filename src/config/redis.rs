//! `[redis]`: how to reach the shared store (one server or a cluster), its
//! deadline, sync interval and key prefix. The shared store takes
//! these values; reading and checking them is the config's job.

use std::time::Duration;

use super::reader::{Problems, Table};
use super::valid_label_value;

/// Which Redis to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisTarget {
    /// One server (or a proxy): `redis://host:port/db`.
    Url(String),
    /// Redis Cluster seed nodes: `redis://host:port` each.
    Cluster(Vec<String>),
}

/// How to reach Redis, validated by the config reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisConfig {
    /// Server or cluster.
    pub target: RedisTarget,
    /// Deadline of every call, connection and retries included.
    pub timeout: Duration,
    /// How often shared windows push their deltas and read the fleet view.
    pub sync_interval: Duration,
    /// Prefix of every key (default `rollstat`).
    pub key_prefix: String,
}

impl RedisConfig {
    /// A single server at `url`, with a 100 ms deadline, a 100 ms sync
    /// interval and the `rollstat` key prefix.
    #[must_use]
    pub fn url(url: impl Into<String>) -> Self {
        RedisConfig {
            target: RedisTarget::Url(url.into()),
            timeout: Duration::from_millis(100),
            sync_interval: Duration::from_millis(100),
            key_prefix: "rollstat".to_string(),
        }
    }
}

/// Reads `[redis]`: `url` or `cluster_nodes`, deadlines, sync interval.
pub(super) fn read_redis(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<RedisConfig> {
    let url = t.string(p, "url");
    let nodes = t.strings(p, "cluster_nodes");
    let check = |p: &mut Problems<'_>, key: &str, s: &str, off: usize| {
        let ok =
            s.starts_with("redis://") || s.starts_with("rediss://") || s.starts_with("unix://");
        if !ok {
            p.at(
                off,
                key,
                format!("`{s}` is not a Redis URL; use e.g. \"redis://127.0.0.1:6379\""),
            );
        }
        ok
    };
    let target = match (url, nodes) {
        (Some((u, off)), None) => {
            check(p, &t.key_path("url"), &u, off).then_some(RedisTarget::Url(u))
        }
        (None, Some(ns)) if !ns.is_empty() => {
            let key = t.key_path("cluster_nodes");
            let all_ok = ns
                .iter()
                .fold(true, |ok, (n, off)| check(p, &key, n, *off) && ok);
            all_ok.then(|| RedisTarget::Cluster(ns.into_iter().map(|x| x.0).collect()))
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
    };
    let mut cfg = RedisConfig::url(String::new());
    if let Some(ms) = t.int(p, "timeout_ms", 1, 60_000) {
        cfg.timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = t.int(p, "sync_interval_ms", 10, 3_600_000) {
        cfg.sync_interval = Duration::from_millis(ms);
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
    cfg.target = target?;
    Some(cfg)
}
