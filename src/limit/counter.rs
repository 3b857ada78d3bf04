//! The approximate sliding counter: per limit, the previous fixed window
//! weighted by its remaining overlap plus the current window. See the
//! [module docs](super) for the formula and its worst-case overshoot.

use super::{
    decide, Decision, Limit, LimitState, LimitView, Limits, OneLimit, Sliding, SlidingLog,
};
use crate::clock::Timestamp;

/// Approximate sliding-counter state for one key and all its limits.
///
/// Per limit `(N, W)`: fixed windows `[kW, (k+1)W)` aligned on the Unix
/// epoch, the admitted weight `prev` of the previous window and `curr` of the
/// current one. Admits `n` at `now` iff for every limit
/// `prev · (W − elapsed) / W + curr + n ≤ N`, compared exactly (no truncation,
/// no floating point). `O(1)` memory and time per limit; a division only when
/// time jumps two windows or more.
#[derive(Clone, Debug)]
pub struct SlidingCounter(Sliding<Window>);

#[derive(Clone, Copy, Debug)]
struct Window {
    limit: Limit,
    /// Start of the current fixed window: a multiple of `W` since the epoch.
    start: u64,
    prev: u32,
    curr: u32,
}

// === impl Window ===

impl OneLimit for Window {
    fn new(limit: Limit) -> Self {
        Window {
            limit,
            start: 0,
            prev: 0,
            curr: 0,
        }
    }

    fn limit(&self) -> Limit {
        self.limit
    }

    /// Moves the current window to the one containing `now` (`now >= start`).
    #[inline]
    fn advance(&mut self, now: u64) {
        let w = self.limit.window;
        let elapsed = now - self.start;
        if elapsed < w {
            return;
        }
        if elapsed - w < w {
            self.prev = self.curr;
            self.start += w;
        } else {
            self.prev = 0;
            self.start = now - now % w;
        }
        self.curr = 0;
    }

    /// Whether `n` more fit at `now` (after `advance(now)`).
    #[inline]
    fn admits(&self, n: u32, now: u64) -> bool {
        let max = u64::from(self.limit.max);
        let Some(room) = max.checked_sub(u64::from(self.curr) + u64::from(n)) else {
            return false;
        };
        self.prev == 0
            || self.weighted_prev(now) <= u128::from(room) * u128::from(self.limit.window)
    }

    /// Admitted, so `curr + n <= max`.
    #[inline]
    fn record(&mut self, n: u32, _now: u64) {
        self.curr += n;
    }

    /// The current fixed window's own room (`curr <= max`).
    #[inline]
    fn room(&self) -> u32 {
        self.limit.max.saturating_sub(self.curr)
    }

    /// The wait until `n` would be admitted at `now` (after `advance(now)`),
    /// if nothing else is admitted. Exact to the nanosecond: the estimate
    /// never increases while nothing is admitted, so the first admitting
    /// instant is found by solving the formula in the current window, then
    /// the next one (where `prev` is today's `curr` and `curr` is 0), then the
    /// one after (empty).
    fn wait_for(&self, n: u32, now: u64) -> u64 {
        if self.admits(n, now) {
            return 0;
        }
        let w = self.limit.window;
        let max = u64::from(self.limit.max);
        let elapsed = now - self.start;
        let curr = u64::from(self.curr);
        let n = u64::from(n);
        if curr + n <= max {
            let e = self.earliest_elapsed(self.prev, max - curr - n);
            if e < w {
                // e > elapsed, since it does not admit now.
                return e - elapsed;
            }
        }
        // `n <= max` was checked by `acquire`.
        let e = self.earliest_elapsed(self.curr, max - n);
        let to_next = w - elapsed;
        if e < w {
            to_next.saturating_add(e)
        } else {
            to_next.saturating_add(w)
        }
    }

    fn view(&self, now: u64) -> LimitView {
        LimitView {
            limit: self.limit,
            remaining: self.remaining(now),
            reset: self.idle_at().saturating_sub(now),
        }
    }

    /// When the estimate reaches zero if nothing else is admitted.
    fn idle_at(&self) -> u64 {
        let w = self.limit.window;
        if self.curr > 0 {
            self.start.saturating_add(w).saturating_add(w)
        } else if self.prev > 0 {
            self.start.saturating_add(w)
        } else {
            0
        }
    }
}

impl Window {
    /// The estimate at `now` (after `advance(now)`), rounded up.
    fn estimate_ceil(&self, now: u64) -> u32 {
        let left = self.limit.window - (now - self.start);
        let prev = mul_div_ceil(u64::from(self.prev), left, self.limit.window);
        // `prev` is at most `self.prev`, a u32.
        (prev as u32).saturating_add(self.curr)
    }

    /// `prev · (W − elapsed)`: `W` times the weighted previous-window term.
    #[inline]
    fn weighted_prev(&self, now: u64) -> u128 {
        let left = self.limit.window - (now - self.start);
        u128::from(self.prev) * u128::from(left)
    }

    /// The largest `m` with `estimate + m ≤ N`:
    /// `N − curr − ceil(prev · (W − elapsed) / W)`, at least 0.
    fn remaining(&self, now: u64) -> u32 {
        let room = self.limit.max.saturating_sub(self.curr);
        if self.prev == 0 || room == 0 {
            return room;
        }
        let w = self.limit.window;
        let left = w - (now - self.start);
        // ceil(prev · left / W) <= prev <= u32::MAX.
        let used_prev = mul_div_ceil(u64::from(self.prev), left, w);
        room.saturating_sub(used_prev as u32)
    }

    /// The earliest elapsed time in a window with `prev = p` at which
    /// `p · (W − e) ≤ room · W`: `W − ⌊room · W / p⌋`, or 0. May equal `W`,
    /// meaning "not within that window".
    fn earliest_elapsed(&self, p: u32, room: u64) -> u64 {
        if p == 0 {
            return 0;
        }
        let w = self.limit.window;
        if room >= u64::from(p) {
            // room · W / p >= W.
            return 0;
        }
        // room < p, so ⌊room · W / p⌋ < W fits in u64.
        w - mul_div_floor(room, w, u64::from(p))
    }
}

/// `⌊a · b / d⌋`, exactly, for a result below 2^64 and `d > 0`. A 128-bit
/// division is a slow library call; a floating-point estimate corrected with
/// 128-bit products is exact and several times faster when the result is
/// small enough for the estimate to be off by at most a few units.
#[inline]
fn mul_div_floor(a: u64, b: u64, d: u64) -> u64 {
    let x = u128::from(a) * u128::from(b);
    let d128 = u128::from(d);
    // From the u64 factors: converting a u128 to f64 is itself a slow call.
    let estimate = a as f64 * b as f64 / d as f64;
    if estimate >= (1u64 << 52) as f64 {
        // Too large for the estimate to be within a unit.
        return (x / d128) as u64;
    }
    // The estimate is within one unit; step once, then verify (and fall back
    // to the division, never expected). No loops: a search loop gets
    // vectorised into something far slower than the one step it needs.
    let mut q = estimate as u64;
    if u128::from(q) * d128 > x {
        q -= 1;
    } else if (u128::from(q) + 1) * d128 <= x {
        q += 1;
    }
    if u128::from(q) * d128 > x || (u128::from(q) + 1) * d128 <= x {
        return (x / d128) as u64;
    }
    q
}

/// `⌈a · b / d⌉`, exactly, for a result below 2^64 and `d > 0`.
#[inline]
fn mul_div_ceil(a: u64, b: u64, d: u64) -> u64 {
    let q = mul_div_floor(a, b, d);
    if u128::from(q) * u128::from(d) < u128::from(a) * u128::from(b) {
        q + 1
    } else {
        q
    }
}

// === impl SlidingCounter ===

impl SlidingCounter {
    /// A fresh counter for `limits`, nothing admitted.
    #[must_use]
    pub fn new(limits: &Limits) -> Self {
        SlidingCounter(Sliding::new(limits))
    }

    /// This key's counts carried onto `limits` at `now` (a config reload): a
    /// rule whose window is unchanged keeps its fixed windows; a rule with a
    /// new window starts its current fixed window with the estimate of the
    /// old rule with the nearest window, rounded up (see the
    /// [module docs](super#rules-that-change-a-config-reload)).
    #[must_use]
    pub fn carry(&self, limits: &Limits, now: Timestamp) -> SlidingCounter {
        let t = now.as_nanos().max(self.0.last_now);
        let old: Vec<Window> = self
            .0
            .per_limit
            .iter()
            .map(|w| {
                let mut w = *w;
                w.advance(t);
                w
            })
            .collect();
        let mut s = Sliding::<Window>::new(limits);
        s.last_now = t;
        for w in s.per_limit.iter_mut() {
            let win = w.limit.window;
            if let Some(same) = old.iter().find(|o| o.limit.window == win) {
                *w = Window {
                    limit: w.limit,
                    ..*same
                };
                continue;
            }
            // The nearest old window; ties go to the longer.
            let Some(near) = old.iter().min_by_key(|o| {
                (
                    o.limit.window.abs_diff(win),
                    std::cmp::Reverse(o.limit.window),
                )
            }) else {
                continue;
            };
            w.start = t - t % win;
            w.curr = near.estimate_ceil(t);
        }
        SlidingCounter(s)
    }

    /// A counter for `limits` summed from `log`'s entries at `now`: per rule,
    /// the current and previous fixed windows (exact, within what the log
    /// held; see the [module docs](super#rules-that-change-a-config-reload)).
    #[must_use]
    pub fn from_log(log: &SlidingLog, limits: &Limits, now: Timestamp) -> SlidingCounter {
        let t = now.as_nanos().max(log.last_seen().as_nanos());
        let mut s = Sliding::<Window>::new(limits);
        s.last_now = t;
        for w in s.per_limit.iter_mut() {
            let win = w.limit.window;
            w.start = t - t % win;
            for (at, weight) in log.entries() {
                let at = at.min(t);
                if at >= w.start {
                    w.curr = w.curr.saturating_add(weight);
                } else if w.start - at <= win {
                    w.prev = w.prev.saturating_add(weight);
                }
            }
        }
        SlidingCounter(s)
    }

    /// The longest rule's fixed windows at `t` (at or after the latest `now`
    /// seen): the previous window's last nanosecond, its count, and the
    /// current window's count.
    pub(crate) fn latest_counts(&self, t: u64) -> (u64, u32, u32) {
        let mut w = *self
            .0
            .per_limit
            .iter()
            .max_by_key(|w| w.limit.window)
            .unwrap_or(&self.0.per_limit.first);
        w.advance(t.max(self.0.last_now));
        (w.start.saturating_sub(1), w.prev, w.curr)
    }

    /// Per limit, in the order given: the current window's start and the
    /// admitted weight of the previous and current fixed windows, as of the
    /// latest `now` seen (for inspection).
    pub fn counts(&self) -> impl Iterator<Item = (Limit, Timestamp, u32, u32)> + '_ {
        self.0
            .per_limit
            .iter()
            .map(|w| (w.limit, Timestamp::from_nanos(w.start), w.prev, w.curr))
    }
}

/// The [`Decision`] of a counter decided elsewhere (the shared store): per
/// limit, in order, the start of the fixed window containing `now` (nanos, a
/// multiple of the window) and the admitted weight of the previous and
/// current windows *after* the decision. `n` is at most every limit's `max`.
pub(crate) fn decision_from_counts(
    limits: &Limits,
    counts: &[(u64, u32, u32)],
    allowed: bool,
    n: u32,
    now: Timestamp,
) -> Decision {
    let now = now.as_nanos();
    let windows: Vec<Window> = limits
        .as_slice()
        .iter()
        .zip(counts)
        .map(|(&limit, &(start, prev, curr))| Window {
            limit,
            // Keep `start <= now < start + W`, which every method assumes.
            start: start.min(now),
            prev,
            curr,
        })
        .collect();
    let retry = if allowed {
        0
    } else {
        windows
            .iter()
            .map(|w| w.wait_for(n, now))
            .max()
            .unwrap_or(0)
    };
    decide(windows.iter().map(|w| w.view(now)), allowed, retry)
}

limit_state_by_sliding!(SlidingCounter);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::limit::testing::{ok, one, per_second_and_minute, MS, NS, T0};
    use crate::limit::LimitState;

    fn counter(max: u32, window: Duration) -> SlidingCounter {
        one(max, window)
    }

    /// `mul_div_floor` and `mul_div_ceil` against 128-bit division, for
    /// quotients that fit in `u64`.
    fn check_mul_div(a: u64, b: u64, d: u64) -> Result<(), TestCaseError> {
        let x = u128::from(a) * u128::from(b);
        let d128 = u128::from(d);
        prop_assume!(x.div_ceil(d128) <= u128::from(u64::MAX));
        prop_assert_eq!(
            u128::from(mul_div_floor(a, b, d)),
            x / d128,
            "{}·{}/{}",
            a,
            b,
            d
        );
        prop_assert_eq!(
            u128::from(mul_div_ceil(a, b, d)),
            x.div_ceil(d128),
            "{}·{}/{}",
            a,
            b,
            d
        );
        Ok(())
    }

    #[test]
    fn mul_div_is_exact() {
        let cases = [
            (7, 3, 2),
            (0, 5, 3),
            (u64::from(u32::MAX), 999_999_999, 1_000_000_000),
            (u64::from(u32::MAX), u64::MAX, u64::MAX),
            (3, u64::MAX - 1, 7),
            (1 << 40, 1 << 40, (1 << 30) + 1),
            (123_456_789, 987_654_321, 60_000_000_000),
        ];
        for (a, b, d) in cases {
            check_mul_div(a, b, d).unwrap();
        }
    }

    proptest! {
        #[test]
        fn mul_div_matches_128_bit_division(a: u64, b: u64, d in 1u64..) {
            check_mul_div(a, b, d)?;
        }

        #[test]
        fn mul_div_is_exact_for_small_quotients(a in 0u64..1 << 33, b: u64, d: u64) {
            // The shapes the counter uses: a count times a time over a time.
            check_mul_div(a, b, d.max(1))?;
        }
    }

    #[test]
    fn windows_are_aligned_on_the_epoch_grid() {
        let mut c = counter(10, Duration::from_secs(1));
        ok(&mut c, 1, T0 + Duration::from_millis(1500));
        let (_, start, prev, curr) = c.counts().next().unwrap();
        assert_eq!((start, prev, curr), (T0 + Duration::from_secs(1), 0, 1));
    }

    #[test]
    fn previous_window_is_weighted_by_its_remaining_overlap() {
        let mut c = counter(10, Duration::from_secs(1));
        assert!(ok(&mut c, 10, T0 + Duration::from_millis(500)).allowed);
        // At 1.25 s: estimate = 10 · 0.75 = 7.5, so 2 fit and 3 do not.
        let t = T0 + Duration::from_millis(1250);
        assert_eq!(ok(&mut c, 0, t).remaining, 2);
        let d = ok(&mut c, 3, t);
        assert!(!d.allowed);
        // 3 fit once 10 · (1 − e) ≤ 7, at e = 0.3 s.
        assert_eq!(d.retry_after, Some(Duration::from_millis(50)));
        assert!(!ok(&mut c, 3, t + Duration::from_millis(50) - NS).allowed);
        let d = ok(&mut c, 3, t + Duration::from_millis(50));
        assert!(d.allowed);
        // 10 · 0.7 + 3 = 10.
        assert_eq!(d.remaining, 0);
        // Reset: curr > 0, so the estimate is zero at the end of the next window.
        assert_eq!(d.reset, Duration::from_millis(1700));
    }

    #[test]
    fn no_truncation_is_stricter_than_russellluo() {
        // prev = 3, elapsed = 0.5 W: estimate 1.5. RussellLuo truncates to 1
        // and admits 2 more into N = 3; the exact rule admits only 1.
        let mut c = counter(3, Duration::from_secs(1));
        assert!(ok(&mut c, 3, T0).allowed);
        let t = T0 + Duration::from_millis(1500);
        assert!(!ok(&mut c, 2, t).allowed);
        assert!(ok(&mut c, 1, t).allowed);
    }

    #[test]
    fn when_the_current_window_is_full_the_retry_is_in_a_later_window() {
        let w = Duration::from_secs(1);
        let mut c = counter(4, w);
        assert!(ok(&mut c, 4, T0 + Duration::from_millis(200)).allowed);
        // curr = 4 = N: must wait for the next window, where prev = 4 and
        // 1 fits once 4 · (1 − e) ≤ 3, at e = 0.25 s.
        let d = ok(&mut c, 1, T0 + Duration::from_millis(300));
        assert_eq!(d.retry_after, Some(Duration::from_millis(950)));
        // n = N: only once prev has gone too, two windows after.
        let d = ok(&mut c, 4, T0 + Duration::from_millis(300));
        assert_eq!(d.retry_after, Some(Duration::from_millis(1700)));
        assert!(!ok(&mut c, 4, T0 + Duration::from_secs(2) - NS).allowed);
        assert!(ok(&mut c, 4, T0 + Duration::from_secs(2)).allowed);
    }

    #[test]
    fn a_jump_of_two_windows_forgets_everything() {
        let mut c = counter(2, Duration::from_secs(1));
        assert!(ok(&mut c, 2, T0).allowed);
        assert_eq!(c.idle_at(), T0 + Duration::from_secs(2));
        assert!(!c.is_idle(T0 + Duration::from_secs(2) - NS));
        assert!(c.is_idle(T0 + Duration::from_secs(2)));
        let d = ok(&mut c, 2, T0 + Duration::from_secs(2));
        assert!(d.allowed);
        assert_eq!(c.counts().next().unwrap().2, 0);
    }

    #[test]
    fn several_limits_at_once_all_must_admit_and_all_record() {
        let per_m = Limit::per_minute(1000).unwrap();
        let mut c = SlidingCounter::new(&per_second_and_minute(100, 1000));
        let mut admitted = 0;
        for i in 0..4000u64 {
            if ok(&mut c, 1, T0 + Duration::from_millis(5 * i)).allowed {
                admitted += 1;
            }
        }
        // The minute window [T0, T0 + 60 s) has no previous traffic: exactly 1000.
        assert_eq!(admitted, 1000);
        let d = ok(&mut c, 1, T0 + Duration::from_secs(20));
        assert_eq!((d.limit, d.remaining), (per_m, 0));
        assert_eq!(d.retry_after, Some(Duration::from_secs(40) + MS * 60));
        for (l, _, _, curr) in c.counts() {
            if l == per_m {
                assert_eq!(curr, 1000);
            }
        }
    }

    #[test]
    fn denied_requests_do_not_consume() {
        let mut c = counter(2, Duration::from_secs(1));
        assert!(ok(&mut c, 2, T0).allowed);
        for i in 1..1000 {
            assert!(!ok(&mut c, 1, T0 + MS * i).allowed);
        }
        assert_eq!(c.counts().next().unwrap().3, 2);
    }

    #[test]
    fn time_going_backwards_is_treated_as_the_latest_time_seen() {
        let w = Duration::from_secs(1);
        let mut c = counter(2, w);
        assert!(ok(&mut c, 2, T0 + Duration::from_millis(500)).allowed);
        assert!(ok(&mut c, 0, T0 + Duration::from_millis(1500)).allowed);
        // Stale: decided at 1.5 s (estimate 1), not at 0.7 s (estimate 2).
        let d = ok(&mut c, 1, T0 + Duration::from_millis(700));
        assert!(d.allowed);
        let (_, start, prev, curr) = c.counts().next().unwrap();
        assert_eq!((start, prev, curr), (T0 + w, 2, 1));
        assert!(ok(&mut c, 0, Timestamp::EPOCH).allowed);
    }

    #[test]
    fn tiny_windows_and_huge_windows_do_not_overflow() {
        let mut c = counter(5, Duration::from_nanos(1));
        assert!(ok(&mut c, 5, T0).allowed);
        let d = ok(&mut c, 5, T0);
        assert_eq!(d.retry_after, Some(Duration::from_nanos(2)));
        assert!(ok(&mut c, 5, T0 + Duration::from_nanos(2)).allowed);
        let mut c = counter(u32::MAX, Duration::from_nanos(u64::MAX));
        assert!(ok(&mut c, u32::MAX, Timestamp::from_nanos(u64::MAX - 1)).allowed);
        let d = ok(&mut c, 1, Timestamp::from_nanos(u64::MAX - 1));
        assert!(!d.allowed);
        assert_eq!(c.idle_at(), Timestamp::from_nanos(u64::MAX));
    }
}
