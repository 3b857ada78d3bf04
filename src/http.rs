//! The HTTP API: a router built from shared state, testable without a socket.
//!
//! | route | what |
//! |---|---|
//! | `GET /metrics` | Prometheus text (OpenMetrics if asked), gzip if asked |
//! | `GET /api/v1/series?match=<glob>` | windowed statistics per series, JSON |
//! | `POST /api/v1/ingest` | statsd lines (text/plain) or a JSON array of samples |
//! | `POST /-/reload` | reload the config file |
//! | `GET /healthz` | `ok` |

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use tower_http::compression::CompressionLayer;

use crate::expose::{json, openmetrics};
use crate::ingest::{Ingestor, Worker};
use crate::mapping::Glob;
use crate::reload::Reloader;
use crate::telemetry::Transport;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Ingest path (registry, telemetry, clock).
    pub ingestor: Arc<Ingestor>,
    /// Config reloads.
    pub reloader: Arc<Reloader>,
    /// UDP port whose kernel drops /metrics reports, if UDP is on.
    pub udp_port: Option<u16>,
    /// Largest ingest body.
    pub max_body: usize,
}

/// The router.
pub fn router(state: AppState) -> Router {
    let max_body = state.max_body;
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/api/v1/series", get(series))
        .route(
            "/api/v1/ingest",
            post(ingest).layer(DefaultBodyLimit::max(max_body)),
        )
        .route("/-/reload", post(reload))
        .layer(CompressionLayer::new())
        .with_state(state)
}

async fn metrics(State(st): State<AppState>, headers: HeaderMap) -> Response {
    let open = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    // Rendering is CPU work proportional to the series count: keep it off
    // the reactor.
    let rendered = tokio::task::spawn_blocking(move || render_metrics(&st, open)).await;
    match rendered {
        Ok(Ok(body)) => {
            let ct = if open {
                openmetrics::CONTENT_TYPE
            } else {
                "text/plain; version=0.0.4; charset=utf-8"
            };
            ([(header::CONTENT_TYPE, ct)], body).into_response()
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "Rendering /metrics failed.");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("rendering /metrics failed: {e}\n"),
            )
                .into_response()
        }
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("rendering /metrics failed: {e}\n"),
        )
            .into_response(),
    }
}

/// Renders the whole exposition: self-metrics and every series.
pub fn render_metrics(st: &AppState, openmetrics: bool) -> prometheus::Result<String> {
    let tel = &st.ingestor.telemetry;
    let timer = tel.scrape_duration.start_timer();
    if let Some(port) = st.udp_port {
        if let Some(d) = crate::ingest::udp::kernel_drops(port) {
            tel.udp_kernel_drops.set(d as i64);
        }
    }
    let families = tel.registry.gather();
    let mut out = String::new();
    if openmetrics {
        openmetrics::encode(&families, &mut out)?;
    } else {
        prometheus::TextEncoder::new().encode_utf8(&families, &mut out)?;
    }
    timer.observe_duration();
    Ok(out)
}

#[derive(Deserialize)]
struct SeriesQuery {
    #[serde(rename = "match")]
    pattern: Option<String>,
}

async fn series(State(st): State<AppState>, Query(q): Query<SeriesQuery>) -> Response {
    let glob = match q.pattern.as_deref().map(Glob::new).transpose() {
        Ok(g) => g,
        Err(e) => return api_error(StatusCode::BAD_REQUEST, format!("bad `match` glob: {e}")),
    };
    let now = st.ingestor.now();
    let body = json::series(&st.ingestor.registry, now, glob.as_ref());
    Json(body).into_response()
}

fn api_error(code: StatusCode, msg: String) -> Response {
    (code, Json(serde_json::json!({ "error": msg }))).into_response()
}

async fn ingest(State(st): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"));
    let text: Vec<u8> = if is_json {
        match json::samples_to_lines(&body) {
            Ok(t) => t,
            Err(e) => return api_error(StatusCode::BAD_REQUEST, e),
        }
    } else {
        body.to_vec()
    };
    let ing = &st.ingestor;
    let mut w = Worker::default();
    w.counts.packets = 1;
    let now = ing.now();
    let first = ing.ingest(&text, now, &mut w);
    let accepted = w.counts.lines + w.counts.dropped_by_mapping;
    let refused = w.counts.refused.iter().sum::<u64>();
    ing.flush(Transport::Http, &mut w);
    match first {
        None => (
            StatusCode::OK,
            Json(serde_json::json!({ "accepted": accepted, "refused": refused })),
        )
            .into_response(),
        Some(f) => (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({
                "error": format!("line {}: {}", f.line, f.error),
                "first_bad_line": f.line,
                "reason": f.error.reason(),
                "accepted": accepted,
                "refused": refused,
            })),
        )
            .into_response(),
    }
}

async fn reload(State(st): State<AppState>) -> Response {
    match st.reloader.reload() {
        Ok(()) => (StatusCode::OK, "config reloaded\n").into_response(),
        Err(e) => (
            StatusCode::BAD_REQUEST,
            format!("{e}\nthe previous config stays in force\n"),
        )
            .into_response(),
    }
}
