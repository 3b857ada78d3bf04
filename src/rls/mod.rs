//! Envoy's global rate-limit service (`envoy.service.ratelimit.v3`) on
//! rollstat's exact sliding-window limits, with envoyproxy/ratelimit's
//! config files:
//!
//! * `settings.rs`: the domains and descriptor trees as `config` reads them;
//! * `tree.rs`: which rule a descriptor falls under, as the reference
//!   service finds it;
//! * `decide.rs`: one request's decision, all or nothing across its
//!   descriptors;
//! * `proto/`: the service's messages, server and client, generated from
//!   `proto/envoy/` (committed; `tests/proto_generated.rs` checks them).

pub mod decide;
pub mod proto;
pub mod settings;
pub mod tree;
