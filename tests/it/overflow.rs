//! Counts that cannot overflow, through the real binary.
//!
//! Before the fix, `checkout.failures:1e300|c` became `u64::MAX` failures:
//! the next failures line overflowed the feed's carried debt and panicked
//! the ticker task (debug builds; release builds wrapped), which silently
//! stopped every breaker's feed and time-driven transitions and the limit
//! sweeps. `POST .../outcomes` took any `u64`, and two such batches in two
//! buckets overflowed the SRE breaker's window sums.
//!
//! * A statsd line counts at most `MAX_OUTCOMES` (10^9) outcomes; the
//!   breaker opens, half-opens on time (the ticker still runs) and closes.
//! * An outcomes field above 10^9 is a 400 naming the field and the cap,
//!   counted as `bad_outcomes`; fields at exactly the cap add up exactly.
//! * An SRE breaker fed absurd values in several buckets keeps counting
//!   later lines (the ticker still drains them) with finite signals.

use std::time::{Duration, Instant};

use crate::support::{sample_config_on_port_0, wait_true, wait_until, Daemon};

/// The per-line and per-field cap (`rollstat::service::breakers::MAX_OUTCOMES`).
const CAP: u64 = 1_000_000_000;

/// The sample config plus an SRE breaker fed by a tagged counter.
fn config_with_sre() -> String {
    sample_config_on_port_0()
        + r#"
[[breakers]]
name = "search"
kind = "sre"
outcome_metric = "search.calls"
outcome_tag = "outcome"
"#
}

fn breaker(d: &Daemon, name: &str) -> serde_json::Value {
    let r = d.get(&format!("/api/v1/breakers/{name}"), &[]);
    assert_eq!(r.status, 200, "GET breaker {name}: {}", r.text());
    r.json()
}

fn post_outcomes(d: &Daemon, name: &str, body: &str) -> (u16, String) {
    let r = d.post(
        &format!("/api/v1/breakers/{name}/outcomes"),
        "application/json",
        body.as_bytes(),
    );
    (r.status, r.text())
}

fn state(d: &Daemon) -> Option<f64> {
    d.metric("rollstat_breaker_state{breaker=\"checkout\"")
}

/// Requests, failures, drop ratio and failure ratio of `name`, each checked
/// to be a plain finite number.
fn numbers(d: &Daemon, name: &str) -> (u64, u64, f64, f64) {
    let b = breaker(d, name);
    let int = |k: &str| b[k].as_u64().unwrap_or_else(|| panic!("{k} in {b}"));
    let real = |k: &str| {
        let x = b[k].as_f64().unwrap_or_else(|| panic!("{k} in {b}"));
        assert!((0.0..=1.0).contains(&x), "{k} = {x} in {b}");
        x
    };
    let (requests, failures) = (int("requests"), int("failures"));
    assert!(failures <= requests, "{b}");
    (
        requests,
        failures,
        real("drop_ratio"),
        real("failure_ratio"),
    )
}

fn assert_no_panic(d: &Daemon) {
    let log = d.log();
    assert!(!log.contains("panicked"), "the daemon panicked:\n{log}");
}

#[test]
fn a_1e300_failures_counter_moves_the_breaker_by_at_most_the_cap_and_it_still_half_opens_on_time() {
    let mut d = Daemon::start_with(&sample_config_on_port_0());
    d.send_udp(b"checkout.failures:1e300|c\ncheckout.failures:1e300|c|@0.000001\n");
    wait_true(Duration::from_secs(5), "the breaker to open", || {
        state(&d) == Some(1.0)
    });
    let opened = Instant::now();
    // Normal traffic next to it, in several ticks: on the old code the
    // next failures line overflowed the carried debt and killed the ticker.
    for _ in 0..5 {
        d.send_udp(b"checkout.requests:20|c\ncheckout.failures:5|c\n");
        std::thread::sleep(Duration::from_millis(150));
    }
    // The error-rate breaker opened at the 10th failure (min_calls) of the
    // capped batch; the JSON shows that window, finite and sane.
    let (requests, failures, drop, ratio) = numbers(&d, "checkout");
    assert_eq!((requests, failures, drop, ratio), (10, 10, 1.0, 1.0));
    // The ticker still runs: half-open after open_duration_ms = 5000 with
    // nobody asking for a decision.
    wait_true(Duration::from_secs(10), "half-open", || {
        state(&d) == Some(2.0)
    });
    let waited = opened.elapsed();
    assert!(
        waited >= Duration::from_millis(4500),
        "half-open after only {waited:?}"
    );
    // And it still works: three successful trials close it.
    let (code, body) = post_outcomes(&d, "checkout", r#"{"success": 3}"#);
    assert_eq!(code, 200, "{body}");
    wait_true(Duration::from_secs(5), "closed", || state(&d) == Some(0.0));
    assert!(d.alive(), "the daemon exited");
    assert_no_panic(&d);
}

#[test]
fn outcomes_above_the_cap_get_400_naming_the_field_and_cap_and_outcomes_at_the_cap_add_up() {
    let d = Daemon::start_with(&sample_config_on_port_0());
    let refused = |d: &Daemon| {
        d.scrape()
            .value(
                "rollstat_http_requests_refused_total",
                &[("reason", "bad_outcomes")],
            )
            .unwrap_or(-1.0)
    };
    for (body, field) in [
        (r#"{"success": 18446744073709551615}"#, "`success`"),
        (r#"{"failure": 1000000001}"#, "`failure`"),
        (r#"{"success": 5, "slow": 1e300}"#, "`slow`"),
        (r#"{"failure": -1}"#, "`failure`"),
    ] {
        let (code, text) = post_outcomes(&d, "checkout", body);
        assert_eq!(code, 400, "{body}: {text}");
        assert!(
            text.contains(field) && text.contains("1000000000"),
            "{body}: the error must name {field} and the cap: {text}"
        );
    }
    assert_eq!(refused(&d), 4.0);
    let (requests, ..) = numbers(&d, "checkout");
    assert_eq!(requests, 0, "a refused batch must record nothing");

    // Exactly the cap, three times, and a cap of failures: exact sums.
    for body in [
        format!(r#"{{"success": {CAP}}}"#),
        format!(r#"{{"success": {CAP}, "slow": {CAP}}}"#),
        format!(r#"{{"success": {CAP}, "failure": {CAP}}}"#),
    ] {
        let (code, text) = post_outcomes(&d, "checkout", &body);
        assert_eq!(code, 200, "{body}: {text}");
    }
    let (requests, failures, drop, ratio) = numbers(&d, "checkout");
    assert_eq!((requests, failures, drop), (4 * CAP, CAP, 0.0));
    assert_eq!(ratio, 0.25);
    assert_eq!(refused(&d), 4.0);
    assert_no_panic(&d);
}

#[test]
fn an_sre_breaker_fed_absurd_counts_in_several_buckets_keeps_counting_later_lines() {
    let d = Daemon::start_with(&config_with_sre());
    let requests = |want: u64, what: &str| {
        wait_until(Duration::from_secs(5), what, || {
            let (got, ..) = numbers(&d, "search");
            if got == want {
                Ok(())
            } else {
                Err(format!("requests {got}, want {want}"))
            }
        });
        // The next batch lands in a later 250 ms bucket.
        std::thread::sleep(Duration::from_millis(300));
    };
    let (code, text) = post_outcomes(&d, "search", &format!(r#"{{"success": {CAP}}}"#));
    assert_eq!(code, 200, "{text}");
    requests(CAP, "the posted successes");
    d.send_udp(b"search.calls:1e300|c|#outcome:error\n");
    requests(2 * CAP, "the capped statsd failures");
    d.send_udp(b"search.calls:1e300|c|@0.000001|#outcome:error\n");
    requests(3 * CAP, "the capped, weighted statsd failures");
    // A plain line after all that is still drained by the ticker.
    d.send_udp(b"search.calls:7|c|#outcome:ok\n");
    requests(3 * CAP + 7, "the last line");
    let (_, failures, drop, ratio) = numbers(&d, "search");
    assert_eq!(failures, 2 * CAP);
    assert!(drop > 0.0 && drop < 1.0, "drop ratio {drop}");
    assert!((ratio - 2.0 / 3.0).abs() < 1e-8, "failure ratio {ratio}");
    assert_eq!(
        d.metric("rollstat_breaker_state{breaker=\"search\""),
        Some(1.0)
    );
    assert_no_panic(&d);
}
