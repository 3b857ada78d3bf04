//! Series identity: the raw key used on every line, and the published
//! identity decided once when a series is born.
//!
//! The raw key is the statsd name plus its tags sorted by key, with repeated
//! keys reduced to their first value (in line order), written length-prefixed
//! into a reused buffer: no allocation on a hit. The published identity is the
//! Prometheus name plus the sanitised, sorted labels; two raw keys that would
//! publish the same identity (`a.b` and `a_b`, or `content-type` and
//! `content_type` as tag keys) cannot both exist: the later one is refused as
//! `label_collision`.

use super::measured::Named;
use crate::parse::MAX_TAGS;

/// Reusable scratch space for building raw keys; one per ingest worker.
#[derive(Default)]
pub struct KeyBuf {
    pub(crate) bytes: Vec<u8>,
    /// Valueless tags the last [`build`](Self::build) left out.
    pub(crate) valueless: usize,
}

impl KeyBuf {
    /// Writes the raw key of `sample` into the buffer and returns it; under
    /// [`Valueless::Drop`] tags without a value are left out (counted in
    /// `valueless`).
    pub fn build(&mut self, sample: &impl Named, valueless: Valueless) -> &[u8] {
        self.bytes.clear();
        self.valueless = 0;
        push_part(&mut self.bytes, sample.name());
        // Size the scratch array by the tag count: filling a 64-slot array
        // for every line (2 KiB of stores) cost more than the rest of the
        // key; most lines carry none or a few tags.
        match sample.tags().len() {
            0 => {}
            1..=SMALL_TAGS => self.push_tags::<SMALL_TAGS>(sample, valueless),
            _ => self.push_tags::<MAX_TAGS>(sample, valueless),
        }
        &self.bytes
    }

    fn push_tags<const N: usize>(&mut self, sample: &impl Named, valueless: Valueless) {
        let mut tags: [(&str, &str); N] = [("", ""); N];
        let mut n = 0;
        for t in sample.tags().take(N) {
            tags[n] = t;
            n += 1;
        }
        let (kept, dropped) = sorted_unique(&mut tags[..n], valueless);
        for (k, v) in kept {
            push_part(&mut self.bytes, k);
            push_part(&mut self.bytes, v);
        }
        self.valueless = dropped;
    }

    /// Appends `kind` to the key built last: the key of the same name and
    /// tags as another statsd type, for a name whose types the mapping
    /// rules publish under different names (`test.foo.x` counters as
    /// `test_foo_sum`, gauges as `test_foo_current`). The marker's key
    /// starts with a NUL, which no tag key holds (the parser refuses
    /// control characters), so it never meets a real tag.
    pub(crate) fn push_kind(&mut self, kind: crate::parse::MetricKind) {
        push_part(&mut self.bytes, KIND_MARKER);
        push_part(&mut self.bytes, kind.statsd_type());
    }
}

/// The tag key of [`KeyBuf::push_kind`]'s marker.
const KIND_MARKER: &str = "\0kind";

/// A raw key as an entry keeps it: in the entry itself when it is at most
/// [`INLINE_KEY`] bytes (a tagless name up to 28 bytes, a short name with a
/// short tag), on the heap otherwise. A lookup that finds its entry then
/// compares the key without following a pointer: with 10k series a boxed
/// key was a cache miss on nearly every line.
#[derive(Clone)]
pub enum StoredKey {
    /// Up to [`INLINE_KEY`] bytes, the first `len` of `bytes`.
    Inline {
        /// Bytes used.
        len: u8,
        /// The key, then zeros.
        bytes: [u8; INLINE_KEY],
    },
    /// A longer key.
    Heap(Box<[u8]>),
}

/// Longest key kept inline by [`StoredKey`].
pub const INLINE_KEY: usize = 32;

impl StoredKey {
    /// Stores `key`.
    #[must_use]
    pub fn new(key: &[u8]) -> StoredKey {
        match u8::try_from(key.len()) {
            Ok(len) if key.len() <= INLINE_KEY => {
                let mut bytes = [0; INLINE_KEY];
                bytes[..key.len()].copy_from_slice(key);
                StoredKey::Inline { len, bytes }
            }
            _ => StoredKey::Heap(key.into()),
        }
    }
}

impl std::ops::Deref for StoredKey {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            StoredKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            StoredKey::Heap(b) => b,
        }
    }
}

/// Tag lists up to this long use a small scratch array.
const SMALL_TAGS: usize = 8;

/// The value a tag without one is published with: a bare DogStatsD tag
/// (`|#canary`) or an empty value (`|#canary:`, `name,canary=:`).
/// Prometheus reads an empty label value as no label at all, so
/// `x{canary=""}` and `x` would be one series written twice in a scrape;
/// `true` keeps what the client said (the tag is there) as a value
/// Prometheus can tell apart, as Telegraf's statsd input does.
pub const BARE_TAG_VALUE: &str = "true";

/// What a tag without a value (`|#canary`, `|#canary:`, `name,canary=:`)
/// becomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Valueless {
    /// rollstat's rule: the value [`BARE_TAG_VALUE`].
    #[default]
    True,
    /// statsd_exporter's: the tag is left out (a statsd_exporter mapping
    /// file or `cumulative_names = "statsd_exporter"`).
    Drop,
}

/// Gives valueless tags [`BARE_TAG_VALUE`] (or, under [`Valueless::Drop`],
/// leaves them out), sorts tags by key (stable, so the first value of a
/// repeated key in line order comes first) and drops repeated keys. Returns
/// the kept prefix and how many valueless tags were left out. So
/// `|#canary`, `|#canary:` and `|#canary:true` are one series (or, under
/// `Drop`, the first two are the series without `canary`).
pub fn sorted_unique<'s, 'a>(
    tags: &'s mut [(&'a str, &'a str)],
    valueless: Valueless,
) -> (&'s [(&'a str, &'a str)], usize) {
    let mut n = tags.len();
    let mut dropped = 0;
    if valueless == Valueless::Drop {
        // Keep the tags with values, in line order, at the front.
        let mut w = 0;
        for r in 0..n {
            if tags[r].1.is_empty() {
                dropped += 1;
            } else {
                tags[w] = tags[r];
                w += 1;
            }
        }
        n = w;
    }
    let tags = &mut tags[..n];
    for t in tags.iter_mut() {
        if t.1.is_empty() {
            t.1 = BARE_TAG_VALUE;
        }
    }
    // Insertion sort: stable, allocation-free, and tag lists are short.
    for i in 1..tags.len() {
        let mut j = i;
        while j > 0 && tags[j - 1].0 > tags[j].0 {
            tags.swap(j - 1, j);
            j -= 1;
        }
    }
    let mut kept = 0;
    for i in 0..tags.len() {
        if kept == 0 || tags[kept - 1].0 != tags[i].0 {
            tags[kept] = tags[i];
            kept += 1;
        }
    }
    (&tags[..kept], dropped)
}

/// The name and tags (sorted by key, unique) of a raw key written by
/// [`KeyBuf::build`]; `None` if `key` is not one. For reloads, which
/// re-resolve existing series from their keys.
#[must_use]
pub fn decode(key: &[u8]) -> Option<(&str, Vec<(&str, &str)>)> {
    let mut rest = key;
    let name = take_part(&mut rest)?;
    let mut tags = Vec::new();
    while !rest.is_empty() {
        let k = take_part(&mut rest)?;
        let v = take_part(&mut rest)?;
        // The type marker ([`KeyBuf::push_kind`]) is not a tag.
        if k != KIND_MARKER {
            tags.push((k, v));
        }
    }
    Some((name, tags))
}

fn take_part<'k>(rest: &mut &'k [u8]) -> Option<&'k str> {
    let (len, tail) = rest.split_first_chunk::<4>()?;
    let n = usize::try_from(u32::from_le_bytes(*len)).ok()?;
    let part = tail.get(..n)?;
    *rest = &tail[n..];
    std::str::from_utf8(part).ok()
}

fn push_part(buf: &mut Vec<u8>, s: &str) {
    // Parts are bounded by the parser (names 256 bytes, tags 256 bytes).
    buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_line, Line};

    fn key(line: &str) -> Vec<u8> {
        let Ok(Line::Sample(s)) = parse_line(line.as_bytes()) else {
            panic!("{line}")
        };
        KeyBuf::default().build(&s, Valueless::True).to_vec()
    }

    #[test]
    fn tag_order_does_not_matter_and_the_first_repeated_key_wins() {
        assert_eq!(key("a:1|c|#x:1,y:2"), key("a:1|c|#y:2,x:1"));
        assert_eq!(key("a:1|c|#x:1,x:2"), key("a:1|c|#x:1"));
        assert_ne!(key("a:1|c|#x:1"), key("a:1|c|#x:2"));
        assert_ne!(key("a:1|c|#x:1"), key("a:1|c"));
        // A tag without a value is one with the value `true`.
        assert_eq!(key("a:1|c|#x"), key("a:1|c|#x:true"));
        assert_eq!(key("a:1|c|#x:"), key("a:1|c|#x"));
        assert_ne!(key("a:1|c|#x"), key("a:1|c"));
        // Length prefixes keep "ab"+"c" apart from "a"+"bc".
        assert_ne!(key("a:1|c|#ab:c"), key("a:1|c|#a:bc"));
    }

    #[test]
    fn a_stored_key_is_the_key_inline_or_not() {
        for len in [0, 1, INLINE_KEY - 1, INLINE_KEY, INLINE_KEY + 1, 300] {
            let k: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let s = StoredKey::new(&k);
            assert_eq!(&*s, &k[..]);
            assert_eq!(&*s.clone(), &k[..]);
            assert_eq!(matches!(s, StoredKey::Inline { .. }), len <= INLINE_KEY);
        }
        let short = key("blast.m000003:1|c");
        assert!(matches!(StoredKey::new(&short), StoredKey::Inline { .. }));
    }

    #[test]
    fn a_key_decodes_to_its_name_and_sorted_unique_tags() {
        let k = key("caf\u{e9},z=1:1|c|#a:x:y,bare,a:2");
        assert_eq!(
            decode(&k),
            Some((
                "caf\u{e9}",
                vec![("a", "x:y"), ("bare", BARE_TAG_VALUE), ("z", "1")]
            ))
        );
        assert_eq!(decode(&key("n:1|c")), Some(("n", vec![])));
        // Truncated or odd keys are refused, not misread.
        assert_eq!(decode(&k[..k.len() - 1]), None);
        assert_eq!(decode(&[1, 0, 0]), None);
        assert_eq!(decode(&[1, 0, 0, 0, 0xff]), None);
        let mut odd = key("n:1|c");
        odd.extend_from_slice(&[1, 0, 0, 0, b'k']);
        assert_eq!(decode(&odd), None);
    }
}
