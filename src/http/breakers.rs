//! The breaker routes: signals, the central decision, and outcomes posted
//! by clients.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::{api_error, services, unknown, AppState};
use crate::expose::signals::BreakerJson;

pub(super) async fn list(State(st): State<AppState>) -> Response {
    let now = st.ingestor.now();
    let s = services(&st);
    let list: Vec<BreakerJson> = s.breakers.iter().map(|b| BreakerJson::of(b, now)).collect();
    Json(list).into_response()
}

pub(super) async fn one(State(st): State<AppState>, Path(name): Path<String>) -> Response {
    let s = services(&st);
    match s.breakers.get(&name) {
        Some(b) => Json(BreakerJson::of(b, st.ingestor.now())).into_response(),
        None => unknown("breaker", &name),
    }
}

pub(super) async fn decision(State(st): State<AppState>, Path(name): Path<String>) -> Response {
    let s = services(&st);
    let Some(b) = s.breakers.get(&name) else {
        return unknown("breaker", &name);
    };
    let now = st.ingestor.now();
    let verdict = b.breaker.allow(now);
    let sig = b.breaker.signals(now);
    Json(serde_json::json!({
        "breaker": name,
        "decision": if verdict.is_allowed() { "allow" } else { "shed" },
        "state": sig.state.as_str(),
        "drop_ratio": sig.drop_ratio,
    }))
    .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Outcomes {
    #[serde(default)]
    success: u64,
    #[serde(default)]
    failure: u64,
    /// Of the successes, how many were slow.
    #[serde(default)]
    slow: u64,
}

pub(super) async fn outcomes(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let s = services(&st);
    let Some(b) = s.breakers.get(&name) else {
        return unknown("breaker", &name);
    };
    let o: Outcomes = match serde_json::from_slice(&body) {
        Ok(o) => o,
        Err(e) => {
            return api_error(
                StatusCode::BAD_REQUEST,
                format!("expected {{\"success\": n, \"failure\": n, \"slow\": n}} ({e})"),
            )
        }
    };
    if o.slow > o.success {
        return api_error(
            StatusCode::BAD_REQUEST,
            "`slow` counts slow successes and cannot exceed `success`".into(),
        );
    }
    let now = st.ingestor.now();
    b.record(o.success, o.failure, o.slow, now);
    Json(BreakerJson::of(b, now)).into_response()
}
