//! HTTP to the daemon and the other servers: the harness's client
//! (`rollstat_testkit::http`), and [`http`], which fails the test on an
//! error.

use std::net::SocketAddr;

pub use rollstat_testkit::http::{try_http, Response};

/// A minimal HTTP/1.1 client: one request per connection (`Connection:
/// close`), a 30 s read timeout, understands chunked bodies. Panics on a
/// failure; see [`try_http`].
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    try_http(addr, method, path, headers, body).unwrap_or_else(|e| panic!("{e}"))
}
