//! The breaker routes: signals, the central decision, and outcomes posted
//! by clients.
//!
//! `POST .../outcomes` takes `{"success": n, "failure": n, "slow": n}`, each
//! a whole number from 0 to [`MAX_OUTCOMES`] (10^9) per request; anything
//! else (a bigger number, a negative or fractional one, `slow > success`,
//! malformed JSON) is a 400 that names the field, counted in
//! `rollstat_http_requests_refused_total{reason="bad_outcomes"}`, and
//! records nothing.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::body::JsonBody;
use super::{api_error, services, unknown, AppState};
use crate::expose::signals::BreakerJson;
use crate::service::breakers::MAX_OUTCOMES;
use crate::telemetry::refuse_reason;

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

/// `POST .../decision`: the central verdict, taken: a half-open
/// error-rate breaker hands out one of its trial permits with an `allow`.
pub(super) async fn decision(
    State(st): State<AppState>,
    Path(name): Path<String>,
    _: JsonBody,
) -> Response {
    verdict(&st, &name, true)
}

/// `GET .../decision`: what a `POST` would answer now, without taking it:
/// no trial permit is used, so a browser prefetch or a crawler changes
/// nothing.
pub(super) async fn peek(State(st): State<AppState>, Path(name): Path<String>) -> Response {
    verdict(&st, &name, false)
}

fn verdict(st: &AppState, name: &str, take: bool) -> Response {
    let s = services(st);
    let Some(b) = s.breakers.get(name) else {
        return unknown("breaker", name);
    };
    let now = st.ingestor.now();
    let verdict = if take {
        b.breaker.allow(now)
    } else {
        b.breaker.peek(now)
    };
    let sig = b.breaker.signals(now);
    Json(serde_json::json!({
        "breaker": name,
        "decision": if verdict.is_allowed() { "allow" } else { "shed" },
        "taken": take,
        "state": sig.state.as_str(),
        "drop_ratio": sig.drop_ratio,
    }))
    .into_response()
}

/// The body as sent: any JSON numbers, checked by [`Outcomes::counts`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Outcomes {
    success: Option<serde_json::Number>,
    failure: Option<serde_json::Number>,
    /// Of the successes, how many were slow.
    slow: Option<serde_json::Number>,
}

/// Checked outcome counts, each at most [`MAX_OUTCOMES`].
#[derive(Debug, PartialEq, Eq)]
struct Counts {
    success: u64,
    failure: u64,
    slow: u64,
}

impl Outcomes {
    /// The counts, or what the operator must fix.
    fn counts(&self) -> Result<Counts, String> {
        let c = Counts {
            success: count_field("success", self.success.as_ref())?,
            failure: count_field("failure", self.failure.as_ref())?,
            slow: count_field("slow", self.slow.as_ref())?,
        };
        if c.slow > c.success {
            return Err(format!(
                "`slow` counts slow successes and cannot exceed `success`; got slow {} and success {}",
                c.slow, c.success
            ));
        }
        Ok(c)
    }
}

/// One field: absent is 0; else a whole number from 0 to [`MAX_OUTCOMES`].
fn count_field(name: &str, n: Option<&serde_json::Number>) -> Result<u64, String> {
    let Some(n) = n else {
        return Ok(0);
    };
    n.as_u64().filter(|&v| v <= MAX_OUTCOMES).ok_or_else(|| {
        format!(
            "`{name}` must be a whole number from 0 to {MAX_OUTCOMES} (the cap per field \
             per request); got {n}. Report larger batches as several requests"
        )
    })
}

/// Parses an outcomes body.
fn parse_outcomes(body: &[u8]) -> Result<Counts, String> {
    serde_json::from_slice::<Outcomes>(body)
        .map_err(|e| format!("expected {{\"success\": n, \"failure\": n, \"slow\": n}} ({e})"))?
        .counts()
}

pub(super) async fn outcomes(
    State(st): State<AppState>,
    Path(name): Path<String>,
    JsonBody(body): JsonBody,
) -> Response {
    let s = services(&st);
    let Some(b) = s.breakers.get(&name) else {
        return unknown("breaker", &name);
    };
    let o = match parse_outcomes(&body) {
        Ok(o) => o,
        Err(e) => {
            st.ingestor
                .telemetry
                .http_refused
                .inc(refuse_reason::BAD_OUTCOMES);
            return api_error(StatusCode::BAD_REQUEST, e);
        }
    };
    let now = st.ingestor.now();
    b.record(o.success, o.failure, o.slow, now);
    Json(BreakerJson::of(b, now)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        parse_outcomes(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn outcome_counts_up_to_the_cap_are_taken_and_missing_fields_are_zero() {
        let cap = MAX_OUTCOMES;
        let c = parse_outcomes(format!(r#"{{"success": {cap}, "slow": {cap}}}"#).as_bytes());
        assert_eq!(
            c,
            Ok(Counts {
                success: cap,
                failure: 0,
                slow: cap
            })
        );
        let c = parse_outcomes(b"{}").unwrap();
        assert_eq!((c.success, c.failure, c.slow), (0, 0, 0));
    }

    #[test]
    fn outcome_counts_above_the_cap_or_not_whole_name_the_field_and_the_cap() {
        for (body, field) in [
            (r#"{"success": 18446744073709551615}"#, "`success`"),
            (r#"{"failure": 1000000001}"#, "`failure`"),
            (r#"{"failure": 1e300}"#, "`failure`"),
            (r#"{"slow": -1}"#, "`slow`"),
            (r#"{"success": 2.5}"#, "`success`"),
            (r#"{"success": 99999999999999999999999}"#, "`success`"),
        ] {
            let e = err(body);
            assert!(
                e.starts_with(field) && e.contains("from 0 to 1000000000"),
                "{body}: {e}"
            );
        }
        assert!(err(r#"{"success": 1, "slow": 2}"#).contains("cannot exceed `success`"));
        assert!(err(r#"{"succes": 1}"#).starts_with("expected {\"success\""));
        assert!(err("not json").starts_with("expected"));
    }
}
