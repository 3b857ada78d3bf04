//! `[[outputs]]` when the receiver dies mid-run: killed (its listener
//! closed, its connections reset) while the daemon ingests statsd lines and
//! pushes every 200 ms, then started again on the same port. What was
//! queued meanwhile arrives, once; ingest and `/metrics` go on; a small
//! queue stays under its cap and counts what it drops.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::support::{wait_true, wait_until, Daemon, KillableReceiver, Scrape};

/// Generous bounds, not targets: ingest and scrapes that took this long
/// while the receiver was down would mean the output held them.
const NEVER_BLOCKED: Duration = Duration::from_secs(3);

/// Port-0 listeners, one 10 s window, one output to `url` pushing every
/// 200 ms, retrying within 50 to 200 ms, with `extra` keys.
fn config(url: &str, extra: &str) -> String {
    format!(
        r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = "127.0.0.1:0"
http = "127.0.0.1:0"

[ingest]
udp_readers = 1

[[windows]]
name = "10s"
buckets = 10
interval_ms = 1000

[[outputs]]
name = "rw"
kind = "remote_write"
url = "{url}"
interval_ms = 200
retry_min_ms = 50
retry_max_ms = 200
timeout_ms = 2000
{extra}
"#
    )
}

/// `name{output="rw", label=value}` on a scrape (0 if absent).
fn rw(s: &Scrape, name: &str, label: (&str, &str)) -> f64 {
    s.value(name, &[("output", "rw"), label]).unwrap_or(0.0)
}

fn queue_bytes(s: &Scrape) -> f64 {
    s.value("rollstat_output_queue_bytes", &[("output", "rw")])
        .unwrap_or(0.0)
}

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Sends `tick:1|c` every 5 ms from a thread until stopped (at most 20 s,
/// 4,000 lines), counting what it sent.
struct Ticker {
    sent: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    fn start(d: &Daemon) -> Ticker {
        let (sent, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (s, st, to) = (sent.clone(), stop.clone(), d.udp);
        let thread = std::thread::spawn(move || {
            let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let until = Instant::now() + Duration::from_secs(20);
            for _ in 0..4000 {
                if st.load(Ordering::Relaxed) || Instant::now() > until {
                    return;
                }
                sock.send_to(b"tick:1|c", to).unwrap();
                s.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Ticker {
            sent,
            stop,
            thread: Some(thread),
        }
    }

    fn sent(&self) -> f64 {
        self.sent.load(Ordering::Relaxed) as f64
    }

    /// Stops it; returns the lines sent.
    fn stop(&mut self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.sent()
    }
}

/// Lines sent now show on `/metrics` within [`NEVER_BLOCKED`], and no
/// scrape meanwhile took longer: returns the slowest scrape.
fn ingest_and_scrapes_go_on(d: &Daemon, t: &Ticker) -> Duration {
    let want = t.sent();
    let start = Instant::now();
    let mut slowest = Duration::ZERO;
    wait_until(NEVER_BLOCKED, "the ticks on /metrics", || {
        let s0 = Instant::now();
        let s = d.scrape();
        slowest = slowest.max(s0.elapsed());
        let got = s.value("tick_total", &[]).unwrap_or(0.0);
        if got >= want {
            Ok(())
        } else {
            Err(format!("tick_total {got} < {want} sent"))
        }
    });
    assert!(start.elapsed() < NEVER_BLOCKED);
    assert!(slowest < NEVER_BLOCKED, "a scrape took {slowest:?}");
    slowest
}

/// `(sample time in ms, value)` of `tick_total` in every delivered
/// request, sorted by time.
fn ticks(rx: &KillableReceiver) -> Vec<(i64, f64)> {
    let mut v: Vec<(i64, f64)> = rx
        .delivered()
        .iter()
        .flat_map(|r| r.request().timeseries)
        .filter(|ts| {
            ts.labels
                .iter()
                .any(|l| l.name == "__name__" && l.value == "tick_total")
        })
        .flat_map(|ts| ts.samples.into_iter().map(|s| (s.timestamp, s.value)))
        .collect();
    v.sort_by_key(|x| x.0);
    v
}

/// No two delivered requests carry the same body.
fn assert_each_delivered_once(rx: &KillableReceiver) {
    let all = rx.delivered();
    let distinct: BTreeSet<u64> = all.iter().map(|r| r.hash).collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "a batch delivered twice after its 2xx ({} requests, {} distinct)",
        all.len(),
        distinct.len()
    );
}

/// Waits for a moment between two requests (at most 5 s) at which the
/// daemon's counts of batches and samples sent equal what the receiver
/// was delivered, and returns those counts.
fn counters_agree_with_the_receiver(d: &Daemon, rx: &KillableReceiver) -> (usize, usize) {
    wait_until(Duration::from_secs(5), "sent counters = delivered", || {
        let before = rx.delivered().len();
        let s = d.scrape();
        let after = rx.delivered();
        let sent = rw(&s, "rollstat_output_batches_total", ("result", "sent"));
        let sent_samples = rw(&s, "rollstat_output_samples_total", ("result", "sent"));
        if before != after.len() || sent != after.len() as f64 {
            let retries = s.show("rollstat_output_retries_total");
            return Err(format!(
                "{} requests delivered, {sent} batches counted sent; {retries:?}",
                after.len()
            ));
        }
        let samples: usize = after
            .iter()
            .flat_map(|r| r.request().timeseries)
            .map(|t| t.samples.len())
            .sum();
        if sent_samples == samples as f64 {
            Ok((after.len(), samples))
        } else {
            Err(format!(
                "{samples} samples delivered, {sent_samples} counted sent"
            ))
        }
    })
}

#[test]
fn a_receiver_killed_mid_run_gets_everything_queued_once_after_its_restart() {
    let mut rx = KillableReceiver::start();
    let d = Daemon::start_with(&config(
        &rx.url(),
        "groups = [\"cumulative\"]\nmetrics = [\"tick\"]",
    ));
    let mut ticker = Ticker::start(&d);
    wait_true(Duration::from_secs(10), "three pushes delivered", || {
        ticks(&rx).len() >= 3
    });
    let before = ingest_and_scrapes_go_on(&d, &ticker);

    rx.kill();
    let (killed_at, killed_ms) = (Instant::now(), unix_ms());
    let at_kill = rx.delivered().len();
    let mut slowest = Duration::ZERO;
    wait_true(Duration::from_secs(10), "failed tries while down", || {
        let s = d.scrape();
        rw(&s, "rollstat_output_retries_total", ("reason", "connect")) >= 2.0
    });
    // Down for at least 2 s, checking ingest and scrapes all along.
    while killed_at.elapsed() < Duration::from_secs(2) {
        slowest = slowest.max(ingest_and_scrapes_go_on(&d, &ticker));
        std::thread::sleep(Duration::from_millis(100));
    }
    let queued = queue_bytes(&d.scrape());
    assert!(queued > 0.0, "nothing queued while the receiver was down");
    let delivered_while_down = rx.delivered().len();
    assert_eq!(delivered_while_down, at_kill, "answered while killed");

    rx.restart();
    let (restarted_at, restarted_ms) = (Instant::now(), unix_ms());
    let total = ticker.stop();
    wait_until(Duration::from_secs(10), "the queue delivered", || {
        let s = d.scrape();
        let last = ticks(&rx).last().map_or(0.0, |t| t.1);
        if queue_bytes(&s) == 0.0 && last == total {
            Ok(())
        } else {
            Err(format!(
                "queue {} bytes, last tick {last} of {total}",
                queue_bytes(&s)
            ))
        }
    });

    assert_each_delivered_once(&rx);
    counters_agree_with_the_receiver(&d, &rx);
    let s = d.scrape();
    let all = rx.delivered();
    for lost in ["queue_full", "refused"] {
        assert_eq!(
            rw(&s, "rollstat_output_batches_total", ("result", lost)),
            0.0,
            "{lost}"
        );
    }
    // The counter's values over time arrived: every push, rising, none
    // missing while the receiver was down, and those sent after it came back.
    let t = ticks(&rx);
    assert!(
        t.windows(2).all(|w| w[0].1 <= w[1].1),
        "tick_total went down: {t:?}"
    );
    let gap = t.windows(2).map(|w| w[1].0 - w[0].0).max().unwrap_or(0);
    assert!(
        gap <= 1500,
        "{gap} ms between two delivered pushes (interval 200 ms)"
    );
    let down: Vec<&(i64, f64)> = t
        .iter()
        .filter(|x| x.0 > killed_ms + 200 && x.0 < restarted_ms - 200)
        .collect();
    assert!(
        down.len() >= 5,
        "{} pushes of the downtime delivered",
        down.len()
    );
    let late = all[delivered_while_down..]
        .iter()
        .filter(|r| r.at >= restarted_at)
        .count();
    assert!(late >= down.len(), "{late} requests after the restart");
    eprintln!(
        "slowest scrape before the kill {before:?}, while down {slowest:?}; {} pushes of the downtime, {} requests in all",
        down.len(),
        all.len()
    );
}

#[test]
fn while_the_receiver_is_down_a_small_queue_stays_under_its_cap_and_counts_its_drops() {
    const CAP: f64 = 65536.0;
    let mut rx = KillableReceiver::start();
    let d = Daemon::start_with(&config(
        &rx.url(),
        "groups = [\"cumulative\"]\nqueue_max_bytes = 65536\nbatch_max_bytes = 65536",
    ));
    d.create_counters("q", 2000);
    let mut ticker = Ticker::start(&d);
    let sent = || {
        rw(
            &d.scrape(),
            "rollstat_output_batches_total",
            ("result", "sent"),
        )
    };
    wait_true(Duration::from_secs(10), "pushes delivered", || {
        sent() >= 3.0
    });

    rx.kill();
    let killed_at = Instant::now();
    let mut highest = 0.0f64;
    let mut checks = 0;
    while killed_at.elapsed() < Duration::from_secs(8) {
        let s = d.scrape();
        let q = queue_bytes(&s);
        assert!(q <= CAP, "queue bytes {q} above the cap {CAP}");
        highest = highest.max(q);
        checks += 1;
        let full = rw(
            &s,
            "rollstat_output_batches_total",
            ("result", "queue_full"),
        );
        if full >= 3.0 && killed_at.elapsed() > Duration::from_secs(2) {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    ingest_and_scrapes_go_on(&d, &ticker);
    let s = d.scrape();
    let dropped = rw(
        &s,
        "rollstat_output_batches_total",
        ("result", "queue_full"),
    );
    assert!(
        dropped >= 1.0,
        "no drop counted; highest queue {highest} bytes"
    );
    assert!(
        rw(
            &s,
            "rollstat_output_samples_total",
            ("result", "queue_full")
        ) >= dropped
    );
    assert!(
        highest > CAP / 2.0,
        "the queue never filled: {highest} bytes"
    );
    let sent_before = rw(&s, "rollstat_output_batches_total", ("result", "sent"));

    rx.restart();
    ticker.stop();
    wait_true(Duration::from_secs(10), "sending again", || {
        let s = d.scrape();
        queue_bytes(&s) == 0.0
            && rw(&s, "rollstat_output_batches_total", ("result", "sent")) >= sent_before + 2.0
    });
    assert_each_delivered_once(&rx);
    let (batches, _) = counters_agree_with_the_receiver(&d, &rx);
    assert!(batches as f64 >= sent_before + 2.0);
    eprintln!("{checks} checks while down, highest queue {highest} of {CAP} bytes, {dropped} batches dropped");
}
