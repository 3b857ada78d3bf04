//! Memory per series: builds N counter series (default config: one `10s`
//! window of 10 x 1 s buckets) in-process and prints
//! (VmRSS after - VmRSS before) / N, from `/proc/self/status` (Linux).
//!
//! ```text
//! cargo run --release --example memory_per_series -- 100000
//! ```

use std::sync::Arc;

use rollstat::blast::{render_line, Kind};
use rollstat::config::Config;
use rollstat::parse::{parse_line, Line};
use rollstat::series::{KeyBuf, Plan, Registry};
use rollstat::{Clock, ManualClock};

fn vm_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS line")
        * 1024
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(100_000, |a| a.parse().expect("N: a number of series"));
    let tags: usize = std::env::args()
        .nth(2)
        .map_or(0, |a| a.parse().expect("tags per line"));
    // Render the lines first so their memory is not counted.
    let lines: Vec<String> = (0..n)
        .map(|i| render_line(i, tags, Kind::Counter))
        .collect();
    let mut cfg = Config::default();
    cfg.series.max_series = n + 1;
    let clock = ManualClock::new();
    let before = vm_rss_bytes();
    let registry = Arc::new(Registry::new(Plan::from_config(&cfg), 16));
    let mut key = KeyBuf::default();
    for l in &lines {
        let Ok(Line::Sample(s)) = parse_line(l.trim_end().as_bytes()) else {
            panic!("{l}")
        };
        registry.ingest(&s, clock.now(), &mut key).expect("stored");
    }
    let after = vm_rss_bytes();
    assert_eq!(registry.len(), n);
    let per = (after - before) as f64 / n as f64;
    println!(
        "series={n} tags={tags} rss_before={before} rss_after={after} bytes_per_series={per:.0}"
    );
    std::hint::black_box(&registry);
}
