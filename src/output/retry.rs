//! What to do with a batch after a try, and how long to wait before the
//! next: pure, the randomness of the jitter handed in.

use std::time::Duration;

use hyper::StatusCode;

use super::metrics::retry;

/// What an answer (or its absence) means for the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// 2xx: delivered; the batch is done and never sent again.
    Sent,
    /// A 4xx other than 429 (or an answer a sender cannot act on, 1xx or
    /// 3xx): the receiver will never take it; dropped, counted.
    Refused,
    /// 5xx, 429 or no answer: tried again later, `reason` counted.
    Retry {
        /// One of [`retry::ALL`].
        reason: &'static str,
    },
}

/// The fate of a batch answered `status`.
#[must_use]
pub fn of_status(status: StatusCode) -> Fate {
    match status.as_u16() {
        200..=299 => Fate::Sent,
        429 => Fate::Retry {
            reason: retry::TOO_MANY_REQUESTS,
        },
        500..=599 => Fate::Retry {
            reason: retry::SERVER_ERROR,
        },
        _ => Fate::Refused,
    }
}

/// Capped exponential back-off with jitter: the `n`-th wait in a row is
/// drawn uniformly from the upper half of `min × 2ⁿ` (at most `max`), so
/// that outputs of many instances that failed together do not retry
/// together.
#[derive(Clone, Debug)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    tries: u32,
    /// xorshift64 state: the jitter's randomness.
    seed: u64,
}

impl Backoff {
    /// Waits from `min` up to `max`; `seed` (not 0) draws the jitter.
    #[must_use]
    pub fn new(min: Duration, max: Duration, seed: u64) -> Backoff {
        Backoff {
            min,
            max: max.max(min),
            tries: 0,
            seed: seed | 1,
        }
    }

    /// The wait before the next try after a failure; `asked` is a
    /// `Retry-After`, which is waited out whole (up to `max`, and never
    /// less than the back-off).
    pub fn failed(&mut self, asked: Option<Duration>) -> Duration {
        let full = self
            .min
            .saturating_mul(1u32 << self.tries.min(20))
            .min(self.max);
        self.tries = self.tries.saturating_add(1);
        let half = full / 2;
        let jitter = half.mul_f64(self.next_unit());
        let wait = half + jitter;
        asked.map_or(wait, |a| a.min(self.max).max(wait))
    }

    /// A try succeeded (or the batch was given up): the next failure
    /// starts from `min` again.
    pub fn reset(&mut self) {
        self.tries = 0;
    }

    /// A number in [0, 1).
    fn next_unit(&mut self) -> f64 {
        let mut x = self.seed;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.seed = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_decide_the_fate() {
        let fate = |s: u16| of_status(StatusCode::from_u16(s).unwrap());
        assert_eq!(fate(200), Fate::Sent);
        assert_eq!(fate(204), Fate::Sent);
        for s in [400, 401, 403, 404, 413, 415, 301] {
            assert_eq!(fate(s), Fate::Refused, "{s}");
        }
        assert_eq!(
            fate(429),
            Fate::Retry {
                reason: "too_many_requests"
            }
        );
        for s in [500, 502, 503, 504] {
            assert_eq!(
                fate(s),
                Fate::Retry {
                    reason: "server_error"
                },
                "{s}"
            );
        }
    }

    #[test]
    fn waits_double_within_their_jitter_up_to_the_cap() {
        let (min, max) = (Duration::from_millis(100), Duration::from_secs(2));
        let mut b = Backoff::new(min, max, 42);
        let mut full = min;
        for _ in 0..12 {
            let w = b.failed(None);
            assert!(
                w >= full / 2 && w <= full,
                "{w:?} outside [{:?}, {full:?}]",
                full / 2
            );
            full = (full * 2).min(max);
        }
        b.reset();
        assert!(b.failed(None) <= min);
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(30), 1);
        assert_eq!(
            b.failed(Some(Duration::from_secs(5))),
            Duration::from_secs(5)
        );
        assert_eq!(
            b.failed(Some(Duration::from_secs(600))),
            Duration::from_secs(30)
        );
        let w = b.failed(Some(Duration::ZERO));
        assert!(
            w >= Duration::from_millis(200),
            "never less than the back-off: {w:?}"
        );
    }

    #[test]
    fn jitter_spreads_the_waits() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(1), 9);
        let waits: std::collections::BTreeSet<Duration> = (0..50).map(|_| b.failed(None)).collect();
        assert!(waits.len() > 40, "{} distinct waits", waits.len());
    }
}
