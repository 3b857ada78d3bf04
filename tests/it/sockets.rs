//! The statsd listeners' access control from outside: the Unix
//! socket's file (mode, group, a stale one replaced, a regular file never
//! touched, removed at SIGTERM) and `[ingest] allowed_sources` on UDP and TCP
//! (senders bound to 127.0.0.2: Linux loopback answers on all of
//! 127.0.0.0/8, so one daemon sees an allowed and a refused source).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::{run, Daemon, TempDir, TEST_CONFIG};

/// [`TEST_CONFIG`] with the Unix socket at `sock` and `extra` lines in
/// `[listen]`.
fn unix_config(sock: &Path, extra: &str) -> String {
    TEST_CONFIG.replace(
        "http = \"127.0.0.1:0\"",
        &format!(
            "http = \"127.0.0.1:0\"\nstatsd_unix = \"{}\"\n{extra}",
            sock.display()
        ),
    )
}

/// The group id files made by this process get (its effective group).
fn own_gid(dir: &Path) -> u32 {
    let probe = dir.join("gid-probe");
    std::fs::write(&probe, b"").unwrap();
    let gid = std::fs::metadata(&probe).unwrap().gid();
    std::fs::remove_file(&probe).unwrap();
    gid
}

/// A group this process may give a file that is not its own group: any
/// group as root (CI), else another group of the user (`id -G`).
fn other_group(dir: &Path) -> Option<(String, u32)> {
    let own = own_gid(dir);
    let root = std::fs::metadata(dir).unwrap().uid() == 0;
    let mine: Vec<u32> =
        String::from_utf8_lossy(&Command::new("id").arg("-G").output().ok()?.stdout)
            .split_whitespace()
            .filter_map(|g| g.parse().ok())
            .collect();
    std::fs::read_to_string("/etc/group")
        .ok()?
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?.to_string();
            let gid = f.nth(1)?.parse::<u32>().ok()?;
            Some((name, gid))
        })
        .find(|(_, gid)| *gid != own && (root || mine.contains(gid)))
}

fn socket_meta(path: &Path) -> std::fs::Metadata {
    let m = std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        m.file_type().is_socket(),
        "{} is not a socket",
        path.display()
    );
    m
}

#[test]
fn the_unix_socket_has_its_mode_and_group_serves_and_is_removed_at_sigterm() {
    let dir = TempDir::new("sock-mode");
    let sock = dir.path().join("statsd.sock");
    let group = other_group(dir.path());
    let group_line = match &group {
        Some((name, _)) => format!("statsd_unix_group = \"{name}\""),
        None => {
            eprintln!("no second group to give the socket: checking the mode only");
            String::new()
        }
    };
    let cfg = unix_config(&sock, &format!("statsd_unix_mode = \"0640\"\n{group_line}"));
    let mut d = Daemon::start_with(&cfg);
    let m = socket_meta(&sock);
    assert_eq!(m.permissions().mode() & 0o7777, 0o640);
    let want_gid = group.as_ref().map_or_else(|| own_gid(dir.path()), |g| g.1);
    assert_eq!(m.gid(), want_gid, "the socket's group");
    // Nothing else was left in the directory (the private one it was
    // prepared in is gone).
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["statsd.sock"]);

    UnixDatagram::unbound()
        .unwrap()
        .send_to(b"sock.m:1|c\n", &sock)
        .unwrap();
    d.wait_lines("unix", 1.0, Duration::from_secs(10));

    d.signal("TERM");
    let st = d.wait_exit(Duration::from_secs(10));
    assert_eq!(st.code(), Some(0), "{}", d.log());
    assert!(
        std::fs::symlink_metadata(&sock).is_err(),
        "the socket file is still there after SIGTERM"
    );
    assert!(
        d.log().contains("Removed the statsd Unix socket file"),
        "{}",
        d.log()
    );
}

#[test]
fn a_stale_socket_from_a_crashed_run_is_replaced_with_the_default_mode_0660() {
    let dir = TempDir::new("sock-stale");
    let sock = dir.path().join("statsd.sock");
    // Bound and closed: the file stays, nothing serves it.
    drop(UnixDatagram::bind(&sock).unwrap());
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    let d = Daemon::start_with(&unix_config(&sock, ""));
    let m = socket_meta(&sock);
    assert_eq!(m.permissions().mode() & 0o7777, 0o660);
    assert_eq!(m.gid(), own_gid(dir.path()));
    assert!(
        d.log().contains("Removed a stale statsd Unix socket"),
        "{}",
        d.log()
    );
    UnixDatagram::unbound()
        .unwrap()
        .send_to(b"stale.m:1|c\n", &sock)
        .unwrap();
    d.wait_lines("unix", 1.0, Duration::from_secs(10));
}

/// Starts the binary on `cfg`, which must fail at start; returns stderr.
fn refused_start(dir: &Path, cfg: &str) -> String {
    let file = dir.join("rollstat.toml");
    std::fs::write(&file, cfg).unwrap();
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("--config")
            .arg(&file),
        b"",
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(1), "{}{}", out.stdout, out.stderr);
    out.stderr
}

#[test]
fn a_regular_file_or_a_served_socket_at_the_path_refuses_the_start_and_stays() {
    let dir = TempDir::new("sock-refuse");
    let sock = dir.path().join("statsd.sock");
    std::fs::write(&sock, b"not a socket").unwrap();
    let err = refused_start(dir.path(), &unix_config(&sock, ""));
    assert!(err.contains("listen.statsd_unix"), "{err}");
    assert!(err.contains("is a regular file, not a socket"), "{err}");
    assert_eq!(std::fs::read(&sock).unwrap(), b"not a socket");
    std::fs::remove_file(&sock).unwrap();

    // Someone else's live socket is not stolen either.
    let theirs = UnixDatagram::bind(&sock).unwrap();
    let err = refused_start(dir.path(), &unix_config(&sock, ""));
    assert!(err.contains("another process is serving"), "{err}");
    assert!(err.contains("listen.statsd_unix"), "{err}");
    UnixDatagram::unbound()
        .unwrap()
        .send_to(b"still.theirs", &sock)
        .expect("their socket still receives");
    let mut buf = [0u8; 32];
    assert_eq!(theirs.recv(&mut buf).unwrap(), 12);
}

#[test]
fn check_config_names_an_unknown_group_a_missing_directory_and_a_bad_mode() {
    let dir = TempDir::new("sock-check");
    let file = dir.path().join("bad.toml");
    let cfg = unix_config(
        &dir.path().join("statsd.sock"),
        "statsd_unix_group = \"no-such-group-rollstat\"",
    );
    std::fs::write(&file, &cfg).unwrap();
    let check = |file: &PathBuf| {
        run(
            Command::new(env!("CARGO_BIN_EXE_rollstat"))
                .arg("check-config")
                .arg(file),
            b"",
            Duration::from_secs(10),
        )
    };
    let out = check(&file);
    assert_eq!(out.status.code(), Some(2), "{}{}", out.stdout, out.stderr);
    let line = cfg
        .lines()
        .position(|l| l.starts_with("statsd_unix_group"))
        .unwrap()
        + 1;
    assert!(
        out.stderr.contains(&format!(
            "line {line}: `listen.statsd_unix_group`: no group named `no-such-group-rollstat`"
        )),
        "{}",
        out.stderr
    );

    let cfg = unix_config(
        &dir.path().join("absent/statsd.sock"),
        "statsd_unix_mode = \"0866\"",
    );
    std::fs::write(&file, &cfg).unwrap();
    let out = check(&file);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    for says in [
        "`listen.statsd_unix`: its directory",
        "`listen.statsd_unix_mode`: `0866` is not an octal mode",
    ] {
        assert!(
            out.stderr.contains(says),
            "{says:?} not in:\n{}",
            out.stderr
        );
    }
}

/// A UDP socket sending from `ip`.
fn udp_from(ip: &str) -> UdpSocket {
    UdpSocket::bind((ip, 0)).unwrap()
}

/// A TCP connection to `to` from `ip`.
fn tcp_from(ip: [u8; 4], to: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&SocketAddr::from((ip, 0)).into()).unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

#[test]
fn allowed_sources_drop_udp_and_refuse_tcp_from_elsewhere_and_count_them() {
    let cfg = TEST_CONFIG.replace(
        "[ingest]\n",
        "[ingest]\nallowed_sources = [\"10.0.0.0/8\", \"127.0.0.2\"]\n",
    );
    let d = Daemon::start_with(&cfg);

    // UDP: 127.0.0.1 is outside the list, 127.0.0.2 inside.
    udp_from("127.0.0.1")
        .send_to(b"src.out:1|c\n", d.udp)
        .unwrap();
    udp_from("127.0.0.2")
        .send_to(b"src.in:1|c\n", d.udp)
        .unwrap();
    // TCP likewise: the refused client is closed at accept.
    let mut out = tcp_from([127, 0, 0, 1], d.tcp);
    let _ = out.write_all(b"src.tcp_out:1|c\n");
    let mut byte = [0u8; 1];
    out.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(
        !matches!(out.read(&mut byte), Ok(n) if n > 0),
        "the refused client was not closed"
    );
    let mut inside = tcp_from([127, 0, 0, 2], d.tcp);
    inside.write_all(b"src.tcp_in:1|c\n").unwrap();
    drop(inside);

    let s = d.wait_scrape(
        Duration::from_secs(10),
        "one line each way in, one drop each way out",
        |s| {
            s.value("rollstat_ingest_lines_total", &[("transport", "udp")]) == Some(1.0)
                && s.value("rollstat_ingest_lines_total", &[("transport", "tcp")]) == Some(1.0)
                && s.value(
                    "rollstat_udp_datagrams_dropped_total",
                    &[("reason", "source_not_allowed")],
                ) == Some(1.0)
                && s.value(
                    "rollstat_tcp_connections_closed_total",
                    &[("reason", "source_not_allowed")],
                ) == Some(1.0)
        },
    );
    assert_eq!(s.must("src_in_total", &[]), 1.0);
    assert_eq!(s.must("src_tcp_in_total", &[]), 1.0);
    assert_eq!(s.value("src_out_total", &[]), None);
    assert_eq!(s.value("src_tcp_out_total", &[]), None);
    // Dropped before parsing: not a packet, not a rejected line.
    assert_eq!(
        s.must("rollstat_ingest_packets_total", &[("transport", "udp")]),
        1.0
    );
    assert_eq!(s.sum("rollstat_ingest_rejected_lines_total"), 0.0);
}

#[test]
fn without_allowed_sources_every_loopback_sender_is_applied() {
    let d = Daemon::start();
    udp_from("127.0.0.1")
        .send_to(b"any.a:1|c\n", d.udp)
        .unwrap();
    udp_from("127.0.0.2")
        .send_to(b"any.b:1|c\n", d.udp)
        .unwrap();
    let mut t = tcp_from([127, 0, 0, 3], d.tcp);
    t.write_all(b"any.c:1|c\n").unwrap();
    drop(t);
    let s = d.wait_scrape(Duration::from_secs(10), "3 lines", |s| {
        s.value("rollstat_ingest_lines_total", &[("transport", "udp")]) == Some(2.0)
            && s.value("rollstat_ingest_lines_total", &[("transport", "tcp")]) == Some(1.0)
    });
    assert_eq!(
        s.must(
            "rollstat_udp_datagrams_dropped_total",
            &[("reason", "source_not_allowed")]
        ),
        0.0
    );
}
