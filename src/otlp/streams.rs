//! What rollstat remembers of each cumulative stream, to turn its running
//! totals into increments: the last point's start time and values.
//!
//! **Increments.** A stream's next point adds what changed since its last
//! one. A **reset** (the start time moved, the value or a bucket's count
//! went down, the bounds or a finer scale came) adds the new point whole:
//! what was counted since its new start. Never a negative increment.
//!
//! **The first point** of a stream counts whole when it started within
//! [`Streams::fresh`] before now (a service that just started: its total
//! is what it counted since), else only sets the baseline: a long-running
//! service's lifetime total, met when rollstat starts, is not a burst of
//! the last few seconds.
//!
//! **Bounded.** At most `max_streams` streams, holding at most
//! `max_bytes` of bucket counts; a new stream past either is refused
//! ([`Reject::StreamCap`]). A stream not written for `ttl` is forgotten
//! by [`Streams::sweep`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use hashbrown::HashTable;
use parking_lot::Mutex;

use super::reject::Reject;
use crate::clock::Timestamp;

/// What the last point of a cumulative stream said.
#[derive(Clone, Debug, PartialEq)]
pub enum Last {
    /// A sum's running total.
    Sum(f64),
    /// A histogram's or summary's count and sum, and its bucket counts:
    /// explicit buckets from 0, or an exponential side from `offset`.
    Counts {
        /// The total count.
        count: u64,
        /// The total sum.
        sum: f64,
        /// Exponential scale (0 for explicit buckets).
        scale: i32,
        /// The buckets: `(offset, counts)` per side (explicit: one side
        /// at offset 0; exponential: zero bucket, positive, negative).
        sides: Vec<(i32, Vec<u64>)>,
    },
}

impl Last {
    fn bytes(&self) -> usize {
        match self {
            Last::Sum(_) => 0,
            Last::Counts { sides, .. } => sides.iter().map(|s| 8 * s.1.len() + 32).sum(),
        }
    }
}

struct Stream {
    /// The stream's hash (randomly keyed per process: the table's hash too).
    key: u64,
    start: u64,
    last: Last,
    seen: Timestamp,
}

/// Bytes a stream costs besides its buckets (key, entry, table slot).
pub const STREAM_BYTES: usize = 96;

/// The cumulative streams seen, sharded by hash.
pub struct Streams {
    /// Keyed by the stream's hash itself: it is already a keyed hash.
    shards: Box<[Mutex<HashTable<Stream>>]>,
    len: AtomicUsize,
    bytes: AtomicUsize,
    /// Resets seen and not yet taken ([`Streams::take_resets`]).
    resets: AtomicU64,
    max_streams: usize,
    max_bytes: usize,
    ttl: Duration,
    fresh: Duration,
}

/// What a cumulative point adds.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// The point counts whole (a new fresh stream, or a reset).
    Whole,
    /// Only what changed since the last point (for [`Last::Counts`]:
    /// the new `Last` with every count and the sum less the last's).
    Since(Last),
    /// Nothing: the point sets the baseline.
    Baseline,
}

impl Streams {
    /// An empty table.
    #[must_use]
    pub fn new(max_streams: usize, max_bytes: usize, ttl: Duration, fresh: Duration) -> Streams {
        Streams {
            shards: (0..16).map(|_| Mutex::new(HashTable::new())).collect(),
            len: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            resets: AtomicU64::new(0),
            max_streams,
            max_bytes,
            ttl,
            fresh,
        }
    }

    /// How long ago a new stream's start may be for its first point to
    /// count whole.
    #[must_use]
    pub fn fresh(&self) -> Duration {
        self.fresh
    }

    /// Streams remembered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether none is.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The resets seen since the last call (each counted once).
    pub fn take_resets(&self) -> u64 {
        self.resets.swap(0, Ordering::Relaxed)
    }

    /// Bytes the streams hold, estimated.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Remembers `last` for stream `key` (started at `start`) and says what
    /// the point adds.
    ///
    /// # Errors
    ///
    /// [`Reject::StreamCap`] for a new stream past the caps.
    pub fn note(&self, key: u64, start: u64, last: Last, now: Timestamp) -> Result<Change, Reject> {
        // hashbrown takes the slot from the low bits and the tag from the
        // top 7: the shard from bits in between.
        let mut shard = self.shards[(key >> 32) as usize & 15].lock();
        if let Some(s) = shard.find_mut(key, |s| s.key == key) {
            let change = since(s, start, &last);
            if change == Change::Whole {
                self.resets.fetch_add(1, Ordering::Relaxed);
            }
            self.resize(s.last.bytes(), last.bytes());
            (s.start, s.last, s.seen) = (start, last, now);
            return Ok(change);
        }
        let cost = STREAM_BYTES + last.bytes();
        if self.len() >= self.max_streams || self.bytes() + cost > self.max_bytes {
            return Err(Reject::StreamCap);
        }
        let fresh = start != 0 && start >= now.as_nanos().saturating_sub(nanos(self.fresh));
        let stream = Stream {
            key,
            start,
            last,
            seen: now,
        };
        shard.insert_unique(key, stream, |s| s.key);
        self.len.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(cost, Ordering::Relaxed);
        Ok(if fresh {
            Change::Whole
        } else {
            Change::Baseline
        })
    }

    /// Moves the byte count, leaving the shared counter alone (its cache
    /// line unclaimed) when nothing changed, as for every sum.
    fn resize(&self, was: usize, is: usize) {
        match is.cmp(&was) {
            std::cmp::Ordering::Greater => self.bytes.fetch_add(is - was, Ordering::Relaxed),
            std::cmp::Ordering::Less => self.bytes.fetch_sub(was - is, Ordering::Relaxed),
            std::cmp::Ordering::Equal => return,
        };
    }

    /// Forgets the streams not written for the TTL; returns how many.
    pub fn sweep(&self, now: Timestamp) -> usize {
        let mut gone = 0;
        for shard in &self.shards {
            let mut shard = shard.lock();
            shard.retain(|s| {
                let keep = now.as_nanos().saturating_sub(s.seen.as_nanos()) < nanos(self.ttl);
                if !keep {
                    gone += 1;
                    self.bytes
                        .fetch_sub(STREAM_BYTES + s.last.bytes(), Ordering::Relaxed);
                }
                keep
            });
        }
        self.len.fetch_sub(gone, Ordering::Relaxed);
        gone
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What the point `last`, started at `start`, adds to stream `s`.
fn since(s: &Stream, start: u64, last: &Last) -> Change {
    if start != s.start && start != 0 {
        return Change::Whole;
    }
    match (&s.last, last) {
        (Last::Sum(a), Last::Sum(b)) if b >= a => Change::Since(Last::Sum(b - a)),
        (Last::Counts { .. }, Last::Counts { .. }) => counts_since(&s.last, last),
        _ => Change::Whole,
    }
}

/// Counts less the last ones, the last brought to the new scale first;
/// `Whole` if any would go down or the scale got finer.
fn counts_since(was: &Last, is: &Last) -> Change {
    let (
        Last::Counts {
            count: c0,
            sum: s0,
            scale: k0,
            sides: was,
        },
        Last::Counts {
            count: c1,
            sum: s1,
            scale: k1,
            sides: is,
        },
    ) = (was, is)
    else {
        return Change::Whole;
    };
    if k1 > k0 || was.len() != is.len() || c1 < c0 {
        return Change::Whole;
    }
    let shift = (k0 - k1) as u32;
    let mut out = Vec::with_capacity(is.len());
    for ((o0, w), (o1, n)) in was.iter().zip(is) {
        let mut d = n.clone();
        for (j, &c) in w.iter().enumerate() {
            // Index j of the last point at the new (coarser) scale.
            let k = (i64::from(*o0) + j as i64) >> shift;
            let Some(slot) = usize::try_from(k - i64::from(*o1))
                .ok()
                .and_then(|i| d.get_mut(i))
            else {
                if c == 0 {
                    continue;
                }
                return Change::Whole;
            };
            let Some(left) = slot.checked_sub(c) else {
                return Change::Whole;
            };
            *slot = left;
        }
        out.push((*o1, d));
    }
    Change::Since(Last::Counts {
        count: c1 - c0,
        sum: s1 - s0,
        scale: *k1,
        sides: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp::from_secs(1_767_225_600);
    const START: u64 = T0.as_nanos() - 1_000_000_000;

    fn streams() -> Streams {
        Streams::new(4, 1 << 20, Duration::from_secs(60), Duration::from_secs(60))
    }

    fn counts(count: u64, scale: i32, sides: &[(i32, &[u64])]) -> Last {
        Last::Counts {
            count,
            sum: count as f64,
            scale,
            sides: sides.iter().map(|(o, c)| (*o, c.to_vec())).collect(),
        }
    }

    #[test]
    fn a_fresh_stream_counts_whole_then_adds_what_changed() {
        let s = streams();
        assert_eq!(s.note(1, START, Last::Sum(5.0), T0), Ok(Change::Whole));
        assert_eq!(
            s.note(1, START, Last::Sum(7.5), T0),
            Ok(Change::Since(Last::Sum(2.5)))
        );
    }

    #[test]
    fn a_stream_that_started_long_ago_or_never_says_only_sets_the_baseline() {
        let s = streams();
        let old = T0.as_nanos() - 3_600_000_000_000;
        assert_eq!(s.note(1, old, Last::Sum(1e6), T0), Ok(Change::Baseline));
        assert_eq!(s.note(2, 0, Last::Sum(1e6), T0), Ok(Change::Baseline));
        assert_eq!(
            s.note(1, old, Last::Sum(1e6 + 1.0), T0),
            Ok(Change::Since(Last::Sum(1.0)))
        );
    }

    #[test]
    fn a_new_start_or_a_drop_is_a_reset_counted_whole() {
        let s = streams();
        s.note(1, START, Last::Sum(10.0), T0).unwrap();
        assert_eq!(s.note(1, START, Last::Sum(3.0), T0), Ok(Change::Whole));
        assert_eq!(s.note(1, START + 1, Last::Sum(4.0), T0), Ok(Change::Whole));
        assert_eq!((s.take_resets(), s.take_resets()), (2, 0));
        s.note(2, START, counts(3, 0, &[(0, &[1, 2])]), T0).unwrap();
        assert_eq!(
            s.note(2, START, counts(3, 0, &[(0, &[2, 1])]), T0),
            Ok(Change::Whole)
        );
    }

    #[test]
    fn bucket_counts_are_subtracted_across_a_coarser_scale() {
        let s = streams();
        // Scale 1, indices 4..=7; then scale 0, where they are 2..=3.
        s.note(1, START, counts(4, 1, &[(4, &[1, 1, 1, 1])]), T0)
            .unwrap();
        let next = counts(7, 0, &[(2, &[3, 4])]);
        assert_eq!(
            s.note(1, START, next, T0),
            Ok(Change::Since(Last::Counts {
                count: 3,
                sum: 3.0,
                scale: 0,
                sides: vec![(2, vec![1, 2])],
            }))
        );
        // A finer scale than the last is a reset.
        assert_eq!(
            s.note(1, START, counts(8, 1, &[(4, &[2, 2, 2, 2])]), T0),
            Ok(Change::Whole)
        );
    }

    #[test]
    fn new_streams_past_the_caps_are_refused_and_swept_ones_make_room() {
        let s = streams();
        for k in 0..4 {
            s.note(k, START, Last::Sum(1.0), T0).unwrap();
        }
        assert_eq!(s.note(9, START, Last::Sum(1.0), T0), Err(Reject::StreamCap));
        assert_eq!(s.sweep(T0 + Duration::from_secs(61)), 4);
        assert_eq!((s.len(), s.bytes()), (0, 0));
        assert!(s.note(9, START, Last::Sum(1.0), T0).is_ok());
        let small = Streams::new(
            10,
            STREAM_BYTES + 40,
            Duration::from_secs(60),
            Duration::ZERO,
        );
        assert_eq!(
            small.note(1, START, counts(1, 0, &[(0, &[1])]), T0),
            Ok(Change::Baseline)
        );
        assert_eq!(
            small.note(2, START, counts(1, 0, &[(0, &[1])]), T0),
            Err(Reject::StreamCap)
        );
    }
}
