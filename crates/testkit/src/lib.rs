//! # rollstat-testkit
//!
//! What rollstat's integration tests (`tests/it`), benches, examples and the
//! load tool (`tools/blast`, the `rollstat-blast` binary) share, so that
//! there is one of each:
//!
//! * [`fixtures`]: statsd datagrams rendered for load (`blast.m000042:1|c`
//!   packed up to a line count and a byte size), used by the benches, the
//!   examples and the tool.
//! * [`profile`]: seeded realistic workloads (lading's DogStatsD mix, plain
//!   statsd, counters) and the ledger of what they sent, per type.
//! * The harness, used by `tests/it` and the tool:
//!   * [`daemon`]: start the real `rollstat` binary on a config that binds
//!     port 0 and read its bound ports from its "listening" line; killed
//!     on drop.
//!   * [`http`]: a blocking HTTP/1.1 client, one request per connection
//!     ([`http::try_http`]) or keep-alive ([`http::Conn`]), with chunked
//!     decoding.
//!   * [`scrape`]: a parser for the Prometheus text exposition (and the
//!     sample lines of OpenMetrics), read as Prometheus reads it.
//!   * [`tempdir`]: a temporary directory removed on drop.
//!
//! Nothing here depends on the rollstat library: the harness talks to the
//! daemon as any client would, over its sockets and its stdout. Std only;
//! the `json` feature adds `http::Response::json` (serde_json) for the
//! integration tests. Nothing here reads the clock: waits are bounded by
//! socket and channel timeouts.

#![forbid(unsafe_code)]
#![deny(clippy::disallowed_methods, clippy::disallowed_types)]
#![warn(missing_docs)]

pub mod daemon;
pub mod fixtures;
pub mod http;
pub mod profile;
pub mod scrape;
pub mod tempdir;

pub use tempdir::TempDir;
