use std::time::Duration;

use futures_util::FutureExt;

use super::*;
use crate::breaker::BreakerState;
use crate::config::Config;
use crate::parse::{parse_datagram, Line};

const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

fn services(cfg: &str) -> Services {
    Services::new(Config::parse(cfg).unwrap().service_settings(), T0, None).unwrap()
}

/// Whether limit `limit` admits `n` for `key` at `T0`. A limit that is not
/// shared decides in memory: its answer is ready at once.
fn admits(s: &Services, limit: &str, key: &str, n: u32) -> bool {
    let verdict = s
        .limits
        .get(limit)
        .unwrap()
        .decide(key, n, T0)
        .now_or_never();
    let verdict = verdict.expect("a memory decision is ready at once");
    assert_eq!(verdict.source, super::limits::Source::Local);
    verdict.result.unwrap().allowed
}

fn observe(s: &Services, dgram: &str) {
    for l in parse_datagram(dgram.as_bytes()) {
        if let Ok(Line::Sample(x)) = l {
            s.breakers.observe(&x);
        }
    }
}

const ERROR_RATE: &str = r#"
[[breakers]]
name = "b"
kind = "error_rate"
requests_metric = "req"
failures_metric = "fail"
outcome_metric = "calls"
outcome_tag = "outcome"
min_calls = 4
failure_rate_threshold = 0.5
open_duration_ms = 1000
half_open_trials = 2
"#;

#[test]
fn requests_and_failures_become_successes_and_failures_with_debt_carried() {
    let s = services(ERROR_RATE);
    let b = s.breakers.get("b").unwrap();
    // Failures arrive before their requests: carried as a debt.
    observe(&s, "fail:1|c");
    s.breakers.tick(T0);
    observe(&s, "req:3|c");
    s.breakers.tick(T0 + Duration::from_millis(100));
    let sig = b.breaker.signals(T0 + Duration::from_millis(100));
    assert_eq!(
        (sig.requests, sig.failures),
        (3, 1),
        "1 failure + 2 successes"
    );
    assert_eq!(sig.state, BreakerState::Closed);
}

#[test]
fn tagged_outcomes_count_and_unknown_values_are_ignored() {
    let s = services(ERROR_RATE);
    observe(
        &s,
        "calls:2|c|#outcome:ok\ncalls:1|c|#outcome:weird\ncalls:3|c|@0.5|#outcome:error",
    );
    s.breakers.tick(T0);
    let b = s.breakers.get("b").unwrap();
    let sig = b.breaker.signals(T0);
    // 2 successes + 6 failures (3 at @0.5): 75% >= 50% with >= 4 calls.
    assert_eq!(sig.state, BreakerState::Open);
    assert_eq!(
        b.breaker
            .transitions()
            .get(BreakerState::Closed, BreakerState::Open),
        1
    );
}

#[test]
fn the_ticker_moves_an_open_breaker_to_half_open_without_callers() {
    let s = services(ERROR_RATE);
    observe(&s, "req:4|c\nfail:4|c");
    s.breakers.tick(T0);
    let b = s.breakers.get("b").unwrap();
    assert_eq!(b.breaker.signals(T0).state, BreakerState::Open);
    s.breakers.tick(T0 + Duration::from_millis(1000));
    assert_eq!(
        b.breaker.signals(T0 + Duration::from_millis(1000)).state,
        BreakerState::Open
    );
    let later = T0 + Duration::from_millis(1001);
    s.breakers.tick(later);
    assert_eq!(b.breaker.signals(later).state, BreakerState::HalfOpen);
    // Exactly two trial permits.
    let verdicts: Vec<bool> = (0..3)
        .map(|_| b.breaker.allow(later).is_allowed())
        .collect();
    assert_eq!(verdicts, [true, true, false]);
}

/// An error-rate breaker fed by the timer `rt`: calls over 100 ms are slow.
const LATENCY_BREAKER: &str = r#"
[[breakers]]
name = "lat"
kind = "error_rate"
latency_metric = "rt"
slow_call_ms = 100
slow_call_rate_threshold = 0.5
min_calls = 4
"#;

#[test]
fn slow_timer_samples_mark_successes_slow() {
    let s = services(LATENCY_BREAKER);
    observe(&s, "rt:50|ms\nrt:150|ms\nrt:200:300|ms");
    s.breakers.tick(T0);
    let b = s.breakers.get("lat").unwrap();
    // 4 calls, 3 slow: 75% >= 50%.
    assert_eq!(b.breaker.signals(T0).state, BreakerState::Open);
}

#[test]
fn a_reload_keeps_breakers_and_limits_unchanged_or_carried_onto_their_new_rules() {
    let cfg = format!(
        "{ERROR_RATE}\n[[limits]]\nname = \"l\"\nrules = [{{ max = 2, window_ms = 1000 }}]\n"
    );
    let s1 = services(&cfg);
    observe(&s1, "req:4|c\nfail:4|c");
    s1.breakers.tick(T0);
    assert!(admits(&s1, "l", "k", 2));
    assert!(!admits(&s1, "l", "k", 1));

    let same = Services::new(
        Config::parse(&cfg).unwrap().service_settings(),
        T0,
        Some(&s1),
    )
    .unwrap();
    assert_eq!(
        same.breakers.get("b").unwrap().breaker.signals(T0).state,
        BreakerState::Open
    );
    assert!(!admits(&same, "l", "k", 1));

    let changed = cfg
        .replace("max = 2", "max = 3")
        .replace("min_calls = 4", "min_calls = 5");
    let s2 = Services::new(
        Config::parse(&changed).unwrap().service_settings(),
        T0,
        Some(&same),
    )
    .unwrap();
    // The breaker stays open with its window (4 calls, 4 failures).
    let sig = s2.breakers.get("b").unwrap().breaker.signals(T0);
    assert_eq!(sig.state, BreakerState::Open);
    assert_eq!((sig.requests, sig.failures), (4, 4));
    // The limit keeps the key's 2 admitted: max 3 leaves 1.
    assert!(!admits(&s2, "l", "k", 2));
    assert!(admits(&s2, "l", "k", 1));
    let decisions = |s: &Services| {
        s.limits.get("l").unwrap().decisions[..]
            .iter()
            .map(|d| d.load(std::sync::atomic::Ordering::Relaxed))
            .collect::<Vec<_>>()
    };
    // The decision counts went on: 2 allowed and 3 denied in all.
    assert_eq!(decisions(&s2), [2, 3, 0, 0, 0]);
}

#[test]
fn a_counter_line_counts_its_rounded_weighted_sum_clamped_to_the_cap() {
    use super::breakers::{counter_outcomes, MAX_OUTCOMES};
    let cap = MAX_OUTCOMES;
    for (sum, weight, want) in [
        (3.0, 1.0, 3),
        (0.4, 1.0, 0),
        (0.5, 1.0, 1),
        (2.5, 1.0, 3),
        (1.0, 1e6, 1_000_000),
        (0.0, 1e6, 0),
        // Negative (a decrement) counts nothing: outcomes cannot be un-counted.
        (-1.0, 1.0, 0),
        (-1e300, 1e6, 0),
        // Above the cap: exactly the cap, infinity included.
        (999_999_999.4, 1.0, 999_999_999),
        (999_999_999.5, 1.0, cap),
        (1e9 + 1.0, 1.0, cap),
        (1e300, 1.0, cap),
        (1e300, 1e6, cap),
        (f64::MAX, 2.0, cap),
        (f64::INFINITY, 1.0, cap),
        (f64::NAN, 1.0, 0),
        (f64::NEG_INFINITY, 1.0, 0),
    ] {
        assert_eq!(counter_outcomes(sum, weight), want, "{sum} x {weight}");
    }
}

/// An SRE breaker, which records whole batches (the error-rate breaker
/// stops a batch where it trips), fed by two counters, in a 1 s window.
const SRE: &str = r#"
[[breakers]]
name = "s"
kind = "sre"
requests_metric = "req"
failures_metric = "fail"
window_ms = 1000
buckets = 4
"#;

fn requests_failures(s: &Services, name: &str, now: Timestamp) -> (u64, u64) {
    let sig = s.breakers.get(name).unwrap().breaker.signals(now);
    assert!(sig.drop_ratio.is_finite() && (0.0..=1.0).contains(&sig.drop_ratio));
    assert!(sig.failure_ratio.is_finite() && (0.0..=1.0).contains(&sig.failure_ratio));
    (sig.requests, sig.failures)
}

#[test]
fn absurd_counter_lines_move_a_breaker_by_at_most_the_cap_each() {
    let cap = super::breakers::MAX_OUTCOMES;
    let s = services(SRE);
    // 1e300, 1e300 weighted by 10^6, and two values whose sum overflows f64:
    // the cap each. A negative requests value counts nothing.
    observe(
        &s,
        "fail:1e300|c\nfail:1e300|c|@0.000001\nreq:-1|c\nreq:1e308:1e308|c",
    );
    s.breakers.tick(T0);
    // 2 caps of failures, 1 cap of requests: all of them matched, no success.
    assert_eq!(requests_failures(&s, "s", T0), (2 * cap, 2 * cap));
    // The same in every bucket of the window, with normal traffic between:
    // exact sums, no wrap, no panic.
    let mut t = T0;
    for _ in 0..12 {
        t = t + Duration::from_millis(100);
        observe(&s, "fail:1e300|c\nreq:10|c\nfail:2|c");
        s.breakers.tick(t);
    }
    let (requests, failures) = requests_failures(&s, "s", t);
    assert_eq!(failures, requests);
    assert!(
        failures >= 2 * cap && failures <= 14 * cap + 24,
        "{failures}"
    );
}

#[test]
fn a_timer_line_counts_its_samples_times_the_weight_clamped_to_the_cap() {
    let s = services(LATENCY_BREAKER);
    // 1001 samples at @0.000001 stand for 1.001e9 calls: the cap.
    let line = format!("rt:{}|ms|@0.000001", vec!["50"; 1001].join(":"));
    observe(&s, &line);
    s.breakers.tick(T0);
    let sig = s.breakers.get("lat").unwrap().breaker.signals(T0);
    assert_eq!(
        (sig.requests, sig.failures, sig.state),
        (super::breakers::MAX_OUTCOMES, 0, BreakerState::Closed)
    );
}

#[test]
fn a_failures_debt_nobody_pays_is_forgotten_after_one_to_two_windows() {
    let s = services(SRE);
    let at = |ms: u64| T0 + Duration::from_millis(ms);
    // 10^9 failures whose requests never come, then one request per tick.
    observe(&s, "fail:1e300|c");
    s.breakers.tick(at(0));
    for ms in (100..=3000).step_by(100) {
        observe(&s, "req:1|c");
        s.breakers.tick(at(ms));
        match ms {
            // The debt eats the requests, and its failures have left the
            // 1 s window: nothing to see.
            1900 => assert_eq!(requests_failures(&s, "s", at(ms)), (0, 0)),
            // Generations turn every window (at 1000, 2000...): at the
            // second turn the debt of T0 is forgotten.
            2000 => assert_eq!(requests_failures(&s, "s", at(ms)), (1, 0)),
            _ => {}
        }
    }
    // Every request since is a success: 8 ticks in the window's 4 buckets.
    assert_eq!(requests_failures(&s, "s", at(3000)), (8, 0));
}

#[test]
fn a_failures_debt_paid_a_tick_late_is_never_forgotten() {
    let s = services(SRE);
    // For 3 s (three windows), every tick's failure comes one tick before
    // its request: the debt never reaches 0 but is always paid.
    observe(&s, "fail:1|c");
    s.breakers.tick(T0);
    let mut t = T0;
    for _ in 0..30 {
        t = t + Duration::from_millis(100);
        observe(&s, "req:1|c\nfail:1|c");
        s.breakers.tick(t);
    }
    // The window's 4 buckets hold 8 ticks: every request a failure.
    assert_eq!(
        requests_failures(&s, "s", t),
        (8, 8),
        "a request counted as a success"
    );
}

/// Shared limits against a Redis that refuses connections (port 1), one per
/// `on_store_error` policy: each decision goes to the store, fails, and is
/// answered by `fallback::on_store_error`, then counted like any other.
#[tokio::test]
async fn a_failed_store_is_answered_by_each_limits_policy_and_counted() {
    let mut cfg = String::from("[redis]\nurl = \"redis://127.0.0.1:1\"\ntimeout_ms = 200\n");
    for policy in ["local", "deny", "allow"] {
        cfg.push_str(&format!(
            "[[limits]]\nname = \"{policy}\"\nshared = true\non_store_error = \"{policy}\"\nrules = [{{ max = 1, window_ms = 1000 }}]\n"
        ));
    }
    let cfg = Config::parse(&cfg).unwrap();
    let store = crate::store::RedisStore::new(cfg.redis.clone().unwrap()).unwrap();
    let s = Services::with_store(cfg.service_settings(), T0, None, Some(store.clone())).unwrap();
    let decide = |name: &'static str| {
        let l = s.limits.get(name).unwrap().clone();
        async move { l.decide("k", 1, T0).await }
    };
    let allowed = |v: &super::limits::Verdict| v.result.as_ref().unwrap().allowed;

    // `local`: this instance's limiter decides (and records: max = 1).
    let v = decide("local").await;
    assert_eq!(
        (v.source, allowed(&v)),
        (super::limits::Source::Local, true)
    );
    // What a caller sees: a stable reason, never the client's own text.
    let e = v.store_error.as_ref().unwrap();
    assert_eq!(
        e.to_string(),
        "the shared store is unavailable (reason: connection)"
    );
    assert!(e.detail().starts_with("connection: "), "{}", e.detail());
    let v = decide("local").await;
    assert_eq!(
        (v.source, allowed(&v)),
        (super::limits::Source::Local, false)
    );
    // The store is down and backing off now: nothing is sent.
    let v = decide("deny").await;
    assert_eq!(
        (v.source, allowed(&v)),
        (super::limits::Source::Fallback, false)
    );
    assert!(matches!(
        v.store_error,
        Some(crate::store::StoreError::Down { .. })
    ));
    assert_eq!(
        v.store_error.unwrap().to_string(),
        "the shared store is unavailable (reason: down; last failure: connection); backing off before the next retry"
    );
    let v = decide("allow").await;
    assert_eq!(
        (v.source, allowed(&v)),
        (super::limits::Source::Fallback, true)
    );

    let counts = |name: &str| {
        let l = s.limits.get(name).unwrap();
        l.decisions
            .each_ref()
            .map(|c| c.load(std::sync::atomic::Ordering::Relaxed))
    };
    // allowed, denied, error, fallback_allowed, fallback_denied: a `local`
    // fallback is a decision of this instance's limiter; `deny` and `allow`
    // answers are counted apart, not as quota decisions.
    assert_eq!(counts("local"), [1, 1, 0, 0, 0]);
    assert_eq!(counts("deny"), [0, 0, 0, 0, 1]);
    assert_eq!(counts("allow"), [0, 0, 0, 1, 0]);
    let m = store.metrics();
    assert_eq!(m.errors.with_label_values(&["limit"]).get(), 1);
    // The second `local` decision was denied by this instance's own
    // history (max = 1, already admitted) without asking the store: nothing
    // written back or skipped for it.
    assert_eq!(m.skipped.with_label_values(&["writeback"]).get(), 0);
    assert_eq!(m.skipped.with_label_values(&["limit"]).get(), 2);
    assert_eq!(m.writeback.with_label_values(&["written"]).get(), 0);
}

#[test]
fn a_reload_keeps_an_open_breaker_open_with_its_counts_and_carries_pending_outcomes() {
    let s1 = services(ERROR_RATE);
    observe(&s1, "req:10|c\nfail:10|c");
    s1.breakers.tick(T0);
    let t = T0 + Duration::from_millis(100);
    let before = s1.breakers.get("b").unwrap().breaker.signals(t);
    assert_eq!(before.state, BreakerState::Open);
    assert!(before.failures > 0);
    let changed = ERROR_RATE.replace(
        "failure_rate_threshold = 0.5",
        "failure_rate_threshold = 0.9",
    );
    let s2 = Services::new(
        Config::parse(&changed).unwrap().service_settings(),
        t,
        Some(&s1),
    )
    .unwrap();
    let b2 = s2.breakers.get("b").unwrap();
    let after = b2.breaker.signals(t);
    assert_eq!(
        (after.state, after.requests, after.failures),
        (before.state, before.requests, before.failures)
    );
    // Open since T0: half-open once open_duration (1 s) is over, as before.
    let over = T0 + Duration::from_millis(1001);
    s2.breakers.tick(over);
    assert_eq!(b2.breaker.signals(over).state, BreakerState::HalfOpen);

    // Outcomes pending at the reload (or added to the old generation by an
    // ingest thread still holding it) reach the new breaker.
    let c1 = services(ERROR_RATE);
    observe(&c1, "req:2|c");
    let c2 = Services::new(
        Config::parse(&changed).unwrap().service_settings(),
        T0,
        Some(&c1),
    )
    .unwrap();
    observe(&c1, "req:1|c\nfail:1|c");
    c2.breakers.tick(T0);
    let sig = c2.breakers.get("b").unwrap().breaker.signals(T0);
    assert_eq!(
        (sig.state, sig.requests, sig.failures),
        (BreakerState::Closed, 3, 1)
    );

    // A new kind starts fresh.
    let sre = "[[breakers]]\nname = \"b\"\nkind = \"sre\"\nrequests_metric = \"req\"\n";
    let s3 = Services::new(Config::parse(sre).unwrap().service_settings(), t, Some(&s2)).unwrap();
    let sig = s3.breakers.get("b").unwrap().breaker.signals(t);
    assert_eq!((sig.state, sig.requests), (BreakerState::Closed, 0));
}

#[test]
fn an_sre_breaker_keeps_its_window_when_k_or_the_window_shape_changes() {
    let sre = "[[breakers]]\nname = \"s\"\nkind = \"sre\"\nrequests_metric = \"sreq\"\nfailures_metric = \"sfail\"\nwindow_ms = 10000\nbuckets = 10\n";
    let s1 = services(sre);
    observe(&s1, "sreq:10|c\nsfail:6|c");
    s1.breakers.tick(T0);
    let counts = |s: &Services, t: Timestamp| {
        let sig = s.breakers.get("s").unwrap().breaker.signals(t);
        (sig.requests, sig.failures)
    };
    let before = counts(&s1, T0);
    assert_eq!(before, (10, 6));
    // Another k: the same window.
    let k2 = format!("{sre}k = 2.0\n");
    let s2 = Services::new(
        Config::parse(&k2).unwrap().service_settings(),
        T0,
        Some(&s1),
    )
    .unwrap();
    assert_eq!(counts(&s2, T0), before);
    // A longer window in other buckets: the counts move along and outlive
    // the old 10 s window.
    let longer = k2.replace(
        "window_ms = 10000\nbuckets = 10",
        "window_ms = 20000\nbuckets = 4",
    );
    let s3 = Services::new(
        Config::parse(&longer).unwrap().service_settings(),
        T0,
        Some(&s2),
    )
    .unwrap();
    let later = T0 + Duration::from_secs(15);
    assert_eq!((counts(&s2, later).0, counts(&s3, later).0), (0, 10));
    assert_eq!(counts(&s3, later).1, 6);
}
