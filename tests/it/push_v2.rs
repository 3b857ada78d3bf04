//! `[[outputs]] protocol = "2.0"`: requests a receiver decodes with the
//! generated `write_v2` types, the `Written` headers read, and the
//! fallback to 1.0 of a receiver that answers 415.

use std::collections::BTreeSet;
use std::time::Duration;

use prost::Message as _;
use rollstat::expose::push::write_v2;

use crate::support::{
    wait_true, wait_until, Daemon, FakeReceiver, PromReceiver, Received, Receiver, Reply,
};

/// Listeners on port 0 and one 2.0 output to `url`, pushing every 300 ms.
fn config(url: &str) -> String {
    format!(
        r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = "127.0.0.1:0"
http = "127.0.0.1:0"

[ingest]
udp_readers = 1

[series]
histogram_buckets = [0.01, 0.1, 1.0]

[[windows]]
name = "5m"
buckets = 30
interval_ms = 10000

[[outputs]]
name = "rw"
kind = "remote_write"
protocol = "2.0"
url = "{url}"
interval_ms = 300
retry_min_ms = 50
retry_max_ms = 2000
"#
    )
}

/// A 2.0 body decoded.
fn v2(r: &Received) -> write_v2::Request {
    let raw = snap::raw::Decoder::new().decompress_vec(&r.body).unwrap();
    write_v2::Request::decode(&raw[..]).expect("an io.prometheus.write.v2.Request")
}

/// The `__name__` of every series of `r`.
fn names(r: &write_v2::Request) -> BTreeSet<String> {
    r.timeseries
        .iter()
        .filter_map(|ts| {
            let p = ts
                .labels_refs
                .chunks_exact(2)
                .find(|p| r.symbols[p[0] as usize] == "__name__")?;
            Some(r.symbols[p[1] as usize].clone())
        })
        .collect()
}

#[test]
fn a_2_0_receiver_gets_2_0_requests_and_what_it_did_not_write_is_counted() {
    // It claims one sample and no histogram written, whatever it is sent.
    let written = vec![
        "X-Prometheus-Remote-Write-Samples-Written: 1".to_string(),
        "X-Prometheus-Remote-Write-Histograms-Written: 0".to_string(),
        "X-Prometheus-Remote-Write-Exemplars-Written: 0".to_string(),
    ];
    let rx = FakeReceiver::start(vec![Reply::Status(204, written)]);
    let d = Daemon::start_with(&config(&rx.url()));
    d.send_udp(b"hits:3|c|#route:/a\nlat:12|ms\ntemp:21|g");
    wait_true(Duration::from_secs(20), "a push with hits_total", || {
        rx.received()
            .iter()
            .any(|r| names(&v2(r)).contains("hits_total"))
    });
    let got = rx.received();
    for r in &got {
        assert_eq!(r.header("content-encoding"), Some("snappy"));
        assert_eq!(
            r.header("content-type"),
            Some("application/x-protobuf;proto=io.prometheus.write.v2.Request")
        );
        assert_eq!(r.header("x-prometheus-remote-write-version"), Some("2.0.0"));
        let req = v2(r);
        assert_eq!(req.symbols[0], "");
    }
    let req = got
        .iter()
        .map(v2)
        .find(|q| names(q).contains("hits_total"))
        .unwrap();
    let hits = req
        .timeseries
        .iter()
        .find(|ts| {
            ts.labels_refs
                .chunks_exact(2)
                .any(|p| req.symbols[p[1] as usize] == "hits_total")
        })
        .unwrap();
    assert_eq!(hits.samples[0].value, 3.0);
    assert!(
        hits.samples[0].start_timestamp > 0,
        "a counter's start time"
    );
    let meta = hits.metadata.unwrap();
    assert_eq!(meta.r#type, write_v2::metadata::MetricType::Counter as i32);
    assert!(!req.symbols[meta.help_ref as usize].is_empty());
    wait_true(Duration::from_secs(10), "unwritten samples counted", || {
        let s = d.scrape();
        s.value(
            "rollstat_output_unwritten_samples_total",
            &[("output", "rw")],
        )
        .is_some_and(|v| v > 0.0)
            && s.value("rollstat_output_protocol", &[("output", "rw")]) == Some(2.0)
    });
}

#[test]
fn a_receiver_answering_415_gets_the_same_batch_again_as_1_0_and_the_output_stays_on_1_0() {
    let rx = FakeReceiver::start(vec![Reply::Status(415, vec![]), Reply::Status(204, vec![])]);
    let d = Daemon::start_with(&config(&rx.url()));
    d.send_udp(b"hits:3|c|#route:/a");
    wait_true(
        Duration::from_secs(20),
        "1.0 requests after the 415",
        || rx.received().len() >= 3,
    );
    let got = rx.received();
    assert_eq!(
        got[0].header("x-prometheus-remote-write-version"),
        Some("2.0.0")
    );
    assert_eq!(got[0].answered, Some(415));
    let first_v2 = names(&v2(&got[0]));
    for r in &got[1..] {
        assert_eq!(r.header("x-prometheus-remote-write-version"), Some("0.1.0"));
        assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
    }
    // The refused batch, re-encoded: the same series' names.
    let again: BTreeSet<String> = got[1]
        .request()
        .timeseries
        .iter()
        .filter_map(|ts| ts.labels.iter().find(|l| l.name == "__name__"))
        .map(|l| l.value.clone())
        .collect();
    assert_eq!(again, first_v2);
    let s = d.scrape();
    assert_eq!(
        s.value("rollstat_output_protocol", &[("output", "rw")]),
        Some(1.0)
    );
    assert_eq!(
        s.value(
            "rollstat_output_batches_total",
            &[("output", "rw"), ("result", "refused")]
        ),
        Some(0.0),
        "nothing lost to the fallback"
    );
    assert!(
        d.log().contains("does not speak remote write 2.0"),
        "{}",
        d.log()
    );
}

#[test]
fn a_prometheus_that_speaks_only_1_0_is_pushed_1_0_after_its_204_without_written_headers() {
    // Debian's Prometheus 2.42 reads a 2.0 body as an empty 1.0 request
    // and answers 204 without Written headers.
    let rx = PromReceiver::start();
    let d = Daemon::start_with(&config(&rx.write_url()));
    d.send_udp(b"hits:3|c|#route:/a\ntemp:21.5|g|#room:lab");
    let served = |name: &str, labels: &[(&str, &str)]| d.scrape().value(name, labels);
    wait_true(Duration::from_secs(10), "served", || {
        served("hits_total", &[("route", "/a")]) == Some(3.0)
    });
    let stored = wait_until(
        Duration::from_secs(20),
        "Prometheus stores the 1.0 data",
        || {
            let got = rx.query_now("hits_total");
            match got.first() {
                Some((labels, v)) if labels.get("route").map(String::as_str) == Some("/a") => {
                    Ok((*v, rx.query_now("temp")))
                }
                _ => Err(format!("{got:?}\n{}", d.log())),
            }
        },
    );
    assert_eq!(Some(stored.0), served("hits_total", &[("route", "/a")]));
    assert_eq!(
        stored.1.first().map(|(_, v)| *v),
        served("temp", &[("room", "lab")])
    );
    let s = d.scrape();
    assert_eq!(
        s.value("rollstat_output_protocol", &[("output", "rw")]),
        Some(1.0)
    );
    let warned = d.log().matches("does not speak remote write 2.0").count();
    assert_eq!(warned, 1, "logged once:\n{}", d.log());
    assert!(d.log().contains(&rx.write_url()), "the url is named");
}

#[test]
fn a_reload_that_changes_the_output_tries_2_0_again() {
    let rx = FakeReceiver::start(vec![Reply::Status(415, vec![]), Reply::Status(204, vec![])]);
    let cfg = config(&rx.url());
    let d = Daemon::start_with(&cfg);
    d.send_udp(b"hits:3|c");
    let version = |r: &Received| {
        r.header("x-prometheus-remote-write-version")
            .map(str::to_owned)
    };
    wait_true(Duration::from_secs(20), "the fallback to 1.0", || {
        rx.received()
            .iter()
            .any(|r| version(r).as_deref() == Some("0.1.0"))
    });
    let before = rx.received().len();
    std::fs::write(
        &d.config,
        cfg.replace("interval_ms = 300", "interval_ms = 400"),
    )
    .unwrap();
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the SIGHUP reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "ok")]) == Some(1.0)
    });
    wait_true(
        Duration::from_secs(20),
        "a 2.0 request after the reload",
        || {
            rx.received()[before..]
                .iter()
                .any(|r| version(r).as_deref() == Some("2.0.0"))
        },
    );
    // This receiver still answers 204 without Written headers: it falls
    // back again, logged again.
    wait_true(
        Duration::from_secs(10),
        "the second fallback logged",
        || d.log().matches("does not speak remote write 2.0").count() == 2,
    );
}
