//! statsd_exporter's own mapper scenarios on the real binary: every file of
//! its `pkg/mapper` tests is loaded by `check-config` as statsd_exporter
//! loads it (refused where it refuses, naming the file's line), and one
//! scenario's lines reach /metrics with its names and labels as Prometheus
//! reads them. The table and its in-process run, check by check, are
//! `tests/reference/statsd_exporter_mappings.rs` and
//! `tests/compat_statsd_exporter_mapper.rs`.

#[path = "../reference/statsd_exporter_mappings.rs"]
// Shared with tests/compat_statsd_exporter_mapper.rs, which reads every
// field; this module reads the configs and their refusals only.
#[allow(dead_code)]
mod reference;

use std::process::Command;
use std::time::Duration;

use reference::SCENARIOS;

use crate::support::{run, Daemon, TempDir, TEST_CONFIG};

/// `TEST_CONFIG` loading the mapping file `file`.
fn config_with(file: &std::path::Path) -> String {
    format!(
        "{TEST_CONFIG}\n[statsd_exporter]\nmapping_file = \"{}\"\n",
        file.display()
    )
}

#[test]
fn check_config_loads_every_statsd_exporter_mapper_scenario_file_as_statsd_exporter_does() {
    let dir = TempDir::new("compat-mappings");
    let mut wrong = Vec::new();
    for (i, s) in SCENARIOS.iter().enumerate() {
        // One directory each: the table quotes problems at `mapping.yml:N`.
        let sub = dir.path().join(i.to_string());
        std::fs::create_dir(&sub).unwrap();
        let file = sub.join("mapping.yml");
        std::fs::write(&file, s.config).unwrap();
        let cfg = sub.join("config.toml");
        std::fs::write(&cfg, config_with(&file)).unwrap();
        let out = run(
            Command::new(env!("CARGO_BIN_EXE_rollstat"))
                .arg("check-config")
                .arg(&cfg),
            b"",
            Duration::from_secs(20),
        );
        let text = format!("{}{}", out.stdout, out.stderr);
        let ok = match (s.config_bad, out.status.code()) {
            (false, Some(0)) => true,
            // Refused with the table's words, at the file's own line.
            (true, Some(c)) if c != 0 => {
                s.refused_with.is_some_and(|w| text.contains(w))
                    && text.contains(&format!("{}:", file.display()))
            }
            _ => false,
        };
        if !ok {
            wrong.push(format!("{} (configBad: {}): {text}", s.name, s.config_bad));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_statsd_exporter_scenarios_lines_reach_metrics_with_its_names_and_labels() {
    let s = SCENARIOS
        .iter()
        .find(|s| s.name == "Config with several mapping definitions")
        .unwrap();
    let dir = TempDir::new("compat-mappings-daemon");
    let file = dir.path().join("mapping.yml");
    std::fs::write(&file, s.config).unwrap();
    let d = Daemon::start_with(&config_with(&file));
    let lines: Vec<String> = s
        .checks
        .iter()
        .map(|c| format!("{}:1|c", c.statsd_metric))
        .collect();
    assert_eq!(lines.len(), 6);
    d.send_udp(lines.join("\n").as_bytes());
    let got = d.wait_lines("udp", 6.0, Duration::from_secs(10));
    assert_eq!(got.duplicates(), Vec::<String>::new());
    let dispatch = [
        ("processor", "FooProcessor"),
        ("action", "send"),
        ("result", "succeeded"),
        ("job", "test_dispatcher"),
    ];
    assert_eq!(got.must("dispatch_events_total", &dispatch), 1.0);
    assert_eq!(got.must("host_dispatch_events_total", &dispatch), 1.0);
    // `oauthid` and `third` render empty: no such label, as Prometheus
    // reads an empty one (and statsd_exporter's client library writes it).
    let tyk = [
        ("method_and_path", "get/threads/1/posts"),
        ("response_code", "200"),
        ("apikey", "00000000"),
        ("apiversion", "nonversioned"),
        ("apiname", "discussions"),
        ("apiid", "a11bbcdf0ac64ec243658dc64b7100fb"),
        ("ipv4_t1", "172"),
        ("ipv4_t2", "20"),
        ("ipv4_t3", "0"),
        ("ipv4_t4", "1"),
        ("orgid", "12ba97b7eaa1a50001000001"),
    ];
    assert_eq!(got.must("tyk_http_request_total", &tyk), 1.0);
    let catchall = [("first", "foo"), ("second", "bar"), ("job", "foo-bar-")];
    assert_eq!(got.must("catchall_total", &catchall), 1.0);
    // No rule takes `foo.bar.baz`: its own name, no labels.
    assert_eq!(got.must("foo_bar_baz_total", &[]), 1.0);
    let proxy = [
        ("job", "proxy-1"),
        ("protocol", "http"),
        ("endpoint", "goober"),
        ("result", "success"),
    ];
    assert_eq!(got.must("proxy_requests_total", &proxy), 1.0);
}
