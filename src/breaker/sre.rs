//! Google SRE adaptive throttling, exactly as go-zero's `googleBreaker` does it.
//!
//! The SRE book's client-side throttling sheds a fraction of requests locally
//! when the backend accepts too few of them: with `requests` attempted and
//! `accepts` accepted over a recent window, a new request is rejected with
//! probability `max(0, (requests − K·accepts) / (requests + 1))`. go-zero
//! (`core/breaker/googlebreaker.go`, unchanged from v1.6.6 to HEAD) refines it,
//! and [`SreBreaker`] reproduces go-zero's HEAD behaviour step for step, with
//! time and the random draw passed in.
//!
//! ## What is recorded
//!
//! A [`RollingWindow`] (10 s in 40 buckets of 250 ms by default, no
//! ignore-current, grid anchored at creation as go-zero does) whose buckets
//! keep four counts: Sum (every outcome, drops included), Success, Failure and
//! Drop. [`record_n`](SreBreaker::record_n) adds successes or failures; an
//! [`allow`](SreBreaker::allow) that sheds adds one **drop**, as go-zero's
//! `Allow`/`Do` do (since v1.6.5; older versions recorded nothing, then a
//! failure).
//!
//! ## The decision, at `now`, with a draw `u` in `[0, 1)`
//!
//! One pass over the window, oldest bucket first, gives
//! `accepts = ΣSuccess`, `total = ΣSum`, and two *trailing streaks*:
//!
//! * a bucket with failures resets `working` to 0; else a bucket with
//!   successes adds one to it;
//! * a bucket with successes resets `failing` to 0; else a bucket with
//!   failures adds one to it;
//! * a bucket with neither (empty, or drops only) leaves both alone; a bucket
//!   with both resets both.
//!
//! Then:
//!
//! 1. **k lowered during failure streaks** (go-zero refinement):
//!    `w = max(k − (k − min_k) · failing / buckets, min_k)`. With the defaults
//!    each consecutive failing bucket lowers the multiplier by 0.01, from 1.5
//!    towards 1.1, so a backend that keeps failing is throttled harder.
//! 2. `ratio = ((total − protection) − w · accepts) / (total + 1)`. The
//!    **protection** (go-zero refinement, 5 by default) is subtracted in the
//!    numerator only, so a window holding at most `protection` requests never
//!    sheds.
//! 3. `ratio ≤ 0` → **allow**, and `last_pass` is *not* updated.
//! 4. **Forced pass** (go-zero refinement): if some earlier call passed the
//!    probabilistic test (`last_pass` is set) and `now − last_pass >
//!    force_pass` (1 s, strictly greater), **allow** and set `last_pass = now`.
//!    A breaker that has only ever shed since creation is never forced open:
//!    `last_pass` is only set by step 6.
//! 5. **Damping during recovery streaks** (go-zero refinement):
//!    `ratio ·= (buckets − working) / buckets`, so each trailing bucket with
//!    successes and no failures takes 1/40 off the ratio.
//! 6. `u < ratio` → **shed** and record a drop; else **allow** and set
//!    `last_pass = now`.
//!
//! `ratio < 1` holds (the `+ 1` in the denominator), so some requests
//! always get through (below 2^53 requests in the window; see [Counts](#counts)).
//!
//! ## Signals
//!
//! [`signals`](SreBreaker::signals) (read-only) reports:
//!
//! * `drop_ratio`: the ratio step 6 would compare the draw with at `now` (after
//!   the damping of step 5), or 0 when step 3 would allow. A forced pass does
//!   not change it: it is the throttling level, not the next call's fate.
//! * `state`: the SRE breaker has no states. rollstat reports **`Open` while
//!   `drop_ratio > 0`** (some calls are being shed) and `Closed` otherwise; it
//!   never reports `HalfOpen`. [`transitions`](SreBreaker::transitions)
//!   counts changes of this derived state as seen by successive
//!   [`allow`](SreBreaker::allow) and [`poll`](SreBreaker::poll) calls (not by
//!   `signals`, which never changes anything).
//! * `requests = total` (drops included: the SRE book's "requests" are
//!   attempts), `failures = ΣFailure` (backend failures only; local drops are
//!   not failures of the backend, and [`history`](SreBreaker::history) reports
//!   them separately), `failure_ratio = failures / (accepts + failures)`, the
//!   share of the calls that ran which failed.
//!
//! ## Counts
//!
//! Every count saturates at `u64::MAX` instead of wrapping or panicking: a
//! bucket's four counts, and the window sums of [`history`](SreBreaker::history)
//! (a saturating sum of non-negative counts is the exact sum clamped to
//! `u64::MAX`, whatever the order). The ratios are computed in `f64` from
//! those counts and stay finite, the drop ratio in `[0, 1]` and the failure
//! ratio in `[0, 1]` (the drop ratio stays below 1 while `total` is below
//! 2^53; above, `f64` rounds the `+ 1` away). The daemon caps what one report
//! may add (`service::breakers::MAX_OUTCOMES`, 10^9), so the saturation is a
//! backstop that real traffic does not reach.

use std::time::Duration;

use super::{ratio, Breaker, BreakerState, Outcome, Signals, Transitions, Verdict};
use crate::clock::Timestamp;
use crate::window::bucket::Bucket;
use crate::window::{RollingWindow, WindowSpec, WindowSpecError};

/// Settings of an [`SreBreaker`]. [`Default`] gives go-zero's constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SreConfig {
    /// Length of the window (go-zero: 10 s).
    pub window: Duration,
    /// Number of buckets in the window (go-zero: 40, so 250 ms each). Also the
    /// denominator of the streak refinements.
    pub buckets: usize,
    /// The accepts multiplier K (go-zero: 1.5; the SRE book prefers 2).
    pub k: f64,
    /// The floor K is lowered towards during failure streaks (go-zero: 1.1).
    pub min_k: f64,
    /// Requests subtracted from the total in the numerator (go-zero: 5).
    pub protection: u64,
    /// Longest time without a pass once throttling (go-zero: 1 s).
    pub force_pass: Duration,
}

impl Default for SreConfig {
    fn default() -> Self {
        SreConfig {
            window: Duration::from_secs(10),
            buckets: 40,
            k: 1.5,
            min_k: 1.1,
            protection: 5,
            force_pass: Duration::from_secs(1),
        }
    }
}

/// An [`SreConfig`] field out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SreConfigError {
    /// `k` below 1 or not finite.
    #[error("sre breaker: `k` must be a finite number >= 1.0 (below 1 it sheds healthy traffic); got {0}")]
    K(f64),
    /// `min_k` outside `[1, k]`.
    #[error("sre breaker: `min_k` must be in [1.0, k] = [1.0, {k}]; got {min_k}")]
    MinK {
        /// The value given.
        min_k: f64,
        /// The configured `k`, the upper end of the range.
        k: f64,
    },
    /// `force_pass` was zero.
    #[error("sre breaker: `force_pass` must be > 0 (go-zero uses 1s); got 0")]
    ForcePass,
    /// `window` / `buckets` do not make a window.
    #[error(
        "sre breaker: `window` {window:?} in `buckets` {buckets} is not a valid window: {source}"
    )]
    Window {
        /// The window length given.
        window: Duration,
        /// The bucket count given.
        buckets: usize,
        /// What the window rejected.
        source: WindowSpecError,
    },
}

// === impl SreConfig ===

impl SreConfig {
    /// Checks every field; returns the window shape to build.
    pub fn validate(&self) -> Result<WindowSpec, SreConfigError> {
        if !self.k.is_finite() || self.k < 1.0 {
            return Err(SreConfigError::K(self.k));
        }
        if !self.min_k.is_finite() || self.min_k < 1.0 || self.min_k > self.k {
            return Err(SreConfigError::MinK {
                min_k: self.min_k,
                k: self.k,
            });
        }
        if self.force_pass.is_zero() {
            return Err(SreConfigError::ForcePass);
        }
        WindowSpec::over(self.window, self.buckets).map_err(|source| SreConfigError::Window {
            window: self.window,
            buckets: self.buckets,
            source,
        })
    }
}

/// One SRE bucket: go-zero's `bucket` (Sum, Success, Failure, Drop).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SreBucket {
    sum: u64,
    success: u64,
    failure: u64,
    drop: u64,
}

/// What one add brings into an [`SreBucket`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SreEvent {
    Success,
    Failure,
    Drop,
}

impl Bucket for SreBucket {
    type Input = (SreEvent, u64);
    #[inline]
    fn add(&mut self, (event, n): (SreEvent, u64)) {
        self.sum = self.sum.saturating_add(n);
        let c = match event {
            SreEvent::Success => &mut self.success,
            SreEvent::Failure => &mut self.failure,
            SreEvent::Drop => &mut self.drop,
        };
        *c = c.saturating_add(n);
    }
    #[inline]
    fn reset(&mut self) {
        *self = SreBucket::default();
    }
    #[inline]
    fn merge(&mut self, o: &Self) {
        self.sum = self.sum.saturating_add(o.sum);
        self.success = self.success.saturating_add(o.success);
        self.failure = self.failure.saturating_add(o.failure);
        self.drop = self.drop.saturating_add(o.drop);
    }
}

/// The window as the decision sees it (go-zero's `windowResult`, plus
/// failures and drops).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SreHistory {
    /// Successes (ΣSuccess).
    pub accepts: u64,
    /// Every outcome, drops included (ΣSum).
    pub total: u64,
    /// Backend failures (ΣFailure).
    pub failures: u64,
    /// Calls shed by this breaker (ΣDrop).
    pub drops: u64,
    /// Trailing streak of buckets with failures and no successes.
    pub failing_buckets: u64,
    /// Trailing streak of buckets with successes and no failures.
    pub working_buckets: u64,
}

/// go-zero's adaptive breaker; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct SreBreaker {
    config: SreConfig,
    window: RollingWindow<SreBucket>,
    last_pass: Option<Timestamp>,
    /// The derived state last seen by `allow` or `poll`.
    observed: BreakerState,
    transitions: Transitions,
}

// === impl SreBreaker ===

impl SreBreaker {
    /// A breaker whose window grid is anchored at `now`, as go-zero's is.
    pub fn new(config: SreConfig, now: Timestamp) -> Result<Self, SreConfigError> {
        let spec = config.validate()?;
        Ok(SreBreaker {
            config,
            window: RollingWindow::new(spec, now),
            last_pass: None,
            observed: BreakerState::Closed,
            transitions: Transitions::default(),
        })
    }

    /// Takes `config` at `now` (a config reload), keeping the state: the
    /// window's counts (the drop ratio goes on from them under the new `k`),
    /// the last pass and the transition counts. A new window shape takes the
    /// counts as [`RollingWindow::rebucketed`] says, on a grid anchored at
    /// `now`.
    ///
    /// # Errors
    ///
    /// [`SreConfigError`]: `config` is not valid; nothing changes.
    pub fn reconfigure(&mut self, config: SreConfig, now: Timestamp) -> Result<(), SreConfigError> {
        let spec = config.validate()?;
        if spec != self.window.spec() {
            self.window = self.window.rebucketed(spec, now, now);
        }
        self.config = config;
        Ok(())
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &SreConfig {
        &self.config
    }

    /// When a call last passed the probabilistic test or was forced through
    /// (go-zero's `lastPass`); `None` until then.
    #[must_use]
    pub fn last_pass(&self) -> Option<Timestamp> {
        self.last_pass
    }

    /// Accepts, total, failures, drops and the trailing streaks at `now`.
    /// The sums saturate at `u64::MAX` (see the [module docs](self#counts)).
    #[must_use]
    pub fn history(&self, now: Timestamp) -> SreHistory {
        let mut h = SreHistory::default();
        self.window.visit(now, |b| {
            h.accepts = h.accepts.saturating_add(b.success);
            h.total = h.total.saturating_add(b.sum);
            h.failures = h.failures.saturating_add(b.failure);
            h.drops = h.drops.saturating_add(b.drop);
            if b.failure > 0 {
                h.working_buckets = 0;
            } else if b.success > 0 {
                h.working_buckets += 1;
            }
            if b.success > 0 {
                h.failing_buckets = 0;
            } else if b.failure > 0 {
                h.failing_buckets += 1;
            }
        });
        h
    }

    /// Steps 1 and 2: the undamped ratio.
    fn raw_ratio(&self, h: &SreHistory) -> f64 {
        let n = self.config.buckets as f64;
        let (k, min_k) = (self.config.k, self.config.min_k);
        let w = (k - (k - min_k) * h.failing_buckets as f64 / n).max(min_k);
        let total = h.total as f64;
        ((total - self.config.protection as f64) - w * h.accepts as f64) / (total + 1.0)
    }

    /// Step 5: the damping factor.
    fn damping(&self, h: &SreHistory) -> f64 {
        let n = self.config.buckets as f64;
        (n - h.working_buckets as f64) / n
    }

    /// The drop ratio a decision at `now` would compare its draw with (0 when
    /// it would allow without drawing).
    #[must_use]
    pub fn drop_ratio(&self, now: Timestamp) -> f64 {
        let h = self.history(now);
        self.drop_ratio_of(&h)
    }

    fn drop_ratio_of(&self, h: &SreHistory) -> f64 {
        let r = self.raw_ratio(h);
        if r <= 0.0 {
            0.0
        } else {
            (r * self.damping(h)).max(0.0)
        }
    }

    fn observe(&mut self, ratio: f64) {
        let state = if ratio > 0.0 {
            BreakerState::Open
        } else {
            BreakerState::Closed
        };
        self.transitions.record(self.observed, state);
        self.observed = state;
    }

    /// The decision at `now` with the uniform draw `draw` in `[0, 1)`; a shed
    /// call is recorded as a drop. See the [module docs](self) for the steps.
    pub fn allow(&mut self, now: Timestamp, draw: f64) -> Verdict {
        let h = self.history(now);
        let r = self.raw_ratio(&h);
        if r <= 0.0 {
            self.observe(0.0);
            return Verdict::Allow;
        }
        let damped = r * self.damping(&h);
        self.observe(damped);
        if let Some(last) = self.last_pass {
            if now.saturating_duration_since(last) > self.config.force_pass {
                self.last_pass = Some(now);
                return Verdict::Allow;
            }
        }
        if draw < damped {
            self.window.add((SreEvent::Drop, 1), now);
            Verdict::Shed
        } else {
            self.last_pass = Some(now);
            Verdict::Allow
        }
    }

    /// Records one call that ended with `outcome` at `now`.
    #[inline]
    pub fn record(&mut self, outcome: Outcome, now: Timestamp) {
        self.record_n(outcome, 1, now);
    }

    /// Records `count` calls that ran and ended with `outcome` at `now`.
    pub fn record_n(&mut self, outcome: Outcome, count: u64, now: Timestamp) {
        if count == 0 {
            return;
        }
        let event = match outcome {
            Outcome::Success => SreEvent::Success,
            Outcome::Failure => SreEvent::Failure,
        };
        self.window.add((event, count), now);
    }

    /// Updates the derived state (and transition counts) to `now` without a
    /// call.
    pub fn poll(&mut self, now: Timestamp) {
        let r = self.drop_ratio(now);
        self.observe(r);
    }

    /// Signals at `now`; see the [module docs](self#signals).
    #[must_use]
    pub fn signals(&self, now: Timestamp) -> Signals {
        let h = self.history(now);
        let drop_ratio = self.drop_ratio_of(&h);
        Signals {
            state: if drop_ratio > 0.0 {
                BreakerState::Open
            } else {
                BreakerState::Closed
            },
            drop_ratio,
            requests: h.total,
            failures: h.failures,
            failure_ratio: ratio(h.failures, h.accepts.saturating_add(h.failures)),
        }
    }

    /// Transition counts (Closed ↔ Open) as seen by `allow` and `poll`.
    #[must_use]
    pub fn transitions(&self) -> Transitions {
        self.transitions
    }
}

impl Breaker for SreBreaker {
    #[inline]
    fn allow(&mut self, now: Timestamp, draw: f64) -> Verdict {
        SreBreaker::allow(self, now, draw)
    }
    #[inline]
    fn record_n(&mut self, outcome: Outcome, count: u64, now: Timestamp) {
        SreBreaker::record_n(self, outcome, count, now);
    }
    fn poll(&mut self, now: Timestamp) {
        SreBreaker::poll(self, now);
    }
    fn signals(&self, now: Timestamp) -> Signals {
        SreBreaker::signals(self, now)
    }
    fn transitions(&self) -> Transitions {
        self.transitions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    const T0: Timestamp = ManualClock::DEFAULT_START;
    const NEVER_SHED: f64 = 0.999_999;
    const ALWAYS_SHED: f64 = 0.0;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn breaker() -> SreBreaker {
        SreBreaker::new(SreConfig::default(), T0).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn default_config_is_go_zeros_and_valid() {
        let c = SreConfig::default();
        assert_eq!(c.validate().unwrap().interval(), ms(250));
        assert_eq!((c.k, c.min_k, c.protection), (1.5, 1.1, 5));
        assert_eq!(c.force_pass, ms(1000));
    }

    #[test]
    fn bad_config_names_the_field_and_range() {
        let bad = |f: fn(&mut SreConfig)| {
            let mut c = SreConfig::default();
            f(&mut c);
            SreBreaker::new(c, T0).unwrap_err().to_string()
        };
        assert!(bad(|c| c.k = 0.9).contains("`k` must be a finite number >= 1.0"));
        assert!(bad(|c| c.k = f64::NAN).contains("`k`"));
        assert!(bad(|c| c.min_k = 1.6).contains("`min_k` must be in [1.0, k] = [1.0, 1.5]"));
        assert!(bad(|c| c.force_pass = Duration::ZERO).contains("`force_pass` must be > 0"));
        assert!(bad(|c| c.buckets = 0).contains("`buckets` 0"));
        assert!(bad(|c| c.window = Duration::from_nanos(10)).contains("`window`"));
    }

    #[test]
    fn a_fresh_breaker_passes() {
        let mut b = breaker();
        assert_eq!(b.allow(T0, ALWAYS_SHED), Verdict::Allow);
        assert_eq!(b.signals(T0).drop_ratio, 0.0);
        assert_eq!(b.signals(T0).state, BreakerState::Closed);
        assert_eq!(b.last_pass(), None);
    }

    #[test]
    fn at_most_protection_requests_never_trip() {
        let mut b = breaker();
        b.record_n(Outcome::Failure, 5, T0);
        // (5 - 5 - 0) / 6 = 0: equality passes, and lastPass stays unset.
        assert_eq!(b.allow(T0, ALWAYS_SHED), Verdict::Allow);
        assert_eq!(b.last_pass(), None);
        assert_eq!(b.history(T0).drops, 0);
        b.record(Outcome::Failure, T0);
        // (6 - 5) / 7 > 0: now a zero draw sheds.
        assert!(close(b.drop_ratio(T0), 1.0 / 7.0));
        assert_eq!(b.allow(T0, ALWAYS_SHED), Verdict::Shed);
    }

    #[test]
    fn ratio_matches_the_formula_for_all_failures() {
        let mut b = breaker();
        b.record_n(Outcome::Failure, 100, T0);
        // (100 - 5 - w * 0) / 101, no working streak to damp it.
        let s = b.signals(T0 + ms(10));
        assert!(close(s.drop_ratio, 95.0 / 101.0), "{}", s.drop_ratio);
        assert_eq!(s.state, BreakerState::Open);
        assert_eq!((s.requests, s.failures, s.failure_ratio), (100, 100, 1.0));
        // A draw just below the ratio sheds, one at it passes.
        assert_eq!(b.clone().allow(T0, 95.0 / 101.0 - 1e-9), Verdict::Shed);
        assert_eq!(b.allow(T0, 95.0 / 101.0), Verdict::Allow);
    }

    #[test]
    fn ratio_at_or_below_zero_passes_without_setting_last_pass() {
        let mut b = breaker();
        b.record_n(Outcome::Success, 10, T0);
        b.record_n(Outcome::Failure, 10, T0);
        // (20 - 5 - 1.5 * 10) / 21 = 0.
        assert_eq!(b.drop_ratio(T0), 0.0);
        assert_eq!(b.allow(T0, ALWAYS_SHED), Verdict::Allow);
        assert_eq!(b.last_pass(), None);
    }

    /// 100 failures at T0: ratio 95/101 until they expire.
    fn throttling() -> SreBreaker {
        let mut b = breaker();
        b.record_n(Outcome::Failure, 100, T0);
        b
    }

    #[test]
    fn force_pass_is_strictly_after_one_second_since_the_last_pass() {
        let mut b = throttling();
        let t1 = T0 + ms(1);
        assert_eq!(b.allow(t1, NEVER_SHED), Verdict::Allow);
        assert_eq!(b.last_pass(), Some(t1));
        // Exactly 1000 ms later: still probabilistic, so a zero draw sheds.
        assert_eq!(b.allow(t1 + ms(1000), ALWAYS_SHED), Verdict::Shed);
        assert_eq!(b.last_pass(), Some(t1));
        // 1001 ms: forced through despite the zero draw; lastPass moves.
        let t2 = t1 + ms(1001);
        assert_eq!(b.allow(t2, ALWAYS_SHED), Verdict::Allow);
        assert_eq!(b.last_pass(), Some(t2));
        // And the next call right after is probabilistic again.
        assert_eq!(b.allow(t2 + ms(1), ALWAYS_SHED), Verdict::Shed);
    }

    #[test]
    fn force_pass_needs_a_previous_probabilistic_pass() {
        let mut b = throttling();
        for i in 0..9 {
            let t = T0 + ms(1000 * i);
            assert_eq!(b.allow(t, ALWAYS_SHED), Verdict::Shed, "at {i} s");
        }
        assert_eq!(b.last_pass(), None);
    }

    #[test]
    fn k_is_lowered_by_a_trailing_failing_streak() {
        let mut b = breaker();
        b.record_n(Outcome::Success, 10, T0);
        for i in 1..=4 {
            b.record_n(Outcome::Failure, 10, T0 + ms(250 * i));
        }
        let now = T0 + ms(1100);
        let h = b.history(now);
        assert_eq!((h.failing_buckets, h.working_buckets), (4, 0));
        assert_eq!((h.accepts, h.total), (10, 50));
        // w = 1.5 - 0.4 * 4 / 40 = 1.46; with k unlowered it would be 30 / 51.
        let w = 1.5 - (1.5 - 1.1) * 4.0 / 40.0;
        let expected = (45.0 - w * 10.0) / 51.0;
        assert!(close(b.drop_ratio(now), expected), "{}", b.drop_ratio(now));
        assert!(!close(expected, 30.0 / 51.0));
    }

    #[test]
    fn configured_k_min_k_and_buckets_enter_the_formula() {
        let mut c = SreConfig {
            buckets: 4,
            window: ms(1000),
            ..SreConfig::default()
        };
        c.min_k = 1.3;
        let mut b = SreBreaker::new(c, T0).unwrap();
        b.record_n(Outcome::Success, 10, T0);
        for i in 1..=3 {
            b.record_n(Outcome::Failure, 10, T0 + ms(250 * i));
        }
        // failing = 3 of 4: w = 1.5 - 0.2 * 3 / 4 = 1.35. (The min_k floor
        // never bites: failing <= buckets keeps w >= min_k, as in go-zero.)
        let now = T0 + ms(800);
        assert!(close(b.drop_ratio(now), (40.0 - 5.0 - 1.35 * 10.0) / 41.0));
        // Another shape: 2 buckets, k = 3, min_k = 1.
        let c2 = SreConfig {
            buckets: 2,
            window: ms(500),
            k: 3.0,
            min_k: 1.0,
            ..SreConfig::default()
        };
        let mut b2 = SreBreaker::new(c2, T0).unwrap();
        b2.record_n(Outcome::Success, 10, T0);
        b2.record_n(Outcome::Failure, 40, T0 + ms(250));
        // failing 1 of 2: w = 3 - 2 * 1 / 2 = 2.
        let now = T0 + ms(300);
        assert!(close(b2.drop_ratio(now), (50.0 - 5.0 - 2.0 * 10.0) / 51.0));
    }

    #[test]
    fn a_working_streak_damps_the_ratio() {
        let mut b = breaker();
        b.record_n(Outcome::Failure, 100, T0);
        for i in 1..=3 {
            b.record(Outcome::Success, T0 + ms(250 * i));
        }
        let now = T0 + ms(900);
        let h = b.history(now);
        assert_eq!((h.failing_buckets, h.working_buckets), (0, 3));
        let undamped = (103.0 - 5.0 - 1.5 * 3.0) / 104.0;
        let expected = undamped * 37.0 / 40.0;
        assert!(close(b.drop_ratio(now), expected));
        // The draw is compared with the damped ratio.
        assert_eq!(b.clone().allow(now, expected - 1e-9), Verdict::Shed);
        assert_eq!(b.allow(now, expected + 1e-9), Verdict::Allow);
    }

    #[test]
    fn streaks_skip_empty_and_drop_only_buckets_and_mixed_buckets_reset_both() {
        let mut b = breaker();
        let at = |i: u64| T0 + ms(250 * i);
        b.record_n(Outcome::Failure, 100, at(0));
        // Bucket 1 empty; bucket 2 drops only.
        assert_eq!(b.allow(at(2), ALWAYS_SHED), Verdict::Shed);
        let h = b.history(at(2));
        assert_eq!((h.failing_buckets, h.working_buckets, h.drops), (1, 0, 1));
        b.record(Outcome::Failure, at(3));
        assert_eq!(b.history(at(3)).failing_buckets, 2);
        // Bucket 4: success and failure, both streaks reset.
        b.record(Outcome::Failure, at(4));
        b.record(Outcome::Success, at(4));
        let h = b.history(at(4));
        assert_eq!((h.failing_buckets, h.working_buckets), (0, 0));
        // Bucket 5 successes only, bucket 6 empty, bucket 7 drops only.
        b.record(Outcome::Success, at(5));
        assert_eq!(b.allow(at(7), ALWAYS_SHED), Verdict::Shed);
        let h = b.history(at(7));
        assert_eq!((h.failing_buckets, h.working_buckets), (0, 1));
        assert_eq!(h.drops, 2);
    }

    #[test]
    fn shed_calls_are_recorded_as_drops_and_counted_in_total() {
        let mut b = throttling();
        assert_eq!(b.allow(T0, ALWAYS_SHED), Verdict::Shed);
        assert_eq!(b.allow(T0, ALWAYS_SHED), Verdict::Shed);
        let h = b.history(T0);
        assert_eq!((h.total, h.accepts, h.failures, h.drops), (102, 0, 100, 2));
        let s = b.signals(T0);
        assert_eq!((s.requests, s.failures), (102, 100));
        assert!(close(s.drop_ratio, 97.0 / 103.0));
        // A pass records nothing.
        assert_eq!(b.allow(T0, NEVER_SHED), Verdict::Allow);
        assert_eq!(b.history(T0).total, 102);
    }

    #[test]
    fn outcomes_expire_after_ten_seconds() {
        let mut b = throttling();
        let end = T0 + Duration::from_secs(10);
        assert_eq!(b.signals(end - Duration::from_nanos(1)).requests, 100);
        let s = b.signals(end);
        assert_eq!((s.requests, s.drop_ratio), (0, 0.0));
        assert_eq!(b.allow(end, ALWAYS_SHED), Verdict::Allow);
    }

    #[test]
    fn huge_counts_saturate_across_buckets_and_the_ratios_stay_finite() {
        // Two u64::MAX batches in two buckets overflowed the
        // window sums (a panic in debug builds, a wrap in release).
        let mut b = breaker();
        let last = T0 + ms(250 * 39);
        for i in 0..40 {
            let t = T0 + ms(250 * i);
            b.record_n(Outcome::Failure, u64::MAX, t);
            b.record_n(Outcome::Failure, u64::MAX, t);
            b.record_n(Outcome::Success, u64::MAX / 3, t);
        }
        let h = b.history(last);
        assert_eq!(
            (h.accepts, h.total, h.failures, h.drops),
            (u64::MAX, u64::MAX, u64::MAX, 0)
        );
        let s = b.signals(last);
        assert_eq!((s.requests, s.failures), (u64::MAX, u64::MAX));
        // Every bucket holds both kinds: no streaks; w·accepts outweighs the
        // total, so nothing is shed. Both sides of the failure ratio saturate.
        assert_eq!((s.drop_ratio, s.failure_ratio), (0.0, 1.0));
        // Failures only: the ratio rounds to 1 in f64 but stays a number; a
        // shed adds a drop to saturated counts and nothing panics.
        let mut b = breaker();
        for i in 0..40 {
            b.record_n(Outcome::Failure, u64::MAX, T0 + ms(250 * i));
        }
        let s = b.signals(last);
        assert_eq!(
            (s.requests, s.failures, s.failure_ratio),
            (u64::MAX, u64::MAX, 1.0)
        );
        assert!((0.0..=1.0).contains(&s.drop_ratio), "{}", s.drop_ratio);
        assert_eq!(b.allow(last, ALWAYS_SHED), Verdict::Shed);
        b.poll(last);
        assert_eq!(b.history(last).drops, 1);
        // At the daemon's cap per report the sums stay exact.
        let mut b = breaker();
        for i in 0..40 {
            b.record_n(Outcome::Failure, 1_000_000_000, T0 + ms(250 * i));
        }
        assert_eq!(b.history(last).total, 40_000_000_000);
    }

    #[test]
    fn derived_state_transitions_are_counted_by_allow_and_poll_only() {
        let mut b = breaker();
        b.record_n(Outcome::Failure, 100, T0);
        // signals() shows Open but counts nothing.
        assert_eq!(b.signals(T0).state, BreakerState::Open);
        assert_eq!(b.transitions().total(), 0);
        b.allow(T0, NEVER_SHED);
        b.allow(T0, NEVER_SHED);
        assert_eq!(
            b.transitions()
                .get(BreakerState::Closed, BreakerState::Open),
            1
        );
        b.poll(T0 + Duration::from_secs(10));
        let t = b.transitions();
        assert_eq!(t.get(BreakerState::Open, BreakerState::Closed), 1);
        assert_eq!(t.total(), 2);
    }
}
