//! Hostile clients on the rate-limit service's gRPC listener: more
//! connections than `[rls] max_connections`, a connection that never
//! sends the HTTP/2 preface, more streams on one connection than its
//! SETTINGS allow, many connections at once, a client that never reads
//! its answers, and a flood of calls beside statsd. Each gets a clear
//! answer (a GOAWAY, REFUSED_STREAM, a gRPC status, a close at a
//! deadline), and the other clients, `/metrics` and the statsd path go
//! on. Every loop here is bounded in count and time; everything is on
//! loopback.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rollstat::rls::proto::rate_limit_descriptor::Entry;
use rollstat::rls::proto::rate_limit_response::Code;
use rollstat::rls::proto::rate_limit_service_client::RateLimitServiceClient;
use rollstat::rls::proto::{RateLimitDescriptor, RateLimitRequest};
use tonic::transport::Channel;

use crate::support::h2_frames::{self as h2f, End, RawH2};
use crate::support::{sample_config_on_port_0, try_http, Daemon, Response, TempDir};

/// One domain whose limit nothing here reaches: every call is a decision
/// (OK), never a refusal by the limit.
const FLOOD_YAML: &str = "domain: flood\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 100000000}\n";

/// The sample config with `[rls]` on port 0, its `config_dir` holding
/// [`FLOOD_YAML`], and `extra` keys in `[rls]`.
fn config(dir: &TempDir, extra: &str) -> String {
    std::fs::write(dir.path().join("flood.yaml"), FLOOD_YAML).unwrap();
    format!(
        "{}\n[rls]\ngrpc = \"127.0.0.1:0\"\nconfig_dir = \"{}\"\n{extra}\n",
        sample_config_on_port_0(),
        dir.path().display()
    )
}

/// The daemon under an open-file limit of `n` (soft and hard: it cannot
/// raise it).
fn start_with_nofile(config: &str, n: u32) -> Daemon {
    let script = format!(r#"ulimit -n {n} && exec "$0" "$@""#);
    Daemon::start_wrapped(config, &["sh", "-c", &script])
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn client(addr: SocketAddr) -> Result<RateLimitServiceClient<Channel>, String> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    Ok(RateLimitServiceClient::new(channel))
}

fn call(key: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "flood".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "k".into(),
                value: key.into(),
            }],
            limit: None,
            hits_addend: None,
        }],
        hits_addend: 1,
    }
}

fn encoded(key: &str) -> Vec<u8> {
    prost::Message::encode_to_vec(&call(key))
}

/// One call; `Ok` only for a decision answered OK.
async fn decide(c: &mut RateLimitServiceClient<Channel>, key: &str) -> Result<(), tonic::Status> {
    let r = c.should_rate_limit(call(key)).await?.into_inner();
    assert_eq!(r.overall_code, Code::Ok as i32, "{key}: {r:?}");
    Ok(())
}

/// GET `path` on a thread, waited for at most `limit`: the answer and how
/// long it took, or why not.
fn get_within(
    addr: SocketAddr,
    path: &str,
    limit: Duration,
) -> Result<(Response, Duration), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let path = path.to_string();
    std::thread::spawn(move || {
        let t = Instant::now();
        let r = try_http(addr, "GET", &path, &[], b"");
        let _ = tx.send(r.map(|r| (r, t.elapsed())));
    });
    rx.recv_timeout(limit)
        .map_err(|_| format!("GET {addr}: no answer within {limit:?}"))?
}

/// The value of a sample on /metrics (read within 5 s).
fn metric(d: &Daemon, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let (r, _) = get_within(d.http, "/metrics", Duration::from_secs(5)).unwrap();
    crate::support::Scrape::parse(&r.text()).value(name, labels)
}

/// statsd lines over TCP: `n` lines `<name>:1|c` on one connection.
fn statsd_tcp(d: &Daemon, name: &str, n: usize) {
    use std::io::Write;
    let mut tcp = std::net::TcpStream::connect_timeout(&d.tcp, Duration::from_secs(5))
        .expect("the statsd TCP listener accepts");
    let lines: String = (0..n).map(|_| format!("{name}:1|c\n")).collect();
    tcp.write_all(lines.as_bytes()).unwrap();
}

#[test]
fn connections_past_max_connections_get_a_goaway_while_metrics_statsd_and_open_clients_go_on() {
    let dir = TempDir::new("rls-conns");
    // 256 descriptors in all: without a cap of its own, 300 gRPC
    // connections would take every one, and /metrics and statsd with them.
    let d = start_with_nofile(&config(&dir, "max_connections = 32"), 256);
    let addr = d.rls_grpc().unwrap();
    let rt = runtime();
    let mut early = rt
        .block_on(client(addr))
        .expect("a client before the flood");
    rt.block_on(decide(&mut early, "early")).unwrap();

    let conns: Vec<RawH2> = (0..300)
        .map(|i| RawH2::connect(addr).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    // A refused connection reads the server's SETTINGS, a GOAWAY naming
    // the cap, and EOF at once; a served one reads SETTINGS and waits.
    let mut refused = 0;
    let mut served = 0;
    let mut conns = conns;
    for c in &mut conns {
        let deadline = Instant::now() + Duration::from_millis(100);
        let mut goaway = None;
        while let Some(f) = c.next(deadline) {
            if f.kind == h2f::GOAWAY {
                goaway = Some(f);
            }
        }
        match goaway {
            Some(g) => {
                assert!(
                    g.debug_text().contains("max_connections"),
                    "{:?}",
                    g.debug_text()
                );
                refused += 1;
            }
            None => served += 1,
        }
    }
    eprintln!("300 connections past `early`: {served} served, {refused} refused with a GOAWAY");
    assert_eq!(
        (served, refused),
        (31, 269),
        "32 at once, `early` one of them"
    );

    // Meanwhile: /metrics answers, statsd TCP is accepted and counted, the
    // open client is answered, and a new gRPC client is refused clearly.
    let (r, took) = get_within(d.http, "/metrics", Duration::from_secs(5)).unwrap();
    assert_eq!(r.status, 200);
    eprintln!("GET /metrics with the gRPC cap full: {took:?}");
    statsd_tcp(&d, "hostile.conns", 100);
    d.wait_scrape(Duration::from_secs(10), "100 statsd TCP lines", |s| {
        s.value("rollstat_ingest_lines_total", &[("transport", "tcp")]) == Some(100.0)
    });
    rt.block_on(decide(&mut early, "early-again")).unwrap();
    let late = rt.block_on(async {
        let mut c = client(addr).await?;
        decide(&mut c, "late").await.map_err(|s| format!("{s}"))
    });
    eprintln!("a new client with the cap full: {late:?}");
    assert!(late.is_err(), "the cap is full: {late:?}");

    // The flood gone, new clients are served again.
    drop(conns);
    crate::support::wait_until(Duration::from_secs(10), "a new client served", || {
        rt.block_on(async {
            let mut c = client(addr).await?;
            decide(&mut c, "after").await.map_err(|s| s.to_string())
        })
    });
    let capped = metric(
        &d,
        "rollstat_rls_refused_total",
        &[("reason", "connection_cap")],
    );
    assert!(
        capped >= Some(270.0),
        "269 raw connections and the late client, counted: {capped:?}"
    );
}

#[test]
fn a_connection_that_never_sends_the_http2_preface_is_closed_at_its_deadline() {
    let dir = TempDir::new("rls-preface");
    let d = Daemon::start_with(&config(&dir, "handshake_timeout_ms = 500"));
    let addr = d.rls_grpc().unwrap();
    // Half a preface, then nothing.
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(&mut tcp, &h2f::PREFACE[..10]).unwrap();
    let idle = std::net::TcpStream::connect(addr).unwrap();
    let t = Instant::now();
    for mut s in [tcp, idle] {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 256];
        // The server's SETTINGS may come first; then EOF (or a reset).
        loop {
            match std::io::Read::read(&mut s, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            assert!(t.elapsed() < Duration::from_secs(10), "still open");
        }
    }
    let took = t.elapsed();
    eprintln!("closed after {took:?} (handshake_timeout_ms = 500)");
    assert!(
        took < Duration::from_secs(5),
        "closed at its deadline, not at the read timeout: {took:?}"
    );
    assert_eq!(
        metric(
            &d,
            "rollstat_rls_refused_total",
            &[("reason", "preface_timeout")]
        ),
        Some(2.0)
    );
    // HTTP/1 to the gRPC port is closed at its first byte that is not the
    // preface's, without waiting for the deadline.
    let mut http1 = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(&mut http1, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    http1
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let t = Instant::now();
    let mut buf = [0u8; 256];
    while let Ok(n) = std::io::Read::read(&mut http1, &mut buf) {
        if n == 0 {
            break;
        }
    }
    assert!(
        t.elapsed() < Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(
        metric(
            &d,
            "rollstat_rls_refused_total",
            &[("reason", "bad_preface")]
        ),
        Some(1.0)
    );
    // The listener goes on.
    runtime().block_on(async {
        let mut c = client(addr).await.unwrap();
        decide(&mut c, "after").await.unwrap();
    });
}

#[test]
fn streams_past_the_connections_cap_are_refused_and_the_open_ones_end_at_their_deadline() {
    let dir = TempDir::new("rls-streams");
    let d = Daemon::start_with(&config(&dir, ""));
    let addr = d.rls_grpc().unwrap();
    let authority = addr.to_string();
    // 300 calls opened at once, ignoring SETTINGS_MAX_CONCURRENT_STREAMS
    // (256), none sending its message: the first 256 stay open, the 44
    // past the cap are refused.
    let mut raw = RawH2::connect(addr).unwrap();
    let streams: Vec<u32> = (0..300).map(|i| 1 + 2 * i).collect();
    let mut out = Vec::new();
    for s in &streams {
        out.extend(h2f::call_headers(*s, &authority, false));
    }
    raw.send(&out).unwrap();
    // Another connection is answered meanwhile.
    let rt = runtime();
    let answered = rt.block_on(async {
        let mut c = client(addr).await.unwrap();
        let t = Instant::now();
        for i in 0..50 {
            decide(&mut c, &format!("other{i}")).await.unwrap();
        }
        t.elapsed()
    });
    eprintln!("50 calls on another connection meanwhile: {answered:?}");
    let t = Instant::now();
    let (ends, goaway) = raw.ends(&streams, Instant::now() + Duration::from_secs(10));
    let took = t.elapsed();
    assert!(goaway.is_none(), "{goaway:?}");
    let refused = ends
        .iter()
        .filter(|e| **e == Some(End::Reset(h2f::REFUSED_STREAM)))
        .count();
    let timed_out = ends
        .iter()
        .filter(|e| matches!(e, Some(End::Closed { data: false })))
        .count();
    let open = ends.iter().filter(|e| e.is_none()).count();
    eprintln!("300 streams: {refused} REFUSED_STREAM, {timed_out} ended at their deadline without a message, {open} still open after {took:?}; others: {ends:?}", ends = ends.iter().filter(|e| !matches!(e, Some(End::Reset(7) | End::Closed { data: false }))).collect::<Vec<_>>());
    assert_eq!((refused, timed_out, open), (44, 256, 0));
    // The connection itself still serves a whole call.
    let next = 1 + 2 * 300;
    raw.send(&h2f::call_frames(next, &authority, &encoded("raw")))
        .unwrap();
    let (ends, _) = raw.ends(&[next], Instant::now() + Duration::from_secs(5));
    assert_eq!(ends, [Some(End::Closed { data: true })]);
}

/// The daemon's resident memory, in KiB (`VmRSS`).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/<pid>/status")
}

/// The daemon's open file descriptors.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// A raw client with a 4 KiB receive buffer that writes whole calls, 100
/// to a write, until a write blocks for 2 s (the server stopped reading),
/// 50,000 calls, or 5 s, and never reads: how many calls it wrote.
fn slow_reader(addr: SocketAddr) -> (RawH2, usize) {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect_timeout(&addr.into(), Duration::from_secs(5))
        .unwrap();
    let mut raw = RawH2::on(sock.into()).unwrap();
    raw.set_write_timeout(Duration::from_secs(2)).unwrap();
    let authority = addr.to_string();
    let message = encoded("slow");
    let t = Instant::now();
    let mut written = 0;
    while written < 50_000 && t.elapsed() < Duration::from_secs(5) {
        let batch: Vec<u8> = (0..100)
            .flat_map(|i| h2f::call_frames(1 + 2 * (written + i) as u32, &authority, &message))
            .collect();
        if raw.send(&batch).is_err() {
            break;
        }
        written += 100;
    }
    (raw, written)
}

#[test]
fn a_client_that_never_reads_its_answers_is_closed_and_costs_bounded_memory() {
    let dir = TempDir::new("rls-slow-read");
    let d = Daemon::start_with(&config(
        &dir,
        "keepalive_interval_ms = 1000\nkeepalive_timeout_ms = 1000",
    ));
    let addr = d.rls_grpc().unwrap();
    let pid = d.pid();
    let rt = runtime();
    let mut other = rt.block_on(client(addr)).unwrap();
    rt.block_on(decide(&mut other, "warm")).unwrap();
    let (rss_before, fds_before) = (rss_kib(pid), open_fds(pid));

    let hostile = std::thread::spawn(move || slow_reader(addr));
    // Another client is answered all along; the daemon's memory sampled.
    let mut slowest = Duration::ZERO;
    let mut rss_max = rss_before;
    let mut calls = 0;
    while !hostile.is_finished() && calls < 5_000 {
        let t = Instant::now();
        rt.block_on(decide(&mut other, &format!("o{calls}")))
            .unwrap();
        slowest = slowest.max(t.elapsed());
        rss_max = rss_max.max(rss_kib(pid));
        calls += 1;
    }
    let (raw, written) = hostile.join().unwrap();
    // The server closes the connection at its keepalive deadline (a
    // ping every 1 s, 1 s to answer), whether or not its writes block.
    let t = Instant::now();
    crate::support::wait_true(
        Duration::from_secs(15),
        "the slow reader's connection closed",
        || {
            rss_max = rss_max.max(rss_kib(pid));
            open_fds(pid) <= fds_before
        },
    );
    let closed_after = t.elapsed();
    drop(raw);
    let grown = rss_max.saturating_sub(rss_before);
    eprintln!(
        "slow reader: {written} calls written, never read; meanwhile {calls} calls on another connection, slowest {slowest:?}; \
         RSS {rss_before} KiB before, at most {rss_max} KiB (+{grown} KiB); closed {closed_after:?} after its last write"
    );
    assert!(written > 0);
    // Measured +7 to +32 MB over runs (not in proportion to the calls:
    // 148,900 calls took +7.7 MB); the bound is generous.
    assert!(grown < 128 * 1024, "memory bounded: +{grown} KiB");
    assert!(slowest < Duration::from_secs(2), "{slowest:?}");
    rt.block_on(decide(&mut other, "after")).unwrap();
}

/// One gRPC message's bytes on the wire (its 5-byte prefix, then it).
fn grpc_message(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// A well-behaved HTTP/2 client (h2's: it keeps to the stream cap and
/// answers pings) whose application never reads: its window is 0, so no
/// answer's message can reach it. It sends `calls` whole calls and keeps
/// them; the connection's task, which ends when the server closes it.
async fn shut_window_client(
    addr: SocketAddr,
    calls: usize,
) -> (
    tokio::task::JoinHandle<Result<(), h2::Error>>,
    Vec<h2::client::ResponseFuture>,
) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (h2c, conn) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, axum::body::Bytes>(tcp)
        .await
        .unwrap();
    let conn = tokio::spawn(conn);
    let mut h2c = h2c.ready().await.unwrap();
    let mut kept = Vec::new();
    for i in 0..calls {
        let call = axum::http::Request::post(format!("http://{addr}{}", h2f::SHOULD_RATE_LIMIT))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (answer, mut body) = h2c.send_request(call, false).unwrap();
        body.send_data(grpc_message(&encoded(&format!("shut{i}"))).into(), true)
            .unwrap();
        kept.push(answer);
        h2c = h2c.ready().await.unwrap();
    }
    (conn, kept)
}

#[test]
fn a_client_that_keeps_its_window_shut_is_closed_at_max_connection_age() {
    let dir = TempDir::new("rls-shut-window");
    let d = Daemon::start_with(&config(&dir, "max_connection_age_ms = 2000"));
    let addr = d.rls_grpc().unwrap();
    let pid = d.pid();
    let rt = runtime();
    rt.block_on(async {
        let mut other = client(addr).await.unwrap();
        decide(&mut other, "warm").await.unwrap();
        let rss_before = rss_kib(pid);
        // 8 connections x 256 calls: every answer's head arrives, none of
        // its messages can.
        let mut stuck = Vec::new();
        for _ in 0..8 {
            stuck.push(shut_window_client(addr, 256).await);
        }
        let t = Instant::now();
        for i in 0..20 {
            decide(&mut other, &format!("o{i}")).await.unwrap();
        }
        let others = t.elapsed();
        let rss_stuck = rss_kib(pid);
        let grown = rss_stuck.saturating_sub(rss_before);
        eprintln!(
            "8 x 256 calls whose answers cannot be sent: RSS {rss_before} KiB before, {rss_stuck} KiB with them (+{grown} KiB, {} B a call); 20 other calls meanwhile in {others:?}",
            grown * 1024 / 2048
        );
        assert!(grown < 64 * 1024, "+{grown} KiB");
        // Closed at 2 s, its calls with it.
        let t = Instant::now();
        for (conn, answers) in stuck {
            let ended = tokio::time::timeout(Duration::from_secs(20), conn).await;
            assert!(ended.is_ok(), "a shut-window connection still open after 20 s");
            drop(answers);
        }
        eprintln!("the shut-window connections closed {:?} after the last opened", t.elapsed());
        // The server goes on; its memory came back down.
        decide(&mut other, "after").await.unwrap();
        eprintln!("RSS after they closed: {} KiB", rss_kib(pid));
    });
    let aged = metric(
        &d,
        "rollstat_rls_refused_total",
        &[("reason", "connection_age")],
    );
    assert!(
        aged >= Some(8.0),
        "the 8 closed at their age, counted: {aged:?}"
    );
}

/// `calls` calls at once on one new connection, each within 5 s: how
/// many were answered, the errors, and the slowest.
async fn calls_on_new_connection(
    addr: SocketAddr,
    tag: usize,
    calls: usize,
) -> (
    usize,
    Vec<String>,
    Duration,
    Option<RateLimitServiceClient<Channel>>,
) {
    let t = Instant::now();
    let mut c = match client(addr).await {
        Ok(c) => c,
        Err(e) => return (0, vec![e; calls], t.elapsed(), None),
    };
    let answers = futures_util::future::join_all((0..calls).map(|i| {
        let mut c = c.clone();
        async move {
            let t = Instant::now();
            let r = decide(&mut c, &format!("c{tag}-{i}")).await;
            (r, t.elapsed())
        }
    }))
    .await;
    let ok = answers.iter().filter(|(r, _)| r.is_ok()).count();
    let errors = answers
        .iter()
        .filter_map(|(r, _)| {
            r.as_ref()
                .err()
                .map(|s| format!("{:?}: {}", s.code(), s.message()))
        })
        .collect();
    let slowest = answers.iter().map(|(_, d)| *d).max().unwrap_or_default();
    let _ = &mut c;
    (ok, errors, slowest, Some(c))
}

#[test]
fn two_hundred_connections_at_once_are_each_answered_or_refused_quickly() {
    let dir = TempDir::new("rls-many");
    let d = Daemon::start_with(&config(&dir, "max_connections = 150"));
    let addr = d.rls_grpc().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let mut other = client(addr).await.unwrap();
        decide(&mut other, "warm").await.unwrap();
        let t = Instant::now();
        let results = futures_util::future::join_all(
            (0..200).map(|tag| tokio::spawn(calls_on_new_connection(addr, tag, 4))),
        )
        .await;
        let took = t.elapsed();
        // Every connection still held here: 149 beside `other` served.
        let results: Vec<_> = results.into_iter().map(Result::unwrap).collect();
        let served = results.iter().filter(|r| r.0 == 4).count();
        let refused = results.iter().filter(|r| r.0 == 0).count();
        let slowest = results.iter().map(|r| r.2).max().unwrap();
        let mut errors: Vec<&String> = results.iter().flat_map(|r| &r.1).collect();
        errors.sort();
        errors.dedup();
        eprintln!("200 connections x 4 calls in {took:?}: {served} connections answered, {refused} refused, slowest call {slowest:?}; errors: {errors:?}");
        assert_eq!((served, refused), (149, 51), "none half served");
        assert!(slowest < Duration::from_secs(5), "no call waits for its client's deadline: {slowest:?}");
        decide(&mut other, "meanwhile").await.unwrap();
        assert_eq!(
            metric(&d, "rollstat_rls_connections", &[]),
            Some(150.0),
            "the cap is full: `other` and the 149 served"
        );
        drop(results);
    });
    // The 149 closed: only `other`'s (dropped with the runtime) may linger.
    let t = Instant::now();
    while metric(&d, "rollstat_rls_connections", &[]) > Some(1.0) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "closed connections still counted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let capped = metric(
        &d,
        "rollstat_rls_refused_total",
        &[("reason", "connection_cap")],
    );
    assert!(capped >= Some(51.0), "{capped:?}");
}

#[test]
fn statsd_and_metrics_go_on_through_a_grpc_flood_and_hostile_clients() {
    let dir = TempDir::new("rls-flood");
    let d = Daemon::start_with(&config(&dir, ""));
    let addr = d.rls_grpc().unwrap();
    let rt = runtime();
    // Hostile clients first: 300 streams opened at once that never send
    // their message (44 refused, 256 ended at their deadline), and 4
    // connections whose 256 calls each hold answers they never take.
    let mut stalled = RawH2::connect(addr).unwrap();
    let authority = addr.to_string();
    let headers: Vec<u8> = (0..300)
        .flat_map(|i| h2f::call_headers(1 + 2 * i, &authority, false))
        .collect();
    stalled.send(&headers).unwrap();
    let shut = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(shut_window_client(addr, 256).await);
        }
        v
    });
    // statsd over UDP and TCP and scrapes of /metrics, on threads, while
    // the flood runs: 20,000 lines each way.
    let (udp, tcp, http) = (d.udp, d.tcp, d.http);
    let statsd = std::thread::spawn(move || {
        use std::io::Write;
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut stream = std::net::TcpStream::connect(tcp).unwrap();
        let datagram: String = (0..50).map(|_| "flood.udp:1|c\n").collect();
        let lines: String = (0..50).map(|_| "flood.tcp:1|c\n").collect();
        for _ in 0..400 {
            sock.send_to(datagram.as_bytes(), udp).unwrap();
            stream.write_all(lines.as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let scrapes = std::thread::spawn(move || {
        let mut times = Vec::new();
        for _ in 0..40 {
            let (r, took) = get_within(http, "/metrics", Duration::from_secs(10)).unwrap();
            assert_eq!(r.status, 200);
            times.push(took);
            std::thread::sleep(Duration::from_millis(100));
        }
        times
    });
    // The flood: 16 connections x 8 calls in flight, for 5 s or 50,000
    // calls.
    let (calls, failed, took) = rt.block_on(async {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let failed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let t = Instant::now();
        let mut tasks = Vec::new();
        for conn in 0..16 {
            let c = client(addr).await.unwrap();
            for lane in 0..8 {
                let (mut c, done, failed) = (c.clone(), done.clone(), failed.clone());
                tasks.push(tokio::spawn(async move {
                    use std::sync::atomic::Ordering::Relaxed;
                    let mut i = 0;
                    while t.elapsed() < Duration::from_secs(5) && done.load(Relaxed) < 50_000 {
                        if decide(&mut c, &format!("f{conn}-{lane}-{i}"))
                            .await
                            .is_err()
                        {
                            failed.fetch_add(1, Relaxed);
                        }
                        done.fetch_add(1, Relaxed);
                        i += 1;
                    }
                }));
            }
        }
        for task in tasks {
            task.await.unwrap();
        }
        use std::sync::atomic::Ordering::Relaxed;
        (done.load(Relaxed), failed.load(Relaxed), t.elapsed())
    });
    statsd.join().unwrap();
    let times = scrapes.join().unwrap();
    let slowest = *times.iter().max().unwrap();
    let mut sorted = times.clone();
    sorted.sort();
    eprintln!(
        "flood: {calls} calls in {took:?} ({:.0}/s), {failed} failed; /metrics during it: median {:?}, slowest {slowest:?} over {} scrapes",
        calls as f64 / took.as_secs_f64(),
        sorted[sorted.len() / 2],
        times.len()
    );
    // Every statsd line counted, each way.
    let s = d.wait_scrape(
        Duration::from_secs(30),
        "20,000 lines over UDP and TCP",
        |s| {
            s.value("rollstat_ingest_lines_total", &[("transport", "udp")]) >= Some(20_000.0)
                && s.value("rollstat_ingest_lines_total", &[("transport", "tcp")]) >= Some(20_000.0)
        },
    );
    for t in ["udp", "tcp"] {
        assert_eq!(
            s.value("rollstat_ingest_lines_total", &[("transport", t)]),
            Some(20_000.0),
            "{t}"
        );
    }
    assert_eq!(failed, 0, "the flood's calls are all answered");
    assert!(
        slowest < Duration::from_secs(2),
        "/metrics within 2 s: {slowest:?}"
    );
    drop((stalled, shut));
}
