//! `POST /v1/metrics` on the OTLP/HTTP listener (`[listen] otlp_http`):
//! an `ExportMetricsServiceRequest` as protobuf (`application/x-protobuf`)
//! or OTLP/JSON (`application/json`), gzip or not, every data point
//! applied or refused on its own ([`crate::ingest::otlp`]).
//!
//! **Answers**, as the OTLP specification asks:
//!
//! * `200` with an `ExportMetricsServiceResponse` in the request's
//!   encoding; when points were not applied, its `partial_success` says
//!   how many (`rejected_data_points`) and why the first was
//!   (`error_message`, starting with its counted reason). The sender must
//!   not retry it;
//! * `400` for a body that does not decode (counted as `bad_otlp`), `415`
//!   for another media type (`unsupported_media_type`); `413` past the
//!   body cap, and `503` with `Retry-After` while bodies hold their memory
//!   budget, both from the HTTP listener's body guard; `429` with
//!   `Retry-After: 1` (`otlp_busy`) when requests are being applied in
//!   every slot for longer than a second. A failure's body
//!   is a `google.rpc.Status` in the request's encoding.
//!
//! Decoding and applying a large body takes a core for a while: off the
//! reactor, as `POST /api/v1/ingest` does.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use prost::Message;

use super::AppState;
use crate::escape::Escaped;
use crate::ingest::otlp::OtlpIngest;
use crate::otlp::proto::opentelemetry::proto::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use crate::telemetry::refuse_reason;

/// The path OTLP/HTTP exporters post metrics to.
pub const PATH: &str = "/v1/metrics";

/// Bodies up to this size are applied on the reactor thread.
const INLINE_BODY_BYTES: usize = 16 * 1024;

/// The body's encoding, from its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// `application/x-protobuf` (also `application/protobuf`).
    Protobuf,
    /// `application/json`.
    Json,
}

impl Encoding {
    /// From the `Content-Type` (parameters ignored, case-insensitive).
    fn of(v: Option<&HeaderValue>) -> Option<Encoding> {
        let v = v?.to_str().ok()?;
        let essence = v.split(';').next().unwrap_or(v).trim();
        if essence.eq_ignore_ascii_case("application/x-protobuf")
            || essence.eq_ignore_ascii_case("application/protobuf")
        {
            Some(Encoding::Protobuf)
        } else if essence.eq_ignore_ascii_case("application/json") {
            Some(Encoding::Json)
        } else {
            None
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// `google.rpc.Status`, the body of a failed OTLP/HTTP request.
#[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
struct Status {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// gRPC's INVALID_ARGUMENT, the code of a request that does not decode.
const INVALID_ARGUMENT: i32 = 3;

/// A failure answer in `enc` (protobuf when the request's is unknown).
pub(super) fn failure(code: StatusCode, enc: Option<Encoding>, message: String) -> Response {
    let status = Status {
        code: INVALID_ARGUMENT,
        message,
    };
    let enc = enc.unwrap_or(Encoding::Protobuf);
    let body = match enc {
        Encoding::Protobuf => status.encode_to_vec(),
        Encoding::Json => serde_json::to_vec(&status).unwrap_or_default(),
    };
    (code, [(header::CONTENT_TYPE, enc.content_type())], body).into_response()
}

pub(super) async fn export(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(otlp) = st.otlp.clone() else {
        return failure(StatusCode::NOT_FOUND, None, "OTLP ingest is off".into());
    };
    let content_type = headers.get(header::CONTENT_TYPE);
    let Some(enc) = Encoding::of(content_type) else {
        st.ingestor
            .telemetry
            .http_refused
            .inc(refuse_reason::UNSUPPORTED_MEDIA_TYPE);
        let shown = Escaped::with_cap(content_type.map_or(&b""[..], HeaderValue::as_bytes), 100);
        return failure(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            format!("Content-Type `{shown}` is not read here; send an ExportMetricsServiceRequest as application/x-protobuf or application/json"),
        );
    };
    let telemetry = st.ingestor.telemetry.clone();
    let Some(slot) = otlp.slot().await else {
        telemetry.http_refused.inc(refuse_reason::OTLP_BUSY);
        let mut busy = failure(
            StatusCode::TOO_MANY_REQUESTS,
            Some(enc),
            "rollstat is applying as many OTLP requests as it can; retry after a second".into(),
        );
        busy.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return busy;
    };
    let answer = move || {
        let _slot = slot;
        let answer = apply(&otlp, enc, &body);
        if answer.status() == StatusCode::BAD_REQUEST {
            telemetry.http_refused.inc(refuse_reason::BAD_OTLP);
        }
        answer
    };
    if body_len_small(&headers) {
        return answer();
    }
    match tokio::task::spawn_blocking(answer).await {
        Ok(a) => a,
        Err(e) => failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            Some(enc),
            format!("the ingest task failed: {e}"),
        ),
    }
}

fn body_len_small(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .is_some_and(|n| n <= INLINE_BODY_BYTES)
}

/// Decodes and applies a body, and answers.
fn apply(otlp: &OtlpIngest, enc: Encoding, body: &[u8]) -> Response {
    let req = match decode(enc, body) {
        Ok(r) => r,
        Err(message) => return failure(StatusCode::BAD_REQUEST, Some(enc), message),
    };
    let outcome = otlp.apply(&req, otlp.now());
    let response = outcome.response();
    let body = match enc {
        Encoding::Protobuf => response.encode_to_vec(),
        Encoding::Json => json_response(&response),
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, enc.content_type())],
        body,
    )
        .into_response()
}

/// The request, or why it does not decode.
pub fn decode(enc: Encoding, body: &[u8]) -> Result<ExportMetricsServiceRequest, String> {
    match enc {
        Encoding::Protobuf => ExportMetricsServiceRequest::decode(body)
            .map_err(|e| format!("the body is not a protobuf ExportMetricsServiceRequest: {e}")),
        Encoding::Json => crate::otlp::json::decode(body).map_err(|e| e.to_string()),
    }
}

/// OTLP/JSON of a response: `{}` or `{"partialSuccess": {...}}` (the
/// 64-bit count as a string, as proto3 JSON writes it).
fn json_response(r: &ExportMetricsServiceResponse) -> Vec<u8> {
    let v = match &r.partial_success {
        None => serde_json::json!({}),
        Some(p) => serde_json::json!({
            "partialSuccess": {
                "rejectedDataPoints": p.rejected_data_points.to_string(),
                "errorMessage": p.error_message,
            }
        }),
    };
    v.to_string().into_bytes()
}
