//! Memory per series, by statsd type, on a config's windows: builds N
//! series of one type in-process, writes each once a second for S seconds
//! of manual-clock time (so every bucket of a 60-bucket window holds a
//! sample), and prints (VmRSS after - VmRSS before) / N, from
//! `/proc/self/status` (Linux). The RSS includes the allocator's own
//! overhead: it is what the daemon's memory grows by. It also prints the
//! heap bytes and blocks the registry asked for per series (a counting
//! allocator), so the allocator's share shows.
//!
//! ```text
//! cargo run --release --example memory_per_series -- [N] [KIND|all] [CONFIG] [SECONDS] [TAGS] [PER_SECOND]
//! cargo run --release --example memory_per_series -- 100000 all config.toml 60 0 1
//! ```
//!
//! KIND: counter, gauge, timer, histogram, distribution, set. Each kind runs
//! in a fresh child process (so one kind's freed memory does not hide the
//! next one's growth). Values vary by series and second: timers 1-500 ms,
//! histograms and distributions 1-1000, sets one new member per second.
//! PER_SECOND lines per series and second (default 1) make busy series:
//! more distinct values per bucket, so full quantile sketches.

use std::alloc::{GlobalAlloc, Layout};
use std::fmt::Write as _;
use std::process::Command;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rollstat::config::Config;
use rollstat::parse::{parse_line, Line};
use rollstat::series::{KeyBuf, Plan, Registry};
use rollstat::{Clock, ManualClock, Timestamp};

const KINDS: [&str; 6] = [
    "counter",
    "gauge",
    "timer",
    "histogram",
    "distribution",
    "set",
];

/// The daemon's allocator (mimalloc, src/main.rs), counting the bytes and
/// blocks live: what the registry asked for, next to the RSS (which adds
/// the allocator's rounding and slack).
struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
static LIVE_BLOCKS: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(l.size() as isize, Ordering::Relaxed);
        LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE_BYTES.fetch_sub(l.size() as isize, Ordering::Relaxed);
        LIVE_BLOCKS.fetch_sub(1, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> (isize, isize) {
    (
        LIVE_BYTES.load(Ordering::Relaxed),
        LIVE_BLOCKS.load(Ordering::Relaxed),
    )
}

fn vm_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS line")
        * 1024
}

fn line(out: &mut String, kind: &str, i: usize, sec: usize, k: usize, tags: usize) {
    out.clear();
    let _ = write!(out, "mem.m{i:06}:");
    let v = (i * 7 + sec * 13 + k * 101) % 1000 + 1;
    let _ = match kind {
        "counter" => write!(out, "1|c"),
        "gauge" => write!(out, "{v}|g"),
        "timer" => write!(out, "{}|ms", v % 500 + 1),
        "histogram" => write!(out, "{v}|h"),
        "distribution" => write!(out, "{v}|d"),
        "set" => write!(out, "u{sec}.{k}|s"),
        other => panic!("unknown kind {other}"),
    };
    for j in 0..tags {
        out.push_str(if j == 0 { "|#" } else { "," });
        let _ = write!(out, "k{j}:v{}", (i + j) % 97);
    }
}

fn measure(n: usize, kind: &str, config: &str, seconds: usize, tags: usize, per_second: usize) {
    let mut cfg = if config.is_empty() {
        Config::default()
    } else {
        Config::load(std::path::Path::new(config)).unwrap_or_else(|e| panic!("{e}"))
    };
    cfg.series.max_series = n + 1;
    cfg.series.max_series_per_metric = None;
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_767_225_600));
    let mut text = String::new();
    let before = vm_rss_bytes();
    let heap_before = live();
    let registry = Arc::new(Registry::new(
        Plan::new(cfg.series_settings()).watched_from(clock.now()),
        16,
    ));
    let mut key = KeyBuf::default();
    for sec in 0..seconds {
        let now = clock.now();
        for i in 0..n {
            for k in 0..per_second {
                line(&mut text, kind, i, sec, k, tags);
                let Ok(Line::Sample(s)) = parse_line(text.as_bytes()) else {
                    panic!("{text}")
                };
                registry.ingest(&s, now, &mut key).expect("stored");
            }
        }
        clock.advance(Duration::from_secs(1));
    }
    let after = vm_rss_bytes();
    let heap_after = live();
    assert_eq!(registry.len(), n);
    let per = (after - before) as f64 / n as f64;
    let heap = (heap_after.0 - heap_before.0) as f64 / n as f64;
    let blocks = (heap_after.1 - heap_before.1) as f64 / n as f64;
    println!(
        "kind={kind} series={n} seconds={seconds} per_second={per_second} tags={tags} config={} rss_growth={} bytes_per_series={per:.0} heap_bytes_per_series={heap:.0} heap_blocks_per_series={blocks:.1}",
        if config.is_empty() { "default" } else { config },
        after - before
    );
    std::hint::black_box(&registry);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .get(1)
        .map_or(100_000, |a| a.parse().expect("N: a number of series"));
    let kind = args.get(2).map_or("counter", String::as_str);
    let config = args.get(3).map_or("", String::as_str);
    let seconds: usize = args.get(4).map_or(60, |a| a.parse().expect("SECONDS"));
    let tags: usize = args.get(5).map_or(0, |a| a.parse().expect("TAGS"));
    let per_second: usize = args.get(6).map_or(1, |a| a.parse().expect("PER_SECOND"));
    if kind == "all" {
        for k in KINDS {
            let status = Command::new(&args[0])
                .args([n.to_string(), k.to_string(), config.to_string()])
                .args([
                    seconds.to_string(),
                    tags.to_string(),
                    per_second.to_string(),
                ])
                .status()
                .expect("run a child");
            assert!(status.success(), "{k}: {status}");
        }
    } else {
        measure(n, kind, config, seconds, tags, per_second);
    }
}
