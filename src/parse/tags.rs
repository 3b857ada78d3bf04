//! The tag dialects: DogStatsD `|#k:v,bare`, InfluxDB/Telegraf
//! `name,k=v`, Librato `name#k=v` and SignalFx `name[k=v]` / `[k=v]name`.
//!
//! [`TagStyles`] says which of them are read. This file owns splitting the
//! name-embedded tags off a metric name ([`split_name`]), validating a tag
//! list of either kind against the limits ([`check_tags`]), and
//! [`route_key`], the series key of a raw line that strips every dialect
//! without parsing. Reading the tags of an accepted sample back is
//! [`Tags`](super::Tags), in the model.

use super::error::ParseError;
use super::lex::{has_control, split2, split_or_all, trim};
use super::{MAX_TAGS, MAX_TAG_KEY_LEN, MAX_TAG_VALUE_LEN};

/// The tag syntaxes the parser reads: a set of four flags in one byte.
///
/// ```
/// use rollstat::parse::{parse_line_with, Line, ParseOptions, TagStyles};
///
/// let opts = ParseOptions::default().tag_styles(TagStyles::ALL.without(TagStyles::INFLUXDB));
/// let Ok(Line::Sample(s)) = parse_line_with(b"a,k=v:1|c|#x:y", opts) else { panic!() };
/// assert_eq!(s.name, "a,k=v");
/// assert_eq!(s.tags().collect::<Vec<_>>(), [("x", "y")]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TagStyles(u8);

impl TagStyles {
    /// DogStatsD `|#k:v,bare`.
    pub const DOGSTATSD: TagStyles = TagStyles(1);
    /// InfluxDB `name,k=v:`.
    pub const INFLUXDB: TagStyles = TagStyles(2);
    /// Librato `name#k=v:`.
    pub const LIBRATO: TagStyles = TagStyles(4);
    /// SignalFx `name[k=v]:` / `[k=v]name:`.
    pub const SIGNALFX: TagStyles = TagStyles(8);
    /// No tags at all.
    pub const NONE: TagStyles = TagStyles(0);
    /// Every style (the default).
    pub const ALL: TagStyles = TagStyles(15);
    /// Each style with its config name, in documentation order.
    pub const NAMED: [(&'static str, TagStyles); 4] = [
        ("dogstatsd", TagStyles::DOGSTATSD),
        ("influxdb", TagStyles::INFLUXDB),
        ("librato", TagStyles::LIBRATO),
        ("signalfx", TagStyles::SIGNALFX),
    ];

    /// The style called `name` in the config (`"dogstatsd"`, ...).
    #[must_use]
    pub fn from_name(name: &str) -> Option<TagStyles> {
        TagStyles::NAMED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
    }

    /// Whether every style of `other` is on.
    #[must_use]
    pub const fn contains(self, other: TagStyles) -> bool {
        self.0 & other.0 == other.0
    }

    /// These styles and those of `other`.
    #[must_use]
    pub const fn with(self, other: TagStyles) -> TagStyles {
        TagStyles(self.0 | other.0)
    }

    /// These styles less those of `other`.
    #[must_use]
    pub const fn without(self, other: TagStyles) -> TagStyles {
        TagStyles(self.0 & !other.0)
    }

    /// The config names of the styles that are on.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        TagStyles::NAMED
            .into_iter()
            .filter(move |(_, s)| self.contains(*s))
            .map(|(n, _)| n)
    }
}

impl Default for TagStyles {
    fn default() -> Self {
        TagStyles::ALL
    }
}

/// The styles embedded in the name.
pub(super) const NAME_STYLES: TagStyles = TagStyles::INFLUXDB
    .with(TagStyles::LIBRATO)
    .with(TagStyles::SIGNALFX);

/// Whether `c` starts name-embedded tags of a style that is on.
#[inline]
fn starts_name_tags(c: u8, styles: TagStyles) -> bool {
    match c {
        b',' => styles.contains(TagStyles::INFLUXDB),
        b'#' => styles.contains(TagStyles::LIBRATO),
        b'[' => styles.contains(TagStyles::SIGNALFX),
        _ => false,
    }
}

/// Splits name-embedded tags off the name, every name style on. Returns
/// `(name, tags)` where `tags` is a `,`-separated list of `k=v`.
#[inline]
pub(super) fn split_name(part: &str) -> Result<(&str, &str), ParseError> {
    let b = part.as_bytes();
    let Some(i) = b.iter().position(|&c| matches!(c, b',' | b'#' | b'[')) else {
        return Ok((part, ""));
    };
    split_name_at(part, i)
}

/// [`split_name`] with some name styles off: the delimiter of a style that
/// is off is name text. Out of line, so that the default path keeps the
/// code it had before styles could be turned off.
#[inline(never)]
pub(super) fn split_name_with(part: &str, styles: TagStyles) -> Result<(&str, &str), ParseError> {
    let Some(i) = part.bytes().position(|c| starts_name_tags(c, styles)) else {
        return Ok((part, ""));
    };
    split_name_at(part, i)
}

/// Splits at `i`, the first delimiter of a name style that is on.
#[inline]
fn split_name_at(part: &str, i: usize) -> Result<(&str, &str), ParseError> {
    let b = part.as_bytes();
    match b[i] {
        // InfluxDB `name,k=v` and Librato `name#k=v`.
        b',' | b'#' => Ok((&part[..i], &part[i + 1..])),
        // SignalFx: the block runs from this `[` to the first `]` after it
        // (statsd_exporter's rule). `[k=v]name` and `name[k=v]` leave the
        // name one slice; a block in the middle does not, and is read by
        // [`join_signalfx`] (the parser's caller lends the room); here it
        // is `malformed_tag`, as is a `[` never closed.
        _ => {
            let close =
                i + 1 + memchr::memchr(b']', &b[i + 1..]).ok_or(ParseError::MalformedTag)?;
            let tags = &part[i + 1..close];
            if i == 0 {
                Ok((&part[close + 1..], tags))
            } else if close + 1 == part.len() {
                Ok((&part[..i], tags))
            } else {
                Err(ParseError::MalformedTag)
            }
        }
    }
}

/// Where a SignalFx block sits in the middle of a line's name
/// (`foo.[k=v]test:1|c`): `Some((open, close))`, the byte offsets of its `[`
/// and of the first `]` after it, when the `[` is the first delimiter of a
/// name style that is on, SignalFx is on, and there is name text on both
/// sides. `None` for every other line. Only looked for after the grammar
/// refused a line as `malformed_tag`, so it costs the common line nothing.
pub(super) fn signalfx_middle(line: &str, styles: TagStyles) -> Option<(usize, usize)> {
    if !styles.contains(TagStyles::SIGNALFX) {
        return None;
    }
    let b = line.as_bytes();
    let colon = memchr::memchr(b':', b)?;
    let name = &b[..colon];
    let open = name.iter().position(|&c| starts_name_tags(c, styles))?;
    if open == 0 || name[open] != b'[' {
        return None;
    }
    let close = open + 1 + memchr::memchr(b']', &name[open + 1..])?;
    (close + 1 < colon).then_some((open, close))
}

/// Writes into `out` the line `line` with its middle SignalFx block (at
/// `open..=close`, from [`signalfx_middle`]) moved to the front of the name:
/// `foo.[k=v]test:1|c` becomes `[k=v]foo.test:1|c`, which the grammar reads
/// as the name `foo.test` (the text on both sides joined as it stands, dots
/// included, as statsd_exporter does) with the tags `k=v`. The block holds
/// no `]`, so the first `]` of the new line still closes it.
pub(super) fn join_signalfx(line: &str, open: usize, close: usize, out: &mut String) {
    out.clear();
    out.reserve(line.len());
    out.push_str(&line[open..=close]);
    out.push_str(&line[..open]);
    out.push_str(&line[close + 1..]);
}

/// One DogStatsD tag entry without the `#` that some clients put before
/// every key (the Datadog PHP client sends `|#k1:v1,#k2:v2`); statsd_exporter
/// drops it too. Only the first `#` goes: `##k` is the key `#k`.
#[inline]
pub(super) fn dog_entry(entry: &str) -> &str {
    entry.strip_prefix('#').unwrap_or(entry)
}

/// Validates a `,`-separated tag list; returns the running tag count.
/// `need_sep`: every tag must be `k=v` (name-embedded tags, but in
/// statsd_exporter's mode); DogStatsD tags (`sep` `:`) may be bare and lose
/// one leading `#` ([`dog_entry`]).
pub(super) fn check_tags(
    list: &str,
    sep: u8,
    need_sep: bool,
    mut count: usize,
) -> Result<usize, ParseError> {
    if list.is_empty() {
        return Ok(count);
    }
    let mut rest = list;
    while !rest.is_empty() {
        let (entry, more) = split_or_all(rest, b',');
        rest = more;
        // Only a DogStatsD key may carry a leading `#`.
        let entry = if sep == b':' { dog_entry(entry) } else { entry };
        if entry.is_empty() {
            continue;
        }
        count += 1;
        if count > MAX_TAGS {
            return Err(ParseError::TooManyTags);
        }
        let (k, v) = match split2(entry, sep) {
            Some(kv) => kv,
            None if need_sep => return Err(ParseError::MalformedTag),
            None => (entry, ""),
        };
        if k.is_empty() || has_control(entry) {
            return Err(ParseError::MalformedTag);
        }
        if k.len() > MAX_TAG_KEY_LEN || v.len() > MAX_TAG_VALUE_LEN {
            return Err(ParseError::TagTooLong);
        }
    }
    Ok(count)
}

/// A coarse key of the series a raw line belongs to, without parsing it, in
/// two pieces to be read as one (`head` then `tail`; `tail` is empty but for
/// a SignalFx block in the middle of a name): the name part (before the
/// first `:`, after leading blanks), less a leading SignalFx `[...]` group,
/// cut at the first `,`, `#` or `[`; when that is a `[` closed later by a
/// `]` with name text after it, the text after the `]` (cut again at the
/// first `,`, `#` or `[`) is the tail. Every spelling of one series has the
/// same key, under any [`ParseOptions`](super::ParseOptions):
/// `cpu,host=a:…`, `cpu#host=a:…`, `cpu[host=a]:…`, `[host=a]cpu:…`,
/// `c[host=a]pu:…` and `cpu:…|#host:a` all give `cpu` (the parsed name
/// never holds a delimiter of a style that is on, and a style that is off
/// leaves its delimiter in the name, where the cut only makes the key
/// coarser). Different series may share a key. The UDP hand-off routes
/// lines by it, so that the lines of one series keep their order.
#[must_use]
pub fn route_key(line: &[u8]) -> (&[u8], &[u8]) {
    let line = trim(line);
    let mut name = memchr::memchr(b':', line).map_or(line, |i| &line[..i]);
    if let [b'[', rest @ ..] = name {
        if let Some(close) = memchr::memchr(b']', rest) {
            name = &rest[close + 1..];
        }
    }
    let cut = |s: &[u8]| memchr::memchr3(b',', b'#', b'[', s).unwrap_or(s.len());
    let i = cut(name);
    let head = &name[..i];
    if name.get(i) == Some(&b'[') {
        if let Some(close) = memchr::memchr(b']', &name[i + 1..]) {
            let after = &name[i + 2 + close..];
            return (head, &after[..cut(after)]);
        }
    }
    (head, &[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::testing::{check, reject, rejects, sample, w};
    use crate::parse::{
        parse_datagram_with, parse_line_with, Line, MetricKind::*, ParseOptions, MAX_NAME_LEN,
    };

    #[test]
    fn dogstatsd_tags() {
        let s = sample("a:1|c|#url:http://x:8080/p,bare,k:v");
        assert_eq!(
            s.tags().collect::<Vec<_>>(),
            [("url", "http://x:8080/p"), ("bare", ""), ("k", "v")]
        );
        // Empty entries skipped, including an empty section.
        let s = sample("a:1|c|#a:b,,c:d,");
        assert_eq!(s.tags().collect::<Vec<_>>(), [("a", "b"), ("c", "d")]);
        assert_eq!(s.tags().len(), 2);
        assert_eq!(sample("a:1|c|#").tags().count(), 0);
        assert_eq!(sample("a:1|c|#k:").tags().collect::<Vec<_>>(), [("k", "")]);
        // Tags field may come before the rate.
        let s = sample("a:1|c|#k:v|@0.5");
        assert_eq!((s.sample_rate, s.tags().count()), (0.5, 1));
        assert_eq!(reject(b"a:1|c|#:v"), "malformed_tag");
        assert_eq!(reject(b"a:1|c|#k:v\tw"), "malformed_tag");
    }

    #[test]
    fn name_embedded_tags() {
        check(
            "a,k=v,k2=v2:1|c",
            &w("a", Counter, &[1.0], 1.0, &[("k", "v"), ("k2", "v2")]),
        );
        check(
            "name#k=v,k2=v2:1|c",
            &w("name", Counter, &[1.0], 1.0, &[("k", "v"), ("k2", "v2")]),
        );
        check(
            "name[k=v,k2=v2]:1|c",
            &w("name", Counter, &[1.0], 1.0, &[("k", "v"), ("k2", "v2")]),
        );
        check(
            "[k=v]name:1|c",
            &w("name", Counter, &[1.0], 1.0, &[("k", "v")]),
        );
        check(
            "a,k=x=y:1|c",
            &w("a", Counter, &[1.0], 1.0, &[("k", "x=y")]),
        );
        check("a,k=:1|c", &w("a", Counter, &[1.0], 1.0, &[("k", "")]));
        // The first of `,` `#` `[` picks the style; later ones are tag text.
        check(
            "a,k=v#w:1|c",
            &w("a", Counter, &[1.0], 1.0, &[("k", "v#w")]),
        );
        check(
            "a#k=[x]:1|c",
            &w("a", Counter, &[1.0], 1.0, &[("k", "[x]")]),
        );
        // Mixed with DogStatsD tags: merged, name tags first.
        check(
            "a,env=prod:1|c|#route:/api,canary",
            &w(
                "a",
                Counter,
                &[1.0],
                1.0,
                &[("env", "prod"), ("route", "/api"), ("canary", "")],
            ),
        );
        check(
            "a#k=v:1|ms|@0.5|#x:y",
            &w("a", Timer, &[1.0], 0.5, &[("k", "v"), ("x", "y")]),
        );
        for (line, reason) in [
            (&b"a,novalue:1|c"[..], "malformed_tag"),
            (b"a,=v:1|c", "malformed_tag"),
            (b"a#k:1|c", "malformed_tag"),
            // A block in the middle needs room to join the name: the plain
            // iterator refuses it (see `signalfx_tags_in_the_middle...`).
            (b"a[k=v]b:1|c", "malformed_tag"),
            (b"a[k=v:1|c", "malformed_tag"),
            (b"[k=v:1|c", "malformed_tag"),
            (b"a[k]:1|c", "malformed_tag"),
        ] {
            rejects(line, reason);
        }
    }

    /// Parses `line` as the daemon does, with room to join a name.
    fn roomy(line: &str, styles: TagStyles) -> Result<(String, Vec<(String, String)>), ParseError> {
        let mut room = String::new();
        let opts = ParseOptions::default().tag_styles(styles);
        match parse_datagram_with(line.as_bytes(), opts).next_with_room(&mut room) {
            Some(Ok(Line::Sample(s))) => Ok((
                s.name.to_string(),
                s.tags()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )),
            Some(Err(e)) => Err(e),
            other => panic!("{line:?}: {other:?}"),
        }
    }

    #[test]
    fn signalfx_tags_in_the_middle_of_a_name_are_read_as_statsd_exporter_reads_them() {
        let all = TagStyles::ALL;
        let kv = |n: &str, t: &[(&str, &str)]| Ok((n.to_string(), tags(t)));
        // Start, middle, end: one name, one tag list.
        for line in [
            "[tag1=bar,tag2=baz]foo.test:100|c",
            "foo.[tag1=bar,tag2=baz]test:100|c",
            "foo.test[tag1=bar,tag2=baz]:100|c",
            "f[tag1=bar,tag2=baz]oo.test:100|c",
        ] {
            assert_eq!(
                roomy(line, all),
                kv("foo.test", &[("tag1", "bar"), ("tag2", "baz")]),
                "{line}"
            );
        }
        // The two sides are joined as they stand, dots and all.
        assert_eq!(
            roomy("foo.[k=v].test:1|c", all),
            kv("foo..test", &[("k", "v")])
        );
        assert_eq!(
            roomy("foo[k=v].test:1|c", all),
            kv("foo.test", &[("k", "v")])
        );
        // An empty block is no tags.
        assert_eq!(roomy("foo.[]test:1|c", all), kv("foo.test", &[]));
        // The first `]` closes the block; later text, brackets included,
        // is name text (statsd_exporter reads only the first block too).
        assert_eq!(
            roomy("a[x=1]b[y=2]c:1|c", all),
            kv("ab[y=2]c", &[("x", "1")])
        );
        assert_eq!(roomy("a[x=1]b]c:1|c", all), kv("ab]c", &[("x", "1")]));
        // Merged with DogStatsD tags, name tags first.
        assert_eq!(
            roomy("a[x=1]b:1|c|#y:2", all),
            kv("ab", &[("x", "1"), ("y", "2")])
        );
        // Still refused: a `[` never closed, a tag without `=`, a name
        // that is only the block, bad fields after the name.
        assert_eq!(roomy("a[x=1b:1|c", all), Err(ParseError::MalformedTag));
        assert_eq!(roomy("a[x]b:1|c", all), Err(ParseError::MalformedTag));
        assert_eq!(roomy("[x=1]:1|c", all), Err(ParseError::EmptyName));
        assert_eq!(roomy("a[x=1]b:z|c", all), Err(ParseError::MalformedValue));
        assert_eq!(roomy("a[x=1]b:1|q", all), Err(ParseError::UnknownType));
        assert_eq!(roomy("a[x=1]b:1|c|#:v", all), Err(ParseError::MalformedTag));
        // A name joined past the limit is refused like any long name.
        let long = format!("{}[k=v]{}:1|c", "n".repeat(200), "m".repeat(57));
        assert_eq!(roomy(&long, all), Err(ParseError::NameTooLong));
        let fits = format!("{}[k=v]{}:1|c", "n".repeat(200), "m".repeat(56));
        assert_eq!(roomy(&fits, all).map(|(n, _)| n.len()), Ok(MAX_NAME_LEN));
        // SignalFx off: brackets are name text; another name style that
        // comes first picks its own style.
        let no_sfx = all.without(TagStyles::SIGNALFX);
        assert_eq!(roomy("a[x=1]b:1|c", no_sfx), kv("a[x=1]b", &[]));
        assert_eq!(roomy("a,k=v[x=1]b:1|c", all), kv("a", &[("k", "v[x=1]b")]));
        // The room is left alone for every line without a middle block.
        let mut room = String::new();
        let mut lines = parse_datagram_with(
            b"a:1|c\na,k=v:1|c\na[k=v]:1|c\n[k=v]a:1|c\nb[k=v:1|c\nc#k:1|c|#x:y,#z",
            ParseOptions::default(),
        );
        let mut n = 0;
        while lines.next_with_room(&mut room).is_some() {
            n += 1;
        }
        assert_eq!(n, 6);
        assert_eq!(room.capacity(), 0);
    }

    #[test]
    fn a_hash_before_a_dogstatsd_key_is_dropped() {
        let s = sample("foo:100|c|#tag1:bar,#tag2:baz");
        assert_eq!(
            s.tags().collect::<Vec<_>>(),
            [("tag1", "bar"), ("tag2", "baz")]
        );
        assert_eq!(s.tags().len(), 2);
        // The field's own `#` comes first: `|###k` is the key `#k`.
        let s = sample("foo:1|c|###k:v,#bare,#,k2:v2");
        assert_eq!(
            s.tags().collect::<Vec<_>>(),
            [("#k", "v"), ("bare", ""), ("k2", "v2")]
        );
        assert_eq!(s.tags().len(), 3);
        // Only the key's `#`: a value keeps its own.
        let s = sample("foo:1|c|#k:#v");
        assert_eq!(s.tags().collect::<Vec<_>>(), [("k", "#v")]);
        // Name tags are not DogStatsD tags: their `#` is text.
        let s = sample("foo,k=v:1|c|#x:y");
        assert_eq!(s.tags().collect::<Vec<_>>(), [("k", "v"), ("x", "y")]);
        assert_eq!(reject(b"foo:1|c|#:v,#x:y"), "malformed_tag");
        assert_eq!(reject(b"foo:1|c|#k:v,#:w"), "malformed_tag");
    }

    fn with(line: &str, styles: TagStyles) -> Result<Line<'_>, ParseError> {
        parse_line_with(line.as_bytes(), ParseOptions::default().tag_styles(styles))
    }

    fn named(line: &str, styles: TagStyles) -> (String, Vec<(String, String)>) {
        match with(line, styles) {
            Ok(Line::Sample(s)) => (
                s.name.to_string(),
                s.tags()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            other => panic!("{line:?} with {styles:?}: {other:?}"),
        }
    }

    fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_style_turned_off_reads_its_tags_as_name_text_or_an_unknown_field() {
        let all = TagStyles::ALL;
        // InfluxDB off: the text stays in the name (statsd_exporter's rule).
        let no_influx = all.without(TagStyles::INFLUXDB);
        assert_eq!(
            named("a,k=v:1|c|#x:y", no_influx),
            ("a,k=v".into(), tags(&[("x", "y")]))
        );
        // Librato off.
        let no_librato = all.without(TagStyles::LIBRATO);
        assert_eq!(named("a#k=v:1|c", no_librato), ("a#k=v".into(), tags(&[])));
        // SignalFx off: brackets anywhere are name text, never malformed_tag.
        let no_sfx = all.without(TagStyles::SIGNALFX);
        assert_eq!(named("a[k=v]:1|c", no_sfx), ("a[k=v]".into(), tags(&[])));
        assert_eq!(named("[k=v]a:1|c", no_sfx), ("[k=v]a".into(), tags(&[])));
        assert_eq!(named("a[k=v]b:1|c", no_sfx), ("a[k=v]b".into(), tags(&[])));
        assert_eq!(with("a[k=v]b:1|c", all), Err(ParseError::MalformedTag));
        // The first delimiter of a style still on picks the style.
        assert_eq!(
            named("a,b#k=v:1|c", no_influx),
            ("a,b".into(), tags(&[("k", "v")]))
        );
        assert_eq!(
            named("a#b,k=v:1|c", no_librato),
            ("a#b".into(), tags(&[("k", "v")]))
        );
        assert_eq!(
            named("a,b[k=v]:1|c", no_influx),
            ("a,b".into(), tags(&[("k", "v")]))
        );
        // Text that would be a malformed name tag is fine as name text.
        assert_eq!(
            named("a,novalue:1|c", no_influx),
            ("a,novalue".into(), tags(&[]))
        );
        // DogStatsD off: the `|#` field is ignored like an unknown field,
        // whatever it holds, even twice.
        let no_dog = all.without(TagStyles::DOGSTATSD);
        assert_eq!(
            named("a,k=v:1|c|#x:y", no_dog),
            ("a".into(), tags(&[("k", "v")]))
        );
        assert_eq!(named("a:1|c|#:bad|#again", no_dog), ("a".into(), tags(&[])));
        assert_eq!(with("a:1|c|#:bad", all), Err(ParseError::MalformedTag));
        let s = match with("a:2|c|@0.5|#x:y|T12", no_dog) {
            Ok(Line::Sample(s)) => s,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (s.weight(), s.timestamp, s.tags().len()),
            (2.0, Some(12), 0)
        );
        // Nothing on: names keep every delimiter, no tags at all.
        assert_eq!(
            named("a,k=v#x[y]:1|c|#t:u", TagStyles::NONE),
            ("a,k=v#x[y]".into(), tags(&[]))
        );
        // Other errors are unchanged by the switches.
        for styles in [TagStyles::NONE, no_dog, no_influx, all] {
            assert_eq!(with("a,k=v:x|c", styles), Err(ParseError::MalformedValue));
            assert_eq!(
                with(",k=v:1|c", styles).is_err(),
                styles.contains(TagStyles::INFLUXDB)
            );
        }
        // A name made longer by tag text kept in it is still bounded.
        let long = format!("{},k=v:1|c", "n".repeat(MAX_NAME_LEN - 3));
        assert!(with(&long, all).is_ok());
        assert_eq!(with(&long, no_influx), Err(ParseError::NameTooLong));
    }

    #[test]
    fn tag_style_names_and_sets() {
        assert_eq!(TagStyles::default(), TagStyles::ALL);
        assert_eq!(TagStyles::from_name("influxdb"), Some(TagStyles::INFLUXDB));
        assert_eq!(TagStyles::from_name("InfluxDB"), None);
        let names: Vec<_> = TagStyles::ALL.names().collect();
        assert_eq!(names, ["dogstatsd", "influxdb", "librato", "signalfx"]);
        let some = TagStyles::NONE
            .with(TagStyles::LIBRATO)
            .with(TagStyles::DOGSTATSD);
        assert_eq!(some.names().collect::<Vec<_>>(), ["dogstatsd", "librato"]);
        assert!(some.contains(TagStyles::LIBRATO) && !some.contains(TagStyles::SIGNALFX));
        assert_eq!(
            TagStyles::NAMED
                .iter()
                .fold(TagStyles::NONE, |a, (_, s)| a.with(*s)),
            TagStyles::ALL
        );
    }

    #[test]
    fn every_spelling_of_a_series_has_one_route_key() {
        for line in [
            &b"cpu,host=a:5|g"[..],
            b"cpu#host=a:5|g",
            b"cpu[host=a]:5|g",
            b"[host=a]cpu:5|g",
            b"cpu:+1|g|#host:a",
            b"  cpu,dc=x,host=a:1|c\r",
            b"cpu",
            b"c[host=a]pu:5|g",
            b"cp[host=a]u,dc=x:5|g",
        ] {
            assert_eq!(key(line), b"cpu", "{}", String::from_utf8_lossy(line));
        }
        assert_eq!(key(b"a.b:1|c"), b"a.b");
        assert_ne!(key(b"a.b:1|c"), key(b"a.c:1|c"));
        // Only a block with name text after it makes a tail.
        assert_eq!(route_key(b"cpu[host=a]:5|g"), (&b"cpu"[..], &b""[..]));
        assert_eq!(route_key(b"cpu[host=a:5|g"), (&b"cpu"[..], &b""[..]));
        assert_eq!(route_key(b"c[h=a]pu:5|g"), (&b"c"[..], &b"pu"[..]));
    }

    /// [`route_key`]'s two pieces joined, as the router hashes them.
    fn key(line: &[u8]) -> Vec<u8> {
        let (head, tail) = route_key(line);
        [head, tail].concat()
    }

    /// Under every combination of tag styles, two lines that the parser
    /// makes one series (same name, same sorted tags) have the same key.
    #[test]
    fn lines_of_one_parsed_series_share_the_route_key_under_every_tag_style() {
        let spellings: &[&[u8]] = &[
            b"cpu,host=a,dc=x:5|g",
            b"cpu,dc=x,host=a:+1|g",
            b"cpu#host=a,dc=x:1|g",
            b"cpu[dc=x,host=a]:2|g",
            b"[host=a,dc=x]cpu:3|g",
            b"cpu:4|g|#host:a,dc:x",
            b"cpu,host=a:4|g|#dc:x",
            b"  cpu:4|g|#dc:x,host:a",
            b"cpu,x:1|g",
            b"cpu,x:2|g|#k:v",
            b"[a]b,c#d:1|g",
            b"[a]b,c#d:2|g|#k:v",
            b"[a]b,c:2|g|#d",
            b"c[host=a,dc=x]pu:6|g",
            b"cp[dc=x]u:6|g|#host:a",
            b"c[dc=x]pu,host=a:6|g",
            b"[x=1]b[c=d]e:1|g",
            b"b[c=d]e:1|g|#x:1",
            b"b[c=d,x=1]e:1|g",
            b"foo.[k=v]test:1|c",
            b"foo.test[k=v]:1|c",
            b"foo.test,k=v:1|c",
        ];
        for bits in 0..16u8 {
            let styles = TagStyles::NAMED
                .iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .fold(TagStyles::NONE, |acc, (_, (_, s))| acc.with(*s));
            let opts = ParseOptions::default().tag_styles(styles);
            // (name, sorted tags) of each line parsed so far, with its key.
            type Series = (String, Vec<(String, String)>);
            let mut seen: Vec<(Series, Vec<u8>)> = Vec::new();
            for line in spellings {
                let mut room = String::new();
                let Some(Ok(Line::Sample(s))) =
                    parse_datagram_with(line, opts).next_with_room(&mut room)
                else {
                    continue;
                };
                let mut tags: Vec<(String, String)> = s
                    .tags()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                tags.sort();
                tags.dedup_by(|a, b| a.0 == b.0);
                let id = (s.name.to_string(), tags);
                for (other, k) in &seen {
                    if *other == id {
                        assert_eq!(
                            key(line),
                            *k,
                            "styles {bits:04b}: {} and a line of the same series",
                            String::from_utf8_lossy(line)
                        );
                    }
                }
                seen.push((id, key(line)));
            }
        }
    }
}
