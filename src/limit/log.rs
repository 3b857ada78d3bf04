//! The exact sliding log: one ring of admitted `(timestamp, weight)` entries
//! per limit. See the [module docs](super) for the rule and its guarantees.

use super::cells::{long_times, Cells, Entry};
use super::{Limit, LimitState, LimitView, Limits, OneLimit, Sliding, SlidingCounter};
use crate::clock::Timestamp;

/// Initial ring capacity (entries) for a limit, so small limits allocate once
/// and large ones start small and double only while their traffic needs it.
const INITIAL_ENTRIES: u32 = 64;

/// Exact sliding-log state for one key and all its limits.
///
/// Admits a request of weight `n` at `now` iff every limit `(N, W)` holds at
/// most `N − n` admitted weight in `(now − W, now]`. A decision costs
/// `O(limits)` plus the entries that expire (amortised `O(1)` each) and
/// allocates nothing once the rings have reached their working size.
#[derive(Clone, Debug)]
pub struct SlidingLog(Sliding<Ring>);

/// One limit's log: a ring of admitted entries, oldest first, plus copies of
/// what a decision reads (the oldest entry, the second oldest's time, the
/// newest's time), so that deciding reads no ring memory in the common
/// cases. The ring is the truth; the copies are kept equal to it (see
/// [`Ring::check`]).
///
/// Why the copies: with many keys, the ring's entries are rarely in cache (an
/// entry is read one window after it was written). A decision that must load
/// the oldest entry to know whether it expired waits for memory twice, the
/// key's slot and then its ring. With the copies, the expiry of the oldest
/// entry and the retry time are decided from the slot alone; the ring is
/// then only written (an append is a plain store) or read to refill a copy
/// that no part of the current decision waits for.
#[derive(Clone, Debug)]
struct Ring {
    /// The limit's `max` and `window` (a [`Limit`], without its padding).
    max: u32,
    window: u64,
    /// Admitted requests, oldest at `head`, `len` of them, wrapping around;
    /// strictly increasing timestamps (requests at the same timestamp share
    /// an entry). Grows by doubling while full, up to `max` entries (what
    /// the window can hold), and never shrinks.
    buf: Cells,
    head: u32,
    len: u32,
    /// Sum of the weights in the ring; at most `limit.max`, unless a reload
    /// lowered `max` below what the carried entries hold.
    used: u64,
    /// Timestamp of the newest entry, when `len > 0`.
    newest: u64,
    /// A copy of the oldest entry, when `len > 0` (two fields rather than
    /// an [`Entry`], which would bring 4 bytes of padding).
    first_at: u64,
    first_weight: u32,
    /// Timestamp of the second oldest entry, when `len > 1`.
    second_at: u64,
}

// === impl Ring ===

impl OneLimit for Ring {
    fn new(limit: Limit) -> Self {
        Ring {
            max: limit.max,
            window: limit.window,
            buf: Cells::new(
                limit.max.min(INITIAL_ENTRIES) as usize,
                long_times(limit.window),
            ),
            head: 0,
            len: 0,
            used: 0,
            newest: 0,
            first_at: 0,
            first_weight: 0,
            second_at: 0,
        }
    }

    #[inline]
    fn limit(&self) -> Limit {
        Limit {
            max: self.max,
            window: self.window,
        }
    }

    /// Drops the entries that left `(now − W, now]`: those with `at + W <= now`.
    /// Needs `now >= at` for every entry (the clamp guarantees it).
    #[inline(always)]
    fn advance(&mut self, now: u64) {
        let w = self.window;
        if self.len == 0 || now - self.first_at < w {
            return;
        }
        // The oldest entry leaves. If the second stays (the steady state),
        // the copies are refilled from the ring, which nothing in this
        // decision waits for.
        if self.len > 1 && now - self.second_at < w {
            let long = long_times(w);
            let cap = self.buf.len(long);
            let head = wrap(self.head as usize + 1, cap);
            self.used -= u64::from(self.first_weight);
            self.head = head as u32;
            self.len -= 1;
            self.first_at = self.second_at;
            self.first_weight = self.buf.weight(head, long);
            if self.len > 1 {
                self.second_at = self.buf.get(wrap(head + 1, cap), long, self.newest).at;
            }
            return;
        }
        self.advance_more(now);
    }

    #[inline]
    fn admits(&self, n: u32, _now: u64) -> bool {
        self.used + u64::from(n) <= u64::from(self.max)
    }

    #[inline(always)]
    fn record(&mut self, n: u32, now: u64) {
        self.used += u64::from(n);
        if self.len > 0 && self.newest == now {
            self.merge_back(n);
        } else {
            self.push(Entry { at: now, weight: n });
        }
    }

    #[inline]
    fn room(&self) -> u32 {
        // At most `max`; nothing when a reload lowered `max` below `used`.
        u64::from(self.max).saturating_sub(self.used) as u32
    }

    /// The wait until `n` more would fit, if nothing else is admitted: walk the
    /// oldest entries until enough weight has left the window.
    #[inline]
    fn wait_for(&self, n: u32, now: u64) -> u64 {
        let excess = (self.used + u64::from(n)).saturating_sub(u64::from(self.max));
        if excess == 0 {
            return 0;
        }
        // Usually the oldest entry alone is enough.
        if self.len > 0 && u64::from(self.first_weight) >= excess {
            return self.first_at.saturating_add(self.window) - now;
        }
        self.wait_for_more(excess, now)
    }

    #[inline]
    fn view(&self, now: u64) -> LimitView {
        LimitView {
            limit: self.limit(),
            // At most `max`, so this fits in u32 (`used` may exceed a `max`
            // lowered by a reload: nothing remains then).
            remaining: u64::from(self.max).saturating_sub(self.used) as u32,
            reset: self.idle_at().saturating_sub(now),
        }
    }

    #[inline]
    fn idle_at(&self) -> u64 {
        if self.len == 0 {
            0
        } else {
            self.newest.saturating_add(self.window)
        }
    }
}

impl Ring {
    /// Index `i` (below twice the capacity) wrapped into the ring. The
    /// capacity is at most `u32::MAX` entries (`max` bounds it, or the
    /// entries carried at a reload, which an older `max` bounded), so the
    /// result fits in `u32`.
    #[inline]
    fn wrap(&self, i: usize) -> usize {
        wrap(i, self.buf.len(self.long()))
    }

    /// The entries, oldest first.
    fn iter(&self) -> impl Iterator<Item = Entry> + Clone + '_ {
        (0..self.len as usize).map(|i| self.get(self.head as usize + i))
    }

    /// The entry `i` cells after the start of the buffer, wrapped (`i`
    /// below twice the capacity).
    #[inline(always)]
    fn get(&self, i: usize) -> Entry {
        self.buf.get(self.wrap(i), self.long(), self.newest)
    }

    /// Whether the cells keep whole times ([`long_times`]).
    #[inline(always)]
    fn long(&self) -> bool {
        long_times(self.window)
    }

    /// Adds `n` to the newest entry (a request at its timestamp). Saturates:
    /// only a reload carrying more than `u32::MAX` at one instant gets there.
    #[inline]
    fn merge_back(&mut self, n: u32) {
        let back = self.wrap(self.head as usize + self.len as usize - 1);
        self.buf.add_weight(back, self.long(), n);
        if self.len == 1 {
            self.first_weight = self.first_weight.saturating_add(n);
        }
    }

    /// Appends `e` (later than every entry), growing the ring if full.
    #[inline(always)]
    fn push(&mut self, e: Entry) {
        let long = self.long();
        let mut cap = self.buf.len(long);
        if self.len as usize == cap {
            self.grow();
            cap = self.buf.len(long);
        }
        let tail = wrap(self.head as usize + self.len as usize, cap);
        self.buf.set(tail, long, e);
        match self.len {
            0 => (self.first_at, self.first_weight) = (e.at, e.weight),
            1 => self.second_at = e.at,
            _ => {}
        }
        self.len += 1;
        self.newest = e.at;
    }

    /// Doubles the capacity (up to `max` entries, which a window can never
    /// exceed, or one more than now after a reload lowered `max`), oldest
    /// entry first.
    #[cold]
    fn grow(&mut self) {
        let len = self.len as usize;
        let cap = (len * 2).max(1).min(self.max as usize).max(len + 1);
        let long = self.long();
        let mut buf = Cells::new(cap, long);
        for (i, e) in self.iter().enumerate() {
            buf.set(i, long, e);
        }
        self.buf = buf;
        self.head = 0;
    }

    /// `advance` when more than the oldest entry may leave: drops entries
    /// one by one from the ring, then refills the copies.
    #[cold]
    fn advance_more(&mut self, now: u64) {
        let w = self.window;
        while self.len > 0 {
            let e = self.get(self.head as usize);
            if now - e.at < w {
                break;
            }
            self.used -= u64::from(e.weight);
            self.head = self.wrap(self.head as usize + 1) as u32;
            self.len -= 1;
        }
        if self.len > 0 {
            let e = self.get(self.head as usize);
            (self.first_at, self.first_weight) = (e.at, e.weight);
        }
        if self.len > 1 {
            self.second_at = self.get(self.head as usize + 1).at;
        }
    }

    /// `wait_for` when several entries must expire.
    #[cold]
    fn wait_for_more(&self, excess: u64, now: u64) -> u64 {
        let mut freed = 0u64;
        for e in self.iter() {
            freed += u64::from(e.weight);
            if freed >= excess {
                // Entry `e` leaves the window at `e.at + W` (> now, unexpired).
                return e.at.saturating_add(self.window) - now;
            }
        }
        // Unreachable when `n <= max` (checked before): all entries expiring
        // frees `used >= excess`.
        0
    }

    /// Whether the copies and the sums agree with the ring (tests).
    #[cfg(test)]
    fn check(&self) -> Result<(), String> {
        let entries: Vec<Entry> = self.iter().collect();
        let sum: u64 = entries.iter().map(|e| u64::from(e.weight)).sum();
        let sorted = entries.windows(2).all(|p| p[0].at < p[1].at);
        let ok = sum == self.used
            && sorted
            && entries.iter().all(|e| e.weight > 0)
            && entries
                .first()
                .is_none_or(|e| (e.at, e.weight) == (self.first_at, self.first_weight))
            && entries.get(1).is_none_or(|e| e.at == self.second_at)
            && entries.last().is_none_or(|e| e.at == self.newest);
        if ok {
            Ok(())
        } else {
            Err(format!("{self:?}"))
        }
    }
}

/// Index `i` (below `2 * cap`) wrapped into a ring of `cap` cells.
#[inline(always)]
fn wrap(i: usize, cap: usize) -> usize {
    if i >= cap {
        i - cap
    } else {
        i
    }
}

// === impl SlidingLog ===

impl SlidingLog {
    /// A fresh log for `limits`, nothing admitted.
    #[must_use]
    pub fn new(limits: &Limits) -> Self {
        SlidingLog(Sliding::new(limits))
    }

    /// This key's history carried onto `limits` at `now` (a config reload):
    /// the entries of the old longest window that lie inside each new window
    /// (see the [module docs](super#rules-that-change-a-config-reload)).
    #[must_use]
    pub fn carry(&self, limits: &Limits, now: Timestamp) -> SlidingLog {
        let t = now.as_nanos().max(self.0.last_now);
        SlidingLog::from_entries(limits, t, self.entries())
    }

    /// A log for `limits` holding what `counter` counted, each fixed window
    /// of its longest rule as one entry at the latest time it could have
    /// happened (see the [module docs](super#rules-that-change-a-config-reload)).
    #[must_use]
    pub fn from_counter(counter: &SlidingCounter, limits: &Limits, now: Timestamp) -> SlidingLog {
        let t = now.as_nanos().max(counter.last_seen().as_nanos());
        let (prev_end, prev, curr) = counter.latest_counts(t);
        let mut entries = Vec::with_capacity(2);
        if prev > 0 {
            entries.push((prev_end, prev));
        }
        if curr > 0 {
            entries.push((t, curr));
        }
        SlidingLog::from_entries(limits, t, entries)
    }

    /// The admitted `(t, weight)` entries of the longest window, oldest
    /// first: every admitted request still inside it, since every limit
    /// records every admitted request.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (u64, u32)> + Clone + '_ {
        let longest = self
            .0
            .per_limit
            .iter()
            .max_by_key(|r| r.window)
            .unwrap_or(&self.0.per_limit.first);
        longest.iter().map(|e| (e.at, e.weight))
    }

    /// A log for `limits` at `t` holding `entries` (oldest first, none
    /// after `t`), each limit keeping those inside its window.
    fn from_entries(
        limits: &Limits,
        t: u64,
        entries: impl IntoIterator<Item = (u64, u32)> + Clone,
    ) -> SlidingLog {
        let mut s = Sliding::<Ring>::new(limits);
        s.last_now = t;
        for r in s.per_limit.iter_mut() {
            for (at, weight) in entries.clone() {
                let at = at.min(t);
                if t - at >= r.window || weight == 0 {
                    continue;
                }
                r.used += u64::from(weight);
                if r.len > 0 && r.newest == at {
                    r.merge_back(weight);
                } else {
                    r.push(Entry { at, weight });
                }
            }
        }
        SlidingLog(s)
    }

    /// The admitted weight still inside each limit's window at the latest
    /// `now` seen, in the order the limits were given (for inspection).
    pub fn used(&self) -> impl Iterator<Item = (Limit, u64)> + '_ {
        self.0.per_limit.iter().map(|r| (r.limit(), r.used))
    }
}

limit_state_by_sliding!(SlidingLog);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::Timestamp;
    use crate::limit::testing::{ok, one, per_second_and_minute, NS, T0};
    use crate::limit::{AcquireError, LimitState};

    fn log(max: u32, window: Duration) -> SlidingLog {
        one(max, window)
    }

    #[test]
    fn a_request_exactly_one_window_earlier_no_longer_counts() {
        let w = Duration::from_secs(1);
        let mut l = log(1, w);
        assert!(ok(&mut l, 1, T0).allowed);
        let d = ok(&mut l, 1, T0 + w - NS);
        assert!(!d.allowed);
        assert_eq!(d.retry_after, Some(NS));
        assert!(ok(&mut l, 1, T0 + w).allowed);
    }

    #[test]
    fn one_nanosecond_less_than_the_window_still_counts() {
        let w = Duration::from_millis(10);
        let mut l = log(2, w);
        assert!(ok(&mut l, 1, T0).allowed);
        assert!(ok(&mut l, 1, T0 + Duration::from_millis(5)).allowed);
        let d = ok(&mut l, 1, T0 + w - NS);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.retry_after, Some(NS));
    }

    #[test]
    fn requests_at_the_same_timestamp_all_count() {
        let mut l = log(3, Duration::from_secs(1));
        for i in 0..3 {
            let d = ok(&mut l, 1, T0);
            assert!(d.allowed);
            assert_eq!(d.remaining, 2 - i);
        }
        let d = ok(&mut l, 1, T0);
        assert!(!d.allowed);
        assert_eq!(d.retry_after, Some(Duration::from_secs(1)));
        // They share one entry.
        assert_eq!(l.0.per_limit.first.len, 1);
    }

    #[test]
    fn weighted_acquire_uses_one_entry_and_retry_waits_for_enough_weight() {
        let w = Duration::from_secs(1);
        let mut l = log(10, w);
        assert!(ok(&mut l, 4, T0).allowed);
        assert!(ok(&mut l, 3, T0 + Duration::from_millis(100)).allowed);
        assert!(ok(&mut l, 2, T0 + Duration::from_millis(200)).allowed);
        assert_eq!(l.0.per_limit.first.len, 3);
        // 9 used; 6 needs 5 freed: the 4 at T0 and the 3 at 100 ms must go.
        let now = T0 + Duration::from_millis(300);
        let d = ok(&mut l, 6, now);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 1);
        assert_eq!(d.retry_after, Some(Duration::from_millis(800)));
        assert_eq!(d.reset, Duration::from_millis(900));
        assert!(!ok(&mut l, 6, now + Duration::from_millis(800) - NS).allowed);
        assert!(ok(&mut l, 6, now + Duration::from_millis(800)).allowed);
    }

    #[test]
    fn weight_above_max_is_an_error_naming_the_limit() {
        let mut l = SlidingLog::new(&per_second_and_minute(100, 50));
        assert_eq!(
            l.acquire(60, T0),
            Err(AcquireError::InsufficientCapacity {
                n: 60,
                limit: Limit::per_minute(50).unwrap()
            })
        );
        assert_eq!(l.idle_at(), Timestamp::EPOCH);
    }

    #[test]
    fn several_limits_at_once_all_must_admit_and_all_record() {
        let per_s = Limit::per_second(100).unwrap();
        let per_m = Limit::per_minute(1000).unwrap();
        let mut l = SlidingLog::new(&per_second_and_minute(100, 1000));
        let mut admitted = 0;
        // 200 requests per second for 20 s, 5 ms apart.
        for i in 0..4000u64 {
            let t = T0 + Duration::from_millis(5 * i);
            let d = ok(&mut l, 1, t);
            if d.allowed {
                admitted += 1;
            } else if admitted < 1000 {
                // Before the minute limit binds, the second limit denies.
                assert_eq!(d.limit, per_s);
            } else {
                assert_eq!(d.limit, per_m);
                assert_eq!(d.remaining, 0);
            }
        }
        // 100 per second for 10 s, then the minute's 1000 are used up.
        assert_eq!(admitted, 1000);
        let d = ok(&mut l, 0, T0 + Duration::from_secs(20));
        assert_eq!((d.limit, d.remaining), (per_m, 0));
        // The first admitted request (T0) frees the minute limit at T0 + 60 s.
        let d = ok(&mut l, 1, T0 + Duration::from_secs(20));
        assert_eq!(d.retry_after, Some(Duration::from_secs(40)));
        assert!(ok(&mut l, 1, T0 + Duration::from_secs(60)).allowed);
    }

    #[test]
    fn denied_requests_do_not_consume() {
        let w = Duration::from_secs(1);
        let mut l = log(2, w);
        assert!(ok(&mut l, 2, T0).allowed);
        // A client hammering every millisecond is never locked out for good.
        for i in 1..1000 {
            assert!(!ok(&mut l, 1, T0 + Duration::from_millis(i)).allowed);
        }
        assert_eq!(l.0.per_limit.first.used, 2);
        let d = ok(&mut l, 2, T0 + w);
        assert!(d.allowed);
        assert_eq!(d.remaining, 0);
    }

    #[test]
    fn a_peek_records_nothing_and_is_always_allowed() {
        let mut l = log(1, Duration::from_secs(1));
        assert!(ok(&mut l, 1, T0).allowed);
        let d = ok(&mut l, 0, T0);
        assert!(d.allowed);
        assert_eq!((d.remaining, d.retry_after), (0, None));
        assert_eq!(l.0.per_limit.first.used, 1);
    }

    #[test]
    fn time_going_backwards_is_treated_as_the_latest_time_seen() {
        let w = Duration::from_secs(1);
        let mut l = log(2, w);
        assert!(ok(&mut l, 1, T0).allowed);
        assert!(ok(&mut l, 1, T0 + Duration::from_millis(900)).allowed);
        // A stale `now` before both entries: decided as at T0 + 900 ms.
        let d = ok(&mut l, 1, T0 - Duration::from_secs(5));
        assert!(!d.allowed);
        assert_eq!(d.retry_after, Some(Duration::from_millis(100)));
        // At T0 + 1 s the first entry expires; a stale time cannot bring it back.
        assert!(ok(&mut l, 1, T0 + w).allowed);
        let d = ok(&mut l, 1, T0 + Duration::from_millis(950));
        assert!(!d.allowed);
        // Entries stay sorted: the stale admitted request is stamped T0 + 1 s.
        let d = ok(&mut l, 0, Timestamp::EPOCH);
        assert_eq!(d.reset, w);
        l.0.per_limit.first.check().unwrap();
    }

    #[test]
    fn times_near_the_epoch_and_huge_windows_do_not_overflow() {
        let mut l = log(1, Duration::from_nanos(u64::MAX));
        assert!(ok(&mut l, 1, Timestamp::EPOCH).allowed);
        let d = ok(&mut l, 1, Timestamp::from_nanos(u64::MAX - 1));
        assert!(!d.allowed);
        assert_eq!(d.retry_after, Some(NS));
        assert!(ok(&mut l, 1, Timestamp::from_nanos(u64::MAX)).allowed);
        assert_eq!(l.idle_at(), Timestamp::from_nanos(u64::MAX));
    }

    #[test]
    fn idle_once_every_entry_has_expired() {
        let mut l = SlidingLog::new(&per_second_and_minute(5, 50));
        assert!(l.is_idle(T0));
        assert!(ok(&mut l, 1, T0).allowed);
        assert!(!l.is_idle(T0 + Duration::from_secs(60) - NS));
        assert!(l.is_idle(T0 + Duration::from_secs(60)));
    }

    proptest::proptest! {
        /// The ring against its copies (oldest entry, second oldest time,
        /// newest time, sum) after every operation: decisions, records,
        /// stale times, carries onto other rules; with maxima above the
        /// first allocation, so that full rings grow while wrapped around.
        #[test]
        fn the_copies_always_match_the_ring(
            spec in proptest::collection::vec((1u32..=200, 1u64..=400), 1..=2),
            ops in proptest::collection::vec((0u8..8, 0u64..=4, 0u32..=4), 1..700),
        ) {
            let limits_of = |spec: &[(u32, u64)]| {
                Limits::new(
                    spec.iter()
                        .map(|&(max, w)| Limit::new(max, Duration::from_nanos(w)).unwrap()),
                )
                .unwrap()
            };
            let limits = limits_of(&spec);
            let min_max = spec.iter().map(|s| s.0).min().unwrap();
            let mut l = SlidingLog::new(&limits);
            let mut t = T0;
            for (op, dt, n) in ops {
                t = t + Duration::from_nanos(dt);
                let n = n.min(min_max);
                match op {
                    0..=4 => {
                        l.acquire(n, t).unwrap();
                    }
                    5 => l.record(n, t),
                    6 => {
                        l.acquire(n, t - Duration::from_nanos(500)).unwrap();
                    }
                    _ => {
                        // Carried onto its own rules reversed, and back.
                        let rev = limits_of(&spec.iter().rev().copied().collect::<Vec<_>>());
                        l = l.carry(&rev, t).carry(&limits, t);
                    }
                }
                for r in l.0.per_limit.iter() {
                    proptest::prop_assert!(r.check().is_ok(), "{:?}", r.check());
                }
            }
        }
    }

    #[test]
    fn a_full_ring_grows_while_wrapped_around_and_keeps_its_order() {
        let mut l = log(200, Duration::from_nanos(100));
        // One every 2 ns: 50 in the window, 90 appended, so the oldest has
        // moved around the first allocation (64 entries).
        for i in 0..90 {
            let d = ok(&mut l, 1, T0 + NS * (2 * i));
            assert_eq!((d.allowed, d.remaining), (true, 200 - (i + 1).min(50)));
        }
        assert_eq!(l.0.per_limit.first.buf.len(false), 64);
        assert_ne!(l.0.per_limit.first.head, 0);
        // One every ns: the window fills to 100 entries, growing the ring
        // while it is wrapped around.
        for t in 179..400 {
            let d = ok(&mut l, 1, T0 + NS * t);
            l.0.per_limit.first.check().unwrap();
            let inside = (t - 99..=t).filter(|&s| s >= 179 || s % 2 == 0).count();
            assert_eq!((d.allowed, d.remaining as usize), (true, 200 - inside));
        }
        assert_eq!(l.0.per_limit.first.buf.len(false), 128);
        assert_eq!(l.0.per_limit.first.used, 100);
    }

    #[test]
    fn steady_state_does_not_grow_the_ring() {
        let mut l = log(100, Duration::from_secs(1));
        for i in 0..10_000u64 {
            ok(&mut l, 1, T0 + Duration::from_millis(i));
        }
        let cap = l.0.per_limit.first.buf.len(false);
        assert!((100..=256).contains(&cap), "{cap}");
    }
}
