//! Protocol buffers wire encoding of the few shapes the series families
//! need, written straight into the walk's buffers: the same bytes the
//! generated types (`metrics.rs`) would write for the same message, without
//! building one per sample. A test decodes what these write with the
//! generated types (`super::tests`).
//!
//! Field numbers are those of `proto/metrics.proto`
//! (`io.prometheus.client`); a field is written as its key (number and
//! wire type, a varint) then its value. Repeated scalar fields are written
//! unpacked, one key per element, as `metrics.proto` (proto2, no `packed`
//! option) declares them and as client_golang writes them.

/// Wire type of varints (integers, enums, booleans).
const VARINT: u8 = 0;
/// Wire type of 64-bit values (doubles).
const FIXED64: u8 = 1;
/// Wire type of length-delimited values (strings, messages).
const LEN: u8 = 2;

/// The key of field `number` of wire type `wire` (every field here has a
/// number below 16, so the key is one byte).
const fn key(number: u8, wire: u8) -> u8 {
    number << 3 | wire
}

/// `MetricFamily` fields.
pub(crate) mod family {
    use super::{key, LEN, VARINT};
    pub(crate) const NAME: u8 = key(1, LEN);
    pub(crate) const HELP: u8 = key(2, LEN);
    pub(crate) const TYPE: u8 = key(3, VARINT);
    pub(crate) const METRIC: u8 = key(4, LEN);
}

/// `Metric` fields.
pub(crate) mod metric {
    use super::{key, LEN};
    pub(crate) const LABEL: u8 = key(1, LEN);
    pub(crate) const GAUGE: u8 = key(2, LEN);
    pub(crate) const COUNTER: u8 = key(3, LEN);
    pub(crate) const SUMMARY: u8 = key(4, LEN);
    pub(crate) const HISTOGRAM: u8 = key(7, LEN);
}

/// `LabelPair`, `Gauge`, `Counter`, `Quantile`, `Summary`, `Bucket`,
/// `BucketSpan` and `Timestamp` fields.
pub(crate) mod field {
    use super::{key, FIXED64, LEN, VARINT};
    /// `LabelPair.name`, `.value`.
    pub(crate) const LABEL_NAME: u8 = key(1, LEN);
    pub(crate) const LABEL_VALUE: u8 = key(2, LEN);
    /// `Gauge.value`, `Counter.value`.
    pub(crate) const VALUE: u8 = key(1, FIXED64);
    /// `Counter.created_timestamp`.
    pub(crate) const COUNTER_CREATED: u8 = key(3, LEN);
    /// `Quantile.quantile`, `.value`.
    pub(crate) const QUANTILE_Q: u8 = key(1, FIXED64);
    pub(crate) const QUANTILE_VALUE: u8 = key(2, FIXED64);
    /// `Summary.sample_count`, `.sample_sum`, `.quantile`,
    /// `.created_timestamp`.
    pub(crate) const SUMMARY_COUNT: u8 = key(1, VARINT);
    pub(crate) const SUMMARY_SUM: u8 = key(2, FIXED64);
    pub(crate) const SUMMARY_QUANTILE: u8 = key(3, LEN);
    pub(crate) const SUMMARY_CREATED: u8 = key(4, LEN);
    /// `Bucket.cumulative_count`, `.upper_bound`.
    pub(crate) const BUCKET_COUNT: u8 = key(1, VARINT);
    pub(crate) const BUCKET_BOUND: u8 = key(2, FIXED64);
    /// `BucketSpan.offset` (sint32), `.length`.
    pub(crate) const SPAN_OFFSET: u8 = key(1, VARINT);
    pub(crate) const SPAN_LENGTH: u8 = key(2, VARINT);
    /// `google.protobuf.Timestamp.seconds`, `.nanos`.
    pub(crate) const SECONDS: u8 = key(1, VARINT);
    pub(crate) const NANOS: u8 = key(2, VARINT);
}

/// `Histogram` fields (numbers 1 to 15; `created_timestamp` is 15).
pub(crate) mod histogram {
    use super::{key, FIXED64, LEN, VARINT};
    pub(crate) const SAMPLE_COUNT: u8 = key(1, VARINT);
    pub(crate) const SAMPLE_SUM: u8 = key(2, FIXED64);
    pub(crate) const BUCKET: u8 = key(3, LEN);
    pub(crate) const SCHEMA: u8 = key(5, VARINT);
    pub(crate) const ZERO_THRESHOLD: u8 = key(6, FIXED64);
    pub(crate) const ZERO_COUNT: u8 = key(7, VARINT);
    pub(crate) const NEGATIVE_SPAN: u8 = key(9, LEN);
    pub(crate) const NEGATIVE_DELTA: u8 = key(10, VARINT);
    pub(crate) const POSITIVE_SPAN: u8 = key(12, LEN);
    pub(crate) const POSITIVE_DELTA: u8 = key(13, VARINT);
    pub(crate) const CREATED: u8 = key(15, LEN);
}

/// Appends `v` as a varint: seven bits a byte, low bits first.
#[inline]
pub(crate) fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes [`varint`] writes for `v`.
#[inline]
pub(crate) fn varint_len(v: u64) -> usize {
    // 1 byte per started 7 bits; 0 takes one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// `v` zigzag-encoded, as `sint32`/`sint64` fields are (small magnitudes of
/// either sign give small varints).
#[inline]
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Appends a varint field.
#[inline]
pub(crate) fn uint(out: &mut Vec<u8>, key: u8, v: u64) {
    out.push(key);
    varint(out, v);
}

/// Appends a double field.
#[inline]
pub(crate) fn double(out: &mut Vec<u8>, key: u8, v: f64) {
    out.push(key);
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a length-delimited field holding `bytes` (a string, or a
/// message already encoded).
#[inline]
pub(crate) fn bytes(out: &mut Vec<u8>, key: u8, bytes: &[u8]) {
    out.push(key);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a length-delimited field whose body `body` writes, given the
/// body's length in advance.
#[inline]
pub(crate) fn nested(out: &mut Vec<u8>, key: u8, len: usize, body: impl FnOnce(&mut Vec<u8>)) {
    out.push(key);
    varint(out, len as u64);
    let at = out.len();
    body(out);
    debug_assert_eq!(out.len() - at, len, "nested message length");
}

/// Appends a `LabelPair` field (of `Metric`) named `name` holding `value`.
pub(crate) fn label(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    let len = 2
        + varint_len(name.len() as u64)
        + name.len()
        + varint_len(value.len() as u64)
        + value.len();
    nested(out, metric::LABEL, len, |out| {
        bytes(out, field::LABEL_NAME, name);
        bytes(out, field::LABEL_VALUE, value);
    });
}

/// Appends a `google.protobuf.Timestamp` field for `secs` seconds and
/// `nanos` nanoseconds since the epoch.
pub(crate) fn timestamp(out: &mut Vec<u8>, key: u8, secs: u64, nanos: u32) {
    let len = 2 + varint_len(secs) + varint_len(u64::from(nanos));
    nested(out, key, len, |out| {
        uint(out, field::SECONDS, secs);
        uint(out, field::NANOS, u64::from(nanos));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_as_long_as_said() {
        for v in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut out = Vec::new();
            varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v), "{v}");
        }
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
    }

    #[test]
    fn zigzag_interleaves_signs() {
        assert_eq!(zigzag(0), 0);
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag(-2), 3);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
    }
}
