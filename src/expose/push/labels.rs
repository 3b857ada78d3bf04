//! A sample's label set as remote write wants it: every label, `__name__`
//! included, sorted by name, each a `Label` message field.
//!
//! A series' labels are sorted once ([`Labels::sort`]); each of its
//! samples then adds `__name__` and at most one more (`q`, `le`,
//! `quantile`), merged in at their places while the series' already
//! encoded labels are copied in runs ([`Labels::write`]).

use crate::expose::proto::wire;

/// A sorted label set, names and values in one arena, each label's
/// encoded `Label` field kept beside.
#[derive(Default)]
pub(crate) struct Labels {
    /// Names and values, back to back.
    arena: Vec<u8>,
    /// Per label: where its name and value are in `arena`.
    items: Vec<Item>,
    /// The labels' `Label` fields, in sorted order once sorted.
    encoded: Vec<u8>,
    /// Where each label's field begins in `encoded` (and its end).
    starts: Vec<usize>,
}

#[derive(Clone, Copy)]
struct Item {
    name: (u32, u32),
    value: (u32, u32),
}

/// A label added to one sample (`__name__`, `le`, ...).
pub(crate) type Extra<'a> = (&'a [u8], &'a [u8]);

impl Labels {
    /// Forgets every label.
    pub(crate) fn clear(&mut self) {
        self.arena.clear();
        self.items.clear();
        self.encoded.clear();
        self.starts.clear();
    }

    /// Adds a label (call [`sort`](Labels::sort) before writing).
    pub(crate) fn push(&mut self, name: &[u8], value: &[u8]) {
        let at = |arena: &mut Vec<u8>, s: &[u8]| {
            let start = arena.len() as u32;
            arena.extend_from_slice(s);
            (start, arena.len() as u32)
        };
        let name = at(&mut self.arena, name);
        let value = at(&mut self.arena, value);
        self.items.push(Item { name, value });
    }

    /// Copies `other`'s labels in (the series' labels into a window's set).
    pub(crate) fn extend_from(&mut self, other: &Labels) {
        for i in &other.items {
            self.push(other.slice(i.name), other.slice(i.value));
        }
    }

    fn slice(&self, (s, e): (u32, u32)) -> &[u8] {
        &self.arena[s as usize..e as usize]
    }

    fn name(&self, i: usize) -> &[u8] {
        self.slice(self.items[i].name)
    }

    /// Sorts the labels by name and encodes each one's field.
    pub(crate) fn sort(&mut self) {
        let mut items = std::mem::take(&mut self.items);
        items.sort_by(|a, b| self.slice(a.name).cmp(self.slice(b.name)));
        self.items = items;
        self.encoded.clear();
        self.starts.clear();
        let mut encoded = std::mem::take(&mut self.encoded);
        for it in &self.items {
            self.starts.push(encoded.len());
            wire::label(&mut encoded, self.slice(it.name), self.slice(it.value));
        }
        self.encoded = encoded;
        self.starts.push(self.encoded.len());
    }

    /// Bytes [`write`](Labels::write) appends with `extras`.
    pub(crate) fn len_with(&self, extras: &[Extra<'_>]) -> usize {
        self.encoded.len() + extras.iter().map(|(n, v)| label_len(n, v)).sum::<usize>()
    }

    /// Appends every label and `extras` (sorted by name, none equal to a
    /// label's) as `Label` fields, in name order.
    pub(crate) fn write(&self, out: &mut Vec<u8>, extras: &[Extra<'_>]) {
        let mut from = 0;
        for (n, v) in extras {
            let at = from
                + (from..self.items.len())
                    .take_while(|&i| self.name(i) < *n)
                    .count();
            out.extend_from_slice(&self.encoded[self.starts[from]..self.starts[at]]);
            wire::label(out, n, v);
            from = at;
        }
        out.extend_from_slice(&self.encoded[self.starts[from]..]);
    }
}

/// Bytes of one `Label` field.
pub(crate) fn label_len(name: &[u8], value: &[u8]) -> usize {
    let body = 2
        + wire::varint_len(name.len() as u64)
        + name.len()
        + wire::varint_len(value.len() as u64)
        + value.len();
    1 + wire::varint_len(body as u64) + body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(mut b: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while !b.is_empty() {
            assert_eq!(b[0], 0x0a);
            let len = b[1] as usize;
            let body = &b[2..2 + len];
            let nl = body[1] as usize;
            let name = String::from_utf8(body[2..2 + nl].to_vec()).unwrap();
            let vl = body[3 + nl] as usize;
            let value = String::from_utf8(body[4 + nl..4 + nl + vl].to_vec()).unwrap();
            out.push((name, value));
            b = &b[2 + len..];
        }
        out
    }

    #[test]
    fn extras_are_merged_in_name_order() {
        let mut l = Labels::default();
        for (n, v) in [
            ("window", "1m"),
            ("Zone", "eu"),
            ("metric", "api.x"),
            ("a", "1"),
        ] {
            l.push(n.as_bytes(), v.as_bytes());
        }
        l.sort();
        let extras: [Extra<'_>; 2] = [(b"__name__", b"rollstat_window_rate"), (b"q", b"0.99")];
        let mut out = Vec::new();
        l.write(&mut out, &extras);
        assert_eq!(out.len(), l.len_with(&extras));
        let names: Vec<String> = decode(&out).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["Zone", "__name__", "a", "metric", "q", "window"]);
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }

    #[test]
    fn no_extras_and_no_labels_write_what_is_there() {
        let mut l = Labels::default();
        l.sort();
        let mut out = Vec::new();
        l.write(&mut out, &[(b"__name__", b"up")]);
        assert_eq!(decode(&out), [("__name__".into(), "up".into())]);
    }
}
