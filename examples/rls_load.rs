//! Load on rate-limit decisions, the same generator for both doors:
//!
//! ```text
//! rls_load grpc ADDR [seconds] [streams] [keys]   # ShouldRateLimit, one HTTP/2 connection
//! rls_load http ADDR [seconds] [streams] [keys]   # POST /api/v1/limits/api/acquire, one keep-alive connection per stream
//! ```
//!
//! `ROLLSTAT_LIMIT` names another limit for the HTTP door (`api` by default).
//!
//! `streams` calls are kept in flight (32 by default) for `seconds` (5),
//! each on its own key of `keys` (1000) in turn. Prints one line:
//! `decisions/s`, then p50, p99 and p999 latency in microseconds, and the
//! answers that were not a decision (errors). Loopback only, bounded by the
//! duration. Used by `benches/rls/run.sh`.

#![allow(clippy::disallowed_methods)] // a load generator measures wall time

use std::time::{Duration, Instant};

use rollstat::rls::proto::rate_limit_descriptor::Entry;
use rollstat::rls::proto::rate_limit_service_client::RateLimitServiceClient;
use rollstat::rls::proto::{RateLimitDescriptor, RateLimitRequest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Run {
    latencies: Vec<u32>,
    errors: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, default: u64| {
        args.get(i)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    let (door, addr) = (
        args.get(1).expect("grpc or http"),
        args.get(2).expect("ADDR").clone(),
    );
    let (secs, streams, keys) = (arg(3, 5), arg(4, 32), arg(5, 1000));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(secs);
    let runs = rt.block_on(async {
        let tasks: Vec<_> = (0..streams)
            .map(|s| {
                let (door, addr) = (door.clone(), addr.clone());
                tokio::spawn(async move {
                    match door.as_str() {
                        "grpc" => grpc(&addr, s, streams, keys, until).await,
                        _ => http(&addr, s, streams, keys, until).await,
                    }
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    report(runs, secs);
}

fn report(runs: Vec<Run>, secs: u64) {
    let errors: u64 = runs.iter().map(|r| r.errors).sum();
    let mut all: Vec<u32> = runs.into_iter().flat_map(|r| r.latencies).collect();
    all.sort_unstable();
    let q = |p: f64| {
        all.get(((all.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0)
    };
    println!(
        "decisions/s {:.0} p50_us {} p99_us {} p999_us {} errors {errors}",
        all.len() as f64 / secs as f64,
        q(0.5),
        q(0.99),
        q(0.999)
    );
}

async fn grpc(addr: &str, s: u64, streams: u64, keys: u64, until: Instant) -> Run {
    // One connection for every stream: tonic's channel multiplexes them.
    static CHANNEL: tokio::sync::OnceCell<tonic::transport::Channel> =
        tokio::sync::OnceCell::const_new();
    let channel = CHANNEL
        .get_or_init(|| async {
            tonic::transport::Channel::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect()
                .await
                .expect("connect")
        })
        .await
        .clone();
    let mut client = RateLimitServiceClient::new(channel);
    let mut run = Run {
        latencies: Vec::new(),
        errors: 0,
    };
    let mut key = s;
    while Instant::now() < until {
        let req = RateLimitRequest {
            domain: "bench".into(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![Entry {
                    key: "api_key".into(),
                    value: format!("k{key}"),
                }],
                limit: None,
                hits_addend: None,
            }],
            hits_addend: 1,
        };
        let t = Instant::now();
        match client.should_rate_limit(req).await {
            Ok(_) => run.latencies.push(t.elapsed().as_micros() as u32),
            Err(_) => run.errors += 1,
        }
        key = (key + streams) % keys;
    }
    run
}

async fn http(addr: &str, s: u64, streams: u64, keys: u64, until: Instant) -> Run {
    let limit = std::env::var("ROLLSTAT_LIMIT").unwrap_or_else(|_| "api".into());
    let mut conn = TcpStream::connect(addr).await.expect("connect");
    conn.set_nodelay(true).unwrap();
    let mut run = Run {
        latencies: Vec::new(),
        errors: 0,
    };
    let mut buf = vec![0u8; 4096];
    let mut key = s;
    while Instant::now() < until {
        let req = format!(
            "POST /api/v1/limits/{limit}/acquire?key=k{key} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n"
        );
        let t = Instant::now();
        conn.write_all(req.as_bytes()).await.unwrap();
        match read_response(&mut conn, &mut buf).await {
            Some(200 | 429) => run.latencies.push(t.elapsed().as_micros() as u32),
            Some(_) => run.errors += 1,
            None => break,
        }
        key = (key + streams) % keys;
    }
    run
}

/// One HTTP/1.1 response's status, its head and `Content-Length` body read.
async fn read_response(conn: &mut TcpStream, buf: &mut [u8]) -> Option<u16> {
    let mut have = 0;
    loop {
        let n = conn.read(&mut buf[have..]).await.ok()?;
        if n == 0 {
            return None;
        }
        have += n;
        let text = std::str::from_utf8(&buf[..have]).ok()?;
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length: usize = text[..end]
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap_or(0))
            })
            .unwrap_or(0);
        if have >= end + 4 + length {
            return text.get(9..12)?.parse().ok();
        }
    }
}
