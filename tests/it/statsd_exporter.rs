//! A statsd_exporter shop's mapping file, as it is. The same
//! statsd lines go to a daemon that reads the YAML file and to one that
//! reads what `rollstat convert-mapping` made of it; both publish the
//! series statsd_exporter documents for them, sample for sample. Then
//! check-config names a bad file's line, and a reload reads the file again.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use crate::support::{run, Daemon, TempDir, TEST_CONFIG};

const MAPPING: &str = r#"# A statsd_exporter mapping file, with the docs' own examples (docs/statsd-exporter.md).
defaults:
  observer_type: histogram
  ttl: 1h
mappings:
- match: "(.*)\\.(.*)--(.*)\\.status\\.(.*)\\.count"
  match_type: regex
  name: "request_total"
  labels:
    hostname: "$1"
    exec: "$2"
    protocol: "$3"
    code: "$4"
- match: test.dispatcher.*.*.*
  name: "dispatcher_events_total"
  labels:
    processor: "$1"
    action: "$2"
    outcome: "$3"
    job: "test_dispatcher"
- match: "*.signup.*.*"
  name: "signup_events_total"
  honor_labels: true
  labels:
    provider: "$2"
    outcome: "$3"
    job: "${1}_server"
- match: test.timing.*.*.*
  match_metric_type: observer
  name: "my_timer"
  histogram_options:
    buckets: [0.05, 0.5, 5]
  labels:
    provider: "$2"
    outcome: "$3"
- match: debug.*
  name: "dropped"
  action: drop
- match: upload.*
  name: "upload_bytes"
  scale: 1024
  help: "Uploaded sizes, in bytes"
  histogram_options:
    buckets: [1000, 1000000]
"#;

/// What the clients send: one datagram of statsd lines.
const LINES: &str = "test.dispatcher.FooProcessor.send.success:1|c\n\
test.dispatcher.FooProcessor.send.success:2|c\n\
foo_product.signup.facebook.failure:1|c\n\
bar_product.signup.google.success:1|c|#job:from_tag\n\
test.timing.a.aws.ok:320|ms\n\
test.timing.a.aws.ok:30|ms\n\
xyz.web1.exec--http.status.500.count:4|c\n\
debug.noise:1|c\n\
upload.avatar:2|h\n\
plain.counter:5|c\n";

/// The cumulative samples of the mapped and unmapped families above, by
/// their text (name and labels).
fn families(d: &Daemon) -> BTreeMap<String, f64> {
    let text = d.get("/metrics", &[]).text();
    text.lines()
        .filter(|l| {
            [
                "request_total",
                "dispatcher_events_total",
                "signup_events_total",
                "my_timer_",
                "plain_counter_total",
                "dropped",
                "upload_bytes",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .filter_map(|l| {
            let (series, v) = l.rsplit_once(' ')?;
            Some((series.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn rollstat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rollstat"))
}

#[test]
fn a_mapping_file_and_its_conversion_publish_the_series_statsd_exporter_documents() {
    let dir = TempDir::new("se-mapping");
    let file = dir.path().join("mapping.yml");
    std::fs::write(&file, MAPPING).unwrap();
    let yaml = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[statsd_exporter]\nmapping_file = \"{}\"\n",
        file.display()
    ));
    // Ten lines, nine accepted (the drop rule takes one).
    yaml.send_udp(LINES.as_bytes());
    yaml.wait_lines("udp", 9.0, Duration::from_secs(10));
    let got = families(&yaml);
    let want = [
        (
            r#"dispatcher_events_total{action="send",job="test_dispatcher",outcome="success",processor="FooProcessor"}"#,
            3.0,
        ),
        (
            r#"signup_events_total{job="foo_product_server",outcome="failure",provider="facebook"}"#,
            1.0,
        ),
        // honor_labels: the tag's `job` wins over the rule's.
        (
            r#"signup_events_total{job="from_tag",outcome="success",provider="google"}"#,
            1.0,
        ),
        // The regex matches inside the name, as Go's regexp does.
        (
            r#"request_total{code="500",exec="exec",hostname="xyz.web1",protocol="http"}"#,
            4.0,
        ),
        // A timer in seconds, on the rule's own buckets.
        (
            r#"my_timer_bucket{outcome="ok",provider="aws",le="0.05"}"#,
            1.0,
        ),
        (
            r#"my_timer_bucket{outcome="ok",provider="aws",le="0.5"}"#,
            2.0,
        ),
        (
            r#"my_timer_bucket{outcome="ok",provider="aws",le="5"}"#,
            2.0,
        ),
        (
            r#"my_timer_bucket{outcome="ok",provider="aws",le="+Inf"}"#,
            2.0,
        ),
        (r#"my_timer_sum{outcome="ok",provider="aws"}"#, 0.35),
        (r#"my_timer_count{outcome="ok",provider="aws"}"#, 2.0),
        // scale: 2 KiB in bytes, on the rule's buckets.
        (r#"upload_bytes_bucket{le="1000"}"#, 0.0),
        (r#"upload_bytes_bucket{le="1000000"}"#, 1.0),
        (r#"upload_bytes_bucket{le="+Inf"}"#, 1.0),
        (r#"upload_bytes_sum"#, 2048.0),
        (r#"upload_bytes_count"#, 1.0),
        // Unmapped: the name sanitised.
        ("plain_counter_total", 5.0),
    ];
    for (series, v) in want {
        let g = got.get(series).copied();
        assert!(
            g.is_some_and(|g| (g - v).abs() < 1e-9),
            "{series}: want {v}, got {g:?}; all: {got:#?}"
        );
    }
    assert_eq!(
        got.len(),
        want.len(),
        "no other samples (the drop rule's line is gone): {got:#?}"
    );
    assert_eq!(
        yaml.scrape()
            .value("rollstat_ingest_dropped_by_mapping_total", &[]),
        Some(1.0),
        "the drop rule's line is counted"
    );

    // help: the family's HELP text.
    assert!(
        families_text(&yaml).contains("# HELP upload_bytes Uploaded sizes, in bytes\n"),
        "{}",
        families_text(&yaml)
    );

    // The same file through convert-mapping, loaded as config.toml rules.
    let out = run(
        rollstat().arg("convert-mapping").arg(&file),
        b"",
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{}", out.stderr);
    assert!(out.stdout.contains("[[mappings]]"), "{}", out.stdout);
    let converted = Daemon::start_with(&format!("{TEST_CONFIG}\n{}", out.stdout));
    converted.send_udp(LINES.as_bytes());
    converted.wait_lines("udp", 9.0, Duration::from_secs(10));
    assert_eq!(
        families(&converted),
        got,
        "convert-mapping's rules publish the same samples"
    );

    // A reload reads the file again: the dispatcher rule renamed.
    std::fs::write(
        &file,
        MAPPING.replace("dispatcher_events_total", "dispatched_total"),
    )
    .unwrap();
    yaml.signal("HUP");
    crate::support::wait_true(Duration::from_secs(10), "the reloaded rule", || {
        yaml.send_udp(b"test.dispatcher.Bar.send.success:1|c");
        families_text(&yaml).contains("dispatched_total{action=\"send\"")
    });
}

fn families_text(d: &Daemon) -> String {
    d.get("/metrics", &[]).text()
}

#[test]
fn check_config_names_the_mapping_files_line_and_key() {
    let dir = TempDir::new("se-bad");
    let file = dir.path().join("mapping.yml");
    std::fs::write(
        &file,
        "mappings:\n- match: a.*\n  name: a\n  observer_type: histogram\n  summary_options:\n    max_age: 1m\n- match: b.*\n  name: b\n  colour: blue\n",
    )
    .unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!("[statsd_exporter]\nmapping_file = \"{}\"\n", file.display()),
    )
    .unwrap();
    let out = run(
        rollstat().arg("check-config").arg(&cfg),
        b"",
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2), "{}{}", out.stdout, out.stderr);
    let f = file.display().to_string();
    for want in [
        format!("{f}:5: `mappings[0].summary_options`: cannot use histogram observer and summary options"),
        format!("{f}:9: `mappings[1].colour`: unknown key"),
    ] {
        assert!(out.stderr.contains(&want), "{want} in\n{}", out.stderr);
    }
    assert!(
        out.stderr.contains("statsd_exporter.mapping_file"),
        "{}",
        out.stderr
    );
    // convert-mapping reports the same problems and prints no rules.
    let out = run(
        rollstat().arg("convert-mapping").arg(&file),
        b"",
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(out.stderr.contains(&format!("{f}:5:")), "{}", out.stderr);

    // A good file: check-config says how many rules it read (the rule, and
    // the defaults' rule for unmapped names), with no warning: its
    // summaries are kept as statsd_exporter keeps them.
    std::fs::write(&file, "mappings:\n- match: a.*\n  name: a\n").unwrap();
    let out = run(
        rollstat().arg("check-config").arg(&cfg),
        b"",
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("2 rule(s)"), "{}", out.stdout);
    assert!(!out.stderr.contains("summaries"), "{}", out.stderr);
}

#[test]
fn statsd_exporter_names_serve_unmapped_counters_as_the_exporter_does() {
    let d = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[statsd_exporter]\ncumulative_names = \"statsd_exporter\"\n"
    ));
    d.send_udp(
        b"api.hits:3|c|#content--type:json\nx.requests_total:2|c\nq--depth:7|g\n9lives:1|c\n",
    );
    d.wait_lines("udp", 4.0, Duration::from_secs(10));
    let text = families_text(&d);
    for want in [
        // A counter under its own name, typed counter, as statsd_exporter
        // serves it in the text format (no `_total` added).
        "# TYPE api_hits counter\n",
        "api_hits{content_type=\"json\"} 3\n",
        // A name ending in `_total` is the sample's name.
        "# TYPE x_requests_total counter\n",
        "x_requests_total 2\n",
        // `--` becomes one `_`; a leading digit gets `_`.
        "q_depth 7\n",
        "_9lives 1\n",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
    // OpenMetrics cannot type a counter without `_total`: it goes out as
    // `unknown` under the same name, so Prometheus stores the same series
    // whichever format it negotiates.
    let om = d
        .get(
            "/metrics",
            &[("Accept", "application/openmetrics-text; version=1.0.0")],
        )
        .text();
    for want in [
        "# TYPE api_hits unknown\n",
        "api_hits{content_type=\"json\"} 3\n",
        "# TYPE x_requests counter\n",
        "x_requests_total 2\n",
    ] {
        assert!(om.contains(want), "{want:?} in\n{om}");
    }
    assert!(om.ends_with("# EOF\n"));
    assert!(!om.contains("api_hits_created"), "{om}");
    // promtool reads it; its only remarks are the lint statsd_exporter's
    // own output gets (counters without `_total`).
    let promtool = crate::support::require_tool("promtool");
    let out = run(
        Command::new(promtool).args(["check", "metrics"]),
        text.as_bytes(),
        Duration::from_secs(30),
    );
    let remarks: Vec<&str> = out
        .stdout
        .lines()
        .chain(out.stderr.lines())
        .filter(|l| !l.contains("counter metrics should have \"_total\" suffix"))
        .collect();
    assert!(remarks.is_empty(), "{remarks:?}");
}

#[test]
fn timers_are_summaries_when_the_file_says_nothing_as_in_statsd_exporter() {
    let dir = TempDir::new("se-summary");
    let file = dir.path().join("mapping.yml");
    std::fs::write(
        &file,
        "mappings:\n- match: api.*.latency\n  name: api_latency_seconds\n  labels:\n    endpoint: $1\n  summary_options:\n    quantiles:\n    - quantile: 0.5\n      error: 0.05\n    - quantile: 0.99\n      error: 0.001\n",
    )
    .unwrap();
    let d = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[statsd_exporter]\nmapping_file = \"{}\"\n",
        file.display()
    ));
    // 1..=100 ms on a mapped timer, 10 ms x 3 on an unmapped one.
    let mut lines: String = (1..=100)
        .map(|ms| format!("api.users.latency:{ms}|ms\n"))
        .collect();
    lines.push_str("db.query:10|ms\ndb.query:10|ms\ndb.query:10|ms\n");
    for part in lines.lines().collect::<Vec<_>>().chunks(20) {
        d.send_udp(part.join("\n").as_bytes());
    }
    d.wait_lines("udp", 103.0, Duration::from_secs(10));
    let text = families_text(&d);
    let value = |series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{series} in\n{text}"))
    };
    assert!(
        text.contains("# TYPE api_latency_seconds summary\n"),
        "{text}"
    );
    // DDSketch: within 1% of the true quantile (0.050 s and 0.099 s).
    let p50 = value(r#"api_latency_seconds{endpoint="users",quantile="0.5"}"#);
    let p99 = value(r#"api_latency_seconds{endpoint="users",quantile="0.99"}"#);
    assert!((p50 - 0.050).abs() <= 0.0011, "p50 {p50}");
    assert!((p99 - 0.099).abs() <= 0.0021, "p99 {p99}");
    assert!((value(r#"api_latency_seconds_sum{endpoint="users"}"#) - 5.05).abs() < 1e-9);
    assert_eq!(
        value(r#"api_latency_seconds_count{endpoint="users"}"#),
        100.0
    );
    assert!(!text.contains("api_latency_seconds_bucket"), "{text}");
    // Unmapped: a summary with statsd_exporter's default quantiles.
    assert!(text.contains("# TYPE db_query summary\n"), "{text}");
    for q in ["0.5", "0.9", "0.99"] {
        let v = value(&format!("db_query{{quantile=\"{q}\"}}"));
        assert!((v - 0.010).abs() <= 0.0001, "{q}: {v}");
    }
    assert_eq!(value("db_query_count"), 3.0);
    // promtool reads it as it reads statsd_exporter's.
    let promtool = crate::support::require_tool("promtool");
    let out = run(
        Command::new(promtool).args(["check", "metrics"]),
        text.as_bytes(),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
    // OpenMetrics: the same summary, with `_created`.
    let om = d
        .get(
            "/metrics",
            &[("Accept", "application/openmetrics-text; version=1.0.0")],
        )
        .text();
    assert!(om.contains("# TYPE api_latency_seconds summary\n"), "{om}");
    assert!(
        om.contains("api_latency_seconds_created{endpoint=\"users\"}"),
        "{om}"
    );
}
