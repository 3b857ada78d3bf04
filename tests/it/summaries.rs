//! statsd_exporter's summaries as it keeps them: each quantile within the
//! rank error its objective asks, an objective without an error exact, and
//! every value visible at a scrape whatever `buf_cap` batches.

use std::time::Duration;

use crate::support::{Daemon, TempDir, TEST_CONFIG};

const MAPPING: &str = r#"mappings:
- match: api.*.latency
  name: api_latency_seconds
  labels:
    route: "$1"
  summary_options:
    quantiles:
    - quantile: 0.5
      error: 0.05
    - quantile: 0.9
      error: 0.01
    - quantile: 0.99
      error: 0.001
    max_age: 10m
    age_buckets: 5
    buf_cap: 1000
- match: exact.*
  name: exact_seconds
  summary_options:
    quantiles:
    - quantile: 0.5
    buf_cap: 100000
"#;

/// The weighted ranks `ms` holds among `all`.
fn ranks_of(all: &[(u64, u64)], ms: u64) -> (u64, u64) {
    let below: u64 = all.iter().filter(|(v, _)| *v < ms).map(|(_, w)| w).sum();
    let upto: u64 = all.iter().filter(|(v, _)| *v <= ms).map(|(_, w)| w).sum();
    (below + 1, upto)
}

#[test]
fn each_quantile_is_within_its_objectives_rank_error_and_an_exact_one_is_exact() {
    let dir = TempDir::new("summaries");
    let file = dir.path().join("mapping.yml");
    std::fs::write(&file, MAPPING).unwrap();
    let d = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[statsd_exporter]\nmapping_file = \"{}\"\n",
        file.display()
    ));
    // 6,000 timer values in a scrambled order, then 200 sent at @0.1 (each
    // counted 10 times, as statsd_exporter counts them).
    let mut sent: Vec<(u64, u64)> = (0..6_000u64)
        .map(|i| ((i * 2_371) % 6_000 + 1, 1))
        .collect();
    sent.extend((0..200u64).map(|i| (6_500 + i * 3, 10)));
    let lines: Vec<String> = sent
        .iter()
        .map(|&(ms, w)| match w {
            1 => format!("api.users.latency:{ms}|ms"),
            _ => format!("api.users.latency:{ms}|ms|@0.1"),
        })
        .collect();
    for chunk in lines.chunks(40) {
        d.send_udp(chunk.join("\n").as_bytes());
    }
    d.send_udp(b"exact.a:1|ms\nexact.a:3|ms\nexact.a:2|ms\n");
    d.wait_lines("udp", 6_203.0, Duration::from_secs(30));
    let s = d.scrape();
    let n: u64 = sent.iter().map(|(_, w)| w).sum();
    for (q, error) in [(0.5, 0.05), (0.9, 0.01), (0.99, 0.001)] {
        let v = s.must(
            "api_latency_seconds",
            &[("route", "users"), ("quantile", &q.to_string())],
        );
        let ms = (v * 1_000.0).round() as u64;
        assert!(
            sent.iter().any(|(x, _)| *x == ms),
            "q {q}: {v} s was never sent"
        );
        let (lo, hi) = ranks_of(&sent, ms);
        let (target, slack) = (q * n as f64, error * n as f64 + 1.0);
        assert!(
            lo as f64 <= target + slack && hi as f64 >= target - slack,
            "q {q}: {ms} ms holds ranks {lo}..={hi} of {n}; the objective asks {target} ± {slack}"
        );
    }
    assert_eq!(
        s.must("api_latency_seconds_count", &[("route", "users")]),
        n as f64
    );
    // No error asked: the exact median; 3 values in a batch of 100,000
    // are all seen at the scrape.
    assert_eq!(s.must("exact_seconds", &[("quantile", "0.5")]), 0.002);
}
