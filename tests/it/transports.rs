//! Every transport ends in the same parser and registry: the same lines give
//! the same series whichever way they come, and each is counted under its
//! own `transport` label.

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use crate::support::{Daemon, TempDir, TEST_CONFIG};

const LINES: &[u8] =
    b"t.req:1|c|#route:/a\nt.req:2|c|@0.5|#route:/a\nt.g:+4|g\nt.lat:20|ms\nt.u:x|s\n";

#[test]
fn the_same_lines_count_the_same_over_udp_tcp_unix_and_http() {
    let sock_dir = TempDir::new("unix");
    let sock = sock_dir.path().join("statsd.sock");
    let cfg = TEST_CONFIG.replace(
        "http = \"127.0.0.1:0\"",
        &format!(
            "http = \"127.0.0.1:0\"\nstatsd_unix = \"{}\"",
            sock.display()
        ),
    );
    let d = Daemon::start_with(&cfg);

    d.send_udp(LINES);
    let mut tcp = std::net::TcpStream::connect(d.tcp).unwrap();
    tcp.write_all(LINES).unwrap();
    drop(tcp);
    let client = UnixDatagram::unbound().unwrap();
    client
        .send_to(LINES, &sock)
        .expect("send to the Unix socket");
    let r = d.post("/api/v1/ingest", "text/plain", LINES);
    assert_eq!(r.status, 200, "{}", r.text());

    // Lines and packets are separate counters: wait for both.
    let s = d.wait_scrape(Duration::from_secs(10), "5 lines on each transport", |s| {
        ["udp", "tcp", "unix", "http"].iter().all(|t| {
            s.value("rollstat_ingest_lines_total", &[("transport", t)]) == Some(5.0)
                && s.value("rollstat_ingest_packets_total", &[("transport", t)]) >= Some(1.0)
        })
    });
    // Four times (1 + 2 x 2).
    assert_eq!(s.must("t_req_total", &[("route", "/a")]), 20.0);
    assert_eq!(s.must("t_g", &[]), 16.0);
    assert_eq!(s.must("t_lat_count", &[]), 4.0);
    assert_eq!(s.must("t_lat_sum", &[]), 0.08);
    assert_eq!(
        s.must(
            "rollstat_window_unique",
            &[("metric", "t.u"), ("window", "5s")]
        ),
        1.0
    );
    assert_eq!(
        s.must(
            "rollstat_window_samples",
            &[("metric", "t.u"), ("window", "5s")]
        ),
        4.0
    );
    for t in ["udp", "unix", "http"] {
        assert_eq!(
            s.must("rollstat_ingest_packets_total", &[("transport", t)]),
            1.0,
            "{t}"
        );
    }
}

#[test]
fn tag_styles_from_the_config_reach_the_parser_on_every_transport() {
    let sock_dir = TempDir::new("unix-styles");
    let sock = sock_dir.path().join("statsd.sock");
    let cfg = TEST_CONFIG
        .replace(
            "http = \"127.0.0.1:0\"",
            &format!(
                "http = \"127.0.0.1:0\"\nstatsd_unix = \"{}\"",
                sock.display()
            ),
        )
        .replace(
            "http_max_body_bytes = 4096",
            "http_max_body_bytes = 4096\ntag_styles = [\"librato\"]",
        );
    let d = Daemon::start_with(&cfg);
    // InfluxDB off: its text stays in the name. Librato on. DogStatsD off:
    // the `|#` field is ignored.
    let lines: &[u8] = b"s.inf,k=v:1|c\ns.lib#k=v:1|c\ns.dog:1|c|#k:v\n";

    d.send_udp(lines);
    let mut tcp = std::net::TcpStream::connect(d.tcp).unwrap();
    tcp.write_all(lines).unwrap();
    drop(tcp);
    UnixDatagram::unbound()
        .unwrap()
        .send_to(lines, &sock)
        .expect("send to the Unix socket");
    let r = d.post("/api/v1/ingest", "text/plain", lines);
    assert_eq!(r.status, 200, "{}", r.text());
    // A JSON body's tags are its own field: read whatever the styles.
    let r = d.post(
        "/api/v1/ingest",
        "application/json",
        br#"[{"name":"s.json","type":"c","value":1,"tags":{"k":"v"}}]"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());

    let s = d.wait_scrape(Duration::from_secs(10), "3 lines on each transport", |s| {
        ["udp", "tcp", "unix"]
            .iter()
            .all(|t| s.value("rollstat_ingest_lines_total", &[("transport", t)]) == Some(3.0))
            && s.value("rollstat_ingest_lines_total", &[("transport", "http")]) == Some(4.0)
    });
    assert_eq!(s.must("s_inf_k_v_total", &[]), 4.0);
    assert_eq!(
        s.must(
            "rollstat_window_samples",
            &[("metric", "s.inf,k=v"), ("window", "5s")]
        ),
        4.0
    );
    assert_eq!(s.must("s_lib_total", &[("k", "v")]), 4.0);
    assert_eq!(s.must("s_dog_total", &[]), 4.0);
    assert_eq!(s.value("s_dog_total", &[("k", "v")]), None);
    assert_eq!(s.must("s_json_total", &[("k", "v")]), 1.0);
    assert_eq!(s.sum("rollstat_ingest_rejected_lines_total"), 0.0);
}

/// A burst far faster than one reader parses: the reader falls behind and
/// routes to the ingest workers, and every line is still either applied or
/// counted as a kernel drop; one series' gauge sets and deltas, sent in
/// order, end at the last value when nothing was dropped.
#[test]
fn a_udp_backlog_is_routed_to_the_workers_and_every_line_is_accounted_for() {
    let d = Daemon::start();
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    const DATAGRAMS: usize = 1000;
    const PER: usize = 20;
    const NAMES: usize = 7;
    // Rendered first, then sent back to back.
    let datagrams: Vec<String> = (0..DATAGRAMS)
        .map(|i| {
            let mut dgram = format!("bl.g:{i}|g\nbl.g:+1|g\n");
            for l in 2..PER {
                let n = i * PER + l;
                dgram.push_str(&format!("bl.c{}:1|c|#k:{}\n", n % NAMES, n % 50));
            }
            dgram
        })
        .collect();
    for dgram in &datagrams {
        sender.send_to(dgram.as_bytes(), d.udp).unwrap();
    }
    let sent = (DATAGRAMS * PER) as f64;
    let s = d.wait_scrape(
        Duration::from_secs(60),
        "every line applied or dropped",
        |s| {
            let lines = s.value("rollstat_ingest_lines_total", &[("transport", "udp")]);
            let drops = s.value("rollstat_udp_kernel_drops", &[]).unwrap_or(0.0);
            lines == Some(sent - drops * PER as f64)
        },
    );
    assert!(
        s.must("rollstat_udp_routed_datagrams_total", &[]) > 0.0,
        "a burst of {DATAGRAMS} datagrams never made the reader route"
    );
    if s.must("rollstat_udp_kernel_drops", &[]) == 0.0 {
        assert_eq!(s.must("bl_g", &[]), DATAGRAMS as f64);
        let counted: f64 = (0..NAMES).map(|n| s.sum(&format!("bl_c{n}_total"))).sum();
        assert_eq!(counted, (DATAGRAMS * (PER - 2)) as f64);
    } else {
        eprintln!("kernel drops in the burst: the order check needs none");
    }
}
