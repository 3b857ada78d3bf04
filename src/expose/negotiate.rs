//! Which exposition format, and which escaping of names, a scrape is
//! answered with: read from its `Accept` header ([`negotiate`]), spelled in
//! the response's `Content-Type` ([`Negotiated::content_type`]).
//!
//! The rules are those of the Prometheus "Scrape protocol content
//! negotiation" document (`docs/instrumenting/content_negotiation.md`), read
//! together with what prometheus/common's `expfmt.NegotiateAccept` does and
//! what Prometheus servers really send. Where they leave a choice open, the
//! choice is written here.
//!
//! # The header
//!
//! * The header is a list of media ranges separated by `,`; each is
//!   `type/subtype` followed by parameters, each `;name=value`. Spaces and
//!   tabs around every token, `/`, `;`, `,` and `=` are ignored; empty list
//!   elements (`a,,b`) and empty parameters (`a;;b=c`) are skipped, as RFC
//!   9110 allows. Several `Accept` header lines are joined with `,` by the
//!   caller.
//! * Type, subtype and parameter names are compared without regard to ASCII
//!   case, and so are the parameter values that matter here (`version`,
//!   `proto`, `encoding`, `escaping`): `Text/Plain;Version=1.0.0` is text
//!   1.0.0, `escaping=Allow-UTF-8` is [`Escaping::AllowUtf8`].
//! * A value is a token or a quoted string (`version="1.0.0"`); inside the
//!   quotes `\x` stands for `x`.
//! * When a parameter is given twice, the last one counts (`expfmt` keeps
//!   parameters in a map). Prometheus 3.0 to 3.2 really send
//!   `escaping=allow-utf-8` twice on text 1.0.0.
//! * The weight `q` is RFC 9110's `qvalue`: `0` to `1` with at most three
//!   decimals (`0`, `0.5`, `1.000`), not quoted; it defaults to 1. A `q`
//!   outside that grammar (`q=2`, `q=0.1234`, `q=abc`, `q=-1`) makes its
//!   entry unacceptable: the entry is never chosen. (`expfmt`'s parser
//!   reads an unparsable `q` as 0, which amounts to the same; Prometheus
//!   2.49 sent `*/*;q=2`, which is only ever a wildcard.)
//! * An entry that does not parse (no `/`, a character outside RFC 9110's
//!   `tchar` in a token, a parameter without `=`, an unterminated quote) is
//!   ignored up to the next `,` outside quotes; the entries after it still
//!   count. An unterminated quote therefore ends the header.
//!
//! # The formats
//!
//! An entry names a supported [`Protocol`] when it is one of:
//!
//! * `application/vnd.google.protobuf` with
//!   `proto=io.prometheus.client.MetricFamily` and `encoding=delimited`:
//!   [`Protocol::PrometheusProto`]. Both
//!   parameters are required (as `expfmt` requires them); the other
//!   encodings (`text`, `compact-text`) are not supported.
//! * `text/plain` with `version=1.0.0`: [`Protocol::PrometheusText1_0_0`];
//!   with `version=0.0.4`, or with no version:
//!   [`Protocol::PrometheusText0_0_4`].
//! * `application/openmetrics-text` with `version=1.0.0`:
//!   [`Protocol::OpenMetricsText1_0_0`]; with `version=0.0.1`, or with no
//!   version: [`Protocol::OpenMetricsText0_0_1`] (`expfmt`'s `matchFormat`
//!   reads a missing OpenMetrics version as 0.0.1; Prometheus 2.40 sent
//!   `application/openmetrics-text;q=0.6` meaning it).
//!
//! Any other version of these types (`version=2.0.0`), any other type and
//! every wildcard (`*/*`, `text/*`) is not a supported entry. A `charset`
//! parameter is not looked at (`expfmt` skips it too).
//!
//! # The choice
//!
//! The supported entry with the highest `q` is chosen; between entries of
//! equal `q`, the one written first. An entry with `q=0` is "not
//! acceptable" and never chosen. When no supported entry is acceptable (no
//! header, `*/*`, `text/*`, garbage, only `q=0`, only unsupported types) the
//! answer is text 0.0.4 with [`Escaping::Underscores`]
//! ([`Negotiated::FALLBACK`]): the document's last resort, and what
//! `/metrics` answered every scrape with before. There is never an error
//! and never a 406.
//!
//! Wildcards are not matched against the supported formats: a header such
//! as `text/plain;version=1.0.0;q=0.2,*/*;q=0.9` gets text 1.0.0, the one
//! format it names, rather than what `*/*` would allow. RFC 9110's
//! precedence of a more specific range over a less specific one is not
//! applied either: each entry is weighed on its own. (`expfmt` does match
//! wildcards, in the server's order of preference, so a Go target offering
//! OpenMetrics answers curl's `*/*` with OpenMetrics 1.0.0; here curl gets
//! text 0.0.4, as before.)
//!
//! # Escaping
//!
//! The escaping comes from the chosen entry's `escaping` parameter:
//! `allow-utf-8` (and `allow-utf8`, accepted out of leniency: no
//! Prometheus, prometheus/common or docs page spells it so, but rollstat's
//! reference notes do), `underscores`, `dots` or `values`; missing or any
//! other value gives [`Escaping::Underscores`], the documented default.
//! (`expfmt` takes the last known `escaping` among all the entries it
//! walked, matched or not; here only the chosen entry's counts.) The
//! legacy formats, text
//! 0.0.4 and OpenMetrics 0.0.1, cannot carry names outside the legacy
//! character set, so there [`Escaping::AllowUtf8`] becomes
//! [`Escaping::Underscores`]; `dots` and `values` are kept, since they give
//! legacy-valid names.
//!
//! # Cost
//!
//! The header is read once, left to right, with a constant amount of state
//! (the entry being read and the best one so far): time is linear in its
//! length and nothing is allocated, whatever the header holds.

/// An exposition format a scrape can be answered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Length-delimited `io.prometheus.client.MetricFamily` messages.
    PrometheusProto,
    /// Prometheus text format 1.0.0 (UTF-8 names may appear, quoted).
    PrometheusText1_0_0,
    /// OpenMetrics 1.0.0 text (UTF-8 names may appear, quoted).
    OpenMetricsText1_0_0,
    /// OpenMetrics 0.0.1 text: legacy names only.
    OpenMetricsText0_0_1,
    /// Prometheus text format 0.0.4: legacy names only; the fallback.
    PrometheusText0_0_4,
}

impl Protocol {
    /// Whether the format can carry metric and label names outside the
    /// legacy character set: all but text 0.0.4 and OpenMetrics 0.0.1.
    #[must_use]
    pub fn carries_utf8_names(self) -> bool {
        !matches!(
            self,
            Protocol::PrometheusText0_0_4 | Protocol::OpenMetricsText0_0_1
        )
    }
}

/// How metric and label names outside the legacy character set are written
/// (see `escaping.rs` for each scheme's rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Escaping {
    /// Names as they are (quoted in the text formats where needed).
    AllowUtf8,
    /// Every invalid character becomes `_`: the default.
    Underscores,
    /// `.` becomes `_dot_`, `_` becomes `__`, other invalid characters `__`.
    Dots,
    /// `U__` and each invalid character as `_<hex code point>_`.
    Values,
}

impl Escaping {
    /// The scheme's name in an `escaping=` parameter: `allow-utf-8`,
    /// `underscores`, `dots` or `values`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Escaping::AllowUtf8 => "allow-utf-8",
            Escaping::Underscores => "underscores",
            Escaping::Dots => "dots",
            Escaping::Values => "values",
        }
    }

    /// Position in the `Content-Type` tables.
    fn index(self) -> usize {
        match self {
            Escaping::AllowUtf8 => 0,
            Escaping::Underscores => 1,
            Escaping::Dots => 2,
            Escaping::Values => 3,
        }
    }

    /// The scheme an `escaping=` value names, if any.
    fn from_value(v: Value<'_>) -> Option<Escaping> {
        if v.eq_ignore_case("allow-utf-8") || v.eq_ignore_case("allow-utf8") {
            Some(Escaping::AllowUtf8)
        } else if v.eq_ignore_case("underscores") {
            Some(Escaping::Underscores)
        } else if v.eq_ignore_case("dots") {
            Some(Escaping::Dots)
        } else if v.eq_ignore_case("values") {
            Some(Escaping::Values)
        } else {
            None
        }
    }
}

/// The outcome of negotiation: the format to write and how to escape names
/// in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The format.
    pub protocol: Protocol,
    /// The escaping of names; never [`Escaping::AllowUtf8`] with a legacy
    /// format when built by [`negotiate`] or [`Negotiated::new`].
    pub escaping: Escaping,
}

/// Builds one `Content-Type` per escaping scheme, in [`Escaping::index`]
/// order, for the media type and parameters given.
macro_rules! per_escaping {
    ($base:literal) => {
        [
            concat!($base, "; escaping=allow-utf-8"),
            concat!($base, "; escaping=underscores"),
            concat!($base, "; escaping=dots"),
            concat!($base, "; escaping=values"),
        ]
    };
}

/// `Content-Type` of protobuf answers, per escaping.
const PROTO: [&str; 4] = per_escaping!(
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
);
/// `Content-Type` of text 1.0.0 answers, per escaping.
const TEXT_1_0_0: [&str; 4] = per_escaping!("text/plain; version=1.0.0; charset=utf-8");
/// `Content-Type` of OpenMetrics 1.0.0 answers, per escaping.
const OPENMETRICS_1_0_0: [&str; 4] =
    per_escaping!("application/openmetrics-text; version=1.0.0; charset=utf-8");
/// `Content-Type` of OpenMetrics 0.0.1 answers, per escaping.
const OPENMETRICS_0_0_1: [&str; 4] =
    per_escaping!("application/openmetrics-text; version=0.0.1; charset=utf-8");
/// `Content-Type` of text 0.0.4 answers, whatever the escaping: the string
/// `/metrics` has always sent.
const TEXT_0_0_4: &str = "text/plain; version=0.0.4; charset=utf-8";

impl Negotiated {
    /// The answer when nothing acceptable is supported: text 0.0.4,
    /// underscores.
    pub const FALLBACK: Negotiated = Negotiated {
        protocol: Protocol::PrometheusText0_0_4,
        escaping: Escaping::Underscores,
    };

    /// `protocol` with `escaping`, except that a format that cannot carry
    /// UTF-8 names ([`Protocol::carries_utf8_names`]) gets
    /// [`Escaping::Underscores`] in place of [`Escaping::AllowUtf8`]. For a
    /// format chosen some other way than by [`negotiate`] (a configured
    /// one, say).
    #[must_use]
    pub fn new(protocol: Protocol, escaping: Escaping) -> Negotiated {
        let escaping = if escaping == Escaping::AllowUtf8 && !protocol.carries_utf8_names() {
            Escaping::Underscores
        } else {
            escaping
        };
        Negotiated { protocol, escaping }
    }

    /// The response's `Content-Type`:
    ///
    /// * text 0.0.4: `text/plain; version=0.0.4; charset=utf-8`, with no
    ///   `escaping` parameter (unchanged from before negotiation existed);
    /// * protobuf: `application/vnd.google.protobuf;
    ///   proto=io.prometheus.client.MetricFamily; encoding=delimited;
    ///   escaping=<scheme>`;
    /// * text 1.0.0: `text/plain; version=1.0.0; charset=utf-8;
    ///   escaping=<scheme>`;
    /// * OpenMetrics: `application/openmetrics-text; version=<1.0.0 or
    ///   0.0.1>; charset=utf-8; escaping=<scheme>`.
    ///
    /// `<scheme>` is [`Escaping::as_str`] of [`Negotiated::escaping`], as
    /// it is (a hand-built OpenMetrics 0.0.1 with `AllowUtf8` says so).
    /// Every string is a static one: nothing is built per scrape.
    #[must_use]
    pub fn content_type(&self) -> &'static str {
        let i = self.escaping.index();
        match self.protocol {
            Protocol::PrometheusProto => PROTO[i],
            Protocol::PrometheusText1_0_0 => TEXT_1_0_0[i],
            Protocol::OpenMetricsText1_0_0 => OPENMETRICS_1_0_0[i],
            Protocol::OpenMetricsText0_0_1 => OPENMETRICS_0_0_1[i],
            Protocol::PrometheusText0_0_4 => TEXT_0_0_4,
        }
    }
}

/// The format and escaping to answer a scrape with, from the raw value of
/// its `Accept` header (several header lines joined with `,`), or `None`
/// when it sent none. See the [module docs](self) for the rules; the
/// answer is [`Negotiated::FALLBACK`] when nothing acceptable is supported.
#[must_use]
pub fn negotiate(accept: Option<&[u8]>) -> Negotiated {
    let Some(header) = accept else {
        return Negotiated::FALLBACK;
    };
    let mut best: Option<(u16, Negotiated)> = None;
    let mut at = 0;
    while at < header.len() {
        let (entry, next) = read_entry(header, at);
        at = next;
        let Some(entry) = entry else { continue };
        let Some(protocol) = entry.protocol() else {
            continue;
        };
        let better = match best {
            None => entry.q > 0,
            Some((q, _)) => entry.q > q,
        };
        if better {
            let escaping = entry.escaping.unwrap_or(Escaping::Underscores);
            best = Some((entry.q, Negotiated::new(protocol, escaping)));
        }
    }
    best.map_or(Negotiated::FALLBACK, |(_, n)| n)
}

/// The media type of an entry, as far as negotiation cares.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `application/vnd.google.protobuf`.
    Proto,
    /// `text/plain`.
    TextPlain,
    /// `application/openmetrics-text`.
    OpenMetrics,
    /// Anything else, wildcards included.
    Other,
}

/// An entry's `version` parameter.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Version {
    /// None given.
    Missing,
    /// `0.0.1`.
    V0_0_1,
    /// `0.0.4`.
    V0_0_4,
    /// `1.0.0`.
    V1_0_0,
    /// Any other value.
    Other,
}

/// What one entry says, gathered as it is read.
struct Entry {
    kind: Kind,
    version: Version,
    /// `proto=io.prometheus.client.MetricFamily` (the last `proto` given).
    proto: bool,
    /// `encoding=delimited` (the last `encoding` given).
    delimited: bool,
    /// The last `escaping` given, `None` if it named no known scheme.
    escaping: Option<Escaping>,
    /// Weight in thousandths, 0 to 1000.
    q: u16,
}

impl Entry {
    /// The supported format the entry names, if any.
    fn protocol(&self) -> Option<Protocol> {
        match (self.kind, self.version) {
            (Kind::Proto, _) if self.proto && self.delimited => Some(Protocol::PrometheusProto),
            (Kind::TextPlain, Version::Missing | Version::V0_0_4) => {
                Some(Protocol::PrometheusText0_0_4)
            }
            (Kind::TextPlain, Version::V1_0_0) => Some(Protocol::PrometheusText1_0_0),
            (Kind::OpenMetrics, Version::Missing | Version::V0_0_1) => {
                Some(Protocol::OpenMetricsText0_0_1)
            }
            (Kind::OpenMetrics, Version::V1_0_0) => Some(Protocol::OpenMetricsText1_0_0),
            _ => None,
        }
    }
}

/// A parameter value as written: a token, or the inside of a quoted string
/// (still holding its `\` escapes).
#[derive(Clone, Copy)]
enum Value<'a> {
    Token(&'a [u8]),
    Quoted(&'a [u8]),
}

impl Value<'_> {
    /// Whether the value, unescaped, is `lit` regardless of ASCII case.
    fn eq_ignore_case(self, lit: &str) -> bool {
        match self {
            Value::Token(t) => t.eq_ignore_ascii_case(lit.as_bytes()),
            Value::Quoted(raw) => {
                let mut want = lit.bytes();
                let mut bytes = raw.iter();
                while let Some(&b) = bytes.next() {
                    // The reader has checked that a `\` is followed by a byte.
                    let b = if b == b'\\' {
                        bytes.next().copied().unwrap_or(b)
                    } else {
                        b
                    };
                    match want.next() {
                        Some(w) if w.eq_ignore_ascii_case(&b) => {}
                        _ => return false,
                    }
                }
                want.next().is_none()
            }
        }
    }
}

/// Reads the entry starting at `at` (just after a `,`, or at the start) up
/// to and including the `,` that ends it. Returns what it says, `None` for
/// an empty or malformed entry, and where the next one starts.
fn read_entry(s: &[u8], at: usize) -> (Option<Entry>, usize) {
    let mut i = skip_ows(s, at);
    if i >= s.len() {
        return (None, i);
    }
    if s[i] == b',' {
        return (None, i + 1);
    }
    match read_media_range(s, &mut i) {
        Ok(entry) => {
            // `read_media_range` stops at the end or just after a `,`.
            (Some(entry), i)
        }
        Err(()) => (None, skip_to_next_entry(s, i)),
    }
}

/// Reads `type/subtype` and its parameters from `*i`, leaving `*i` after
/// the `,` that ends the entry (or at the end). On error `*i` is where the
/// error was found.
fn read_media_range(s: &[u8], i: &mut usize) -> Result<Entry, ()> {
    let ty = token(s, i)?;
    *i = skip_ows(s, *i);
    if s.get(*i) != Some(&b'/') {
        return Err(());
    }
    *i = skip_ows(s, *i + 1);
    let subtype = token(s, i)?;
    let kind = if ty.eq_ignore_ascii_case(b"application") {
        if subtype.eq_ignore_ascii_case(b"vnd.google.protobuf") {
            Kind::Proto
        } else if subtype.eq_ignore_ascii_case(b"openmetrics-text") {
            Kind::OpenMetrics
        } else {
            Kind::Other
        }
    } else if ty.eq_ignore_ascii_case(b"text") && subtype.eq_ignore_ascii_case(b"plain") {
        Kind::TextPlain
    } else {
        Kind::Other
    };
    let mut entry = Entry {
        kind,
        version: Version::Missing,
        proto: false,
        delimited: false,
        escaping: None,
        q: 1000,
    };
    loop {
        *i = skip_ows(s, *i);
        match s.get(*i) {
            None => return Ok(entry),
            Some(b',') => {
                *i += 1;
                return Ok(entry);
            }
            Some(b';') => *i = skip_ows(s, *i + 1),
            Some(_) => return Err(()),
        }
        // An empty parameter: `;;`, `;,` or a `;` at the end.
        if matches!(s.get(*i), None | Some(b';' | b',')) {
            continue;
        }
        let name = token(s, i)?;
        *i = skip_ows(s, *i);
        if s.get(*i) != Some(&b'=') {
            return Err(());
        }
        *i = skip_ows(s, *i + 1);
        let value = value(s, i)?;
        if name.eq_ignore_ascii_case(b"q") {
            entry.q = match value {
                Value::Token(t) => qvalue(t).ok_or(())?,
                Value::Quoted(_) => return Err(()),
            };
        } else if name.eq_ignore_ascii_case(b"version") {
            entry.version = if value.eq_ignore_case("1.0.0") {
                Version::V1_0_0
            } else if value.eq_ignore_case("0.0.4") {
                Version::V0_0_4
            } else if value.eq_ignore_case("0.0.1") {
                Version::V0_0_1
            } else {
                Version::Other
            };
        } else if name.eq_ignore_ascii_case(b"proto") {
            entry.proto = value.eq_ignore_case("io.prometheus.client.MetricFamily");
        } else if name.eq_ignore_ascii_case(b"encoding") {
            entry.delimited = value.eq_ignore_case("delimited");
        } else if name.eq_ignore_ascii_case(b"escaping") {
            entry.escaping = Escaping::from_value(value);
        }
    }
}

/// RFC 9110 `tchar`: the characters of a token.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Spaces and tabs from `i` skipped.
fn skip_ows(s: &[u8], mut i: usize) -> usize {
    while matches!(s.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    i
}

/// A non-empty token at `*i`, `*i` moved past it.
fn token<'a>(s: &'a [u8], i: &mut usize) -> Result<&'a [u8], ()> {
    let start = *i;
    while s.get(*i).is_some_and(|&b| is_tchar(b)) {
        *i += 1;
    }
    if *i == start {
        Err(())
    } else {
        Ok(&s[start..*i])
    }
}

/// A parameter value at `*i` (a token or a quoted string), `*i` moved past
/// it.
fn value<'a>(s: &'a [u8], i: &mut usize) -> Result<Value<'a>, ()> {
    if s.get(*i) != Some(&b'"') {
        return token(s, i).map(Value::Token);
    }
    let start = *i + 1;
    match closing_quote(s, start) {
        Some(end) => {
            *i = end + 1;
            Ok(Value::Quoted(&s[start..end]))
        }
        None => {
            *i = s.len();
            Err(())
        }
    }
}

/// Where the quoted string whose inside starts at `i` ends (its closing
/// `"`), `\x` pairs skipped; `None` if it is not closed.
fn closing_quote(s: &[u8], mut i: usize) -> Option<usize> {
    while i < s.len() {
        match s[i] {
            b'"' => return Some(i),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    None
}

/// After a malformed entry: the position just past the next `,` that is
/// not inside a quoted string, or the end.
fn skip_to_next_entry(s: &[u8], mut i: usize) -> usize {
    while i < s.len() {
        match s[i] {
            b',' => return i + 1,
            b'"' => match closing_quote(s, i + 1) {
                Some(end) => i = end + 1,
                None => return s.len(),
            },
            _ => i += 1,
        }
    }
    s.len()
}

/// RFC 9110 `qvalue` in thousandths: `0` or `1`, then optionally `.` and
/// up to three digits (only zeros after a `1`).
fn qvalue(t: &[u8]) -> Option<u16> {
    let (&first, rest) = t.split_first()?;
    let decimals = match rest {
        [] => &[][..],
        [b'.', decimals @ ..] if decimals.len() <= 3 => decimals,
        _ => return None,
    };
    let mut thousandths: u16 = 0;
    let mut scale = 100;
    for &d in decimals {
        if !d.is_ascii_digit() {
            return None;
        }
        thousandths += u16::from(d - b'0') * scale;
        scale /= 10;
    }
    match first {
        b'0' => Some(thousandths),
        b'1' if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
