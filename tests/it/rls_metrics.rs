//! The rate-limit service's per-rule metrics on /metrics, asked through
//! tonic's generated client: the windowed rates of each rule's hits
//! (`rollstat_rls_hits_rate`, on the config's `[[windows]]`), and the
//! names `detailed_metric` and `value_to_metric` give, capped by
//! `[rls] max_detailed_series` with what is folded past it counted.

use std::time::{Duration, Instant};

use rollstat::rls::proto::RateLimitRequest;

use crate::rls::{client, descriptor, runtime};
use crate::support::{sample_config_on_port_0, Daemon, TempDir};

const METERED: &str = "\
domain: metered
descriptors:
  - key: client
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 100}
  - key: path
    value: /api/*
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 100}
";

fn start(dir: &TempDir, rls_extra: &str) -> Daemon {
    std::fs::write(dir.path().join("metered.yaml"), METERED).unwrap();
    let config = format!(
        "{}\n[rls]\ngrpc = \"127.0.0.1:0\"\nconfig_dir = \"{}\"\n{rls_extra}",
        sample_config_on_port_0(),
        dir.path().display()
    );
    Daemon::start_with(&config)
}

/// Sends one call per descriptor, each alone in its request.
fn send(d: &Daemon, calls: &[&[(&str, &str)]]) {
    runtime().block_on(async {
        let mut c = client(d).await;
        for entries in calls {
            let req = RateLimitRequest {
                domain: "metered".into(),
                descriptors: vec![descriptor(entries)],
                hits_addend: 0,
            };
            c.should_rate_limit(req).await.expect("ShouldRateLimit");
        }
    });
}

fn hits(s: &crate::support::Scrape, descriptor: &str, result: &str) -> Option<f64> {
    s.value(
        "rollstat_rls_hits_total",
        &[
            ("domain", "metered"),
            ("descriptor", descriptor),
            ("result", result),
        ],
    )
}

fn rate(s: &crate::support::Scrape, descriptor: &str, result: &str, window: &str) -> Option<f64> {
    s.value(
        "rollstat_rls_hits_rate",
        &[
            ("domain", "metered"),
            ("descriptor", descriptor),
            ("result", result),
            ("window", window),
        ],
    )
}

#[test]
fn detailed_and_value_to_metric_rules_name_the_requests_values_up_to_the_cap() {
    let dir = TempDir::new("rls-detail");
    let d = start(&dir, "max_detailed_series = 2\n");
    send(
        &d,
        &[
            &[("client", "a")],
            &[("client", "a")],
            &[("client", "a")],
            &[("client", "b")],
            // A third name, past max_detailed_series = 2: the rule's own.
            &[("client", "c")],
            &[("route", "users"), ("method", "GET")],
            &[("route", "users"), ("method", "PUT")],
            &[("path", "/api/v1")],
            &[("plain", "x")],
        ],
    );
    let s = d.scrape();
    // detailed_metric: every entry's key_value.
    assert_eq!(hits(&s, "client_a", "total_hits"), Some(3.0));
    assert_eq!(hits(&s, "client_a", "within_limit"), Some(2.0));
    assert_eq!(hits(&s, "client_a", "near_limit"), Some(1.0));
    assert_eq!(hits(&s, "client_a", "over_limit"), Some(1.0));
    assert_eq!(hits(&s, "client_b", "total_hits"), Some(1.0));
    assert_eq!(hits(&s, "client_c", "total_hits"), None, "past the cap");
    assert_eq!(hits(&s, "client", "total_hits"), Some(1.0));
    assert_eq!(
        s.value(
            "rollstat_rls_detail_dropped_total",
            &[("domain", "metered"), ("descriptor", "client")]
        ),
        Some(1.0)
    );
    // value_to_metric on a key-only node names its value; the node below
    // without it keeps its key alone.
    assert_eq!(hits(&s, "route_users.method", "total_hits"), Some(2.0));
    // value_to_metric on a wildcard names the request's value.
    assert_eq!(hits(&s, "path_/api/v1", "total_hits"), Some(1.0));
    assert_eq!(hits(&s, "path_/api/*", "total_hits"), None);
    // Neither flag: the rule's place in its domain.
    assert_eq!(hits(&s, "plain", "total_hits"), Some(1.0));

    // A reload that changes the rules keeps the names taken, so the cap
    // still holds: a 4th name folds, the first ones stay their own.
    std::fs::write(
        dir.path().join("other.yaml"),
        "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    )
    .unwrap();
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the SIGHUP reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "ok")]) == Some(1.0)
    });
    send(&d, &[&[("client", "d")], &[("client", "b")]]);
    let s = d.scrape();
    assert_eq!(hits(&s, "client_d", "total_hits"), None, "past the cap");
    assert_eq!(hits(&s, "client", "total_hits"), Some(2.0));
    assert_eq!(hits(&s, "client_b", "total_hits"), Some(2.0));
    assert_eq!(
        s.value(
            "rollstat_rls_detail_dropped_total",
            &[("domain", "metered"), ("descriptor", "client")]
        ),
        Some(2.0)
    );
    assert!(
        rate(&s, "client_a", "total_hits", "10s").is_some_and(|r| r > 0.0),
        "the rates go on across the reload: {:?}",
        s.show("rollstat_rls_hits_rate")
    );
}

/// Seconds since the Unix epoch: the windows' grid is epoch-aligned.
fn wall() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn each_rules_hits_have_a_windowed_rate_on_the_configs_windows() {
    let dir = TempDir::new("rls-rates");
    let before_start = wall();
    let d = start(&dir, "");
    let after_start = wall();
    send(
        &d,
        &[&[("plain", "x")], &[("plain", "y")], &[("plain", "z")]],
    );
    let before_scrape = wall();
    let s = d.scrape();
    let after_scrape = wall();
    assert_eq!(hits(&s, "plain", "total_hits"), Some(3.0));
    // `10s` (10 x 1 s, the current bucket read): 3 hits over the time
    // watched since the daemon started, well inside the window.
    let r = rate(&s, "plain", "total_hits", "10s").expect("the 10s rate");
    let most = 3.0 / (before_scrape - after_start);
    let least = 3.0 / (after_scrape - before_start);
    assert!(
        (least * 0.99..=most * 1.01).contains(&r),
        "10s rate {r}/s: 3 hits over the time since start, from {least} to {most}"
    );
    assert_eq!(rate(&s, "plain", "over_limit", "10s"), Some(0.0));
    assert_eq!(rate(&s, "plain", "within_limit", "10s"), Some(r));
    // `1m` ignores the bucket being filled: the hits show once their
    // second is over, over the time from the start to that second's end.
    let deadline = Instant::now() + Duration::from_secs(5);
    let (r, before, after) = loop {
        let before = wall();
        let s = d.scrape();
        let after = wall();
        if let Some(r) = rate(&s, "plain", "total_hits", "1m").filter(|r| *r > 0.0) {
            break (r, before, after);
        }
        assert!(
            Instant::now() < deadline,
            "no 1m rate within 5 s: {:?}",
            s.show("rollstat_rls_hits_rate")
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // The second the hits fell in may have ended before the daemon said it
    // was listening (a slow start under load): then the time it covers
    // has no lower bound above 0, and the rate no upper bound.
    let shortest = before.floor() - after_start;
    let most = if shortest > 0.0 {
        3.0 / shortest
    } else {
        f64::INFINITY
    };
    let least = 3.0 / (after.floor() - before_start);
    assert!(
        (least * 0.99..=most * 1.01).contains(&r),
        "1m rate {r}/s: 3 hits over the whole seconds since start, from {least} to {most}"
    );
    assert!(s
        .types
        .contains(&("rollstat_rls_hits_rate".to_string(), "gauge".to_string())));
}
