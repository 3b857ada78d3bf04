//! Hostile input on every transport: each bad line is counted under its
//! reason, and good lines beside it are still applied.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use crate::support::{wait_for, Daemon, Scrape};

/// One datagram and what it must do: lines accepted, rejections by reason,
/// skipped lines by kind.
struct Case {
    what: &'static str,
    datagram: Vec<u8>,
    accepted: f64,
    rejected: &'static [(&'static str, f64)],
    skipped: &'static [(&'static str, f64)],
}

fn case(
    what: &'static str,
    datagram: impl Into<Vec<u8>>,
    accepted: f64,
    rejected: &'static [(&'static str, f64)],
) -> Case {
    Case {
        what,
        datagram: datagram.into(),
        accepted,
        rejected,
        skipped: &[],
    }
}

fn cases() -> Vec<Case> {
    let long_name = format!("{}:1|c", "n".repeat(300));
    let long_tag = format!("x:1|c|#k:{}", "v".repeat(300));
    let many_tags = format!(
        "x:1|c|#{}",
        (0..65)
            .map(|i| format!("t{i}:v"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let many_values = format!("x:{}|d", vec!["1"; 1025].join(":"));
    vec![
        case(
            "good lines around a bad one",
            "good.a:1|c\nbad line\ngood.b:2|c",
            2.0,
            &[("malformed_line", 1.0)],
        ),
        case(
            "rate zero",
            "x:1|c|@0",
            0.0,
            &[("invalid_sample_rate", 1.0)],
        ),
        case(
            "rate above one",
            "x:1|c|@2\nx:1|c|@0.5",
            1.0,
            &[("invalid_sample_rate", 1.0)],
        ),
        case(
            "rate not a number",
            "x:1|c|@abc",
            0.0,
            &[("invalid_sample_rate", 1.0)],
        ),
        case(
            "value not a number",
            "x:abc|c",
            0.0,
            &[("malformed_value", 1.0)],
        ),
        case(
            "unknown type",
            "x:1|zz\nx:1|c:2|ms",
            0.0,
            &[("unknown_type", 2.0)],
        ),
        case("missing type", "x:1", 0.0, &[("missing_type", 1.0)]),
        case("missing value", "x:|c", 0.0, &[("missing_value", 1.0)]),
        case("empty name", ":1|c", 0.0, &[("empty_name", 1.0)]),
        case(
            "infinite and NaN values",
            "x:1e999|c\nx:NaN|g\nx:inf|ms",
            0.0,
            &[("non_finite_value", 3.0)],
        ),
        case(
            "several values on a gauge",
            "g:1:2|g",
            0.0,
            &[("multi_value_gauge", 1.0)],
        ),
        case(
            "tag with an empty key",
            "x:1|c|#:v",
            0.0,
            &[("malformed_tag", 1.0)],
        ),
        case(
            "name-embedded tag without =",
            "x,k:1|c",
            0.0,
            &[("malformed_tag", 1.0)],
        ),
        case("name too long", long_name, 0.0, &[("name_too_long", 1.0)]),
        case(
            "tag value too long",
            long_tag,
            0.0,
            &[("tag_too_long", 1.0)],
        ),
        case("65 tags", many_tags, 0.0, &[("too_many_tags", 1.0)]),
        case(
            "1025 packed values",
            many_values,
            0.0,
            &[("too_many_values", 1.0)],
        ),
        case(
            "repeated rate",
            "x:1|c|@0.5|@0.5",
            0.0,
            &[("duplicate_field", 1.0)],
        ),
        case(
            "timestamp not digits",
            "x:1|c|Tsoon",
            0.0,
            &[("malformed_timestamp", 1.0)],
        ),
        case(
            "invalid UTF-8",
            &b"x\xff:1|c\nok:1|c"[..],
            1.0,
            &[("invalid_utf8", 1.0)],
        ),
        case(
            "control character in the name",
            "a\x01b:1|c",
            0.0,
            &[("invalid_name", 1.0)],
        ),
        case("blank lines only", "\n\n \r\n", 0.0, &[]),
        case(
            "CRLF, unknown fields, packed values, meter type",
            "a:1|c|c:abc123|card:low\r\nb:1:2:3|d\r\nm:3|m",
            3.0,
            &[],
        ),
        Case {
            what: "events and service checks are skipped, not rejected",
            datagram: b"_e{6,2}:deploy|ok|#a:b\n_sc|db.up|0\nok:1|c".to_vec(),
            accepted: 1.0,
            rejected: &[],
            skipped: &[("event", 1.0), ("service_check", 1.0)],
        },
    ]
}

fn rejected(s: &Scrape) -> BTreeMap<String, f64> {
    s.by_label("rollstat_ingest_rejected_lines_total", "reason")
}

fn delta(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, d)| *d != 0.0)
        .collect()
}

/// What one datagram did, as counter deltas.
#[derive(Debug, PartialEq)]
struct Outcome {
    packets: f64,
    accepted: f64,
    rejected: BTreeMap<String, f64>,
    skipped: BTreeMap<String, f64>,
}

impl Outcome {
    fn between(before: &Scrape, after: &Scrape) -> Outcome {
        let udp = |s: &Scrape, name: &str| s.must(name, &[("transport", "udp")]);
        let skipped = |s: &Scrape| s.by_label("rollstat_ingest_skipped_lines_total", "kind");
        Outcome {
            packets: udp(after, "rollstat_ingest_packets_total")
                - udp(before, "rollstat_ingest_packets_total"),
            accepted: udp(after, "rollstat_ingest_lines_total")
                - udp(before, "rollstat_ingest_lines_total"),
            rejected: delta(&rejected(after), &rejected(before)),
            skipped: delta(&skipped(after), &skipped(before)),
        }
    }
}

fn as_map(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn every_malformed_datagram_is_counted_under_its_reason_and_good_lines_survive() {
    let d = Daemon::start();
    let mut before = d.scrape();
    // Every reason the parser can give, the two of JSON ingest samples
    // and the eight of OTLP data points, is registered at 0 from the start.
    assert_eq!(rejected(&before).len(), 31, "{:?}", rejected(&before));
    for (i, c) in cases().iter().enumerate() {
        d.send_udp(&c.datagram);
        // Lines, rejections and skips are separate counters flushed one
        // after another: wait for the whole expected outcome.
        let want = Outcome {
            packets: 1.0,
            accepted: c.accepted,
            rejected: as_map(c.rejected),
            skipped: as_map(c.skipped),
        };
        let mut after = None;
        wait_for(Duration::from_secs(10), c.what, &want, || {
            let s = d.scrape();
            let o = Outcome::between(&before, &s);
            after = Some(s);
            o
        });
        before = after.expect("scraped");
        assert_eq!(
            before.must("rollstat_ingest_packets_total", &[("transport", "udp")]),
            i as f64 + 1.0
        );
    }
    // The good lines really are in the registry.
    let s = d.scrape();
    assert_eq!(s.must("good_a_total", &[]), 1.0);
    assert_eq!(s.must("good_b_total", &[]), 2.0);
    // "rate above one" kept its good neighbour at weight 2; "invalid UTF-8"
    // and the skip case kept theirs.
    assert_eq!(s.must("x_total", &[]), 2.0);
    assert_eq!(s.must("ok_total", &[]), 2.0);
    assert_eq!(s.must("m_total", &[]), 3.0);
    assert_eq!(s.must("b_count", &[]), 3.0);
}

#[test]
fn http_ingest_names_the_first_bad_line_and_counts_what_it_accepted() {
    let d = Daemon::start();
    let r = d.post(
        "/api/v1/ingest",
        "text/plain",
        b"h.a:1|c\nh.b:2|c\nthis is not statsd\nh.c:x|c\nh.d:4|g\n",
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let j = r.json();
    assert_eq!(j["first_bad_line"], 3, "{j}");
    assert_eq!(j["reason"], "malformed_line", "{j}");
    assert_eq!(j["accepted"], 3, "{j}");
    let s = d.scrape();
    assert_eq!(s.must("h_a_total", &[]), 1.0);
    assert_eq!(s.must("h_d", &[]), 4.0);
    assert_eq!(
        s.must("rollstat_ingest_lines_total", &[("transport", "http")]),
        3.0
    );
    let rej = rejected(&s);
    assert_eq!(rej["malformed_line"], 1.0);
    assert_eq!(rej["malformed_value"], 1.0);

    let ok = d.post("/api/v1/ingest", "text/plain", b"h.a:1|c\nh.a:1|c|@0.25\n");
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.json()["accepted"], 2);
    assert_eq!(d.scrape().must("h_a_total", &[]), 6.0);
}

#[test]
fn http_ingest_takes_json_samples_and_explains_bad_ones() {
    let d = Daemon::start();
    let body =
        br#"[{"name":"j.req","type":"counter","value":2,"sample_rate":0.5,"tags":{"route":"/x"}},
                    {"name":"j.q","type":"g","value":"+3"},
                    {"name":"j.u","type":"set","value":"alice"},
                    {"name":"j.t","type":"timer","value":20}]"#;
    let r = d.post("/api/v1/ingest", "application/json", body);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["accepted"], 4);
    let s = d.scrape();
    assert_eq!(s.must("j_req_total", &[("route", "/x")]), 4.0);
    assert_eq!(s.must("j_q", &[]), 3.0);
    assert_eq!(s.must("j_t_sum", &[]), 0.02);
    for (body, needle) in [
        (
            &br#"[{"name":"j","type":"nope","value":1}]"#[..],
            "sample at index 0",
        ),
        (&br#"{"name":"j"}"#[..], "not a JSON array"),
        (
            &br#"[{"name":"a|b","type":"c","value":1}]"#[..],
            "may not contain",
        ),
        (
            &br#"[{"name":"j","type":"c","value":[1]}]"#[..],
            "number or a string",
        ),
    ] {
        let r = d.post("/api/v1/ingest", "application/json", body);
        assert_eq!(r.status, 400, "{}", r.text());
        let e = r.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(e.contains(needle), "{e:?} should mention {needle:?}");
    }
    // A JSON sample the statsd parser refuses is a 400 naming it by its
    // index in the array.
    let r = d.post(
        "/api/v1/ingest",
        "application/json",
        br#"[{"name":"j.ok","type":"c","value":1},{"name":"j.r","type":"c","value":1,"sample_rate":2}]"#,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["errors"][0]["index"], 1);
    assert_eq!(r.json()["reason"], "invalid_sample_rate");
    assert_eq!(r.json()["accepted"], 1);
}

#[test]
fn an_ingest_body_over_the_limit_gets_413_and_changes_nothing() {
    let d = Daemon::start();
    // The test config allows 4096 bytes.
    let line = b"big.c:1|c\n";
    let body: Vec<u8> = line
        .iter()
        .copied()
        .cycle()
        .take(line.len() * 500)
        .collect();
    let r = d.post("/api/v1/ingest", "text/plain", &body);
    assert_eq!(r.status, 413, "{}", r.text());
    let at_limit: Vec<u8> = line
        .iter()
        .copied()
        .cycle()
        .take(line.len() * 409)
        .collect();
    assert!(at_limit.len() <= 4096);
    let r = d.post("/api/v1/ingest", "text/plain", &at_limit);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(d.scrape().must("big_c_total", &[]), 409.0);
}

/// Waits until TCP shows `lines` accepted and `too_long` framing errors
/// (flushed separately), and returns that scrape.
fn tcp_state(d: &Daemon, lines: f64, too_long: f64) -> Scrape {
    let mut last = None;
    wait_for(
        Duration::from_secs(10),
        "TCP lines and framing errors",
        &(Some(lines), Some(too_long)),
        || {
            let s = d.scrape();
            let got = (
                s.value("rollstat_ingest_lines_total", &[("transport", "tcp")]),
                s.value(
                    "rollstat_ingest_framing_errors_total",
                    &[("reason", "line_too_long")],
                ),
            );
            last = Some(s);
            got
        },
    );
    last.expect("scraped")
}

#[test]
fn an_over_long_tcp_line_is_counted_and_the_next_line_on_the_connection_still_counts() {
    let d = Daemon::start();
    let mut c = TcpStream::connect(d.tcp).expect("connect tcp");
    // max_line_bytes is 1024 in the test config. Send the long line in
    // pieces, then good lines, one of them split across writes.
    let long = format!("long.name:1|c|#k:{}\n", "v".repeat(3000));
    let (a, b) = long.as_bytes().split_at(1500);
    c.write_all(a).unwrap();
    c.flush().unwrap();
    d.wait_scrape(Duration::from_secs(10), "the first TCP read", |s| {
        s.value("rollstat_ingest_packets_total", &[("transport", "tcp")]) >= Some(1.0)
    });
    c.write_all(b).unwrap();
    c.write_all(b"after.long:1|c\nsplit.li").unwrap();
    c.flush().unwrap();
    c.write_all(b"ne:2|c\n").unwrap();
    let s = tcp_state(&d, 2.0, 1.0);
    assert_eq!(s.must("after_long_total", &[]), 1.0);
    assert_eq!(s.must("split_line_total", &[]), 2.0);
    assert_eq!(s.value("long_name_total", &[]), None);

    // A long line arriving in one read with good lines around it.
    let mut burst = b"before.x:1|c\n".to_vec();
    burst.extend_from_slice(long.as_bytes());
    burst.extend_from_slice(b"after.x:1|c\n");
    c.write_all(&burst).unwrap();
    // And the last line needs no newline once the client closes.
    c.write_all(b"last.x:5|c").unwrap();
    drop(c);
    let s = tcp_state(&d, 5.0, 2.0);
    assert_eq!(s.must("before_x_total", &[]), 1.0);
    assert_eq!(s.must("after_x_total", &[]), 1.0);
    assert_eq!(s.must("last_x_total", &[]), 5.0);
}
