//! statsd_exporter mapping files that real shops have, read as they are:
//! labels named like rollstat's own, invalid Go regexes, durations the
//! TOML form must keep exactly, and TTLs shorter than a window. Each test
//! runs the real binary (daemon, check-config, convert-mapping).

use std::process::Command;
use std::time::Duration;

use crate::support::{run, wait_until, Daemon, Prometheus, TempDir, TEST_CONFIG};

fn rollstat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rollstat"))
}

/// `rollstat ARGS...`: its exit code, stdout and stderr.
fn rollstat_run(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = run(rollstat().args(args), b"", Duration::from_secs(20));
    (out.status.code(), out.stdout, out.stderr)
}

/// A config.toml in `dir` loading `mapping` (written as mapping.yml).
fn config_with_mapping(dir: &TempDir, mapping: &str) -> (std::path::PathBuf, String) {
    let file = dir.path().join("mapping.yml");
    std::fs::write(&file, mapping).unwrap();
    let cfg = format!(
        "{TEST_CONFIG}\n[statsd_exporter]\nmapping_file = \"{}\"\n",
        file.display()
    );
    (file, cfg)
}

/// Labels named like the ones rollstat's windowed families, histograms and
/// summaries set themselves.
const RESERVED_LABELS: &str = r#"mappings:
- match: app.*.requests
  name: app_requests_total
  labels:
    metric: "$1"
    window: "w"
- match: lat.*
  observer_type: histogram
  histogram_options:
    buckets: [0.1, 1]
  name: lat_seconds
  labels:
    le: "$1"
- match: sum.*
  name: sum_seconds
  labels:
    quantile: "$1"
"#;

#[test]
fn mapping_labels_named_like_rollstats_own_are_renamed_and_the_target_stays_up() {
    let dir = TempDir::new("se-reserved");
    let (file, cfg) = config_with_mapping(&dir, RESERVED_LABELS);
    let cfg_path = dir.path().join("config.toml");
    std::fs::write(&cfg_path, &cfg).unwrap();
    let d = Daemon::start_with(&cfg);
    d.send_udp(b"app.login.requests:3|c\nlat.fast:200|ms\nsum.x:100|ms\n");
    d.wait_lines("udp", 3.0, Duration::from_secs(10));
    let s = d.scrape();
    assert_eq!(s.duplicates(), Vec::<String>::new());
    assert_eq!(
        s.must(
            "app_requests_total",
            &[("tag_metric", "login"), ("tag_window", "w")]
        ),
        3.0
    );
    assert_eq!(
        s.must(
            "rollstat_window_samples",
            &[
                ("metric", "app_requests_total"),
                ("window", "5s"),
                ("tag_metric", "login"),
                ("tag_window", "w")
            ]
        ),
        1.0
    );
    assert_eq!(
        s.must("lat_seconds_bucket", &[("tag_le", "fast"), ("le", "1")]),
        1.0
    );
    assert_eq!(s.must("sum_seconds_count", &[("tag_quantile", "x")]), 1.0);

    // A real Prometheus takes the target (it drops a scrape with a label
    // name twice) and stores the renamed labels.
    let prom = Prometheus::start(d.http);
    let got = wait_until(
        Duration::from_secs(20),
        "the target up, with the series",
        || {
            let t = prom.target()?;
            if t["health"] != "up" {
                return Err(format!("target: {t}"));
            }
            let v = prom.query(r#"app_requests_total{tag_metric="login"}"#)?;
            let b = prom.query(r#"lat_seconds_bucket{tag_le="fast",le="1"}"#)?;
            let q = prom.query(r#"sum_seconds_count{tag_quantile="x"}"#)?;
            match (v.as_slice(), b.as_slice(), q.as_slice()) {
                ([v], [b], [q]) => Ok((*v, *b, *q)),
                _ => Err(format!("not yet: {v:?} {b:?} {q:?}")),
            }
        },
    );
    assert_eq!(got, (3.0, 1.0, 1.0));

    // check-config accepts the file and says what becomes of each label.
    let (code, stdout, stderr) = rollstat_run(&["check-config".as_ref(), cfg_path.as_os_str()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let f = file.display().to_string();
    for (line, key) in [(5, "metric"), (6, "window"), (13, "le"), (17, "quantile")] {
        let want = format!("{f}: line {line}: `mappings[");
        assert!(
            stderr.contains(&want) && stderr.contains(&format!("published as `tag_{key}`")),
            "{want} ... tag_{key} in\n{stderr}"
        );
    }

    // convert-mapping prints TOML that check-config accepts and that maps
    // the same way.
    let (code, toml, stderr) = rollstat_run(&["convert-mapping".as_ref(), file.as_os_str()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(toml.contains("tag_metric = \"${1}\""), "{toml}");
    let conv_path = dir.path().join("converted.toml");
    let conv = format!("{TEST_CONFIG}\n{toml}");
    std::fs::write(&conv_path, &conv).unwrap();
    let (code, stdout, stderr) = rollstat_run(&["check-config".as_ref(), conv_path.as_os_str()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}\n{toml}");
    let c = Daemon::start_with(&conv);
    c.send_udp(b"app.login.requests:3|c\nlat.fast:200|ms\nsum.x:100|ms\n");
    c.wait_lines("udp", 3.0, Duration::from_secs(10));
    let cs = c.scrape();
    assert_eq!(
        cs.must(
            "app_requests_total",
            &[("tag_metric", "login"), ("tag_window", "w")]
        ),
        3.0
    );
    assert_eq!(
        cs.must("lat_seconds_bucket", &[("tag_le", "fast"), ("le", "1")]),
        1.0
    );
}

#[test]
fn a_mapping_label_prometheus_reserves_is_refused_with_the_files_line() {
    let dir = TempDir::new("se-dunder");
    let (file, cfg) = config_with_mapping(
        &dir,
        "mappings:\n- match: a.*\n  name: a\n  labels:\n    __name__: \"$1\"\n",
    );
    let cfg_path = dir.path().join("config.toml");
    std::fs::write(&cfg_path, &cfg).unwrap();
    let (code, stdout, stderr) = rollstat_run(&["check-config".as_ref(), cfg_path.as_os_str()]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    let want = format!(
        "{}:5: `mappings[0].labels.__name__`: label names starting with `__`",
        file.display()
    );
    assert!(stderr.contains(&want), "{want} in\n{stderr}");
    let (code, toml, stderr) = rollstat_run(&["convert-mapping".as_ref(), file.as_os_str()]);
    assert_eq!(code, Some(2), "{toml}{stderr}");
    assert!(
        stderr.contains(&format!("{}:5:", file.display())),
        "{stderr}"
    );
}

#[test]
fn an_invalid_go_regex_is_refused_at_its_line_not_made_a_catch_all() {
    let dir = TempDir::new("se-regex");
    let (file, cfg) = config_with_mapping(
        &dir,
        "mappings:\n- match: 'api)|(.*'\n  match_type: regex\n  name: everything_total\n",
    );
    let cfg_path = dir.path().join("config.toml");
    std::fs::write(&cfg_path, &cfg).unwrap();
    let (code, stdout, stderr) = rollstat_run(&["check-config".as_ref(), cfg_path.as_os_str()]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    let want = format!(
        "{}:2: `mappings[0].match`: invalid regex `api)|(.*`",
        file.display()
    );
    assert!(stderr.contains(&want), "{want} in\n{stderr}");
    // The error shows the user's text, not the anchored `.*?(...).*`.
    assert!(!stderr.contains(".*?("), "{stderr}");
    let (code, toml, stderr) = rollstat_run(&["convert-mapping".as_ref(), file.as_os_str()]);
    assert_eq!(code, Some(2), "{toml}{stderr}");
    assert!(
        stderr.contains(&format!("{}:2:", file.display())),
        "{stderr}"
    );

    // A valid one reads as Go reads it: `\d` is ASCII, `[a&&b]` three
    // characters, and it still matches anywhere in the name.
    std::fs::write(
        &file,
        "mappings:\n- match: 'app\\.(\\d+)\\.[a&&b]+'\n  match_type: regex\n  name: app_total\n  labels:\n    id: \"$1\"\n",
    )
    .unwrap();
    let d = Daemon::start_with(&cfg);
    d.send_udp("x.app.42.a&b:1|c\napp.\u{663}.a:1|c\nunrelated.metric:1|c\n".as_bytes());
    let s = d.wait_lines("udp", 3.0, Duration::from_secs(10));
    assert_eq!(s.must("app_total", &[("id", "42")]), 1.0);
    assert_eq!(s.must("unrelated_metric_total", &[]), 1.0);
    assert_eq!(s.value("app_total", &[("id", "\u{663}")]), None);
}

/// `convert-mapping FILE`, then check-config on TEST_CONFIG with its rules:
/// the TOML and check-config's exit code and output.
fn convert_and_check(dir: &TempDir, file: &std::path::Path) -> (String, Option<i32>, String) {
    let (code, toml, stderr) = rollstat_run(&["convert-mapping".as_ref(), file.as_os_str()]);
    assert_eq!(code, Some(0), "{stderr}");
    let conv = dir.path().join("converted.toml");
    std::fs::write(&conv, format!("{TEST_CONFIG}\n{toml}")).unwrap();
    let (code, stdout, stderr) = rollstat_run(&["check-config".as_ref(), conv.as_os_str()]);
    (toml, code, format!("{stdout}{stderr}"))
}

#[test]
fn convert_mapping_keeps_summary_ages_exactly_and_accepts_what_the_file_accepts() {
    let dir = TempDir::new("se-ages");
    let (file, cfg) = config_with_mapping(
        &dir,
        "mappings:\n- match: a.*\n  name: a\n  summary_options:\n    max_age: 1500ms\n    age_buckets: 3\n- match: b.*\n  name: b\n  summary_options:\n    max_age: 100000h\n",
    );
    let cfg_path = dir.path().join("config.toml");
    std::fs::write(&cfg_path, &cfg).unwrap();
    let (code, stdout, stderr) = rollstat_run(&["check-config".as_ref(), cfg_path.as_os_str()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let (toml, code, out) = convert_and_check(&dir, &file);
    assert!(toml.contains("summary_max_age_ms = 1500\n"), "{toml}");
    assert!(
        toml.contains("summary_max_age_secs = 360000000\n"),
        "{toml}"
    );
    assert_eq!(code, Some(0), "{out}\n{toml}");

    // The 1.5 s summary, through both: its quantile is gone 1.5 s after the
    // last sample in both daemons (3 buckets of 500 ms).
    for config in [cfg.clone(), format!("{TEST_CONFIG}\n{toml}")] {
        let d = Daemon::start_with(&config);
        d.send_udp(b"a.x:100|ms");
        let s = d.wait_lines("udp", 1.0, Duration::from_secs(10));
        assert_eq!(s.must("a", &[("quantile", "0.5")]).round(), 0.0);
        assert_eq!(s.must("a_count", &[]), 1.0);
        d.wait_scrape(Duration::from_secs(5), "the quantile aged out", |s| {
            s.value("a", &[("quantile", "0.5")]).is_none()
        });
    }
}

#[test]
fn a_summary_age_both_forms_refuse_is_refused_by_both() {
    let dir = TempDir::new("se-ages-bad");
    let (file, cfg) = config_with_mapping(
        &dir,
        "mappings:\n- match: a.*\n  name: a\n  summary_options:\n    max_age: 1000000h\n",
    );
    let cfg_path = dir.path().join("config.toml");
    std::fs::write(&cfg_path, &cfg).unwrap();
    let (code, stdout, stderr) = rollstat_run(&["check-config".as_ref(), cfg_path.as_os_str()]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:5: `mappings[0].summary_options.max_age`",
            file.display()
        )),
        "{stderr}"
    );
    let toml = format!("{TEST_CONFIG}\n[[mappings]]\nmatch = \"a.*\"\nobserver = \"summary\"\nsummary_max_age_secs = 3600000000\n");
    let conv = dir.path().join("native.toml");
    std::fs::write(&conv, toml).unwrap();
    let (code, stdout, stderr) = rollstat_run(&["check-config".as_ref(), conv.as_os_str()]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("summary_max_age_secs"), "{stderr}");
}

#[test]
fn a_ttl_shorter_than_a_window_is_accepted_and_the_series_lives_until_the_window_drains() {
    let dir = TempDir::new("se-ttl");
    let (file, cfg) = config_with_mapping(
        &dir,
        "mappings:\n- match: short.*\n  name: short_total\n  ttl: 1s\n",
    );
    let cfg_path = dir.path().join("config.toml");
    std::fs::write(&cfg_path, &cfg).unwrap();
    let (code, stdout, stderr) = rollstat_run(&["check-config".as_ref(), cfg_path.as_os_str()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let want = format!(
        "{}: line 4: `mappings[0].ttl`: 1s is shorter than window `5s`",
        file.display()
    );
    assert!(stderr.contains(&want), "{want} in\n{stderr}");

    // The converted rule keeps the 1 s and is accepted the same way.
    let (toml, code, out) = convert_and_check(&dir, &file);
    assert!(toml.contains("ttl_secs = 1\n"), "{toml}");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("ttl_secs = 1s is shorter than window `5s`"),
        "{out}"
    );

    // Every family of the series stays until the 5 s window has drained
    // (then the sweeper, every 250 ms, removes it), not 1 s.
    let d = Daemon::start_with(&cfg);
    d.send_udp(b"short.a:2|c");
    let sent = std::time::Instant::now();
    let s = d.wait_lines("udp", 1.0, Duration::from_secs(10));
    assert_eq!(s.must("short_total", &[]), 2.0);
    let s = d.wait_scrape(Duration::from_secs(15), "the series to expire", |s| {
        s.value("rollstat_series_expired_total", &[]) == Some(1.0)
    });
    let after = sent.elapsed();
    assert!(
        after >= Duration::from_millis(4900),
        "expired after {after:?}"
    );
    assert_eq!(s.value("short_total", &[]), None);
    assert_eq!(
        s.value(
            "rollstat_window_samples",
            &[("metric", "short_total"), ("window", "5s")]
        ),
        None
    );
}

#[test]
fn one_statsd_name_mapped_by_type_to_two_families_publishes_both() {
    let dir = TempDir::new("se-split");
    let (_file, cfg) = config_with_mapping(
        &dir,
        "mappings:\n- match: test.foo.*\n  name: test_foo_sum\n  match_metric_type: counter\n  labels:\n    part: $1\n- match: test.foo.*\n  name: test_foo_current\n  match_metric_type: gauge\n  labels:\n    part: $1\n",
    );
    let d = Daemon::start_with(&cfg);
    // Gauge first once, counter first once: both orders.
    d.send_udp(b"test.foo.test:5|g\ntest.foo.test:1|c\ntest.foo.test:2|c\ntest.foo.other:1|c\ntest.foo.other:7|g\n");
    // One name unmapped as two types: still refused, its windowed families
    // would have one `metric` label for both.
    d.send_udp(b"plain:1|c\nplain:1|g\n");
    let s = d.wait_scrape(Duration::from_secs(10), "the seven lines read", |s| {
        s.value("rollstat_ingest_lines_total", &[("transport", "udp")]) == Some(6.0)
            && s.value(
                "rollstat_series_refused_total",
                &[("reason", "type_conflict")],
            ) == Some(1.0)
    });
    assert_eq!(s.duplicates(), Vec::<String>::new());
    assert_eq!(s.must("test_foo_sum_total", &[("part", "test")]), 3.0);
    assert_eq!(s.must("test_foo_sum_total", &[("part", "other")]), 1.0);
    assert_eq!(s.must("test_foo_current", &[("part", "test")]), 5.0);
    assert_eq!(s.must("test_foo_current", &[("part", "other")]), 7.0);
    assert_eq!(s.value("plain_total", &[]), Some(1.0));
    assert_eq!(s.value("plain", &[]), None);
    // The windowed families keep the two apart by their `metric` label.
    for m in ["test_foo_sum", "test_foo_current"] {
        assert!(
            s.value(
                "rollstat_window_samples",
                &[("metric", m), ("window", "5s"), ("part", "test")]
            )
            .is_some(),
            "{m}"
        );
    }
}
