//! What `[http]` configures: deadlines on every phase of a connection,
//! caps, route groups and TLS, as `config` reads them.

use std::time::Duration;

use crate::access::Access;
use crate::tls::TlsConfig;

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
}

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
        }
    }
}

impl HttpLimits {
    /// Whether the HTTP listener speaks HTTPS (`[http.tls]` is set): the
    /// scheme of its own URLs is then `https`. Turning TLS on or off needs
    /// a restart, so this holds for the daemon's whole life.
    #[must_use]
    pub fn tls_enabled(&self) -> bool {
        self.tls.is_some()
    }
}
