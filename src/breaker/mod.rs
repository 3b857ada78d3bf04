//! Circuit breakers fed with outcomes, with time and randomness injected.
//!
//! Two breakers, one shape:
//!
//! * [`SreBreaker`]: Google SRE client-side adaptive throttling exactly as
//!   go-zero's `googleBreaker` does it (a 10 s window of 40 buckets, drop ratio
//!   `((total − protection) − w·accepts) / (total + 1)`, with go-zero's failing-
//!   and working-streak refinements and its 1 s forced pass). Probabilistic and
//!   stateless: it sheds a fraction of calls. See [`sre`].
//! * [`ErrorRateBreaker`]: the closed / open / half-open machine of
//!   resilience4j and Hystrix over a time-based window of call counts, with a
//!   minimum number of calls, a failure-rate threshold, an optional slow-call
//!   threshold, an open duration and a fixed number of half-open trial calls.
//!   See [`error_rate`], whose docs carry the resilience4j/Hystrix table.
//!
//! Both implement [`Breaker`]:
//!
//! * `allow(now, draw) -> Verdict`: may this call go ahead? `draw` is a uniform
//!   value in `[0, 1)` from the caller (the SRE breaker compares it with its
//!   drop ratio; the error-rate breaker ignores it). [`Breaker::allow_with`]
//!   takes a [`RandomSource`] instead.
//! * `record_n(outcome, count, now)`: `count` calls finished with `outcome`.
//!   The daemon feeds breakers from statsd counters and batched
//!   `POST .../outcomes` bodies, so batches are first-class; `record` is the
//!   single-call shorthand. Any `count` is safe: every count and sum
//!   saturates at `u64::MAX`, never wraps or panics.
//! * `poll(now)`: apply the transitions that time alone causes (the error-rate
//!   breaker's open → half-open) without a call, so that a scrape shows
//!   half-open even when nobody calls `allow`.
//! * `signals(now) -> Signals` and `transitions() -> Transitions`: plain values
//!   for exposition; reading them never changes the breaker.
//!
//! Nothing here reads a clock or a random generator: every method takes `now`,
//! and draws come from the caller (habit c1/c2 in `STYLE.md`).
//!
//! ## Sharing across threads
//!
//! The breakers are plain single-owner structs (`&mut self`). [`SharedBreaker`]
//! puts one behind a `parking_lot::Mutex` together with its own
//! [`SplitMix64`] generator, so that `allow(now)` needs no caller-side
//! randomness. A mutex rather than atomics or an `RwLock`: every operation is a
//! short critical section (an `allow` is one pass over at most 40 buckets, a
//! record is an add, plus one pass over the 10 buckets for the error-rate
//! breaker's threshold check), the SRE decision reads the whole window and
//! then writes a drop and `lastPass`, which atomics could not do as one step,
//! and an uncontended `parking_lot` lock is one compare-and-swap to take and one
//! to release. The `core` benchmarks `breaker/sre_shared_1_thread` and
//! `breaker/sre_shared_2_threads` measure it. First figures (medians of three
//! short runs on a 2-core machine shared with other builds, load ≈ 2.5, so
//! read them as ranges): an allow plus a record costs 99–114 ns on a bare
//! [`SreBreaker`] (the allow reads all 40 buckets) and 32–49 ns on an
//! [`ErrorRateBreaker`]; 89–128 ns through an uncontended [`SharedBreaker`];
//! with two threads hammering one `SharedBreaker`, 179–233 ns per iteration
//! in which each thread does one allow plus record. The lock serialises the
//! threads: total throughput stays that of one thread (8.6–10.9 M pairs/s)
//! and does not collapse. Per-series breakers in the daemon are rarely
//! contended, so sharding a breaker would buy nothing.

pub mod error_rate;
pub mod random;
pub mod sre;

use std::fmt;

use parking_lot::Mutex;

use crate::clock::Timestamp;

pub use error_rate::{
    CallCounts, ErrorRateBreaker, ErrorRateConfig, ErrorRateConfigError, SlowCallConfig,
};
pub use random::{RandomSource, ScriptedRandom, SplitMix64};
pub use sre::{SreBreaker, SreConfig, SreConfigError, SreHistory};

/// How a call that went ahead ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The call succeeded (go-zero's "accept").
    Success,
    /// The call failed in a way that counts against the callee.
    Failure,
}

impl Outcome {
    /// `Success` when `ok`, else `Failure`.
    #[must_use]
    pub const fn from_success(ok: bool) -> Self {
        if ok {
            Outcome::Success
        } else {
            Outcome::Failure
        }
    }
}

/// A breaker's answer to "may this call go ahead?".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Go ahead, and record the outcome afterwards.
    Allow,
    /// Do not make the call (go-zero's `ErrServiceUnavailable`, resilience4j's
    /// `CallNotPermittedException`, Hystrix's short-circuit).
    Shed,
}

impl Verdict {
    /// True for [`Verdict::Allow`].
    #[must_use]
    pub const fn is_allowed(self) -> bool {
        matches!(self, Verdict::Allow)
    }
}

/// The state a breaker reports. The SRE breaker has no real states; see
/// [`sre`] for how its drop ratio maps onto these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum BreakerState {
    /// Calls go ahead.
    Closed = 0,
    /// Calls are shed (all of them for the error-rate breaker, a fraction for
    /// the SRE breaker).
    Open = 1,
    /// A fixed number of trial calls go ahead; their outcomes decide.
    HalfOpen = 2,
}

impl BreakerState {
    /// All states, in gauge order.
    pub const ALL: [BreakerState; 3] = [
        BreakerState::Closed,
        BreakerState::Open,
        BreakerState::HalfOpen,
    ];

    /// The value of the `rollstat_breaker_state` gauge: 0, 1 or 2.
    #[must_use]
    pub const fn as_gauge(self) -> u8 {
        self as u8
    }

    /// A stable label value: `closed`, `open` or `half_open`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a breaker shows at one instant, as plain values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Signals {
    /// The state (for the SRE breaker: `Open` while its drop ratio is > 0).
    pub state: BreakerState,
    /// The probability that a call at this instant is shed, in `[0, 1)` for
    /// the SRE breaker, 0 or 1 for the error-rate breaker.
    pub drop_ratio: f64,
    /// Requests the breaker's decision currently rests on (window or trials).
    pub requests: u64,
    /// Failures among them.
    pub failures: u64,
    /// Failures over the calls that ran; 0 when none ran.
    pub failure_ratio: f64,
}

/// Counts of state transitions, from → to, since the breaker was created.
/// Published as `rollstat_breaker_transitions_total{from,to}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transitions {
    counts: [[u64; 3]; 3],
}

// === impl Transitions ===

impl Transitions {
    /// How many times the breaker went from `from` to `to`.
    #[must_use]
    pub const fn get(&self, from: BreakerState, to: BreakerState) -> u64 {
        self.counts[from.index()][to.index()]
    }

    /// All transitions together.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.counts
            .iter()
            .flatten()
            .fold(0, |a, &c| a.saturating_add(c))
    }

    /// Every (from, to, count) with `from != to`, zeros included, in a fixed
    /// order, so that exposition can publish all six series from the start.
    pub fn iter(&self) -> impl Iterator<Item = (BreakerState, BreakerState, u64)> + '_ {
        BreakerState::ALL.into_iter().flat_map(move |from| {
            BreakerState::ALL
                .into_iter()
                .filter(move |&to| to != from)
                .map(move |to| (from, to, self.get(from, to)))
        })
    }

    /// Counts one transition (no-op when `from == to`).
    pub(crate) fn record(&mut self, from: BreakerState, to: BreakerState) {
        if from != to {
            let c = &mut self.counts[from.index()][to.index()];
            *c = c.saturating_add(1);
        }
    }
}

/// What every breaker offers; see the [module docs](self).
pub trait Breaker {
    /// Decides whether a call at `now` may go ahead, given a uniform draw in
    /// `[0, 1)` (ignored by deterministic breakers). May record a shed call
    /// or move the breaker's state.
    fn allow(&mut self, now: Timestamp, draw: f64) -> Verdict;

    /// [`allow`](Self::allow) with a draw taken from `rng`. Deterministic
    /// breakers still take exactly one draw, so a scripted source stays in
    /// step whatever the breaker.
    fn allow_with<R: RandomSource + ?Sized>(&mut self, now: Timestamp, rng: &mut R) -> Verdict
    where
        Self: Sized,
    {
        let draw = rng.next_f64();
        self.allow(now, draw)
    }

    /// Records that `count` calls finished at `now` with `outcome`.
    fn record_n(&mut self, outcome: Outcome, count: u64, now: Timestamp);

    /// Records one call that finished at `now` with `outcome`.
    fn record(&mut self, outcome: Outcome, now: Timestamp) {
        self.record_n(outcome, 1, now);
    }

    /// Applies the transitions that the passage of time alone causes.
    fn poll(&mut self, now: Timestamp);

    /// The breaker's signals at `now`. Never changes the breaker.
    fn signals(&self, now: Timestamp) -> Signals;

    /// Transition counts so far.
    fn transitions(&self) -> Transitions;
}

/// A breaker that several threads may use, with its own random generator.
///
/// One `parking_lot::Mutex` around the breaker and a [`SplitMix64`]; see the
/// [module docs](self#sharing-across-threads) for why a mutex.
pub struct SharedBreaker<B> {
    inner: Mutex<SharedInner<B>>,
}

struct SharedInner<B> {
    breaker: B,
    rng: SplitMix64,
}

// === impl SharedBreaker ===

impl<B: Breaker> SharedBreaker<B> {
    /// Wraps `breaker`; draws come from a [`SplitMix64`] seeded with `seed`.
    #[must_use]
    pub fn new(breaker: B, seed: u64) -> Self {
        SharedBreaker {
            inner: Mutex::new(SharedInner {
                breaker,
                rng: SplitMix64::new(seed),
            }),
        }
    }

    /// [`Breaker::allow`] under the lock, with a draw from the inner generator.
    #[inline]
    pub fn allow(&self, now: Timestamp) -> Verdict {
        let mut g = self.inner.lock();
        let draw = g.rng.next_f64();
        g.breaker.allow(now, draw)
    }

    /// What [`SharedBreaker::allow`] would answer at `now`, without taking
    /// it: the breaker and its generator are copied under the lock and the
    /// copy decides, so no trial permit is used and no state moves.
    #[must_use]
    pub fn peek(&self, now: Timestamp) -> Verdict
    where
        B: Clone,
    {
        let (mut b, mut rng) = {
            let g = self.inner.lock();
            (g.breaker.clone(), g.rng.clone())
        };
        let draw = rng.next_f64();
        b.allow(now, draw)
    }

    /// [`Breaker::record`] under the lock.
    #[inline]
    pub fn record(&self, outcome: Outcome, now: Timestamp) {
        self.inner.lock().breaker.record_n(outcome, 1, now);
    }

    /// [`Breaker::record_n`] under the lock.
    pub fn record_n(&self, outcome: Outcome, count: u64, now: Timestamp) {
        self.inner.lock().breaker.record_n(outcome, count, now);
    }

    /// [`Breaker::poll`] under the lock.
    pub fn poll(&self, now: Timestamp) {
        self.inner.lock().breaker.poll(now);
    }

    /// [`Breaker::signals`] under the lock.
    #[must_use]
    pub fn signals(&self, now: Timestamp) -> Signals {
        self.inner.lock().breaker.signals(now)
    }

    /// [`Breaker::transitions`] under the lock.
    #[must_use]
    pub fn transitions(&self) -> Transitions {
        self.inner.lock().breaker.transitions()
    }

    /// Runs `f` with the breaker locked, for breaker-specific methods (such as
    /// [`ErrorRateBreaker::record_call`]) or several operations at one `now`.
    pub fn with<R>(&self, f: impl FnOnce(&mut B) -> R) -> R {
        f(&mut self.inner.lock().breaker)
    }

    /// Unwraps the breaker.
    #[must_use]
    pub fn into_inner(self) -> B {
        self.inner.into_inner().breaker
    }
}

impl<B: fmt::Debug> fmt::Debug for SharedBreaker<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.inner.lock();
        f.debug_struct("SharedBreaker")
            .field("breaker", &g.breaker)
            .finish_non_exhaustive()
    }
}

/// `num / den`, or 0 when `den` is 0.
fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

#[cfg(test)]
mod tests;
