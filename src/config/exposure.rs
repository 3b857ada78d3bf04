//! What a config leaves open to whom: one line per route group for
//! `check-config`, and warnings for a listener that faces more than this
//! machine while what it serves is open to anyone. Warnings, not errors: a
//! private network or a proxy in front may be the operator's answer.

use std::net::SocketAddr;

use super::Config;
use crate::access::{GroupAccess, RouteGroup};

/// `http access: read open, write open, admin off`.
#[must_use]
pub fn summary(cfg: &Config) -> String {
    let groups: Vec<String> = RouteGroup::ALL
        .iter()
        .map(|g| format!("{} {}", g.as_str(), cfg.http.access.group(*g).as_str()))
        .collect();
    format!("http access: {}", groups.join(", "))
}

/// Warnings for the operator: an HTTP listener beyond loopback with open
/// groups, or with no host name but this machine's accepted; windows
/// longer than the TTL; a shared rate-limit service slower on Redis than
/// Envoy waits.
#[must_use]
pub fn warnings(cfg: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let http = cfg.listen.http;
    if !is_local(http) {
        let open: Vec<&str> = RouteGroup::ALL
            .iter()
            .filter(|g| cfg.http.access.group(**g) == &GroupAccess::Open)
            .map(|g| g.as_str())
            .collect();
        if !open.is_empty() {
            out.push(format!(
                "listen.http = {http} is reachable beyond this machine and the {} route group(s) are open to anyone who reaches it; protect them ([http.auth.<group>] access = \"protected\" with a tokens_file or users_file) or bind to 127.0.0.1",
                open.join(" and ")
            ));
        }
        if cfg.http.access.browser.names_only_local() {
            out.push(format!(
                "listen.http = {http} is reachable beyond this machine, but [http] allowed_hosts is empty: clients that reach it by a DNS name (a Prometheus target such as rollstat.internal:9102, a docker-compose service name) get 403 until that name is listed; addresses always work"
            ));
        }
    }
    out.extend(cfg.ttl_warnings());
    out.extend(super::rls::warnings(cfg));
    out
}

fn is_local(a: SocketAddr) -> bool {
    a.ip().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_quiet_and_a_wildcard_bind_with_open_groups_warns() {
        let cfg = Config::default();
        assert_eq!(
            summary(&cfg),
            "http access: read open, write open, admin off"
        );
        assert!(warnings(&cfg).is_empty());
        let cfg = Config::parse("[listen]\nhttp = \"0.0.0.0:9102\"\n").unwrap();
        let w = warnings(&cfg);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("read and write route group(s) are open"),
            "{}",
            w[0]
        );
        assert!(w[1].contains("allowed_hosts is empty"), "{}", w[1]);
        let cfg = Config::parse(
            "[listen]\nhttp = \"0.0.0.0:9102\"\n[http]\nallowed_hosts = [\"rollstat.internal\"]\n[http.auth.read]\naccess = \"off\"\n[http.auth.write]\naccess = \"off\"\n",
        )
        .unwrap();
        assert!(warnings(&cfg).is_empty(), "{:?}", warnings(&cfg));
    }
}
