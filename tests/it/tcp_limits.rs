//! statsd over TCP at its limits, and the open-file limit: an idle
//! connection is closed after `ingest.tcp_idle_timeout_secs`, a client beyond
//! `ingest.tcp_max_connections` is closed at once, the daemon raises its
//! soft RLIMIT_NOFILE at start and `check-config` warns when the caps cannot
//! fit in it.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{run, sample_config_on_port_0, wait_for, Daemon, TempDir};

/// The sample config on port 0 with each `(from, to)` replaced once.
fn config(edits: &[(&str, &str)]) -> String {
    let mut text = sample_config_on_port_0();
    for (from, to) in edits {
        assert_eq!(
            text.matches(from).count(),
            1,
            "config.toml should hold `{from}` once; update this test"
        );
        text = text.replacen(from, to, 1);
    }
    text
}

fn gauge(d: &Daemon) -> Option<f64> {
    d.scrape().value("rollstat_tcp_connections", &[])
}

fn closed(d: &Daemon, reason: &str) -> Option<f64> {
    d.scrape().value(
        "rollstat_tcp_connections_closed_total",
        &[("reason", reason)],
    )
}

/// Reads from `c` until the server closes it (EOF, or a reset), failing
/// after 10 s.
fn expect_closed_by_server(c: &mut TcpStream, what: &str) {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    match c.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Ok(n) => panic!("{what}: the server sent {n} bytes instead of closing"),
        Err(e) => panic!("{what}: the server did not close the connection within 10 s ({e})"),
    }
}

#[test]
fn an_idle_tcp_connection_is_closed_after_the_timeout_and_its_last_line_applied() {
    let d = Daemon::start_with(&config(&[(
        "tcp_idle_timeout_secs = 600",
        "tcp_idle_timeout_secs = 1",
    )]));
    let mut c = TcpStream::connect(d.tcp).unwrap();
    let sent = Instant::now();
    // The second line has no newline: it is applied when the connection ends.
    c.write_all(b"it.idle.a:1|c\nit.idle.b:2|c").unwrap();
    expect_closed_by_server(&mut c, "idle for longer than tcp_idle_timeout_secs = 1");
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(500),
        "closed after {waited:?}, well before the 1 s idle timeout"
    );
    d.wait_lines("tcp", 2.0, Duration::from_secs(10));
    let limit = Duration::from_secs(10);
    wait_for(limit, "idle_timeout closes", &Some(1.0), || {
        closed(&d, "idle_timeout")
    });
    wait_for(limit, "no open TCP connection", &Some(0.0), || gauge(&d));
    assert_eq!(closed(&d, "connection_cap"), Some(0.0));
}

#[test]
fn beyond_the_tcp_connection_cap_a_client_is_closed_at_once_and_counted() {
    let d = Daemon::start_with(&config(&[(
        "tcp_max_connections = 1024",
        "tcp_max_connections = 3",
    )]));
    let limit = Duration::from_secs(10);
    let mut open: Vec<TcpStream> = (0..3)
        .map(|i| {
            let mut c = TcpStream::connect(d.tcp).unwrap();
            c.write_all(format!("it.cap.c{i}:1|c\n").as_bytes())
                .unwrap();
            c
        })
        .collect();
    d.wait_lines("tcp", 3.0, limit);
    wait_for(limit, "3 open TCP connections", &Some(3.0), || gauge(&d));

    let mut fourth = TcpStream::connect(d.tcp).unwrap();
    expect_closed_by_server(
        &mut fourth,
        "a 4th connection beyond tcp_max_connections = 3",
    );
    wait_for(limit, "one connection_cap close", &Some(1.0), || {
        closed(&d, "connection_cap")
    });
    assert_eq!(
        gauge(&d),
        Some(3.0),
        "the refused client was never counted open"
    );

    // The three served ones still count their lines.
    for (i, c) in open.iter_mut().enumerate() {
        c.write_all(format!("it.cap.again{i}:1|c\n").as_bytes())
            .unwrap();
    }
    d.wait_lines("tcp", 6.0, limit);

    // One leaves: a new client is served again.
    drop(open.remove(0));
    wait_for(limit, "2 open TCP connections", &Some(2.0), || gauge(&d));
    let mut fifth = TcpStream::connect(d.tcp).unwrap();
    fifth.write_all(b"it.cap.fifth:1|c\n").unwrap();
    d.wait_lines("tcp", 7.0, limit);
    wait_for(limit, "3 open TCP connections", &Some(3.0), || gauge(&d));
    assert_eq!(closed(&d, "connection_cap"), Some(1.0));
    assert_eq!(closed(&d, "idle_timeout"), Some(0.0));
}

/// `sh -c SCRIPT rollstat ARGS…`: the script ends with `exec "$0" "$@"`.
fn under_shell(script: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).arg(env!("CARGO_BIN_EXE_rollstat"));
    c
}

#[test]
fn check_config_warns_when_the_connection_caps_exceed_the_open_file_limit() {
    let dir = TempDir::new("fdlimit");
    let huge = dir.path().join("huge.toml");
    std::fs::write(
        &huge,
        config(&[
            (
                "tcp_max_connections = 1024",
                "tcp_max_connections = 1000000",
            ),
            ("max_connections = 1024", "max_connections = 1000000"),
        ]),
    )
    .unwrap();
    let sample = dir.path().join("sample.toml");
    std::fs::write(&sample, sample_config_on_port_0()).unwrap();
    let check = |file: &std::path::Path| {
        run(
            under_shell(r#"ulimit -n 256 && exec "$0" check-config "$1""#).arg(file),
            b"",
            Duration::from_secs(10),
        )
    };

    let out = check(&huge);
    assert!(out.status.success(), "a warning is not an error: {out:?}");
    assert!(out.stdout.contains(": ok ("), "{out:?}");
    for want in [
        "warning",
        "ingest.tcp_max_connections = 1000000",
        "http.max_connections = 1000000",
        "at most 256",
        "Lower ingest.tcp_max_connections and http.max_connections",
    ] {
        assert!(
            out.stderr.contains(want),
            "no {want:?} in stderr:\n{}",
            out.stderr
        );
    }

    // The shipped caps under 256: raising the limit is the advice.
    let out = check(&sample);
    assert!(out.status.success(), "{out:?}");
    for want in [
        "warning",
        "ingest.tcp_max_connections = 1024",
        "http.max_connections = 1024",
        "ulimit -n",
        "LimitNOFILE=",
    ] {
        assert!(
            out.stderr.contains(want),
            "no {want:?} in stderr:\n{}",
            out.stderr
        );
    }
}

/// This test process's hard RLIMIT_NOFILE, as the shell reports it.
fn hard_nofile() -> Option<u64> {
    let out = run(
        Command::new("sh").arg("-c").arg("ulimit -Hn"),
        b"",
        Duration::from_secs(10),
    );
    out.stdout.trim().parse().ok()
}

#[test]
fn the_daemon_raises_its_open_file_limit_at_start_and_logs_it() {
    // `None` is "unlimited": the daemon stops at 1,048,576.
    let want = hard_nofile().map_or(1 << 20, |h| h.min(1 << 20));
    assert!(
        want > 256,
        "the hard open-file limit here ({want}) leaves nothing to raise; run with `ulimit -Hn` above 256"
    );
    let d = Daemon::start_wrapped(
        &sample_config_on_port_0(),
        &["sh", "-c", r#"ulimit -Sn 256 && exec "$0" "$@""#],
    );
    let log = d.log();
    let line = log
        .lines()
        .find(|l| l.contains("Raised the open-file limit"))
        .unwrap_or_else(|| panic!("no 'Raised the open-file limit' line in:\n{log}"));
    for field in [
        "before=256".to_string(),
        format!("asked={want}"),
        format!("granted={want}"),
    ] {
        assert!(line.contains(&field), "no {field} in {line:?}");
    }
    // And the kernel agrees.
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.pid())).unwrap();
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .unwrap_or_else(|| panic!("no 'Max open files' in:\n{limits}"));
    assert_eq!(soft, want.to_string(), "{limits}");
    if want >= 2 * 1024 + 64 + 8 {
        assert!(
            !log.contains("Open-file limit too low"),
            "the shipped caps fit in {want}:\n{log}"
        );
    }
}
