//! The OTLP/gRPC listener (`[listen] otlp_grpc`):
//! `opentelemetry.proto.collector.metrics.v1.MetricsService/Export` over
//! HTTP/2, without TLS (h2c) or with `[http.tls]`, on tonic, with the
//! connection caps and setup deadline of the rate-limit service's gRPC
//! listener (`rls::accept`, their defaults; counted in
//! `rollstat_otlp_grpc_refused_total`).
//!
//! A request is applied as `POST /v1/metrics` applies it
//! ([`OtlpIngest::apply`], on the blocking pool), and answered with the
//! same `partial_success`. A request past `ingest.http_max_body_bytes`
//! (compressed or not) is answered OUT_OF_RANGE or RESOURCE_EXHAUSTED by
//! tonic without being applied; gzip-compressed requests are read. When
//! every apply slot stays taken for a second, a call is answered
//! UNAVAILABLE (which exporters retry), counted as `busy`.

use std::sync::Arc;

use prometheus::IntGauge;
use tokio::sync::watch;
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

use super::otlp::OtlpIngest;
use super::otlp_service::metrics_service_server::{MetricsService, MetricsServiceServer};
use crate::otlp::proto::opentelemetry::proto::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use crate::rls::accept::{self, Tally};
use crate::rls::settings::ListenerCaps;
use crate::telemetry::{ReasonCounters, Telemetry};
use crate::tls::ServerTls;

/// The longest an Export call may take.
pub const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The service as tonic calls it.
struct Handler {
    otlp: Arc<OtlpIngest>,
    /// `rollstat_otlp_grpc_refused_total`, for calls refused as busy.
    busy: ReasonCounters,
}

#[tonic::async_trait]
impl MetricsService for Handler {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        let Some(slot) = self.otlp.slot().await else {
            self.busy.inc("busy");
            return Err(Status::unavailable(
                "rollstat is applying as many OTLP requests as it can; retry",
            ));
        };
        let otlp = self.otlp.clone();
        let req = request.into_inner();
        let outcome = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            otlp.apply(&req, otlp.now())
        })
        .await
        .map_err(|e| Status::internal(format!("the ingest task failed: {e}")))?;
        Ok(Response::new(outcome.response()))
    }
}

/// Where the listener counts its connections.
struct Counts {
    connections: IntGauge,
    refused: ReasonCounters,
}

impl Tally for Counts {
    fn refused(&self, reason: &'static str) {
        self.refused.inc(reason);
    }

    fn connections(&self) -> IntGauge {
        self.connections.clone()
    }
}

/// Serves `otlp` on `listener` until `stop` turns true, then lets the
/// calls in flight finish. Requests are capped at `max_bytes`.
///
/// # Errors
///
/// The transport's, if the server cannot go on.
pub async fn serve(
    listener: tokio::net::TcpListener,
    otlp: Arc<OtlpIngest>,
    telemetry: &Telemetry,
    max_bytes: usize,
    tls: Option<Arc<ServerTls>>,
    stop: watch::Receiver<bool>,
) -> Result<(), tonic::transport::Error> {
    // A large export takes longer than a rate-limit call: 10 s, not 1 s.
    let caps = ListenerCaps {
        call_timeout: CALL_TIMEOUT,
        ..ListenerCaps::default()
    };
    let counts: Arc<dyn Tally> = Arc::new(Counts {
        connections: telemetry.otlp_grpc_connections.clone(),
        refused: telemetry.otlp_grpc_refused.clone(),
    });
    let service = MetricsServiceServer::new(Handler {
        otlp,
        busy: telemetry.otlp_grpc_refused.clone(),
    })
    .accept_compressed(CompressionEncoding::Gzip)
    .max_decoding_message_size(max_bytes);
    let router = tonic::transport::Server::builder()
        .timeout(caps.call_timeout)
        .max_concurrent_streams(caps.max_streams_per_connection)
        .http2_keepalive_interval(Some(caps.keepalive_interval))
        .http2_keepalive_timeout(Some(caps.keepalive_timeout))
        .add_service(service);
    let mut on_stop = stop.clone();
    let stopped = async move {
        let _ = on_stop.wait_for(|s| *s).await;
    };
    let incoming = accept::incoming(listener, tls, counts, caps, stop);
    router.serve_with_incoming_shutdown(incoming, stopped).await
}
