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
