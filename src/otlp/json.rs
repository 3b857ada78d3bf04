//! OTLP/JSON metrics: the body of `POST /v1/metrics` sent with
//! `Content-Type: application/json`, decoded into the prost
//! [`ExportMetricsServiceRequest`].
//!
//! The body is read in one pass by `serde_json::from_slice` into private
//! serde structs that mirror the message tree (no `serde_json::Value` for
//! the body), which are then moved into the prost types without copying
//! strings. Every check happens while reading, so each error carries the
//! line and column where it was found; the conversion cannot fail.
//!
//! The encoding is the proto3 JSON mapping with the OTLP/JSON deviations
//! of the OTLP specification:
//!
//! * Keys are lowerCamelCase (`timeUnixNano`); the original `snake_case`
//!   field names (`time_unix_nano`) are accepted as well, as proto3 JSON
//!   parsers do. Unknown keys are skipped, absent keys and `null` values
//!   take the field's default (0, `""`, empty, unset).
//! * 64-bit integers (`timeUnixNano`, `startTimeUnixNano`, `asInt`,
//!   `count`, `zeroCount`, `bucketCounts` entries, `intValue`) are JSON
//!   numbers or decimal strings; so are the 32-bit ones (`flags`, `scale`,
//!   `offset`, `droppedAttributesCount`). An integral number written with
//!   a fraction or exponent (`1e3`, `"5.0"`) is accepted; a value out of
//!   the field's range is an error.
//! * Doubles are JSON numbers or strings: `"NaN"`, `"Infinity"`,
//!   `"-Infinity"`, or a number in a string.
//! * Enums (`aggregationTemporality`) are integers per OTLP/JSON; the
//!   proto enum names (`"AGGREGATION_TEMPORALITY_CUMULATIVE"`) are accepted
//!   too. Unknown integers are kept (proto3 enums are open), unknown names
//!   are an error.
//! * `traceId` and `spanId` are hex strings (not base64), either case;
//!   `bytesValue` is base64 as in proto3 JSON, standard or URL-safe, with
//!   or without padding.
//! * A oneof with more than one member set (a metric with both `gauge`
//!   and `sum`, a data point with both `asDouble` and `asInt`, an
//!   `AnyValue` with two values) is not an error: the first member in the
//!   `.proto` declaration order is kept and the others are dropped.
//!
//! Nesting is bounded by `serde_json`'s recursion limit (128 levels of
//! arrays and objects), which stays on: a deeper `arrayValue` or
//! `kvlistValue` comes back as a [`JsonError`], never as a stack overflow.
//! Values under unknown keys are skipped by `serde_json` without recursion
//! (one byte of heap per level), so they need no limit. The envelope down
//! to an exemplar's attribute value (the deepest place) takes 15 of the
//! 128 levels, each `arrayValue` 3 more and each `kvlistValue` 4, so values
//! nested 37 arrays or 28 lists deep still decode there. At the limit the
//! decoder needs under 96 KiB of stack optimised, under 512 KiB not.
//!
//! Relaxed beyond the specification: the leniencies above (`snake_case`
//! keys, enum names, integral floats for integers, numbers in strings for
//! doubles), and that serde's derive also reads a message written as a
//! JSON array, field by field in declaration order, which no exporter
//! sends. Trace and span ids are not checked to be 16 and 8 bytes.

use std::fmt;
use std::marker::PhantomData;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine as _};
use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Deserialize;

use super::proto::opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest;
use super::proto::opentelemetry::proto::common::v1 as common;
use super::proto::opentelemetry::proto::metrics::v1 as metrics;
use super::proto::opentelemetry::proto::resource::v1 as resource;

/// Decodes an OTLP/JSON `ExportMetricsServiceRequest`.
///
/// # Errors
///
/// [`JsonError`] when the body is not JSON, is not shaped like the
/// message, holds a value its field cannot take, or nests deeper than
/// `serde_json`'s recursion limit.
pub fn decode(body: &[u8]) -> Result<ExportMetricsServiceRequest, JsonError> {
    serde_json::from_slice::<ExportRequest>(body)
        .map(ExportMetricsServiceRequest::from)
        .map_err(JsonError)
}

/// Why an OTLP/JSON body could not be decoded: `serde_json`'s error, shown
/// as `line L column C: what; an OTLP/JSON ExportMetricsServiceRequest is
/// expected`.
#[derive(Debug)]
pub struct JsonError(serde_json::Error);

impl JsonError {
    /// The 1-based line of the problem (0 when `serde_json` gave none).
    #[must_use]
    pub fn line(&self) -> usize {
        self.0.line()
    }

    /// The 1-based column of the problem (0 when `serde_json` gave none).
    #[must_use]
    pub fn column(&self) -> usize {
        self.0.column()
    }
}

/// What every message ends with: the shape the body should have had.
const EXPECTED: &str = "an OTLP/JSON ExportMetricsServiceRequest is expected";

impl fmt::Display for JsonError {
    /// Moves `serde_json`'s trailing ` at line L column C` to the front.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = self.0.to_string();
        let (line, column) = (self.line(), self.column());
        let position = format!(" at line {line} column {column}");
        match full.strip_suffix(&position) {
            Some(what) if line != 0 => write!(f, "line {line} column {column}: {what}; {EXPECTED}"),
            _ => write!(f, "{full}; {EXPECTED}"),
        }
    }
}

impl std::error::Error for JsonError {}

// ---------------------------------------------------------------------------
// Scalars: the proto3 JSON forms of integers, doubles, enums and bytes.
// ---------------------------------------------------------------------------

/// A protobuf integer of any width (int32, sint32, uint32, fixed64,
/// sfixed64, ...): a JSON number or a string holding one, checked against
/// the range of `T`.
struct Int<T>(T);

impl<'de, T: TryFrom<i128>> Deserialize<'de> for Int<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(IntVisitor(PhantomData))
            .map(Int)
    }
}

/// Reads an [`Int`]: every JSON integer goes through `i128`, which holds
/// both `i64` and `u64`, then into `T` if it fits.
struct IntVisitor<T>(PhantomData<T>);

/// 2^64: floats at or beyond it (in magnitude) fit no protobuf integer.
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

impl<T: TryFrom<i128>> IntVisitor<T> {
    /// `value` as a `T`, or an "invalid value" error naming `unexpected`.
    fn fit<E: de::Error>(&self, value: i128, unexpected: Unexpected<'_>) -> Result<T, E> {
        T::try_from(value).map_err(|_| E::invalid_value(unexpected, self))
    }

    /// An integral float below 2^64 in magnitude, as an integer.
    #[allow(clippy::cast_possible_truncation)] // integral and in range: exact
    fn integral(value: f64) -> Option<i128> {
        (value.fract() == 0.0 && value.abs() < TWO_POW_64).then_some(value as i128)
    }
}

impl<T: TryFrom<i128>> Visitor<'_> for IntVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = std::any::type_name::<T>();
        write!(f, "a {kind} integer (a JSON number or a decimal string)")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.fit(i128::from(v), Unexpected::Unsigned(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        self.fit(i128::from(v), Unexpected::Signed(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        let unexpected = Unexpected::Float(v);
        match Self::integral(v) {
            Some(value) => self.fit(value, unexpected),
            None => Err(E::invalid_value(unexpected, &self)),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        let value = v
            .parse::<i128>()
            .ok()
            .or_else(|| v.parse::<f64>().ok().and_then(Self::integral));
        match value {
            Some(value) => self.fit(value, Unexpected::Str(v)),
            None => Err(E::invalid_value(Unexpected::Str(v), &self)),
        }
    }
}

/// A protobuf double: a JSON number, or a string holding one (`"NaN"`,
/// `"Infinity"`, `"-Infinity"`, `"1.5"`).
struct Double(f64);

impl<'de> Deserialize<'de> for Double {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DoubleVisitor).map(Double)
    }
}

/// Reads a [`Double`].
struct DoubleVisitor;

impl Visitor<'_> for DoubleVisitor {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a double (a JSON number, \"NaN\", \"Infinity\" or \"-Infinity\")")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }

    #[allow(clippy::cast_precision_loss)] // as proto3 JSON reads it: nearest double
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    #[allow(clippy::cast_precision_loss)] // as proto3 JSON reads it: nearest double
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        v.parse()
            .map_err(|_| E::invalid_value(Unexpected::Str(v), &self))
    }
}

/// `aggregationTemporality`: an integer (OTLP/JSON), or the enum value's
/// name (proto3 JSON).
struct Temporality(i32);

impl<'de> Deserialize<'de> for Temporality {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(TemporalityVisitor)
            .map(Temporality)
    }
}

/// Reads a [`Temporality`].
struct TemporalityVisitor;

impl Visitor<'_> for TemporalityVisitor {
    type Value = i32;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an AggregationTemporality (an integer, or a name such as \"AGGREGATION_TEMPORALITY_CUMULATIVE\")")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i32, E> {
        i32::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i32, E> {
        i32::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<i32, E> {
        metrics::AggregationTemporality::from_str_name(v)
            .map(|t| t as i32)
            .or_else(|| v.parse().ok())
            .ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
    }
}

/// `traceId` or `spanId`: bytes written as a hex string (OTLP/JSON).
struct HexBytes(Vec<u8>);

impl<'de> Deserialize<'de> for HexBytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(HexVisitor).map(HexBytes)
    }
}

/// Reads a [`HexBytes`].
struct HexVisitor;

impl Visitor<'_> for HexVisitor {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a hex string (an OTLP/JSON trace or span id)")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<u8>, E> {
        hex(v).ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
    }
}

/// The bytes a hex string spells, `None` if it is not one.
fn hex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if digits.len() % 2 != 0 {
        return None;
    }
    digits
        .chunks_exact(2)
        .map(|pair| match *pair {
            [high, low] => Some(nibble(high)? << 4 | nibble(low)?),
            _ => None,
        })
        .collect()
}

/// The value of one hex digit.
fn nibble(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// `bytesValue`: bytes written as base64 (proto3 JSON).
struct Base64Bytes(Vec<u8>);

impl<'de> Deserialize<'de> for Base64Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(Base64Visitor).map(Base64Bytes)
    }
}

/// How proto3 JSON reads base64: padding optional, loose trailing bits.
const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);

/// Standard base64 (`+/`), read leniently.
const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);

/// URL-safe base64 (`-_`), read leniently.
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);

/// Reads a [`Base64Bytes`].
struct Base64Visitor;

impl Visitor<'_> for Base64Visitor {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a base64 string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<u8>, E> {
        STANDARD
            .decode(v)
            .or_else(|_| URL_SAFE.decode(v))
            .map_err(|_| E::invalid_value(Unexpected::Str(v), &self))
    }
}

// ---------------------------------------------------------------------------
// The message tree as OTLP/JSON writes it. Every field is optional: absent
// and `null` both mean the proto3 default.
// ---------------------------------------------------------------------------

/// `ExportMetricsServiceRequest`.
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "an ExportMetricsServiceRequest object"
)]
struct ExportRequest {
    /// `resourceMetrics`.
    #[serde(alias = "resource_metrics")]
    resource_metrics: Option<Vec<ResourceMetrics>>,
}

/// `ResourceMetrics`: one resource's metrics.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a ResourceMetrics object")]
struct ResourceMetrics {
    /// `resource`.
    resource: Option<Resource>,
    /// `scopeMetrics`.
    #[serde(alias = "scope_metrics")]
    scope_metrics: Option<Vec<ScopeMetrics>>,
    /// `schemaUrl`.
    #[serde(alias = "schema_url")]
    schema_url: Option<String>,
}

/// `Resource`: the entity producing the metrics.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a Resource object")]
struct Resource {
    /// `attributes`.
    attributes: Option<Vec<KeyValue>>,
    /// `droppedAttributesCount`.
    #[serde(alias = "dropped_attributes_count")]
    dropped_attributes_count: Option<Int<u32>>,
    /// `entityRefs`.
    #[serde(alias = "entity_refs")]
    entity_refs: Option<Vec<EntityRef>>,
}

/// `EntityRef`: an entity the resource's attributes describe.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an EntityRef object")]
struct EntityRef {
    /// `schemaUrl`.
    #[serde(alias = "schema_url")]
    schema_url: Option<String>,
    /// `type`.
    #[serde(rename = "type")]
    kind: Option<String>,
    /// `idKeys`.
    #[serde(alias = "id_keys")]
    id_keys: Option<Vec<String>>,
    /// `descriptionKeys`.
    #[serde(alias = "description_keys")]
    description_keys: Option<Vec<String>>,
}

/// `ScopeMetrics`: one instrumentation scope's metrics.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a ScopeMetrics object")]
struct ScopeMetrics {
    /// `scope`.
    scope: Option<InstrumentationScope>,
    /// `metrics`.
    metrics: Option<Vec<Metric>>,
    /// `schemaUrl`.
    #[serde(alias = "schema_url")]
    schema_url: Option<String>,
}

/// `InstrumentationScope`: the library that recorded the metrics.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an InstrumentationScope object")]
struct InstrumentationScope {
    /// `name`.
    name: Option<String>,
    /// `version`.
    version: Option<String>,
    /// `attributes`.
    attributes: Option<Vec<KeyValue>>,
    /// `droppedAttributesCount`.
    #[serde(alias = "dropped_attributes_count")]
    dropped_attributes_count: Option<Int<u32>>,
}

/// `Metric`, its `data` oneof as one optional field per member.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a Metric object")]
struct Metric {
    /// `name`.
    name: Option<String>,
    /// `description`.
    description: Option<String>,
    /// `unit`.
    unit: Option<String>,
    /// `metadata`.
    metadata: Option<Vec<KeyValue>>,
    /// `gauge` (data oneof).
    gauge: Option<Gauge>,
    /// `sum` (data oneof).
    sum: Option<Sum>,
    /// `histogram` (data oneof).
    histogram: Option<Histogram>,
    /// `exponentialHistogram` (data oneof).
    #[serde(alias = "exponential_histogram")]
    exponential_histogram: Option<ExponentialHistogram>,
    /// `summary` (data oneof).
    summary: Option<Summary>,
}

/// `Gauge`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a Gauge object")]
struct Gauge {
    /// `dataPoints`.
    #[serde(alias = "data_points")]
    data_points: Option<Vec<NumberDataPoint>>,
}

/// `Sum`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a Sum object")]
struct Sum {
    /// `dataPoints`.
    #[serde(alias = "data_points")]
    data_points: Option<Vec<NumberDataPoint>>,
    /// `aggregationTemporality`.
    #[serde(alias = "aggregation_temporality")]
    aggregation_temporality: Option<Temporality>,
    /// `isMonotonic`.
    #[serde(alias = "is_monotonic")]
    is_monotonic: Option<bool>,
}

/// `Histogram`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a Histogram object")]
struct Histogram {
    /// `dataPoints`.
    #[serde(alias = "data_points")]
    data_points: Option<Vec<HistogramDataPoint>>,
    /// `aggregationTemporality`.
    #[serde(alias = "aggregation_temporality")]
    aggregation_temporality: Option<Temporality>,
}

/// `ExponentialHistogram`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an ExponentialHistogram object")]
struct ExponentialHistogram {
    /// `dataPoints`.
    #[serde(alias = "data_points")]
    data_points: Option<Vec<ExponentialHistogramDataPoint>>,
    /// `aggregationTemporality`.
    #[serde(alias = "aggregation_temporality")]
    aggregation_temporality: Option<Temporality>,
}

/// `Summary`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a Summary object")]
struct Summary {
    /// `dataPoints`.
    #[serde(alias = "data_points")]
    data_points: Option<Vec<SummaryDataPoint>>,
}

/// `NumberDataPoint`, its `value` oneof as `asDouble` and `asInt`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a NumberDataPoint object")]
struct NumberDataPoint {
    /// `attributes`.
    attributes: Option<Vec<KeyValue>>,
    /// `startTimeUnixNano`.
    #[serde(alias = "start_time_unix_nano")]
    start_time_unix_nano: Option<Int<u64>>,
    /// `timeUnixNano`.
    #[serde(alias = "time_unix_nano")]
    time_unix_nano: Option<Int<u64>>,
    /// `asDouble` (value oneof).
    #[serde(alias = "as_double")]
    as_double: Option<Double>,
    /// `asInt` (value oneof).
    #[serde(alias = "as_int")]
    as_int: Option<Int<i64>>,
    /// `exemplars`.
    exemplars: Option<Vec<Exemplar>>,
    /// `flags`.
    flags: Option<Int<u32>>,
}

/// `HistogramDataPoint`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a HistogramDataPoint object")]
struct HistogramDataPoint {
    /// `attributes`.
    attributes: Option<Vec<KeyValue>>,
    /// `startTimeUnixNano`.
    #[serde(alias = "start_time_unix_nano")]
    start_time_unix_nano: Option<Int<u64>>,
    /// `timeUnixNano`.
    #[serde(alias = "time_unix_nano")]
    time_unix_nano: Option<Int<u64>>,
    /// `count`.
    count: Option<Int<u64>>,
    /// `sum` (optional).
    sum: Option<Double>,
    /// `bucketCounts`.
    #[serde(alias = "bucket_counts")]
    bucket_counts: Option<Vec<Int<u64>>>,
    /// `explicitBounds`.
    #[serde(alias = "explicit_bounds")]
    explicit_bounds: Option<Vec<Double>>,
    /// `exemplars`.
    exemplars: Option<Vec<Exemplar>>,
    /// `flags`.
    flags: Option<Int<u32>>,
    /// `min` (optional).
    min: Option<Double>,
    /// `max` (optional).
    max: Option<Double>,
}

/// `ExponentialHistogramDataPoint`.
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "an ExponentialHistogramDataPoint object"
)]
struct ExponentialHistogramDataPoint {
    /// `attributes`.
    attributes: Option<Vec<KeyValue>>,
    /// `startTimeUnixNano`.
    #[serde(alias = "start_time_unix_nano")]
    start_time_unix_nano: Option<Int<u64>>,
    /// `timeUnixNano`.
    #[serde(alias = "time_unix_nano")]
    time_unix_nano: Option<Int<u64>>,
    /// `count`.
    count: Option<Int<u64>>,
    /// `sum` (optional).
    sum: Option<Double>,
    /// `scale`.
    scale: Option<Int<i32>>,
    /// `zeroCount`.
    #[serde(alias = "zero_count")]
    zero_count: Option<Int<u64>>,
    /// `positive`.
    positive: Option<Buckets>,
    /// `negative`.
    negative: Option<Buckets>,
    /// `flags`.
    flags: Option<Int<u32>>,
    /// `exemplars`.
    exemplars: Option<Vec<Exemplar>>,
    /// `min` (optional).
    min: Option<Double>,
    /// `max` (optional).
    max: Option<Double>,
    /// `zeroThreshold`.
    #[serde(alias = "zero_threshold")]
    zero_threshold: Option<Double>,
}

/// `ExponentialHistogramDataPoint.Buckets`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a Buckets object")]
struct Buckets {
    /// `offset`.
    offset: Option<Int<i32>>,
    /// `bucketCounts`.
    #[serde(alias = "bucket_counts")]
    bucket_counts: Option<Vec<Int<u64>>>,
}

/// `SummaryDataPoint`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a SummaryDataPoint object")]
struct SummaryDataPoint {
    /// `attributes`.
    attributes: Option<Vec<KeyValue>>,
    /// `startTimeUnixNano`.
    #[serde(alias = "start_time_unix_nano")]
    start_time_unix_nano: Option<Int<u64>>,
    /// `timeUnixNano`.
    #[serde(alias = "time_unix_nano")]
    time_unix_nano: Option<Int<u64>>,
    /// `count`.
    count: Option<Int<u64>>,
    /// `sum`.
    sum: Option<Double>,
    /// `quantileValues`.
    #[serde(alias = "quantile_values")]
    quantile_values: Option<Vec<ValueAtQuantile>>,
    /// `flags`.
    flags: Option<Int<u32>>,
}

/// `SummaryDataPoint.ValueAtQuantile`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a ValueAtQuantile object")]
struct ValueAtQuantile {
    /// `quantile`.
    quantile: Option<Double>,
    /// `value`.
    value: Option<Double>,
}

/// `Exemplar`, its `value` oneof as `asDouble` and `asInt`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an Exemplar object")]
struct Exemplar {
    /// `filteredAttributes`.
    #[serde(alias = "filtered_attributes")]
    filtered_attributes: Option<Vec<KeyValue>>,
    /// `timeUnixNano`.
    #[serde(alias = "time_unix_nano")]
    time_unix_nano: Option<Int<u64>>,
    /// `spanId` (hex).
    #[serde(alias = "span_id")]
    span_id: Option<HexBytes>,
    /// `traceId` (hex).
    #[serde(alias = "trace_id")]
    trace_id: Option<HexBytes>,
    /// `asDouble` (value oneof).
    #[serde(alias = "as_double")]
    as_double: Option<Double>,
    /// `asInt` (value oneof).
    #[serde(alias = "as_int")]
    as_int: Option<Int<i64>>,
}

/// `KeyValue`: one attribute.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a KeyValue object")]
struct KeyValue {
    /// `key`.
    key: Option<String>,
    /// `value`.
    value: Option<AnyValue>,
    /// `keyStrindex`.
    #[serde(alias = "key_strindex")]
    key_strindex: Option<Int<i32>>,
}

/// `AnyValue`, its `value` oneof as one optional field per member.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an AnyValue object")]
struct AnyValue {
    /// `stringValue`.
    #[serde(alias = "string_value")]
    string_value: Option<String>,
    /// `boolValue`.
    #[serde(alias = "bool_value")]
    bool_value: Option<bool>,
    /// `intValue`.
    #[serde(alias = "int_value")]
    int_value: Option<Int<i64>>,
    /// `doubleValue`.
    #[serde(alias = "double_value")]
    double_value: Option<Double>,
    /// `arrayValue`.
    #[serde(alias = "array_value")]
    array_value: Option<ArrayValue>,
    /// `kvlistValue`.
    #[serde(alias = "kvlist_value")]
    kvlist_value: Option<KeyValueList>,
    /// `bytesValue` (base64).
    #[serde(alias = "bytes_value")]
    bytes_value: Option<Base64Bytes>,
    /// `stringValueStrindex`.
    #[serde(alias = "string_value_strindex")]
    string_value_strindex: Option<Int<i32>>,
}

/// `ArrayValue`.
#[derive(Deserialize)]
#[serde(expecting = "an ArrayValue object")]
struct ArrayValue {
    /// `values`.
    values: Option<Vec<AnyValue>>,
}

/// `KeyValueList`.
#[derive(Deserialize)]
#[serde(expecting = "a KeyValueList object")]
struct KeyValueList {
    /// `values`.
    values: Option<Vec<KeyValue>>,
}

// ---------------------------------------------------------------------------
// Into the prost types. Absent fields become their proto3 defaults.
// ---------------------------------------------------------------------------

/// A repeated message field, each element converted; absent is empty.
fn list<A, B: From<A>>(field: Option<Vec<A>>) -> Vec<B> {
    field.map_or_else(Vec::new, |items| items.into_iter().map(B::from).collect())
}

/// An integer field; absent is 0.
fn int<T: Default>(field: Option<Int<T>>) -> T {
    field.map_or_else(T::default, |value| value.0)
}

/// A repeated integer field; absent is empty.
fn ints<T>(field: Option<Vec<Int<T>>>) -> Vec<T> {
    field.map_or_else(Vec::new, |items| items.into_iter().map(|v| v.0).collect())
}

/// A double field; absent is 0.
fn double(field: Option<Double>) -> f64 {
    field.map_or(0.0, |value| value.0)
}

/// A repeated double field; absent is empty.
fn doubles(field: Option<Vec<Double>>) -> Vec<f64> {
    field.map_or_else(Vec::new, |items| items.into_iter().map(|v| v.0).collect())
}

/// An aggregation temporality; absent is 0 (unspecified).
fn temporality(field: Option<Temporality>) -> i32 {
    field.map_or(0, |value| value.0)
}

impl From<ExportRequest> for ExportMetricsServiceRequest {
    /// The request with its resources.
    fn from(request: ExportRequest) -> Self {
        Self {
            resource_metrics: list(request.resource_metrics),
        }
    }
}

impl From<ResourceMetrics> for metrics::ResourceMetrics {
    /// A resource's metrics.
    fn from(rm: ResourceMetrics) -> Self {
        Self {
            resource: rm.resource.map(Into::into),
            scope_metrics: list(rm.scope_metrics),
            schema_url: rm.schema_url.unwrap_or_default(),
        }
    }
}

impl From<Resource> for resource::Resource {
    /// A resource.
    fn from(r: Resource) -> Self {
        Self {
            attributes: list(r.attributes),
            dropped_attributes_count: int(r.dropped_attributes_count),
            entity_refs: list(r.entity_refs),
        }
    }
}

impl From<EntityRef> for common::EntityRef {
    /// An entity reference.
    fn from(e: EntityRef) -> Self {
        Self {
            schema_url: e.schema_url.unwrap_or_default(),
            r#type: e.kind.unwrap_or_default(),
            id_keys: e.id_keys.unwrap_or_default(),
            description_keys: e.description_keys.unwrap_or_default(),
        }
    }
}

impl From<ScopeMetrics> for metrics::ScopeMetrics {
    /// A scope's metrics.
    fn from(sm: ScopeMetrics) -> Self {
        Self {
            scope: sm.scope.map(Into::into),
            metrics: list(sm.metrics),
            schema_url: sm.schema_url.unwrap_or_default(),
        }
    }
}

impl From<InstrumentationScope> for common::InstrumentationScope {
    /// An instrumentation scope.
    fn from(s: InstrumentationScope) -> Self {
        Self {
            name: s.name.unwrap_or_default(),
            version: s.version.unwrap_or_default(),
            attributes: list(s.attributes),
            dropped_attributes_count: int(s.dropped_attributes_count),
        }
    }
}

impl From<Metric> for metrics::Metric {
    /// A metric; of several data members, the first declared is kept.
    fn from(m: Metric) -> Self {
        use metrics::metric::Data;
        let data = m
            .gauge
            .map(|g| Data::Gauge(g.into()))
            .or_else(|| m.sum.map(|s| Data::Sum(s.into())))
            .or_else(|| m.histogram.map(|h| Data::Histogram(h.into())))
            .or_else(|| {
                m.exponential_histogram
                    .map(|h| Data::ExponentialHistogram(h.into()))
            })
            .or_else(|| m.summary.map(|s| Data::Summary(s.into())));
        Self {
            name: m.name.unwrap_or_default(),
            description: m.description.unwrap_or_default(),
            unit: m.unit.unwrap_or_default(),
            metadata: list(m.metadata),
            data,
        }
    }
}

impl From<Gauge> for metrics::Gauge {
    /// A gauge.
    fn from(g: Gauge) -> Self {
        Self {
            data_points: list(g.data_points),
        }
    }
}

impl From<Sum> for metrics::Sum {
    /// A sum.
    fn from(s: Sum) -> Self {
        Self {
            data_points: list(s.data_points),
            aggregation_temporality: temporality(s.aggregation_temporality),
            is_monotonic: s.is_monotonic.unwrap_or_default(),
        }
    }
}

impl From<Histogram> for metrics::Histogram {
    /// A histogram.
    fn from(h: Histogram) -> Self {
        Self {
            data_points: list(h.data_points),
            aggregation_temporality: temporality(h.aggregation_temporality),
        }
    }
}

impl From<ExponentialHistogram> for metrics::ExponentialHistogram {
    /// An exponential histogram.
    fn from(h: ExponentialHistogram) -> Self {
        Self {
            data_points: list(h.data_points),
            aggregation_temporality: temporality(h.aggregation_temporality),
        }
    }
}

impl From<Summary> for metrics::Summary {
    /// A summary.
    fn from(s: Summary) -> Self {
        Self {
            data_points: list(s.data_points),
        }
    }
}

impl From<NumberDataPoint> for metrics::NumberDataPoint {
    /// A number point; of `asDouble` and `asInt`, `asDouble` is kept.
    fn from(p: NumberDataPoint) -> Self {
        use metrics::number_data_point::Value;
        let value = p
            .as_double
            .map(|v| Value::AsDouble(v.0))
            .or_else(|| p.as_int.map(|v| Value::AsInt(v.0)));
        Self {
            attributes: list(p.attributes),
            start_time_unix_nano: int(p.start_time_unix_nano),
            time_unix_nano: int(p.time_unix_nano),
            exemplars: list(p.exemplars),
            flags: int(p.flags),
            value,
        }
    }
}

impl From<HistogramDataPoint> for metrics::HistogramDataPoint {
    /// A histogram point.
    fn from(p: HistogramDataPoint) -> Self {
        Self {
            attributes: list(p.attributes),
            start_time_unix_nano: int(p.start_time_unix_nano),
            time_unix_nano: int(p.time_unix_nano),
            count: int(p.count),
            sum: p.sum.map(|v| v.0),
            bucket_counts: ints(p.bucket_counts),
            explicit_bounds: doubles(p.explicit_bounds),
            exemplars: list(p.exemplars),
            flags: int(p.flags),
            min: p.min.map(|v| v.0),
            max: p.max.map(|v| v.0),
        }
    }
}

impl From<ExponentialHistogramDataPoint> for metrics::ExponentialHistogramDataPoint {
    /// An exponential histogram point.
    fn from(p: ExponentialHistogramDataPoint) -> Self {
        Self {
            attributes: list(p.attributes),
            start_time_unix_nano: int(p.start_time_unix_nano),
            time_unix_nano: int(p.time_unix_nano),
            count: int(p.count),
            sum: p.sum.map(|v| v.0),
            scale: int(p.scale),
            zero_count: int(p.zero_count),
            positive: p.positive.map(Into::into),
            negative: p.negative.map(Into::into),
            flags: int(p.flags),
            exemplars: list(p.exemplars),
            min: p.min.map(|v| v.0),
            max: p.max.map(|v| v.0),
            zero_threshold: double(p.zero_threshold),
        }
    }
}

impl From<Buckets> for metrics::exponential_histogram_data_point::Buckets {
    /// One side's buckets.
    fn from(b: Buckets) -> Self {
        Self {
            offset: int(b.offset),
            bucket_counts: ints(b.bucket_counts),
        }
    }
}

impl From<SummaryDataPoint> for metrics::SummaryDataPoint {
    /// A summary point.
    fn from(p: SummaryDataPoint) -> Self {
        Self {
            attributes: list(p.attributes),
            start_time_unix_nano: int(p.start_time_unix_nano),
            time_unix_nano: int(p.time_unix_nano),
            count: int(p.count),
            sum: double(p.sum),
            quantile_values: list(p.quantile_values),
            flags: int(p.flags),
        }
    }
}

impl From<ValueAtQuantile> for metrics::summary_data_point::ValueAtQuantile {
    /// One quantile.
    fn from(q: ValueAtQuantile) -> Self {
        Self {
            quantile: double(q.quantile),
            value: double(q.value),
        }
    }
}

impl From<Exemplar> for metrics::Exemplar {
    /// An exemplar; of `asDouble` and `asInt`, `asDouble` is kept.
    fn from(e: Exemplar) -> Self {
        use metrics::exemplar::Value;
        let value = e
            .as_double
            .map(|v| Value::AsDouble(v.0))
            .or_else(|| e.as_int.map(|v| Value::AsInt(v.0)));
        Self {
            filtered_attributes: list(e.filtered_attributes),
            time_unix_nano: int(e.time_unix_nano),
            span_id: e.span_id.map_or_else(Vec::new, |id| id.0),
            trace_id: e.trace_id.map_or_else(Vec::new, |id| id.0),
            value,
        }
    }
}

impl From<KeyValue> for common::KeyValue {
    /// An attribute.
    fn from(kv: KeyValue) -> Self {
        Self {
            key: kv.key.unwrap_or_default(),
            value: kv.value.map(Into::into),
            key_strindex: int(kv.key_strindex),
        }
    }
}

impl From<AnyValue> for common::AnyValue {
    /// A value; of several members, the first declared is kept. Recurses
    /// into arrays and lists, as deep as `serde_json`'s limit let them be.
    fn from(v: AnyValue) -> Self {
        use common::any_value::Value;
        let value = v
            .string_value
            .map(Value::StringValue)
            .or_else(|| v.bool_value.map(Value::BoolValue))
            .or_else(|| v.int_value.map(|i| Value::IntValue(i.0)))
            .or_else(|| v.double_value.map(|d| Value::DoubleValue(d.0)))
            .or_else(|| v.array_value.map(|a| Value::ArrayValue(a.into())))
            .or_else(|| v.kvlist_value.map(|l| Value::KvlistValue(l.into())))
            .or_else(|| v.bytes_value.map(|b| Value::BytesValue(b.0)))
            .or_else(|| {
                v.string_value_strindex
                    .map(|i| Value::StringValueStrindex(i.0))
            });
        Self { value }
    }
}

impl From<ArrayValue> for common::ArrayValue {
    /// An array of values.
    fn from(a: ArrayValue) -> Self {
        Self {
            values: list(a.values),
        }
    }
}

impl From<KeyValueList> for common::KeyValueList {
    /// A list of key-value pairs.
    fn from(l: KeyValueList) -> Self {
        Self {
            values: list(l.values),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::any_value::Value as Any;
    use metrics::metric::Data;
    use metrics::number_data_point::Value as Number;

    /// Decodes `body`, failing the test with the error's message.
    fn ok(body: &str) -> ExportMetricsServiceRequest {
        match decode(body.as_bytes()) {
            Ok(request) => request,
            Err(e) => panic!("{e}"),
        }
    }

    /// The message of `body`'s error, failing the test if it decodes.
    fn err(body: &str) -> String {
        match decode(body.as_bytes()) {
            Ok(request) => panic!("decoded: {request:?}"),
            Err(e) => e.to_string(),
        }
    }

    /// The metrics of the first scope of the first resource.
    fn metrics_of(request: &ExportMetricsServiceRequest) -> &[metrics::Metric] {
        &request.resource_metrics[0].scope_metrics[0].metrics
    }

    /// A body with one metric, written as `metric` (a JSON object).
    fn one_metric(metric: &str) -> String {
        format!(r#"{{"resourceMetrics":[{{"scopeMetrics":[{{"metrics":[{metric}]}}]}}]}}"#)
    }

    /// The only metric of `one_metric(metric)`.
    fn decode_metric(metric: &str) -> metrics::Metric {
        let mut request = ok(&one_metric(metric));
        request.resource_metrics[0].scope_metrics[0]
            .metrics
            .remove(0)
    }

    /// A string attribute.
    fn string_kv(key: &str, value: &str) -> common::KeyValue {
        common::KeyValue {
            key: key.into(),
            value: Some(common::AnyValue {
                value: Some(Any::StringValue(value.into())),
            }),
            key_strindex: 0,
        }
    }

    /// The value of an attribute.
    fn any(kv: &common::KeyValue) -> Option<&Any> {
        kv.value.as_ref().and_then(|v| v.value.as_ref())
    }

    /// What @opentelemetry/exporter-metrics-otlp-http sends for a counter.
    const JS_COUNTER: &str = r#"{
      "resourceMetrics": [{
        "resource": {
          "attributes": [
            {"key": "service.name", "value": {"stringValue": "checkout"}},
            {"key": "telemetry.sdk.language", "value": {"stringValue": "nodejs"}}
          ],
          "droppedAttributesCount": 0
        },
        "schemaUrl": "https://opentelemetry.io/schemas/1.24.0",
        "scopeMetrics": [{
          "scope": {"name": "checkout-meter", "version": "1.2.0"},
          "metrics": [{
            "name": "orders_total",
            "description": "Orders placed",
            "unit": "{order}",
            "sum": {
              "dataPoints": [
                {
                  "attributes": [
                    {"key": "region", "value": {"stringValue": "eu"}},
                    {"key": "retry", "value": {"boolValue": false}},
                    {"key": "shard", "value": {"intValue": "12"}},
                    {"key": "ratio", "value": {"doubleValue": 0.5}}
                  ],
                  "startTimeUnixNano": "1718000000000000000",
                  "timeUnixNano": "1718000010123456789",
                  "asInt": "42"
                },
                {
                  "attributes": [],
                  "startTimeUnixNano": "1718000000000000000",
                  "timeUnixNano": "1718000010123456789",
                  "asInt": 7
                }
              ],
              "aggregationTemporality": 2,
              "isMonotonic": true
            }
          }]
        }]
      }]
    }"#;

    #[test]
    fn js_exporter_counter() {
        let request = ok(JS_COUNTER);
        let rm = &request.resource_metrics[0];
        let resource = rm.resource.as_ref().map(|r| r.attributes.clone());
        assert_eq!(
            resource,
            Some(vec![
                string_kv("service.name", "checkout"),
                string_kv("telemetry.sdk.language", "nodejs"),
            ])
        );
        assert_eq!(rm.schema_url, "https://opentelemetry.io/schemas/1.24.0");
        let scope = rm.scope_metrics[0]
            .scope
            .as_ref()
            .map(|s| (&*s.name, &*s.version));
        assert_eq!(scope, Some(("checkout-meter", "1.2.0")));
        let metric = &metrics_of(&request)[0];
        assert_eq!((&*metric.name, &*metric.unit), ("orders_total", "{order}"));
        assert_eq!(metric.description, "Orders placed");
        let Some(Data::Sum(sum)) = &metric.data else {
            panic!("not a sum: {metric:?}");
        };
        assert!(sum.is_monotonic);
        assert_eq!(
            sum.aggregation_temporality,
            metrics::AggregationTemporality::Cumulative as i32
        );
        let [first, second] = &sum.data_points[..] else {
            panic!("two points expected: {sum:?}");
        };
        assert_eq!(first.start_time_unix_nano, 1_718_000_000_000_000_000);
        assert_eq!(first.time_unix_nano, 1_718_000_010_123_456_789);
        assert_eq!(first.value, Some(Number::AsInt(42)));
        assert_eq!(second.value, Some(Number::AsInt(7)));
        assert!(second.attributes.is_empty());
        let values: Vec<_> = first.attributes.iter().map(any).collect();
        assert_eq!(
            values,
            [
                Some(&Any::StringValue("eu".into())),
                Some(&Any::BoolValue(false)),
                Some(&Any::IntValue(12)),
                Some(&Any::DoubleValue(0.5)),
            ]
        );
    }

    #[test]
    fn gauge_as_double() {
        let metric = decode_metric(
            r#"{"name":"temp","unit":"Cel","gauge":{"dataPoints":[
                {"timeUnixNano":1718000000000000000,"asDouble":21.5,"flags":1},
                {"timeUnixNano":"1718000001000000000","asDouble":-3}]}}"#,
        );
        let Some(Data::Gauge(gauge)) = metric.data else {
            panic!("not a gauge");
        };
        let points: Vec<_> = gauge
            .data_points
            .iter()
            .map(|p| (p.time_unix_nano, p.value, p.flags))
            .collect();
        assert_eq!(
            points,
            [
                (1_718_000_000_000_000_000, Some(Number::AsDouble(21.5)), 1),
                (1_718_000_001_000_000_000, Some(Number::AsDouble(-3.0)), 0),
            ]
        );
    }

    #[test]
    fn histogram_with_string_bucket_counts() {
        let metric = decode_metric(
            r#"{"name":"latency","unit":"ms","histogram":{"aggregationTemporality":1,"dataPoints":[
                {"startTimeUnixNano":"1","timeUnixNano":"2","count":"6","sum":42.5,"min":0.5,"max":30,
                 "bucketCounts":["1","2","3","0"],"explicitBounds":[1,5,10]},
                {"count":0,"bucketCounts":[],"explicitBounds":[]}]}}"#,
        );
        let Some(Data::Histogram(histogram)) = metric.data else {
            panic!("not a histogram");
        };
        assert_eq!(histogram.aggregation_temporality, 1);
        let p = &histogram.data_points[0];
        assert_eq!(
            (p.start_time_unix_nano, p.time_unix_nano, p.count),
            (1, 2, 6)
        );
        assert_eq!((p.sum, p.min, p.max), (Some(42.5), Some(0.5), Some(30.0)));
        assert_eq!(p.bucket_counts, [1, 2, 3, 0]);
        assert_eq!(p.explicit_bounds, [1.0, 5.0, 10.0]);
        let empty = &histogram.data_points[1];
        assert_eq!((empty.sum, empty.min, empty.max), (None, None, None));
        assert!(empty.bucket_counts.is_empty());
    }

    #[test]
    fn exponential_histogram() {
        let metric = decode_metric(
            r#"{"name":"size","exponentialHistogram":{"aggregationTemporality":2,"dataPoints":[{
                "timeUnixNano":"5","count":"10","sum":"12.25","scale":-3,"zeroCount":"1",
                "zeroThreshold":1e-9,"min":-4,"max":"8",
                "positive":{"offset":"-2","bucketCounts":["3",4]},
                "negative":{"offset":1,"bucketCounts":[2]}}]}}"#,
        );
        let Some(Data::ExponentialHistogram(histogram)) = metric.data else {
            panic!("not an exponential histogram");
        };
        assert_eq!(histogram.aggregation_temporality, 2);
        let p = &histogram.data_points[0];
        assert_eq!(
            (p.time_unix_nano, p.count, p.scale, p.zero_count),
            (5, 10, -3, 1)
        );
        assert_eq!((p.sum, p.min, p.max), (Some(12.25), Some(-4.0), Some(8.0)));
        assert!((p.zero_threshold - 1e-9).abs() < f64::EPSILON);
        let positive = p
            .positive
            .as_ref()
            .map(|b| (b.offset, b.bucket_counts.clone()));
        assert_eq!(positive, Some((-2, vec![3, 4])));
        let negative = p
            .negative
            .as_ref()
            .map(|b| (b.offset, b.bucket_counts.clone()));
        assert_eq!(negative, Some((1, vec![2])));
    }

    #[test]
    fn summary_quantiles() {
        let metric = decode_metric(
            r#"{"name":"rpc","summary":{"dataPoints":[{"timeUnixNano":"9","count":"4","sum":10,
                "quantileValues":[{"quantile":0.5,"value":2},{"quantile":0.99,"value":"4.5"},{}]}]}}"#,
        );
        let Some(Data::Summary(summary)) = metric.data else {
            panic!("not a summary");
        };
        let p = &summary.data_points[0];
        assert_eq!((p.time_unix_nano, p.count, p.sum), (9, 4, 10.0));
        let quantiles: Vec<_> = p
            .quantile_values
            .iter()
            .map(|q| (q.quantile, q.value))
            .collect();
        assert_eq!(quantiles, [(0.5, 2.0), (0.99, 4.5), (0.0, 0.0)]);
    }

    #[test]
    fn exemplars_with_hex_ids() {
        let metric = decode_metric(
            r#"{"name":"c","sum":{"dataPoints":[{"asInt":1,"exemplars":[{
                "timeUnixNano":"3","asDouble":0.25,
                "traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"eee19b7ec3c1b174",
                "filteredAttributes":[{"key":"user","value":{"stringValue":"u1"}}]}]}]}}"#,
        );
        let Some(Data::Sum(sum)) = metric.data else {
            panic!("not a sum");
        };
        let e = &sum.data_points[0].exemplars[0];
        let trace = [
            0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f,
            0xc6, 0x0c,
        ];
        assert_eq!(e.trace_id, trace);
        assert_eq!(e.span_id, [0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74]);
        assert_eq!(e.time_unix_nano, 3);
        assert_eq!(e.value, Some(metrics::exemplar::Value::AsDouble(0.25)));
        assert_eq!(e.filtered_attributes, [string_kv("user", "u1")]);
    }

    #[test]
    fn exemplar_id_not_hex_is_an_error() {
        let body =
            one_metric(r#"{"gauge":{"dataPoints":[{"exemplars":[{"spanId":"7uGbfsPBsXQ="}]}]}}"#);
        let message = err(&body);
        assert!(
            message.contains(r#"invalid value: string "7uGbfsPBsXQ=", expected a hex string"#),
            "{message}"
        );
        assert!(err(&one_metric(
            r#"{"gauge":{"dataPoints":[{"exemplars":[{"traceId":"abc"}]}]}}"#
        ))
        .contains("hex"));
    }

    #[test]
    fn snake_case_keys() {
        let request = ok(
            r#"{"resource_metrics":[{"schema_url":"s","scope_metrics":[{"metrics":[
            {"name":"n","exponential_histogram":{"aggregation_temporality":1,"data_points":[
              {"start_time_unix_nano":"1","time_unix_nano":"2","zero_count":3,"zero_threshold":0.5,
               "positive":{"bucket_counts":[1]}}]}},
            {"name":"m","sum":{"is_monotonic":true,"data_points":[{"as_int":"5","attributes":[
              {"key":"k","value":{"int_value":"-9"}}]}]}}]}]}]}"#,
        );
        assert_eq!(request.resource_metrics[0].schema_url, "s");
        let [exp, sum] = metrics_of(&request) else {
            panic!("two metrics expected");
        };
        let Some(Data::ExponentialHistogram(exp)) = &exp.data else {
            panic!("not an exponential histogram");
        };
        let p = &exp.data_points[0];
        assert_eq!(
            (
                exp.aggregation_temporality,
                p.start_time_unix_nano,
                p.time_unix_nano,
                p.zero_count
            ),
            (1, 1, 2, 3)
        );
        assert_eq!(
            p.positive.as_ref().map(|b| b.bucket_counts.clone()),
            Some(vec![1])
        );
        let Some(Data::Sum(sum)) = &sum.data else {
            panic!("not a sum");
        };
        assert!(sum.is_monotonic);
        assert_eq!(sum.data_points[0].value, Some(Number::AsInt(5)));
        assert_eq!(
            any(&sum.data_points[0].attributes[0]),
            Some(&Any::IntValue(-9))
        );
    }

    #[test]
    fn nan_and_infinity_strings() {
        let metric = decode_metric(
            r#"{"gauge":{"dataPoints":[{"asDouble":"NaN"},{"asDouble":"Infinity"},{"asDouble":"-Infinity"},{"asDouble":"2.5"}]}}"#,
        );
        let Some(Data::Gauge(gauge)) = metric.data else {
            panic!("not a gauge");
        };
        let values: Vec<f64> = gauge
            .data_points
            .iter()
            .filter_map(|p| match p.value {
                Some(Number::AsDouble(v)) => Some(v),
                _ => None,
            })
            .collect();
        assert_eq!(values.len(), 4);
        assert!(values[0].is_nan());
        assert_eq!(values[1..], [f64::INFINITY, f64::NEG_INFINITY, 2.5]);
        let message = err(&one_metric(
            r#"{"gauge":{"dataPoints":[{"asDouble":"lots"}]}}"#,
        ));
        assert!(
            message.contains(r#"invalid value: string "lots", expected a double"#),
            "{message}"
        );
    }

    /// `depth` levels of `open`, a string value, then `depth` of `close`,
    /// as the value of an exemplar's attribute (the deepest place an
    /// `AnyValue` can be).
    fn nested(open: &str, close: &str, depth: usize) -> String {
        let value = format!(
            r#"{}{{"stringValue":"x"}}{}"#,
            open.repeat(depth),
            close.repeat(depth)
        );
        let attribute = format!(r#"{{"key":"k","value":{value}}}"#);
        one_metric(&format!(
            r#"{{"gauge":{{"dataPoints":[{{"exemplars":[{{"filteredAttributes":[{attribute}]}}]}}]}}}}"#
        ))
    }

    /// The `AnyValue` nested in `nested`'s body.
    fn nested_value(request: &ExportMetricsServiceRequest) -> Option<common::AnyValue> {
        let Some(Data::Gauge(gauge)) = &metrics_of(request)[0].data else {
            return None;
        };
        gauge.data_points[0].exemplars[0].filtered_attributes[0]
            .value
            .clone()
    }

    #[test]
    fn deep_nesting_is_an_error() {
        let nestings = [
            (r#"{"arrayValue":{"values":["#, "]}}"),
            (r#"{"kvlistValue":{"values":[{"key":"k","value":"#, "}]}}"),
        ];
        for (open, close) in nestings {
            let body = nested(open, close, 100_000);
            // Half of a tokio worker's 2 MiB stack: the recursion limit
            // stops well before it, even unoptimised.
            let thread = std::thread::Builder::new()
                .stack_size(1 << 20)
                .spawn(move || err(&body));
            let Ok(Ok(message)) = thread.map(std::thread::JoinHandle::join) else {
                panic!("the decoding thread failed");
            };
            assert!(message.contains("recursion limit exceeded"), "{message}");
            assert!(message.starts_with("line 1 column "), "{message}");
        }
    }

    #[test]
    fn nesting_within_the_limit_decodes() {
        let request = ok(&nested(r#"{"arrayValue":{"values":["#, "]}}", 30));
        let mut value = nested_value(&request);
        let mut depth = 0;
        while let Some(common::AnyValue {
            value: Some(Any::ArrayValue(array)),
        }) = value
        {
            depth += 1;
            value = array.values.into_iter().next();
        }
        assert_eq!(depth, 30);
        assert_eq!(
            value.and_then(|v| v.value),
            Some(Any::StringValue("x".into()))
        );
    }

    #[test]
    fn deep_unknown_fields_are_skipped() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let request = ok(&format!(r#"{{"futureField":{deep},"resourceMetrics":[]}}"#));
        assert!(request.resource_metrics.is_empty());
    }

    #[test]
    fn truncated_json_is_an_error() {
        let cut = &JS_COUNTER[..JS_COUNTER.len() / 2];
        let message = err(cut);
        assert!(message.contains("EOF while parsing"), "{message}");
        assert!(message.ends_with(EXPECTED), "{message}");
        assert!(err("").contains("EOF while parsing a value"));
        assert!(err("{} x").contains("trailing characters"));
    }

    #[test]
    fn wrong_type_names_the_position_and_expectation() {
        let message = err(r#"{"resourceMetrics": {"scopeMetrics": []}}"#);
        assert_eq!(
            message,
            "line 1 column 20: invalid type: map, expected a sequence; \
             an OTLP/JSON ExportMetricsServiceRequest is expected"
        );
        let message = err(&one_metric(
            r#"{"sum":{"dataPoints":[{"timeUnixNano":true}]}}"#,
        ));
        assert!(
            message.contains("invalid type: boolean `true`, expected a u64 integer"),
            "{message}"
        );
        assert_eq!(err("[1]").split(':').next(), Some("line 1 column 2"));
        let e = decode(b"\n\n  null").err();
        assert_eq!(e.map(|e| (e.line(), e.column())), Some((3, 6)));
    }

    #[test]
    fn integers_are_range_checked() {
        let flags = err(&one_metric(
            r#"{"gauge":{"dataPoints":[{"flags":4294967296}]}}"#,
        ));
        assert!(
            flags.contains("invalid value: integer `4294967296`, expected a u32 integer"),
            "{flags}"
        );
        let time = err(&one_metric(
            r#"{"gauge":{"dataPoints":[{"timeUnixNano":"-1"}]}}"#,
        ));
        assert!(time.contains(r#"string "-1", expected a u64"#), "{time}");
        let fraction = err(&one_metric(r#"{"gauge":{"dataPoints":[{"asInt":1.5}]}}"#));
        assert!(
            fraction.contains("floating point `1.5`, expected a i64"),
            "{fraction}"
        );
        let metric = decode_metric(
            r#"{"gauge":{"dataPoints":[{"timeUnixNano":"18446744073709551615","asInt":"-9223372036854775808"},{"asInt":1e3}]}}"#,
        );
        let Some(Data::Gauge(gauge)) = metric.data else {
            panic!("not a gauge");
        };
        assert_eq!(gauge.data_points[0].time_unix_nano, u64::MAX);
        assert_eq!(gauge.data_points[0].value, Some(Number::AsInt(i64::MIN)));
        assert_eq!(gauge.data_points[1].value, Some(Number::AsInt(1000)));
    }

    #[test]
    fn defaults_nulls_and_unknown_fields() {
        let metric = decode_metric(
            r#"{"name":null,"newThing":{"a":[1,2]},"sum":{"dataPoints":[
                {"timeUnixNano":null,"asInt":null,"attributes":null,"x":1}],"isMonotonic":null}}"#,
        );
        assert_eq!(metric.name, "");
        let Some(Data::Sum(sum)) = metric.data else {
            panic!("not a sum");
        };
        assert!(!sum.is_monotonic);
        assert_eq!(sum.aggregation_temporality, 0);
        assert_eq!(sum.data_points, [metrics::NumberDataPoint::default()]);
        assert_eq!(ok("{}"), ExportMetricsServiceRequest::default());
        let empty = ok(r#"{"resourceMetrics":[{}]}"#);
        assert_eq!(
            empty.resource_metrics,
            [metrics::ResourceMetrics::default()]
        );
    }

    #[test]
    fn temporality_names_and_numbers() {
        let metric = decode_metric(
            r#"{"histogram":{"aggregationTemporality":"AGGREGATION_TEMPORALITY_DELTA"}}"#,
        );
        assert!(matches!(metric.data, Some(Data::Histogram(h)) if h.aggregation_temporality == 1));
        let metric = decode_metric(r#"{"sum":{"aggregationTemporality":7}}"#);
        assert!(matches!(metric.data, Some(Data::Sum(s)) if s.aggregation_temporality == 7));
        let message = err(&one_metric(
            r#"{"sum":{"aggregationTemporality":"SOMETIMES"}}"#,
        ));
        assert!(
            message.contains(r#"string "SOMETIMES", expected an AggregationTemporality"#),
            "{message}"
        );
    }

    #[test]
    fn two_data_members_keep_the_first_declared() {
        let metric = decode_metric(
            r#"{"summary":{},"gauge":{"dataPoints":[{"asInt":"1","asDouble":2}]},"sum":{"dataPoints":[{}]}}"#,
        );
        let Some(Data::Gauge(gauge)) = metric.data else {
            panic!("not a gauge: {:?}", metric.data);
        };
        assert_eq!(gauge.data_points[0].value, Some(Number::AsDouble(2.0)));
    }

    #[test]
    fn any_value_kinds() {
        let request = ok(r#"{"resourceMetrics":[{"resource":{"attributes":[
            {"key":"b","value":{"bytesValue":"aGk="}},
            {"key":"u","value":{"bytesValue":"_-8"}},
            {"key":"l","value":{"kvlistValue":{"values":[{"key":"x","value":{"stringValue":"y"}}]}}},
            {"key":"a","value":{"arrayValue":{"values":[{"intValue":1},{"doubleValue":"NaN"}]}}},
            {"key":"e","value":{}},
            {"key":"n"}],"entityRefs":[{"type":"service","idKeys":["service.name"]}]}}]}"#);
        let Some(resource) = &request.resource_metrics[0].resource else {
            panic!("no resource");
        };
        let a = &resource.attributes;
        assert_eq!(any(&a[0]), Some(&Any::BytesValue(b"hi".to_vec())));
        assert_eq!(any(&a[1]), Some(&Any::BytesValue(vec![0xff, 0xef])));
        let list = common::KeyValueList {
            values: vec![string_kv("x", "y")],
        };
        assert_eq!(any(&a[2]), Some(&Any::KvlistValue(list)));
        let Some(Any::ArrayValue(array)) = any(&a[3]) else {
            panic!("not an array");
        };
        assert_eq!(array.values[0].value, Some(Any::IntValue(1)));
        assert!(matches!(array.values[1].value, Some(Any::DoubleValue(d)) if d.is_nan()));
        assert_eq!(a[4].value, Some(common::AnyValue { value: None }));
        assert_eq!(a[5].value, None);
        assert_eq!(resource.entity_refs[0].r#type, "service");
        assert_eq!(resource.entity_refs[0].id_keys, ["service.name"]);
        let message = err(
            r#"{"resourceMetrics":[{"resource":{"attributes":[{"value":{"bytesValue":"!!"}}]}}]}"#,
        );
        assert!(message.contains("expected a base64 string"), "{message}");
    }
}
