//! No request or connection can stall or exhaust the daemon: linear-time
//! globs off the shard locks, paginated registry reads, deadlines on every
//! phase of an HTTP connection, caps, and bodies read as the RFCs say.
//!
//! Every wait here is bounded by a generous limit; nothing asserts a tight
//! timing except the keep-alive test, which compares against the ~40 ms
//! delayed-ACK stall it guards against and retries a round before failing.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{http, wait_for, wait_true, Daemon, Scrape, TEST_CONFIG};

/// [`TEST_CONFIG`] with short HTTP deadlines (the head's: `header_ms`).
fn short_deadlines(header_ms: u64) -> String {
    format!(
        "{TEST_CONFIG}\n[http]\nheader_timeout_ms = {header_ms}\nbody_timeout_ms = 600\nidle_timeout_ms = 700\nwrite_timeout_ms = 800\n"
    )
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Reads until the server closes the connection (EOF or reset), at most
/// 20 s; returns what was read and how long it took.
fn read_to_close(s: &mut TcpStream) -> (Vec<u8>, Duration) {
    let t = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!(
                    "the server did not close the connection within 20 s; read {:?}",
                    String::from_utf8_lossy(&out)
                )
            }
            Err(_) => break,
        }
    }
    (out, t.elapsed())
}

fn closed(d: &Daemon, reason: &str) -> f64 {
    d.scrape()
        .value(
            "rollstat_http_connections_closed_total",
            &[("reason", reason)],
        )
        .unwrap_or(0.0)
}

fn refused(d: &Daemon, reason: &str) -> f64 {
    d.scrape()
        .value(
            "rollstat_http_requests_refused_total",
            &[("reason", reason)],
        )
        .unwrap_or(0.0)
}

#[test]
fn a_pathological_glob_on_a_long_name_answers_promptly_while_ingest_goes_on() {
    let d = Daemon::start();
    // A 200-character name: the backtracking glob took minutes on it.
    let long = "a".repeat(200);
    d.send_udp(format!("{long}:1|c\nbefore:1|c\n").as_bytes());
    d.wait_lines("udp", 2.0, Duration::from_secs(10));
    let addr = d.http;
    let asked = std::thread::spawn(move || {
        let t = Instant::now();
        let r = http(
            addr,
            "GET",
            "/api/v1/series?match=*a*a*a*a*a*a*a*a*b",
            &[],
            b"",
        );
        (r, t.elapsed())
    });
    // Meanwhile a line lands in the registry and a scrape answers.
    d.send_udp(b"during:1|c\n");
    d.wait_lines("udp", 3.0, Duration::from_secs(10));
    let (r, took) = asked.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["series"], serde_json::json!([]));
    // Linear: microseconds of matching. The bound only catches a return of
    // the exponential matcher (minutes), not a slow machine.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // The long name itself is found by a glob that matches it.
    let r = d.get("/api/v1/series?match=*a*a*a*a*a*a*a*a", &[]);
    assert_eq!(r.json()["series"].as_array().unwrap().len(), 1);
    // Pattern caps answer 400 with the reason, counted.
    let many = "*a".repeat(20);
    let r = d.get(&format!("/api/v1/series?match={many}"), &[]);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.json()["error"].as_str().unwrap().contains("16"),
        "{}",
        r.text()
    );
    let r = d.get(&format!("/api/v1/series?match={}", "a".repeat(600)), &[]);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.json()["error"].as_str().unwrap().contains("512"),
        "{}",
        r.text()
    );
    assert!(refused(&d, "bad_pattern") >= 2.0);
}

#[test]
fn an_exact_metric_name_is_never_read_as_a_pattern() {
    let d = Daemon::start();
    d.send_udp(b"evil***:1|c\n**:2|c\nevil.x:3|c\n");
    d.wait_lines("udp", 3.0, Duration::from_secs(10));
    let names = |path: &str| -> Vec<String> {
        let r = d.get(path, &[]);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        r.json()["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["metric"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("/api/v1/series?metric=evil%2A%2A%2A"), ["evil***"]);
    assert_eq!(names("/api/v1/series?metric=%2A%2A"), ["**"]);
    assert_eq!(names("/api/v1/series?metric=evil"), Vec::<String>::new());
    let r = d.get("/api/v1/series?metric=a&match=b", &[]);
    assert_eq!(r.status, 400);
}

#[test]
fn pagination_walks_every_series_exactly_once_while_series_are_added() {
    let d = Daemon::start();
    d.create_counters("p", 1500);
    let udp = d.udp;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let adder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut i = 0;
            // Bounded: at most 3000 new series, one datagram every ms.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && i < 3000 {
                let dgram: String = (i..i + 10).map(|j| format!("p.new{j}:1|c\n")).collect();
                let _ = s.send_to(dgram.as_bytes(), udp);
                i += 10;
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/series?match=p.*&limit=100&cursor={c}"),
            None => "/api/v1/series?match=p.*&limit=100".to_string(),
        };
        let page = d.get(&path, &[]).json();
        let series = page["series"].as_array().expect("series");
        assert!(series.len() <= 100);
        for s in series {
            seen.push((
                s["metric"].as_str().unwrap().to_string(),
                s["labels"].to_string(),
            ));
        }
        pages += 1;
        assert!(pages < 200, "the walk does not end");
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    adder.join().unwrap();
    // In order, no series twice, every original series once.
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "not in walk order");
    let names: BTreeSet<&str> = seen.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(names.len(), seen.len(), "a series was seen twice");
    for i in 0..1500 {
        assert!(names.contains(format!("p.m{i}").as_str()), "p.m{i} missed");
    }
    assert!(pages >= 15, "{pages} pages");
    let bad = d.get("/api/v1/series?cursor=nope", &[]);
    assert_eq!(bad.status, 400, "{}", bad.text());
    let bad = d.get("/api/v1/series?limit=10001", &[]);
    assert_eq!(bad.status, 400, "{}", bad.text());
}

#[test]
fn silent_slow_idle_and_stalled_connections_are_closed_within_their_deadlines() {
    let d = Daemon::start_with(&short_deadlines(500));
    // 1. Sends nothing: closed by the header deadline (500 ms).
    let mut silent = connect(d.http);
    let (_, took) = read_to_close(&mut silent);
    assert!(took < Duration::from_secs(10), "{took:?}");
    // 2. A request head a byte every 150 ms: cut off at 500 ms, although
    //    bytes keep coming.
    let mut slow = connect(d.http);
    let t = Instant::now();
    let mut cut = false;
    for b in b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n" {
        if slow.write_all(&[*b]).is_err() {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(150));
        if t.elapsed() > Duration::from_secs(10) {
            break;
        }
    }
    if !cut {
        // The writes may all have landed in the socket buffer: the read says.
        let (got, _) = read_to_close(&mut slow);
        assert!(
            !String::from_utf8_lossy(&got).contains("200 OK"),
            "the slow head was served"
        );
    }
    assert!(t.elapsed() < Duration::from_secs(10));
    // 3. Kept alive after a response, then idle: closed by the idle deadline.
    let mut idle = connect(d.http);
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let (got, took) = read_to_close(&mut idle);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        took >= Duration::from_millis(500),
        "closed too early: {took:?}"
    );
    // 4. A body that stops half way: 408, then closed.
    let mut stalled = connect(d.http);
    stalled
        .write_all(b"POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nstall.x:1|c\n")
        .unwrap();
    let (got, _) = read_to_close(&mut stalled);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    wait_for(
        Duration::from_secs(10),
        "every cut-off counted",
        &(true, true, true),
        || {
            let s = d.scrape();
            let r = |reason| {
                s.value(
                    "rollstat_http_connections_closed_total",
                    &[("reason", reason)],
                )
                .unwrap_or(0.0)
                    >= 1.0
            };
            (r("header_timeout"), r("idle_timeout"), r("body_timeout"))
        },
    );
    assert!(closed(&d, "header_timeout") >= 2.0);
}

#[test]
fn connections_beyond_the_cap_are_refused_and_counted() {
    // Long deadlines: the held connections must stay open.
    let d = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[http]\nmax_connections = 4\nheader_timeout_ms = 60000\n"
    ));
    let held: Vec<TcpStream> = (0..4).map(|_| connect(d.http)).collect();
    // The fifth is told and closed at once.
    let mut fifth = connect(d.http);
    let (got, _) = read_to_close(&mut fifth);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("Retry-After: 1"), "{text}");
    drop(held);
    // Slots free again: served, and the refusal was counted.
    wait_true(
        Duration::from_secs(10),
        "a slot again, and the refusal counted",
        || {
            crate::support::try_http(d.http, "GET", "/metrics", &[], b"")
                .ok()
                .filter(|r| r.status == 200)
                .is_some_and(|r| {
                    Scrape::parse(&r.text())
                        .value(
                            "rollstat_http_connections_closed_total",
                            &[("reason", "connection_cap")],
                        )
                        .unwrap_or(0.0)
                        >= 1.0
                })
        },
    );
}

#[test]
fn a_scraper_that_stops_reading_loses_its_connection_and_its_slot() {
    let d = Daemon::start_with(&short_deadlines(60_000));
    // ~10 MB of exposition: far more than the sockets buffer.
    d.create_counters("big", 20_000);
    let mut stuck = Vec::new();
    for _ in 0..4 {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        sock.connect(&d.http.into()).unwrap();
        let mut s: TcpStream = sock.into();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        stuck.push(s); // never read
    }
    // Each is served (its head has arrived: it holds a slot) before any
    // probe, so that no probe takes a slot one of them needed.
    for s in &stuck {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut head = [0u8; 12];
        let n = s.peek(&mut head).expect("a response head");
        assert_eq!(&head[..n], b"HTTP/1.1 200");
    }
    // The write deadline (800 ms) frees them: counted, and served again.
    slots_held_then_freed(&d);
    drop(stuck);
}

/// Sends a raw request and returns the response head and body text.
fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = connect(addr);
    s.write_all(request).unwrap();
    let (got, _) = read_to_close(&mut s);
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn bodies_are_read_as_the_rfcs_say() {
    let d = Daemon::start(); // http_max_body_bytes = 4096
                             // A gzip body is inflated and ingested.
    let gz = |data: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    };
    let body = gz(b"gz.ok:1|c\ngz.ok:2|c\n");
    let mut req = format!("POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    req.extend_from_slice(&body);
    let r = raw(d.http, &req);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains("\"accepted\":2"), "{r}");
    // A bomb: 3 MiB of zeros in about 3 KB, under the 4 KiB raw cap;
    // capped on the inflated size.
    let bomb = gz(&vec![b'0'; 3 << 20]);
    assert!(bomb.len() < 4096);
    let mut req = format!("POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n", bomb.len()).into_bytes();
    req.extend_from_slice(&bomb);
    let r = raw(d.http, &req);
    assert!(r.starts_with("HTTP/1.1 413"), "{r}");
    // An unknown coding.
    let r = raw(d.http, b"POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: br\r\nContent-Length: 3\r\n\r\nabc");
    assert!(r.starts_with("HTTP/1.1 415"), "{r}");
    // Expect: 100-continue above the cap: 413 before any body byte is sent.
    let r = raw(d.http, b"POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Length: 1000000\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 413"), "{r}");
    assert!(!r.contains("100 Continue"), "{r}");
    // Ambiguous framing: two lengths, or a length with chunked.
    let r = raw(d.http, b"POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nab:1|c");
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    let r = raw(d.http, b"POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab:1|\r\n0\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    let r = raw(d.http, b"POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nab:1|\r\n0\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    // Empty lines before the request line (allowed) do not hide it.
    let mut s = connect(d.http);
    s.write_all(b"\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    s.write_all(b"POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab:1|\r\n0\r\n\r\n").unwrap();
    let (got, _) = read_to_close(&mut s);
    let r = String::from_utf8_lossy(&got);
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    let s = d.scrape();
    let by = s.by_label("rollstat_http_requests_refused_total", "reason");
    assert!(by["body_too_large"] >= 2.0, "{by:?}");
    assert!(by["unsupported_encoding"] >= 1.0, "{by:?}");
    // Content-Length with Transfer-Encoding: ours; two lengths: hyper's 400.
    assert!(by["ambiguous_framing"] >= 3.0, "{by:?}");
    assert!(by["malformed_request"] >= 1.0, "{by:?}");
    // The good line stayed, nothing from the refused bodies got in.
    assert_eq!(s.value("gz_ok_total", &[]), Some(3.0));
    assert_eq!(s.value("ab_total", &[]), None);
}

/// Python's http.client on one keep-alive connection: twenty scrapes, each
/// one's milliseconds on a line.
const KEEP_ALIVE_SCRAPES: &str = r#"
import http.client, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
for i in range(20):
    t = time.perf_counter()
    c.request("GET", "/metrics")
    r = c.getresponse()
    r.read()
    assert r.status == 200, r.status
    print((time.perf_counter() - t) * 1000)
"#;

#[test]
fn twenty_keep_alive_scrapes_each_finish_without_a_delayed_ack_stall() {
    let d = Daemon::start();
    d.create_counters("ka", 200);
    // Before TCP_NODELAY, about half of these waited ~40 ms more than the
    // others: the body's last small segment sat behind Nagle's algorithm
    // until the client's delayed ACK. A round passes when at most 2 of 20
    // take 30 ms more than the round's median (a loaded machine's jitter);
    // three rounds, since that jitter comes and goes while the stall did not.
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let out = Command::new("python3")
            .args(["-c", KEEP_ALIVE_SCRAPES, &d.http.port().to_string()])
            .output()
            .expect("run python3");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut ms: Vec<f64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect();
        assert_eq!(ms.len(), 20);
        let times = ms.clone();
        ms.sort_by(f64::total_cmp);
        let median = ms[10];
        let stalled = times.iter().filter(|t| **t > median + 30.0).count();
        if stalled <= 2 {
            return;
        }
        rounds.push(times);
    }
    panic!("every round had keep-alive scrapes 30 ms slower than its median: {rounds:?}");
}

#[test]
fn registry_reads_beyond_their_cap_get_503_and_are_counted() {
    let d = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[http]\nmax_concurrent_api_reads = 1\n"
    ));
    d.create_counters("r", 20_000);
    let addr = d.http;
    // Eight full pages at once against one slot: each takes a while to
    // build (20k series), so they overlap and all but one at a time get 503.
    let answers: Vec<(u16, Option<String>)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(move || {
                    let r = http(addr, "GET", "/api/v1/series?limit=10000", &[], b"");
                    (r.status, r.header("retry-after").map(String::from))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(answers.iter().any(|a| a.0 == 200), "{answers:?}");
    assert!(
        answers
            .iter()
            .any(|a| a.0 == 503 && a.1.as_deref() == Some("1")),
        "{answers:?}"
    );
    let busy = answers.iter().filter(|a| a.0 == 503).count() as f64;
    assert_eq!(refused(&d, "api_busy"), busy);
}

#[test]
fn a_scraper_that_reads_too_slowly_loses_its_slot_at_its_own_timeout() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    // No write deadline to speak of: only the scrape's own deadline can
    // free the slots.
    let d = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[http]\nwrite_timeout_ms = 600000\nheader_timeout_ms = 60000\n"
    ));
    d.create_counters("slow", 20_000);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let served = std::sync::Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let sock =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            sock.set_recv_buffer_size(4096).unwrap();
            sock.connect(&d.http.into()).unwrap();
            let mut s: TcpStream = sock.into();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Prometheus-Scrape-Timeout-Seconds: 3\r\n\r\n")
                .unwrap();
            s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
            let (stop, served) = (stop.clone(), served.clone());
            // Bounded: reads 1 KB every 20 ms for at most 30 s.
            std::thread::spawn(move || {
                let t = Instant::now();
                let mut buf = [0u8; 1024];
                let mut first = true;
                while !stop.load(Ordering::Relaxed) && t.elapsed() < Duration::from_secs(30) {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if first && buf[..n].starts_with(b"HTTP/1.1 200") {
                                served.fetch_add(1, Ordering::Relaxed);
                            }
                            first = false;
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
            })
        })
        .collect();
    // The four slow readers are being served: they hold every slot.
    wait_true(
        Duration::from_secs(20),
        "the four slow scrapes start",
        || served.load(Ordering::Relaxed) == 4,
    );
    // Each is cut at its 3 s deadline and counted; the slots serve again.
    slots_held_then_freed(&d);
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
}

#[test]
fn a_stop_does_not_wait_for_a_client_that_is_still_sending_its_head() {
    let mut d = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[http]\nheader_timeout_ms = 60000\n"
    ));
    let mut partial = connect(d.http);
    partial.write_all(b"GET /metrics HTTP/1.1\r\nHo").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    d.signal("TERM");
    let status = d.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    let log = d.log();
    assert!(!log.contains("still open after 5s"), "{log}");
}

/// Every `/metrics` slot is held now (a scrape gets 503); within 30 s four
/// holders are cut off (`write_timeout`) and a scrape is served again.
fn slots_held_then_freed(d: &Daemon) {
    let status = crate::support::try_http(d.http, "GET", "/metrics", &[], b"").map(|r| r.status);
    assert_eq!(status, Ok(503), "the slots should be held");
    wait_true(
        Duration::from_secs(30),
        "a scrape gets 200 again, after four cut-offs",
        || {
            crate::support::try_http(d.http, "GET", "/metrics", &[], b"").is_ok_and(|r| {
                r.status == 200
                    && Scrape::parse(&r.text())
                        .value(
                            "rollstat_http_connections_closed_total",
                            &[("reason", "write_timeout")],
                        )
                        .unwrap_or(0.0)
                        >= 4.0
            })
        },
    );
}
