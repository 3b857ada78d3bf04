//! Real statsd clients send every metric type, with tags and sample rates;
//! what the daemon publishes must equal what they sent. Each client script
//! makes its client-side sampling deterministic (every sampled call is sent
//! with its `@rate`), so a call at rate 0.5 must count twice.
//! The scripts live in tests/clients; their expected values are here.

use std::process::Command;
use std::time::Duration;

use crate::support::{assert_close, missing, python, repo, require_tool, run, Daemon, Scrape};

const EPS: f64 = 1e-9;

fn run_client(mut cmd: Command, d: &Daemon) {
    cmd.arg("127.0.0.1").arg(d.udp.port().to_string());
    let out = run(&mut cmd, b"", Duration::from_secs(30));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        out.stdout,
        out.stderr
    );
}

/// `rollstat_window_*` in the "5s" window for `metric` with `tags`.
fn win(s: &Scrape, family: &str, metric: &str, tags: &[(&str, &str)]) -> f64 {
    let mut labels = vec![("metric", metric), ("window", "5s")];
    labels.extend_from_slice(tags);
    s.must(&format!("rollstat_window_{family}"), &labels)
}

fn assert_nothing_rejected(s: &Scrape) {
    assert_eq!(
        s.sum("rollstat_ingest_rejected_lines_total"),
        0.0,
        "rejections: {:?}",
        s.by_label("rollstat_ingest_rejected_lines_total", "reason")
    );
    assert_eq!(s.sum("rollstat_series_refused_total"), 0.0);
}

#[test]
fn python_statsd_counters_gauges_timers_and_sets_arrive_with_their_weights() {
    let d = Daemon::start();
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/clients/python/send_statsd.py"));
    run_client(cmd, &d);
    let s = d.wait_lines("udp", 19.0, Duration::from_secs(10));
    assert_nothing_rejected(&s);

    // incr x3, incr 5 @0.5 (x2), decr: the decrement goes into the window
    // (sum 12) but never lowers the _total (13), which Prometheus would read
    // as a reset.
    assert_eq!(s.must("py_req_total", &[]), 13.0);
    assert_eq!(
        s.must("rollstat_series_negative_increments_total", &[]),
        1.0
    );
    assert_eq!(win(&s, "samples", "py.req", &[]), 6.0);
    assert_eq!(win(&s, "sum_value", "py.req", &[]), 12.0);
    assert_eq!(s.must("py_tagged_total", &[("route", "/x")]), 2.0);
    // 42, then -3 and +5 as deltas.
    assert_eq!(s.must("py_depth", &[]), 44.0);
    assert_eq!(win(&s, "samples", "py.depth", &[]), 3.0);
    assert_eq!(win(&s, "min", "py.depth", &[]), 39.0);
    assert_eq!(win(&s, "max", "py.depth", &[]), 44.0);
    // A negative absolute gauge travels as 0 then -7.
    assert_eq!(s.must("py_neg", &[]), -7.0);
    // Timers in seconds: 12.5 ms twice, 250 ms @0.5.
    assert_eq!(s.must("py_lat_count", &[]), 4.0);
    assert_close(s.must("py_lat_sum", &[]), 0.525, EPS, "py_lat_sum");
    assert_eq!(s.must("py_lat_bucket", &[("le", "0.025")]), 2.0);
    assert_eq!(s.must("py_lat_bucket", &[("le", "0.25")]), 4.0);
    assert_eq!(s.must("py_lat_bucket", &[("le", "+Inf")]), 4.0);
    assert_eq!(win(&s, "samples", "py.lat", &[]), 4.0);
    assert_close(
        win(&s, "sum_value", "py.lat", &[]),
        0.525,
        EPS,
        "py.lat sum",
    );
    assert_eq!(win(&s, "max", "py.lat", &[]), 0.25);
    // alice, bob, alice.
    assert_eq!(win(&s, "unique", "py.users", &[]), 2.0);
    assert_eq!(win(&s, "samples", "py.users", &[]), 3.0);
    // A pipeline: two lines in one datagram.
    assert_eq!(s.must("py_piped_total", &[]), 1.0);
    assert_close(
        s.must("py_piped_lat_sum", &[]),
        0.003,
        EPS,
        "py_piped_lat_sum",
    );

    let j = d.series("py.lat");
    assert_eq!(j.as_array().map(Vec::len), Some(1), "{j}");
    assert_eq!(j[0]["type"], "timer");
    assert_eq!(j[0]["windows"]["5s"]["samples"], 4.0);
    assert_close(
        j[0]["windows"]["5s"]["sum"].as_f64().unwrap(),
        0.525,
        EPS,
        "JSON py.lat sum",
    );
}

#[test]
fn datadog_dogstatsd_metrics_arrive_with_tags_and_events_and_checks_are_skipped() {
    let d = Daemon::start();
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/clients/python/send_datadog.py"));
    let s = metrics_event_and_check(cmd, &d, 14.0);

    let api = [("env", "test"), ("route", "/api")];
    // 1 + 1 + 3 @0.5 (x2), and - 1 in the window only.
    assert_eq!(s.must("dd_req_total", &api), 8.0);
    assert_eq!(win(&s, "samples", "dd.req", &api), 5.0);
    assert_eq!(win(&s, "sum_value", "dd.req", &api), 7.0);
    // `q` is a label rollstat uses itself (quantiles): the tag becomes `tag_q`.
    let q = [("env", "test"), ("tag_q", "main")];
    assert_eq!(s.must("dd_depth", &q), 9.0);
    assert_eq!(win(&s, "samples", "dd.depth", &q), 2.0);
    // Histogram: 512, then 1024 @0.5.
    assert_eq!(s.must("dd_payload_count", &api), 3.0);
    assert_eq!(s.must("dd_payload_sum", &api), 2560.0);
    assert_eq!(win(&s, "max", "dd.payload", &api), 1024.0);
    // Distribution (unitless) and timer (ms on the wire, seconds out).
    assert_eq!(s.must("dd_latd_count", &api), 2.0);
    assert_close(s.must("dd_latd_sum", &api), 0.025, EPS, "dd_latd_sum");
    assert_eq!(s.must("dd_lat_count", &api), 1.0);
    assert_close(s.must("dd_lat_sum", &api), 0.0125, EPS, "dd_lat_sum");
    assert_eq!(win(&s, "unique", "dd.users", &[("env", "test")]), 3.0);

    let j = d.series("dd.req");
    assert_eq!(j[0]["labels"]["route"], "/api", "{j}");
    assert_eq!(j[0]["labels"]["env"], "test", "{j}");
    assert_eq!(j[0]["windows"]["5s"]["sum"], 7.0, "{j}");
    assert_eq!(j[0]["windows"]["2s"]["sum"], 7.0, "{j}");
}

#[test]
fn node_hot_shots_metrics_arrive_with_global_tags_and_sample_rates() {
    let node = require_tool("node");
    if !repo()
        .join("tests/clients/node/node_modules/hot-shots/package.json")
        .is_file()
    {
        missing("hot-shots (tests/clients/node/node_modules)");
    }
    let d = Daemon::start();
    let mut cmd = Command::new(node);
    cmd.arg(repo().join("tests/clients/node/send.js"));
    let s = metrics_event_and_check(cmd, &d, 12.0);

    let api = [("env", "test"), ("route", "/api")];
    // 1 + 1 + 2 @0.5 (x2), and - 1 in the window only.
    assert_eq!(s.must("js_req_total", &api), 6.0);
    assert_eq!(win(&s, "samples", "js.req", &api), 5.0);
    assert_eq!(win(&s, "sum_value", "js.req", &api), 5.0);
    // 42, then gaugeDelta -3.
    // `q` is a label rollstat uses itself (quantiles): the tag becomes `tag_q`.
    let q = [("env", "test"), ("tag_q", "main")];
    assert_eq!(s.must("js_depth", &q), 39.0);
    // Timer: 12.5 ms @0.5 (x2) and 100 ms.
    assert_eq!(s.must("js_lat_count", &api), 3.0);
    assert_close(s.must("js_lat_sum", &api), 0.125, EPS, "js_lat_sum");
    assert_eq!(win(&s, "samples", "js.lat", &api), 3.0);
    assert_eq!(s.must("js_payload_count", &api), 1.0);
    assert_eq!(s.must("js_payload_sum", &api), 512.0);
    assert_eq!(s.must("js_latd_count", &api), 2.0);
    assert_close(s.must("js_latd_sum", &api), 0.025, EPS, "js_latd_sum");
    assert_eq!(win(&s, "unique", "js.users", &[("env", "test")]), 2.0);

    let j = d.series("js.users");
    assert_eq!(j[0]["type"], "set", "{j}");
    assert_eq!(j[0]["windows"]["5s"]["unique"], 2, "{j}");
}

/// Runs a DogStatsD client that sends `lines` metric lines, then one event
/// and one service check; waits until all have landed and checks that the
/// event and the check were skipped (counted by kind) and nothing rejected.
fn metrics_event_and_check(cmd: Command, d: &Daemon, lines: f64) -> Scrape {
    run_client(cmd, d);
    d.wait_lines("udp", lines, Duration::from_secs(10));
    // The event and the check come last: let them land too.
    let s = d.wait_scrape(Duration::from_secs(5), "2 skipped lines", |s| {
        s.sum("rollstat_ingest_skipped_lines_total") >= 2.0
    });
    assert_nothing_rejected(&s);
    let sk = s.by_label("rollstat_ingest_skipped_lines_total", "kind");
    assert_eq!(sk.get("event"), Some(&1.0), "{sk:?}");
    assert_eq!(sk.get("service_check"), Some(&1.0), "{sk:?}");
    s
}
