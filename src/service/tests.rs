use std::time::Duration;

use super::*;
use crate::breaker::BreakerState;
use crate::parse::{parse_datagram, Line};

const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

fn services(cfg: &str) -> Services {
    Services::new(&Config::parse(cfg).unwrap(), T0, None).unwrap()
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

#[test]
fn slow_timer_samples_mark_successes_slow() {
    let s = services(
        r#"
[[breakers]]
name = "lat"
kind = "error_rate"
latency_metric = "rt"
slow_call_ms = 100
slow_call_rate_threshold = 0.5
min_calls = 4
"#,
    );
    observe(&s, "rt:50|ms\nrt:150|ms\nrt:200:300|ms");
    s.breakers.tick(T0);
    let b = s.breakers.get("lat").unwrap();
    // 4 calls, 3 slow: 75% >= 50%.
    assert_eq!(b.breaker.signals(T0).state, BreakerState::Open);
}

#[test]
fn a_reload_keeps_unchanged_breakers_and_limits_and_resets_changed_ones() {
    let cfg = format!(
        "{ERROR_RATE}\n[[limits]]\nname = \"l\"\nrules = [{{ max = 2, window_ms = 1000 }}]\n"
    );
    let s1 = services(&cfg);
    observe(&s1, "req:4|c\nfail:4|c");
    s1.breakers.tick(T0);
    let l = s1.limits.get("l").unwrap();
    assert!(l.acquire("k", 2, T0).unwrap().allowed);
    assert!(!l.acquire("k", 1, T0).unwrap().allowed);

    let same = Services::new(&Config::parse(&cfg).unwrap(), T0, Some(&s1)).unwrap();
    assert_eq!(
        same.breakers.get("b").unwrap().breaker.signals(T0).state,
        BreakerState::Open
    );
    assert!(
        !same
            .limits
            .get("l")
            .unwrap()
            .acquire("k", 1, T0)
            .unwrap()
            .allowed
    );

    let changed = cfg
        .replace("max = 2", "max = 3")
        .replace("min_calls = 4", "min_calls = 5");
    let s2 = Services::new(&Config::parse(&changed).unwrap(), T0, Some(&same)).unwrap();
    assert_eq!(
        s2.breakers.get("b").unwrap().breaker.signals(T0).state,
        BreakerState::Closed
    );
    assert!(
        s2.limits
            .get("l")
            .unwrap()
            .acquire("k", 3, T0)
            .unwrap()
            .allowed
    );
}
