//! [`ParseError`]: why a statsd line was rejected.
//!
//! The error is `Copy` and holds no heap data, so rejecting a line on the hot
//! path costs nothing. Each variant has a stable snake_case label,
//! [`ParseError::reason`], meant for the `reason` label of a rejection counter;
//! [`ParseError::ALL_REASONS`] lists them all so the daemon can register every
//! counter at 0 before the first bad line arrives. The `Display` text is for an
//! operator reading a log: what was wrong and what a valid line looks like.
//!
//! Lines that are understood but deliberately not turned into samples (events,
//! service checks) are not errors; see [`SkipKind`](super::SkipKind).

use super::{MAX_NAME_LEN, MAX_TAGS, MAX_TAG_KEY_LEN, MAX_TAG_VALUE_LEN, MAX_VALUES};

/// Why one statsd line was rejected. The whole line is dropped; other lines
/// of the same datagram are unaffected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// No `:` between the name and the value, or nothing usable at all.
    #[error("malformed line: expected `name:value|type`, found no `:` after the name")]
    MalformedLine,
    /// The line is not valid UTF-8.
    #[error("line is not valid UTF-8")]
    InvalidUtf8,
    /// The metric name (without its embedded tags) is empty.
    #[error("empty metric name: the line starts with `:` or name-embedded tags")]
    EmptyName,
    /// The metric name is longer than [`MAX_NAME_LEN`] bytes.
    #[error("metric name longer than {MAX_NAME_LEN} bytes")]
    NameTooLong,
    /// The metric name contains a control character (including tab and a
    /// stray carriage return).
    #[error("metric name contains a control character")]
    InvalidName,
    /// No `|type` field after the value.
    #[error("missing metric type: expected `|c`, `|g`, `|ms`, `|h`, `|d` or `|s` after the value")]
    MissingType,
    /// The type field is not one of `c`, `g`, `ms`, `h`, `d`, `s` (or `m`).
    #[error("unknown metric type: expected one of c, g, ms, h, d, s, m")]
    UnknownType,
    /// A value is empty (`name:|c`, or an empty slot in `name:1::2|d`).
    #[error("missing value: nothing between `:` and the next `:` or `|`")]
    MissingValue,
    /// A value is not a decimal number.
    #[error("malformed value: not a decimal number (set members may be any text)")]
    MalformedValue,
    /// A value is NaN, infinite, or overflows `f64` (e.g. `1e999`).
    #[error("value is NaN, infinite or too large for a 64-bit float")]
    NonFiniteValue,
    /// More than [`MAX_VALUES`] `:`-separated values on one line.
    #[error("more than {MAX_VALUES} values on one line")]
    TooManyValues,
    /// Several values on a gauge line (`g:1:2|g`); whether each would be a
    /// set or a delta is ambiguous, so the line is refused.
    #[error("several values on a gauge line; send one gauge value per line")]
    MultiValueGauge,
    /// The `@` field is not a number in [`MIN_SAMPLE_RATE`](super::MIN_SAMPLE_RATE)..=1.
    #[error(
        "invalid sample rate: `@` must be followed by a number in [0.000001, 1], e.g. `|@0.1`"
    )]
    InvalidSampleRate,
    /// A tag is malformed: empty key, control character, a name-embedded tag
    /// without `=`, a SignalFx `[` never closed by a `]` (or, from the plain
    /// iterator, a SignalFx block in the middle of the name: see
    /// `Lines::next_with_room`).
    #[error("malformed tag: expected `|#key:value,bare` or name tags `name,k=v` / `name#k=v` / `name[k=v]`")]
    MalformedTag,
    /// A tag key is longer than [`MAX_TAG_KEY_LEN`] or a tag value longer than
    /// [`MAX_TAG_VALUE_LEN`] bytes.
    #[error("tag key longer than {MAX_TAG_KEY_LEN} bytes or tag value longer than {MAX_TAG_VALUE_LEN} bytes")]
    TagTooLong,
    /// More than [`MAX_TAGS`] tags (name-embedded and `|#` together).
    #[error("more than {MAX_TAGS} tags on one line")]
    TooManyTags,
    /// The `|T` field is not a whole number of seconds.
    #[error("malformed timestamp: `|T` must be followed by whole Unix seconds")]
    MalformedTimestamp,
    /// A field that may appear once (`|@`, `|#`, `|T`) appears twice.
    #[error("duplicate `|@`, `|#` or `|T` field")]
    DuplicateField,
    /// statsd_exporter's mode: name tags (`name,k=v`, `name#k=v`,
    /// `name[k=v]`) and DogStatsD tags (`|#k:v`) on one line.
    #[error("name tags and `|#` tags on one line (statsd_exporter's mode refuses mixed tag styles, as statsd_exporter does)")]
    MixedTagStyles,
    /// statsd_exporter's mode: several values on a counter line.
    #[error("several values on a counter line (statsd_exporter's mode refuses DogStatsD value packing for counters, as statsd_exporter does)")]
    PackedCounter,
    /// statsd_exporter's mode: an empty, unknown or malformed field after
    /// the type (`foo:1|c|`, `|c` without an id, `|extra:x`).
    #[error("an empty, unknown or malformed `|` field (statsd_exporter's mode reads only `|@`, `|#`, `|c:` and `|T`, as statsd_exporter does)")]
    MalformedField,
}

impl ParseError {
    /// Every rejection reason label, in declaration order. Register one
    /// counter per entry at startup so all series exist from the first scrape.
    pub const ALL_REASONS: [&'static str; 21] = [
        "malformed_line",
        "invalid_utf8",
        "empty_name",
        "name_too_long",
        "invalid_name",
        "missing_type",
        "unknown_type",
        "missing_value",
        "malformed_value",
        "non_finite_value",
        "too_many_values",
        "multi_value_gauge",
        "invalid_sample_rate",
        "malformed_tag",
        "tag_too_long",
        "too_many_tags",
        "malformed_timestamp",
        "duplicate_field",
        "mixed_tag_styles",
        "packed_counter",
        "malformed_field",
    ];

    /// The stable snake_case label for a rejection counter. Labels never
    /// change once released; new ones may be added.
    #[must_use]
    pub const fn reason(self) -> &'static str {
        match self {
            ParseError::MalformedLine => "malformed_line",
            ParseError::InvalidUtf8 => "invalid_utf8",
            ParseError::EmptyName => "empty_name",
            ParseError::NameTooLong => "name_too_long",
            ParseError::InvalidName => "invalid_name",
            ParseError::MissingType => "missing_type",
            ParseError::UnknownType => "unknown_type",
            ParseError::MissingValue => "missing_value",
            ParseError::MalformedValue => "malformed_value",
            ParseError::NonFiniteValue => "non_finite_value",
            ParseError::TooManyValues => "too_many_values",
            ParseError::MultiValueGauge => "multi_value_gauge",
            ParseError::InvalidSampleRate => "invalid_sample_rate",
            ParseError::MalformedTag => "malformed_tag",
            ParseError::TagTooLong => "tag_too_long",
            ParseError::TooManyTags => "too_many_tags",
            ParseError::MalformedTimestamp => "malformed_timestamp",
            ParseError::DuplicateField => "duplicate_field",
            ParseError::MixedTagStyles => "mixed_tag_styles",
            ParseError::PackedCounter => "packed_counter",
            ParseError::MalformedField => "malformed_field",
        }
    }
}

/// Why one sample of a JSON ingest body (`POST /api/v1/ingest`,
/// `application/json`) was rejected before it became a statsd line. A sample
/// that does become a line is then checked by the parser like any other and
/// rejected, if it must be, with a [`ParseError`] (`unknown_type`,
/// `non_finite_value`, `invalid_sample_rate`, ...). Same contract as
/// [`ParseError`]: `Copy`, no heap, one stable label per variant
/// ([`JsonSampleError::reason`]), all listed in
/// [`JsonSampleError::ALL_REASONS`]; the daemon counts these in the same
/// rejection counter, next to the parser's reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum JsonSampleError {
    /// The item is not a sample object: not an object at all, a field
    /// missing or unknown, or a field of the wrong JSON type (`"value": true`,
    /// `"name": 5`, a tag value that is not a string).
    #[error("a sample is an object {{\"name\": string, \"type\": string, \"value\": number or string, \"sample_rate\": number (optional), \"tags\": {{string: string}} (optional)}}")]
    BadJsonSample,
    /// A name, string value or tag holds a character that statsd text
    /// reserves (`:` `|` `#` `,` `[` in a name, `|` in a value, `,` `|` `:`
    /// in a tag key, `,` `|` in a tag value, or a newline anywhere).
    #[error("a character statsd reserves: the name may not contain ':', '|', '#', ',' or '['; the value not '|'; tag keys not ',', '|' or ':'; tag values not ',' or '|'; none a newline")]
    ReservedCharacter,
}

impl JsonSampleError {
    /// Every label, in declaration order (after [`ParseError::ALL_REASONS`]
    /// in the rejection counter).
    pub const ALL_REASONS: [&'static str; 2] = ["bad_json_sample", "reserved_character"];

    /// The stable snake_case label for the rejection counter.
    #[must_use]
    pub const fn reason(self) -> &'static str {
        match self {
            JsonSampleError::BadJsonSample => "bad_json_sample",
            JsonSampleError::ReservedCharacter => "reserved_character",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ParseError; 21] = [
        ParseError::MalformedLine,
        ParseError::InvalidUtf8,
        ParseError::EmptyName,
        ParseError::NameTooLong,
        ParseError::InvalidName,
        ParseError::MissingType,
        ParseError::UnknownType,
        ParseError::MissingValue,
        ParseError::MalformedValue,
        ParseError::NonFiniteValue,
        ParseError::TooManyValues,
        ParseError::MultiValueGauge,
        ParseError::InvalidSampleRate,
        ParseError::MalformedTag,
        ParseError::TagTooLong,
        ParseError::TooManyTags,
        ParseError::MalformedTimestamp,
        ParseError::DuplicateField,
        ParseError::MixedTagStyles,
        ParseError::PackedCounter,
        ParseError::MalformedField,
    ];

    #[test]
    fn all_reasons_lists_every_variant_in_order() {
        let labels: Vec<&str> = ALL.iter().map(|e| e.reason()).collect();
        assert_eq!(labels, ParseError::ALL_REASONS);
    }

    #[test]
    fn reasons_are_unique_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for r in ParseError::ALL_REASONS {
            assert!(seen.insert(r), "duplicate reason {r}");
            assert!(
                r.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{r} is not snake_case"
            );
        }
    }

    #[test]
    fn display_explains_and_names_limits() {
        for e in ALL {
            assert!(!e.to_string().is_empty());
        }
        assert!(ParseError::NameTooLong.to_string().contains("256"));
        assert!(ParseError::InvalidSampleRate.to_string().contains("@"));
    }

    #[test]
    fn json_sample_reasons_list_every_variant_and_never_repeat_a_parser_reason() {
        let labels = [
            JsonSampleError::BadJsonSample.reason(),
            JsonSampleError::ReservedCharacter.reason(),
        ];
        assert_eq!(labels, JsonSampleError::ALL_REASONS);
        for r in JsonSampleError::ALL_REASONS {
            assert!(
                !ParseError::ALL_REASONS.contains(&r),
                "{r} is a parser reason"
            );
            assert!(
                r.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{r}"
            );
        }
        assert_eq!(std::mem::size_of::<JsonSampleError>(), 1);
    }

    #[test]
    fn error_is_small_and_copy() {
        fn assert_copy<T: Copy>() {}
        assert_copy::<ParseError>();
        assert_eq!(std::mem::size_of::<ParseError>(), 1);
    }
}
