//! "Stop drains everything" and supervision, on the real binary:
//! the Unix socket drained at SIGTERM, the drain's deadline under a UDP
//! flood, a background task and a reader that panic (the fault hook
//! `ROLLSTAT_TEST_FAULTS`), and `/-/ready` when a reader is gone.

use std::net::UdpSocket;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lifecycle::{stop_totals, strip_ansi};
use crate::support::{wait_true, Daemon, TempDir, TEST_CONFIG};

/// [`TEST_CONFIG`] with the Unix socket at `sock`.
fn with_unix(cfg: &str, sock: &Path) -> String {
    cfg.replace(
        "http = \"127.0.0.1:0\"",
        &format!(
            "http = \"127.0.0.1:0\"\nstatsd_unix = \"{}\"",
            sock.display()
        ),
    )
}

/// The log line of the stop drain of `transport`.
fn drain_line(log: &str, transport: &str) -> Option<String> {
    strip_ansi(log)
        .lines()
        .find(|l| l.contains("Stop drain") && l.contains(&format!("transport=\"{transport}\"")))
        .map(str::to_string)
}

/// Datagrams queued on the Unix socket when SIGTERM arrives are applied:
/// the old reader left its loop at the stop signal and lost them. Each
/// datagram carries 1000 lines, so the reader is still busy with the burst
/// (the kernel queues up to net.unix.max_dgram_qlen of them, the sender
/// blocking beyond) when the signal is sent right after the last send.
#[test]
fn datagrams_queued_on_the_unix_socket_at_sigterm_are_all_applied() {
    let dir = TempDir::new("stop-unix");
    let sock = dir.path().join("s.sock");
    let mut d = Daemon::start_with(&with_unix(TEST_CONFIG, &sock));
    let tx = UnixDatagram::unbound().unwrap();
    tx.connect(&sock).unwrap();
    let datagram = "unix.drain:1|c\n".repeat(1000);
    const N: u64 = 60;
    for _ in 0..N {
        tx.send(datagram.as_bytes()).unwrap();
    }
    d.signal("TERM");
    let st = d.wait_exit(Duration::from_secs(20));
    assert_eq!(st.code(), Some(0), "exit status {st}; log:\n{}", d.log());
    let log = d.log();
    let totals = stop_totals(&log);
    assert_eq!(totals.get("unix"), Some(&(N * 1000)), "{totals:?}\n{log}");
    let line = drain_line(&log, "unix").unwrap_or_else(|| panic!("no unix drain line:\n{log}"));
    assert!(line.contains("Stop drain done"), "{line}");
}

/// Under a UDP flood that never lets the queue empty, SIGTERM makes the
/// daemon exit within `drain_timeout_ms` plus a margin, and the cut drain
/// is logged (the old drain read until the queue was empty: as long as the
/// flood lasted).
#[test]
fn under_a_udp_flood_the_stop_drain_ends_at_its_deadline() {
    let cfg = TEST_CONFIG.replace(
        "udp_readers = 1\n",
        "udp_readers = 1\nudp_workers = 0\ndrain_timeout_ms = 300\n",
    );
    let mut d = Daemon::start_with(&cfg);
    let to = d.udp;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    // One loopback sender, bounded in time (30 s) and count, paced (32
    // datagrams every 2 ms: a few percent of a core, so that the other
    // tests keep theirs): 100 lines a datagram, far more than the debug
    // build's one reader parses (about 400 a second), so the socket's
    // queue is full when the signal arrives and stays full.
    let flood = {
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            let datagram = "flood.x:1|c\n".repeat(100);
            let start = Instant::now();
            while !stop.load(Ordering::Relaxed)
                && start.elapsed() < Duration::from_secs(30)
                && sent.load(Ordering::Relaxed) < 1_000_000
            {
                for _ in 0..32 {
                    if s.send_to(datagram.as_bytes(), to).is_ok() {
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    d.wait_scrape(Duration::from_secs(10), "flood lines", |s| {
        s.value("rollstat_ingest_lines_total", &[("transport", "udp")])
            .is_some_and(|v| v >= 10_000.0)
    });
    let asked = Instant::now();
    d.signal("TERM");
    let st = d.wait_exit(Duration::from_secs(20));
    let took = asked.elapsed();
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
    assert_eq!(st.code(), Some(0), "exit status {st}; log:\n{}", d.log());
    let log = d.log();
    // 300 ms of drain, plus the rest of the stop on a loaded machine.
    assert!(
        took < Duration::from_secs(6),
        "took {took:?} to exit under a flood; log:\n{log}"
    );
    let line = drain_line(&log, "udp").unwrap_or_else(|| panic!("no udp drain line:\n{log}"));
    assert!(line.contains("cut short"), "{line}");
    eprintln!(
        "SIGTERM to exit under a flood of {} datagrams: {took:?}\n{line}",
        sent.load(Ordering::Relaxed)
    );
    assert!(line.contains("bytes still queued"), "{line}");
    assert!(
        stop_totals(&log).get("udp").is_some_and(|&n| n > 0),
        "{log}"
    );
}

/// The fault hook makes the sweep task panic in its first two rounds and
/// the UDP reader at its first datagram: each panic is logged and counted,
/// the sweep's next rounds run (an idle series expires), the reader starts
/// again (later datagrams are counted), and the daemon stays healthy.
#[test]
fn a_task_and_a_reader_that_panic_are_logged_counted_and_go_on() {
    let cfg = TEST_CONFIG.replace("[series]\n", "[series]\nttl_secs = 5\n");
    let d = Daemon::start_env(
        &cfg,
        &[("ROLLSTAT_TEST_FAULTS", "panic:sweep:2,panic:udp_reader:1")],
    );
    // The first datagram dies with the reader's panic; later ones count.
    d.send_udp(b"lost:1|c");
    d.wait_scrape(Duration::from_secs(10), "the reader's panic", |s| {
        s.value("rollstat_task_panics_total", &[("task", "udp_reader")]) == Some(1.0)
    });
    wait_true(Duration::from_secs(10), "the restarted reader", || {
        d.send_udp(b"idle.series:1|c");
        std::thread::sleep(Duration::from_millis(50));
        d.scrape()
            .value("rollstat_ingest_lines_total", &[("transport", "udp")])
            .is_some_and(|v| v >= 1.0)
    });
    let s = d.wait_scrape(Duration::from_secs(10), "two sweep panics", |s| {
        s.value("rollstat_task_panics_total", &[("task", "sweep")]) == Some(2.0)
    });
    assert_eq!(
        s.must("rollstat_task_panics_total", &[("task", "tick")]),
        0.0
    );
    assert_eq!(d.series("idle.*").as_array().map(Vec::len), Some(1));
    // The sweep goes on: 5 s after its last sample the series expires.
    wait_true(Duration::from_secs(30), "the idle series to expire", || {
        d.series("idle.*").as_array().is_some_and(Vec::is_empty)
    });
    let log = strip_ansi(&d.log());
    assert!(
        log.lines()
            .any(|l| l.contains("A background task panicked") && l.contains("sweep")),
        "{log}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("A statsd reader panicked; it starts again")),
        "{log}"
    );
    assert_eq!(d.get("/-/healthy", &[]).status, 200);
    assert_eq!(d.get("/-/ready", &[]).status, 200);
    let before = d
        .scrape()
        .must("rollstat_ingest_lines_total", &[("transport", "udp")]);
    d.send_udp(b"after.panics:1|c");
    d.wait_lines("udp", before + 1.0, Duration::from_secs(10));
}

/// A reader that is gone (the fault hook kills the Unix reader at its
/// first datagram and keeps it down) makes `/-/ready` answer 503 naming
/// it, while `/-/healthy` stays 200 and the other transports serve.
#[test]
fn ready_says_503_when_a_reader_is_gone() {
    let dir = TempDir::new("stop-ready");
    let sock = dir.path().join("s.sock");
    let d = Daemon::start_env(
        &with_unix(TEST_CONFIG, &sock),
        &[("ROLLSTAT_TEST_FAULTS", "die:unix_reader")],
    );
    assert_eq!(d.get("/-/ready", &[]).status, 200);
    UnixDatagram::unbound()
        .unwrap()
        .send_to(b"kill:1|c", &sock)
        .unwrap();
    wait_true(Duration::from_secs(10), "/-/ready to say 503", || {
        d.get("/-/ready", &[]).status == 503
    });
    let r = d.get("/-/ready", &[]);
    assert!(
        r.text()
            .contains("statsd receivers have stopped (rollstat-unix)"),
        "{}",
        r.text()
    );
    assert_eq!(d.get("/-/healthy", &[]).status, 200);
    assert_eq!(
        d.scrape()
            .must("rollstat_task_panics_total", &[("task", "unix_reader")]),
        1.0
    );
    d.send_udp(b"still.served:1|c");
    d.wait_lines("udp", 1.0, Duration::from_secs(10));
}
