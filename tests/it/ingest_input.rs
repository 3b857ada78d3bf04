//! A JSON ingest body is read
//! sample by sample, media types are matched exactly and without case, and
//! bad lines reach the log escaped.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::{http, wait_true, Daemon, Scrape};

fn rejected(s: &Scrape) -> BTreeMap<String, f64> {
    s.by_label("rollstat_ingest_rejected_lines_total", "reason")
}

/// The `reason` of each listed error, by index.
fn reasons_by_index(j: &serde_json::Value) -> Vec<(u64, String)> {
    j["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors list in {j}"))
        .iter()
        .map(|e| {
            (
                e["index"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("no index in {e}")),
                e["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_json_body_with_bad_samples_applies_the_good_ones_and_counts_each_bad_one() {
    let d = Daemon::start();
    let body = br#"[
        {"name":"ji.a","type":"counter","value":2},
        {"name":"ji.bad_type","type":"nope","value":1},
        {"name":"ji.g","type":"gauge","value":7},
        {"name":"ji.bool","type":"c","value":true},
        {"name":"ji.huge","type":"g","value":1e400},
        17,
        {"name":"ji|pipe","type":"c","value":1},
        {"name":"ji.rate","type":"c","value":1,"sample_rate":2},
        {"name":"ji.u","type":"set","value":"alice","tags":{"k":"v"}}
    ]"#;
    let r = d.post("/api/v1/ingest", "application/json", body);
    assert_eq!(r.status, 400, "some samples are bad: {}", r.text());
    let j = r.json();
    assert_eq!(j["accepted"], 3, "{j}");
    assert_eq!(j["rejected"], 6, "{j}");
    assert_eq!(j["refused"], 0, "{j}");
    assert_eq!(j["reason"], "unknown_type", "the first bad sample's: {j}");
    assert_eq!(
        reasons_by_index(&j),
        [
            (1, "unknown_type".to_string()),
            (3, "bad_json_sample".to_string()),
            (4, "non_finite_value".to_string()),
            (5, "bad_json_sample".to_string()),
            (6, "reserved_character".to_string()),
            (7, "invalid_sample_rate".to_string()),
        ],
        "{j}"
    );
    let messages: Vec<&str> = j["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert!(
        messages[0].contains("index 1") && messages[0].contains("`nope`"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("number or a string, not a boolean"),
        "{messages:?}"
    );
    assert!(
        messages[2].contains("`ji.huge`") && messages[2].contains("infinite"),
        "{messages:?}"
    );
    assert!(
        messages[3].contains("a number is not a sample"),
        "{messages:?}"
    );
    assert!(messages[5].contains("`sample_rate`"), "{messages:?}");
    let e = j["error"].as_str().unwrap();
    assert!(e.contains("6 of 9 samples rejected"), "{e}");

    let s = d.scrape();
    assert_eq!(s.must("ji_a_total", &[]), 2.0);
    assert_eq!(s.must("ji_g", &[]), 7.0);
    assert_eq!(
        s.must(
            "rollstat_window_unique",
            &[("metric", "ji.u"), ("window", "5s"), ("k", "v")]
        ),
        1.0
    );
    assert_eq!(
        s.must("rollstat_ingest_lines_total", &[("transport", "http")]),
        3.0
    );
    let rej = rejected(&s);
    for (reason, n) in [
        ("unknown_type", 1.0),
        ("bad_json_sample", 2.0),
        ("non_finite_value", 1.0),
        ("reserved_character", 1.0),
        ("invalid_sample_rate", 1.0),
    ] {
        assert_eq!(rej.get(reason), Some(&n), "{reason}: {rej:?}");
    }
    assert_eq!(s.sum("rollstat_ingest_rejected_lines_total"), 6.0);
}

#[test]
fn a_json_body_of_many_bad_samples_lists_the_first_hundred_and_counts_them_all() {
    let d = Daemon::start();
    // 1000 bad samples and a good one, under the test config's 4096 bytes.
    let mut body = "[".to_string() + &"1,".repeat(1000);
    body.push_str(r#"{"name":"ji.last","type":"c","value":1}]"#);
    let r = d.post("/api/v1/ingest", "application/json", body.as_bytes());
    assert_eq!(r.status, 400, "{}", r.text());
    let j = r.json();
    assert_eq!(j["rejected"], 1000, "{j}");
    assert_eq!(j["accepted"], 1, "{j}");
    let listed = reasons_by_index(&j);
    assert_eq!(listed.len(), 100, "{j}");
    assert_eq!(listed[0], (0, "bad_json_sample".to_string()));
    assert_eq!(listed[99].0, 99);
    assert!(r.body.len() < 32 * 1024, "{} bytes", r.body.len());
    let s = d.scrape();
    assert_eq!(s.must("ji_last_total", &[]), 1.0);
    assert_eq!(rejected(&s)["bad_json_sample"], 1000.0);
}

#[test]
fn a_body_that_is_not_a_json_array_is_refused_whole() {
    let d = Daemon::start();
    for body in [
        &br#"{"name":"ji.obj","type":"c","value":1}"#[..],
        b"[{\"name\":\"ji.cut\",\"type\":\"c\",\"value\":1},",
        b"ji.text:1|c",
    ] {
        let r = d.post("/api/v1/ingest", "application/json", body);
        assert_eq!(r.status, 400, "{}", r.text());
        let e = r.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(
            e.contains("not a JSON array") && e.contains("expected an array of samples"),
            "{e}"
        );
    }
    let s = d.scrape();
    assert_eq!(s.value("ji_obj_total", &[]), None);
    assert_eq!(s.value("ji_cut_total", &[]), None);
    assert_eq!(s.sum("rollstat_ingest_rejected_lines_total"), 0.0);
}

#[test]
fn json_is_recognised_whatever_the_case_of_its_media_type_and_its_parameters() {
    let d = Daemon::start();
    for (i, ct) in [
        "Application/JSON",
        "application/json; charset=utf-8",
        "APPLICATION/json;charset=UTF-8",
    ]
    .into_iter()
    .enumerate()
    {
        let body = format!(r#"[{{"name":"ji.case{i}","type":"counter","value":3}}]"#);
        let r = d.post("/api/v1/ingest", ct, body.as_bytes());
        assert_eq!(r.status, 200, "{ct}: {}", r.text());
        assert_eq!(r.json()["accepted"], 1, "{ct}");
        assert_eq!(
            d.scrape().must(&format!("ji_case{i}_total"), &[]),
            3.0,
            "{ct}"
        );
    }
}

#[test]
fn an_unknown_media_type_is_415_naming_the_accepted_ones_and_is_counted() {
    let d = Daemon::start();
    for ct in ["application/jsonx", "text/html", "application/octet-stream"] {
        let r = d.post(
            "/api/v1/ingest",
            ct,
            br#"[{"name":"ji.x","type":"c","value":1}]"#,
        );
        assert_eq!(r.status, 415, "{ct}: {}", r.text());
        let e = r.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(
            e.contains(ct) && e.contains("text/plain") && e.contains("application/json"),
            "{e}"
        );
    }
    let s = d.scrape();
    assert_eq!(
        s.must(
            "rollstat_http_requests_refused_total",
            &[("reason", "unsupported_media_type")]
        ),
        3.0
    );
    assert_eq!(s.value("ji_x_total", &[]), None);
    assert_eq!(s.sum("rollstat_ingest_rejected_lines_total"), 0.0);

    // What curl -d sends, and no Content-Type at all: statsd lines.
    let r = d.post(
        "/api/v1/ingest",
        "application/x-www-form-urlencoded",
        b"ji.curl:1|c\nji.curl:1|c\n",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = http(d.http, "POST", "/api/v1/ingest", &[], b"ji.curl:1|c\n");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(d.scrape().must("ji_curl_total", &[]), 3.0);
}

#[test]
fn a_text_body_lists_every_bad_line_with_its_reason() {
    let d = Daemon::start();
    let r = d.post(
        "/api/v1/ingest",
        "text/plain",
        b"jt.a:1|c\nnonsense\njt.b:x|c\njt.c:2|c\n",
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let j = r.json();
    assert_eq!(
        (j["accepted"].as_u64(), j["rejected"].as_u64()),
        (Some(2), Some(2)),
        "{j}"
    );
    assert_eq!(j["first_bad_line"], 2, "{j}");
    let errors = j["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{j}");
    assert_eq!(
        (errors[0]["line"].as_u64(), errors[0]["reason"].as_str()),
        (Some(2), Some("malformed_line"))
    );
    assert_eq!(
        (errors[1]["line"].as_u64(), errors[1]["reason"].as_str()),
        (Some(3), Some("malformed_value"))
    );
    assert_eq!(d.scrape().must("jt_c_total", &[]), 2.0);
}

#[test]
fn a_bad_line_reaches_the_log_escaped_never_as_raw_control_bytes() {
    let d = Daemon::start();
    // A carriage return that would rewrite the log line, a forged entry
    // after it, a clear-screen sequence, a one-byte CSI (C1), DEL and a
    // byte that is not UTF-8: all in the name, so the line is rejected and
    // logged.
    let forged: &[u8] = b"evil\r2030-01-01T00:00:00.000000Z  INFO rollstat: all clear\x1b[2J\xc2\x9b31m\x7f\xff:1|c\ngood.line:1|c\n";
    d.send_udp(forged);
    wait_true(Duration::from_secs(10), "the bad line in the log", || {
        String::from_utf8_lossy(&d.log_bytes()).contains("Rejected a statsd line")
    });
    let log = d.log_bytes();
    let raw: Vec<(usize, u8)> = log
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, b)| (b < 0x20 && b != b'\n') || b == 0x7f)
        .collect();
    assert!(
        raw.is_empty(),
        "raw control bytes {raw:?} in the log:\n{}",
        String::from_utf8_lossy(&log)
    );
    let text = String::from_utf8(log).expect("the log is UTF-8: invalid bytes are shown escaped");
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "a C1 control in the log:\n{text}"
    );
    assert!(
        text.contains(r"evil\r2030-01-01T00:00:00.000000Z  INFO rollstat: all clear\x1b[2J\u{9b}31m\x7f\xff:1|c"),
        "the line is shown escaped:\n{text}"
    );
    // The forged entry is inside the real one, never a line of its own.
    assert!(
        !text.lines().any(|l| l.starts_with("2030-")),
        "a forged log line:\n{text}"
    );
    let s = d.wait_lines("udp", 1.0, Duration::from_secs(10));
    assert_eq!(s.sum("rollstat_ingest_rejected_lines_total"), 1.0);
}
