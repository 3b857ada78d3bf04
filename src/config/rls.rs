//! `[rls]`: Envoy's rate-limit service, read into [`RlsSettings`]; its
//! `config_dir` read as envoyproxy/ratelimit reads its directory.

use std::path::PathBuf;
use std::time::Duration;

use super::compat::ratelimit;
use super::reader::{Problems, Table};
use super::store_use;
use crate::rls::settings::{ListenerCaps, RlsSettings};
use crate::series::NamedWindow;

pub(super) const KEYS: &[&str] = &[
    "grpc",
    "config_dir",
    "response_headers",
    "max_keys",
    "max_descriptors",
    "max_entries",
    "max_value_bytes",
    "max_request_bytes",
    "max_detailed_series",
    "max_connections",
    "max_streams_per_connection",
    "call_timeout_ms",
    "handshake_timeout_ms",
    "keepalive_interval_ms",
    "keepalive_timeout_ms",
    "max_connection_age_ms",
    "tls",
    "shared",
    "on_store_error",
    "approximate",
];

/// `[rls]`; `None` when `grpc` is unset or `""` (the service is off).
pub(super) fn read(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    redis_configured: bool,
    windows: &[NamedWindow],
) -> Option<RlsSettings> {
    let (grpc, at) = t.string(p, "grpc")?;
    if grpc.is_empty() {
        return None;
    }
    let Ok(addr) = grpc.parse() else {
        p.at(at, &t.key_path("grpc"), format!("`{grpc}` is not an IP:port address (e.g. \"127.0.0.1:8081\"; \"\" turns the service off)"));
        return None;
    };
    let mut s = RlsSettings::new(addr);
    s.windows = windows.to_vec();
    if let Some(b) = t.bool(p, "response_headers") {
        s.response_headers = b;
    }
    s.shared = store_use::read_shared(t, p, redis_configured, "a shared rate-limit service");
    s.on_store_error = store_use::read_on_store_error(t, p);
    let caps: [(&str, &mut usize, u64); 6] = [
        ("max_keys", &mut s.max_keys, 100_000_000),
        ("max_descriptors", &mut s.max_descriptors, 1024),
        ("max_entries", &mut s.max_entries, 256),
        ("max_value_bytes", &mut s.max_value_bytes, 65_536),
        ("max_request_bytes", &mut s.max_request_bytes, 16 << 20),
        ("max_detailed_series", &mut s.max_detailed_series, 1_000_000),
    ];
    for (key, field, max) in caps {
        if let Some(n) = t.int(p, key, 1, max) {
            *field = n as usize;
        }
    }
    read_listener(t, p, &mut s.listener);
    if let Some(mut tt) = t.table(p, "tls") {
        s.tls = super::http_tls::read_tls(&mut tt, p, crate::tls::TlsSource::Rls);
        tt.finish(p, super::http_tls::TLS_KEYS);
    }
    let mut dir_failed = false;
    if let Some((dir, at)) = t.string(p, "config_dir").filter(|(d, _)| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        match ratelimit::read_dir(&dir) {
            Ok(domains) => s.domains = domains,
            Err(problems) => {
                dir_failed = true;
                for problem in problems {
                    p.at(at, &t.key_path("config_dir"), problem.to_string());
                }
            }
        }
        s.config_dir = Some(dir);
    }
    read_approximate(t, p, &mut s, dir_failed);
    Some(s)
}

/// `approximate`: each entry a domain or a rule path of `config_dir`'s
/// files (not checked when they could not be read: that is said already),
/// and not with `shared = true` (shared rules are exact sliding logs in
/// Redis).
fn read_approximate(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    s: &mut RlsSettings,
    dir_failed: bool,
) {
    let Some(list) = t.strings(p, "approximate") else {
        return;
    };
    let domains = crate::rls::tree::Domains::new(&s.domains);
    let paths: Vec<&str> = domains.rules().map(|r| r.path.as_str()).collect();
    for (entry, at) in list {
        let covers = |path: &&str| {
            path.strip_prefix(entry.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        };
        if s.shared {
            p.at(at, &t.key_path("approximate"), "approximate rules are decided on this instance only; with `shared = true` every rule is an exact sliding log in Redis: remove `approximate` or `shared`");
        } else if !dir_failed && !paths.iter().any(covers) {
            p.at(at, &t.key_path("approximate"), format!("`{entry}` names no domain or rule of config_dir's files (a domain, or a rule's path such as `edge.api_key`, as the metrics name it)"));
        }
        s.approximate.push(entry);
    }
}

/// The listener's caps and deadlines (`max_connections` and the rest).
fn read_listener(t: &mut Table<'_, '_>, p: &mut Problems<'_>, l: &mut ListenerCaps) {
    if let Some(n) = t.int(p, "max_connections", 1, 1_000_000) {
        l.max_connections = n as usize;
    }
    // h2 takes up to 2^31 - 1; past this many a connection is no cap.
    if let Some(n) = t.int(p, "max_streams_per_connection", 1, 65_536) {
        l.max_streams_per_connection = n as u32;
    }
    for (key, field, max) in [
        ("call_timeout_ms", &mut l.call_timeout, 3_600_000),
        ("handshake_timeout_ms", &mut l.handshake_timeout, 3_600_000),
        (
            "keepalive_interval_ms",
            &mut l.keepalive_interval,
            86_400_000,
        ),
        ("keepalive_timeout_ms", &mut l.keepalive_timeout, 3_600_000),
    ] {
        if let Some(ms) = t.int(p, key, 1, max) {
            *field = Duration::from_millis(ms);
        }
    }
    // 0 (the default) is never; at most 30 days.
    if let Some(ms) = t.int(p, "max_connection_age_ms", 0, 2_592_000_000) {
        l.max_connection_age = (ms > 0).then(|| Duration::from_millis(ms));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::Config;
    use crate::rls::settings::ListenerCaps;

    fn listener(keys: &str) -> Result<ListenerCaps, String> {
        Config::parse(&format!("[rls]\ngrpc = \"127.0.0.1:0\"\n{keys}"))
            .map(|c| c.rls.unwrap().listener)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_listeners_caps_have_their_defaults_and_take_their_keys() {
        assert_eq!(listener(""), Ok(ListenerCaps::default()));
        let l = listener(
            "max_connections = 8\nmax_streams_per_connection = 16\ncall_timeout_ms = 20\n\
             handshake_timeout_ms = 500\nkeepalive_interval_ms = 1000\nkeepalive_timeout_ms = 2000\n\
             max_connection_age_ms = 3600000\n",
        )
        .unwrap();
        assert_eq!(
            l,
            ListenerCaps {
                max_connections: 8,
                max_streams_per_connection: 16,
                call_timeout: Duration::from_millis(20),
                handshake_timeout: Duration::from_millis(500),
                keepalive_interval: Duration::from_secs(1),
                keepalive_timeout: Duration::from_secs(2),
                max_connection_age: Some(Duration::from_secs(3600)),
            }
        );
        assert_eq!(
            listener("max_connection_age_ms = 0\n")
                .unwrap()
                .max_connection_age,
            None
        );
    }

    #[test]
    fn a_cap_out_of_range_is_named_by_its_key() {
        for (keys, key) in [
            ("max_connections = 0\n", "rls.max_connections"),
            (
                "max_streams_per_connection = 100000\n",
                "rls.max_streams_per_connection",
            ),
            ("call_timeout_ms = 0\n", "rls.call_timeout_ms"),
            ("handshake_timeout_ms = -1\n", "rls.handshake_timeout_ms"),
        ] {
            let e = listener(keys).unwrap_err();
            assert!(e.contains(key), "{keys}: {e}");
        }
    }
}

/// Envoy's rate-limit filter gives up after 20 ms unless told otherwise.
const ENVOY_DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(20);

/// A warning when a shared rate-limit service may wait on Redis longer than
/// Envoy waits on it: Envoy's `failure_mode_deny` then answers before
/// `on_store_error` can.
pub(super) fn warnings(cfg: &super::Config) -> Vec<String> {
    let (Some(rls), Some(redis)) = (&cfg.rls, &cfg.redis) else {
        return Vec::new();
    };
    if !rls.shared || redis.timeout < ENVOY_DEFAULT_TIMEOUT {
        return Vec::new();
    }
    vec![format!(
        "[rls] shared = true with redis.timeout_ms = {}: Envoy's rate-limit filter gives up after 20 ms by default, so while Redis is slow Envoy answers by its failure_mode_deny before rollstat's on_store_error can; set redis.timeout_ms below the filter's timeout (10, say), or raise the filter's timeout",
        redis.timeout.as_millis()
    )]
}

#[cfg(test)]
mod warning_tests {
    use super::super::Config;

    #[test]
    fn a_shared_service_waiting_on_redis_past_envoys_timeout_is_warned_of() {
        let cfg = |timeout: u32| {
            Config::parse(&format!("[redis]\nurl = \"redis://127.0.0.1:6379\"\ntimeout_ms = {timeout}\n[rls]\ngrpc = \"127.0.0.1:0\"\nshared = true\n")).unwrap()
        };
        assert!(super::warnings(&cfg(10)).is_empty());
        let w = super::warnings(&cfg(100));
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("redis.timeout_ms = 100"), "{w:?}");
        let unshared = Config::parse(
            "[redis]\nurl = \"redis://127.0.0.1:6379\"\n[rls]\ngrpc = \"127.0.0.1:0\"\n",
        )
        .unwrap();
        assert!(super::warnings(&unshared).is_empty());
    }
}
