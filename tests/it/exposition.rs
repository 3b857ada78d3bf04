//! What the daemon publishes: `/metrics` passes promtool, never repeats a
//! series, speaks OpenMetrics and gzip when asked; the JSON API filters by
//! glob.

use std::collections::BTreeSet;
use std::io::Read;
use std::process::Command;
use std::time::Duration;

use crate::support::{require_tool, run, Daemon, Scrape};

/// Every statsd type, DogStatsD and name-embedded tags, a tag value that
/// needs escaping, names that need sanitising, and names and tag sets that
/// could collide once sanitised.
const EVERY_TYPE: &[u8] = b"shop.orders:1|c|#route:/buy,code:200\n\
shop.orders:2|c|@0.5|#code:200,route:/buy\n\
shop.queue:17|g|#q:main\n\
shop.queue:-2|g|#q:main\n\
shop.latency:12.5|ms|#route:/buy\n\
shop.latency:250|ms|#route:/buy\n\
shop.payload:512|h\n\
shop.payload:1:2:3|h\n\
shop.dist:0.5|d|#region:eu\n\
shop.users:alice|s\n\
shop.users:bob|s\n\
shop.tagged,host=a,dc=x:1|c\n\
shop.escaped:1|c|#path:C:\\dir \"quoted\"\n\
9lives-x.y:1|c|#content-type:json\n\
dup.a:1|c\n\
dup_a:1|c\n\
dup-a:1|c\n\
rep:1|c|#k:1,k:2\n\
ord:1|c|#a:1,b:2\n\
ord:1|c|#b:2,a:1\n\
clash:1|c|#content-type:a,content_type:b\n";

fn daemon_with_every_type() -> (Daemon, Scrape) {
    let d = Daemon::start();
    d.send_udp(EVERY_TYPE);
    // Every line ends accepted or refused (the datagram's lines are applied
    // by the ingest workers after the reader counted the packet).
    let lines = EVERY_TYPE
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count() as f64;
    let s = d.wait_scrape(
        Duration::from_secs(10),
        "every line to be accepted or refused",
        |s| {
            s.value("rollstat_ingest_lines_total", &[("transport", "udp")])
                .unwrap_or(0.0)
                + s.sum("rollstat_series_refused_total")
                == lines
        },
    );
    (d, s)
}

#[test]
fn a_scrape_with_every_type_tags_and_self_metrics_passes_promtool() {
    let promtool = require_tool("promtool");
    let (d, s) = daemon_with_every_type();
    assert!(
        s.value(
            "rollstat_build_info",
            &[
                ("version", rollstat::telemetry::build::VERSION),
                ("commit", rollstat::telemetry::build::COMMIT),
                ("rustc", rollstat::telemetry::build::RUSTC),
                ("profile", rollstat::telemetry::build::PROFILE),
            ]
        ) == Some(1.0)
    );
    let body = d.get("/metrics", &[]).body;
    let out = run(
        Command::new(promtool).args(["check", "metrics"]),
        &body,
        Duration::from_secs(30),
    );
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics ({}):\n{}{}\n--- scrape ---\n{}",
        out.status,
        out.stdout,
        out.stderr,
        String::from_utf8_lossy(&body)
    );
    // The escaped tag value reads back as sent.
    assert_eq!(
        s.must("shop_escaped_total", &[("path", "C:\\dir \"quoted\"")]),
        1.0
    );
    // Sanitised names: leading digit, dashes, dots.
    assert_eq!(
        s.must("_9lives_x_y_total", &[("content_type", "json")]),
        1.0
    );
    // Tag order does not make a new series.
    assert_eq!(s.must("ord_total", &[("a", "1"), ("b", "2")]), 2.0);
    // Names that sanitise to one identity: the first wins, the others are
    // refused and counted. A repeated tag key keeps its first value; two tag
    // keys that sanitise to one label keep the first in key order.
    assert_eq!(s.must("dup_a_total", &[]), 1.0);
    assert_eq!(
        s.must(
            "rollstat_series_refused_total",
            &[("reason", "label_collision")]
        ),
        2.0
    );
    assert_eq!(s.must("rep_total", &[("k", "1")]), 1.0);
    assert_eq!(s.must("clash_total", &[("content_type", "a")]), 1.0);
    // The other tag that became `content_type` is counted, not lost silently.
    assert_eq!(s.must("rollstat_series_tags_dropped_total", &[]), 1.0);
}

#[test]
fn no_series_appears_twice_in_a_scrape() {
    let (d, _) = daemon_with_every_type();
    for (what, text) in [
        ("text", d.get("/metrics", &[]).text()),
        (
            "OpenMetrics",
            d.get(
                "/metrics",
                &[("Accept", "application/openmetrics-text; version=1.0.0")],
            )
            .text(),
        ),
    ] {
        // As Prometheus identifies series: an empty label value is no label.
        let dups = Scrape::parse(&text).duplicates();
        assert!(dups.is_empty(), "{what}: {dups:#?}\n{text}");
    }
}

#[test]
fn openmetrics_is_served_when_asked_and_ends_with_eof() {
    let (d, _) = daemon_with_every_type();
    let r = d.get(
        "/metrics",
        &[("Accept", "application/openmetrics-text; version=1.0.0")],
    );
    assert_eq!(r.status, 200);
    let ct = r.header("content-type").unwrap_or_default();
    assert!(
        ct.starts_with("application/openmetrics-text; version=1.0.0"),
        "{ct}"
    );
    let text = r.text();
    assert!(text.ends_with("# EOF\n"), "no final # EOF:\n{text}");
    assert_eq!(text.matches("# EOF").count(), 1);
    let om = Scrape::parse(&text);
    // Counter families are named without `_total`; their samples keep it.
    let counters: Vec<&String> = om
        .types
        .iter()
        .filter(|(_, t)| t == "counter")
        .map(|(n, _)| n)
        .collect();
    assert!(counters.iter().any(|n| *n == "shop_orders"), "{counters:?}");
    for n in &counters {
        assert!(!n.ends_with("_total"), "OpenMetrics counter family {n}");
    }
    // Same samples as the classic rendering, plus OpenMetrics' `_created`
    // for each counter and histogram series.
    let plain = d.scrape();
    let keys = |s: &Scrape| -> BTreeSet<(String, String)> {
        s.samples
            .iter()
            .filter(|x| !x.name.ends_with("_created"))
            .map(|x| (x.name.clone(), format!("{:?}", x.labels)))
            .collect()
    };
    assert_eq!(keys(&om), keys(&plain));
    assert!(
        om.value("shop_orders_created", &[("code", "200"), ("route", "/buy")])
            .is_some(),
        "no _created for shop_orders"
    );
    assert_eq!(
        om.must("shop_orders_total", &[("code", "200"), ("route", "/buy")]),
        5.0
    );
}

#[test]
fn gzip_is_served_when_asked_and_unzips_to_the_plain_scrape() {
    let (d, _) = daemon_with_every_type();
    let r = d.get("/metrics", &[("Accept-Encoding", "gzip")]);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-encoding"),
        Some("gzip"),
        "{:?}",
        r.headers
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(&r.body[..])
        .read_to_string(&mut text)
        .expect("a gzip body");
    let unzipped = Scrape::parse(&text);
    let plain = d.scrape();
    assert_eq!(unzipped.types, plain.types);
    let keys = |s: &Scrape| -> Vec<(String, String)> {
        s.samples
            .iter()
            .map(|x| (x.name.clone(), format!("{:?}", x.labels)))
            .collect()
    };
    assert_eq!(keys(&unzipped), keys(&plain));
    // Values that do not move between scrapes are equal too.
    assert_eq!(
        unzipped.must("shop_payload_sum", &[]),
        plain.must("shop_payload_sum", &[])
    );
    // Without the header, no compression.
    assert_eq!(d.get("/metrics", &[]).header("content-encoding"), None);
}

#[test]
fn the_series_api_filters_by_glob_and_rejects_a_bad_one() {
    let (d, _) = daemon_with_every_type();
    let names = |glob: &str| -> Vec<String> {
        d.series(glob)
            .as_array()
            .expect("an array")
            .iter()
            .map(|x| x["metric"].as_str().unwrap().to_string())
            .collect()
    };
    let shop = names("shop.*");
    assert!(shop.contains(&"shop.orders".to_string()), "{shop:?}");
    assert!(shop.iter().all(|n| n.starts_with("shop.")), "{shop:?}");
    assert_eq!(names("shop.lat*"), ["shop.latency"]);
    assert!(names("nothing.*").is_empty());
    let all = d.series("**");
    let orders = all
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["metric"] == "shop.orders")
        .expect("shop.orders");
    // 1, then 2 @0.5 (weight 2).
    assert_eq!(orders["windows"]["5s"]["samples"], 3.0);
    assert_eq!(orders["windows"]["5s"]["sum"], 5.0);
    assert_eq!(orders["labels"]["route"], "/buy");
    // Not shared through Redis: no fleet view.
    assert!(orders["windows"]["5s"].get("fleet").is_none(), "{orders}");
    // The names alone, for a metric picker: one entry per name.
    let list = d.get("/api/v1/metrics", &[]).json();
    let metrics = list["metrics"].as_array().unwrap();
    let entry = |m: &str| metrics.iter().find(|x| x["metric"] == m).cloned();
    assert_eq!(
        entry("shop.orders"),
        Some(serde_json::json!({"metric": "shop.orders", "type": "counter", "series": 1}))
    );
    // Tag order does not make a second series.
    assert_eq!(entry("ord").map(|e| e["series"].clone()), Some(1.into()));
    assert_eq!(
        entry("shop.users").map(|e| e["type"].clone()),
        Some("set".into())
    );
    assert_eq!(
        metrics.len(),
        names("**").iter().collect::<BTreeSet<_>>().len()
    );
    assert_eq!(list["windows"], serde_json::json!(["2s", "5s"]));
    let bad = d.get("/api/v1/series?match=a***", &[]);
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(bad.json()["error"].as_str().unwrap().contains("glob"));
}

/// More scrapes at once than the daemon renders get 503 with Retry-After,
/// each counted; the others get the whole exposition.
#[test]
fn scrapes_beyond_the_concurrency_cap_get_503_and_are_counted() {
    let d = Daemon::start();
    // Enough series that a render takes a while (a debug build here).
    const SERIES: usize = 20_000;
    d.create_counters("cap", SERIES);
    let statuses: Vec<(u16, Option<String>, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|_| {
                s.spawn(|| {
                    let r = d.get("/metrics", &[]);
                    let retry = r.header("retry-after").map(str::to_string);
                    (r.status, retry, r.body.len())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let rejected = statuses.iter().filter(|(st, _, _)| *st == 503).count();
    assert!(
        rejected > 0,
        "16 scrapes at once, none rejected: {statuses:?}"
    );
    for (status, retry, len) in &statuses {
        match status {
            200 => assert!(*len > SERIES * 100, "a whole exposition: {len} bytes"),
            503 => assert_eq!(retry.as_deref(), Some("1")),
            other => panic!("status {other}"),
        }
    }
    let s = d.scrape();
    assert_eq!(
        s.must("rollstat_scrapes_rejected_total", &[]),
        rejected as f64
    );
}
