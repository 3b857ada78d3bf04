//! Registry reads over HTTP: `GET /api/v1/series` (paginated, by glob or
//! exact name) and `GET /api/v1/metrics`.
//!
//! Both walk the registry, work proportional to the series count: they run
//! on the blocking pool, never on the reactor, at most
//! `http.max_concurrent_api_reads` at once (more get `503` with
//! `Retry-After: 1`, counted as `api_busy`), and the walk holds a shard lock
//! only to copy pointers or to read one series ([`crate::expose::paging`]).

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{api_error, AppState};
use crate::expose::json;
use crate::expose::paging::{self, Cursor, PageQuery, Selector};
use crate::mapping::Glob;
use crate::telemetry::refuse_reason;

/// `GET /api/v1/series` parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesParams {
    /// A glob on the statsd name.
    #[serde(rename = "match")]
    pattern: Option<String>,
    /// One exact statsd name.
    metric: Option<String>,
    /// Series per page.
    limit: Option<usize>,
    /// Where the page starts: `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// Reads the parameters into a page query; the error says what to fix.
fn page_query(p: SeriesParams) -> Result<PageQuery, (&'static str, String)> {
    let query = |e: String| (refuse_reason::BAD_QUERY, e);
    let selector = match (p.pattern, p.metric) {
        (Some(_), Some(_)) => {
            return Err(query(
                "give `match` (a glob) or `metric` (one exact name), not both".into(),
            ))
        }
        (Some(g), None) => Selector::Glob(
            Glob::new(&g)
                .map_err(|e| (refuse_reason::BAD_PATTERN, format!("bad `match` glob: {e}")))?,
        ),
        (None, Some(m)) => Selector::Metric(m),
        (None, None) => Selector::All,
    };
    let limit = p.limit.unwrap_or(paging::DEFAULT_PAGE);
    if !(1..=paging::MAX_PAGE).contains(&limit) {
        return Err(query(format!(
            "`limit` must be from 1 to {} (got {limit}); walk further pages with `cursor`",
            paging::MAX_PAGE
        )));
    }
    let after = p
        .cursor
        .as_deref()
        .map(Cursor::decode)
        .transpose()
        .map_err(query)?;
    Ok(PageQuery {
        selector,
        limit,
        after,
    })
}

/// The `503` for a registry read beyond the cap, counted.
fn busy(st: &AppState) -> Response {
    st.ingestor
        .telemetry
        .http_refused
        .inc(refuse_reason::API_BUSY);
    let mut r = api_error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{} registry reads are already running (http.max_concurrent_api_reads); retry in a second",
                st.api_slots_max
            ),
        );
    r.headers_mut().insert(header::RETRY_AFTER, 1.into());
    r
}

/// Runs `f` on the blocking pool holding a read slot, and answers its JSON.
async fn blocking_json<T: serde::Serialize + Send + 'static>(
    st: &AppState,
    f: impl FnOnce() -> T + Send + 'static,
) -> Response {
    let Ok(slot) = st.api_slots.clone().try_acquire_owned() else {
        return busy(st);
    };
    // The slot goes with the work (a client that goes away does not free
    // it while the walk still runs) and then with the answer until it is
    // sent: at most that many answers are in memory at once.
    let done = tokio::task::spawn_blocking(move || (serde_json::to_vec(&f()), slot)).await;
    match done {
        Ok((Ok(body), slot)) => {
            let body = super::held::Held::chunked(
                body.into(),
                st.response_timeout,
                slot,
                st.ingestor.telemetry.http_closed.clone(),
            );
            (
                [(header::CONTENT_TYPE, "application/json")],
                axum::body::Body::new(body),
            )
                .into_response()
        }
        Ok((Err(e), _)) => api_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding the answer failed: {e}"),
        ),
        Err(e) => api_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the read task failed: {e}"),
        ),
    }
}

/// `GET /api/v1/series?match=<glob>|metric=<name>&limit=<n>&cursor=<c>`.
pub async fn series(
    State(st): State<AppState>,
    params: Result<Query<SeriesParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match params
        .map_err(|e| (refuse_reason::BAD_QUERY, e.body_text()))
        .and_then(|Query(p)| page_query(p))
    {
        Ok(q) => q,
        Err((reason, e)) => {
            st.ingestor.telemetry.http_refused.inc(reason);
            return api_error(StatusCode::BAD_REQUEST, e);
        }
    };
    let now = st.ingestor.now();
    let (registry, fleet) = (st.ingestor.registry.clone(), st.state_families.clone());
    blocking_json(&st, move || {
        let page = paging::select(&registry, &q);
        json::series_page(&registry, now, &page, fleet.fleet())
    })
    .await
}

/// `GET /api/v1/metrics`.
pub async fn metric_names(State(st): State<AppState>) -> Response {
    let registry = st.ingestor.registry.clone();
    blocking_json(&st, move || json::metrics(&registry)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pattern: Option<&str>, metric: Option<&str>, limit: Option<usize>) -> SeriesParams {
        SeriesParams {
            pattern: pattern.map(String::from),
            metric: metric.map(String::from),
            limit,
            cursor: None,
        }
    }

    #[test]
    fn bad_queries_say_what_to_fix() {
        let (r, e) = page_query(params(Some("a.*"), Some("a.b"), None)).unwrap_err();
        assert!(e.contains("not both") && r == "bad_query", "{e}");
        let (r, e) = page_query(params(None, None, Some(0))).unwrap_err();
        assert!(e.contains("from 1 to 10000") && r == "bad_query", "{e}");
        let (r, e) = page_query(params(Some("a***"), None, None)).unwrap_err();
        assert!(
            e.starts_with("bad `match` glob") && r == "bad_pattern",
            "{e}"
        );
        // An exact name is never a pattern, whatever it contains.
        let q = page_query(params(None, Some("evil***"), None)).unwrap();
        assert!(q.selector.selects("evil***"));
        assert!(!q.selector.selects("evil"));
        assert_eq!(q.limit, paging::DEFAULT_PAGE);
    }
}
