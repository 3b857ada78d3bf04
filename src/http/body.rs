//! Request bodies, read as the HTTP RFCs and careful servers read them,
//! before any handler sees them ([`guard`], a step of the one middleware in front of every route, after access):
//!
//! * ambiguous framing (two different `Content-Length` values, or a
//!   `Content-Length` next to `Transfer-Encoding`, as seen in the raw head
//!   by [`super::conn`]) is `400` and the connection is closed;
//! * a `Content-Encoding` other than `gzip` or `identity` is `415`;
//! * a declared `Content-Length` above the route's cap is `413` at once,
//!   without reading the body, so an `Expect: 100-continue` client is told
//!   before it sends (hyper sends `100 Continue` only when a body is read);
//! * the body is read within `http.body_timeout_ms` (`408` and close, counted
//!   as `body_timeout`) and under the cap (`413`);
//! * a gzip body is inflated under the **same** cap: its decompressed size
//!   counts, never a 1 GiB inflate from a 1 MB upload.
//!
//! Handlers then get the whole (decoded) body. Every refusal is counted in
//! `rollstat_http_requests_refused_total{reason}`.

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use super::serve::RawHead;
use crate::telemetry::{close_reason, refuse_reason, Telemetry};

/// The cap on bodies of routes other than `POST /api/v1/ingest` (breaker
/// outcomes, limit acquires: a few dozen bytes each).
pub const MAX_SMALL_BODY: usize = 64 * 1024;

/// The route whose cap is `ingest.http_max_body_bytes`.
const INGEST_PATH: &str = "/api/v1/ingest";

/// What [`guard`] enforces.
pub struct BodyRules {
    /// `ingest.http_max_body_bytes`: raw and decompressed.
    pub max_ingest: usize,
    /// Every other route.
    pub max_other: usize,
    /// `http.body_timeout_ms`.
    pub timeout: Duration,
    /// Where refusals are counted.
    pub telemetry: Arc<Telemetry>,
    /// Bytes of request bodies held at once, over every connection (raw,
    /// and inflated for gzip), in bytes: see [`body_budget`].
    pub budget: Arc<tokio::sync::Semaphore>,
}

/// The bytes all request bodies may hold at once: 64 MiB, or room for one
/// gzip body of the largest size (raw and inflated) if that is more.
/// Without it, 1024 connections each sending a 4 MiB gzip body within the
/// body deadline would hold 8 GiB.
#[must_use]
pub fn body_budget(max_body: usize) -> usize {
    (64usize << 20).max(max_body.saturating_mul(2))
}

/// Checks framing, encoding and length, reads the body under its deadline
/// and cap, inflates gzip, and hands `next` (the handler) a whole body.
pub async fn guard<F>(rules: &BodyRules, req: Request, next: impl FnOnce(Request) -> F) -> Response
where
    F: std::future::Future<Output = Response>,
{
    let declared = match check_head(rules, &req) {
        Ok(Some(declared)) => declared,
        Ok(None) => return next(req).await,
        Err(refused) => return refused,
    };
    match read_whole(rules, req, declared).await {
        Ok(req) => next(req).await,
        Err(refused) => refused,
    }
}

/// The request head's framing and length: `Ok(None)` when there is no
/// body, else its declared length (if any); `Err` the refusal (counted).
// The refusal is the response itself, made once per refused request:
// boxing it would cost an allocation to save a move.
#[allow(clippy::result_large_err)]
fn check_head(rules: &BodyRules, req: &Request) -> Result<Option<Option<u64>>, Response> {
    let tel = &rules.telemetry;
    if let Some(reason) = req.extensions().get::<RawHead>().and_then(|h| h.framing) {
        tel.http_refused.inc(reason);
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            "the request frames its body twice (Content-Length with Transfer-Encoding, or two different Content-Length values), a request-smuggling risk; send exactly one of them",
        ));
    }
    let headers = req.headers();
    let Ok(declared) = declared_length(headers) else {
        tel.http_refused.inc(refuse_reason::AMBIGUOUS_FRAMING);
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            "Content-Length is not one non-negative integer",
        ));
    };
    let chunked = headers.contains_key(header::TRANSFER_ENCODING);
    Ok((declared.unwrap_or(0) != 0 || chunked).then_some(declared))
}

/// Reads and decodes a body of `declared` length (if given) into a request
/// that carries it whole; `Err` the refusal (counted).
async fn read_whole(
    rules: &BodyRules,
    req: Request,
    declared: Option<u64>,
) -> Result<Request, Response> {
    let tel = &rules.telemetry;
    let is_ingest = matches!(req.uri().path(), INGEST_PATH | super::otlp::PATH);
    let cap = if is_ingest {
        rules.max_ingest
    } else {
        rules.max_other
    };
    let encoding = Encoding::of(req.headers()).map_err(|name| {
        tel.http_refused.inc(refuse_reason::UNSUPPORTED_ENCODING);
        refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &format!("Content-Encoding `{name}` is not supported; send the body as is or gzip-compressed (Content-Encoding: gzip)"),
        )
    })?;
    if let Some(n) = declared.filter(|n| *n > cap as u64) {
        tel.http_refused.inc(refuse_reason::BODY_TOO_LARGE);
        return Err(refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            &too_large(n, cap, is_ingest),
        ));
    }
    let (mut parts, body) = req.into_parts();
    let deadline = tokio::time::Instant::now() + rules.timeout;
    // Room for this body in the shared budget, waited for within the body
    // deadline: the most it can hold, raw (and inflated).
    let raw_need = declared.map_or(cap, |n| n as usize).min(cap);
    let need = raw_need + if encoding == Encoding::Gzip { cap } else { 0 };
    let _room = reserve(rules, need, deadline).await?;
    let raw = read_raw(rules, body, cap, deadline, is_ingest).await?;
    let body = match encoding {
        Encoding::Identity => raw,
        Encoding::Gzip => inflate(rules, raw, cap, is_ingest).await?,
    };
    parts.headers.remove(header::CONTENT_ENCODING);
    parts.headers.remove(header::TRANSFER_ENCODING);
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    Ok(Request::from_parts(parts, Body::from(body)))
}

/// `need` bytes of the shared body budget, waited for until `deadline`;
/// `Err` a 503 with Retry-After (counted as `bodies_busy`).
async fn reserve(
    rules: &BodyRules,
    need: usize,
    deadline: tokio::time::Instant,
) -> Result<tokio::sync::OwnedSemaphorePermit, Response> {
    let need = u32::try_from(need).unwrap_or(u32::MAX);
    match tokio::time::timeout_at(deadline, rules.budget.clone().acquire_many_owned(need)).await {
        Ok(Ok(permit)) => Ok(permit),
        _ => {
            rules.telemetry.http_refused.inc(refuse_reason::BODIES_BUSY);
            let mut r = refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many request bodies are being read at once; retry in a second",
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            Err(r)
        }
    }
}

/// The body's bytes, at most `cap`, by `deadline`; `Err` the refusal.
async fn read_raw(
    rules: &BodyRules,
    body: Body,
    cap: usize,
    deadline: tokio::time::Instant,
    is_ingest: bool,
) -> Result<Bytes, Response> {
    let tel = &rules.telemetry;
    read_capped(body, cap, deadline).await.map_err(|e| match e {
        ReadError::TimedOut => {
            tel.http_closed.inc(close_reason::BODY_TIMEOUT);
            refusal(
                StatusCode::REQUEST_TIMEOUT,
                &format!(
                    "the body did not arrive within {} ms (http.body_timeout_ms)",
                    rules.timeout.as_millis()
                ),
            )
        }
        ReadError::TooLarge => {
            tel.http_refused.inc(refuse_reason::BODY_TOO_LARGE);
            refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                &too_large(cap as u64 + 1, cap, is_ingest),
            )
        }
        ReadError::Broken(e) => {
            tel.http_refused.inc(refuse_reason::MALFORMED_REQUEST);
            refusal(
                StatusCode::BAD_REQUEST,
                &format!("the body could not be read: {e}"),
            )
        }
    })
}

/// A gzip body inflated, at most `cap` bytes (CPU work up to the cap: off
/// the reactor); `Err` the refusal.
async fn inflate(
    rules: &BodyRules,
    raw: Bytes,
    cap: usize,
    is_ingest: bool,
) -> Result<Bytes, Response> {
    let tel = &rules.telemetry;
    let inflated = tokio::task::spawn_blocking(move || inflate_capped(&raw, cap))
        .await
        .unwrap_or_else(|e| Err(InflateError::Corrupt(std::io::Error::other(e))));
    match inflated {
        Ok(b) => Ok(Bytes::from(b)),
        Err(InflateError::TooLarge) => {
            tel.http_refused.inc(refuse_reason::BODY_TOO_LARGE);
            Err(refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the gzip body inflates to more than {cap} bytes, the cap on decompressed bodies too{}", cap_key(is_ingest)),
            ))
        }
        Err(InflateError::Corrupt(e)) => {
            tel.http_refused.inc(refuse_reason::BAD_ENCODING);
            Err(refusal(
                StatusCode::BAD_REQUEST,
                &format!("the body says Content-Encoding: gzip but does not inflate: {e}"),
            ))
        }
    }
}

/// The body of a JSON route (breaker outcomes and decisions, limit
/// acquires), as an extractor: see [`json_only`].
pub struct JsonBody(pub Bytes);

impl axum::extract::FromRequest<super::AppState> for JsonBody {
    type Rejection = Response;

    async fn from_request(req: Request, st: &super::AppState) -> Result<Self, Response> {
        let headers = req.headers().clone();
        // JSON, as every answer of a JSON route.
        let body = Bytes::from_request(req, st)
            .await
            .map_err(|e| super::api_error(e.status(), e.body_text()))?;
        match json_only(&headers, &body, &st.ingestor.telemetry) {
            Some(refused) => Err(refused),
            None => Ok(JsonBody(body)),
        }
    }
}

/// The check of a JSON route: its `Content-Type` must be
/// `application/json` (or a `+json` type), or absent with an empty body;
/// anything else is `415`, counted as `unsupported_media_type`. A browser
/// form can post `text/plain` to any site without asking; it cannot post
/// `application/json` without a CORS preflight, which the daemon answers
/// only for listed origins.
fn json_only(headers: &axum::http::HeaderMap, body: &[u8], tel: &Telemetry) -> Option<Response> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .filter(|v| !v.as_bytes().trim_ascii().is_empty());
    let ok = match ct {
        None => body.is_empty(),
        Some(v) => v.to_str().ok().is_some_and(is_json_type),
    };
    if ok {
        return None;
    }
    tel.http_refused.inc(refuse_reason::UNSUPPORTED_MEDIA_TYPE);
    let sent = ct.and_then(|v| v.to_str().ok()).map_or_else(
        || "none, with a body".to_string(),
        |s| format!("`{}`", s.chars().take(64).collect::<String>()),
    );
    Some(
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            axum::Json(serde_json::json!({
                "error": format!("this route takes JSON: send Content-Type: application/json (sent: {sent})")
            })),
        )
            .into_response(),
    )
}

/// `application/json`, `application/x+json`, with any parameters.
fn is_json_type(ct: &str) -> bool {
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn cap_key(is_ingest: bool) -> &'static str {
    if is_ingest {
        " (ingest.http_max_body_bytes)"
    } else {
        ""
    }
}

fn too_large(n: u64, cap: usize, is_ingest: bool) -> String {
    format!(
        "the body is {n} bytes; at most {cap} are accepted{}",
        cap_key(is_ingest)
    )
}

/// An error answer that also closes the connection: the body may not have
/// been read, so the connection cannot carry another request.
fn refusal(code: StatusCode, msg: &str) -> Response {
    let mut r = (code, axum::Json(serde_json::json!({ "error": msg }))).into_response();
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// The declared `Content-Length`: `None` if absent, an error if not one
/// integer (repeated equal values are one).
fn declared_length(headers: &axum::http::HeaderMap) -> Result<Option<u64>, ()> {
    let mut out = None;
    for v in headers.get_all(header::CONTENT_LENGTH) {
        let n: u64 = v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or(())?;
        if out.is_some_and(|prev| prev != n) {
            return Err(());
        }
        out = Some(n);
    }
    Ok(out)
}

/// Body codings we read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    Identity,
    Gzip,
}

impl Encoding {
    /// From `Content-Encoding`; the unsupported coding's name otherwise.
    fn of(headers: &axum::http::HeaderMap) -> Result<Encoding, String> {
        let mut out = Encoding::Identity;
        for v in headers.get_all(header::CONTENT_ENCODING) {
            let s = v.to_str().map_err(|_| "(not text)".to_string())?;
            for coding in s.split(',').map(str::trim).filter(|c| !c.is_empty()) {
                match coding.to_ascii_lowercase().as_str() {
                    "identity" => {}
                    "gzip" | "x-gzip" if out == Encoding::Identity => out = Encoding::Gzip,
                    // Twice gzip, or anything else: not what we read.
                    _ => return Err(coding.to_string()),
                }
            }
        }
        Ok(out)
    }
}

enum ReadError {
    TimedOut,
    TooLarge,
    Broken(axum::Error),
}

/// Reads `body` whole by `deadline`, failing as soon as it exceeds `cap`.
async fn read_capped(
    mut body: Body,
    cap: usize,
    deadline: tokio::time::Instant,
) -> Result<Bytes, ReadError> {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(ReadError::TimedOut),
            Ok(None) => return Ok(Bytes::from(buf)),
            Ok(Some(Err(e))) => return Err(ReadError::Broken(e)),
            Ok(Some(Ok(f))) => f,
        };
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > cap {
                return Err(ReadError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
}

/// Why a gzip body was not inflated.
#[derive(Debug)]
pub enum InflateError {
    /// It inflates to more than the cap.
    TooLarge,
    /// It is not gzip.
    Corrupt(std::io::Error),
}

/// Inflates a gzip body (one or more members), never holding more than
/// `cap + 1` bytes of output.
pub fn inflate_capped(data: &[u8], cap: usize) -> Result<Vec<u8>, InflateError> {
    let mut out = Vec::new();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::MultiGzDecoder::new(data)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(InflateError::Corrupt)?;
    if out.len() > cap {
        return Err(InflateError::TooLarge);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_cap() {
        // 64 MiB of zeros in ~64 KiB; the cap is 1 MiB.
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 1 << 20, "{}", bomb.len());
        assert!(matches!(
            inflate_capped(&bomb, 1 << 20),
            Err(InflateError::TooLarge)
        ));
        // Exactly at the cap is fine.
        let at_cap = gzip(&vec![b'a'; 1000]);
        assert_eq!(inflate_capped(&at_cap, 1000).unwrap().len(), 1000);
        assert!(matches!(
            inflate_capped(&at_cap, 999),
            Err(InflateError::TooLarge)
        ));
        assert!(matches!(
            inflate_capped(b"not gzip", 1000),
            Err(InflateError::Corrupt(_))
        ));
    }

    #[test]
    fn encodings_and_lengths() {
        let mut h = axum::http::HeaderMap::new();
        assert_eq!(Encoding::of(&h), Ok(Encoding::Identity));
        h.insert(header::CONTENT_ENCODING, "GZIP".parse().unwrap());
        assert_eq!(Encoding::of(&h), Ok(Encoding::Gzip));
        h.insert(header::CONTENT_ENCODING, "br".parse().unwrap());
        assert_eq!(Encoding::of(&h), Err("br".to_string()));
        h.insert(header::CONTENT_ENCODING, "gzip, gzip".parse().unwrap());
        assert!(Encoding::of(&h).is_err());
        let mut h = axum::http::HeaderMap::new();
        assert_eq!(declared_length(&h), Ok(None));
        h.append(header::CONTENT_LENGTH, "5".parse().unwrap());
        h.append(header::CONTENT_LENGTH, "5".parse().unwrap());
        assert_eq!(declared_length(&h), Ok(Some(5)));
        h.append(header::CONTENT_LENGTH, "6".parse().unwrap());
        assert_eq!(declared_length(&h), Err(()));
    }
}
