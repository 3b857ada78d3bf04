//! `[http]`: the HTTP listener's connections, deadlines, web config, route
//! groups and TLS, read into [`HttpLimits`].

use std::time::Duration;

use super::reader::{Problems, Table};
use super::{access, http_tls, web, TlsConfig};
use crate::access::Access;

/// `[http]`: deadlines on every phase of an HTTP connection, and caps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Open HTTP connections at most; a client beyond it gets `503` and its
    /// connection closed, counted (`reason="connection_cap"`).
    pub max_connections: usize,
    /// From accept (a new connection) or from the first byte of a request
    /// (a kept-alive one) until the request's head is complete.
    pub header_timeout: Duration,
    /// From the end of the head until the whole request body has arrived.
    pub body_timeout: Duration,
    /// A kept-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// A response write that makes no progress for this long (the client
    /// stopped reading) closes the connection.
    pub write_timeout: Duration,
    /// A response that holds a slot (a `/metrics` scrape, a registry read)
    /// is sent within this, or its connection is closed and the slot freed;
    /// a scrape uses the scraper's own `X-Prometheus-Scrape-Timeout-Seconds`
    /// when it sends one.
    pub response_timeout: Duration,
    /// `GET /api/v1/series` and `/api/v1/metrics` running at once; more get
    /// `503` with `Retry-After: 1`.
    pub max_concurrent_api_reads: usize,
    /// Who may use which routes (`[http.auth.*]`), and the Host and Origin
    /// rules (`allowed_hosts`, `allowed_origins`). Unlike the rest of
    /// `[http]`, taken at every reload.
    pub access: Access,
    /// `[http.tls]`: HTTPS only, with these files; `None`: plain HTTP.
    pub tls: Option<TlsConfig>,
    /// `web_config_file`: an exporter-toolkit web config file, read as it
    /// is. Its `basic_auth_users` are in `access` already; its TLS part is
    /// here.
    pub web: Option<web::WebConfig>,
}

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

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(75),
            write_timeout: Duration::from_secs(30),
            response_timeout: Duration::from_secs(60),
            max_concurrent_api_reads: 4,
            access: Access::default(),
            tls: None,
            web: None,
        }
    }
}

/// `[http]`: connections, deadlines, the web config, route groups, TLS.
pub(super) fn read(t: &mut Table<'_, '_>, p: &mut Problems<'_>, h: &mut HttpLimits) {
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
    h.web = web::read_web_config(t, p);
    access::read_access(t, p, &mut h.access, h.web.as_ref());
    let tls_table = t.table(p, "tls");
    let tls_at = tls_table.as_ref().map(Table::start);
    if let Some(mut tt) = tls_table {
        h.tls = http_tls::read_tls(&mut tt, p);
        tt.finish(p, http_tls::TLS_KEYS);
    }
    // A web config's tls_server_config is the listener's TLS, as
    // for exporter-toolkit; with [http.tls] too, which one wins
    // would be a guess.
    if let Some(wt) = h.web.as_ref().and_then(|w| w.tls.as_ref()) {
        match tls_at {
            Some(at) => p.at(
                at.max(web_at.unwrap_or(0)),
                &t.key_path("tls"),
                "both [http.tls] and the tls_server_config of http.web_config_file set the listener's TLS; keep one",
            ),
            None => h.tls = Some(wt.tls_config()),
        }
    }
}
