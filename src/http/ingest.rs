//! `POST /api/v1/ingest`: statsd lines or a JSON array of samples, applied
//! as if they had arrived over UDP.
//!
//! **Media types** (RFC 9110: compared without regard to case, parameters
//! such as `charset` ignored): `text/plain`, no `Content-Type` at all, and
//! `application/x-www-form-urlencoded` (what `curl -d` and
//! `curl --data-binary` send unless told otherwise; the body is read as
//! statsd text, not URL-decoded) are statsd lines; `application/json` is an
//! array of samples. Anything else is `415`, naming these, and counted as
//! `unsupported_media_type`.
//!
//! **Bad input costs only itself**, in both forms: every good line or
//! sample is applied, every bad one is counted under its reason in
//! `rollstat_ingest_rejected_lines_total` and reported. The answer is `200
//! {"accepted": n, "refused": n}` when nothing was rejected, else `400` with
//! the same counts, `rejected` (how many were) and `errors`, the first
//! [`MAX_LISTED_ERRORS`] of them with their position (`line`, 1-based, for
//! text; `index` in the array, 0-based, for JSON), `reason` and `message`.
//! A `400` therefore does not mean nothing was applied: resending the whole
//! body would count its good part twice. `refused` counts samples the
//! registry refused (`type_conflict`, `series_cap`, `label_collision`; see
//! `rollstat_series_refused_total`), which are no input error. A JSON body
//! that is not an array at all is refused whole (`400`, nothing applied).

use std::fmt;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use super::{api_error, AppState};
use crate::escape::Escaped;
use crate::expose::json::{self, JsonLines, SampleFault};
use crate::ingest::{FirstError, Ingestor, Worker};
use crate::parse::ParseOptions;
use crate::telemetry::{refuse_reason, Transport};

/// Bad lines or samples listed in one answer at most, the first ones in
/// body order; `rejected` counts them all. A 4 MiB body of bad samples
/// thus gets an answer of a few tens of kilobytes, not megabytes.
pub const MAX_LISTED_ERRORS: usize = 100;

/// What the `415` answer says is accepted.
const ACCEPTED_TYPES: &str = "send statsd lines as text/plain (application/x-www-form-urlencoded, what curl -d sends, and no Content-Type are read as statsd lines too) or an array of samples as application/json";

/// How a body is read, from its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyKind {
    /// statsd lines.
    Statsd,
    /// A JSON array of samples.
    Json,
}

impl BodyKind {
    /// From the `Content-Type` header (the first one, as every framework
    /// reads it); `Err` for a media type this route does not read.
    fn of(content_type: Option<&HeaderValue>) -> Result<BodyKind, ()> {
        let Some(v) = content_type else {
            return Ok(BodyKind::Statsd);
        };
        let (ty, sub) = media_type(v.as_bytes()).ok_or(())?;
        let is = |t: &str, s: &str| {
            ty.eq_ignore_ascii_case(t.as_bytes()) && sub.eq_ignore_ascii_case(s.as_bytes())
        };
        if is("application", "json") {
            Ok(BodyKind::Json)
        } else if is("text", "plain") || is("application", "x-www-form-urlencoded") {
            Ok(BodyKind::Statsd)
        } else {
            Err(())
        }
    }
}

/// The `type` and `subtype` of a `Content-Type` value (RFC 9110 §8.3.1:
/// `type "/" subtype *( OWS ";" OWS parameter )`), parameters ignored;
/// `None` unless both are tokens.
fn media_type(v: &[u8]) -> Option<(&[u8], &[u8])> {
    let essence = v.split(|&b| b == b';').next().unwrap_or(v);
    let essence = essence.trim_ascii();
    let slash = essence.iter().position(|&b| b == b'/')?;
    let (ty, sub) = (&essence[..slash], &essence[slash + 1..]);
    (is_token(ty) && is_token(sub)).then_some((ty, sub))
}

/// RFC 9110 `token`: one or more `tchar`.
fn is_token(b: &[u8]) -> bool {
    !b.is_empty()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

/// One bad line or sample of an answer.
#[derive(Serialize, Debug)]
struct ItemError {
    /// Text: the line's number among the body's non-empty lines (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    /// JSON: the sample's index in the array (0-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<usize>,
    /// The `reason` it is counted under.
    reason: &'static str,
    /// What was wrong, and what a good one looks like.
    message: String,
}

/// The errors of one body: the first [`MAX_LISTED_ERRORS`] listed, all
/// counted. Messages are formatted only for listed ones.
#[derive(Default)]
struct Listed {
    errors: Vec<ItemError>,
    total: u64,
}

impl Listed {
    fn add(&mut self, make: impl FnOnce() -> ItemError) {
        self.total += 1;
        if self.errors.len() < MAX_LISTED_ERRORS {
            self.errors.push(make());
        }
    }
}

pub(super) async fn ingest(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers.get(header::CONTENT_TYPE);
    let Ok(kind) = BodyKind::of(content_type) else {
        st.ingestor
            .telemetry
            .http_refused
            .inc(refuse_reason::UNSUPPORTED_MEDIA_TYPE);
        let shown = Escaped::with_cap(content_type.map_or(&b""[..], HeaderValue::as_bytes), 100);
        return api_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type `{shown}` is not read here; {ACCEPTED_TYPES}"),
        );
    };
    if body.len() <= INLINE_BODY_BYTES {
        return apply(&st, kind, &body);
    }
    // Parsing a large body takes a core for a while (a 4 MiB JSON body of
    // 1.4M items: ~0.3 s): off the reactor, so that other connections are
    // not stalled behind it.
    match tokio::task::spawn_blocking(move || apply(&st, kind, &body)).await {
        Ok(answer) => answer,
        Err(e) => api_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the ingest task failed: {e}"),
        ),
    }
}

/// Bodies up to this size are applied on the reactor thread (a few hundred
/// lines: less work than handing them to the blocking pool).
const INLINE_BODY_BYTES: usize = 16 * 1024;

/// Applies a body of `kind` and builds the answer.
fn apply(st: &AppState, kind: BodyKind, body: &[u8]) -> Response {
    let ing = &st.ingestor;
    let mut w = Worker::default();
    w.counts.packets = 1;
    let now = ing.now();
    let (listed, what, items) = match kind {
        BodyKind::Statsd => {
            let mut listed = Listed::default();
            ing.ingest_reporting(body, ing.parse_options(), now, &mut w, |f: FirstError| {
                listed.add(|| ItemError {
                    line: Some(f.line),
                    index: None,
                    reason: f.error.reason(),
                    message: format!("line {}: {}", f.line, f.error),
                });
            });
            let c = &w.counts;
            let lines = c.lines
                + c.dropped_by_mapping
                + c.refused.iter().sum::<u64>()
                + c.rejected.iter().sum::<u64>()
                + c.skipped.iter().sum::<u64>();
            (listed, "lines", lines)
        }
        BodyKind::Json => match ingest_json(ing, body, now, &mut w) {
            Ok((listed, samples)) => (listed, "samples", samples as u64),
            Err(e) => return api_error(StatusCode::BAD_REQUEST, e),
        },
    };
    let accepted = w.counts.lines + w.counts.dropped_by_mapping;
    let refused = w.counts.refused.iter().sum::<u64>();
    ing.flush(Transport::Http, &mut w);
    let Some(first) = listed.errors.first() else {
        return (
            StatusCode::OK,
            Json(serde_json::json!({ "accepted": accepted, "refused": refused })),
        )
            .into_response();
    };
    let rejected = listed.total;
    let more = if rejected > listed.errors.len() as u64 {
        format!(", the first {MAX_LISTED_ERRORS} listed in `errors`")
    } else {
        ", each listed in `errors`".to_string()
    };
    let error = format!(
        "{rejected} of {items} {what} rejected{more}; {accepted} applied, so resend only the rejected ones, fixed. First: {}",
        first.message
    );
    let mut answer = serde_json::json!({
        "error": error,
        "reason": first.reason,
        "accepted": accepted,
        "refused": refused,
        "rejected": rejected,
    });
    // Kept from before per-line errors were listed: the first bad line.
    if let Some(line) = first.line {
        answer["first_bad_line"] = line.into();
    }
    answer["errors"] = serde_json::to_value(&listed.errors).unwrap_or_default();
    (StatusCode::BAD_REQUEST, Json(answer)).into_response()
}

/// Converts a JSON body sample by sample and applies the good ones; lists
/// the bad ones in body order. `Err` only for a body that is not an array.
fn ingest_json(
    ing: &Ingestor,
    body: &[u8],
    now: crate::clock::Timestamp,
    w: &mut Worker,
) -> Result<(Listed, usize), String> {
    // Two kinds of fault, each found in body order: before a sample is a
    // line, and by the parser. The first MAX_LISTED_ERRORS overall are
    // among the first MAX_LISTED_ERRORS of each; merged by index below.
    let mut unwritable = Listed::default();
    let lines: JsonLines =
        json::samples_to_lines(body, |index, fault, message: fmt::Arguments<'_>| {
            match fault {
                SampleFault::Json(e) => w.counts.reject_json(e),
                SampleFault::Parse(e) => w.counts.reject(e),
            }
            unwritable.add(|| ItemError {
                line: None,
                index: Some(index),
                reason: fault.reason(),
                message: message.to_string(),
            });
        })?;
    let mut unparsed = Listed::default();
    // JSON samples carry their tags in a field of their own, rendered as
    // DogStatsD tags (and names free of name-tag delimiters): read them
    // whatever `[ingest] tag_styles` says about statsd text.
    ing.ingest_reporting(
        &lines.text,
        ParseOptions::default(),
        now,
        w,
        |f: FirstError| {
            unparsed.add(|| {
                let (index, name) = lines.origin(f.line).unwrap_or((usize::MAX, b""));
                ItemError {
                    line: None,
                    index: Some(index),
                    reason: f.error.reason(),
                    message: format!(
                        "sample at index {index} (`{}`): {}",
                        Escaped::with_cap(name, 64),
                        json::parse_fault_in_json_terms(f.error)
                    ),
                }
            });
        },
    );
    let mut listed = Listed {
        total: unwritable.total + unparsed.total,
        errors: unwritable.errors,
    };
    listed.errors.append(&mut unparsed.errors);
    listed.errors.sort_by_key(|e| e.index);
    listed.errors.truncate(MAX_LISTED_ERRORS);
    Ok((listed, lines.samples))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(ct: Option<&str>) -> Result<BodyKind, ()> {
        let v = ct.map(|c| HeaderValue::from_str(c).unwrap());
        BodyKind::of(v.as_ref())
    }

    #[test]
    fn media_types_are_compared_without_case_and_without_parameters() {
        assert_eq!(kind(Some("application/json")), Ok(BodyKind::Json));
        assert_eq!(kind(Some("Application/JSON")), Ok(BodyKind::Json));
        assert_eq!(
            kind(Some("application/json; charset=utf-8")),
            Ok(BodyKind::Json)
        );
        assert_eq!(
            kind(Some(" application/json ;charset=UTF-8")),
            Ok(BodyKind::Json)
        );
        assert_eq!(
            kind(Some("TEXT/Plain; charset=us-ascii")),
            Ok(BodyKind::Statsd)
        );
        assert_eq!(kind(None), Ok(BodyKind::Statsd));
        assert_eq!(
            kind(Some("application/x-www-form-urlencoded")),
            Ok(BodyKind::Statsd),
            "curl -d"
        );
    }

    #[test]
    fn a_media_type_is_matched_exactly_not_by_prefix() {
        for ct in [
            "application/jsonx",
            "application/json-seq",
            "application/vnd.api+json",
            "text/plainx",
            "text/html",
            "application/octet-stream",
            "application/",
            "/json",
            "json",
            "",
            "application/json/x",
            "application /json",
        ] {
            assert_eq!(kind(Some(ct)), Err(()), "{ct:?}");
        }
    }

    #[test]
    fn listed_errors_stop_at_the_cap_and_count_on() {
        let mut l = Listed::default();
        let mut made = 0;
        for i in 0..1000 {
            l.add(|| {
                made += 1;
                ItemError {
                    line: Some(i),
                    index: None,
                    reason: "x",
                    message: String::new(),
                }
            });
        }
        assert_eq!(
            (l.errors.len(), l.total, made),
            (MAX_LISTED_ERRORS, 1000, MAX_LISTED_ERRORS)
        );
    }
}
