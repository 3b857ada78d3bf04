//! Service packaging: the real binary under systemd's readiness
//! protocol and the container health probe.
//!
//! * `NOTIFY_SOCKET` pointing at a datagram socket the test binds: `READY=1`
//!   arrives once /healthz answers, with a `STATUS=` naming the listeners; a
//!   SIGHUP gives `RELOADING=1` (with `MONOTONIC_USEC`) then `READY=1` with
//!   the reload's outcome, a refused file's too; SIGTERM gives `STOPPING=1`.
//! * `rollstat probe`: exit 0 on the daemon's /-/healthy, 1 with the reason
//!   on a 404, on a dead port (quickly), and on https.

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{free_port, run, Daemon, TempDir, TEST_CONFIG};

/// The next notification on `rx`, waiting at most `limit`.
fn next(rx: &UnixDatagram, limit: Duration, what: &str) -> String {
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no notification within {limit:?}: {what}");
        rx.set_read_timeout(Some(left)).unwrap();
        match rx.recv(&mut buf) {
            Ok(n) => return String::from_utf8(buf[..n].to_vec()).expect("UTF-8 notification"),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("recv on the notify socket: {e}"),
        }
    }
}

/// The value of `key` in a notification, if present.
fn field<'m>(msg: &'m str, key: &str) -> Option<&'m str> {
    msg.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

#[test]
fn ready_reloading_and_stopping_reach_notify_socket() {
    let dir = TempDir::new("notify");
    let path = dir.path().join("notify.sock");
    let rx = UnixDatagram::bind(&path).expect("bind the notify socket");
    let mut d = Daemon::start_env(TEST_CONFIG, &[("NOTIFY_SOCKET", path.to_str().unwrap())]);
    let limit = Duration::from_secs(10);

    let ready = next(&rx, limit, "READY=1 at start");
    assert_eq!(field(&ready, "READY"), Some("1"), "{ready:?}");
    // Sent only once serving: /healthz answers now, not eventually.
    assert_eq!(d.get("/healthz", &[]).status, 200);
    let status = field(&ready, "STATUS").expect("a STATUS with READY");
    assert!(status.starts_with("serving: "), "{status}");
    assert!(
        status.contains(&format!("statsd udp {}", d.udp)),
        "{status}"
    );
    assert!(status.contains(&format!("http {}", d.http)), "{status}");

    // A good reload: RELOADING=1 with the monotonic time, then READY=1.
    d.signal("HUP");
    let reloading = next(&rx, limit, "RELOADING=1 at the first SIGHUP");
    assert_eq!(field(&reloading, "RELOADING"), Some("1"), "{reloading:?}");
    let usec: u64 = field(&reloading, "MONOTONIC_USEC")
        .expect("MONOTONIC_USEC with RELOADING=1")
        .parse()
        .expect("MONOTONIC_USEC in decimal");
    assert!(usec > 0);
    let done = next(&rx, limit, "READY=1 after the first SIGHUP");
    assert_eq!(field(&done, "READY"), Some("1"), "{done:?}");
    let status = field(&done, "STATUS").unwrap();
    assert!(status.contains("config reloaded"), "{status}");
    assert!(status.contains(&format!("http {}", d.http)), "{status}");

    // A refused file: still READY=1 (the old config serves), and the
    // STATUS says why, on one line.
    std::fs::write(&d.config, "[series]\nno_such_key = 1\n").unwrap();
    d.signal("HUP");
    let reloading = next(&rx, limit, "RELOADING=1 at the second SIGHUP");
    assert_eq!(field(&reloading, "RELOADING"), Some("1"), "{reloading:?}");
    let done = next(&rx, limit, "READY=1 after the refused reload");
    assert_eq!(field(&done, "READY"), Some("1"), "{done:?}");
    let status = field(&done, "STATUS").unwrap();
    assert!(status.contains("failed"), "{status}");
    assert!(status.contains("no_such_key"), "{status}");
    assert_eq!(d.get("/healthz", &[]).status, 200);

    d.signal("TERM");
    let stopping = next(&rx, limit, "STOPPING=1 at SIGTERM");
    assert_eq!(field(&stopping, "STOPPING"), Some("1"), "{stopping:?}");
    assert!(d.wait_exit(limit).success(), "{}", d.log());
}

#[test]
fn an_unusable_notify_socket_is_a_warning_and_the_daemon_serves() {
    let mut d = Daemon::start_env(TEST_CONFIG, &[("NOTIFY_SOCKET", "relative/notify")]);
    // An unusable value is a warning, and the daemon serves anyway.
    assert_eq!(d.get("/healthz", &[]).status, 200);
    assert!(
        d.log().contains("NOTIFY_SOCKET=relative/notify"),
        "{}",
        d.log()
    );
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(10)).success());
}

/// What `rollstat probe <args>` did.
#[derive(Debug)]
struct Probe {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn probe(args: &[&str]) -> Probe {
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("probe")
            .args(args),
        b"",
        Duration::from_secs(10),
    );
    Probe {
        code: out.status.code(),
        stdout: out.stdout,
        stderr: out.stderr,
    }
}

#[test]
fn probe_passes_on_a_healthy_daemon_and_fails_with_the_reason() {
    let d = Daemon::start();
    let ok = probe(&["--url", &format!("http://{}/-/healthy", d.http)]);
    assert_eq!(ok.code, Some(0), "{ok:?}");
    assert!(ok.stdout.contains("HTTP 200"), "{ok:?}");

    let missing = probe(&["--url", &format!("http://{}/no/such/route", d.http)]);
    assert_eq!(missing.code, Some(1), "{missing:?}");
    assert!(missing.stderr.contains("HTTP 404"), "{missing:?}");

    // Nothing listens: refused at once, well within the timeout.
    let started = Instant::now();
    let dead = probe(&[
        "--url",
        &format!("http://127.0.0.1:{}/-/healthy", free_port()),
        "--timeout-ms",
        "2000",
    ]);
    assert_eq!(dead.code, Some(1), "{dead:?}");
    assert!(dead.stderr.contains("cannot connect"), "{dead:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    let https = probe(&["--url", &format!("https://{}/-/healthy", d.http)]);
    assert_eq!(https.code, Some(1), "{https:?}");
    assert!(https.stderr.contains("plain HTTP only"), "{https:?}");
}

#[test]
fn probe_gives_up_on_a_silent_port_at_its_timeout() {
    // Accepts (the kernel's backlog) but never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    let out = probe(&[
        "--url",
        &format!("http://{}/-/healthy", silent.local_addr().unwrap()),
        "--timeout-ms",
        "300",
    ]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("within 300 ms"), "{out:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_unit_passes_systemd_analyze_verify() {
    // contrib/systemd/verify.sh says SKIPPED and exits 0 without
    // systemd-analyze; the test says so too rather than pass silently.
    let script = crate::support::repo().join("contrib/systemd/verify.sh");
    let out = run(
        Command::new(&script).env("ROLLSTAT_BIN", env!("CARGO_BIN_EXE_rollstat")),
        b"",
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "{}\n{}\n{}",
        script.display(),
        out.stdout,
        out.stderr
    );
    if out.stderr.contains("SKIPPED") {
        eprintln!("{}", out.stderr.trim_end());
        return;
    }
    assert!(out.stdout.contains("ok: systemd-analyze verify"), "{out:?}");
}

#[test]
fn a_sigterm_right_after_ready_is_a_graceful_stop() {
    // systemctl stop may follow READY=1 at once: the SIGTERM handler must
    // already be installed then (it was installed only later, and the
    // signal's default action killed the daemon with nothing drained).
    for _ in 0..5 {
        let mut d = Daemon::start();
        d.signal("TERM");
        let st = d.wait_exit(Duration::from_secs(10));
        assert!(st.success(), "{st}: {}", d.log());
        assert!(d.log().contains("rollstat stopped"), "{}", d.log());
    }
}
