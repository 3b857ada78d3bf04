//! envoyproxy/ratelimit's HTTP endpoints, for callers that cannot speak
//! gRPC: `POST /json` takes a proto3-JSON `RateLimitRequest` and answers
//! the proto3-JSON `RateLimitResponse`, 200 (OK) or 429 (OVER_LIMIT), as
//! the reference service does; `GET /healthcheck` answers as `/-/ready`.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::body::JsonBody;
use super::{api_error, AppState};
use crate::rls::json;
use crate::rls::proto::rate_limit_response::Code;

/// `POST /json`.
pub(super) async fn decide(State(st): State<AppState>, JsonBody(body): JsonBody) -> Response {
    let Some(handle) = &st.rls else {
        return api_error(
            StatusCode::NOT_FOUND,
            "the rate-limit service is off: set [rls] grpc in the config".into(),
        );
    };
    let rls = handle.current();
    let request = serde_json::from_slice(&body)
        .map_err(|e| format!("the body is not JSON: {e}"))
        .and_then(|v| json::request(&v));
    let request = match request {
        Ok(r) => r,
        Err(msg) => {
            rls.count_bad_json();
            return api_error(StatusCode::BAD_REQUEST, msg);
        }
    };
    match rls.should_rate_limit(&request, st.ingestor.now()).await {
        Ok(answer) => {
            let status = if answer.overall_code == Code::OverLimit as i32 {
                StatusCode::TOO_MANY_REQUESTS
            } else {
                StatusCode::OK
            };
            let body = json::response(&answer);
            (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        Err(refused) => api_error(StatusCode::BAD_REQUEST, refused.message),
    }
}
