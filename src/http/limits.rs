//! The limit routes: `GET /api/v1/limits` (limits, rules, key counts and
//! decision counts) and `POST /api/v1/limits/{name}/acquire`.
//!
//! An acquire takes `?key=..&n=..` or `{"key": .., "n": ..}` (the body
//! wins where both give a field; `n` defaults to 1) and answers 200 or 429
//! with RateLimit headers; `"source"` says who decided (`local`, `redis`,
//! `fallback`), `"fallback"` which `on_store_error` answered. Every error is
//! JSON `{"error": ...}`; a malformed request is a 400 counted in
//! `rollstat_http_requests_refused_total{reason="bad_acquire"}`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::body::JsonBody;
use super::{api_error, query, services, unknown, AppState};
use crate::escape::Escaped;
use crate::limit::{AcquireError, Decision};
use crate::service::limits::{ceil_secs, NamedLimit, Source, Verdict, DECISIONS};
use crate::telemetry::refuse_reason;

/// `GET /api/v1/limits`.
pub(super) async fn list(State(st): State<AppState>) -> Response {
    let s = services(&st);
    let list: Vec<serde_json::Value> = s.limits.iter().map(|l| limit_json(l)).collect();
    Json(list).into_response()
}

/// One limit in the list: its rules, keys and decision counts.
fn limit_json(l: &NamedLimit) -> serde_json::Value {
    let stats = l.stats();
    let rules: Vec<_> = l
        .limits()
        .as_slice()
        .iter()
        .map(|r| serde_json::json!({"max": r.max(), "window_secs": r.window().as_secs_f64()}))
        .collect();
    let decisions: serde_json::Map<_, _> = DECISIONS
        .iter()
        .zip(l.decisions.iter())
        .map(|(d, n)| {
            (
                d.to_string(),
                serde_json::Value::from(n.load(Ordering::Relaxed)),
            )
        })
        .collect();
    serde_json::json!({
        "name": l.def.name,
        "algorithm": l.algorithm(),
        "shared": l.is_shared(),
        "rules": rules,
        "keys": stats.keys,
        "max_keys": stats.max_keys,
        "decisions": decisions,
    })
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AcquireRequest {
    key: Option<String>,
    n: Option<u64>,
}

/// Longest key accepted.
const MAX_KEY_BYTES: usize = 512;

/// `POST /api/v1/limits/{name}/acquire`.
pub(super) async fn acquire(
    State(st): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
    JsonBody(body): JsonBody,
) -> Response {
    let (name, q) = match name_and_query(path, raw.as_deref()) {
        Ok(r) => r,
        Err(msg) => return bad(&st, msg),
    };
    let s = services(&st);
    let Some(limit) = s.limits.get(&name) else {
        return unknown("limit", &name);
    };
    let (key, n) = match key_and_n(q, &body) {
        Ok(r) => r,
        Err(msg) => return bad(&st, msg),
    };
    let verdict = limit.decide(&key, n, st.ingestor.now()).await;
    answer(limit, verdict)
}

/// Every request error is a JSON 400, counted as `bad_acquire`.
fn bad(st: &AppState, msg: String) -> Response {
    st.ingestor
        .telemetry
        .http_refused
        .inc(refuse_reason::BAD_ACQUIRE);
    api_error(StatusCode::BAD_REQUEST, msg)
}

/// The limit's name from the path, and the query string.
fn name_and_query(
    path: Result<Path<String>, PathRejection>,
    raw: Option<&str>,
) -> Result<(String, AcquireRequest), String> {
    let name = match path {
        Ok(Path(name)) => name,
        Err(e) => return Err(format!("the limit name in the path: {}", e.body_text())),
    };
    Ok((name, acquire_query(raw)?))
}

/// The key and weight asked for: the body's, else the query's; `n` is 1
/// unless given.
fn key_and_n(q: AcquireRequest, body: &[u8]) -> Result<(String, u32), String> {
    let from_body: AcquireRequest = if body.is_empty() {
        AcquireRequest::default()
    } else {
        serde_json::from_slice(body)
            .map_err(|e| format!("expected {{\"key\": \"...\", \"n\": 1}} or ?key=...&n=1 ({e})"))?
    };
    let Some(key) = from_body.key.or(q.key) else {
        return Err("missing `key` (query ?key=... or JSON {\"key\": ...})".into());
    };
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(format!("`key` must be 1 to {MAX_KEY_BYTES} bytes"));
    }
    let n = from_body.n.or(q.n).unwrap_or(1);
    let Ok(n) = u32::try_from(n) else {
        return Err(format!("`n` must be at most {}", u32::MAX));
    };
    Ok((key, n))
}

/// The acquire route's query string, read strictly (see [`query`]): a bad
/// percent-escape, a value that is not UTF-8, an unknown or repeated
/// parameter, an `n` that is not a whole number are errors.
fn acquire_query(raw: Option<&str>) -> Result<AcquireRequest, String> {
    let mut q = AcquireRequest::default();
    for (name, value) in query::pairs(raw.unwrap_or("")).map_err(|e| e.to_string())? {
        match name.as_str() {
            "key" if q.key.is_none() => q.key = Some(value),
            "n" if q.n.is_none() => {
                q.n = Some(value.parse().map_err(|_| {
                    format!(
                        "`n` must be a whole number from 0 to {} (got `{}`)",
                        u32::MAX,
                        Escaped::with_cap(value.as_bytes(), 32)
                    )
                })?);
            }
            "key" | "n" => return Err(format!("`{name}` is given twice; give it once")),
            _ => {
                return Err(format!(
                    "unknown parameter `{}`; the acquire route takes `key` and `n` (?key=...&n=1)",
                    Escaped::with_cap(name.as_bytes(), 64)
                ))
            }
        }
    }
    Ok(q)
}

/// Any method but POST on the acquire route: JSON, as its other errors.
pub(super) async fn wrong_method() -> Response {
    let mut resp = api_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "use POST /api/v1/limits/{name}/acquire?key=...&n=1".into(),
    );
    resp.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    resp
}

/// Who decided, as an acquire answer says it.
struct Decider {
    source: Source,
    /// Which `on_store_error` answered, if the shared store failed.
    fallback: Option<&'static str>,
    /// Why the shared store could not decide, if it could not.
    store_error: Option<String>,
}

/// The verdict as an HTTP answer.
fn answer(limit: &Arc<NamedLimit>, verdict: Verdict) -> Response {
    let who = Decider {
        source: verdict.source,
        fallback: verdict
            .store_error
            .is_some()
            .then(|| limit.def.on_store_error.as_str()),
        store_error: verdict.store_error.map(|e| e.to_string()),
    };
    match verdict.result {
        Ok(d) if who.source == Source::Fallback => fallback_answer(limit, d.allowed, who),
        Ok(d) => decided_answer(limit, &d, who),
        Err(e @ AcquireError::TooManyKeys { retry_after, .. }) => {
            let mut resp = api_error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("limit `{}`: {e}", limit.def.name),
            );
            resp.headers_mut()
                .insert(header::RETRY_AFTER, ceil_secs(retry_after).max(1).into());
            resp
        }
        Err(e) => api_error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

/// `allow` or `deny` answered: no limiter decided, so there is no quota to
/// show (no RateLimit header, no remaining or reset).
fn fallback_answer(limit: &NamedLimit, allowed: bool, who: Decider) -> Response {
    let mut resp = if allowed {
        let body = serde_json::json!({
            "allowed": true,
            "source": who.source.as_str(),
            "fallback": who.fallback,
            "store_error": who.store_error,
        });
        (StatusCode::OK, Json(body)).into_response()
    } else {
        // Fail closed: the store could not decide. Not a quota denial.
        let body = serde_json::json!({
            "allowed": false,
            "source": who.source.as_str(),
            "fallback": who.fallback,
            "error": who.store_error,
        });
        let mut resp = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
        resp.headers_mut().insert(header::RETRY_AFTER, 1.into());
        resp
    };
    if let Ok(v) = limit.policy_header.parse() {
        resp.headers_mut().insert("ratelimit-policy", v);
    }
    resp
}

/// A limiter decided: 200 or 429, the binding rule, and the RateLimit
/// headers.
fn decided_answer(limit: &NamedLimit, d: &Decision, who: Decider) -> Response {
    let body = AcquireResponse {
        allowed: d.allowed,
        remaining: d.remaining,
        reset: d.reset.as_secs_f64(),
        retry_after: d.retry_after.map(|r| r.as_secs_f64()),
        limit: RuleJson {
            max: d.limit.max(),
            window_secs: d.limit.window().as_secs_f64(),
        },
        source: who.source.as_str(),
        fallback: who.fallback,
        store_error: who.store_error,
    };
    let code = if d.allowed {
        StatusCode::OK
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    let mut resp = (code, Json(body)).into_response();
    ratelimit_headers(resp.headers_mut(), limit, d);
    resp
}

/// `RateLimit-Policy`, `RateLimit` (the binding rule's name, remaining and
/// reset) and, on a denial, `Retry-After`.
fn ratelimit_headers(h: &mut HeaderMap, limit: &NamedLimit, d: &Decision) {
    let rules = limit.limits().as_slice();
    let idx = rules.iter().position(|l| *l == d.limit).unwrap_or(0);
    let state = format!(
        "\"{}\";r={};t={}",
        limit.policy_names[idx],
        d.remaining,
        ceil_secs(d.reset)
    );
    if let Ok(v) = limit.policy_header.parse() {
        h.insert("ratelimit-policy", v);
    }
    if let Ok(v) = state.parse() {
        h.insert("ratelimit", v);
    }
    if let Some(r) = d.retry_after {
        h.insert(header::RETRY_AFTER, ceil_secs(r).max(1).into());
    }
}

#[derive(serde::Serialize)]
struct RuleJson {
    max: u32,
    window_secs: f64,
}

/// The body of an acquire answer.
#[derive(serde::Serialize)]
struct AcquireResponse {
    allowed: bool,
    remaining: u32,
    reset: f64,
    retry_after: Option<f64>,
    limit: RuleJson,
    /// Who decided: `local`, `redis` or `fallback`.
    source: &'static str,
    /// The `on_store_error` policy that answered because the shared store
    /// failed (`local` here: this instance's limiter decided).
    #[serde(skip_serializing_if = "Option::is_none")]
    fallback: Option<&'static str>,
    /// Why the shared store could not decide, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    store_error: Option<String>,
}
