//! The proto3 JSON form of `RateLimitRequest` and `RateLimitResponse`, as
//! envoyproxy/ratelimit's `POST /json` reads and writes them: field names
//! in lowerCamelCase or as in the .proto, integers as numbers or strings,
//! enums by name or number; answers in lowerCamelCase with default values
//! left out and durations as `"1.500s"`.

use serde_json::{json, Map, Value};

use super::proto::rate_limit_descriptor::{Entry, RateLimitOverride};
use super::proto::rate_limit_response::{Code, DescriptorStatus, RateLimit};
use super::proto::{RateLimitDescriptor, RateLimitRequest, RateLimitResponse};
use super::settings::RateUnit;

/// `v` read as a `RateLimitRequest`.
///
/// # Errors
///
/// What is wrong and where, e.g. `descriptors[0].entries[1].key: not a string`.
pub fn request(v: &Value) -> Result<RateLimitRequest, String> {
    let o = object(v, "the request")?;
    let descriptors = match field(o, "descriptors") {
        None => Vec::new(),
        Some(d) => array(d, "descriptors")?
            .iter()
            .enumerate()
            .map(|(i, d)| descriptor(d, &format!("descriptors[{i}]")))
            .collect::<Result<_, _>>()?,
    };
    Ok(RateLimitRequest {
        domain: string(field(o, "domain"), "domain")?,
        descriptors,
        hits_addend: uint(field(o, "hits_addend"), "hits_addend")?.map_or(Ok(0), |n| {
            u32::try_from(n).map_err(|_| format!("hits_addend: {n} is more than 4294967295"))
        })?,
    })
}

fn descriptor(v: &Value, at: &str) -> Result<RateLimitDescriptor, String> {
    let o = object(v, at)?;
    let entries = match field(o, "entries") {
        None => Vec::new(),
        Some(e) => array(e, &format!("{at}.entries"))?
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let at = format!("{at}.entries[{i}]");
                let e = object(e, &at)?;
                Ok(Entry {
                    key: string(field(e, "key"), &format!("{at}.key"))?,
                    value: string(field(e, "value"), &format!("{at}.value"))?,
                })
            })
            .collect::<Result<_, String>>()?,
    };
    let limit = match field(o, "limit") {
        None | Some(Value::Null) => None,
        Some(l) => {
            let at = format!("{at}.limit");
            let l = object(l, &at)?;
            let n = uint(
                field(l, "requests_per_unit"),
                &format!("{at}.requestsPerUnit"),
            )?
            .unwrap_or(0);
            Some(RateLimitOverride {
                requests_per_unit: u32::try_from(n)
                    .map_err(|_| format!("{at}.requestsPerUnit: {n} is too large"))?,
                unit: unit(field(l, "unit"), &format!("{at}.unit"))?,
            })
        }
    };
    Ok(RateLimitDescriptor {
        entries,
        limit,
        hits_addend: uint(field(o, "hits_addend"), &format!("{at}.hitsAddend"))?,
    })
}

/// `r` as proto3 JSON, its fields in the order of their numbers (as
/// protojson writes them), default values left out.
#[must_use]
pub fn response(r: &RateLimitResponse) -> String {
    let mut out = Fields::default();
    out.code("overallCode", r.overall_code);
    let statuses: Vec<String> = r.statuses.iter().map(status).collect();
    out.list("statuses", &statuses);
    let headers: Vec<String> = r
        .response_headers_to_add
        .iter()
        .map(|h| json!({"key": h.key, "value": h.value}).to_string())
        .collect();
    out.list("responseHeadersToAdd", &headers);
    out.close()
}

fn status(s: &DescriptorStatus) -> String {
    let mut out = Fields::default();
    out.code("code", s.code);
    if let Some(l) = &s.current_limit {
        out.raw("currentLimit", limit(l));
    }
    if s.limit_remaining != 0 {
        out.raw("limitRemaining", s.limit_remaining.to_string());
    }
    if let Some(d) = &s.duration_until_reset {
        out.raw("durationUntilReset", Value::from(duration(d)).to_string());
    }
    out.close()
}

fn limit(l: &RateLimit) -> String {
    let mut out = Fields::default();
    if !l.name.is_empty() {
        out.raw("name", Value::from(l.name.as_str()).to_string());
    }
    if l.requests_per_unit != 0 {
        out.raw("requestsPerUnit", l.requests_per_unit.to_string());
    }
    let unit = RateUnit::from_number(l.unit).map_or("UNKNOWN", RateUnit::as_str);
    out.raw("unit", Value::from(unit).to_string());
    out.close()
}

/// A JSON object written field by field, in the order given.
#[derive(Default)]
struct Fields(Vec<String>);

impl Fields {
    fn raw(&mut self, key: &str, json: String) {
        self.0.push(format!("\"{key}\":{json}"));
    }

    fn code(&mut self, key: &str, code: i32) {
        let name = Code::try_from(code).map_or("UNKNOWN", |c| c.as_str_name());
        if name != "UNKNOWN" {
            self.raw(key, Value::from(name).to_string());
        }
    }

    fn list(&mut self, key: &str, items: &[String]) {
        if !items.is_empty() {
            self.raw(key, format!("[{}]", items.join(",")));
        }
    }

    fn close(self) -> String {
        format!("{{{}}}", self.0.join(","))
    }
}

/// A duration as protojson writes it: seconds with 0, 3, 6 or 9 decimals.
fn duration(d: &prost_types::Duration) -> String {
    let nanos = d.nanos.unsigned_abs();
    let frac = if nanos == 0 {
        String::new()
    } else if nanos % 1_000_000 == 0 {
        format!(".{:03}", nanos / 1_000_000)
    } else if nanos % 1_000 == 0 {
        format!(".{:06}", nanos / 1_000)
    } else {
        format!(".{nanos:09}")
    };
    format!("{}{frac}s", d.seconds)
}

/// The field `name` (snake_case as in the .proto) or its lowerCamelCase.
fn field<'a>(o: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    o.get(name).or_else(|| o.get(&camel(name)))
}

fn camel(name: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in name.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.push(c.to_ascii_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{at}: not a JSON object"))
}

fn array<'a>(v: &'a Value, at: &str) -> Result<&'a Vec<Value>, String> {
    v.as_array()
        .ok_or_else(|| format!("{at}: not a JSON array"))
}

fn string(v: Option<&Value>, at: &str) -> Result<String, String> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("{at}: not a string")),
    }
}

/// An unsigned integer written as a number or a string of digits.
fn uint(v: Option<&Value>, at: &str) -> Result<Option<u64>, String> {
    let bad = || format!("{at}: not an unsigned integer");
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(bad),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

/// A unit by its name (`"MINUTE"`) or number.
fn unit(v: Option<&Value>, at: &str) -> Result<i32, String> {
    match v {
        None | Some(Value::Null) => Ok(0),
        Some(Value::String(s)) => RateUnit::parse(s)
            .map(RateUnit::number)
            .or_else(|| (s == "UNKNOWN").then_some(0))
            .ok_or_else(|| format!("{at}: `{s}` is not a unit rollstat takes (SECOND to MONTH)")),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| format!("{at}: not a unit")),
        Some(_) => Err(format!("{at}: not a unit")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_both_spellings_numbers_and_strings() {
        let v = json!({
            "domain": "edge",
            "hitsAddend": "2",
            "descriptors": [
                {"entries": [{"key": "api_key", "value": "a"}], "hits_addend": 3},
                {"entries": [{"key": "k"}], "limit": {"requestsPerUnit": 5, "unit": "HOUR"}}
            ]
        });
        let r = request(&v).unwrap();
        assert_eq!((r.domain.as_str(), r.hits_addend), ("edge", 2));
        assert_eq!(r.descriptors[0].hits_addend, Some(3));
        assert_eq!(r.descriptors[1].entries[0].value, "");
        let o = r.descriptors[1].limit.as_ref().unwrap();
        assert_eq!((o.requests_per_unit, o.unit), (5, 3));
        for (bad, says) in [
            (json!([]), "the request: not a JSON object"),
            (json!({"domain": 5}), "domain: not a string"),
            (
                json!({"descriptors": [{"entries": [{"key": 1}]}]}),
                "descriptors[0].entries[0].key: not a string",
            ),
            (
                json!({"hits_addend": -1}),
                "hits_addend: not an unsigned integer",
            ),
            (
                json!({"descriptors": [{"limit": {"unit": "YEAR"}}]}),
                "descriptors[0].limit.unit",
            ),
        ] {
            let e = request(&bad).unwrap_err();
            assert!(e.starts_with(says), "{e}");
        }
    }

    #[test]
    fn responses_are_written_as_protojson_writes_them() {
        let r = RateLimitResponse {
            overall_code: Code::OverLimit as i32,
            statuses: vec![
                DescriptorStatus {
                    code: Code::OverLimit as i32,
                    current_limit: Some(RateLimit {
                        name: "per_key".into(),
                        requests_per_unit: 3,
                        unit: 2,
                    }),
                    limit_remaining: 0,
                    duration_until_reset: Some(prost_types::Duration {
                        seconds: 59,
                        nanos: 500_000_000,
                    }),
                    quota: None,
                },
                DescriptorStatus {
                    code: Code::Ok as i32,
                    current_limit: None,
                    limit_remaining: 0,
                    duration_until_reset: Some(prost_types::Duration {
                        seconds: 0,
                        nanos: 0,
                    }),
                    quota: None,
                },
            ],
            ..RateLimitResponse::default()
        };
        let written: Value = serde_json::from_str(&response(&r)).unwrap();
        assert!(response(&r).starts_with("{\"overallCode\":\"OVER_LIMIT\",\"statuses\":[{\"code\""));
        assert_eq!(
            written,
            json!({
                "overallCode": "OVER_LIMIT",
                "statuses": [
                    {"code": "OVER_LIMIT", "currentLimit": {"name": "per_key", "requestsPerUnit": 3, "unit": "MINUTE"}, "durationUntilReset": "59.500s"},
                    {"code": "OK", "durationUntilReset": "0s"}
                ]
            })
        );
    }
}
