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
