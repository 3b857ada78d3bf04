//! The process from outside: config checking, signals, reloads, and the
//! the getting-started page's check on the sample config's shape.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{repo, run, sample_config_on_port_0, wait_true, Daemon, TempDir, TEST_CONFIG};

fn rollstat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rollstat"))
}

#[test]
fn check_config_accepts_the_sample_config() {
    let out = run(
        rollstat()
            .arg("check-config")
            .arg(repo().join("config.toml")),
        b"",
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("ok (2 window(s), 3 mapping rule(s))"),
        "{}",
        out.stdout
    );
}

#[test]
fn check_config_lists_every_problem_and_exits_2() {
    let dir = TempDir::new("badcfg");
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[listen]\nhttp = \"not an address\"\n\n[ingest]\nudp_readers = 0\ncolour = \"blue\"\n\n\
         [[windows]]\nname = \"w\"\nbuckets = 0\ninterval_ms = 1000\n",
    )
    .unwrap();
    let out = run(
        rollstat().arg("check-config").arg(&bad),
        b"",
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2), "{}{}", out.stdout, out.stderr);
    let problems: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.trim_start().starts_with(&*bad.to_string_lossy()))
        .collect();
    assert!(
        problems.len() >= 4,
        "expected every problem listed:\n{}",
        out.stderr
    );
    for key in ["http", "udp_readers", "colour", "buckets"] {
        assert!(
            out.stderr.contains(key),
            "no problem names `{key}`:\n{}",
            out.stderr
        );
    }
    // A missing file is a problem too, not a panic.
    let out = run(
        rollstat()
            .arg("check-config")
            .arg(dir.path().join("absent.toml")),
        b"",
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot read the file"),
        "{}",
        out.stderr
    );
}

/// The totals the daemon logs once everything has stopped, by transport.
pub(crate) fn stop_totals(log: &str) -> std::collections::BTreeMap<String, u64> {
    let line = strip_ansi(log)
        .lines()
        .find(|l| l.contains("rollstat stopped"))
        .unwrap_or_else(|| panic!("no final totals in the log:\n{log}"))
        .to_string();
    line.split_whitespace()
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

pub(crate) fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ ... final byte in @..~
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn sigterm_stops_the_daemon_cleanly_after_processing_what_it_received() {
    let mut d = Daemon::start();
    d.send_udp(b"before.term:1|c");
    d.wait_lines("udp", 1.0, Duration::from_secs(10));
    // Datagrams, and TCP lines (the last without a newline) that the daemon
    // has been sent but not necessarily read when the signal arrives.
    for _ in 0..100 {
        d.send_udp(b"at.term:1|c");
    }
    let mut tcp = std::net::TcpStream::connect(d.tcp).unwrap();
    std::io::Write::write_all(&mut tcp, b"tcp.term:1|c\npartial:1|c").unwrap();
    // The TCP bytes must have reached the daemon's socket before the signal
    // (loopback delivers at once; give the accept a bounded moment).
    d.wait_scrape(Duration::from_secs(10), "the TCP read", |s| {
        s.value("rollstat_ingest_packets_total", &[("transport", "tcp")]) == Some(1.0)
    });
    d.signal("TERM");
    let st = d.wait_exit(Duration::from_secs(10));
    assert_eq!(st.code(), Some(0), "exit status {st}; log:\n{}", d.log());
    let log = d.log();
    assert!(log.contains("Shutting down"), "{log}");
    let totals = stop_totals(&log);
    assert_eq!(totals.get("udp"), Some(&101), "{totals:?}\n{log}");
    assert_eq!(totals.get("tcp"), Some(&2), "{totals:?}\n{log}");
    assert!(
        std::net::TcpStream::connect_timeout(&d.http, Duration::from_secs(1)).is_err(),
        "HTTP still accepts connections after exit"
    );
    drop(tcp);
}

#[test]
fn sigterm_applies_the_unterminated_last_line_of_every_open_tcp_connection() {
    // UDP off, so nothing else slows the stop down.
    let mut d = Daemon::start_with(
        &TEST_CONFIG.replace("statsd_udp = \"127.0.0.1:0\"", "statsd_udp = \"\""),
    );
    let conns: Vec<std::net::TcpStream> = (0..20)
        .map(|i| {
            let mut c = std::net::TcpStream::connect(d.tcp).unwrap();
            std::io::Write::write_all(&mut c, format!("conn.{i}:1|c").as_bytes()).unwrap();
            c
        })
        .collect();
    d.wait_scrape(Duration::from_secs(10), "20 TCP reads", |s| {
        s.value("rollstat_ingest_packets_total", &[("transport", "tcp")]) == Some(20.0)
    });
    d.signal("TERM");
    let st = d.wait_exit(Duration::from_secs(10));
    assert_eq!(st.code(), Some(0), "exit status {st}; log:\n{}", d.log());
    let totals = stop_totals(&d.log());
    assert_eq!(totals.get("tcp"), Some(&20), "{totals:?}\n{}", d.log());
    drop(conns);
}

#[test]
fn a_bad_reload_keeps_serving_and_a_good_one_recovers_over_http_and_sighup() {
    let d = Daemon::start();
    let success = |d: &Daemon| d.scrape().must("rollstat_config_last_reload_success", &[]);
    assert_eq!(success(&d), 1.0);

    std::fs::write(&d.config, "[[windows]]\nname = \"x\"\nbuckets = 0\n").unwrap();
    let r = d.post("/-/reload", "text/plain", b"");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains("previous config stays in force"),
        "{}",
        r.text()
    );
    let s = d.scrape();
    assert_eq!(s.must("rollstat_config_last_reload_success", &[]), 0.0);
    assert_eq!(
        s.must("rollstat_config_reloads_total", &[("result", "error")]),
        1.0
    );
    // Still serving, on the old windows.
    assert_eq!(d.get("/healthz", &[]).text(), "ok\n");
    d.send_udp(b"after.bad:1|c");
    let s = d.wait_lines("udp", 1.0, Duration::from_secs(10));
    assert_eq!(
        s.must(
            "rollstat_window_samples",
            &[("metric", "after.bad"), ("window", "5s")]
        ),
        1.0
    );

    // A good file over HTTP: back to 1.
    std::fs::write(&d.config, TEST_CONFIG).unwrap();
    let r = d.post("/-/reload", "text/plain", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(success(&d), 1.0);

    // The same through SIGHUP: bad, then good with a new window that new
    // series get.
    std::fs::write(&d.config, "this is not toml").unwrap();
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the failed SIGHUP reload", |s| {
        s.value("rollstat_config_last_reload_success", &[]) == Some(0.0)
    });
    let with_10s =
        TEST_CONFIG.replace("name = \"2s\"\nbuckets = 2", "name = \"10s\"\nbuckets = 10");
    assert_ne!(with_10s, TEST_CONFIG);
    std::fs::write(&d.config, with_10s).unwrap();
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the good SIGHUP reload", |s| {
        s.value("rollstat_config_last_reload_success", &[]) == Some(1.0)
            && s.value("rollstat_config_reloads_total", &[("result", "ok")]) == Some(2.0)
    });
    d.send_udp(b"after.good:1|c");
    let s = d.wait_lines("udp", 2.0, Duration::from_secs(10));
    assert_eq!(
        s.must(
            "rollstat_window_samples",
            &[("metric", "after.good"), ("window", "10s")]
        ),
        1.0
    );
    assert_eq!(
        s.must("rollstat_config_reloads_total", &[("result", "error")]),
        2.0
    );
}

#[test]
fn the_readme_check_works_on_the_sample_config() {
    // The daemon starts after this instant and is up before start_with
    // returns; a second later it has been up for at least a second.
    let spawned = Instant::now();
    let d = Daemon::start_with(&sample_config_on_port_0());
    std::thread::sleep(Duration::from_secs(1));
    d.send_udp(b"api.requests:1|c|#route:/x\n");
    let s = d.wait_lines("udp", 1.0, Duration::from_secs(10));
    let up_at_most = spawned.elapsed().as_secs_f64();
    let rate = s.must(
        "rollstat_window_rate",
        &[
            ("metric", "api.requests"),
            ("window", "10s"),
            ("route", "/x"),
        ],
    );
    // One increment over the time the window has been watched: 10 s once
    // the daemon has been up that long (0.1/s), the
    // time it has been up until then (here between 1 s and `up_at_most`).
    assert!(
        rate >= 1.0 / up_at_most.min(10.0) - 1e-9 && rate <= 1.0 + 1e-9,
        "rate {rate}, up between 1 and {up_at_most} s"
    );
    assert_eq!(s.must("api_requests_total", &[("route", "/x")]), 1.0);
    // The "1m" window ignores the bucket being filled; the sample shows
    // there once its bucket closes.
    d.wait_scrape(
        Duration::from_secs(3),
        "the 1m window to show the closed bucket",
        |s| {
            s.value(
                "rollstat_window_samples",
                &[
                    ("metric", "api.requests"),
                    ("window", "1m"),
                    ("route", "/x"),
                ],
            ) == Some(1.0)
        },
    );
    // The sample mappings apply: debug.** is dropped.
    d.send_udp(b"debug.noise:1|c\n");
    let s = d.wait_scrape(Duration::from_secs(10), "the drop rule", |s| {
        s.value("rollstat_ingest_dropped_by_mapping_total", &[]) == Some(1.0)
    });
    assert_eq!(s.value("debug_noise_total", &[]), None);
}

#[test]
fn a_reload_moves_existing_series_onto_the_new_windows_and_rules() {
    let d = Daemon::start();
    d.send_udp(b"replan.me:1|c\nreplan.old:1|c\n");
    let s = d.wait_lines("udp", 2.0, Duration::from_secs(10));
    let samples = |s: &crate::support::Scrape, metric: &str, window: &str| {
        s.value(
            "rollstat_window_samples",
            &[("metric", metric), ("window", window)],
        )
    };
    assert_eq!(samples(&s, "replan.me", "2s"), Some(1.0));

    // "2s" becomes "10s"; replan.old is renamed by a new rule.
    let cfg = format!(
        "{}\n[[mappings]]\nmatch = \"replan.old\"\nrename = \"replan.new\"\n",
        TEST_CONFIG.replace("name = \"2s\"\nbuckets = 2", "name = \"10s\"\nbuckets = 10")
    );
    std::fs::write(&d.config, cfg).unwrap();
    let r = d.post("/-/reload", "text/plain", b"");
    assert_eq!(r.status, 200, "{}", r.text());

    // No new line: the existing series shows the new window at once, keeps
    // the history of the unchanged "5s" window and its cumulative total.
    // The new window reads the shared ring from the start of the bucket
    // the reload fell in: it holds the line if it came in that same second.
    let s = d.scrape();
    let at_reload = samples(&s, "replan.me", "10s");
    assert!(
        matches!(at_reload, Some(x) if x == 0.0 || x == 1.0),
        "{:?}",
        s.by_label("rollstat_window_samples", "window")
    );
    let at_reload = at_reload.unwrap();
    assert_eq!(samples(&s, "replan.me", "2s"), None);
    assert_eq!(samples(&s, "replan.me", "5s"), Some(1.0));
    assert_eq!(s.must("replan_me_total", &[]), 1.0);
    // The renamed series is gone until its next line, which starts it fresh.
    assert_eq!(samples(&s, "replan.old", "5s"), None);
    assert_eq!(s.value("replan_old_total", &[]), None);
    for (outcome, n) in [("rewindowed", 1.0), ("removed", 1.0)] {
        assert_eq!(
            s.must("rollstat_series_replanned_total", &[("outcome", outcome)]),
            n,
            "{outcome}"
        );
    }
    d.send_udp(b"replan.me:1|c\nreplan.old:1|c\n");
    let s = d.wait_lines("udp", 4.0, Duration::from_secs(10));
    assert_eq!(samples(&s, "replan.me", "10s"), Some(at_reload + 1.0));
    assert_eq!(s.must("replan_me_total", &[]), 2.0);
    assert_eq!(samples(&s, "replan.new", "10s"), Some(1.0));
    assert_eq!(s.must("replan_new_total", &[]), 1.0);
}

/// A second stop signal (SIGTERM, then Ctrl-C's SIGINT) while the graceful
/// stop waits (here for a client that does not read its /metrics body)
/// exits at once with status 1.
#[test]
fn a_second_sigterm_during_the_graceful_stop_exits_at_once() {
    let mut d = Daemon::start();
    // A body far larger than the socket buffers.
    const SERIES: usize = 20_000;
    d.create_counters("slow", SERIES);
    let mut stuck = std::net::TcpStream::connect(d.http).unwrap();
    std::io::Write::write_all(
        &mut stuck,
        b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    )
    .unwrap();
    let mut first = [0u8; 64];
    std::io::Read::read_exact(&mut stuck, &mut first).unwrap();
    d.signal("TERM");
    // The graceful stop waits up to 5 s for that response.
    std::thread::sleep(Duration::from_millis(500));
    assert!(d.alive(), "stopped before the second signal:\n{}", d.log());
    let t = std::time::Instant::now();
    // Ctrl-C (SIGINT) as the second: either signal counts.
    d.signal("INT");
    let st = d.wait_exit(Duration::from_secs(10));
    assert_eq!(st.code(), Some(1), "exit status {st}; log:\n{}", d.log());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(d.log().contains("second stop signal"), "{}", d.log());
    drop(stuck);
}

/// `/-/healthy` and `/-/ready` beside
/// `/healthz`, open whatever the route groups; `process_*` metrics; the
/// task panic counter at zero; readiness follows the shared store.
#[test]
fn healthy_ready_and_process_metrics_on_the_shipped_config() {
    let d = Daemon::start_with(&sample_config_on_port_0());
    let r = d.get("/-/healthy", &[]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "rollstat is Healthy.\n")
    );
    let r = d.get("/-/ready", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "rollstat is Ready.\n"));
    let s = d.scrape();
    for name in [
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(s.must(name, &[]) > 0.0, "{name}");
    }
    assert!(s.value("process_cpu_seconds_total", &[]).is_some());
    // The wall clock and the daemon's agree on a machine nobody stepped.
    let offset = d
        .wait_scrape(Duration::from_secs(10), "the first clock check", |s| {
            s.value("rollstat_clock_offset_seconds", &[]).is_some()
        })
        .must("rollstat_clock_offset_seconds", &[]);
    assert!(offset.abs() < 0.5, "{offset}");
    for task in [
        "sweep",
        "tick",
        "store_sync",
        "clock",
        "sighup_reload",
        "udp_reader",
        "unix_reader",
    ] {
        assert_eq!(
            s.must("rollstat_task_panics_total", &[("task", task)]),
            0.0,
            "{task}"
        );
    }
    for transport in ["udp", "unix", "tcp"] {
        assert_eq!(
            s.must(
                "rollstat_shutdown_drain_deadline_total",
                &[("transport", transport)]
            ),
            0.0,
            "{transport}"
        );
    }
}

#[test]
fn ready_says_503_while_the_shared_store_is_unreachable() {
    // Nothing listens on port 1: the first window sync marks the store down.
    let cfg = format!(
        "{TEST_CONFIG}\n[[mappings]]\nmatch = \"shared.*\"\nshared = true\n\n[redis]\nurl = \"redis://127.0.0.1:1\"\ntimeout_ms = 50\nsync_interval_ms = 50\n"
    );
    let d = Daemon::start_with(&cfg);
    d.send_udp(b"shared.hits:1|c\n");
    wait_true(
        Duration::from_secs(10),
        "/-/ready to name the store",
        || d.get("/-/ready", &[]).text().contains("Redis"),
    );
    let r = d.get("/-/ready", &[]);
    assert!(
        r.text().contains("shared store (Redis) is unreachable"),
        "{}",
        r.text()
    );
    // Still alive, and still serving from local state.
    assert_eq!(d.get("/-/healthy", &[]).status, 200);
    assert_eq!(d.get("/healthz", &[]).status, 200);
}
