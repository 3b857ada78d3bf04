//! `[[relay]]`: two real daemons, the first relaying to the
//! second over UDP and over TCP. Every line the first accepts reaches the
//! second as sent (tags and sample rates included), counted the same on
//! both; a filter forwards only matching names; a destination that is down
//! costs the first daemon nothing of its own counts, only counted drops.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use crate::support::{run, Daemon, Scrape, TempDir, TEST_CONFIG};

const LIMIT: Duration = Duration::from_secs(20);

/// [`TEST_CONFIG`] with `relays` appended (each a `[[relay]]` body).
fn relaying(relays: &[String]) -> String {
    let mut c = TEST_CONFIG.to_string();
    for r in relays {
        c.push_str("\n[[relay]]\n");
        c.push_str(r);
        c.push('\n');
    }
    c
}

/// Sends `lines` to `to` over UDP, `per` lines a datagram, pausing a
/// little every 20 datagrams (a modest rate: loopback loses nothing).
fn send_udp(to: SocketAddr, lines: &[String], per: usize) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    for (i, chunk) in lines.chunks(per).enumerate() {
        let d: String = chunk.iter().map(|l| format!("{l}\n")).collect();
        s.send_to(d.as_bytes(), to).unwrap();
        if i % 20 == 19 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn relay_value(s: &Scrape, family: &str, relay: &str) -> f64 {
    s.must(family, &[("relay", relay)])
}

fn dropped(s: &Scrape, relay: &str, reason: &str) -> f64 {
    s.must(
        "rollstat_relay_lines_dropped_total",
        &[("relay", relay), ("reason", reason)],
    )
}

/// Waits until `d` has sent `n` lines to `relay` (drops would fail it).
fn wait_sent(d: &Daemon, relay: &str, n: f64) -> Scrape {
    d.wait_scrape(LIMIT, &format!("{n} lines relayed to {relay}"), |s| {
        let lost = s.sum_where("rollstat_relay_lines_dropped_total", "relay", relay);
        assert_eq!(lost, 0.0, "lines lost on the way to {relay}");
        let sent = relay_value(s, "rollstat_relay_lines_sent_total", relay);
        assert!(
            sent <= n,
            "{sent} lines relayed to {relay}, more than the {n} it takes"
        );
        sent == n
    })
}

#[test]
fn every_line_from_every_transport_reaches_a_second_rollstat_over_udp_and_over_tcp() {
    let dest = Daemon::start();
    let relay = Daemon::start_with(&relaying(&[
        format!("name = \"udp\"\naddress = \"{}\"", dest.udp),
        format!(
            "name = \"tcp\"\nprotocol = \"tcp\"\naddress = \"{}\"\nmax_datagram_bytes = 8192",
            dest.tcp
        ),
    ]));
    // 3000 counter lines with a tag and a sample rate, gauges and timers,
    // and lines the parser refuses (never relayed).
    let mut lines = Vec::new();
    for i in 0..3000 {
        lines.push(format!("relay.c:1|c|@0.5|#k:v{}", i % 3));
        if i % 10 == 0 {
            lines.push(format!("relay.t:{}|ms", i % 100));
        }
    }
    lines.push("relay.g:42|g".to_string());
    // SignalFx tags mid-name: read from the line rejoined, which is what
    // goes out (`[sfx=yes]relay.mid:1|c`, the same sample).
    lines.push("relay.[sfx=yes]mid:1|c".to_string());
    let udp_lines = lines.len() as f64;
    let mut mixed = lines.clone();
    mixed.push("not a statsd line".to_string());
    send_udp(relay.udp, &mixed, 25);
    // TCP and HTTP ingest on the first daemon are relayed too.
    let mut tcp = TcpStream::connect(relay.tcp).unwrap();
    tcp.write_all(b"relay.tcp:5|c\nrelay.tcp:5|c\n").unwrap();
    drop(tcp);
    let r = relay.post(
        "/api/v1/ingest",
        "text/plain",
        b"relay.http:7|c|#via:http\n",
    );
    assert_eq!(r.status, 200, "{}", r.text());

    let total = udp_lines + 3.0;
    relay.wait_lines("udp", udp_lines, LIMIT);
    let s = wait_sent(&relay, "udp", total);
    let s_tcp = wait_sent(&relay, "tcp", total);
    assert_eq!(relay_value(&s_tcp, "rollstat_relay_connected", "tcp"), 1.0);
    // Packed: far fewer datagrams than lines, none above 1400 bytes (the
    // bytes sent over the datagrams says so on average).
    let dgrams = relay_value(&s, "rollstat_relay_datagrams_sent_total", "udp");
    let bytes = relay_value(&s, "rollstat_relay_bytes_sent_total", "udp");
    assert!(
        dgrams < total / 20.0,
        "{dgrams} datagrams for {total} lines"
    );
    assert!(bytes / dgrams <= 1400.0);

    // The destination counts every relayed line: twice (UDP and TCP).
    let d = dest.wait_scrape(LIMIT, "every relayed line at the destination", |s| {
        s.value("rollstat_ingest_lines_total", &[("transport", "udp")]) == Some(total)
            && s.value("rollstat_ingest_lines_total", &[("transport", "tcp")]) == Some(total)
    });
    assert_eq!(d.sum("rollstat_ingest_rejected_lines_total"), 0.0);
    // The same values on both: tags and sample rates came through.
    let src = relay.scrape();
    for k in ["v0", "v1", "v2"] {
        let mine = src.must("relay_c_total", &[("k", k)]);
        assert_eq!(mine, 2000.0, "3000 / 3 lines at @0.5");
        assert_eq!(d.must("relay_c_total", &[("k", k)]), 2.0 * mine, "k={k}");
    }
    assert_eq!(d.must("relay_tcp_total", &[]), 20.0);
    assert_eq!(d.must("relay_http_total", &[("via", "http")]), 14.0);
    assert_eq!(d.must("relay_g", &[]), 42.0);
    assert_eq!(src.must("relay_mid_total", &[("sfx", "yes")]), 1.0);
    assert_eq!(d.must("relay_mid_total", &[("sfx", "yes")]), 2.0);
    assert_eq!(
        src.must(
            "rollstat_ingest_rejected_lines_total",
            &[("reason", "malformed_line")]
        ),
        1.0
    );
}

#[test]
fn a_filtered_relay_forwards_only_matching_names_and_after_mapping_skips_dropped_lines() {
    let dest = Daemon::start();
    let cfg = relaying(&[
        format!(
            "name = \"keep\"\naddress = \"{}\"\nmatch = \"keep.*\"",
            dest.udp
        ),
        format!(
            "name = \"mapped\"\nprotocol = \"tcp\"\naddress = \"{}\"\nafter_mapping = true",
            dest.tcp
        ),
    ]) + "\n[[mappings]]\nmatch = \"drop.**\"\naction = \"drop\"\n";
    let relay = Daemon::start_with(&cfg);
    let mut lines = Vec::new();
    for i in 0..300 {
        lines.push(format!("keep.a:{i}|g"));
        lines.push("other.b:1|c".to_string());
        lines.push("drop.me.x:1|c".to_string());
    }
    send_udp(relay.udp, &lines, 30);
    wait_sent(&relay, "keep", 300.0);
    wait_sent(&relay, "mapped", 600.0);
    let d = dest.wait_scrape(LIMIT, "the filtered lines at the destination", |s| {
        s.value("rollstat_ingest_lines_total", &[("transport", "udp")]) == Some(300.0)
            && s.value("rollstat_ingest_lines_total", &[("transport", "tcp")]) == Some(600.0)
    });
    // Only keep.* over UDP; keep.* and other.* over TCP; drop.* nowhere.
    assert_eq!(d.must("keep_a", &[]), 299.0);
    assert_eq!(d.must("other_b_total", &[]), 300.0);
    assert!(d.value("drop_me_x_total", &[]).is_none());
    assert_eq!(d.must("rollstat_ingest_dropped_by_mapping_total", &[]), 0.0);

    // A reload that changes [[relay]] says it needs a restart.
    let edited = std::fs::read_to_string(&relay.config)
        .unwrap()
        .replace("match = \"keep.*\"", "match = \"other.*\"");
    std::fs::write(&relay.config, edited).unwrap();
    let r = relay.post("/-/reload", "text/plain", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.text()
            .contains("[[relay]] changes take effect only after a restart"),
        "{}",
        r.text()
    );
}

#[test]
fn a_destination_that_is_down_costs_only_counted_drops() {
    // Ports just freed: nobody listens on them.
    let closed_udp = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let closed_tcp = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut relay = Daemon::start_with(&relaying(&[
        format!("name = \"udp-down\"\naddress = \"{closed_udp}\"\nflush_interval_ms = 5"),
        format!(
            "name = \"tcp-down\"\nprotocol = \"tcp\"\naddress = \"{closed_tcp}\"\nbuffer_bytes = 131072"
        ),
    ]));
    // 8000 lines of 22 bytes with their newline: 176,000 bytes, more than
    // the TCP relay's 131,072-byte buffer.
    let lines: Vec<String> = (0..8000)
        .map(|i| format!("relay.down.m{i:05}:1|c"))
        .collect();
    let line_bytes = lines[0].len() as f64 + 1.0;
    assert!(lines.iter().all(|l| l.len() + 1 == line_bytes as usize));
    let n = lines.len() as f64;
    send_udp(relay.udp, &lines, 20);
    // The daemon's own counts are whole.
    let s = relay.wait_lines("udp", n, LIMIT);
    assert_eq!(s.must("rollstat_series", &[]), n);

    // UDP: every line was sent (the kernel took it) or failed to send
    // (ECONNREFUSED from the closed port): nothing else.
    let s = relay.wait_scrape(LIMIT, "every UDP relay line accounted for", |s| {
        relay_value(s, "rollstat_relay_lines_sent_total", "udp-down")
            + dropped(s, "udp-down", "send_error")
            == n
    });
    assert!(
        dropped(&s, "udp-down", "send_error") > 0.0,
        "a closed UDP port refuses (ECONNREFUSED) some sends"
    );
    // TCP: nothing connects; lines wait in the buffer until it is full,
    // the rest are dropped on the ingest path, each counted.
    assert_eq!(relay_value(&s, "rollstat_relay_connected", "tcp-down"), 0.0);
    assert_eq!(
        relay_value(&s, "rollstat_relay_lines_sent_total", "tcp-down"),
        0.0
    );
    let buffered = relay_value(&s, "rollstat_relay_buffered_bytes", "tcp-down");
    let full = dropped(&s, "tcp-down", "buffer_full");
    assert!(buffered <= 131_072.0, "{buffered}");
    assert!(full > 0.0, "8000 lines of 22 bytes exceed a 128 KiB buffer");
    assert_eq!(buffered / line_bytes + full, n, "held + dropped = relayed");
    for reason in ["too_long", "send_error", "connection_lost", "stop_deadline"] {
        assert_eq!(dropped(&s, "tcp-down", reason), 0.0, "{reason}");
    }
    // A stop sends what it can within the drain deadline and logs the rest.
    relay.signal("TERM");
    assert!(relay.wait_exit(LIMIT).success());
    let held = (buffered / line_bytes) as u64;
    let log = relay.log();
    assert!(
        log.contains("Relay stop deadline passed") && log.contains(&format!("lines={held}")),
        "{log}"
    );
}

#[test]
fn check_config_names_a_relay_host_that_does_not_resolve_with_its_line() {
    let dir = TempDir::new("relay-cfg");
    let file = dir.path().join("relay.toml");
    std::fs::write(
        &file,
        "[[relay]]\naddress = \"127.0.0.1:9125\"\n\n[[relay]]\nname = \"gone\"\naddress = \"no-such-host.invalid:8125\"\n",
    )
    .unwrap();
    let out = run(
        std::process::Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("check-config")
            .arg(&file),
        b"",
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("line 6: `relay[1].address`: `no-such-host.invalid:8125` does not resolve"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("relay[0]"), "{}", out.stderr);
}

/// A TCP destination that accepts and never reads: once its socket
/// buffers are full every write blocks, until the relay gives up on it
/// after 5 s without progress and connects again. A stop with
/// `drain_timeout_ms = 1000` begun just after such a reconnect, with the
/// new connection's write blocked and nearly all of its 5 s to go, still
/// ends within that deadline and a little more, the write cut short and
/// its lines counted with the rest.
#[test]
fn a_stop_ends_within_its_deadline_while_a_tcp_relay_write_is_blocked() {
    let stuck = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cfg = relaying(&[format!(
        "name = \"stuck\"\nprotocol = \"tcp\"\naddress = \"{}\"\nmax_datagram_bytes = 65507\nbuffer_bytes = 16777216",
        stuck.local_addr().unwrap()
    )])
    .replace(
        "max_line_bytes = 1024",
        "drain_timeout_ms = 1000\nmax_line_bytes = 1024",
    );
    // Accepts every connection, keeps it open, never reads; says when.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tx, accepted) = std::sync::mpsc::channel();
    let acceptor = {
        let done = done.clone();
        stuck.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                match stuck.accept() {
                    Ok((c, _)) => {
                        kept.push(c);
                        let _ = tx.send(std::time::Instant::now());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })
    };
    let mut relay = Daemon::start_with(&cfg);
    accepted.recv_timeout(LIMIT).expect("the relay connects");
    // 250,000 lines of 200 bytes: 50 MB, far more than both socket
    // buffers (this host's tcp_rmem lets a receive buffer grow to 32 MB)
    // and the relay's 16 MiB buffer (the rest is dropped, counted).
    let line = format!("relay.stuck.{}:1|c\n", "x".repeat(183));
    assert_eq!(line.len(), 200);
    let lines = line.repeat(250_000);
    let mut tcp = TcpStream::connect(relay.tcp).unwrap();
    tcp.write_all(lines.as_bytes()).unwrap();
    drop(tcp);
    relay.wait_lines("tcp", 250_000.0, LIMIT);
    // The first connection's write blocks for 5 s, fails, and the relay
    // connects again; its next write blocks at once on the lines left.
    accepted
        .recv_timeout(LIMIT)
        .expect("the relay gives up on a write that blocks and connects again");
    std::thread::sleep(Duration::from_millis(300));
    let s = relay.scrape();
    assert_eq!(relay_value(&s, "rollstat_relay_connected", "stuck"), 1.0);
    assert!(relay_value(&s, "rollstat_relay_buffered_bytes", "stuck") > 0.0);
    let begun = std::time::Instant::now();
    relay.signal("TERM");
    let st = relay.wait_exit(LIMIT);
    let took = begun.elapsed();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    acceptor.join().unwrap();
    assert!(st.success(), "{st}; log:\n{}", relay.log());
    assert!(
        took < Duration::from_millis(1500),
        "the stop took {took:?} with drain_timeout_ms = 1000; log:\n{}",
        relay.log()
    );
    let log = relay.log();
    assert!(log.contains("Relay stop deadline passed"), "{log}");
}

/// A port nobody uses just now (bound, then freed).
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// check-config and the start refuse relays to the daemon's own listeners
/// on ports `p1` (UDP), `p2` (TCP), `p3` (HTTP); `false` when a start
/// found one of them taken by another process (nothing was shown).
fn refused_at_check_and_start(dir: &TempDir, (p1, p2, p3): (u16, u16, u16)) -> bool {
    // This host's name, when it resolves here (to a loopback address, in
    // /etc/hosts, on most hosts): the resolved path.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string();
    let host_resolves = !host.is_empty()
        && std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), p1))
            .is_ok_and(|mut a| a.any(|a| a.ip().is_loopback()));
    let mut cfg = format!(
        "[listen]\nstatsd_udp = \"0.0.0.0:{p1}\"\nstatsd_tcp = \"127.0.0.1:{p2}\"\nhttp = \"127.0.0.1:{p3}\"\n\n\
         [[relay]]\naddress = \"127.0.0.1:{p1}\"\n\n\
         [[relay]]\nprotocol = \"tcp\"\naddress = \"localhost:{p3}\"\n\n\
         [[relay]]\naddress = \"127.0.0.1:{p2}\"\n"
    );
    if host_resolves {
        cfg.push_str(&format!("\n[[relay]]\naddress = \"{host}:{p1}\"\n"));
    }
    let file = dir.path().join("loop.toml");
    std::fs::write(&file, &cfg).unwrap();
    let bin = env!("CARGO_BIN_EXE_rollstat");
    let out = run(
        std::process::Command::new(bin)
            .arg("check-config")
            .arg(&file),
        b"",
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{}{}", out.stdout, out.stderr);
    let own = |line: usize, i: usize, addr: &str, rest: &str| {
        format!("line {line}: `relay[{i}].address`: `{addr}`{rest}")
    };
    for want in [
        own(
            7,
            0,
            &format!("127.0.0.1:{p1}"),
            &format!(" is this daemon's own udp listener (`listen.statsd_udp` = \"0.0.0.0:{p1}\")"),
        ),
        own(
            11,
            1,
            &format!("localhost:{p3}"),
            &format!(
                " (it stands for 127.0.0.1:{p3}) is this daemon's own tcp listener (`listen.http`"
            ),
        ),
    ] {
        assert!(out.stderr.contains(&want), "no {want:?} in {}", out.stderr);
    }
    // A UDP relay to the TCP listener's port does not loop.
    assert!(!out.stderr.contains("relay[2]"), "{}", out.stderr);
    if host_resolves {
        // Without the literal relays: only the resolved name is left.
        let named = format!(
            "[listen]\nstatsd_udp = \"0.0.0.0:{p1}\"\nstatsd_tcp = \"127.0.0.1:{p2}\"\nhttp = \"127.0.0.1:{p3}\"\n\n[[relay]]\naddress = \"{host}:{p1}\"\n"
        );
        std::fs::write(&file, &named).unwrap();
        let out = run(
            std::process::Command::new(bin)
                .arg("check-config")
                .arg(&file),
            b"",
            Duration::from_secs(30),
        );
        assert_eq!(out.status.code(), Some(2), "{}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains(&format!(
                "line 7: `relay[0].address`: `{host}:{p1}` (it stands for 127."
            )) && out.stderr.contains("is this daemon's own udp listener"),
            "{}",
            out.stderr
        );
        // The start refuses it too, after binding, before anything runs.
        if !start_refuses(bin, &file) {
            return false;
        }
    }
    // The start refuses a literal one.
    std::fs::write(&file, &cfg).unwrap();
    start_refuses(bin, &file)
}

/// A start on `file` refuses its relay to its own UDP listener, after
/// binding and before anything runs; `false` when it could not bind
/// because a port it was given is in use (nothing shown).
fn start_refuses(bin: &str, file: &std::path::Path) -> bool {
    let out = run(
        std::process::Command::new(bin).arg("--config").arg(file),
        b"",
        Duration::from_secs(10),
    );
    if out.stderr.contains("Address already in use") {
        return false;
    }
    assert_eq!(out.status.code(), Some(2), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("is this daemon's own udp listener"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("listening"), "{}", out.stdout);
    true
}

/// A relay to the daemon's own listener is refused by check-config (with
/// the wildcard listener taking a loopback destination, the same port, a
/// TCP relay to the HTTP port, and a host name resolved), by the start
/// and by a reload, which keeps the running config.
#[test]
fn a_relay_to_the_daemons_own_listener_is_refused_by_check_config_start_and_reload() {
    let dir = TempDir::new("relay-loop");
    // The ports are picked free, then bound by the starts below: another
    // test may take one in between, and the start then fails to bind
    // instead of refusing the relay. Such an attempt runs again on fresh
    // ports.
    let refused =
        (0..5).any(|_| refused_at_check_and_start(&dir, (free_port(), free_port(), free_port())));
    assert!(refused, "five attempts each found a port taken");

    // A reload that adds one is refused and keeps the running config.
    let port = free_port();
    let base = TEST_CONFIG.replace(
        "statsd_udp = \"127.0.0.1:0\"",
        &format!("statsd_udp = \"127.0.0.1:{port}\""),
    );
    let d = Daemon::start_with(&base);
    assert_eq!(d.udp.port(), port);
    std::fs::write(
        &d.config,
        format!("{base}\n[[relay]]\naddress = \"localhost:{port}\"\n"),
    )
    .unwrap();
    let r = d.post("/-/reload", "text/plain", b"");
    assert_ne!(r.status, 200, "{}", r.text());
    assert!(
        r.text().contains("is this daemon's own udp listener"),
        "{}",
        r.text()
    );
    let s = d.scrape();
    assert_eq!(
        s.value("rollstat_config_reloads_total", &[("result", "error")]),
        Some(1.0)
    );
    assert!(s
        .value(
            "rollstat_relay_connected",
            &[("relay", &format!("localhost:{port}"))]
        )
        .is_none());
}

/// Two daemons relaying to each other (A to B over UDP, B to A over TCP):
/// each line is applied once on each, and relayed once, never back round:
/// a relayed datagram and a relayed TCP connection begin with the relay's
/// marker (an empty line), and their lines are counted `relayed_before`
/// instead of relayed again.
#[test]
fn two_daemons_relaying_to_each_other_pass_each_line_once_and_count_the_loop() {
    // B's TCP port must be known to A before A starts, and A's to B: B
    // starts first, relaying to a TCP port A is then started on.
    let a_tcp = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let b = Daemon::start_with(&relaying(&[format!(
        "name = \"back\"\nprotocol = \"tcp\"\naddress = \"{a_tcp}\""
    )]));
    let a = Daemon::start_with(
        &relaying(&[format!("name = \"ahead\"\naddress = \"{}\"", b.udp)]).replace(
            "statsd_tcp = \"127.0.0.1:0\"",
            &format!("statsd_tcp = \"{a_tcp}\""),
        ),
    );
    assert_eq!(a.tcp, a_tcp);
    let to_a: Vec<String> = (0..1000)
        .map(|i| format!("loop.a:1|c|#i:{}", i % 4))
        .collect();
    let to_b: Vec<String> = (0..500).map(|_| "loop.b:2|c".to_string()).collect();
    send_udp(a.udp, &to_a, 20);
    send_udp(b.udp, &to_b, 20);

    // A: its 1000 over UDP, B's 500 over B's TCP relay; B: its 500 and
    // A's 1000, both over UDP.
    a.wait_lines("udp", 1000.0, LIMIT);
    b.wait_lines("udp", 1500.0, LIMIT);
    a.wait_lines("tcp", 500.0, LIMIT);
    let relayed_before = |d: &Daemon, relay: &str, n: f64| {
        d.wait_scrape(
            LIMIT,
            &format!("{n} lines relayed before at {relay}"),
            |s| dropped(s, relay, "relayed_before") == n,
        )
    };
    let sa = relayed_before(&a, "ahead", 500.0);
    let sb = relayed_before(&b, "back", 1000.0);
    assert_eq!(
        relay_value(&sa, "rollstat_relay_lines_sent_total", "ahead"),
        1000.0
    );
    assert_eq!(
        relay_value(&sb, "rollstat_relay_lines_sent_total", "back"),
        500.0
    );
    // Nothing more comes round: the counts stay where they are.
    std::thread::sleep(Duration::from_millis(500));
    let (sa, sb) = (a.scrape(), b.scrape());
    assert_eq!(
        sa.value("rollstat_ingest_lines_total", &[("transport", "udp")]),
        Some(1000.0)
    );
    assert_eq!(
        sa.value("rollstat_ingest_lines_total", &[("transport", "tcp")]),
        Some(500.0)
    );
    assert_eq!(
        sb.value("rollstat_ingest_lines_total", &[("transport", "udp")]),
        Some(1500.0)
    );
    assert_eq!(dropped(&sa, "ahead", "relayed_before"), 500.0);
    assert_eq!(dropped(&sb, "back", "relayed_before"), 1000.0);
    // The same values on both, and the marker is no bad line.
    for s in [&sa, &sb] {
        assert_eq!(s.must("loop_a_total", &[("i", "0")]), 250.0);
        assert_eq!(s.must("loop_b_total", &[]), 1000.0);
        assert_eq!(s.sum("rollstat_ingest_rejected_lines_total"), 0.0);
    }
}
