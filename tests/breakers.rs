//! Breakers against models that are obviously right, and shared across threads.

use std::time::Duration;

use proptest::prelude::*;
use rollstat::breaker::{
    Breaker, BreakerState, ErrorRateBreaker, ErrorRateConfig, Outcome, ScriptedRandom,
    SharedBreaker, SreBreaker, SreConfig, Verdict,
};
use rollstat::{ManualClock, Timestamp};

const T0: Timestamp = ManualClock::DEFAULT_START;
const INTERVAL: u64 = 250_000_000; // 10 s / 40
const SLOTS: u64 = 40;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    Success,
    Failure,
    Drop,
}

/// go-zero's breaker from scratch: every event kept with its time, the window
/// recomputed from the events on each question. Bucket of an event at `t` is
/// `floor((t - origin) / 250ms)`; the window at `now` is the 40 slots ending
/// with the one holding `now`.
struct Model {
    origin: u64,
    events: Vec<(u64, Event)>,
    last_pass: Option<u64>,
}

#[derive(Debug, Default, PartialEq, Eq)]
struct ModelHistory {
    accepts: u64,
    total: u64,
    failing: u64,
    working: u64,
}

impl Model {
    fn history(&self, now: u64) -> ModelHistory {
        let cur = (now - self.origin) / INTERVAL;
        let lo = cur.saturating_sub(SLOTS - 1);
        let mut h = ModelHistory::default();
        for slot in lo..=cur {
            let (mut s, mut f) = (0, 0);
            for &(t, e) in &self.events {
                if (t - self.origin) / INTERVAL != slot {
                    continue;
                }
                h.total += 1;
                match e {
                    Event::Success => s += 1,
                    Event::Failure => f += 1,
                    Event::Drop => {}
                }
            }
            h.accepts += s;
            // Streaks: a bucket with failures breaks the working streak, one
            // with successes the failing streak; neither: both untouched.
            if f > 0 {
                h.working = 0;
            } else if s > 0 {
                h.working += 1;
            }
            if s > 0 {
                h.failing = 0;
            } else if f > 0 {
                h.failing += 1;
            }
        }
        h
    }

    /// (undamped ratio, damped ratio).
    fn ratios(&self, now: u64) -> (f64, f64) {
        let h = self.history(now);
        let w = f64::max(1.5 - 0.4 * h.failing as f64 / 40.0, 1.1);
        let raw = (h.total as f64 - 5.0 - w * h.accepts as f64) / (h.total as f64 + 1.0);
        (raw, raw * (40.0 - h.working as f64) / 40.0)
    }

    fn drop_ratio(&self, now: u64) -> f64 {
        let (raw, damped) = self.ratios(now);
        if raw <= 0.0 {
            0.0
        } else {
            damped
        }
    }

    fn allow(&mut self, now: u64, draw: f64) -> Verdict {
        let (raw, damped) = self.ratios(now);
        if raw <= 0.0 {
            return Verdict::Allow;
        }
        if let Some(lp) = self.last_pass {
            if now - lp > 1_000_000_000 {
                self.last_pass = Some(now);
                return Verdict::Allow;
            }
        }
        if draw < damped {
            self.events.push((now, Event::Drop));
            Verdict::Shed
        } else {
            self.last_pass = Some(now);
            Verdict::Allow
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Record(Outcome, u64),
    Allow(f64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Failures weigh more, so that the breaker spends time throttling.
        2 => (1..6u64).prop_map(|n| Op::Record(Outcome::Failure, n)),
        1 => (1..4u64).prop_map(|n| Op::Record(Outcome::Success, n)),
        3 => (0.0..1.0f64).prop_map(Op::Allow),
    ]
}

fn gap() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => 0..300_000_000u64,    // within a bucket or the next few
        2 => 0..1_500_000_000u64,  // across the forced-pass limit
        1 => 0..12_000_000_000u64, // beyond the whole window
        1 => (0..8u64).prop_map(|k| k * INTERVAL), // exactly on bucket edges
        1 => Just(1_000_000_000u64), // exactly the forced-pass limit
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sre_matches_a_brute_force_event_log_model(
        start_offset in 0..INTERVAL,
        steps in prop::collection::vec((gap(), op()), 1..200),
    ) {
        // Grid anchored at creation, which need not be on a whole second.
        let origin = T0.as_nanos() + start_offset;
        let mut b = SreBreaker::new(SreConfig::default(), Timestamp::from_nanos(origin)).unwrap();
        let mut m = Model { origin, events: Vec::new(), last_pass: None };
        let mut now = origin;
        for (dt, op) in steps {
            now += dt;
            let t = Timestamp::from_nanos(now);
            match op {
                Op::Record(outcome, n) => {
                    b.record_n(outcome, n, t);
                    let e = if outcome == Outcome::Success { Event::Success } else { Event::Failure };
                    m.events.extend(std::iter::repeat_n((now, e), n as usize));
                }
                Op::Allow(draw) => {
                    let want = m.allow(now, draw);
                    prop_assert_eq!(b.allow(t, draw), want, "verdict at {}", now - origin);
                }
            }
            let h = b.history(t);
            let mh = m.history(now);
            prop_assert_eq!(
                (h.accepts, h.total, h.failing_buckets, h.working_buckets),
                (mh.accepts, mh.total, mh.failing, mh.working)
            );
            let got = b.signals(t).drop_ratio;
            let want = m.drop_ratio(now);
            prop_assert!((got - want).abs() < 1e-12, "drop ratio {} vs model {}", got, want);
            prop_assert_eq!(b.last_pass().map(|t| t.as_nanos()), m.last_pass);
        }
    }
}

#[test]
fn shared_breaker_counts_every_record_from_two_threads() {
    let shared = SharedBreaker::new(SreBreaker::new(SreConfig::default(), T0).unwrap(), 7);
    std::thread::scope(|s| {
        for outcome in [Outcome::Success, Outcome::Failure] {
            let shared = &shared;
            s.spawn(move || {
                for i in 0..1000 {
                    shared.record(outcome, T0 + Duration::from_micros(i));
                }
            });
        }
    });
    let sig = shared.signals(T0 + Duration::from_millis(1));
    assert_eq!((sig.requests, sig.failures), (2000, 1000));
}

#[test]
fn shared_breaker_draws_are_reproducible_for_a_seed() {
    let run = |seed| {
        let mut b = SreBreaker::new(SreConfig::default(), T0).unwrap();
        b.record_n(Outcome::Failure, 100, T0);
        let shared = SharedBreaker::new(b, seed);
        (0..200)
            .map(|i| shared.allow(T0 + Duration::from_micros(i)) == Verdict::Shed)
            .collect::<Vec<_>>()
    };
    let a = run(1);
    assert_eq!(a, run(1));
    // About 94% shed (no pass can be forced within 200 µs).
    let shed = a.iter().filter(|&&s| s).count();
    assert!((170..200).contains(&shed), "{shed} shed");
}

#[test]
fn shared_error_rate_breaker_polls_to_half_open_and_exposes_signals() {
    let config = ErrorRateConfig {
        min_calls: 4,
        half_open_trials: 1,
        ..ErrorRateConfig::default()
    };
    let shared = SharedBreaker::new(ErrorRateBreaker::new(config, T0).unwrap(), 0);
    shared.record_n(Outcome::Failure, 4, T0);
    assert_eq!(shared.allow(T0), Verdict::Shed);
    let later = T0 + Duration::from_secs(6);
    assert_eq!(shared.signals(later).state, BreakerState::Open);
    shared.poll(later);
    assert_eq!(shared.signals(later).state, BreakerState::HalfOpen);
    assert_eq!(shared.with(|b| b.permits_left()), Some(1));
    shared.with(|b| b.record_call(true, Some(Duration::from_millis(3)), later));
    assert_eq!(shared.signals(later).state, BreakerState::Closed);
    assert_eq!(shared.transitions().total(), 3);
}

#[test]
fn allow_with_takes_one_draw_from_any_breaker() {
    let mut rng = ScriptedRandom::new([0.0, 0.5]);
    let mut sre = SreBreaker::new(SreConfig::default(), T0).unwrap();
    let mut er = ErrorRateBreaker::new(ErrorRateConfig::default(), T0).unwrap();
    assert_eq!(sre.allow_with(T0, &mut rng), Verdict::Allow);
    assert_eq!(er.allow_with(T0, &mut rng), Verdict::Allow);
    assert_eq!(rng.taken(), 2);
}

#[derive(Clone, Debug)]
enum ErOp {
    Record { failed: bool, slow: bool, n: u64 },
    Allow,
    Poll,
}

fn er_op() -> impl Strategy<Value = ErOp> {
    prop_oneof![
        4 => (any::<bool>(), prop::bool::weighted(0.2), 1..8u64)
            .prop_map(|(failed, slow, n)| ErOp::Record { failed, slow, n }),
        2 => Just(ErOp::Allow),
        1 => Just(ErOp::Poll),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A batch of n outcomes gives exactly what n single records give:
    /// same state, same window, same trials, same transitions.
    #[test]
    fn error_rate_batches_equal_one_by_one_recording(
        trials in 1..5u32,
        min_calls in 1..12u64,
        steps in prop::collection::vec((0..2_000_000_000u64, er_op()), 1..150),
    ) {
        let config = ErrorRateConfig {
            min_calls,
            half_open_trials: trials,
            open_duration: Duration::from_secs(3),
            slow_call: Some(rollstat::breaker::SlowCallConfig {
                duration: Duration::from_millis(100),
                rate_threshold: 0.6,
            }),
            ..ErrorRateConfig::default()
        };
        let mut batched = ErrorRateBreaker::new(config, T0).unwrap();
        let mut single = ErrorRateBreaker::new(config, T0).unwrap();
        let mut now = T0;
        for (dt, op) in steps {
            now = now + Duration::from_nanos(dt);
            match op {
                ErOp::Record { failed, slow, n } => {
                    let outcome = if failed { Outcome::Failure } else { Outcome::Success };
                    if slow {
                        batched.record_slow_n(outcome, n, now);
                    } else {
                        batched.record_n(outcome, n, now);
                    }
                    let d = if slow { Duration::from_millis(101) } else { Duration::from_millis(100) };
                    for _ in 0..n {
                        single.record_call(!failed, Some(d), now);
                    }
                }
                ErOp::Allow => {
                    prop_assert_eq!(batched.allow(now), single.allow(now));
                }
                ErOp::Poll => {
                    batched.poll(now);
                    single.poll(now);
                }
            }
            prop_assert_eq!(batched.signals(now), single.signals(now));
            prop_assert_eq!(batched.window_counts(now), single.window_counts(now));
            prop_assert_eq!(batched.trial_counts(), single.trial_counts());
            prop_assert_eq!(batched.opened_at(), single.opened_at());
            prop_assert_eq!(batched.transitions(), single.transitions());
        }
    }
}

/// Counts from small to `u64::MAX`, with the daemon's cap per report in
/// between (huge batches must saturate, never wrap or panic).
fn count() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => 1..1000u64,
        1 => Just(1_000_000_000u64),
        2 => (u64::MAX / 4)..=u64::MAX,
        1 => Just(u64::MAX),
    ]
}

/// The exact sum, clamped to `u64::MAX`: what saturating sums of
/// non-negative counts give, in any order.
fn clamped(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// SRE window sums equal a u128 model of the events in the window,
    /// clamped to u64::MAX, and the ratios stay finite in [0, 1].
    #[test]
    fn sre_sums_of_huge_counts_are_the_exact_sums_clamped_to_u64_max(
        steps in prop::collection::vec((0..600_000_000u64, any::<bool>(), count()), 1..120),
    ) {
        let origin = T0.as_nanos();
        let mut b = SreBreaker::new(SreConfig::default(), T0).unwrap();
        let mut events: Vec<(u64, bool, u64)> = Vec::new();
        let mut now = origin;
        for (dt, ok, n) in steps {
            now += dt;
            let t = Timestamp::from_nanos(now);
            b.record_n(Outcome::from_success(ok), n, t);
            events.push((now, ok, n));
            let cur = (now - origin) / INTERVAL;
            let lo = cur.saturating_sub(SLOTS - 1);
            let (mut accepts, mut failures) = (0u128, 0u128);
            for &(at, ok, n) in &events {
                if ((at - origin) / INTERVAL) < lo {
                    continue;
                }
                if ok {
                    accepts += u128::from(n);
                } else {
                    failures += u128::from(n);
                }
            }
            let h = b.history(t);
            prop_assert_eq!(
                (h.accepts, h.failures, h.total),
                (clamped(accepts), clamped(failures), clamped(accepts + failures))
            );
            let s = b.signals(t);
            prop_assert!((0.0..=1.0).contains(&s.drop_ratio), "drop ratio {}", s.drop_ratio);
            prop_assert!((0.0..=1.0).contains(&s.failure_ratio), "failure ratio {}", s.failure_ratio);
            // A decision on saturated counts is still a decision.
            b.poll(t);
        }
    }

    /// Error-rate window counts (successes only, some slow, so the breaker
    /// never trips) equal the clamped exact sums of the last 10 epoch seconds.
    #[test]
    fn error_rate_window_counts_of_huge_counts_are_the_exact_sums_clamped_to_u64_max(
        steps in prop::collection::vec((0..2_500_000_000u64, any::<bool>(), count()), 1..80),
    ) {
        const SECOND: u64 = 1_000_000_000;
        let mut b = ErrorRateBreaker::new(ErrorRateConfig::default(), T0).unwrap();
        let mut events: Vec<(u64, bool, u64)> = Vec::new();
        let mut now = T0.as_nanos();
        for (dt, slow, n) in steps {
            now += dt;
            let t = Timestamp::from_nanos(now);
            if slow {
                b.record_slow_n(Outcome::Success, n, t);
            } else {
                b.record_n(Outcome::Success, n, t);
            }
            events.push((now, slow, n));
            let lo = (now / SECOND).saturating_sub(9);
            let (mut calls, mut slows) = (0u128, 0u128);
            for &(_, slow, n) in events.iter().filter(|e| e.0 / SECOND >= lo) {
                calls += u128::from(n);
                if slow {
                    slows += u128::from(n);
                }
            }
            let c = b.window_counts(t);
            prop_assert_eq!((c.calls, c.failures, c.slow), (clamped(calls), 0, clamped(slows)));
            prop_assert_eq!(b.signals(t).state, BreakerState::Closed);
        }
    }
}
