//! The registry's memory budget (`[series] max_memory_bytes`): timer
//! values spread over 1e-9 … 1e290 would grow every bucket's quantile
//! sketch to thousands of bins; under the budget the sketches stay within
//! their limit, what would cross it is coarsened and counted, and counts
//! stay exact. `check-config` reports a worst case the budget keeps within
//! the machine for the shipped config.toml.

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use crate::support::{repo, run, Daemon, TEST_CONFIG};

const SERIES: usize = 500;
const VALUES: usize = 400;

/// A value of series `s`, its `i`-th: one of 1,700 bins from 1e-9 up.
fn spread(s: usize, i: usize) -> f64 {
    1e-9 * 1.5f64.powi(((s * 31 + i * 97) % 1700) as i32)
}

#[test]
fn spread_timer_values_stay_within_the_sketch_budget_and_are_counted() {
    let config = TEST_CONFIG.replace(
        "[series]\n",
        &format!(
            "[series]\nmax_series = {}\nmax_memory_bytes = 16777216\n",
            SERIES + 200
        ),
    );
    let d = Daemon::start_with(&config);
    let limit = d
        .scrape()
        .value("rollstat_sketch_memory_limit_bytes", &[])
        .expect("the sketch limit is published");
    assert!(limit > 0.0 && limit < 16_777_216.0, "{limit}");
    // Over TCP, so that no line is lost to a full receive buffer: 200,000
    // lines, one write per series.
    let mut tcp = TcpStream::connect(d.tcp).unwrap();
    for s in 0..SERIES {
        let mut chunk = String::new();
        for i in 0..VALUES {
            chunk += &format!("lat.s{s}:{}|ms\n", spread(s, i));
        }
        tcp.write_all(chunk.as_bytes()).unwrap();
    }
    tcp.flush().unwrap();
    let scrape = d.wait_lines("tcp", (SERIES * VALUES) as f64, Duration::from_secs(60));
    let used = scrape.value("rollstat_sketch_memory_bytes", &[]).unwrap();
    assert!(used <= limit, "sketches hold {used} bytes, limit {limit}");
    let coarsened = scrape
        .value("rollstat_sketch_coarsened_total", &[("kind", "quantile")])
        .unwrap();
    assert!(
        coarsened > 0.0,
        "the budget bit: {coarsened} (used {used}, limit {limit})"
    );
    // Counts are exact whatever was coarsened: every series' histogram
    // _count is what it was sent.
    let counts: Vec<f64> = scrape
        .samples
        .iter()
        .filter(|s| s.name.starts_with("lat_s") && s.name.ends_with("_count"))
        .map(|s| s.value)
        .collect();
    assert_eq!(counts.len(), SERIES, "one histogram per series");
    assert!(counts.iter().all(|&c| c == VALUES as f64), "{counts:?}");
    // And the process stays small (without the budget the same traffic
    // held a few hundred MiB of bins).
    let rss = scrape.value("process_resident_memory_bytes", &[]).unwrap();
    assert!(rss < 256.0 * 1024.0 * 1024.0, "RSS {rss}");
}

#[test]
fn check_config_keeps_the_shipped_configs_worst_case_within_the_budget() {
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("check-config")
            .arg(repo().join("config.toml")),
        b"",
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", out.stderr);
    assert!(out.stdout.contains("memory budget: "), "{}", out.stdout);
    assert!(
        !out.stderr.contains("the worst case"),
        "no worst case above the machine: {}",
        out.stderr
    );
    // An explicit budget below what the series need is said plainly.
    let dir = crate::support::TempDir::new("mb-low");
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[series]\nmax_memory_bytes = 16777216\n").unwrap();
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("check-config")
            .arg(&cfg),
        b"",
        Duration::from_secs(30),
    );
    assert!(
        out.stderr
            .contains("raise series.max_memory_bytes or lower series.max_series"),
        "{}{}",
        out.stdout,
        out.stderr
    );
}
