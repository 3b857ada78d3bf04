//! What to do after a failed `accept` (typically EMFILE, out of file
//! descriptors): how long to wait before the next one, and whether to log.
//!
//! A pure state machine (no clock, no tokio): the listener calls
//! [`AcceptBackoff::failed`] after each error and sleeps for the returned
//! delay, and [`AcceptBackoff::succeeded`] after each accepted connection.
//! The delay starts at [`FIRST_DELAY`] and doubles up to [`MAX_DELAY`], so a
//! listener out of descriptors neither spins nor stays deaf for long once
//! descriptors are free again. Logging is rate-limited by the back-off time
//! itself: the first failure of a streak is logged, then at most one line
//! per [`LOG_EVERY`] of back-off with the count since the last line.

use std::time::Duration;

/// The wait after the first failure of a streak.
pub const FIRST_DELAY: Duration = Duration::from_millis(10);
/// The longest wait between two accepts while failures continue.
pub const MAX_DELAY: Duration = Duration::from_secs(1);
/// At most one log line per this much back-off while failures continue.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Failures in a row and what has been logged of them.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    /// Failures since the last successful accept.
    streak: u64,
    /// Failures since the last log line.
    unlogged: u64,
    /// Back-off handed out since the last log line.
    since_log: Duration,
}

/// What to do after one failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// Sleep this long (stopping early at shutdown) before accepting again.
    pub delay: Duration,
    /// Whether to log this failure, and how.
    pub log: Option<Report>,
}

/// A log line to write about accept failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// The first failure after a success (or at start).
    First,
    /// Failures continue: `failures` since the last line (this one
    /// included), over `over` of back-off.
    Continuing {
        /// Failures since the last log line, this one included.
        failures: u64,
        /// Back-off time since the last log line.
        over: Duration,
    },
}

impl AcceptBackoff {
    /// A listener with no failures yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one failed accept: the wait before the next accept, and
    /// whether to log.
    pub fn failed(&mut self) -> Failure {
        self.streak += 1;
        self.unlogged += 1;
        let log = if self.streak == 1 {
            Some(Report::First)
        } else if self.since_log >= LOG_EVERY {
            Some(Report::Continuing {
                failures: self.unlogged,
                over: self.since_log,
            })
        } else {
            None
        };
        if log.is_some() {
            self.unlogged = 0;
            self.since_log = Duration::ZERO;
        }
        let delay = delay_after(self.streak);
        self.since_log += delay;
        Failure { delay, log }
    }

    /// Records a successful accept; returns how many failures in a row it
    /// ends (0 if none), for a "recovered" log line.
    pub fn succeeded(&mut self) -> u64 {
        let ended = self.streak;
        *self = Self::default();
        ended
    }
}

/// The wait after the `n`th failure in a row (`n` ≥ 1): 10 ms, 20 ms, 40 ms,
/// … at most 1 s.
fn delay_after(n: u64) -> Duration {
    // 2^7 × 10 ms already exceeds the maximum; stop doubling there.
    let doublings = (n.saturating_sub(1)).min(7) as u32;
    (FIRST_DELAY * 2u32.pow(doublings)).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_delay_doubles_from_10_ms_to_1_s_and_resets_after_a_success() {
        let mut b = AcceptBackoff::new();
        let delays: Vec<Duration> = (0..10).map(|_| b.failed().delay).collect();
        assert_eq!(
            delays,
            [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000].map(ms)
        );
        assert_eq!(b.succeeded(), 10);
        assert_eq!(b.failed().delay, ms(10));
        assert_eq!(b.succeeded(), 1);
        assert_eq!(b.succeeded(), 0);
    }

    #[test]
    fn a_flood_logs_its_first_failure_then_one_line_per_10_s_of_back_off() {
        let mut b = AcceptBackoff::new();
        let mut lines = Vec::new();
        let mut slept = Duration::ZERO;
        // A minute of continuous failures: about 60 at the 1 s maximum.
        while slept < Duration::from_secs(60) {
            let f = b.failed();
            if let Some(r) = f.log {
                lines.push((slept, r));
            }
            slept += f.delay;
        }
        assert_eq!(lines[0], (Duration::ZERO, Report::First));
        // 10 ms … 640 ms (1.27 s), then 1 s each: the 17th failure comes
        // after 10.27 s of back-off and logs the 16 since the first line.
        assert_eq!(
            lines[1],
            (
                ms(10_270),
                Report::Continuing {
                    failures: 16,
                    over: ms(10_270)
                }
            )
        );
        assert!(
            lines.len() <= 7,
            "at most one line per 10 s of a 60 s flood: {lines:?}"
        );
        for pair in lines.windows(2) {
            assert!(pair[1].0 - pair[0].0 >= LOG_EVERY, "{lines:?}");
        }
        let logged: u64 = lines
            .iter()
            .map(|(_, r)| match r {
                Report::First => 1,
                Report::Continuing { failures, .. } => *failures,
            })
            .sum();
        assert!(logged <= b.succeeded());
    }
}
