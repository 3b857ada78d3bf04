//! `[http]`: the HTTP listener's connections, deadlines, web config, route
//! groups and TLS, read into [`HttpLimits`].

use std::time::Duration;

use super::reader::{Problems, Table};
use super::{access, http_tls, web};
use crate::http::HttpLimits;

pub(super) const KEYS: &[&str] = &[
    "max_connections",
    "header_timeout_ms",
    "body_timeout_ms",
    "idle_timeout_ms",
    "write_timeout_ms",
    "response_timeout_ms",
    "max_concurrent_api_reads",
    "allowed_hosts",
    "allowed_origins",
    "auth",
    "tls",
    "web_config_file",
];

/// `[http]`: connections, deadlines, the web config, route groups, TLS.
pub(super) fn read(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    h: &mut HttpLimits,
) -> Option<web::WebConfig> {
    if let Some(n) = t.int(p, "max_connections", 1, 1_000_000) {
        h.max_connections = n as usize;
    }
    for (key, field) in [
        ("header_timeout_ms", &mut h.header_timeout),
        ("body_timeout_ms", &mut h.body_timeout),
        ("idle_timeout_ms", &mut h.idle_timeout),
        ("write_timeout_ms", &mut h.write_timeout),
        ("response_timeout_ms", &mut h.response_timeout),
    ] {
        if let Some(ms) = t.int(p, key, 1, 3_600_000) {
            *field = Duration::from_millis(ms);
        }
    }
    if let Some(n) = t.int(p, "max_concurrent_api_reads", 1, 1024) {
        h.max_concurrent_api_reads = n as usize;
    }
    let web_at = t.raw("web_config_file").map(|v| v.span().start);
    let web = web::read_web_config(t, p);
    access::read_access(t, p, &mut h.access, web.as_ref());
    let tls_table = t.table(p, "tls");
    let tls_at = tls_table.as_ref().map(Table::start);
    if let Some(mut tt) = tls_table {
        h.tls = http_tls::read_tls(&mut tt, p, crate::tls::TlsSource::Http);
        tt.finish(p, http_tls::TLS_KEYS);
    }
    // A web config's tls_server_config is the listener's TLS, as
    // for exporter-toolkit; with [http.tls] too, which one wins
    // would be a guess.
    if let Some(wt) = web.as_ref().and_then(|w| w.tls.as_ref()) {
        match tls_at {
            Some(at) => p.at(
                at.max(web_at.unwrap_or(0)),
                &t.key_path("tls"),
                "both [http.tls] and the tls_server_config of http.web_config_file set the listener's TLS; keep one",
            ),
            None => h.tls = Some(wt.tls_config()),
        }
    }
    web
}
