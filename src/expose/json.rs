//! JSON shapes of the API: series statistics out, samples in.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::paging::{Cursor, Page};
use crate::clock::Timestamp;
use crate::escape::Escaped;
use crate::fleet::FleetWindows;
use crate::parse::{JsonSampleError, MetricKind, ParseError};
use crate::series::Registry;

/// One series in `GET /api/v1/series`.
#[derive(Serialize, Debug)]
pub struct SeriesJson {
    /// statsd name after mapping.
    pub metric: String,
    /// statsd type (`counter`, `gauge`, ...).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Labels (sanitised tags and mapping labels).
    pub labels: BTreeMap<String, String>,
    /// Statistics per window name.
    pub windows: BTreeMap<String, WindowJson>,
}

/// One window's statistics.
#[derive(Serialize, Debug)]
pub struct WindowJson {
    /// Weighted samples (go-zero Count).
    pub samples: f64,
    /// Weighted sum (go-zero Sum).
    pub sum: f64,
    /// Per second over the covered time.
    pub rate: f64,
    /// Average, if any samples.
    pub avg: Option<f64>,
    /// Minimum, if any samples.
    pub min: Option<f64>,
    /// Maximum, if any samples.
    pub max: Option<f64>,
    /// Quantiles by q, for timers, histograms, distributions.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub quantiles: BTreeMap<String, Option<f64>>,
    /// Distinct members, for sets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique: Option<u64>,
    /// The same window over every instance sharing the series through
    /// Redis (mapping `shared = true`), while the fleet view is fresh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetJson>,
}

/// One window over the fleet: what `rollstat_fleet_window_*` publish.
#[derive(Serialize, Debug, PartialEq)]
pub struct FleetJson {
    /// Weighted samples over every instance.
    pub samples: f64,
    /// Weighted sum over every instance.
    pub sum: f64,
    /// Per second over the time this instance's window covers.
    pub rate: f64,
    /// Average, if any samples.
    pub avg: Option<f64>,
    /// Smallest value over every instance, for the types that have one
    /// (left out while an instance sharing the window sends none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Largest value over every instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Quantiles by q over every instance, for timers, histograms and
    /// distributions.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub quantiles: BTreeMap<String, Option<f64>>,
    /// Distinct members over every instance, for sets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique: Option<u64>,
    /// Whether `unique` is exact (else a HyperLogLog's estimate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique_exact: Option<bool>,
}

/// The fleet view of one window as the JSON API shows it.
fn fleet_json(
    t: &crate::fleet::FleetTotals,
    kind: MetricKind,
    covered: std::time::Duration,
) -> FleetJson {
    let finite = |x: f64| Some(x).filter(|f| f.is_finite());
    let spread = t.spread.as_ref();
    FleetJson {
        samples: t.count,
        sum: t.sum,
        rate: t.rate(kind, covered),
        avg: t.avg().filter(|_| kind != MetricKind::Set),
        min: spread.and_then(|s| finite(s.min)),
        max: spread.and_then(|s| finite(s.max)),
        quantiles: spread
            .map(|s| {
                s.quantiles
                    .iter()
                    .map(|(q, x)| (q.to_string(), x.filter(|f| f.is_finite())))
                    .collect()
            })
            .unwrap_or_default(),
        unique: t.unique.map(|u| u.count),
        unique_exact: t.unique.map(|u| u.exact),
    }
}

/// `GET /api/v1/series`: one page of series with their statistics.
#[derive(Serialize, Debug)]
pub struct SeriesPageJson {
    /// The page's series, ordered by `(metric, labels)`.
    pub series: Vec<SeriesJson>,
    /// Pass as `?cursor=` to get the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// The statistics of the series `page` selected, each read under its
/// shard's lock for that series only; shared series with their fleet view
/// from `fleet`. A series that went away since it was selected is left out.
#[must_use]
pub fn series_page(
    registry: &Registry,
    now: Timestamp,
    page: &Page,
    fleet: Option<&FleetWindows>,
) -> SeriesPageJson {
    let plan = registry.plan();
    // Read before any shard is locked (see FleetWindows::view).
    let fleet = fleet.and_then(|f| f.view(now));
    let mut out = Vec::with_capacity(page.series.len());
    for r in &page.series {
        // Under the lock: one series' reduces. Formatting comes after.
        let Some((meta, views)) = registry.with_series(r, |meta, state| {
            let views = (0..meta.windows.len())
                .map(|i| {
                    (
                        state.window_view(i, now, &plan.quantiles),
                        state.window_shape(i, now).1,
                    )
                })
                .collect::<Vec<_>>();
            (meta.clone(), views)
        }) else {
            continue;
        };
        let meta = &meta;
        let fleet_id = fleet
            .as_ref()
            .filter(|_| meta.shared)
            .and_then(|f| Some((f, meta.fleet_id()?)));
        let finite = |x: Option<f64>| x.filter(|f| f.is_finite());
        let windows = meta
            .windows
            .iter()
            .zip(views)
            .map(|(name, (v, covered))| {
                (
                    name.clone(),
                    WindowJson {
                        samples: v.samples,
                        sum: v.sum,
                        rate: v.rate,
                        avg: finite(v.avg),
                        min: finite(v.min),
                        max: finite(v.max),
                        quantiles: v
                            .quantiles
                            .iter()
                            .map(|(q, x)| (q.to_string(), finite(*x)))
                            .collect(),
                        unique: v.unique,
                        fleet: fleet_id.as_ref().and_then(|(f, id)| {
                            let t = f.totals(*id, name)?;
                            Some(fleet_json(t, meta.kind, covered))
                        }),
                    },
                )
            })
            .collect();
        out.push(SeriesJson {
            metric: meta.metric.clone(),
            kind: meta.kind.as_str(),
            labels: meta.labels.iter().cloned().collect(),
            windows,
        });
    }
    SeriesPageJson {
        series: out,
        next_cursor: page.next.as_ref().map(Cursor::encode),
    }
}

/// `GET /api/v1/metrics`: the statsd names held, without their statistics.
#[derive(Serialize, Debug, Default)]
pub struct MetricsJson {
    /// One entry per metric name, sorted by name.
    pub metrics: Vec<MetricJson>,
    /// Every window name a series is kept in, sorted.
    pub windows: Vec<String>,
}

/// One metric name of [`MetricsJson`].
#[derive(Serialize, Debug, PartialEq, Eq)]
pub struct MetricJson {
    /// statsd name after mapping.
    pub metric: String,
    /// statsd type.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Series (tag sets) of that name.
    pub series: usize,
}

/// The metric names held, with their type and series count, and the
/// window names in use: what a metric picker needs, at a fraction of the
/// size of [`series_page`] (one entry per name, no statistics).
#[must_use]
pub fn metrics(registry: &Registry) -> MetricsJson {
    let mut by_name: BTreeMap<String, MetricJson> = BTreeMap::new();
    let mut windows: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    // Snapshots of each shard's metadata: no lock held while aggregating.
    let metas = (0..registry.shard_count()).flat_map(|i| registry.shard_series(i, |_| true));
    for r in metas {
        let meta = &r.meta;
        match by_name.get_mut(meta.metric.as_str()) {
            Some(m) => m.series += 1,
            None => {
                by_name.insert(
                    meta.metric.clone(),
                    MetricJson {
                        metric: meta.metric.clone(),
                        kind: meta.kind.as_str(),
                        series: 1,
                    },
                );
            }
        }
        for w in meta.windows.iter() {
            if !windows.contains(w.as_str()) {
                windows.insert(w.clone());
            }
        }
    }
    MetricsJson {
        metrics: by_name.into_values().collect(),
        windows: windows.into_iter().collect(),
    }
}

/// One sample of `POST /api/v1/ingest` with `Content-Type: application/json`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, expecting = "a sample object")]
pub struct SampleJson<'a> {
    /// statsd name.
    pub name: String,
    /// `counter`/`c`, `gauge`/`g`, `timer`/`ms`, `histogram`/`h`,
    /// `distribution`/`d`, `set`/`s`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A number, or a string (set members, signed gauge deltas such as
    /// "+3"). Kept as its JSON text: a number goes to the statsd parser as
    /// written, so `1e400` is the parser's `non_finite_value`, not a JSON
    /// error for the whole body.
    #[serde(borrow)]
    pub value: &'a RawValue,
    /// Optional sample rate in (0, 1], a number (kept as its JSON text, like
    /// `value`; the parser checks the range).
    #[serde(default, borrow)]
    pub sample_rate: Option<&'a RawValue>,
    /// Optional tags.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// Why one sample of a JSON ingest body was rejected: before it became a
/// statsd line, or by the parser once it was one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleFault {
    /// It could not be written as a statsd line.
    Json(JsonSampleError),
    /// The statsd parser rejected the line it became (`unknown_type` is
    /// also found while converting).
    Parse(ParseError),
}

impl SampleFault {
    /// The `reason` label it is counted under.
    #[must_use]
    pub const fn reason(self) -> &'static str {
        match self {
            SampleFault::Json(e) => e.reason(),
            SampleFault::Parse(e) => e.reason(),
        }
    }
}

/// A JSON ingest body as statsd lines: one line per sample that could be
/// written as one, in body order, and where each line came from.
#[derive(Debug, Default)]
pub struct JsonLines {
    /// The lines, each ending in `\n`; never an empty line, so line `n` of
    /// the parser's count is `origins[n - 1]`.
    pub text: Vec<u8>,
    /// Per line: the sample's index in the body's array and where its line
    /// starts in `text`.
    origins: Vec<(usize, usize)>,
    /// Samples in the body, good and bad.
    pub samples: usize,
}

impl JsonLines {
    /// The sample that became line `line` (1-based, as
    /// [`FirstError::line`](crate::ingest::FirstError)): its index in the body
    /// and its name.
    #[must_use]
    pub fn origin(&self, line: usize) -> Option<(usize, &[u8])> {
        let &(index, start) = self.origins.get(line.checked_sub(1)?)?;
        let rest = &self.text[start..];
        let name = rest.split(|&b| b == b':').next().unwrap_or(rest);
        Some((index, name))
    }
}

/// What a parser rejection of a JSON sample's line means in the sample's
/// own terms (its fields), for the per-sample error of the ingest answer.
#[must_use]
pub fn parse_fault_in_json_terms(e: ParseError) -> String {
    use crate::parse::{MAX_NAME_LEN, MAX_TAGS, MAX_TAG_KEY_LEN, MAX_TAG_VALUE_LEN, MAX_VALUES};
    match e {
        ParseError::MalformedValue => {
            "`value` is not a decimal number (only a set's value may be any text)".into()
        }
        ParseError::NonFiniteValue => {
            "`value` is NaN, infinite or too large for a 64-bit float".into()
        }
        ParseError::MissingValue => {
            "`value` is empty, or one of its `:`-separated values is".into()
        }
        ParseError::TooManyValues => {
            format!("`value` packs more than {MAX_VALUES} `:`-separated values")
        }
        ParseError::MultiValueGauge => {
            "a gauge's `value` may not pack several `:`-separated values; send one sample per value".into()
        }
        ParseError::InvalidSampleRate => {
            "`sample_rate` must be a number in [0.000001, 1]".into()
        }
        ParseError::EmptyName => "`name` is empty".into(),
        ParseError::NameTooLong => format!("`name` is longer than {MAX_NAME_LEN} bytes"),
        ParseError::InvalidName => "`name` contains a control character".into(),
        ParseError::MalformedTag => {
            "a tag has an empty key or a control character".into()
        }
        ParseError::TagTooLong => format!(
            "a tag key is longer than {MAX_TAG_KEY_LEN} bytes or a tag value longer than {MAX_TAG_VALUE_LEN}"
        ),
        ParseError::TooManyTags => format!("more than {MAX_TAGS} tags"),
        other => format!("the statsd line it makes was rejected: {other}"),
    }
}

/// How a name, type or value of a bad sample is quoted in its message:
/// escaped and short, so that a hostile body cannot make the answer large.
fn quoted(b: &[u8]) -> Escaped<'_> {
    Escaped::with_cap(b, 64)
}

/// A serde error without serde's position (which counts within the item,
/// not the body, and would mislead).
struct WithoutPosition<'a>(&'a serde_json::Error);

impl std::fmt::Display for WithoutPosition<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.0.to_string();
        let suffix = format!(" at line {} column {}", self.0.line(), self.0.column());
        f.write_str(text.strip_suffix(suffix.as_str()).unwrap_or(&text))
    }
}

/// Turns a JSON ingest body (an array of samples) into statsd lines, so that
/// JSON input goes through the one parser, sample by sample: a sample that
/// cannot be written as a line is reported to `rejected` with its index in
/// the array, its fault and a message (formatted only if the caller keeps
/// it), and the others are converted regardless. Only a body that is not a
/// JSON array at all is an error, naming what was expected. Work is linear
/// in the body: the array is split into its items' text once, and each item
/// is read once from its own text.
pub fn samples_to_lines(
    body: &[u8],
    mut rejected: impl FnMut(usize, SampleFault, std::fmt::Arguments<'_>),
) -> Result<JsonLines, String> {
    const EXPECTED: &str = r#"expected an array of samples such as [{"name": "a.b", "type": "counter", "value": 1, "tags": {"k": "v"}}]"#;
    let body = std::str::from_utf8(body).map_err(|e| {
        format!(
            "the body is not UTF-8 (byte {}), so not JSON; {EXPECTED}",
            e.valid_up_to()
        )
    })?;
    let items: Vec<&RawValue> = serde_json::from_str(body)
        .map_err(|e| format!("the body is not a JSON array ({e}); {EXPECTED}"))?;
    let mut out = JsonLines {
        text: Vec::with_capacity(body.len()),
        origins: Vec::with_capacity(items.len()),
        samples: items.len(),
    };
    let mut line = String::new();
    for (i, raw) in items.into_iter().enumerate() {
        line.clear();
        if sample_line(i, raw, &mut line, &mut rejected) {
            out.origins.push((i, out.text.len()));
            out.text.extend_from_slice(line.as_bytes());
        }
    }
    Ok(out)
}

/// Writes item `i` as a statsd line (with its `\n`) into `out`, or reports
/// why it cannot be one and returns false.
fn sample_line(
    i: usize,
    raw: &RawValue,
    out: &mut String,
    rejected: &mut impl FnMut(usize, SampleFault, std::fmt::Arguments<'_>),
) -> bool {
    let Some(s) = decode_sample(i, raw, rejected) else {
        return false;
    };
    let name = quoted(s.name.as_bytes());
    let Some(kind) = sample_kind(i, &s, name, rejected) else {
        return false;
    };
    if s.name.contains([':', '|', '\n', '#', ',', '[']) {
        return reserved(
            rejected,
            i,
            name,
            "`name` may not contain ':', '|', '#', ',', '[' or a newline (statsd reserves them)",
        );
    }
    let Some(value) = sample_value(i, &s, name, rejected) else {
        return false;
    };
    if value.contains(['|', '\n']) {
        return reserved(
            rejected,
            i,
            name,
            "`value` may not contain '|' or a newline (statsd reserves them)",
        );
    }
    let Some(rate) = sample_rate(i, &s, name, rejected) else {
        return false;
    };
    for (k, v) in &s.tags {
        if k.contains([',', '|', ':', '\n']) || v.contains([',', '|', '\n']) {
            return reserved(rejected, i, name, "tag keys may not contain ',', '|', ':' or a newline, tag values not ',', '|' or a newline (statsd reserves them)");
        }
    }
    write_line(out, &s, &value, kind, rate);
    true
}

/// Item `i` read as a sample object.
fn decode_sample<'r>(
    i: usize,
    raw: &'r RawValue,
    rejected: &mut impl FnMut(usize, SampleFault, std::fmt::Arguments<'_>),
) -> Option<SampleJson<'r>> {
    use JsonSampleError::BadJsonSample;
    // serde would also read a struct from an array, with a baffling message.
    let found = raw_kind(raw);
    if found != RawKind::Object {
        rejected(
            i,
            SampleFault::Json(BadJsonSample),
            format_args!(
                "sample at index {i}: {} is not a sample; {BadJsonSample}",
                found.article()
            ),
        );
        return None;
    }
    match serde_json::from_str(raw.get()) {
        Ok(s) => Some(s),
        Err(e) => {
            rejected(
                i,
                SampleFault::Json(BadJsonSample),
                format_args!(
                    "sample at index {i}: {}; {BadJsonSample}",
                    WithoutPosition(&e)
                ),
            );
            None
        }
    }
}

/// The sample's `type`, by name or statsd letter.
fn sample_kind(
    i: usize,
    s: &SampleJson<'_>,
    name: Escaped<'_>,
    rejected: &mut impl FnMut(usize, SampleFault, std::fmt::Arguments<'_>),
) -> Option<MetricKind> {
    let kind = MetricKind::ALL
        .into_iter()
        .find(|k| k.as_str() == s.kind || k.statsd_type() == s.kind);
    if kind.is_none() {
        rejected(
            i,
            SampleFault::Parse(ParseError::UnknownType),
            format_args!(
                "sample at index {i} (`{name}`): unknown type `{}`; expected counter (or c), gauge (g), timer (ms), histogram (h), distribution (d) or set (s)",
                quoted(s.kind.as_bytes()),
            ),
        );
    }
    kind
}

/// The sample's `value`: a number as written (the parser reads it, and
/// rejects `1e400` as non-finite); a string unescaped.
fn sample_value<'s>(
    i: usize,
    s: &SampleJson<'s>,
    name: Escaped<'_>,
    rejected: &mut impl FnMut(usize, SampleFault, std::fmt::Arguments<'_>),
) -> Option<std::borrow::Cow<'s, str>> {
    use JsonSampleError::BadJsonSample;
    match raw_kind(s.value) {
        RawKind::Number => Some(s.value.get().into()),
        RawKind::String => match serde_json::from_str::<String>(s.value.get()) {
            Ok(v) => Some(v.into()),
            // Split from the body as JSON text, yet not decodable: a lone
            // surrogate escape such as "\ud800".
            Err(e) => {
                rejected(
                    i,
                    SampleFault::Json(BadJsonSample),
                    format_args!(
                        "sample at index {i} (`{name}`): `value`: {}",
                        WithoutPosition(&e)
                    ),
                );
                None
            }
        },
        other => {
            rejected(
                i,
                SampleFault::Json(BadJsonSample),
                format_args!(
                    "sample at index {i} (`{name}`): `value` must be a number or a string, not {}",
                    other.article()
                ),
            );
            None
        }
    }
}

/// The sample's `sample_rate`, as written: `Some(None)` when it has none.
fn sample_rate<'s>(
    i: usize,
    s: &SampleJson<'s>,
    name: Escaped<'_>,
    rejected: &mut impl FnMut(usize, SampleFault, std::fmt::Arguments<'_>),
) -> Option<Option<&'s str>> {
    match s.sample_rate.map(|r| (r, raw_kind(r))) {
        None => Some(None),
        Some((r, RawKind::Number)) => Some(Some(r.get())),
        Some((_, other)) => {
            rejected(
                i,
                SampleFault::Json(JsonSampleError::BadJsonSample),
                format_args!(
                    "sample at index {i} (`{name}`): `sample_rate` must be a number, not {}",
                    other.article()
                ),
            );
            None
        }
    }
}

/// The statsd line of a checked sample, with its `\n`.
fn write_line(
    out: &mut String,
    s: &SampleJson<'_>,
    value: &str,
    kind: MetricKind,
    rate: Option<&str>,
) {
    let _ = write!(out, "{}:{}|{}", s.name, value, kind.statsd_type());
    if let Some(r) = rate {
        let _ = write!(out, "|@{r}");
    }
    if !s.tags.is_empty() {
        out.push_str("|#");
        for (j, (k, v)) in s.tags.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            if v.is_empty() {
                out.push_str(k);
            } else {
                let _ = write!(out, "{k}:{v}");
            }
        }
    }
    out.push('\n');
}

/// Reports that item `i` holds a character statsd reserves, in the field
/// `what` names; returns false (the item is not a line).
fn reserved(
    rejected: &mut impl FnMut(usize, SampleFault, std::fmt::Arguments<'_>),
    i: usize,
    name: Escaped<'_>,
    what: &str,
) -> bool {
    rejected(
        i,
        SampleFault::Json(JsonSampleError::ReservedCharacter),
        format_args!("sample at index {i} (`{name}`): {what}"),
    );
    false
}

/// The JSON type of a value, from the first byte of its text (serde has
/// checked the text is one JSON value, without surrounding blanks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RawKind {
    Number,
    String,
    Bool,
    Null,
    Array,
    Object,
}

impl RawKind {
    fn article(self) -> &'static str {
        match self {
            RawKind::Number => "a number",
            RawKind::String => "a string",
            RawKind::Bool => "a boolean",
            RawKind::Null => "null",
            RawKind::Array => "an array",
            RawKind::Object => "an object",
        }
    }
}

fn raw_kind(raw: &RawValue) -> RawKind {
    match raw.get().as_bytes().first() {
        Some(b'"') => RawKind::String,
        Some(b't' | b'f') => RawKind::Bool,
        Some(b'n') => RawKind::Null,
        Some(b'[') => RawKind::Array,
        Some(b'{') => RawKind::Object,
        _ => RawKind::Number,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each rejected item as (index, reason, message).
    type Rejected = Vec<(usize, &'static str, String)>;

    /// The lines, and the rejected items.
    fn convert(body: &[u8]) -> Result<(String, Rejected), String> {
        let mut bad = Vec::new();
        let lines = samples_to_lines(body, |i, f, m| bad.push((i, f.reason(), m.to_string())))?;
        Ok((String::from_utf8(lines.text).unwrap(), bad))
    }

    #[test]
    fn json_samples_become_statsd_lines() {
        let body = br#"[{"name":"a.b","type":"counter","value":2,"sample_rate":0.5,"tags":{"x":"1","bare":""}},
                       {"name":"u","type":"s","value":"alice"},{"name":"g","type":"gauge","value":"+3"}]"#;
        let (text, bad) = convert(body).unwrap();
        assert_eq!(text, "a.b:2|c|@0.5|#bare,x:1\nu:alice|s\ng:+3|g\n");
        assert!(bad.is_empty(), "{bad:?}");
    }

    #[test]
    fn numbers_reach_the_parser_as_written() {
        let (text, bad) = convert(
            br#"[{"name":"h","type":"g","value":1e400,"sample_rate":1E-7},
                                       {"name":"s","type":"d","value":-0.5e-3}]"#,
        )
        .unwrap();
        assert_eq!(text, "h:1e400|g|@1E-7\ns:-0.5e-3|d\n");
        assert!(bad.is_empty(), "{bad:?}");
    }

    #[test]
    fn each_bad_sample_is_reported_with_its_index_and_the_good_ones_are_kept() {
        let (text, bad) = convert(
            br#"[{"name":"ok","type":"c","value":1},{"name":"x","type":"nope","value":1},
                 {"name":"t","type":"c","value":true},[1],{"name":"a|b","type":"c","value":1},
                 {"name":"r","type":"c","value":1,"sample_rate":"0.5"},{"name":"k","type":"c","value":1,"tags":{"a,b":"v"}},
                 {"name":"m","type":"c"},{"name":"e","type":"c","value":1,"extra":1},{"name":"ok2","type":"c","value":2}]"#,
        )
        .unwrap();
        assert_eq!(text, "ok:1|c\nok2:2|c\n");
        let got: Vec<(usize, &str)> = bad.iter().map(|(i, r, _)| (*i, *r)).collect();
        assert_eq!(
            got,
            [
                (1, "unknown_type"),
                (2, "bad_json_sample"),
                (3, "bad_json_sample"),
                (4, "reserved_character"),
                (5, "bad_json_sample"),
                (6, "reserved_character"),
                (7, "bad_json_sample"),
                (8, "bad_json_sample"),
            ]
        );
        let msg = |i: usize| bad.iter().find(|b| b.0 == i).unwrap().2.as_str();
        assert!(
            msg(1).starts_with("sample at index 1 (`x`): unknown type `nope`"),
            "{}",
            msg(1)
        );
        assert!(
            msg(2).contains("`value` must be a number or a string, not a boolean"),
            "{}",
            msg(2)
        );
        assert!(msg(3).contains("an array is not a sample"), "{}", msg(3));
        assert!(
            !msg(3).contains("column"),
            "serde's position is within the item: {}",
            msg(3)
        );
        assert!(msg(4).contains("may not contain"), "{}", msg(4));
        assert!(
            msg(5).contains("`sample_rate` must be a number, not a string"),
            "{}",
            msg(5)
        );
        assert!(msg(7).contains("missing field `value`"), "{}", msg(7));
        assert!(msg(8).contains("unknown field `extra`"), "{}", msg(8));
    }

    #[test]
    fn a_body_that_is_not_an_array_is_an_error_naming_what_was_expected() {
        for body in [&br#"{"name":"x"}"#[..], b"[1,", b"", b"a:1|c", b"[\xff]"] {
            let e = convert(body).unwrap_err();
            assert!(e.contains("expected an array of samples"), "{e}");
        }
    }

    #[test]
    fn names_and_values_in_messages_are_escaped_and_short() {
        let long = "n".repeat(10_000);
        let body = format!(r#"[{{"name":"\u001b[2J{long}","type":"\r\nnope","value":1}}]"#);
        let (_, bad) = convert(body.as_bytes()).unwrap();
        let m = &bad[0].2;
        assert!(
            m.contains(r"`\x1b[2Jnnn") && m.contains(r"`\r\nnope`"),
            "{m}"
        );
        assert!(!m.chars().any(char::is_control), "{m}");
        assert!(m.len() < 500, "{} bytes", m.len());
    }

    #[test]
    fn a_rejected_line_leads_back_to_its_sample() {
        let lines = samples_to_lines(
            br#"[{"name":"a","type":"c","value":1},7,{"name":"b","type":"c","value":1}]"#,
            |_, _, _| {},
        )
        .unwrap();
        assert_eq!(lines.samples, 3);
        assert_eq!(lines.origin(1), Some((0, &b"a"[..])));
        assert_eq!(lines.origin(2), Some((2, &b"b"[..])));
        assert_eq!(lines.origin(3), None);
        assert_eq!(lines.origin(0), None);
    }
}
