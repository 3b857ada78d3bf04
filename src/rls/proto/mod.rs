//! The rate-limit service's protobuf messages, its gRPC server and client,
//! as tonic's generator makes them of `proto/envoy/` (see proto/README.md).

#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod envoy;

pub use envoy::envoy::config::core::v3::HeaderValue;
pub use envoy::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor, RateLimitDescriptor,
};
pub use envoy::envoy::service::ratelimit::v3::{
    rate_limit_response, rate_limit_service_client, rate_limit_service_server, RateLimitRequest,
    RateLimitResponse,
};
