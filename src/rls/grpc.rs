//! The gRPC listener: `envoy.service.ratelimit.v3.RateLimitService` and
//! `grpc.health.v1.Health` over HTTP/2, without TLS (h2c) or with
//! `[rls.tls]` (`handshake.rs`), on tonic.
//!
//! Caps on what one client can make the service do: connections and
//! their setup deadline (`accept.rs`), a request's encoded size (`[rls]
//! max_request_bytes`: larger ones get RESOURCE_EXHAUSTED, counted as
//! `too_large`; past [`DECODE_CAP_FACTOR`] times that tonic answers
//! OUT_OF_RANGE without decoding them), and, from
//! [`ListenerCaps`](super::settings::ListenerCaps),
//! streams per connection (more are refused with REFUSED_STREAM), a
//! deadline per call, HTTP/2 keepalive pings that close a connection
//! whose peer stopped answering (one that stopped reading, too: its
//! pings cannot go out). A connection's age is capped in `accept.rs`, not
//! with tonic's `max_connection_age`: in tonic 0.14.5 that panics the
//! connection's task when the age is reached without a grace
//! (hyperium/tonic#2522), and with a grace closes it without a GOAWAY.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tonic::{Request, Response, Status};

use super::accept;
use super::proto::rate_limit_service_server::{RateLimitService, RateLimitServiceServer};
use super::proto::{RateLimitRequest, RateLimitResponse};
use super::service::RlsHandle;
use crate::clock::Clock;
use crate::tls::ServerTls;

/// How many times `max_request_bytes` a request may be before it is not
/// even decoded.
pub const DECODE_CAP_FACTOR: usize = 4;

/// How often the health service looks at whether the service can answer
/// as configured (see [`super::service::Rls::serving`]).
const HEALTH_EVERY: Duration = Duration::from_millis(250);

/// The service as tonic calls it.
struct Handler {
    rls: Arc<RlsHandle>,
    clock: Arc<dyn Clock>,
}

#[tonic::async_trait]
impl RateLimitService for Handler {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let now = self.clock.now();
        let rls = self.rls.current();
        match rls.should_rate_limit(request.get_ref(), now).await {
            Ok(answer) => Ok(Response::new(answer)),
            Err(r) if r.exhausted => Err(Status::resource_exhausted(r.message)),
            Err(r) => Err(Status::invalid_argument(r.message)),
        }
    }
}

/// Keeps the health service's answer, for the whole server ("") and for
/// the rate-limit service by name, true to [`super::service::Rls::serving`]
/// until `stop` turns true: SERVING from the start, NOT_SERVING while the
/// shared store fails under `on_store_error = "deny"`.
async fn report_health(
    health: tonic_health::server::HealthReporter,
    rls: Arc<RlsHandle>,
    mut stop: watch::Receiver<bool>,
) {
    use tonic::server::NamedService;
    use tonic_health::ServingStatus;
    let name = <RateLimitServiceServer<Handler> as NamedService>::NAME;
    let mut said = None;
    let mut tick = tokio::time::interval(HEALTH_EVERY);
    loop {
        let status = if rls.current().serving() {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        if said != Some(status) {
            health.set_service_status("", status).await;
            health.set_service_status(name, status).await;
            said = Some(status);
        }
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Serves `rls` on `listener` until `stop` turns true, then lets the calls
/// in flight finish.
///
/// # Errors
///
/// The transport's, if the server cannot go on.
pub async fn serve(
    listener: tokio::net::TcpListener,
    rls: Arc<RlsHandle>,
    tls: Option<Arc<ServerTls>>,
    clock: Arc<dyn Clock>,
    stop: watch::Receiver<bool>,
) -> Result<(), tonic::transport::Error> {
    let (max_bytes, caps) = {
        let s = rls.current();
        (s.settings().max_request_bytes, s.settings().listener)
    };
    let (health, health_service) = tonic_health::server::health_reporter();
    tokio::spawn(report_health(health, rls.clone(), stop.clone()));
    let service = RateLimitServiceServer::new(Handler {
        rls: rls.clone(),
        clock,
    })
    .max_decoding_message_size(max_bytes.saturating_mul(DECODE_CAP_FACTOR));
    let router = tonic::transport::Server::builder()
        .timeout(caps.call_timeout)
        .max_concurrent_streams(caps.max_streams_per_connection)
        .http2_keepalive_interval(Some(caps.keepalive_interval))
        .http2_keepalive_timeout(Some(caps.keepalive_timeout))
        .add_service(health_service)
        .add_service(service);
    let mut on_stop = stop.clone();
    let stopped = async move {
        let _ = on_stop.wait_for(|s| *s).await;
    };
    let incoming = accept::incoming(listener, tls, rls as Arc<dyn accept::Tally>, caps, stop);
    router.serve_with_incoming_shutdown(incoming, stopped).await
}
