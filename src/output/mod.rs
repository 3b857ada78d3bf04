//! `[[outputs]]`: the families `/metrics` serves, pushed on a timer to
//! receivers that take remote write or OTLP, each output in its own
//! supervised task with its own byte-bounded queue.
//!
//! * `client.rs`: one HTTP/1.1 connection to a receiver (plain or TLS),
//!   a deadline per request, the answer's head and the first bytes of its
//!   body; `client/tls.rs`: the rustls settings of an `https://`
//!   receiver (CA file or system roots, client certificate, server name).
//! * `retry_after.rs`: the wait a receiver's `Retry-After` header asks
//!   for (delta-seconds or an IMF-fixdate), capped.

pub mod client;
mod retry_after;

pub use self::retry_after::retry_after;
