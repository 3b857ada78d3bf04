//! Who may use which route, at the door of the router ([`guard`], a
//! step of the one middleware in front of every route, before a body is read):
//!
//! 1. the browser rules: a `Host` that is a name the daemon does not answer
//!    to (DNS rebinding) or an `Origin` of another site is `403`;
//! 2. the route's group ([`group_of`]) and its access: open, protected
//!    (`401` without a valid bearer token or basic-auth user, with the
//!    challenges in `WWW-Authenticate`) or off (`403`).
//!
//! Every refusal is counted in `rollstat_http_requests_refused_total` under
//! its reason, and none is logged: a log line per refused request would
//! let anyone fill the disk, and credentials must never reach a log.
//! bcrypt verifications (tens of milliseconds of CPU each) run off the
//! reactor, [`MAX_BCRYPT_AT_ONCE`] at a time; a verified pair is
//! remembered, so a scraper pays once per reload.
//!
//! Every answer carries `X-Content-Type-Options: nosniff`; one to an
//! `Origin` listed in `http.allowed_origins` carries
//! `Access-Control-Allow-Origin` for it, and such an origin's CORS
//! preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered
//! here.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::access::{AccessHandle, Authorized, Check, GroupAccess, Refusal, RouteGroup};
use crate::telemetry::{refuse_reason, Telemetry};

/// bcrypt verifications running at once; more get `503` with
/// `Retry-After: 1` (`auth_busy`). One: each takes a core for tens of
/// milliseconds, and a flood of wrong passwords must not take both.
pub const MAX_BCRYPT_AT_ONCE: usize = 1;

/// What [`guard`] needs.
#[derive(Clone)]
pub struct AccessState {
    /// The policy in force (replaced at reload).
    pub handle: Arc<AccessHandle>,
    /// Where refusals are counted.
    pub telemetry: Arc<Telemetry>,
    /// Whether the listener speaks TLS (the daemon's own origin is then
    /// `https://`).
    pub https: bool,
    /// Slots for bcrypt verifications.
    pub bcrypt_slots: Arc<tokio::sync::Semaphore>,
}

/// The group a request belongs to, from its method and path alone, so that
/// no route can be added without one: `/healthz`, `/-/healthy`, `/-/ready`
/// and `/healthcheck` none (always open, for probes), `/-/*` admin (the lifecycle API), every other `GET`/`HEAD`
/// read, every other method write (it may change state).
#[must_use]
pub fn group_of(method: &Method, path: &str) -> Option<RouteGroup> {
    if matches!(
        path,
        "/healthz" | "/-/healthy" | "/-/ready" | "/healthcheck"
    ) {
        None
    } else if path.starts_with("/-/") {
        Some(RouteGroup::Admin)
    } else if method == Method::GET || method == Method::HEAD {
        Some(RouteGroup::Read)
    } else {
        Some(RouteGroup::Write)
    }
}

/// Admits `req` and hands it to `next` (the body guard, then the handler),
/// or refuses it.
pub async fn guard<F>(st: &AccessState, req: Request, next: impl FnOnce(Request) -> F) -> Response
where
    F: std::future::Future<Output = Response>,
{
    let access = st.handle.current();
    let headers = req.headers();
    let host = header_str(headers, header::HOST);
    let origin = header_str(headers, header::ORIGIN).map(str::to_string);
    // A refused request's body is never read, so its connection cannot
    // carry another request: close it.
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    if let Err(r) = access.browser.check(host, origin.as_deref(), st.https) {
        return closing(
            refuse(st, Refusal::from(r), None, None, &access.headers),
            has_body,
        );
    }
    // A listed origin's CORS preflight: answered here, before any group
    // (a browser sends no credentials on a preflight).
    let listed = origin
        .as_deref()
        .filter(|o| access.browser.is_listed_origin(o))
        .map(str::to_string);
    if req.method() == Method::OPTIONS
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        if let Some(o) = &listed {
            let mut r = StatusCode::NO_CONTENT.into_response();
            cors(r.headers_mut(), o);
            let h = r.headers_mut();
            h.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("authorization, content-type"),
            );
            h.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
            return finish(r, None, &access.headers);
        }
    }
    if let Some(group) = group_of(req.method(), req.uri().path()) {
        let authz = header_str(headers, header::AUTHORIZATION);
        let verdict = match access.authorize(group, authz) {
            Authorized::Bcrypt {
                credentials,
                user,
                password,
            } => match st.bcrypt_slots.clone().try_acquire_owned() {
                Ok(slot) => {
                    let check = tokio::task::spawn_blocking(move || {
                        let _slot = slot;
                        credentials.verify_user(&user, &password)
                    })
                    .await
                    .unwrap_or(Check::Invalid);
                    if check == Check::Valid {
                        None
                    } else {
                        Some(Refusal::BadCredentials)
                    }
                }
                Err(_) => {
                    st.telemetry.http_refused.inc(refuse_reason::AUTH_BUSY);
                    let mut r = (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "too many password checks are running; retry in a second (a bearer token is checked at once)\n",
                    )
                        .into_response();
                    r.headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                    return closing(finish(r, listed.as_deref(), &access.headers), has_body);
                }
            },
            Authorized::Yes => None,
            Authorized::No(r) => Some(r),
        };
        if let Some(r) = verdict {
            return closing(
                refuse(
                    st,
                    r,
                    Some(access.group(group)),
                    Some(group),
                    &access.headers,
                ),
                has_body,
            );
        }
    }
    let r = next(req).await;
    finish(r, listed.as_deref(), &access.headers)
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// The refusal's answer, counted.
fn refuse(
    st: &AccessState,
    r: Refusal,
    access: Option<&GroupAccess>,
    group: Option<RouteGroup>,
    headers: &[(String, String)],
) -> Response {
    st.telemetry.http_refused.inc(r.reason());
    let group_name = group.map_or("", RouteGroup::as_str);
    let (status, msg) = match r {
        Refusal::Host => (
            StatusCode::FORBIDDEN,
            "the Host header names a host this daemon does not answer to (a DNS-rebinding guard); if it is this daemon's name, add it to [http] allowed_hosts".to_string(),
        ),
        Refusal::Origin => (
            StatusCode::FORBIDDEN,
            "cross-site request refused: the Origin header is neither this daemon's own nor listed in [http] allowed_origins".to_string(),
        ),
        Refusal::GroupOff if group == Some(RouteGroup::Admin) => (
            StatusCode::FORBIDDEN,
            "the lifecycle API is off (as Prometheus without --web.enable-lifecycle); enable it with [http.auth.admin] access = \"protected\" and a tokens_file, or send the daemon SIGHUP to reload".to_string(),
        ),
        Refusal::GroupOff => (
            StatusCode::FORBIDDEN,
            format!("the `{group_name}` routes are off ([http.auth.{group_name}] access = \"off\")"),
        ),
        Refusal::NoCredentials | Refusal::BadCredentials => (
            StatusCode::UNAUTHORIZED,
            format!(
                "the `{group_name}` routes need credentials ([http.auth.{group_name}]): {}",
                if r == Refusal::NoCredentials {
                    "none were sent"
                } else {
                    "the ones sent match no token or user"
                }
            ),
        ),
    };
    let mut resp = (status, format!("{msg}\n")).into_response();
    if status == StatusCode::UNAUTHORIZED {
        if let Some(GroupAccess::Protected(c)) = access {
            let (tokens, users) = c.schemes();
            let h = resp.headers_mut();
            if users {
                h.append(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"rollstat\", charset=\"UTF-8\""),
                );
            }
            if tokens {
                h.append(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"rollstat\""),
                );
            }
        }
    }
    finish(resp, None, headers)
}

/// `r` with `Connection: close` if the request had a body nobody read.
fn closing(mut r: Response, has_body: bool) -> Response {
    if has_body {
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

/// Headers every answer carries: nosniff, CORS for a listed origin, and
/// the configured ones (a web config's `http_server_config.headers`), which
/// replace the daemon's own value of the same header.
fn finish(
    mut r: Response,
    listed_origin: Option<&str>,
    configured: &[(String, String)],
) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Some(o) = listed_origin {
        cors(h, o);
    }
    for (name, value) in configured {
        // Checked by the config reader; one that still fails is skipped.
        if let (Ok(n), Ok(v)) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            h.insert(n, v);
        }
    }
    r
}

fn cors(h: &mut HeaderMap, origin: &str) {
    if let Ok(v) = HeaderValue::from_str(origin) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_method_and_path() {
        let g = |m: Method, p: &str| group_of(&m, p);
        assert_eq!(g(Method::GET, "/healthz"), None);
        assert_eq!(g(Method::GET, "/-/healthy"), None);
        assert_eq!(g(Method::GET, "/-/ready"), None);
        assert_eq!(g(Method::POST, "/-/reload"), Some(RouteGroup::Admin));
        assert_eq!(g(Method::PUT, "/-/reload"), Some(RouteGroup::Admin));
        assert_eq!(g(Method::GET, "/-/reload"), Some(RouteGroup::Admin));
        for p in [
            "/metrics",
            "/",
            "/assets/app.js",
            "/api/v1/series",
            "/api/v1/breakers/x/decision",
            "/nope",
        ] {
            assert_eq!(g(Method::GET, p), Some(RouteGroup::Read), "{p}");
            assert_eq!(g(Method::HEAD, p), Some(RouteGroup::Read), "{p}");
        }
        for p in [
            "/api/v1/ingest",
            "/api/v1/breakers/x/decision",
            "/api/v1/breakers/x/outcomes",
            "/api/v1/limits/x/acquire",
            "/metrics",
        ] {
            assert_eq!(g(Method::POST, p), Some(RouteGroup::Write), "{p}");
            assert_eq!(g(Method::DELETE, p), Some(RouteGroup::Write), "{p}");
        }
    }
}
