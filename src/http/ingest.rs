//! `POST /api/v1/ingest`: statsd lines (text/plain) or a JSON array of
//! samples, applied as if they had arrived over UDP.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::{api_error, AppState};
use crate::expose::json;
use crate::ingest::Worker;
use crate::parse::ParseOptions;
use crate::telemetry::Transport;

pub(super) async fn ingest(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"));
    // JSON samples carry their tags in a field of their own, rendered as
    // DogStatsD tags (and names free of name-tag delimiters): read them
    // whatever `[ingest] tag_styles` says about statsd text.
    let (text, opts): (Vec<u8>, ParseOptions) = if is_json {
        match json::samples_to_lines(&body) {
            Ok(t) => (t, ParseOptions::default()),
            Err(e) => return api_error(StatusCode::BAD_REQUEST, e),
        }
    } else {
        (body.to_vec(), st.ingestor.parse_options())
    };
    let ing = &st.ingestor;
    let mut w = Worker::default();
    w.counts.packets = 1;
    let now = ing.now();
    let first = ing.ingest_with(&text, opts, now, &mut w);
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
