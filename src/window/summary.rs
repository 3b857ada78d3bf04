//! A Prometheus summary's sliding window, as the Go client keeps it (and so
//! statsd_exporter), with time passed in.
//!
//! `age_buckets` [`RankStream`]s each take every value; every `max_age /
//! age_buckets` the oldest (the *head*, the one queries read) is emptied
//! and the next becomes the head. The head therefore holds the values of
//! the last `max_age` at most and of the last `max_age · (1 - 1/age_buckets)`
//! at least, and its quantiles are within the rank error the objectives ask
//! (the smallest of their `error`s).
//!
//! Values wait in a [`Pending`] batch of `buf_cap` (statsd_exporter's
//! `buf_cap`) and are merged into every stream when it fills, when the head
//! moves on (first, so that they count in the streams they were observed
//! in, as the Go client flushes before rotating), and, for a read, into a
//! copy of the head: a scrape always sees every value, whatever `buf_cap`.
//!
//! The head moves on when `now` is past its expiry (the Go client's
//! `time.After`), by as many periods as have passed; after a silence longer
//! than `max_age` every stream is empty.

use std::time::Duration;

use crate::clock::{duration_nanos, Timestamp};
use crate::sketch::rank::{Pending, RankStream};

/// A summary's window of rank-error streams.
#[derive(Clone, Debug)]
pub struct AgedSummary {
    streams: Box<[RankStream]>,
    head: usize,
    head_expires: Timestamp,
    period: u64,
    pending: Pending,
}

impl AgedSummary {
    /// `age_buckets` streams (at least 1) of rank error `epsilon`, the head
    /// moving on every `period` from `now`; batches of `buf_cap` values.
    #[must_use]
    pub fn new(
        epsilon: f64,
        age_buckets: usize,
        period: Duration,
        buf_cap: usize,
        now: Timestamp,
    ) -> AgedSummary {
        let period = duration_nanos(period).max(1);
        AgedSummary {
            streams: (0..age_buckets.max(1))
                .map(|_| RankStream::new(epsilon))
                .collect(),
            head: 0,
            head_expires: Timestamp::from_nanos(now.as_nanos().saturating_add(period)),
            period,
            pending: Pending::new(buf_cap),
        }
    }

    /// Observes `value`, counted `weight` times, at `now`.
    pub fn observe(&mut self, value: f64, weight: u64, now: Timestamp) {
        if now > self.head_expires {
            self.merge_pending();
            self.move_head(now);
        }
        if self.pending.push(value, weight) {
            self.merge_pending();
        }
    }

    /// The quantiles `qs` at `now`, those the head can tell (none while it
    /// holds no value), with every waiting value counted.
    #[must_use]
    pub fn quantiles(&self, qs: &[f64], now: Timestamp) -> Vec<(f64, f64)> {
        let moves = self.moves_due(now);
        if moves >= self.streams.len() as u64 {
            return Vec::new();
        }
        let head = &self.streams[(self.head + moves as usize) % self.streams.len()];
        let read = |s: &RankStream| -> Vec<(f64, f64)> {
            qs.iter()
                .filter_map(|&q| Some((q, s.quantile(q)?)))
                .collect()
        };
        if self.pending.is_empty() {
            return read(head);
        }
        let mut copy = head.clone();
        copy.merge_sorted(&self.pending.sorted_copy(), false);
        read(&copy)
    }

    /// Heap bytes held by the streams and the batch.
    #[must_use]
    pub fn heap_bytes(&self) -> u64 {
        self.streams.iter().map(RankStream::heap_bytes).sum::<u64>() + self.pending.heap_bytes()
    }

    /// How many periods the head has to move on by at `now`.
    fn moves_due(&self, now: Timestamp) -> u64 {
        let (now, expires) = (now.as_nanos(), self.head_expires.as_nanos());
        if now <= expires {
            0
        } else {
            (now - expires - 1) / self.period + 1
        }
    }

    fn merge_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let batch = self.pending.sorted();
        for s in self.streams.iter_mut() {
            s.merge_sorted(batch, true);
        }
        self.pending.clear();
    }

    /// Empties the streams the head passes on its way to `now`.
    fn move_head(&mut self, now: Timestamp) {
        let moves = self.moves_due(now);
        let len = self.streams.len();
        for i in 0..moves.min(len as u64) as usize {
            self.streams[(self.head + i) % len].reset();
        }
        self.head = (self.head + (moves % len as u64) as usize) % len;
        let advance = moves.saturating_mul(self.period);
        self.head_expires =
            Timestamp::from_nanos(self.head_expires.as_nanos().saturating_add(advance));
    }
}

#[cfg(test)]
mod tests;
