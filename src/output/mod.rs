//! `[[outputs]]`: the families `/metrics` serves, pushed on a timer to
//! receivers that take remote write or OTLP, each output in its own
//! supervised task with its own byte-bounded queue.
//!
//! * `client.rs`: one HTTP/1.1 connection to a receiver (plain or TLS),
//!   a deadline per request, the answer's head and the first bytes of its
//!   body.
