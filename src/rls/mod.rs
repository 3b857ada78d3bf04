//! Envoy's global rate-limit service (`envoy.service.ratelimit.v3`) on
//! rollstat's exact sliding-window limits, with envoyproxy/ratelimit's
//! config files:
//!
//! * `settings.rs`: the domains and descriptor trees as `config` reads them;
//! * `tree.rs`: which rule a descriptor falls under, as the reference
//!   service finds it;
//! * `answer.rs`: what a decision reads and answers (descriptors,
//!   statuses, each rule's hits);
//! * `decide.rs`: one request's decision, all or nothing across its
//!   descriptors;
//! * `shared.rs`: the same decision in the `[redis]` store, for a fleet,
//!   and what answers while the store fails;
//! * `detail.rs`: the name a rule's hits are counted under
//!   (`detailed_metric`, `value_to_metric`), capped per rule;
//! * `rates.rs`: the windowed rates of those hits, read at scrape time;
//! * `service.rs`: a request read, checked against the caps, decided and
//!   answered, counted (no I/O);
//! * `grpc.rs`: the gRPC listener (tonic), with `grpc.health.v1`;
//! * `accept.rs`: its connections, under a cap and a setup deadline;
//! * `codec.rs`: tonic-prost's codec with a small encode buffer;
//! * `handshake.rs`: TLS in front of it, with `[rls.tls]`;
//! * `json.rs`: the proto3 JSON of the messages, for `POST /json`;
//! * `proto/`: the service's messages, server and client, generated from
//!   `proto/envoy/` (committed; `tests/proto_generated.rs` checks them).

pub mod accept;
pub mod answer;
pub mod codec;
pub mod decide;
pub mod detail;
pub mod grpc;
pub mod handshake;
pub mod json;
pub mod proto;
pub mod rates;
pub mod service;
pub mod settings;
pub mod shared;
pub mod tree;

pub use settings::{
    DescriptorRule, DomainRules, ListenerCaps, RateLimitSpec, RateUnit, RlsSettings,
};
