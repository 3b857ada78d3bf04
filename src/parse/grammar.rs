//! The statsd / DogStatsD grammar over bytes: a datagram to lines, a line
//! to a [`Sample`] (or a skip, or a [`ParseError`]).
//!
//! ```text
//! line     = name-part ":" values "|" type *( "|" field )
//! name-part= name | name "," ntags | name "#" ntags | [ name ] "[" ntags "]" [ name ]
//! ntags    = k "=" v *( "," k "=" v )
//! values   = value *( ":" value )          ; a set's member is the whole section
//! type     = "c" | "g" | "ms" | "h" | "d" | "s" | "m"
//! field    = "@" rate | "#" dtag *( "," dtag ) | "T" digits | anything-else (ignored)
//! dtag     = [ "#" ] key [ ":" value ]     ; split on the first ':' only
//! ```
//!
//! The name-tag forms of `name-part` and the `#` field exist only for the
//! [`TagStyles`] that are on; otherwise their text is name text, or an
//! ignored field. Those forms are read in `tags.rs`.
//!
//! Everything here borrows from the input and allocates nothing, but for
//! [`Lines::next_with_room`] on a line with a SignalFx block in the middle of
//! its name, which writes the joined line into the caller's `String`. A line is
//! validated completely before a [`Sample`] is returned, so a caller never
//! applies half a line. See the [module docs](super) for the decisions.

use super::error::ParseError;
use super::lex::{fast_decimal, has_control, split2, split_or_all, trim, trim_str};
use super::tags::{
    check_tags, join_signalfx, signalfx_middle, split_name, split_name_with, TagStyles, NAME_STYLES,
};
use super::{
    GaugeOp, Line, MetricKind, Sample, SkipKind, MAX_NAME_LEN, MAX_VALUES, MIN_SAMPLE_RATE,
};

/// How the parser reads lines; a small `Copy` value passed by value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ParseOptions {
    /// The tag syntaxes read (default: all).
    pub tag_styles: TagStyles,
    /// statsd_exporter's compatibility mode, where rollstat's own reading
    /// of a malformed name differs: a name with one SignalFx bracket and
    /// not the other (`[k=v,k2=v2name`, `k=v]name`) is the whole text, no
    /// name tags read; a name tag without `=` (`foo.[tag1]test`,
    /// `foo,tag1`) is a tag without a value (which that mode leaves out,
    /// `series::Valueless::Drop`). Off: both are `malformed_tag`.
    pub statsd_exporter: bool,
}

impl ParseOptions {
    /// These options with `styles` as the tag styles.
    #[must_use]
    pub const fn tag_styles(mut self, styles: TagStyles) -> ParseOptions {
        self.tag_styles = styles;
        self
    }

    /// These options with [`statsd_exporter`](Self::statsd_exporter)'s
    /// mode `on`.
    #[must_use]
    pub const fn statsd_exporter(mut self, on: bool) -> ParseOptions {
        self.statsd_exporter = on;
        self
    }
}

/// Splits a datagram into lines and parses each one, reading every tag
/// style. See the [module docs](super) for the grammar.
#[must_use]
pub fn parse_datagram(buf: &[u8]) -> Lines<'_> {
    parse_datagram_with(buf, ParseOptions::default())
}

/// [`parse_datagram`] with options (which tag styles to read).
#[must_use]
pub fn parse_datagram_with(buf: &[u8], opts: ParseOptions) -> Lines<'_> {
    Lines::new(buf, opts)
}

/// Iterator over the lines of a datagram: one item per non-empty line.
///
/// A datagram that is valid UTF-8 as a whole (the usual case) is checked
/// once, with the word-at-a-time scan that long input gets, and its lines
/// are then read as text; a datagram with an invalid byte anywhere is
/// checked line by line, so that only the bad line is refused
/// (`invalid_utf8`). Either way each line gives the same result.
#[derive(Clone, Debug)]
pub struct Lines<'a> {
    rest: &'a [u8],
    /// `rest` as text, when the whole datagram was valid UTF-8.
    text: Option<&'a str>,
    opts: ParseOptions,
}

impl<'a> Lines<'a> {
    fn new(buf: &'a [u8], opts: ParseOptions) -> Lines<'a> {
        Lines {
            rest: buf,
            text: std::str::from_utf8(buf).ok(),
            opts,
        }
    }
}

impl<'a> Lines<'a> {
    /// The next non-empty line, trimmed, with what it parses to.
    #[inline]
    fn next_line(&mut self) -> Option<(&'a [u8], Result<Line<'a>, ParseError>)> {
        if let Some(text) = &mut self.text {
            // Valid text: split at '\n' (ASCII, so every piece is text).
            loop {
                if text.is_empty() {
                    return None;
                }
                let (line, rest) = match memchr::memchr(b'\n', text.as_bytes()) {
                    Some(i) => (&text[..i], &text[i + 1..]),
                    None => (*text, ""),
                };
                *text = rest;
                let line = trim_str(line);
                if !line.is_empty() {
                    return Some((line.as_bytes(), parse_text(line, self.opts)));
                }
            }
        }
        loop {
            if self.rest.is_empty() {
                return None;
            }
            let (line, rest) = match memchr::memchr(b'\n', self.rest) {
                Some(i) => self.rest.split_at(i),
                None => (self.rest, &self.rest[self.rest.len()..]),
            };
            // Drop the '\n' itself (when there was one).
            self.rest = rest.get(1..).unwrap_or(rest);
            let line = trim(line);
            if !line.is_empty() {
                return Some((line, parse_trimmed(line, self.opts)));
            }
        }
    }

    /// The next line like [`Iterator::next`], and also reads a line whose
    /// SignalFx block sits in the middle of its name (`foo.[k=v]test:1|c`,
    /// the name `foo.test`), which the iterator refuses as `malformed_tag`
    /// because that name is not one slice of the input: the joined line is
    /// written into `room`, and the sample then borrows from it. `room` is
    /// touched (and may grow, to one line's length) only for such a line, so
    /// the daemon passes one `String::new()` per datagram and allocates
    /// nothing for every other line.
    ///
    /// ```
    /// use rollstat::parse::{parse_datagram, Line};
    ///
    /// let mut room = String::new();
    /// let mut lines = parse_datagram(b"foo.[k=v]test:1|c");
    /// let Some(Ok(Line::Sample(s))) = lines.next_with_room(&mut room) else { panic!() };
    /// assert_eq!(s.name, "foo.test");
    /// assert_eq!(s.tags().collect::<Vec<_>>(), [("k", "v")]);
    /// ```
    pub fn next_with_room<'s>(
        &mut self,
        room: &'s mut String,
    ) -> Option<Result<Line<'s>, ParseError>>
    where
        'a: 's,
    {
        let (line, r) = self.next_line()?;
        if !matches!(r, Err(ParseError::MalformedTag)) {
            return Some(r);
        }
        Some(rejoin(line, self.opts, room))
    }
}

/// A line refused as `malformed_tag`: parsed again with its middle
/// SignalFx block moved to the front of the name, if it has one.
#[cold]
#[inline(never)]
fn rejoin<'s>(
    line: &[u8],
    opts: ParseOptions,
    room: &'s mut String,
) -> Result<Line<'s>, ParseError> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Err(ParseError::MalformedTag);
    };
    let Some((open, close)) = signalfx_middle(text, opts.tag_styles) else {
        return Err(ParseError::MalformedTag);
    };
    join_signalfx(text, open, close, room);
    parse_text(room, opts)
}

impl<'a> Iterator for Lines<'a> {
    type Item = Result<Line<'a>, ParseError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.next_line().map(|(_, r)| r)
    }
}

impl std::iter::FusedIterator for Lines<'_> {}

/// Parses one line, reading every tag style. Surrounding spaces, tabs, `\r`
/// and `\n` are trimmed, so a line may keep its terminator. An empty line is
/// [`ParseError::MalformedLine`] here; [`parse_datagram`](super::parse_datagram)
/// skips empty lines instead.
pub fn parse_line(line: &[u8]) -> Result<Line<'_>, ParseError> {
    parse_line_with(line, ParseOptions::default())
}

/// [`parse_line`] with options (which tag styles to read).
pub fn parse_line_with(line: &[u8], opts: ParseOptions) -> Result<Line<'_>, ParseError> {
    let line = trim(line);
    if line.is_empty() {
        return Err(ParseError::MalformedLine);
    }
    parse_trimmed(line, opts)
}

/// Parses a non-empty, trimmed line.
fn parse_trimmed(line: &[u8], opts: ParseOptions) -> Result<Line<'_>, ParseError> {
    if let Some(skip) = skipped(line) {
        return Ok(Line::Skipped(skip));
    }
    let line = std::str::from_utf8(line).map_err(|_| ParseError::InvalidUtf8)?;
    parse_sample(line, opts).map(Line::Sample)
}

/// [`parse_trimmed`] for a line already known to be text.
#[inline]
fn parse_text(line: &str, opts: ParseOptions) -> Result<Line<'_>, ParseError> {
    if let Some(skip) = skipped(line.as_bytes()) {
        return Ok(Line::Skipped(skip));
    }
    parse_sample(line, opts).map(Line::Sample)
}

/// Whether `name` has a SignalFx `[` and no `]`, or a `]` and no `[`, with
/// SignalFx on: statsd_exporter then reads no name tags at all.
fn lone_bracket(name: &str, styles: TagStyles) -> bool {
    styles.contains(TagStyles::SIGNALFX) && name.contains('[') != name.contains(']')
}

/// An event or a service check, recognised by its prefix.
#[inline]
fn skipped(line: &[u8]) -> Option<SkipKind> {
    match line {
        [b'_', b'e', b'{', ..] => Some(SkipKind::Event),
        [b'_', b's', b'c', b'|', ..] => Some(SkipKind::ServiceCheck),
        _ => None,
    }
}

/// Whether byte `b` may stand in a plain metric name: not a delimiter the
/// grammar or a name tag style reads (`:` `|` `,` `#` `[`), not a control
/// character, ASCII.
const PLAIN_NAME: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0x20;
    while b < 0x7f {
        t[b] = !matches!(b as u8, b':' | b'|' | b',' | b'#' | b'[');
        b += 1;
    }
    t
};

/// The common line, read in one pass: a plain ASCII name (no name tags, no
/// control character, at most [`MAX_NAME_LEN`] bytes), one plain decimal
/// value and a known type other than a set, then any fields. `None` for
/// any other line, which [`parse_general`] reads; that includes every line
/// with a fault before its fields, so faults keep their order. The result
/// is the one [`parse_general`] gives.
#[inline]
fn parse_plain(line: &str, opts: ParseOptions) -> Option<Result<Sample<'_>, ParseError>> {
    let b = line.as_bytes();
    let colon = b.iter().position(|&c| !PLAIN_NAME[usize::from(c)])?;
    if colon == 0 || colon > MAX_NAME_LEN || b[colon] != b':' {
        return None;
    }
    let after = &b[colon + 1..];
    let pipe = colon + 1 + after.iter().position(|&c| c == b'|')?;
    let raw_values = &line[colon + 1..pipe];
    // A set's member is text, and several values need the general path.
    let first = fast_decimal(raw_values.as_bytes())?;
    let tail = &line[pipe + 1..];
    let (type_field, fields) = split_or_all(tail, b'|');
    let kind = MetricKind::from_type(type_field.as_bytes())?;
    let gauge_op = match kind {
        MetricKind::Set => return None,
        MetricKind::Gauge => Some(match raw_values.as_bytes()[0] {
            b'+' | b'-' => GaugeOp::Delta,
            _ => GaugeOp::Set,
        }),
        _ => None,
    };
    let head = Head {
        name: &line[..colon],
        kind,
        gauge_op,
        first,
        raw_values,
        n_values: 1,
        name_tags: "",
        n_tags: 0,
    };
    Some(finish(head, fields, opts))
}

/// What a line says before its optional fields.
struct Head<'a> {
    name: &'a str,
    kind: MetricKind,
    gauge_op: Option<GaugeOp>,
    first: f64,
    raw_values: &'a str,
    n_values: usize,
    name_tags: &'a str,
    n_tags: usize,
}

#[inline]
fn parse_sample(line: &str, opts: ParseOptions) -> Result<Sample<'_>, ParseError> {
    // An empty last field (`foo:1|c|`), which the field reader cannot see.
    if opts.statsd_exporter && line.ends_with('|') {
        return Err(ParseError::MalformedField);
    }
    match parse_plain(line, opts) {
        Some(r) => r,
        None => parse_general(line, opts),
    }
}

/// Any line, every fault in its order.
#[inline(never)]
fn parse_general(line: &str, opts: ParseOptions) -> Result<Sample<'_>, ParseError> {
    let styles = opts.tag_styles;
    let (head, fields) = match split2(line, b'|') {
        Some((h, f)) => (h, Some(f)),
        None => (line, None),
    };
    let (name_part, raw_values) = split2(head, b':').ok_or(ParseError::MalformedLine)?;
    let fields = fields.ok_or(ParseError::MissingType)?;
    let (type_field, fields) = split_or_all(fields, b'|');
    if type_field.is_empty() {
        return Err(ParseError::MissingType);
    }
    let kind = MetricKind::from_type(type_field.as_bytes()).ok_or(ParseError::UnknownType)?;

    let (name, name_tags) = if opts.statsd_exporter && lone_bracket(name_part, styles) {
        (name_part, "")
    } else if styles.contains(NAME_STYLES) {
        split_name(name_part)?
    } else {
        split_name_with(name_part, styles)?
    };
    if name.is_empty() {
        return Err(ParseError::EmptyName);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(ParseError::NameTooLong);
    }
    if has_control(name) {
        return Err(ParseError::InvalidName);
    }
    let n_tags = check_tags(name_tags, b'=', !opts.statsd_exporter, 0)?;

    // Values.
    let mut first = 0.0;
    let mut n_values = 1;
    let mut gauge_op = None;
    if kind == MetricKind::Set {
        if raw_values.is_empty() {
            return Err(ParseError::MissingValue);
        }
        if has_control(raw_values) {
            return Err(ParseError::MalformedValue);
        }
    } else {
        if kind == MetricKind::Gauge {
            if raw_values.bytes().any(|b| b == b':') {
                return Err(ParseError::MultiValueGauge);
            }
            gauge_op = Some(match raw_values.as_bytes().first() {
                Some(b'+' | b'-') => GaugeOp::Delta,
                _ => GaugeOp::Set,
            });
        }
        let mut rest = raw_values;
        n_values = 0;
        loop {
            let (v, more) = match split2(rest, b':') {
                Some((v, r)) => (v, Some(r)),
                None => (rest, None),
            };
            n_values += 1;
            if n_values > MAX_VALUES {
                return Err(ParseError::TooManyValues);
            }
            let x = parse_value(v)?;
            if n_values == 1 {
                first = x;
            }
            match more {
                Some(r) => rest = r,
                None => break,
            }
        }
    }

    if opts.statsd_exporter && kind == MetricKind::Counter && n_values > 1 {
        return Err(ParseError::PackedCounter);
    }
    let head = Head {
        name,
        kind,
        gauge_op,
        first,
        raw_values,
        n_values,
        name_tags,
        n_tags,
    };
    finish(head, fields, opts)
}

/// Reads the optional fields after the type and builds the sample.
#[inline]
fn finish<'a>(h: Head<'a>, fields: &'a str, opts: ParseOptions) -> Result<Sample<'a>, ParseError> {
    let styles = opts.tag_styles;
    // Optional fields, any order.
    let mut sample_rate = None;
    let mut dog_tags = None;
    let mut timestamp = None;
    let mut container = "";
    let mut rest = fields;
    while !rest.is_empty() {
        let (f, more) = split_or_all(rest, b'|');
        rest = more;
        if opts.statsd_exporter {
            match exporter_field(f, &mut container)? {
                Field::Rate(r) => {
                    if sample_rate.is_some() {
                        return Err(ParseError::DuplicateField);
                    }
                    sample_rate = Some(r);
                    continue;
                }
                Field::Done => continue,
                Field::Other => {}
            }
        }
        match f.as_bytes().first() {
            Some(b'@') => {
                if sample_rate.is_some() {
                    return Err(ParseError::DuplicateField);
                }
                sample_rate = Some(parse_rate(&f[1..])?);
            }
            Some(b'#') if styles.contains(TagStyles::DOGSTATSD) => {
                if dog_tags.is_some() {
                    return Err(ParseError::DuplicateField);
                }
                dog_tags = Some(&f[1..]);
            }
            Some(b'T') => {
                if timestamp.is_some() {
                    return Err(ParseError::DuplicateField);
                }
                timestamp = Some(parse_timestamp(&f[1..])?);
            }
            // Empty fields, container id `c:...`, external data `e:...`,
            // cardinality `card:...`, DogStatsD tags when that style is off,
            // and anything newer: ignored.
            _ => {}
        }
    }
    let dog_tags = dog_tags.unwrap_or("");
    if opts.statsd_exporter && h.n_tags > 0 && !dog_tags.is_empty() {
        return Err(ParseError::MixedTagStyles);
    }
    let mut n_tags = check_tags(dog_tags, b':', false, h.n_tags)?;
    if !container.is_empty() {
        n_tags += 1;
        if n_tags > crate::parse::MAX_TAGS {
            return Err(ParseError::TooManyTags);
        }
        if container.len() > crate::parse::MAX_TAG_VALUE_LEN {
            return Err(ParseError::TagTooLong);
        }
    }

    let sample_rate = sample_rate.unwrap_or(1.0);
    let weight = match h.kind {
        MetricKind::Gauge | MetricKind::Set => 1.0,
        _ => 1.0 / sample_rate,
    };
    Ok(Sample {
        name: h.name,
        kind: h.kind,
        sample_rate,
        timestamp,
        weight,
        gauge_op: h.gauge_op,
        first: h.first,
        raw_values: h.raw_values,
        n_values: h.n_values,
        name_tags: h.name_tags,
        dog_tags,
        container,
        n_tags,
    })
}

/// A field after the type as statsd_exporter's mode reads it (where it
/// differs from rollstat's own reading).
enum Field {
    /// `@r`: the rate, or 1 where statsd_exporter counts an unreadable or
    /// zero rate and applies the line at 1.
    Rate(f64),
    /// Read already: `|c:id`, or `|T...`, which statsd_exporter drops
    /// unread.
    Done,
    /// Read as rollstat reads it (`|#...`).
    Other,
}

/// One field under statsd_exporter's rules (`pkg/line`): `@`, `#`, `c:`
/// (the container id, into `container`) and `T`; anything else, an empty
/// field or a `c` without an id refuses the line.
fn exporter_field<'a>(f: &'a str, container: &mut &'a str) -> Result<Field, ParseError> {
    match f.as_bytes().first() {
        Some(b'@') => Ok(Field::Rate(match parse_rate(&f[1..]) {
            Ok(r) => r,
            Err(_) if f[1..].parse::<f64>().is_ok_and(|r| r != 0.0) => {
                return Err(ParseError::InvalidSampleRate);
            }
            Err(_) => 1.0,
        })),
        Some(b'#') => Ok(Field::Other),
        Some(b'T') => Ok(Field::Done),
        Some(b'c') => match f.strip_prefix("c:") {
            Some(id) if !id.is_empty() => {
                *container = id;
                Ok(Field::Done)
            }
            _ => Err(ParseError::MalformedField),
        },
        _ => Err(ParseError::MalformedField),
    }
}

#[inline]
fn parse_value(v: &str) -> Result<f64, ParseError> {
    if v.is_empty() {
        return Err(ParseError::MissingValue);
    }
    if let Some(x) = fast_decimal(v.as_bytes()) {
        return Ok(x);
    }
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        // `nan`, `inf`, `infinity` (any case, any sign) and overflow (`1e999`).
        Ok(_) => Err(ParseError::NonFiniteValue),
        Err(_) => Err(ParseError::MalformedValue),
    }
}

fn parse_rate(s: &str) -> Result<f64, ParseError> {
    let parsed = match fast_decimal(s.as_bytes()) {
        Some(r) => Ok(r),
        None => s.parse::<f64>(),
    };
    match parsed {
        Ok(r) if (MIN_SAMPLE_RATE..=1.0).contains(&r) => Ok(r),
        _ => Err(ParseError::InvalidSampleRate),
    }
}

fn parse_timestamp(s: &str) -> Result<u64, ParseError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::MalformedTimestamp);
    }
    s.parse::<u64>().map_err(|_| ParseError::MalformedTimestamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::testing::{check, reject, rejects, sample, w};

    use MetricKind::*;

    #[test]
    fn python_statsd_lines_parse() {
        let cases = [
            ("app.req:1|c", w("app.req", Counter, &[1.0], 1.0, &[])),
            (
                "app.req:5|c|@0.999999",
                w("app.req", Counter, &[5.0], 0.999999, &[]),
            ),
            ("app.req:-1|c", w("app.req", Counter, &[-1.0], 1.0, &[])),
            (
                "app.queue.depth:42|g",
                w("app.queue.depth", Gauge, &[42.0], 1.0, &[]),
            ),
            ("g:1.5|g", w("g", Gauge, &[1.5], 1.0, &[])),
            (
                "app.queue.depth:-3|g",
                w("app.queue.depth", Gauge, &[-3.0], 1.0, &[]),
            ),
            ("g:+3|g", w("g", Gauge, &[3.0], 1.0, &[])),
            (
                "app.latency:12.500000|ms",
                w("app.latency", Timer, &[12.5], 1.0, &[]),
            ),
            ("t:0.000100|ms", w("t", Timer, &[0.0001], 1.0, &[])),
            ("big:1000000000000|c", w("big", Counter, &[1e12], 1.0, &[])),
            ("f:0.5|c", w("f", Counter, &[0.5], 1.0, &[])),
        ];
        for (line, want) in &cases {
            check(line, want);
        }
        assert_eq!(sample("app.users:alice|s").set_member(), Some("alice"));
    }

    #[test]
    fn python_datadog_lines_parse() {
        let cases = [
            (
                "app.req:1|c|#route:/api,code:200,env:test\n",
                w(
                    "app.req",
                    Counter,
                    &[1.0],
                    1.0,
                    &[("route", "/api"), ("code", "200"), ("env", "test")],
                ),
            ),
            (
                "app.req:2|c|@0.999999|#route:/api,env:test\n",
                w(
                    "app.req",
                    Counter,
                    &[2.0],
                    0.999999,
                    &[("route", "/api"), ("env", "test")],
                ),
            ),
            (
                "app.req:-1|c|#env:test\n",
                w("app.req", Counter, &[-1.0], 1.0, &[("env", "test")]),
            ),
            (
                "app.queue.depth:42|g|#q:main,env:test\n",
                w(
                    "app.queue.depth",
                    Gauge,
                    &[42.0],
                    1.0,
                    &[("q", "main"), ("env", "test")],
                ),
            ),
            (
                "app.latency:12.5|ms|#route:/api,env:test\n",
                w(
                    "app.latency",
                    Timer,
                    &[12.5],
                    1.0,
                    &[("route", "/api"), ("env", "test")],
                ),
            ),
            (
                "app.payload.bytes:512|h|#route:/api,env:test\n",
                w(
                    "app.payload.bytes",
                    Histogram,
                    &[512.0],
                    1.0,
                    &[("route", "/api"), ("env", "test")],
                ),
            ),
            (
                "app.latency.dist:0.0125|d|#route:/api,env:test\n",
                w(
                    "app.latency.dist",
                    Distribution,
                    &[0.0125],
                    1.0,
                    &[("route", "/api"), ("env", "test")],
                ),
            ),
            (
                "app.users:alice|s|#env:test\n",
                w("app.users", Set, &[], 1.0, &[("env", "test")]),
            ),
        ];
        for (line, want) in &cases {
            check(line, want);
        }
        assert_eq!(
            parse_line(b"_sc|app.up|0|#route:/api,env:test|m:ok\n"),
            Ok(Line::Skipped(SkipKind::ServiceCheck))
        );
        assert_eq!(
            parse_line(b"_e{6,13}:deploy|v1 rolled out|#route:/api,env:test\n"),
            Ok(Line::Skipped(SkipKind::Event))
        );
        let buffered = b"page.views:1|c|#env:prod\npage.views:1|c|#env:prod\npage.views:1|c|#env:prod\ntemp:21.5|g\n";
        let got: Vec<_> = parse_datagram(buffered).collect();
        assert_eq!(got.len(), 4);
        assert!(got.iter().all(Result::is_ok));
    }

    #[test]
    fn node_hot_shots_lines_parse() {
        let cases = [
            (
                "app.req:1|c|#env:test,route:/api,code:200",
                w(
                    "app.req",
                    Counter,
                    &[1.0],
                    1.0,
                    &[("env", "test"), ("route", "/api"), ("code", "200")],
                ),
            ),
            (
                "app.req:2|c|@0.999999|#env:test,route:/api",
                w(
                    "app.req",
                    Counter,
                    &[2.0],
                    0.999999,
                    &[("env", "test"), ("route", "/api")],
                ),
            ),
            (
                "app.queue.depth:-3|g|#env:test",
                w("app.queue.depth", Gauge, &[-3.0], 1.0, &[("env", "test")]),
            ),
            (
                "app.latency.dist:0.0125|d|#env:test,route:/api",
                w(
                    "app.latency.dist",
                    Distribution,
                    &[0.0125],
                    1.0,
                    &[("env", "test"), ("route", "/api")],
                ),
            ),
            // telegraf: true (InfluxDB name tags)
            (
                "app.req,env=test,route=/api,code=200:1|c",
                w(
                    "app.req",
                    Counter,
                    &[1.0],
                    1.0,
                    &[("env", "test"), ("route", "/api"), ("code", "200")],
                ),
            ),
            (
                "app.req,env=test,route=/api:2|c|@0.999999",
                w(
                    "app.req",
                    Counter,
                    &[2.0],
                    0.999999,
                    &[("env", "test"), ("route", "/api")],
                ),
            ),
            (
                "app.queue.depth,env=test:-3|g",
                w("app.queue.depth", Gauge, &[-3.0], 1.0, &[("env", "test")]),
            ),
            (
                "app.latency,env=test,route=/api:12.5|ms",
                w(
                    "app.latency",
                    Timer,
                    &[12.5],
                    1.0,
                    &[("env", "test"), ("route", "/api")],
                ),
            ),
            (
                "app.payload.bytes,env=test,route=/api:512|h",
                w(
                    "app.payload.bytes",
                    Histogram,
                    &[512.0],
                    1.0,
                    &[("env", "test"), ("route", "/api")],
                ),
            ),
            (
                "app.users,env=test:alice|s",
                w("app.users", Set, &[], 1.0, &[("env", "test")]),
            ),
        ];
        for (line, want) in &cases {
            check(line, want);
        }
        assert_eq!(
            parse_line(b"_sc|app.app.up|0|h:h1|#env:test,route:/api"),
            Ok(Line::Skipped(SkipKind::ServiceCheck))
        );
        assert_eq!(
            parse_line(b"_e{10,13}:app.deploy|v1 rolled out|#env:test,route:/api"),
            Ok(Line::Skipped(SkipKind::Event))
        );
    }

    #[test]
    fn rust_cadence_lines_parse() {
        let cases = [
            (
                "app.req:2|c|@0.5|#env:test",
                w("app.req", Counter, &[2.0], 0.5, &[("env", "test")]),
            ),
            (
                "app.ratio:0.25|g|#env:test",
                w("app.ratio", Gauge, &[0.25], 1.0, &[("env", "test")]),
            ),
            (
                "app.latency:12|ms|#env:test",
                w("app.latency", Timer, &[12.0], 1.0, &[("env", "test")]),
            ),
            (
                "app.users:7|s|#env:test",
                w("app.users", Set, &[], 1.0, &[("env", "test")]),
            ),
            (
                "app.hits:3|m|#env:test",
                w("app.hits", Counter, &[3.0], 1.0, &[("env", "test")]),
            ),
        ];
        for (line, want) in &cases {
            check(line, want);
        }
        assert_eq!(sample("app.users:7|s|#env:test").set_member(), Some("7"));
        assert_eq!(sample("app.req:2|c|@0.5|#env:test").weight(), 2.0);
    }

    #[test]
    fn line_terminators_and_empty_lines() {
        for dgram in [
            &b"a:1|c"[..],
            b"a:1|c\n",
            b"a:1|c\r\n",
            b"\n\na:1|c\n\n",
            b"\r\n a:1|c \r\n\r\n",
        ] {
            let got: Vec<_> = parse_datagram(dgram).collect();
            assert_eq!(got.len(), 1, "{dgram:?}");
            let Ok(Line::Sample(s)) = got[0] else {
                panic!("{dgram:?}")
            };
            assert_eq!((s.name, s.first_value()), ("a", 1.0));
        }
        for empty in [&b""[..], b"\n", b"\r\n\r\n", b"  \n\t\n"] {
            assert_eq!(parse_datagram(empty).count(), 0);
        }
        assert_eq!(parse_line(b""), Err(ParseError::MalformedLine));
        assert_eq!(parse_line(b"\r\n"), Err(ParseError::MalformedLine));
    }

    #[test]
    fn bad_line_between_good_ones_loses_nothing() {
        let got: Vec<_> = parse_datagram(b"a:1|c\nb:xyz|c\nc:2|g").collect();
        assert_eq!(got.len(), 3);
        assert!(matches!(got[0], Ok(Line::Sample(s)) if s.name == "a"));
        assert_eq!(got[1], Err(ParseError::MalformedValue));
        assert!(matches!(got[2], Ok(Line::Sample(s)) if s.name == "c"));
    }

    #[test]
    fn multi_value_lines() {
        check(
            "a:1:2:3|d",
            &w("a", Distribution, &[1.0, 2.0, 3.0], 1.0, &[]),
        );
        check(
            "a:1:2.5|ms|@0.5|#k:v",
            &w("a", Timer, &[1.0, 2.5], 0.5, &[("k", "v")]),
        );
        check("a:1:2|c", &w("a", Counter, &[1.0, 2.0], 1.0, &[]));
        check("a:1:2|h", &w("a", Histogram, &[1.0, 2.0], 1.0, &[]));
        assert_eq!(sample("a:1:2:3|d").values().len(), 3);
        // All values valid or nothing.
        assert_eq!(reject(b"a:1:x:3|d"), "malformed_value");
        assert_eq!(reject(b"a:1::3|d"), "missing_value");
        assert_eq!(reject(b"a:1:2:|d"), "missing_value");
        assert_eq!(reject(b"a:1:nan|d"), "non_finite_value");
        assert_eq!(reject(b"g:1:2|g"), "multi_value_gauge");
        // Sets keep the whole section as the member.
        assert_eq!(sample("ip:fe80::1|s").set_member(), Some("fe80::1"));
        assert_eq!(sample("ip:fe80::1|s").values().count(), 0);
        let max = format!("a:{}1|d", "1:".repeat(crate::parse::MAX_VALUES - 1));
        assert_eq!(sample(&max).values().count(), crate::parse::MAX_VALUES);
        let over = format!("a:{}1|d", "1:".repeat(crate::parse::MAX_VALUES));
        assert_eq!(reject(over.as_bytes()), "too_many_values");
    }

    #[test]
    fn gauge_sign_means_delta() {
        let cases = [
            ("g:3|g", GaugeOp::Set, 3.0),
            ("g:+3|g", GaugeOp::Delta, 3.0),
            ("g:-3|g", GaugeOp::Delta, -3.0),
            ("g:0|g", GaugeOp::Set, 0.0),
            ("g:-0|g", GaugeOp::Delta, 0.0),
            ("g:+1.5e2|g", GaugeOp::Delta, 150.0),
        ];
        for (line, op, v) in cases {
            let s = sample(line);
            assert_eq!((s.gauge_op(), s.first_value()), (Some(op), v), "{line}");
        }
        assert_eq!(sample("c:-3|c").gauge_op(), None);
        // Negative absolute gauge: 0 then -N.
        let ops: Vec<_> = parse_datagram(b"app.neg:0|g\napp.neg:-7|g")
            .map(|l| match l {
                Ok(Line::Sample(s)) => (s.gauge_op(), s.first_value()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            ops,
            [(Some(GaugeOp::Set), 0.0), (Some(GaugeOp::Delta), -7.0)]
        );
    }

    #[test]
    fn sample_rate_rules() {
        let s = sample("a:1|c|@0.1");
        assert_eq!((s.sample_rate, s.weight()), (0.1, 10.0));
        assert_eq!(sample("a:1|ms|@0.25").weight(), 4.0);
        assert_eq!(sample("a:1|c|@1").weight(), 1.0);
        assert_eq!(sample("a:1|c").weight(), 1.0);
        // Bounded: the smallest rate is a number, not a million replays.
        let tiny = sample("a:1|c|@0.000001");
        assert!((tiny.weight() - 1e6).abs() < 1e-6);
        assert_eq!(tiny.values().count(), 1);
        assert_eq!(sample("a:1|c|@1e-6").sample_rate, 1e-6);
        // Gauges and sets validate but ignore the rate.
        assert_eq!(sample("g:5|g|@0.5").weight(), 1.0);
        assert_eq!(sample("u:x|s|@0.5").weight(), 1.0);
        for bad in [
            &b"a:1|c|@0"[..],
            b"a:1|c|@0.0",
            b"a:1|c|@-0.5",
            b"a:1|c|@1.5",
            b"a:1|c|@2",
            b"a:1|c|@0.0000009",
            b"a:1|c|@1e-300",
            b"a:1|c|@abc",
            b"a:1|c|@",
            b"a:1|c|@nan",
            b"a:1|c|@inf",
            b"a:1|c|@ 0.5",
            b"g:1|g|@0",
        ] {
            rejects(bad, "invalid_sample_rate");
        }
    }

    #[test]
    fn non_finite_and_malformed_values_are_rejected() {
        for (line, reason) in [
            (&b"a:NaN|c"[..], "non_finite_value"),
            (b"a:nan|g", "non_finite_value"),
            (b"a:inf|ms", "non_finite_value"),
            (b"a:-inf|h", "non_finite_value"),
            (b"a:+Infinity|d", "non_finite_value"),
            (b"a:1e999|c", "non_finite_value"),
            (b"a:-1e999|g", "non_finite_value"),
            (b"a:|c", "missing_value"),
            (b"a:|s", "missing_value"),
            (b"a:abc|c", "malformed_value"),
            (b"a:1,5|c", "malformed_value"),
            (b"a:0x10|c", "malformed_value"),
            (b"a:1 |c", "malformed_value"),
            (b"a:--1|g", "malformed_value"),
            (b"a:1e|c", "malformed_value"),
        ] {
            rejects(line, reason);
        }
        // Underflow is fine (rounds to zero); so are the usual spellings.
        assert_eq!(sample("a:1e-999|c").first_value(), 0.0);
        assert_eq!(sample("a:.5|c").first_value(), 0.5);
        assert_eq!(sample("a:5.|c").first_value(), 5.0);
        assert_eq!(sample("a:1E3|c").first_value(), 1000.0);
    }

    #[test]
    fn structure_errors() {
        for (line, reason) in [
            (&b"a"[..], "malformed_line"),
            (b"a|c", "malformed_line"),
            (b"|c", "malformed_line"),
            (b"a:1", "missing_type"),
            (b"a:1|", "missing_type"),
            (b"a:1||@0.5", "missing_type"),
            (b"a:1|x", "unknown_type"),
            (b"a:1|C", "unknown_type"),
            (b"a:1|msx", "unknown_type"),
            (b"a:1|c:2|ms", "unknown_type"),
            (b":1|c", "empty_name"),
            (b",k=v:1|c", "empty_name"),
            (b"[k=v]:1|c", "empty_name"),
            (b"a:1|c|@0.5|@0.5", "duplicate_field"),
            (b"a:1|c|#a:b|#c:d", "duplicate_field"),
            (b"a:1|c|T1|T2", "duplicate_field"),
        ] {
            rejects(line, reason);
        }
    }

    #[test]
    fn names_utf8_and_control_characters() {
        assert_eq!(
            sample("caf\u{e9}.\u{65e5}\u{672c}:1|c").name,
            "caf\u{e9}.\u{65e5}\u{672c}"
        );
        assert_eq!(sample("a/b-c_d.e:1|c").name, "a/b-c_d.e");
        assert_eq!(sample("with space:1|c").name, "with space");
        assert_eq!(reject(b"a\xff:1|c"), "invalid_utf8");
        assert_eq!(reject(b"a:1|c|#k:\xc3"), "invalid_utf8");
        assert_eq!(reject(b"a,k=\xe2\x82:1|c"), "invalid_utf8");
        assert_eq!(reject(b"a\x00b:1|c"), "invalid_name");
        assert_eq!(reject(b"a\rb:1|c"), "invalid_name");
        assert_eq!(reject(b"a\x7f:1|c"), "invalid_name");
        assert_eq!(reject(b"a:b\x01|s"), "malformed_value");
        // A multibyte prefix is an error, not a panic (vector's regression).
        assert_eq!(
            reject("\u{e9}:1|g|@\u{e9}".as_bytes()),
            "invalid_sample_rate"
        );
        assert_eq!(reject("a:\u{e9}1|g".as_bytes()), "malformed_value");
    }

    #[test]
    fn length_and_count_limits() {
        use crate::parse::{MAX_NAME_LEN, MAX_TAGS, MAX_TAG_KEY_LEN, MAX_TAG_VALUE_LEN};
        let ok_name = "n".repeat(MAX_NAME_LEN);
        assert_eq!(sample(&format!("{ok_name}:1|c")).name.len(), MAX_NAME_LEN);
        assert_eq!(
            reject(format!("{ok_name}x:1|c").as_bytes()),
            "name_too_long"
        );
        // Limit is in bytes: 129 two-byte characters are 258 bytes.
        assert_eq!(
            reject(format!("{}:1|c", "\u{e9}".repeat(129)).as_bytes()),
            "name_too_long"
        );

        let k = "k".repeat(MAX_TAG_KEY_LEN);
        let v = "v".repeat(MAX_TAG_VALUE_LEN);
        assert_eq!(
            sample(&format!("a:1|c|#{k}:{v}")).tags().next(),
            Some((&k[..], &v[..]))
        );
        assert_eq!(reject(format!("a:1|c|#{k}k:v").as_bytes()), "tag_too_long");
        assert_eq!(reject(format!("a:1|c|#k:{v}v").as_bytes()), "tag_too_long");
        assert_eq!(reject(format!("a,{k}k=v:1|c").as_bytes()), "tag_too_long");
        assert_eq!(reject(format!("a#k={v}v:1|c").as_bytes()), "tag_too_long");
        assert_eq!(reject(format!("a:1|c|#{k}k").as_bytes()), "tag_too_long");

        let tags = |n: usize| {
            (0..n)
                .map(|i| format!("t{i}:x"))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(
            sample(&format!("a:1|c|#{}", tags(MAX_TAGS))).tags().count(),
            MAX_TAGS
        );
        assert_eq!(
            reject(format!("a:1|c|#{}", tags(MAX_TAGS + 1)).as_bytes()),
            "too_many_tags"
        );
        // Name tags and DogStatsD tags share the budget.
        let line = format!("a,x=y:1|c|#{}", tags(MAX_TAGS));
        assert_eq!(reject(line.as_bytes()), "too_many_tags");
    }

    #[test]
    fn extension_fields_tolerated() {
        let s = sample("a:1|c|c:83c0a99c0a54c0c187f461c7980e9b57f3f6a8b0c918c8d93df19a9de6f3fe1d");
        assert_eq!((s.name, s.first_value(), s.tags().count()), ("a", 1.0, 0));
        let s = sample("a:1|c|#k:v|c:ci-1234|T1656581400");
        assert_eq!((s.timestamp, s.tags().count()), (Some(1_656_581_400), 1));
        assert_eq!(sample("a:1|g|T1656581400").timestamp, Some(1_656_581_400));
        assert_eq!(sample("a:1|c").timestamp, None);
        // Unknown fields, external data, cardinality, empty fields: ignored.
        for line in [
            "a:1|c|x:whatever",
            "a:1|c|e:it-false,cn-x|card:low",
            "a:1|c||",
            "a:1|c|zzz|#k:v",
        ] {
            assert_eq!(sample(line).first_value(), 1.0, "{line}");
        }
        for bad in [
            &b"a:1|c|T"[..],
            b"a:1|c|Tabc",
            b"a:1|c|T-1",
            b"a:1|c|T+1",
            b"a:1|c|T99999999999999999999",
        ] {
            rejects(bad, "malformed_timestamp");
        }
    }

    #[test]
    fn events_and_service_checks_are_skipped_not_errors() {
        let got: Vec<_> =
            parse_datagram(b"_e{5,4}:title|text\na:1|c\n_sc|name|0\n_e{bad\n").collect();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], Ok(Line::Skipped(SkipKind::Event)));
        assert!(matches!(got[1], Ok(Line::Sample(_))));
        assert_eq!(got[2], Ok(Line::Skipped(SkipKind::ServiceCheck)));
        assert_eq!(got[3], Ok(Line::Skipped(SkipKind::Event)));
        assert_eq!(SkipKind::Event.reason(), "event");
        assert_eq!(SkipKind::ServiceCheck.reason(), "service_check");
        assert_eq!(SkipKind::ALL_REASONS, ["event", "service_check"]);
        // Not a prefix match by accident.
        assert_eq!(sample("_sc:1|c").name, "_sc");
        assert_eq!(sample("_e:1|c").name, "_e");
    }

    #[test]
    fn the_one_pass_path_gives_what_the_general_path_gives() {
        let long = "n".repeat(MAX_NAME_LEN);
        let too_long = "n".repeat(MAX_NAME_LEN + 1);
        let names = [
            "a",
            "app.req",
            &long,
            &too_long,
            "a b",
            "a]b",
            "a=b",
            "caf\u{e9}",
            "a\u{7f}",
            "a\tb",
            "a,k=v",
            "a#k=v",
            "a[k=v]",
            "[k=v]a",
            "",
            "_sc",
            "a|b",
        ];
        let values = [
            "1",
            "-1",
            "+3",
            "1.5",
            ".5",
            "5.",
            "1e3",
            "",
            "1:2",
            "nan",
            "abc",
            "-",
            "+",
            "0.1234567890123456789",
            "123456789012345678",
            " 1",
            "1 ",
            "x:1",
        ];
        let types = ["c", "g", "ms", "h", "d", "s", "m", "x", "", "cc", "C"];
        let tails = [
            "",
            "|",
            "||",
            "|@0.5",
            "|@2",
            "|@",
            "|#k:v",
            "|#k:v,b,",
            "|#",
            "|#:v",
            "|@0.5|#k:v|T12",
            "|T12",
            "|T1x",
            "|c:abc",
            "|#a:1|#b:2",
            "|@1|@1",
            "|#k:\u{1}",
        ];
        let styles = [
            TagStyles::ALL,
            TagStyles::NONE,
            TagStyles::ALL.without(TagStyles::DOGSTATSD),
            TagStyles::ALL.without(TagStyles::INFLUXDB),
        ];
        let mut plain = 0;
        for name in names {
            for value in values {
                for ty in types {
                    for tail in tails {
                        let line = format!("{name}:{value}|{ty}{tail}");
                        for st in styles {
                            let general =
                                parse_general(&line, ParseOptions::default().tag_styles(st));
                            if let Some(p) =
                                parse_plain(&line, ParseOptions::default().tag_styles(st))
                            {
                                plain += 1;
                                assert_eq!(p, general, "{line:?} {st:?}");
                            }
                            let opts = ParseOptions::default().tag_styles(st);
                            let whole = parse_line_with(line.as_bytes(), opts);
                            assert_eq!(whole, general.map(Line::Sample), "{line:?}");
                        }
                    }
                }
            }
        }
        assert!(plain > 10_000, "{plain}");
    }

    #[test]
    fn a_datagram_with_invalid_utf8_refuses_only_that_line() {
        let dgram = b"a:1|c\nb\xff:2|c\n \r\nc:3|g|#k:\xc3\nd:4|ms\n_e{1,1}:x|y";
        let got: Vec<_> = parse_datagram(dgram).collect();
        let each: Vec<_> = dgram
            .split(|&b| b == b'\n')
            .filter(|l| !trim(l).is_empty())
            .map(parse_line)
            .collect();
        assert_eq!(got, each);
        assert_eq!(got[1], Err(ParseError::InvalidUtf8));
        assert_eq!(got[2], Err(ParseError::InvalidUtf8));
        assert!(matches!(got[3], Ok(Line::Sample(s)) if s.name == "d"));
        assert_eq!(got[4], Ok(Line::Skipped(SkipKind::Event)));
        // The same lines in a valid datagram read as text.
        let valid = b"a:1|c\n \r\nd:4|ms\r\n_e{1,1}:x|y\n";
        let each: Vec<_> = valid
            .split(|&b| b == b'\n')
            .filter(|l| !trim(l).is_empty())
            .map(parse_line)
            .collect();
        assert_eq!(parse_datagram(valid).collect::<Vec<_>>(), each);
    }

    /// A line's name and tags, as read.
    type Read = (String, Vec<(String, String)>);

    #[test]
    fn statsd_exporters_mode_reads_lone_brackets_and_tags_without_equals_as_it_does() {
        let ex = ParseOptions::default().statsd_exporter(true);
        let own = ParseOptions::default();
        let one = |line: &str, opts: ParseOptions| -> Result<Read, &'static str> {
            let mut room = String::new();
            let mut lines = parse_datagram_with(line.as_bytes(), opts);
            match lines.next_with_room(&mut room) {
                Some(Ok(Line::Sample(s))) => Ok((
                    s.name.to_string(),
                    s.tags()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                )),
                Some(Err(e)) => Err(e.reason()),
                _ => Err("none"),
            }
        };
        let tags = |t: &[(&str, &str)]| -> Vec<(String, String)> {
            t.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            one("[tag1=bar,tag2=bazfoo.test:100|c", ex),
            Ok(("[tag1=bar,tag2=bazfoo.test".into(), vec![]))
        );
        assert_eq!(
            one("tag1=bar,tag2=baz]foo.test:100|c", ex),
            Ok(("tag1=bar,tag2=baz]foo.test".into(), vec![]))
        );
        // A tag without `=` is a tag without a value (the registry leaves
        // it out in this mode); a DogStatsD tag keeps its rules.
        assert_eq!(
            one("foo.[tag1,k=v]test:1|c", ex),
            Ok(("foo.test".into(), tags(&[("tag1", ""), ("k", "v")])))
        );
        // Name tags and DogStatsD tags together: refused, as statsd_exporter
        // refuses mixed styles; packed counters and unknown fields too; a
        // container id is the tag `container_id`; an unreadable rate is 1.
        assert_eq!(one("foo,a=b:1|c|#c:d", ex), Err("mixed_tag_styles"));
        assert_eq!(one("foo:1:2|c", ex), Err("packed_counter"));
        assert_eq!(one("foo:1|c|", ex), Err("malformed_field"));
        assert_eq!(one("foo:1|c|x:y", ex), Err("malformed_field"));
        assert_eq!(one("foo:1|c|c", ex), Err("malformed_field"));
        assert_eq!(
            one("foo:1|c|#a:b|c:ctr|Tnope", ex),
            Ok(("foo".into(), tags(&[("a", "b"), ("container_id", "ctr")])))
        );
        assert_eq!(one("foo:1|c|@2", ex), Err("invalid_sample_rate"));
        assert_eq!(one("foo:1|c|@bar", ex), one("foo:1|c", ex));
        assert_eq!(one("foo:1:2|c", own), Ok(("foo".into(), vec![])));
        assert_eq!(one("foo:1|c|x:y", own), Ok(("foo".into(), vec![])));
        assert_eq!(
            one("foo,t1:1|c", ex),
            Ok(("foo".into(), tags(&[("t1", "")])))
        );
        // Both brackets: read as always.
        assert_eq!(
            one("[k=v]foo:1|c", ex),
            Ok(("foo".into(), tags(&[("k", "v")])))
        );
        // rollstat's own rule.
        assert_eq!(
            one("[tag1=bar,tag2=bazfoo.test:100|c", own),
            Err("malformed_tag")
        );
        assert_eq!(one("foo.[tag1,tag2]test:100|c", own), Err("malformed_tag"));
        assert_eq!(one("foo,t1:1|c", own), Err("malformed_tag"));
    }
}
