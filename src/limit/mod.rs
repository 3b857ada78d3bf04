//! Keyed sliding-window rate limiters, with time passed in.
//!
//! A key (a client, a tenant, an API token) may carry several limits at once,
//! for example 100 per second **and** 1000 per minute ([`Limits`]). A request
//! of weight `n` is admitted only if *every* limit of its key admits it, and
//! is then recorded in all of them. Two algorithms keep the per-key state:
//!
//! * [`SlidingLog`]: the **exact** sliding log. At most `N` admitted requests
//!   in *any* interval of length `W`. Memory `O(N)` per key and limit.
//! * [`SlidingCounter`]: the **approximate** sliding counter (previous fixed
//!   window weighted by its remaining overlap, plus the current window).
//!   Memory `O(1)` per key and limit, but it can over-admit (see below).
//!
//! Both are plain single-owner structs: methods take `&mut self` and
//! `now: Timestamp`, hold no lock and read no clock. [`KeyedLimiter`] puts
//! many of them behind sharded mutexes, keyed by string, with a cap on keys.
//!
//! # The exact rule
//!
//! A request of weight `n` arriving at `t` is admitted iff, for every limit
//! `(N, W)`, the weight of previously *admitted* requests with timestamps in
//! the half-open interval `(t − W, t]`, plus `n`, is at most `N`. So:
//!
//! * a request admitted exactly `W` before `t` no longer counts at `t`; one
//!   admitted `W − 1ns` before still does;
//! * requests at the same timestamp all count against each other.
//!
//! Greedy admission is **safe**: every interval of length `W` ends just at or
//! after some admitted request, and at the moment that request was admitted
//! the interval ending there held at most `N`; so no interval ever holds more.
//! It is also **maximal**: a request is denied only when admitting it would
//! itself make the interval ending at its own timestamp hold more than `N`, so
//! every denial was forced.
//!
//! # Denied requests are not logged
//!
//! Only admitted requests are recorded. Logging denied ones (as some Redis
//! recipes do, "add, then count") means that a client that keeps retrying
//! faster than `N / W` keeps its own log full forever and is locked out for
//! good, although it is sending nothing that would be admitted. Here a denied
//! request changes nothing, and a peek (`n == 0`) changes nothing either.
//!
//! # Memory
//!
//! The log keeps one ring per limit, holding `(timestamp, weight)` entries of
//! admitted requests still inside the window; requests at the same timestamp
//! share one entry. Since the admitted weight in a window is at most `N`, a
//! ring never holds more than `N` entries: `O(N)` per key per limit (8 bytes
//! an entry for windows up to 2^32 ns, about 4.29 s, whose entry times are
//! kept as their low 32 bits; 16 bytes for longer windows). The ring starts
//! at `min(N, 64)` entries, doubles while full, at most up to `N`, and never
//! shrinks; once it has reached its working size, a decision allocates
//! nothing. Beside the ring, each limit keeps copies of its oldest entry and
//! of the times of the second oldest and the newest, so that most decisions
//! read no ring memory. The counter keeps a window start and two `u32` counts
//! per limit: `O(1)`.
//!
//! # The approximate counter and its worst-case overshoot
//!
//! Time is cut into fixed windows `[kW, (k+1)W)` aligned on the Unix epoch
//! (so every instance agrees on the grid). With `prev` and `curr` the admitted
//! weight of the previous and the current fixed window and `elapsed` the time
//! since the current window started, the estimate is
//!
//! ```text
//! estimate = prev · (W − elapsed) / W + curr
//! ```
//!
//! and a request of weight `n` is admitted iff `estimate + n ≤ N`. The
//! comparison is done exactly, in integer arithmetic on
//! `prev · (W − elapsed) ≤ (N − curr − n) · W`, without truncating the
//! estimate (no rounding either, as floating point would have). RussellLuo's
//! slidingwindow truncates the weighted term to an integer first, which can
//! admit one more request than this rule; ours is stricter.
//!
//! The estimate assumes the previous window's traffic was spread evenly. When
//! it was bunched at the end, the counter over-admits. Worked example, `N =
//! 100`, `W = 1 s`: 100 requests are admitted at `0.999 s` (fixed window
//! `[0, 1)`). At `t` in `[1, 2)` the estimate is `100 · (1 − (t − 1)) + curr`,
//! so by time `t` about `100 · (t − 1)` more requests have been admitted. The
//! exact rule counts the 100 from `0.999 s` until `1.999 s`, so an interval
//! one window long ending just before `1.999 s` holds those 100 plus nearly
//! 100 more: **nearly `2N`**. The test
//! `approximate_counter_can_admit_nearly_twice_the_limit_in_some_window`
//! replays this with one request offered every millisecond: the counter
//! admits one every 10 ms from `1.010 s` to `1.990 s`, and the window
//! `(0.990 s, 1.990 s]` holds **199** (the exact log: 100). The counter never
//! admits more than `2N` in an
//! interval of length `W` (such an interval meets at most two fixed windows,
//! each holding at most `N`). Conversely it under-admits when the previous
//! window's traffic was bunched at its start. Use the log when the limit is a
//! contract.
//!
//! # Denials say when to retry
//!
//! A denied [`Decision`] carries `retry_after`: the smallest wait after which
//! the same `acquire(n)` would be admitted if nothing else is admitted in the
//! meantime. For the log it is exact (property-tested: admitted at
//! `now + retry_after`, denied at `now + retry_after − 1ns`): per limit, walk
//! the oldest entries until enough weight would have expired; an entry at `t`
//! leaves the window at `t + W`; take the maximum over the limits. For the
//! counter it is the closed form of the estimate: within the current window
//! the previous-window term shrinks linearly, so the earliest admitting
//! elapsed time is `W − ⌊(N − curr − n) · W / prev⌋`; if that is not inside
//! the current window (or `curr + n > N`), the same is solved for the next
//! window, where `prev` becomes today's `curr` and `curr` becomes 0, and
//! failing that the window after, which is empty. It is exact too, to the
//! nanosecond, and property-tested the same way.
//!
//! # Time going backwards
//!
//! A `now` earlier than the latest `now` a state has seen is treated as that
//! latest `now`. The log's entries therefore stay sorted and the exact rule
//! still holds on the (clamped) timeline, a stale timestamp can never resurrect
//! expired capacity, and nothing panics. Time resumes normally once `now`
//! passes the latest value again.
//!
//! # Rules that change (a config reload)
//!
//! A key's state can be carried onto new rules, re-evaluated under them, at
//! the reload's `now` (the later of it and the latest `now` the state saw):
//!
//! * log → log ([`SlidingLog::carry`]): every `(t, weight)` entry of the old
//!   longest window is kept where it lies inside a new window; the new rules
//!   decide the next request from them. History older than the old longest
//!   window was never kept, so a longer new window starts with what the old
//!   one held.
//! * counter → counter ([`SlidingCounter::carry`]): a rule whose window is
//!   unchanged keeps its two fixed windows (only `N` changes). A rule with a
//!   new window is re-based: the estimate of the old rule with the nearest
//!   window (ties: the longer), rounded up, becomes the admitted weight of the
//!   new rule's current fixed window (previous window 0); it leaves when that
//!   fixed window ends, at most one new window later.
//! * log → counter ([`SlidingCounter::from_log`]): exact, within what the log
//!   held: each new rule's current and previous fixed windows are summed from
//!   the entries.
//! * counter → log ([`SlidingLog::from_counter`]): the counter knows counts,
//!   not times. The old longest rule's current fixed window becomes one entry
//!   at the reload, its previous one one entry at that window's last
//!   nanosecond: the latest times they could have happened, so the new log
//!   never admits more than it would have with the true times (it may admit
//!   less, for at most one window).
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use rollstat::Timestamp;
//! use rollstat::limit::{Limit, Limits, LimitState, SlidingLog};
//!
//! let limits = Limits::new([Limit::per_second(2)?, Limit::per_minute(3)?])?;
//! let mut log = SlidingLog::new(&limits);
//! let t0 = Timestamp::from_secs(1_767_225_600);
//! assert!(log.acquire(1, t0)?.allowed);
//! assert!(log.acquire(1, t0)?.allowed);
//! let denied = log.acquire(1, t0)?;
//! assert!(!denied.allowed);
//! assert_eq!(denied.retry_after, Some(Duration::from_secs(1)));
//! // A second later the per-second limit is free, the per-minute one binds.
//! let d = log.acquire(1, t0 + Duration::from_secs(1))?;
//! assert!(d.allowed);
//! assert_eq!((d.limit, d.remaining), (Limit::per_minute(3)?, 0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// Implements [`LimitState`] for `$t`, a newtype over [`Sliding`]: the
/// shared core does all of it.
macro_rules! limit_state_by_sliding {
    ($t:ident) => {
        impl $crate::limit::LimitState for $t {
            fn new(limits: &$crate::limit::Limits) -> Self {
                $t($crate::limit::Sliding::new(limits))
            }

            #[inline]
            fn acquire(
                &mut self,
                n: u32,
                now: $crate::clock::Timestamp,
            ) -> Result<$crate::limit::Decision, $crate::limit::AcquireError> {
                self.0.acquire(n, now)
            }

            fn record(&mut self, n: u32, now: $crate::clock::Timestamp) {
                self.0.record(n, now)
            }

            fn check(
                &mut self,
                n: u32,
                now: $crate::clock::Timestamp,
            ) -> Result<$crate::limit::Decision, $crate::limit::AcquireError> {
                self.0.decide(n, now, false)
            }

            fn idle_at(&self) -> $crate::clock::Timestamp {
                self.0.idle_at()
            }

            fn last_seen(&self) -> $crate::clock::Timestamp {
                $crate::clock::Timestamp::from_nanos(self.0.last_now)
            }
        }
    };
}

mod cells;
pub(crate) mod counter;
mod keyed;
mod log;
#[cfg(test)]
mod testing;

use std::fmt;
use std::time::Duration;

use crate::clock::{duration_nanos, Timestamp};

pub use counter::SlidingCounter;
pub use keyed::{KeyedConfig, KeyedConfigError, KeyedLimiter, KeyedStats, OverflowPolicy};
pub use log::SlidingLog;

/// One limit: at most `max` admitted weight in any window of length `window`.
/// Validated at construction.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limit {
    max: u32,
    window: u64,
}

/// A limit that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// `max` was zero: nothing could ever be admitted.
    #[error("a rate limit must admit at least 1 request per window; got max = 0 (to block everything, deny before asking the limiter)")]
    ZeroMax,
    /// The window was shorter than a nanosecond.
    #[error("a rate limit's window must be at least 1ns; got {0:?} (use e.g. 1s or 1m)")]
    ZeroWindow(Duration),
    /// The window does not fit in `u64` nanoseconds (584 years).
    #[error("a rate limit's window of {0:?} is too long to represent (at most ~584 years)")]
    WindowTooLong(Duration),
    /// An empty list of limits was given.
    #[error("a limiter needs at least one limit; got none")]
    NoLimits,
}

// === impl Limit ===

impl Limit {
    /// At most `max` admitted weight in any interval of length `window`.
    pub fn new(max: u32, window: Duration) -> Result<Self, LimitError> {
        if max == 0 {
            return Err(LimitError::ZeroMax);
        }
        if window.as_nanos() > u128::from(u64::MAX) {
            return Err(LimitError::WindowTooLong(window));
        }
        let nanos = duration_nanos(window);
        if nanos == 0 {
            return Err(LimitError::ZeroWindow(window));
        }
        Ok(Limit { max, window: nanos })
    }

    /// `max` per second.
    pub fn per_second(max: u32) -> Result<Self, LimitError> {
        Self::new(max, Duration::from_secs(1))
    }

    /// `max` per minute.
    pub fn per_minute(max: u32) -> Result<Self, LimitError> {
        Self::new(max, Duration::from_secs(60))
    }

    /// The most weight admitted in one window (`N`).
    #[must_use]
    pub fn max(&self) -> u32 {
        self.max
    }

    /// The window length (`W`).
    #[must_use]
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The window length in nanoseconds.
    #[must_use]
    pub fn window_nanos(&self) -> u64 {
        self.window
    }
}

impl fmt::Debug for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Limit({} per {:?})", self.max, self.window())
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} per {:?}", self.max, self.window())
    }
}

/// A non-empty set of limits that all apply to one key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Limits(Box<[Limit]>);

// === impl Limits ===

impl Limits {
    /// All of `limits`; fails if there are none.
    pub fn new(limits: impl IntoIterator<Item = Limit>) -> Result<Self, LimitError> {
        let limits: Box<[Limit]> = limits.into_iter().collect();
        if limits.is_empty() {
            return Err(LimitError::NoLimits);
        }
        Ok(Limits(limits))
    }

    /// The limits, in the order given.
    #[must_use]
    pub fn as_slice(&self) -> &[Limit] {
        &self.0
    }

    /// Fails with [`AcquireError::InsufficientCapacity`] if `n` exceeds some
    /// limit's `max`: such a request can never be admitted.
    pub fn check_capacity(&self, n: u32) -> Result<(), AcquireError> {
        match self.0.iter().find(|l| n > l.max) {
            Some(&limit) => Err(AcquireError::InsufficientCapacity { n, limit }),
            None => Ok(()),
        }
    }
}

impl From<Limit> for Limits {
    fn from(limit: Limit) -> Self {
        Limits(Box::new([limit]))
    }
}

/// The outcome of one `acquire`, with what the IETF `RateLimit` header fields
/// need (`limit`, `remaining`, `reset`) and, on denial, when to retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request was admitted (and recorded in every limit).
    /// Always `true` for a peek (`n == 0`).
    pub allowed: bool,
    /// The binding limit: the one with the least `remaining` after this
    /// decision (ties go to the one with the longest `reset`, then the first
    /// given).
    pub limit: Limit,
    /// The weight the binding limit would still admit right now (after
    /// recording this request if it was admitted).
    pub remaining: u32,
    /// Time until the binding limit holds nothing any more (all its admitted
    /// requests have left the window), if nothing else is admitted. Zero if it
    /// is already empty.
    pub reset: Duration,
    /// On denial, the smallest wait after which the same request would be
    /// admitted if nothing else is admitted meanwhile; `None` when admitted.
    pub retry_after: Option<Duration>,
}

/// Why an `acquire` could not be decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AcquireError {
    /// The weight exceeds a limit's `max`, so it can never be admitted.
    #[error("a request of weight {n} can never be admitted by the limit of {limit}; split it or raise the limit")]
    InsufficientCapacity {
        /// The weight asked for.
        n: u32,
        /// The limit it can never fit in.
        limit: Limit,
    },
    /// Only from [`KeyedLimiter`] with [`OverflowPolicy::RejectNewKeys`]: the
    /// key is new and the limiter already tracks `max_keys` keys (over all
    /// its shards), none of them idle. Fail closed: deny the request (an
    /// HTTP service would answer 503 with `Retry-After`, telling limiter
    /// overload apart from a quota denial).
    #[error("new key refused: this limit already tracks its maximum of {max_keys} keys (max_keys), each with history still in its window; retry in {retry_after:?}, when the first of them becomes idle, or raise max_keys")]
    TooManyKeys {
        /// The configured cap.
        max_keys: usize,
        /// Time until the first tracked key can become idle and make room,
        /// if nothing else is admitted meanwhile.
        retry_after: Duration,
    },
}

/// Per-key limiter state: one algorithm, all the limits of one key.
///
/// Implemented by [`SlidingLog`] and [`SlidingCounter`]. Single owner: no
/// locks, no clock; `now` is always an argument.
pub trait LimitState {
    /// A fresh state (nothing admitted yet) for `limits`.
    fn new(limits: &Limits) -> Self
    where
        Self: Sized;

    /// Decides a request of weight `n` at `now`; records it in every limit if
    /// all of them admit it. `n == 0` is a peek: always allowed, records
    /// nothing.
    ///
    /// # Errors
    ///
    /// [`AcquireError::InsufficientCapacity`] if `n` exceeds some limit's
    /// `max`; nothing is recorded.
    fn acquire(&mut self, n: u32, now: Timestamp) -> Result<Decision, AcquireError>;

    /// Records weight `n` admitted at `now` by someone else (the shared
    /// store), without deciding: a cheap mirror, so that this state knows
    /// what was admitted if it must decide alone later. Each limit records
    /// at most what it has room for (its history never holds more than
    /// `max`); `n == 0` records nothing.
    fn record(&mut self, n: u32, now: Timestamp);

    /// What [`acquire`](Self::acquire) would decide at `now`, recording
    /// nothing (`&mut`: expired history may be forgotten, which changes no
    /// decision).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    fn check(&mut self, n: u32, now: Timestamp) -> Result<Decision, AcquireError>;

    /// The earliest time at which the state is idle (carries no information:
    /// it decides exactly like a fresh one) if nothing else is admitted.
    /// [`Timestamp::EPOCH`] if nothing was ever admitted.
    fn idle_at(&self) -> Timestamp;

    /// The latest `now` this state has decided at ([`Timestamp::EPOCH`] if
    /// never): how recently its key was used, comparable across keys.
    fn last_seen(&self) -> Timestamp;

    /// Whether the state is idle at `now` and can be dropped without changing
    /// any decision.
    fn is_idle(&self, now: Timestamp) -> bool {
        now >= self.idle_at()
    }
}

/// One `T` per limit, the first stored inline: a key with one limit (the
/// common case) keeps its whole state in one place, without a pointer to
/// follow (and allocates nothing for `rest`, a thin pointer: 8 bytes of the
/// key's slot rather than 16).
#[derive(Clone, Debug)]
struct PerLimit<T> {
    first: T,
    // A thin pointer on purpose: `Box<[T]>` or `Vec<T>` would be 16 or 24.
    #[allow(clippy::box_collection)]
    rest: Option<Box<Vec<T>>>,
}

impl<T> PerLimit<T> {
    fn new(limits: &Limits, mut f: impl FnMut(Limit) -> T) -> Self {
        let (&head, tail) = limits
            .as_slice()
            .split_first()
            .unwrap_or((&Limit { max: 1, window: 1 }, &[]));
        let first = f(head);
        let rest = (!tail.is_empty()).then(|| Box::new(tail.iter().map(|&l| f(l)).collect()));
        PerLimit { first, rest }
    }

    /// The only element, if there is exactly one.
    #[inline]
    fn single_mut(&mut self) -> Option<&mut T> {
        self.rest.is_none().then_some(&mut self.first)
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        let rest = self.rest.as_deref().map_or(&[][..], Vec::as_slice);
        std::iter::once(&self.first).chain(rest.iter())
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let rest = self
            .rest
            .as_deref_mut()
            .map_or(&mut [][..], Vec::as_mut_slice);
        std::iter::once(&mut self.first).chain(rest.iter_mut())
    }
}

/// The state one limit keeps for one key: the log's ring of admitted
/// entries or the counter's pair of fixed windows. [`Sliding`] keeps one per
/// limit and drives them; `now` is in nanoseconds and never goes backwards.
trait OneLimit {
    /// A fresh state for `limit`, nothing admitted.
    fn new(limit: Limit) -> Self;
    /// The limit this state enforces.
    fn limit(&self) -> Limit;
    /// Brings the state to `now`: forgets what has left the window.
    fn advance(&mut self, now: u64);
    /// Whether `n` more fit at `now` (after `advance(now)`).
    fn admits(&self, n: u32, now: u64) -> bool;
    /// Records an admitted weight `n > 0` at `now`.
    fn record(&mut self, n: u32, now: u64);
    /// The weight that still fits at `now` by this limit's own count (after
    /// `advance(now)`), ignoring any other term of the estimate.
    fn room(&self) -> u32;
    /// The wait until `n` would be admitted at `now` (after `advance(now)`),
    /// if nothing else is admitted; 0 if it is now. `n <= max`.
    fn wait_for(&self, n: u32, now: u64) -> u64;
    /// This limit's figures at `now`, for the [`Decision`].
    fn view(&self, now: u64) -> LimitView;
    /// When the state is idle if nothing else is admitted; 0 if it already is.
    fn idle_at(&self) -> u64;
}

/// What [`SlidingLog`] and [`SlidingCounter`] share: one `S` per limit, the
/// capacity check, the clamp of a stale `now`, and the decision over all the
/// limits (admit only if every one admits, then record in every one).
#[derive(Clone, Debug)]
struct Sliding<S> {
    per_limit: PerLimit<S>,
    /// The latest `now` seen; earlier ones are clamped to it.
    last_now: u64,
}

impl<S: OneLimit> Sliding<S> {
    fn new(limits: &Limits) -> Self {
        Sliding {
            per_limit: PerLimit::new(limits, S::new),
            last_now: 0,
        }
    }

    #[cold]
    fn limits_error(&self, n: u32) -> AcquireError {
        let limit = self
            .per_limit
            .iter()
            .map(S::limit)
            .find(|l| n > l.max)
            .unwrap_or(self.per_limit.first.limit());
        AcquireError::InsufficientCapacity { n, limit }
    }

    /// [`LimitState::acquire`].
    #[inline]
    fn acquire(&mut self, n: u32, now: Timestamp) -> Result<Decision, AcquireError> {
        self.decide(n, now, true)
    }

    /// Decides `n` at `now`, recording it if admitted and `record`.
    #[inline]
    fn decide(&mut self, n: u32, now: Timestamp, record: bool) -> Result<Decision, AcquireError> {
        let n_rec = if record { n } else { 0 };
        if n > self.per_limit.first.limit().max
            || (self.per_limit.rest.is_some() && self.per_limit.iter().any(|s| n > s.limit().max))
        {
            return Err(self.limits_error(n));
        }
        let now = now.as_nanos().max(self.last_now);
        self.last_now = now;
        // The common case, one limit per key: no loops.
        if let Some(s) = self.per_limit.single_mut() {
            s.advance(now);
            let allowed = s.admits(n, now);
            let mut retry = 0;
            if !allowed {
                retry = s.wait_for(n, now);
            } else if n_rec > 0 {
                s.record(n_rec, now);
            }
            return Ok(decide(std::iter::once(s.view(now)), allowed, retry));
        }
        let mut allowed = true;
        for s in self.per_limit.iter_mut() {
            s.advance(now);
            allowed &= s.admits(n, now);
        }
        let mut retry = 0;
        if allowed {
            if n_rec > 0 {
                for s in self.per_limit.iter_mut() {
                    s.record(n_rec, now);
                }
            }
        } else {
            for s in self.per_limit.iter() {
                retry = retry.max(s.wait_for(n, now));
            }
        }
        Ok(decide(
            self.per_limit.iter().map(|s| s.view(now)),
            allowed,
            retry,
        ))
    }

    /// [`LimitState::record`].
    fn record(&mut self, n: u32, now: Timestamp) {
        if n == 0 {
            return;
        }
        let now = now.as_nanos().max(self.last_now);
        self.last_now = now;
        for s in self.per_limit.iter_mut() {
            s.advance(now);
            let m = n.min(s.room());
            if m > 0 {
                s.record(m, now);
            }
        }
    }

    /// [`LimitState::idle_at`].
    fn idle_at(&self) -> Timestamp {
        Timestamp::from_nanos(self.per_limit.iter().map(S::idle_at).max().unwrap_or(0))
    }
}

/// Per-limit figures gathered by an algorithm to build a [`Decision`].
#[derive(Clone, Copy)]
pub(crate) struct LimitView {
    pub(crate) limit: Limit,
    pub(crate) remaining: u32,
    pub(crate) reset: u64,
}

/// Picks the binding limit: least remaining, then longest reset, then first.
#[inline]
pub(crate) fn decide(
    mut views: impl Iterator<Item = LimitView>,
    allowed: bool,
    retry_after: u64,
) -> Decision {
    // `Limits` is never empty; the fallback is unreachable but keeps this total.
    let mut b = views.next().unwrap_or(LimitView {
        limit: Limit { max: 1, window: 1 },
        remaining: 0,
        reset: 0,
    });
    for v in views {
        if (v.remaining, std::cmp::Reverse(v.reset)) < (b.remaining, std::cmp::Reverse(b.reset)) {
            b = v;
        }
    }
    Decision {
        allowed,
        limit: b.limit,
        remaining: b.remaining,
        reset: Duration::from_nanos(b.reset),
        retry_after: if allowed {
            None
        } else {
            Some(Duration::from_nanos(retry_after))
        },
    }
}

#[cfg(test)]
mod tests;
