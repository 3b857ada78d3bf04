//! An error-rate circuit breaker: closed, open, half-open.
//!
//! [`ErrorRateBreaker`] counts calls, failures and slow calls in a time-based
//! [`RollingWindow`] (10 buckets of 1 s by default, epoch-aligned like
//! resilience4j's epoch-second window, current partial bucket included).
//!
//! * **Closed**: every call is allowed. After every recorded outcome, if the
//!   window holds at least `min_calls` calls and the failure rate is
//!   `>= failure_rate_threshold` (or, when configured, the slow-call rate is
//!   `>= slow_call.rate_threshold`), the breaker opens at that instant.
//! * **Open**: every call is shed; outcomes reported meanwhile are ignored.
//!   The first `allow`, `record*` or [`poll`](ErrorRateBreaker::poll)
//!   *strictly after* `opened_at + open_duration` moves to half-open (an
//!   `allow` then takes the first trial permit).
//! * **Half-open**: exactly `half_open_trials` (P) permits are handed out, each
//!   once; other callers are shed. The first P outcomes recorded after
//!   entering half-open are the trials, whether or not they came through a
//!   permit (the daemon is fed outcome counters it does not gate). When the
//!   P-th trial outcome is in: failure rate (or slow rate) of the trials `>=`
//!   its threshold → open again with `opened_at = now`; otherwise closed, with
//!   a fresh, empty window. Outcomes after that are handled by the new state
//!   (ignored if open, counted in the fresh window if closed), also when they
//!   arrive in the same batch as the last trials. With `half_open_max_wait`
//!   set, the first `allow`, `record*` or `poll` strictly after that long in
//!   half-open, with trial outcomes still missing, opens the breaker again
//!   (`opened_at = now`): trials whose outcomes never arrive (a client that
//!   crashed, statsd lines lost on UDP) cannot hold it half-open, shedding
//!   everything but the trials, for ever.
//!
//! Batches ([`record_n`](ErrorRateBreaker::record_n)) give exactly the result
//! of recording their calls one by one (a property test checks it): within a
//! batch of one kind each rate moves monotonically, so the call at which the
//! breaker would open is found without replaying the batch; the calls of the
//! batch after it are ignored, as they would be by an open breaker.
//!
//! Counts saturate at `u64::MAX` (bucket adds, window sums, trials), so no
//! batch wraps or panics; the daemon caps one report at 10^9 outcomes
//! (`service::breakers::MAX_OUTCOMES`), far below that.
//!
//! A signal read never changes the breaker. The daemon calls
//! [`poll`](ErrorRateBreaker::poll) before reading signals so that
//! `rollstat_breaker_state` shows half-open even when nobody calls `allow`.
//!
//! ## Whose semantics, knob by knob
//!
//! | knob | rollstat | resilience4j 2.x | Hystrix 1.5 | follows |
//! |---|---|---|---|---|
//! | window | time-based, `buckets` × `window/buckets`, current partial bucket counts, epoch-aligned | TIME_BASED: N epoch seconds incl. the partial current one | completed 500 ms buckets only, snapshot every 500 ms | resilience4j |
//! | `min_calls` | no decision while calls in window `< min_calls` | same (`minimumNumberOfCalls`) | same (`requestVolumeThreshold`) | both |
//! | `failure_rate_threshold` | ratio in (0, 1], inclusive `>=`, exact float | `>=` on float % | `>=` on integer % | resilience4j |
//! | when evaluated | after every recorded outcome | after every recorded call | on the next health snapshot (≤ 500 ms late) | resilience4j |
//! | `slow_call` | slow = duration `>` threshold (strict); rate `>=` threshold (inclusive); off by default | same; on by default at 100 % / 60 s | none (timeouts count as failures) | resilience4j |
//! | `open_duration` | first `allow`/`record`/`poll` strictly after `opened_at + open_duration` | first call strictly after (`waitDurationInOpenState`) | first call strictly after (`sleepWindow`) | both; `poll` is ours |
//! | `half_open_trials` | P permits, each once; others shed | P permits (`permittedNumberOfCallsInHalfOpenState`) | a single trial | resilience4j |
//! | half-open verdict | when P trial outcomes are in | at `min(min_calls, P)` outcomes | on the one trial | resilience4j when `min_calls >= P` (its default 100 ≥ 10); we always wait for all P |
//! | outcomes in half-open | the first P recorded are the trials, permit or not; later ones belong to the verdict's state | calls admitted by a permit (and in-flight calls finishing) fill the half-open window | the trial's own outcome | ours: the daemon's outcome feed is not gated |
//! | outcomes while open | ignored | recorded into the stale closed metrics, no effect | no effect | equivalent |
//! | closing | fresh window | fresh metrics | health counts reset | both |
//! | stuck half-open | `half_open_max_wait`: open again strictly after it; unset (default) = wait indefinitely | `maxWaitDurationInHalfOpenState`: open again after it; 0 (default) = indefinitely | — | resilience4j |
//!
//! Defaults: 10 s window in 10 buckets, `min_calls` 20 (Hystrix; resilience4j's
//! 100 suits its count-based window), failure threshold 0.5 (both), no slow-call
//! rule, `open_duration` 5 s (Hystrix; resilience4j waits 60 s), 10 trials
//! (resilience4j).

use std::time::Duration;

use super::{ratio, Breaker, BreakerState, Outcome, Signals, Transitions, Verdict};
use crate::clock::Timestamp;
use crate::window::bucket::Bucket;
use crate::window::{RollingWindow, WindowSpec, WindowSpecError};

/// The optional slow-call rule (resilience4j's `slowCallDurationThreshold`
/// and `slowCallRateThreshold`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowCallConfig {
    /// A call taking strictly longer than this is slow.
    pub duration: Duration,
    /// Slow calls over calls at or above this ratio, in (0, 1], trip the breaker.
    pub rate_threshold: f64,
}

/// Settings of an [`ErrorRateBreaker`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorRateConfig {
    /// Length of the window (default 10 s).
    pub window: Duration,
    /// Buckets in the window (default 10, so 1 s each as in resilience4j).
    pub buckets: usize,
    /// Fewest calls in the window for any decision (default 20, >= 1).
    pub min_calls: u64,
    /// Failures over calls at or above this ratio, in (0, 1], open the
    /// breaker (default 0.5).
    pub failure_rate_threshold: f64,
    /// The optional slow-call rule (default off).
    pub slow_call: Option<SlowCallConfig>,
    /// How long the breaker stays open before trials (default 5 s).
    pub open_duration: Duration,
    /// Trial calls in half-open (default 10, >= 1).
    pub half_open_trials: u32,
    /// Longest time in half-open waiting for the trial outcomes before the
    /// breaker opens again (default: none, wait indefinitely).
    pub half_open_max_wait: Option<Duration>,
}

impl Default for ErrorRateConfig {
    fn default() -> Self {
        ErrorRateConfig {
            window: Duration::from_secs(10),
            buckets: 10,
            min_calls: 20,
            failure_rate_threshold: 0.5,
            slow_call: None,
            open_duration: Duration::from_secs(5),
            half_open_trials: 10,
            half_open_max_wait: None,
        }
    }
}

/// An [`ErrorRateConfig`] field out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ErrorRateConfigError {
    /// `min_calls` was 0.
    #[error("error-rate breaker: `min_calls` must be >= 1; got 0")]
    MinCalls,
    /// `failure_rate_threshold` outside (0, 1].
    #[error("error-rate breaker: `failure_rate_threshold` must be in (0, 1]; got {0}")]
    FailureRateThreshold(f64),
    /// `slow_call.rate_threshold` outside (0, 1].
    #[error("error-rate breaker: `slow_call.rate_threshold` must be in (0, 1]; got {0}")]
    SlowCallRateThreshold(f64),
    /// `half_open_trials` was 0.
    #[error("error-rate breaker: `half_open_trials` must be >= 1; got 0")]
    HalfOpenTrials,
    /// `half_open_max_wait` was zero.
    #[error("error-rate breaker: `half_open_max_wait` must be above 0 (leave it unset to wait indefinitely)")]
    HalfOpenMaxWait,
    /// `window` / `buckets` do not make a window.
    #[error("error-rate breaker: `window` {window:?} in `buckets` {buckets} is not a valid window: {source}")]
    Window {
        /// The window length given.
        window: Duration,
        /// The bucket count given.
        buckets: usize,
        /// What the window rejected.
        source: WindowSpecError,
    },
}

fn in_unit_interval(x: f64) -> bool {
    x > 0.0 && x <= 1.0
}

// === impl ErrorRateConfig ===

impl ErrorRateConfig {
    /// Checks every field; returns the window shape to build.
    pub fn validate(&self) -> Result<WindowSpec, ErrorRateConfigError> {
        if self.min_calls == 0 {
            return Err(ErrorRateConfigError::MinCalls);
        }
        if !in_unit_interval(self.failure_rate_threshold) {
            return Err(ErrorRateConfigError::FailureRateThreshold(
                self.failure_rate_threshold,
            ));
        }
        if let Some(slow) = self.slow_call {
            if !in_unit_interval(slow.rate_threshold) {
                return Err(ErrorRateConfigError::SlowCallRateThreshold(
                    slow.rate_threshold,
                ));
            }
        }
        if self.half_open_trials == 0 {
            return Err(ErrorRateConfigError::HalfOpenTrials);
        }
        if self.half_open_max_wait == Some(Duration::ZERO) {
            return Err(ErrorRateConfigError::HalfOpenMaxWait);
        }
        WindowSpec::over(self.window, self.buckets).map_err(|source| ErrorRateConfigError::Window {
            window: self.window,
            buckets: self.buckets,
            source,
        })
    }

    /// Whether `c` trips the thresholds (ignoring `min_calls`).
    fn exceeded(&self, c: &CallCounts) -> bool {
        if c.calls == 0 {
            return false;
        }
        if c.failure_ratio() >= self.failure_rate_threshold {
            return true;
        }
        match self.slow_call {
            Some(slow) => c.slow_ratio() >= slow.rate_threshold,
            None => false,
        }
    }
}

/// Calls, failures and slow calls: one window bucket, a whole window, or the
/// half-open trials. Also the input of one bucket add.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// Calls recorded.
    pub calls: u64,
    /// Of which failed.
    pub failures: u64,
    /// Of which were slow (failed or not).
    pub slow: u64,
}

impl CallCounts {
    /// `failures / calls`, 0 when there were no calls.
    #[must_use]
    pub fn failure_ratio(&self) -> f64 {
        ratio(self.failures, self.calls)
    }

    /// `slow / calls`, 0 when there were no calls.
    #[must_use]
    pub fn slow_ratio(&self) -> f64 {
        ratio(self.slow, self.calls)
    }

    /// `n` calls of one kind.
    fn of(n: u64, failed: bool, slow: bool) -> Self {
        CallCounts {
            calls: n,
            failures: if failed { n } else { 0 },
            slow: if slow { n } else { 0 },
        }
    }
}

impl Bucket for CallCounts {
    type Input = CallCounts;
    #[inline]
    fn add(&mut self, c: CallCounts) {
        self.merge(&c);
    }
    #[inline]
    fn reset(&mut self) {
        *self = CallCounts::default();
    }
    #[inline]
    fn merge(&mut self, o: &Self) {
        self.calls = self.calls.saturating_add(o.calls);
        self.failures = self.failures.saturating_add(o.failures);
        self.slow = self.slow.saturating_add(o.slow);
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Closed,
    Open {
        opened_at: Timestamp,
    },
    HalfOpen {
        permits_left: u32,
        trials: CallCounts,
        /// When half-open began.
        since: Timestamp,
    },
}

/// The closed/open/half-open breaker; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct ErrorRateBreaker {
    config: ErrorRateConfig,
    spec: WindowSpec,
    window: RollingWindow<CallCounts>,
    phase: Phase,
    transitions: Transitions,
}

// === impl ErrorRateBreaker ===

impl ErrorRateBreaker {
    /// A closed breaker with an empty window at `now`.
    pub fn new(config: ErrorRateConfig, now: Timestamp) -> Result<Self, ErrorRateConfigError> {
        let spec = config.validate()?;
        Ok(ErrorRateBreaker {
            config,
            spec,
            window: RollingWindow::epoch_aligned(spec, now),
            phase: Phase::Closed,
            transitions: Transitions::default(),
        })
    }

    /// Takes `config` at `now` (a config reload), keeping the state: the
    /// phase (an open breaker stays open from the same instant, a half-open
    /// one keeps its trials, with no more permits left than the new
    /// `half_open_trials`), the window's counts and the transition counts.
    /// The new thresholds and durations apply from the next decision or
    /// poll. A new window shape takes the counts as
    /// [`RollingWindow::rebucketed`] says.
    ///
    /// # Errors
    ///
    /// [`ErrorRateConfigError`]: `config` is not valid; nothing changes.
    pub fn reconfigure(
        &mut self,
        config: ErrorRateConfig,
        now: Timestamp,
    ) -> Result<(), ErrorRateConfigError> {
        let spec = config.validate()?;
        if spec != self.spec {
            self.window = self.window.rebucketed(spec, Timestamp::EPOCH, now);
        }
        if let Phase::HalfOpen { permits_left, .. } = &mut self.phase {
            *permits_left = (*permits_left).min(config.half_open_trials);
        }
        self.config = config;
        self.spec = spec;
        Ok(())
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &ErrorRateConfig {
        &self.config
    }

    /// The current state, as last moved by `allow`, `record*` or `poll`.
    #[must_use]
    pub fn state(&self) -> BreakerState {
        match self.phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// When the breaker last opened, while it is open.
    #[must_use]
    pub fn opened_at(&self) -> Option<Timestamp> {
        match self.phase {
            Phase::Open { opened_at } => Some(opened_at),
            _ => None,
        }
    }

    /// Trial permits not yet handed out, while half-open.
    #[must_use]
    pub fn permits_left(&self) -> Option<u32> {
        match self.phase {
            Phase::HalfOpen { permits_left, .. } => Some(permits_left),
            _ => None,
        }
    }

    /// Trial outcomes recorded so far, while half-open.
    #[must_use]
    pub fn trial_counts(&self) -> Option<CallCounts> {
        match self.phase {
            Phase::HalfOpen { trials, .. } => Some(trials),
            _ => None,
        }
    }

    /// Calls, failures and slow calls in the window at `now`.
    #[must_use]
    pub fn window_counts(&self, now: Timestamp) -> CallCounts {
        self.window.reduce(now)
    }

    fn go(&mut self, to: Phase) {
        let from = self.state();
        self.phase = to;
        self.transitions.record(from, self.state());
    }

    /// Open → half-open once `now` is strictly after the open duration;
    /// half-open → open once `now` is strictly after `half_open_max_wait`
    /// (if set) without all trial outcomes.
    pub fn poll(&mut self, now: Timestamp) {
        match self.phase {
            Phase::Open { opened_at } if now > opened_at + self.config.open_duration => {
                self.go(Phase::HalfOpen {
                    permits_left: self.config.half_open_trials,
                    trials: CallCounts::default(),
                    since: now,
                });
            }
            Phase::HalfOpen { since, .. }
                if self
                    .config
                    .half_open_max_wait
                    .is_some_and(|w| now > since + w) =>
            {
                self.go(Phase::Open { opened_at: now });
            }
            _ => {}
        }
    }

    /// May a call at `now` go ahead? Closed: yes; open: no (or half-open, see
    /// [`poll`](Self::poll)); half-open: yes while trial permits remain.
    pub fn allow(&mut self, now: Timestamp) -> Verdict {
        self.poll(now);
        match &mut self.phase {
            Phase::Closed => Verdict::Allow,
            Phase::Open { .. } => Verdict::Shed,
            Phase::HalfOpen { permits_left, .. } => {
                if *permits_left > 0 {
                    *permits_left -= 1;
                    Verdict::Allow
                } else {
                    Verdict::Shed
                }
            }
        }
    }

    /// Records one call that ended with `outcome` at `now`.
    #[inline]
    pub fn record(&mut self, outcome: Outcome, now: Timestamp) {
        self.record_n(outcome, 1, now);
    }

    /// Records `count` calls that ended with `outcome` at `now`, none slow.
    pub fn record_n(&mut self, outcome: Outcome, count: u64, now: Timestamp) {
        self.record_kind(outcome == Outcome::Failure, false, count, now);
    }

    /// Records `count` slow calls that ended with `outcome` at `now`.
    pub fn record_slow_n(&mut self, outcome: Outcome, count: u64, now: Timestamp) {
        self.record_kind(outcome == Outcome::Failure, true, count, now);
    }

    /// Records one call that ended at `now`; it is slow when a slow-call rule
    /// is configured and `duration` is strictly longer than its threshold.
    pub fn record_call(&mut self, success: bool, duration: Option<Duration>, now: Timestamp) {
        let slow = match (self.config.slow_call, duration) {
            (Some(rule), Some(d)) => d > rule.duration,
            _ => false,
        };
        self.record_kind(!success, slow, 1, now);
    }

    fn record_kind(&mut self, failed: bool, slow: bool, count: u64, now: Timestamp) {
        if count == 0 {
            return;
        }
        self.poll(now);
        match self.phase {
            Phase::Open { .. } => {}
            Phase::Closed => {
                let opens_at = self.closed_batch_trip(failed, slow, count, now);
                let take = opens_at.unwrap_or(count);
                self.window.add(CallCounts::of(take, failed, slow), now);
                if opens_at.is_some() {
                    self.go(Phase::Open { opened_at: now });
                }
            }
            Phase::HalfOpen {
                permits_left,
                mut trials,
                since,
            } => {
                let p = u64::from(self.config.half_open_trials);
                let take = count.min(p.saturating_sub(trials.calls));
                trials.merge(&CallCounts::of(take, failed, slow));
                if trials.calls < p {
                    self.phase = Phase::HalfOpen {
                        permits_left,
                        trials,
                        since,
                    };
                    return;
                }
                if self.config.exceeded(&trials) {
                    self.go(Phase::Open { opened_at: now });
                } else {
                    self.window = RollingWindow::epoch_aligned(self.spec, now);
                    self.go(Phase::Closed);
                }
                // The rest of the batch came after the verdict: record it as
                // the new state would record single calls (open: ignored;
                // closed: into the fresh window). Recurses at most once.
                self.record_kind(failed, slow, count - take, now);
            }
        }
    }

    /// In closed state, the call of a batch of `count` calls of one kind at
    /// which recording them one by one would open the breaker (1-based), if
    /// any. Within such a batch each rate moves monotonically, so: no decision
    /// before the call `j1` that reaches `min_calls`; if `j1` trips, it is the
    /// one; otherwise only the rising rates can trip later, their "tripped"
    /// is monotone in the call index, and a binary search finds the first.
    fn closed_batch_trip(
        &self,
        failed: bool,
        slow: bool,
        count: u64,
        now: Timestamp,
    ) -> Option<u64> {
        let config = &self.config;
        let before = self.window.reduce(now);
        let trips = |j: u64| {
            let mut c = before;
            c.merge(&CallCounts::of(j, failed, slow));
            c.calls >= config.min_calls && config.exceeded(&c)
        };
        let j1 = config.min_calls.saturating_sub(before.calls).max(1);
        if j1 > count {
            return None;
        }
        if trips(j1) {
            return Some(j1);
        }
        if !trips(count) {
            return None;
        }
        // trips(lo) is false, trips(hi) is true.
        let (mut lo, mut hi) = (j1, count);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if trips(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(hi)
    }

    /// Signals at `now`, never changing state (call [`poll`](Self::poll)
    /// first to let an expired open period end). Closed and open report the
    /// window; half-open reports the trials. `drop_ratio` is the share of
    /// calls the current state sheds: 0 closed, 1 open, and in half-open 0
    /// while permits remain, else 1.
    #[must_use]
    pub fn signals(&self, now: Timestamp) -> Signals {
        let (c, drop_ratio) = match self.phase {
            Phase::Closed => (self.window.reduce(now), 0.0),
            Phase::Open { .. } => (self.window.reduce(now), 1.0),
            Phase::HalfOpen {
                permits_left,
                trials,
                ..
            } => (trials, if permits_left > 0 { 0.0 } else { 1.0 }),
        };
        Signals {
            state: self.state(),
            drop_ratio,
            requests: c.calls,
            failures: c.failures,
            failure_ratio: c.failure_ratio(),
        }
    }

    /// Transition counts so far.
    #[must_use]
    pub fn transitions(&self) -> Transitions {
        self.transitions
    }
}

impl Breaker for ErrorRateBreaker {
    /// The draw is ignored: this breaker is deterministic.
    #[inline]
    fn allow(&mut self, now: Timestamp, _draw: f64) -> Verdict {
        ErrorRateBreaker::allow(self, now)
    }
    #[inline]
    fn record_n(&mut self, outcome: Outcome, count: u64, now: Timestamp) {
        ErrorRateBreaker::record_n(self, outcome, count, now);
    }
    fn poll(&mut self, now: Timestamp) {
        ErrorRateBreaker::poll(self, now);
    }
    fn signals(&self, now: Timestamp) -> Signals {
        ErrorRateBreaker::signals(self, now)
    }
    fn transitions(&self) -> Transitions {
        self.transitions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;
    use BreakerState::{Closed, HalfOpen, Open};

    const T0: Timestamp = ManualClock::DEFAULT_START;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn config() -> ErrorRateConfig {
        ErrorRateConfig {
            min_calls: 10,
            failure_rate_threshold: 0.5,
            open_duration: Duration::from_secs(5),
            half_open_trials: 3,
            ..ErrorRateConfig::default()
        }
    }

    fn breaker(c: ErrorRateConfig) -> ErrorRateBreaker {
        ErrorRateBreaker::new(c, T0).unwrap()
    }

    /// Opened at T0 by 10 failures.
    fn opened() -> ErrorRateBreaker {
        let mut b = breaker(config());
        b.record_n(Outcome::Failure, 10, T0);
        assert_eq!(b.opened_at(), Some(T0));
        b
    }

    /// Half-open after `opened()`, entered by an allow at T0 + 5001 ms
    /// (which took one permit).
    fn half_open() -> (ErrorRateBreaker, Timestamp) {
        let mut b = opened();
        let t = T0 + ms(5001);
        assert_eq!(b.allow(t), Verdict::Allow);
        assert_eq!(b.state(), HalfOpen);
        (b, t)
    }

    #[test]
    fn half_open_waits_for_its_trials_indefinitely_by_default() {
        let (mut b, t) = half_open();
        b.record(Outcome::Success, t);
        // Two outcomes missing, a day later: still half-open, shedding.
        let later = t + Duration::from_secs(86_400);
        assert_eq!(b.allow(later), Verdict::Allow);
        assert_eq!(b.allow(later), Verdict::Allow);
        assert_eq!(b.allow(later), Verdict::Shed);
        assert_eq!(b.state(), HalfOpen);
    }

    #[test]
    fn half_open_opens_again_strictly_after_the_max_wait_without_its_trials() {
        let mut b = breaker(ErrorRateConfig {
            half_open_max_wait: Some(ms(2000)),
            ..config()
        });
        b.record_n(Outcome::Failure, 10, T0);
        let t = T0 + ms(5001);
        assert_eq!(b.allow(t), Verdict::Allow);
        b.record(Outcome::Success, t + ms(10));
        // Exactly the max wait: still half-open (the one permit left).
        assert_eq!(b.allow(t + ms(2000)), Verdict::Allow);
        assert_eq!(b.allow(t + ms(2000)), Verdict::Allow);
        assert_eq!(b.state(), HalfOpen);
        // Strictly after, with two outcomes missing: open at that instant.
        b.poll(t + ms(2001));
        assert_eq!(b.state(), Open);
        assert_eq!(b.opened_at(), Some(t + ms(2001)));
        // A late trial outcome is ignored by the open breaker.
        b.record(Outcome::Success, t + ms(2002));
        assert_eq!(b.state(), Open);
        assert_eq!(b.transitions().get(HalfOpen, Open), 1);
        // A new open period, then fresh trials that complete in time close it.
        let t2 = t + ms(2001) + ms(5001);
        for _ in 0..3 {
            assert_eq!(b.allow(t2), Verdict::Allow);
        }
        assert_eq!(b.trial_counts(), Some(CallCounts::default()));
        b.record_n(Outcome::Success, 3, t2 + ms(1999));
        assert_eq!(b.state(), Closed);
    }

    #[test]
    fn bad_config_names_the_field_and_range() {
        let bad = |f: fn(&mut ErrorRateConfig)| {
            let mut c = config();
            f(&mut c);
            ErrorRateBreaker::new(c, T0).unwrap_err().to_string()
        };
        assert!(bad(|c| c.min_calls = 0).contains("`min_calls` must be >= 1"));
        assert!(bad(|c| c.failure_rate_threshold = 0.0)
            .contains("`failure_rate_threshold` must be in (0, 1]"));
        assert!(bad(|c| c.failure_rate_threshold = 1.5).contains("(0, 1]; got 1.5"));
        assert!(bad(|c| c.slow_call = Some(SlowCallConfig {
            duration: ms(1),
            rate_threshold: f64::NAN
        }))
        .contains("`slow_call.rate_threshold`"));
        assert!(bad(|c| c.half_open_trials = 0).contains("`half_open_trials` must be >= 1"));
        assert!(bad(|c| c.half_open_max_wait = Some(Duration::ZERO))
            .contains("`half_open_max_wait` must be above 0"));
        assert!(bad(|c| c.buckets = 0).contains("`buckets` 0"));
        assert!(ErrorRateConfig::default().validate().is_ok());
    }

    #[test]
    fn stays_closed_below_min_calls() {
        let mut b = breaker(config());
        b.record_n(Outcome::Failure, 9, T0);
        assert_eq!(b.state(), Closed);
        assert_eq!(b.allow(T0), Verdict::Allow);
        let s = b.signals(T0);
        assert_eq!((s.requests, s.failures, s.failure_ratio), (9, 9, 1.0));
        b.record(Outcome::Failure, T0);
        assert_eq!(b.state(), Open);
    }

    #[test]
    fn failure_threshold_is_inclusive() {
        let mut b = breaker(config());
        b.record_n(Outcome::Success, 5, T0);
        b.record_n(Outcome::Failure, 4, T0);
        b.record(Outcome::Success, T0);
        // 4 of 10 failed: below.
        assert_eq!(b.state(), Closed);
        b.record(Outcome::Failure, T0);
        // 5 of 11: below.
        assert_eq!(b.state(), Closed);
        b.record(Outcome::Failure, T0 + ms(1));
        // 6 of 12 = exactly 0.5: opens.
        assert_eq!(b.state(), Open);
        assert_eq!(b.opened_at(), Some(T0 + ms(1)));
    }

    #[test]
    fn a_batch_opens_at_the_call_where_per_call_recording_would() {
        // 9 slow successes, then a batch of 5 fast failures: recorded one by
        // one, the first failure makes 10 calls with 90% slow and opens.
        let c = ErrorRateConfig {
            failure_rate_threshold: 1.0,
            slow_call: Some(SlowCallConfig {
                duration: ms(100),
                rate_threshold: 0.9,
            }),
            ..config()
        };
        let mut b = breaker(c);
        b.record_slow_n(Outcome::Success, 9, T0);
        b.record_n(Outcome::Failure, 5, T0);
        assert_eq!(b.state(), Open);
        // Only the call that tripped it is in the window.
        assert_eq!(b.window_counts(T0).calls, 10);
        // Without the split the batch would end at 14 calls, 64% slow.
        let mut one_by_one = breaker(c);
        one_by_one.record_slow_n(Outcome::Success, 9, T0);
        one_by_one.record(Outcome::Failure, T0);
        assert_eq!(one_by_one.state(), Open);
    }

    #[test]
    fn a_batch_crossing_the_threshold_midway_keeps_only_the_calls_up_to_the_crossing() {
        // Found by the batch/one-by-one property test: 6 successes and 2
        // failures, then 5 failures. One by one, the 4th failure makes 6 of 12
        // (exactly 0.5) and opens; the last failure of the batch is ignored.
        let mut b = breaker(ErrorRateConfig {
            min_calls: 1,
            ..config()
        });
        b.record_n(Outcome::Success, 6, T0);
        b.record_n(Outcome::Failure, 2, T0);
        assert_eq!(b.state(), Closed);
        b.record_n(Outcome::Failure, 5, T0);
        assert_eq!(b.state(), Open);
        let c = b.window_counts(T0);
        assert_eq!((c.calls, c.failures), (12, 6));
    }

    #[test]
    fn slow_call_threshold_opens_on_slow_successes() {
        let c = ErrorRateConfig {
            slow_call: Some(SlowCallConfig {
                duration: ms(100),
                rate_threshold: 0.5,
            }),
            ..config()
        };
        let mut b = breaker(c);
        for _ in 0..5 {
            b.record_call(true, Some(ms(100)), T0); // not slow: strictly longer only
        }
        for _ in 0..4 {
            b.record_call(true, Some(ms(101)), T0);
        }
        b.record_call(true, None, T0);
        assert_eq!(b.state(), Closed);
        assert_eq!(b.window_counts(T0).slow, 4);
        b.record_call(true, Some(ms(500)), T0);
        b.record_call(true, Some(ms(500)), T0);
        // 6 slow of 12 = 0.5: opens, with no failure at all.
        assert_eq!(b.state(), Open);
        assert_eq!(b.window_counts(T0).failures, 0);
        // Without a slow-call rule, durations are ignored.
        let mut plain = breaker(config());
        for _ in 0..20 {
            plain.record_call(true, Some(Duration::from_secs(60)), T0);
        }
        assert_eq!(plain.window_counts(T0).slow, 0);
        assert_eq!(plain.state(), Closed);
    }

    #[test]
    fn open_sheds_and_ignores_outcomes() {
        let mut b = opened();
        assert_eq!(b.allow(T0 + ms(1)), Verdict::Shed);
        b.record_n(Outcome::Success, 100, T0 + ms(2));
        assert_eq!(b.window_counts(T0 + ms(2)).calls, 10);
        let s = b.signals(T0 + ms(2));
        assert_eq!((s.state, s.drop_ratio, s.requests), (Open, 1.0, 10));
    }

    #[test]
    fn half_open_comes_strictly_after_the_open_duration() {
        let mut b = opened();
        let deadline = T0 + Duration::from_secs(5);
        assert_eq!(b.allow(deadline), Verdict::Shed);
        assert_eq!(b.state(), Open);
        assert_eq!(b.allow(deadline + Duration::from_nanos(1)), Verdict::Allow);
        assert_eq!(b.state(), HalfOpen);
    }

    #[test]
    fn poll_moves_to_half_open_but_signals_do_not() {
        let mut b = opened();
        let later = T0 + Duration::from_secs(6);
        assert_eq!(b.signals(later).state, Open);
        assert_eq!(b.state(), Open);
        b.poll(T0 + Duration::from_secs(5));
        assert_eq!(b.state(), Open);
        b.poll(later);
        let s = b.signals(later);
        assert_eq!((s.state, s.drop_ratio, s.requests), (HalfOpen, 0.0, 0));
        assert_eq!(b.permits_left(), Some(3));
    }

    #[test]
    fn exactly_p_trial_permits_are_handed_out() {
        let (mut b, t) = half_open();
        assert_eq!(b.allow(t), Verdict::Allow);
        assert_eq!(b.allow(t), Verdict::Allow);
        assert_eq!(b.permits_left(), Some(0));
        assert_eq!(b.allow(t), Verdict::Shed);
        assert_eq!(b.allow(t + Duration::from_secs(60)), Verdict::Shed);
        assert_eq!(b.signals(t).drop_ratio, 1.0);
    }

    #[test]
    fn successful_trials_close_with_a_fresh_window() {
        let (mut b, t) = half_open();
        b.record(Outcome::Success, t);
        b.record(Outcome::Success, t);
        assert_eq!(b.state(), HalfOpen);
        assert_eq!(b.trial_counts().map(|c| c.calls), Some(2));
        b.record(Outcome::Success, t + ms(1));
        assert_eq!(b.state(), Closed);
        // The 10 failures from T0 are still inside 10 s, but the window is new.
        let s = b.signals(t + ms(1));
        assert_eq!((s.requests, s.failures), (0, 0));
        assert_eq!(b.allow(t + ms(2)), Verdict::Allow);
    }

    #[test]
    fn failing_trials_reopen_with_a_new_opened_at() {
        // 3 trials, threshold 0.5: 1 failure of 3 stays below, 2 of 3 reopen.
        let (mut b, t) = half_open();
        b.record(Outcome::Failure, t);
        b.record(Outcome::Success, t);
        b.record(Outcome::Success, t + ms(1));
        assert_eq!(b.state(), Closed);

        let c = ErrorRateConfig {
            failure_rate_threshold: 1.0 / 3.0,
            ..config()
        };
        let mut b = breaker(c);
        b.record_n(Outcome::Failure, 10, T0);
        let t = T0 + ms(5001);
        b.poll(t);
        b.record(Outcome::Success, t);
        b.record(Outcome::Success, t);
        let t2 = t + ms(7);
        b.record(Outcome::Failure, t2);
        // 1 of 3 >= 1/3: open again, from t2.
        assert_eq!(b.state(), Open);
        assert_eq!(b.opened_at(), Some(t2));
        assert_eq!(b.allow(t2 + Duration::from_secs(5)), Verdict::Shed);
        assert_eq!(b.allow(t2 + ms(5001)), Verdict::Allow);
    }

    #[test]
    fn the_first_p_outcomes_in_half_open_are_the_trials() {
        // A batch larger than P: the first P are the trials; the rest come
        // after the verdict and go into the fresh window, as single calls would.
        let (mut b, t) = half_open();
        b.record_n(Outcome::Success, 50, t);
        assert_eq!(b.state(), Closed);
        assert_eq!(b.window_counts(t).calls, 47);
        // After a failing verdict the rest is ignored, as by any open breaker.
        let (mut b, t) = half_open();
        b.record_n(Outcome::Failure, 50, t);
        assert_eq!(b.state(), Open);
        assert_eq!(b.window_counts(t).calls, 10);
        // Ungated outcomes count as trials even without permits.
        let mut b = opened();
        let t = T0 + ms(5001);
        b.record_n(Outcome::Failure, 3, t);
        assert_eq!(b.state(), Open);
        assert_eq!(b.opened_at(), Some(t));
    }

    #[test]
    fn transitions_are_counted() {
        let (mut b, t) = half_open();
        b.record_n(Outcome::Failure, 3, t);
        let t2 = t + ms(5001);
        b.poll(t2);
        b.record_n(Outcome::Success, 3, t2);
        let tr = b.transitions();
        assert_eq!(tr.get(Closed, Open), 1);
        assert_eq!(tr.get(Open, HalfOpen), 2);
        assert_eq!(tr.get(HalfOpen, Open), 1);
        assert_eq!(tr.get(HalfOpen, Closed), 1);
        assert_eq!(tr.total(), 5);
    }

    #[test]
    fn huge_counts_saturate_in_the_window_and_the_trials() {
        // u64::MAX batches in every bucket, a trip and trials on
        // top: counts saturate, nothing wraps or panics, verdicts still come.
        let mut b = breaker(config());
        let last = T0 + ms(9000);
        for i in 0..10 {
            b.record_n(Outcome::Success, u64::MAX, T0 + ms(1000 * i));
            b.record_slow_n(Outcome::Success, u64::MAX, T0 + ms(1000 * i));
        }
        let all = CallCounts {
            calls: u64::MAX,
            failures: 0,
            slow: u64::MAX,
        };
        assert_eq!(b.window_counts(last), all);
        assert_eq!(b.state(), Closed);
        // The window's calls stay saturated, so the batch of failures opens
        // the breaker at the call that brings failures to half of u64::MAX.
        b.record_n(Outcome::Failure, u64::MAX, last);
        assert_eq!(b.state(), Open);
        let c = b.window_counts(last);
        assert_eq!(c.calls, u64::MAX);
        assert!(
            (0.5..0.5 + 1e-9).contains(&c.failure_ratio()),
            "{}",
            c.failure_ratio()
        );
        // Half-open: a u64::MAX batch fills the 3 trials; the rest goes into
        // the fresh window of the closed breaker.
        let t = last + ms(5001);
        b.poll(t);
        b.record_n(Outcome::Success, u64::MAX, t);
        assert_eq!(b.state(), Closed);
        assert_eq!(b.window_counts(t).calls, u64::MAX - 3);
        let s = b.signals(t);
        assert_eq!(
            (s.requests, s.failures, s.failure_ratio),
            (u64::MAX - 3, 0, 0.0)
        );
        assert_eq!(b.transitions().total(), 3);
    }

    #[test]
    fn old_failures_expire_from_the_window() {
        let mut b = breaker(config());
        // Epoch-aligned 1 s buckets: failures at T0 (a whole second) are
        // visible for [T0, T0 + 10 s).
        b.record_n(Outcome::Failure, 9, T0);
        let end = T0 + Duration::from_secs(10);
        assert_eq!(b.window_counts(end - ms(1)).failures, 9);
        assert_eq!(b.window_counts(end).calls, 0);
        // One more failure 10 s later does not open: the 9 are gone.
        b.record(Outcome::Failure, end);
        assert_eq!(b.state(), Closed);
        // Whereas just before the end it would have.
        let mut b2 = breaker(config());
        b2.record_n(Outcome::Failure, 9, T0);
        b2.record(Outcome::Failure, end - ms(1));
        assert_eq!(b2.state(), Open);
    }
}
