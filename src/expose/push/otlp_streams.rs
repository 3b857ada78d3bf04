//! What an OTLP output remembers of each stream (a family's name and a
//! point's attributes) from one push to the next: when it first saw a
//! stream that carries no start time of its own, and, with delta
//! temporality, the cumulative reading it last sent.
//!
//! A stream no push has seen since the one before is forgotten, so the
//! memory holds the streams of one push.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// How an OTLP output reports sums and histograms (`temporality`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Temporality {
    /// Totals since each stream's start: what a Prometheus-bound
    /// collector keeps.
    #[default]
    Cumulative,
    /// What changed since the last push.
    Delta,
}

impl Temporality {
    /// The config spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Temporality::Cumulative => "cumulative",
            Temporality::Delta => "delta",
        }
    }
}

/// One stream's cumulative reading: a counter's value is `count`; a
/// histogram's buckets are `slots`, each a count under a key that names
/// the bucket (all of them only grow, until a reset).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// Its own start time in Unix nanoseconds; 0 when it has none.
    pub start: u64,
    /// The value of a counter; the observations of a histogram.
    pub count: f64,
    /// The sum of a histogram's observations (may go down).
    pub sum: f64,
    /// A histogram's bucket counts by bucket key, keys ascending.
    pub slots: Vec<(i64, f64)>,
}

/// The streams of the last push.
#[derive(Debug, Default)]
pub struct Streams {
    known: HashMap<u64, Known>,
    push: u64,
}

#[derive(Debug)]
struct Known {
    first_seen: u64,
    /// The time and reading last sent (delta temporality).
    last: Option<(u64, Reading)>,
    seen: u64,
}

/// A stream's identity: its family's name, a tag of the point's kind and
/// its attributes in the order they come.
#[must_use]
pub fn stream_id<'a>(
    family: &str,
    kind: u8,
    attrs: impl Iterator<Item = (&'a str, &'a str)>,
) -> u64 {
    let mut h = DefaultHasher::new();
    (family, kind).hash(&mut h);
    attrs.for_each(|kv| kv.hash(&mut h));
    h.finish()
}

impl Streams {
    /// Starts a push.
    pub fn begin(&mut self) {
        self.push += 1;
    }

    /// Ends a push: forgets the streams it did not see.
    pub fn end(&mut self) {
        let push = self.push;
        self.known.retain(|_, k| k.seen == push);
    }

    /// Streams remembered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.known.len()
    }

    /// Whether none is.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    fn see(&mut self, id: u64, now: u64) -> &mut Known {
        let push = self.push;
        let k = self.known.entry(id).or_insert(Known {
            first_seen: now,
            last: None,
            seen: push,
        });
        k.seen = push;
        k
    }

    /// The start time of cumulative stream `id` whose own is `own` (0:
    /// none): its own, else when this output first saw it.
    pub fn start(&mut self, id: u64, own: u64, now: u64) -> u64 {
        let k = self.see(id, now);
        if own != 0 {
            own
        } else {
            k.first_seen
        }
    }

    /// What stream `id` did between the last push and `now`, as its start
    /// and the change. A reset (its own start moved, or a count went
    /// down) reports the reading whole, from its own start. `None` for a
    /// stream first seen now that carries no start of its own: nothing
    /// says over which time its count came.
    pub fn delta(&mut self, id: u64, cur: Reading, now: u64) -> Option<(u64, Reading)> {
        let k = self.see(id, now);
        let last = k.last.replace((now, cur.clone()));
        match last {
            Some((then, prev)) if !reset(&prev, &cur) => Some((then, minus(&cur, &prev))),
            _ if cur.start != 0 => Some((cur.start, cur)),
            _ => None,
        }
    }
}

/// Whether `cur` cannot follow `prev`: another start, a count that went
/// down, or a bucket that went away.
fn reset(prev: &Reading, cur: &Reading) -> bool {
    if prev.start != cur.start || cur.count < prev.count {
        return true;
    }
    let mut c = cur.slots.iter().peekable();
    for (key, was) in &prev.slots {
        while c.next_if(|(k, _)| k < key).is_some() {}
        match c.next() {
            Some((k, now)) if k == key && now >= was => {}
            _ => return true,
        }
    }
    false
}

/// `cur` less `prev`, slot by slot (a slot `prev` lacks counts whole).
fn minus(cur: &Reading, prev: &Reading) -> Reading {
    let before: HashMap<i64, f64> = prev.slots.iter().copied().collect();
    Reading {
        start: cur.start,
        count: cur.count - prev.count,
        sum: cur.sum - prev.sum,
        slots: cur
            .slots
            .iter()
            .map(|(k, v)| (*k, v - before.get(k).copied().unwrap_or(0.0)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, count: f64, slots: &[(i64, f64)]) -> Reading {
        Reading {
            start,
            count,
            sum: count * 2.0,
            slots: slots.to_vec(),
        }
    }

    #[test]
    fn a_stream_without_a_start_starts_when_first_seen_and_keeps_it() {
        let mut s = Streams::default();
        s.begin();
        assert_eq!(s.start(7, 0, 100), 100);
        assert_eq!(s.start(8, 50, 100), 50);
        s.end();
        s.begin();
        assert_eq!(s.start(7, 0, 200), 100);
        s.end();
        s.begin();
        s.end();
        assert!(s.is_empty(), "a stream no push saw is forgotten");
    }

    #[test]
    fn deltas_add_up_to_the_cumulative_value_across_a_reset() {
        let mut s = Streams::default();
        let readings = [
            (10, r(5, 3.0, &[(0, 1.0), (1, 3.0)])),
            (20, r(5, 7.0, &[(0, 2.0), (1, 7.0)])),
            (30, r(25, 2.0, &[(0, 2.0), (1, 2.0)])),
            (40, r(25, 2.0, &[(0, 2.0), (1, 2.0)])),
        ];
        let mut got = Vec::new();
        for (now, cur) in readings {
            s.begin();
            got.push(s.delta(1, cur, now).unwrap());
            s.end();
        }
        let counts: Vec<(u64, f64)> = got.iter().map(|(st, d)| (*st, d.count)).collect();
        assert_eq!(counts, [(5, 3.0), (10, 4.0), (25, 2.0), (30, 0.0)]);
        assert_eq!(got[1].1.slots, [(0, 1.0), (1, 4.0)]);
        assert_eq!(got[1].1.sum, 8.0);
    }

    #[test]
    fn a_bucket_that_goes_down_or_away_is_a_reset() {
        let prev = r(5, 3.0, &[(0, 1.0), (2, 3.0)]);
        assert!(!reset(&prev, &r(5, 3.0, &[(-1, 0.0), (0, 1.0), (2, 3.0)])));
        assert!(reset(&prev, &r(5, 3.0, &[(0, 0.0), (2, 3.0)])));
        assert!(reset(&prev, &r(5, 3.0, &[(0, 1.0)])));
        assert!(reset(&prev, &r(6, 3.0, &[(0, 1.0), (2, 3.0)])));
    }

    #[test]
    fn a_new_stream_without_its_own_start_waits_for_a_second_reading() {
        let mut s = Streams::default();
        s.begin();
        assert_eq!(s.delta(1, r(0, 4.0, &[]), 10), None);
        s.end();
        s.begin();
        let (start, d) = s.delta(1, r(0, 6.0, &[]), 20).unwrap();
        assert_eq!((start, d.count), (10, 2.0));
    }
}
