//! `[[outputs]]` with `kind = "remote_write"`: the real binary pushing to a
//! real Prometheus and VictoriaMetrics, which then answer PromQL with what
//! `/metrics` serves; and to a scripted receiver that fails the ways
//! receivers fail (down, 500, 429 with Retry-After, 400, no answer).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::support::{
    free_port, wait_true, wait_until, Daemon, FakeReceiver, PromReceiver, Receiver, Reply, Scrape,
    VmReceiver,
};

/// Listeners on port 0, one 5-minute window of 10 s buckets (its values
/// hold still while a test compares), a histogram's buckets, and one
/// output to `url` with `extra` keys (which replace the defaults of the
/// same name).
fn config(url: &str, extra: &str) -> String {
    let defaults = [
        "interval_ms = 300",
        "retry_min_ms = 50",
        "retry_max_ms = 2000",
    ];
    let set = |line: &&&str| {
        let key = line.split('=').next().unwrap_or_default().trim();
        !extra
            .lines()
            .any(|e| e.split('=').next().unwrap_or_default().trim() == key)
    };
    let keys: Vec<&str> = defaults.iter().filter(set).copied().collect();
    let keys = keys.join("\n");
    format!(
        r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = "127.0.0.1:0"
http = "127.0.0.1:0"

[ingest]
udp_readers = 1

[series]
quantiles = [0.5, 0.99]
histogram_buckets = [0.01, 0.1, 1.0]

[[windows]]
name = "5m"
buckets = 30
interval_ms = 10000

[[outputs]]
name = "rw"
kind = "remote_write"
url = "{url}"
{keys}
{extra}
"#
    )
}

/// Lines of every statsd type, tags included.
pub(crate) const LINES: &[&str] = &[
    "hits:1|c|#route:/a",
    "hits:2|c|#route:/b",
    "temp:21.5|g|#room:lab",
    "lat:12|ms|#region:eu",
    "lat:250|ms|#region:eu",
    "lat:1500|ms|#region:eu",
    "size:100|h",
    "users:alice|s",
    "users:bob|s",
];

/// `rollstat_output_batches_total{output="rw",result}` on `/metrics`.
fn batches(d: &Daemon, result: &str) -> f64 {
    output_batches(d, "rw", result)
}

/// `rollstat_output_batches_total{output,result}` on `/metrics`.
pub(crate) fn output_batches(d: &Daemon, output: &str, result: &str) -> f64 {
    d.scrape()
        .value(
            "rollstat_output_batches_total",
            &[("output", output), ("result", result)],
        )
        .unwrap_or(0.0)
}

fn retries(d: &Daemon, reason: &str) -> f64 {
    d.scrape()
        .value(
            "rollstat_output_retries_total",
            &[("output", "rw"), ("reason", reason)],
        )
        .unwrap_or(0.0)
}

/// Sends [`LINES`], waits until `/metrics` shows them all, then until two
/// more batches were sent (a push that began after the lines were in).
fn send_and_push(d: &Daemon) {
    send_and_push_to(d, "rw");
}

/// [`send_and_push`] for the output named `output`.
pub(crate) fn send_and_push_to(d: &Daemon, output: &str) {
    for l in LINES {
        d.send_udp(l.as_bytes());
    }
    d.wait_scrape(Duration::from_secs(10), "the lines on /metrics", |s| {
        s.value("hits_total", &[("route", "/b")]) == Some(2.0)
            && s.value("lat_count", &[("region", "eu")]) == Some(3.0)
            && s.value("size_count", &[]) == Some(1.0)
            && s.value(
                "rollstat_window_unique",
                &[("metric", "users"), ("window", "5m")],
            ) == Some(2.0)
    });
    let sent = output_batches(d, output, "sent");
    wait_true(Duration::from_secs(10), "two more pushes sent", || {
        output_batches(d, output, "sent") >= sent + 2.0
    });
}

pub(crate) type Samples = BTreeMap<(String, BTreeMap<String, String>), f64>;

/// The families compared: the series' own and the windowed ones but the
/// rate (a rate over the time a window covers moves between two reads).
const COMPARED: &str = "hits_total|temp|lat_bucket|lat_sum|lat_count|size_bucket|size_sum|size_count|rollstat_window_(samples|sum_value|avg|min|max|quantile|unique)";

/// Whether [`COMPARED`] names `name`.
fn compared(name: &str) -> bool {
    let fixed = [
        "hits_total",
        "temp",
        "lat_bucket",
        "lat_sum",
        "lat_count",
        "size_bucket",
        "size_sum",
        "size_count",
    ];
    fixed.contains(&name)
        || name
            .strip_prefix("rollstat_window_")
            .is_some_and(|f| f != "rate")
}

/// Every compared sample of a scrape.
pub(crate) fn scraped(s: &Scrape) -> Samples {
    s.samples
        .iter()
        .filter(|x| compared(&x.name))
        .map(|x| ((x.name.clone(), x.labels.clone()), x.value))
        .collect()
}

/// Every compared sample the receiver stored, as of now.
fn stored(rx: &impl Receiver) -> Samples {
    rx.query_now(&format!("{{__name__=~\"{COMPARED}\"}}"))
        .into_iter()
        .map(|(mut labels, v)| {
            let name = labels.remove("__name__").expect("__name__");
            ((name, labels), v)
        })
        .collect()
}

/// Whether `got` is `want`, sample for sample, each value within `rel` of
/// its own (VictoriaMetrics keeps 12 significant decimal digits of a
/// float; Prometheus keeps the float).
fn same(got: &Samples, want: &Samples, rel: f64) -> bool {
    got.len() == want.len()
        && want.iter().all(|(k, w)| {
            got.get(k)
                .is_some_and(|g| g == w || (g - w).abs() <= rel * w.abs())
        })
}

/// Pushes [`LINES`] to `rx` and compares what it stored with a scrape,
/// each value within `rel` of the one served.
fn the_receiver_stores_what_metrics_serves(rx: &impl Receiver, rel: f64) {
    let d = Daemon::start_with(&config(
        &rx.write_url(),
        "groups = [\"windowed\", \"cumulative\"]",
    ));
    send_and_push(&d);
    let want = scraped(&d.scrape());
    assert!(want.len() > 30, "{} samples compared", want.len());
    let got = wait_until(Duration::from_secs(15), "the receiver's samples", || {
        let got = stored(rx);
        if same(&got, &want, rel) {
            Ok(got)
        } else {
            let missing: Vec<_> = want
                .iter()
                .filter(|(k, v)| got.get(*k) != Some(v))
                .take(5)
                .collect();
            let extra: Vec<_> = got
                .iter()
                .filter(|(k, _)| !want.contains_key(*k))
                .take(5)
                .collect();
            Err(format!(
                "{} stored, {} served; differing: {missing:?}; not served: {extra:?}",
                got.len(),
                want.len()
            ))
        }
    });
    assert_eq!(got.len(), want.len());
    // Self-metrics were not selected.
    assert!(rx.query_now("rollstat_output_batches_total").is_empty());
    assert_eq!(batches(&d, "refused"), 0.0);
}

#[test]
fn prometheus_stores_what_metrics_serves() {
    let rx = PromReceiver::start();
    the_receiver_stores_what_metrics_serves(&rx, 0.0);
}

#[test]
fn victoria_metrics_stores_what_metrics_serves() {
    let Some(rx) = VmReceiver::start() else {
        return;
    };
    the_receiver_stores_what_metrics_serves(&rx, 1e-11);
}

#[test]
fn the_last_push_at_stop_carries_the_last_lines() {
    let rx = FakeReceiver::start(vec![Reply::Status(204, vec![])]);
    let mut d = Daemon::start_with(&config(
        &rx.url(),
        "interval_ms = 600000\nstop_timeout_ms = 5000",
    ));
    d.send_udp(b"last:7|c");
    d.wait_scrape(Duration::from_secs(10), "last_total", |s| {
        s.value("last_total", &[]) == Some(7.0)
    });
    assert!(rx.received().is_empty(), "no push before the interval");
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(15)).success());
    let got = rx.received();
    let value = got
        .iter()
        .flat_map(|r| r.request().timeseries)
        .find_map(|ts| {
            let name = ts.labels.iter().find(|l| l.name == "__name__")?;
            (name.value == "last_total").then(|| ts.samples[0].value)
        });
    assert_eq!(
        value,
        Some(7.0),
        "{} requests; log:\n{}",
        got.len(),
        d.log()
    );
    for r in &got {
        assert_eq!(r.header("content-encoding"), Some("snappy"));
        assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
        assert_eq!(r.header("x-prometheus-remote-write-version"), Some("0.1.0"));
        assert!(r
            .header("user-agent")
            .is_some_and(|u| u.starts_with("rollstat/")));
    }
}

#[test]
fn server_errors_and_429_are_retried_and_a_batch_is_never_sent_twice_after_a_2xx() {
    let rx = FakeReceiver::start(vec![
        Reply::Status(500, vec![]),
        Reply::Status(503, vec![]),
        Reply::Status(429, vec!["Retry-After: 1".into()]),
        Reply::Status(204, vec![]),
    ]);
    let d = Daemon::start_with(&config(&rx.url(), "groups = [\"cumulative\"]"));
    d.send_udp(b"r:1|c");
    wait_true(
        Duration::from_secs(15),
        "batches sent after the failures",
        || batches(&d, "sent") >= 3.0,
    );
    let got = rx.received();
    assert_eq!(got[0].body, got[1].body, "the failed batch is tried again");
    assert_eq!(got[1].body, got[2].body);
    assert_eq!(got[2].body, got[3].body);
    let waited = got[3].at - got[2].at;
    assert!(
        waited >= Duration::from_millis(950),
        "Retry-After: 1 honoured: {waited:?}"
    );
    assert_eq!(retries(&d, "server_error"), 2.0);
    assert_eq!(retries(&d, "too_many_requests"), 1.0);
    let accepted: Vec<&Vec<u8>> = got
        .iter()
        .filter(|r| r.answered == Some(204))
        .map(|r| &r.body)
        .collect();
    for (i, a) in accepted.iter().enumerate() {
        assert!(
            !accepted[..i].contains(a),
            "a batch sent again after its 2xx"
        );
    }
    assert_eq!(batches(&d, "refused"), 0.0);
}

#[test]
fn a_400_is_counted_and_never_retried() {
    let rx = FakeReceiver::start(vec![Reply::Status(400, vec![])]);
    let d = Daemon::start_with(&config(&rx.url(), "groups = [\"cumulative\"]"));
    d.send_udp(b"r:1|c");
    wait_true(Duration::from_secs(10), "refused batches", || {
        batches(&d, "refused") >= 3.0
    });
    let got = rx.received();
    for (i, r) in got.iter().enumerate() {
        assert!(
            !got[..i].iter().any(|o| o.body == r.body),
            "a refused batch sent again"
        );
    }
    assert_eq!(retries(&d, "server_error"), 0.0);
}

#[test]
fn a_receiver_that_never_answers_blocks_neither_ingest_nor_scrapes() {
    let rx = FakeReceiver::start(vec![Reply::Hang]);
    let d = Daemon::start_with(&config(&rx.url(), "timeout_ms = 300"));
    wait_true(Duration::from_secs(10), "timeouts counted", || {
        retries(&d, "timeout") >= 2.0
    });
    for i in 0..50 {
        d.send_udp(format!("busy:{i}|c").as_bytes());
    }
    let t = Instant::now();
    d.wait_scrape(Duration::from_secs(5), "the lines while sends hang", |s| {
        s.value("busy_total", &[]) == Some(1225.0)
    });
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "ingest waited on the output: {:?}",
        t.elapsed()
    );
    assert_eq!(batches(&d, "sent"), 0.0);
}

#[test]
fn a_receiver_down_at_start_gets_the_queue_when_it_comes_up_and_the_queue_stays_under_its_cap() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/api/v1/write");
    let d = Daemon::start_with(&config(
        &url,
        "queue_max_bytes = 65536\nbatch_max_bytes = 16384\nretry_max_ms = 300",
    ));
    d.create_counters("q", 3000);
    wait_true(
        Duration::from_secs(20),
        "batches dropped from a full queue",
        || batches(&d, "queue_full") >= 1.0,
    );
    let why: Vec<(String, f64)> = ["connect", "timeout", "protocol", "tls"]
        .iter()
        .map(|r| (r.to_string(), retries(&d, r)))
        .collect();
    wait_until(Duration::from_secs(10), "connect failures retried", || {
        if retries(&d, "connect") >= 1.0 {
            Ok(())
        } else {
            Err(format!(
                "{}\n{}",
                d.scrape().show("rollstat_output_retries_total").join("\n"),
                d.log()
            ))
        }
    });
    assert_eq!(why[1..].iter().map(|w| w.1).sum::<f64>(), 0.0, "{why:?}");
    for _ in 0..10 {
        let q = d
            .scrape()
            .value("rollstat_output_queue_bytes", &[("output", "rw")])
            .unwrap();
        assert!(q <= 65536.0, "queue bytes {q} above the cap");
        std::thread::sleep(Duration::from_millis(100));
    }
    let rx = FakeReceiver::start_on(port, vec![Reply::Status(204, vec![])]);
    wait_true(Duration::from_secs(20), "the queue delivered", || {
        batches(&d, "sent") >= 2.0
    });
    assert!(!rx.received().is_empty());
}

#[test]
fn a_reload_keeps_the_queue_of_an_output_it_changes_and_drops_that_of_one_it_removes() {
    let down = FakeReceiver::start(vec![Reply::Status(503, vec![])]);
    let up = FakeReceiver::start(vec![Reply::Status(204, vec![])]);
    let extra = "groups = [\"cumulative\"]\nretry_min_ms = 2000\nretry_max_ms = 2000";
    let d = Daemon::start_with(&config(&down.url(), extra));
    d.send_udp(b"kept:5|c");
    wait_true(
        Duration::from_secs(10),
        "batches queued behind 503s",
        || {
            retries(&d, "server_error") >= 1.0
                && d.scrape()
                    .value("rollstat_output_queue_bytes", &[("output", "rw")])
                    .unwrap_or(0.0)
                    > 0.0
        },
    );
    let first = down.received()[0].body.clone();
    // Same name, another receiver: the queued batches go there.
    std::fs::write(&d.config, config(&up.url(), extra)).unwrap();
    d.signal("HUP");
    wait_true(
        Duration::from_secs(15),
        "the queue sent to the new url",
        || up.received().iter().any(|r| r.body == first),
    );
    assert_eq!(batches(&d, "removed"), 0.0);
    // Back to the failing receiver until batches wait again, then removed:
    // what it still holds is counted, and nothing more is sent.
    std::fs::write(&d.config, config(&down.url(), extra)).unwrap();
    d.signal("HUP");
    let queued = || {
        d.scrape()
            .value("rollstat_output_queue_bytes", &[("output", "rw")])
            .unwrap_or(0.0)
    };
    wait_true(Duration::from_secs(10), "batches queued again", || {
        queued() > 0.0
    });
    let head = config(&down.url(), extra);
    let without = head.split("[[outputs]]").next().unwrap();
    std::fs::write(&d.config, without).unwrap();
    d.signal("HUP");
    wait_true(
        Duration::from_secs(10),
        "the removed output's queue counted",
        || batches(&d, "removed") >= 1.0,
    );
    assert_eq!(queued(), 0.0);
    let before = up.received().len() + down.received().len();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        up.received().len() + down.received().len(),
        before,
        "sent after its removal"
    );
}

#[test]
fn a_series_that_leaves_is_ended_in_prometheus_by_a_stale_marker() {
    let rx = PromReceiver::start();
    let url = rx.write_url();
    let config = config(&url, "groups = [\"windowed\", \"cumulative\"]")
        .replace("[series]\n", "[series]\nttl_secs = 2\n")
        .replace(
            "buckets = 30\ninterval_ms = 10000",
            "buckets = 2\ninterval_ms = 1000",
        )
        .replace("name = \"5m\"", "name = \"2s\"");
    let d = Daemon::start_with(&config);
    d.send_udp(b"gone:1|c\ngone.t:5|ms");
    let stays = || d.send_udp(b"stays:1|c");
    stays();
    let present = |q: &str| !rx.query_now(q).is_empty();
    wait_true(Duration::from_secs(10), "both in Prometheus", || {
        present("gone_total") && present("gone_t_count") && present("stays_total")
    });
    // `stays` is sent on; `gone` leaves at its TTL, and the next push ends it.
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        stays();
        let ended = [
            "gone_total",
            "gone_t_bucket",
            "gone_t_count",
            "rollstat_window_samples{metric=\"gone\"}",
        ]
        .iter()
        .all(|q| !present(q));
        if ended {
            break;
        }
        assert!(
            Instant::now() < until,
            "gone still in Prometheus: {:?}",
            rx.query_now("gone_total")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(present("stays_total"), "a series that stays is not ended");
    assert!(present("rollstat_window_samples{metric=\"stays\"}"));
}
