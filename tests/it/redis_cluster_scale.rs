//! Many shared series on a Redis Cluster.
//!
//! A sync used to put every shared window into one pipeline; on a cluster
//! the client refuses a pipeline that spans slots (`CrossSlot`), so two
//! shared series were enough to mark the windows operation down for good,
//! and the refused deltas were counted as written and never re-sent. Now a
//! sync sends one pipeline per slot (concurrently), and a refused pipeline
//! leaves its deltas pending.
//!
//! One daemon, a 3-master cluster, 48 shared series whose keys land on every
//! node, and a shared `on_store_error = "deny"` limit beside them: every
//! acquire answers 200 or 429 (never 503), `rollstat_store_op_up{op="windows"}`
//! stays 1, and the fleet view shows every series with its own total.
//!
//! And the write-back of a limit's outage admissions (20 keys, many slots)
//! after every node was held by `CLIENT PAUSE`: one pipeline per slot, all
//! written (the old single pipeline was refused, counted `unconfirmed`, and
//! lost: 0 written).

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use crate::exactness::Http;
use crate::redis::config;
use crate::redis_server::Cluster;
use crate::support::{Daemon, Scrape};

/// Shared series in the test.
const SERIES: usize = 48;

/// The increments sent to series `i`.
fn count_of(i: usize) -> usize {
    i % 7 + 1
}

/// Sends `count_of(i)` increments of 1 to `scale.s<i>` for every series.
fn send_all(d: &Daemon) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..SERIES {
        let text = vec![format!("scale.s{i}:1|c"); count_of(i)].join("\n");
        s.send_to(text.as_bytes(), d.udp).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The series whose fleet view is missing or wrong in `s`.
fn wrong_fleet(s: &Scrape) -> Vec<String> {
    (0..SERIES)
        .filter_map(|i| {
            let name = format!("scale.s{i}");
            let labels = [("metric", name.as_str()), ("window", "w")];
            let samples = s.value("rollstat_fleet_window_samples", &labels);
            let sum = s.value("rollstat_fleet_window_sum_value", &labels);
            let want = count_of(i) as f64;
            (samples != Some(want) || sum != Some(want))
                .then(|| format!("{name}: samples {samples:?}, sum {sum:?}, want {want}"))
        })
        .collect()
}

#[test]
fn on_a_cluster_48_shared_series_sync_beside_a_deny_limit() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let cfg = config(
        &format!(
            "{}\ntimeout_ms = 500\nsync_interval_ms = 100",
            cluster.section()
        ),
        r#"
[[windows]]
name = "w"
buckets = 30
interval_ms = 1000

[[mappings]]
match = "scale.*"
shared = true

[[limits]]
name = "guard"
shared = true
on_store_error = "deny"
rules = [{ max = 1000, window_ms = 1000 }]
"#,
    );
    let d = Daemon::start_with(&cfg);
    let started = Instant::now();
    send_all(&d);
    let mut c = Http::connect(d.http);
    let mut answers = [0usize; 2];
    let mut last_wrong = Vec::new();
    let mut ok_since: Option<Instant> = None;
    // Until the fleet view has been right for 1 s (ten syncs), at most 20 s:
    // acquire, and check the windows operation on every scrape.
    while started.elapsed() < Duration::from_secs(20) {
        let (code, _, body) = c.call("POST", "/api/v1/limits/guard/acquire?key=k", "");
        assert!(
            code == 200 || code == 429,
            "acquire answered {code}: {body}"
        );
        answers[usize::from(code == 429)] += 1;
        let s = d.scrape();
        assert_eq!(
            s.value("rollstat_store_op_up", &[("op", "windows")]),
            Some(1.0),
            "the windows operation went down after {:?}",
            started.elapsed()
        );
        last_wrong = wrong_fleet(&s);
        if last_wrong.is_empty() {
            let since = *ok_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_secs(1) {
                break;
            }
        } else {
            assert!(
                ok_since.is_none(),
                "the fleet view went wrong again: {last_wrong:#?}"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        last_wrong.is_empty() && ok_since.is_some(),
        "after {:?}, the fleet view is wrong for {} of {SERIES} series: {last_wrong:#?}",
        started.elapsed(),
        last_wrong.len()
    );
    assert_eq!(
        cluster.nodes_holding_keys(),
        3,
        "the window keys should land on all three nodes"
    );
    let s = d.scrape();
    assert_eq!(
        s.value(
            "rollstat_store_unshared_deltas_total",
            &[("reason", "unconfirmed")]
        )
        .unwrap_or(0.0),
        0.0
    );
    println!(
        "{SERIES} shared series on a 3-node cluster: fleet view right after {:?}; {} acquires \
         answered 200, {} answered 429, none 503",
        ok_since.unwrap().duration_since(started),
        answers[0],
        answers[1]
    );
}

/// The outage admissions of many keys (many slots) are written back, one
/// pipeline per slot: on the old code the single write-back pipeline was
/// refused (`CrossSlot`), put back, and never written.
#[test]
fn on_a_cluster_outage_admissions_of_many_keys_are_written_back() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let cfg = config(
        &format!("{}\ntimeout_ms = 200", cluster.section()),
        r#"
[[limits]]
name = "wb"
shared = true
on_store_error = "local"
rules = [{ max = 5, window_ms = 60000 }]
"#,
    );
    let d = Daemon::start_with(&cfg);
    let mut c = Http::connect(d.http);
    let (code, _, body) = c.call("POST", "/api/v1/limits/wb/acquire?key=warm", "");
    assert_eq!(code, 200, "{body}");
    // Every node holds every client for 2 s: limit calls time out and the
    // local fallback decides, its admissions queued for write-back.
    for n in &cluster.nodes {
        assert_eq!(n.cli_command(&["CLIENT", "PAUSE", "2000"]), "OK");
    }
    let paused = Instant::now();
    let mut local = 0;
    for k in 0..20 {
        let (code, _, body) = c.call("POST", &format!("/api/v1/limits/wb/acquire?key=u{k}"), "");
        assert_eq!(code, 200, "{body}");
        if crate::exactness::source(&body) == "local" {
            local += 1;
        }
    }
    assert!(
        paused.elapsed() < Duration::from_millis(2000) && local >= 10,
        "the machine is too slow for this test: {local} local decisions in {:?}",
        paused.elapsed()
    );
    let result = |d: &Daemon, r: &str| {
        d.metric(&format!("rollstat_store_writeback_total{{result=\"{r}\"}}"))
            .unwrap_or(0.0)
    };
    // A limit call sent to a paused node and left unanswered may still be
    // applied when the pause ends: its local admission is not written back
    // (`unanswered`). A write-back tried as the probe while the nodes are
    // still paused misses its deadline and counts as `unconfirmed` (sent,
    // applied when the pause ends, never re-sent); the rest is written after
    // the pause.
    let start = Instant::now();
    let settled =
        |d: &Daemon| result(d, "written") + result(d, "unconfirmed") + result(d, "unanswered");
    while settled(&d) < f64::from(local) {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "written back {} of {local} outage admissions ({} unconfirmed, {} unanswered)",
            result(&d, "written"),
            result(&d, "unconfirmed"),
            result(&d, "unanswered")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let written = result(&d, "written");
    assert_eq!(settled(&d), f64::from(local));
    assert!(written >= f64::from(local) / 2.0, "written {written}");
    for r in ["rejected", "overflow"] {
        assert_eq!(result(&d, r), 0.0, "{r}");
    }
    println!(
        "{local} outage admissions over {local} keys on a 3-node cluster: {written} written \
         back, {} unconfirmed, {} unanswered, in {:?}",
        result(&d, "unconfirmed"),
        result(&d, "unanswered"),
        start.elapsed()
    );
}
