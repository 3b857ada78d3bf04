//! Sharing through Redis, measured against a local `redis-server` in one run:
//!
//! 1. Shared exact-limiter decisions per second (16 concurrent clients, one
//!    key, 100/s) for rollstat's script (trim + count + add in one EVALSHA)
//!    against the naive per-request pipeline (ZADD + ZREMRANGEBYSCORE +
//!    ZCOUNT + EXPIRE, which logs denied requests too) and a client-side
//!    check-then-add, with Redis CPU per decision, the most admitted in any
//!    1 s window, and the key's memory at the end.
//! 2. Ingest throughput (statsd lines/s into the registry, 1000 counter
//!    series) with window sharing off, then on (the sync task pushing and
//!    reading every 100 ms on the same machine).
//!
//! `cargo bench --bench redis` (starts redis-server on a free port; needs the
//! Debian package). `ROLLSTAT_BENCH_SECS` sets each phase's length (5 s).

// A benchmark times itself with the OS clock.
#![allow(clippy::disallowed_methods)]

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use rollstat::config::Config;
use rollstat::fleet::FleetWindows;
use rollstat::ingest::{Ingestor, Worker};
use rollstat::limit::{Limit, Limits};
use rollstat::series::{Plan, Registry};
use rollstat::service::ServiceHandle;
use rollstat::store::{RedisConfig, RedisStore};
use rollstat::telemetry::Telemetry;
use rollstat::{Clock, SystemClock};

const CLIENTS: usize = 16;
const LIMIT: u32 = 100;

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_redis() -> (Server, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = Server(
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (apt-get install redis-server)"),
    );
    let url = format!("redis://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (server, url);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(server);
    panic!("redis-server did not start");
}

async fn redis_cpu(c: &mut ConnectionManager) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(c)
        .await
        .unwrap_or_default();
    info.lines()
        .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum()
}

/// Most admissions that certainly lie in one 1 s window: each admission was
/// decided between its request's send and its answer's receipt (nanos), so
/// for every admission as the window's end, count those sent after its
/// receipt minus 1 s. Sound whatever the order in which Redis ran them.
fn max_in_window(mut t: Vec<(u64, u64)>) -> usize {
    t.sort_unstable_by_key(|a| a.1);
    let w = 1_000_000_000;
    t.iter()
        .map(|end| t.iter().filter(|a| a.1 <= end.1 && a.0 + w > end.1).count())
        .max()
        .unwrap_or(0)
}

#[derive(Clone, Copy)]
enum Way {
    Script,
    NaivePipeline,
    CheckThenAdd,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Script => "rollstat script (EVALSHA: trim+count+add)",
            Way::NaivePipeline => "naive pipeline (ZADD+ZREMRANGEBYSCORE+ZCOUNT+EXPIRE)",
            Way::CheckThenAdd => "check-then-add from the client (2 round trips)",
        }
    }
}

async fn limiter_phase(way: Way, url: &str, secs: u64) {
    let client = redis::Client::open(url).unwrap();
    let mut admin = ConnectionManager::new(client.clone()).await.unwrap();
    let conn = ConnectionManager::new(client).await.unwrap();
    let mut cfg = RedisConfig::url(url);
    cfg.timeout = Duration::from_secs(2);
    let store = RedisStore::new(cfg).unwrap();
    let limits = Limits::new([Limit::per_second(LIMIT).unwrap()]).unwrap();
    let key = match way {
        Way::Script => store.log_key("bench", "one", &limits.as_slice()[0]),
        Way::NaivePipeline => "naive:one".to_string(),
        Way::CheckThenAdd => "check:one".to_string(),
    };
    let clock = Arc::new(SystemClock::new());
    let cpu0 = redis_cpu(&mut admin).await;
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let (store, limits, key, clock, stop, mut conn) = (
            store.clone(),
            limits.clone(),
            key.clone(),
            clock.clone(),
            stop.clone(),
            conn.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let (mut decisions, mut admitted, mut seq) = (0u64, Vec::new(), 0u64);
            while !stop.load(Ordering::Relaxed) {
                let now = clock.now();
                let ns = now.as_nanos();
                seq += 1;
                let member = format!("{ns}-{client}-{seq}");
                let ok = match way {
                    Way::Script => store
                        .sliding_log("bench", "one", &limits, 1, now)
                        .await
                        .is_ok_and(|d| d.allowed),
                    Way::NaivePipeline => {
                        let us = ns / 1000;
                        let r: redis::RedisResult<(i64, i64, i64, i64)> = redis::pipe()
                            .cmd("ZADD")
                            .arg(&key)
                            .arg(us)
                            .arg(&member)
                            .cmd("ZREMRANGEBYSCORE")
                            .arg(&key)
                            .arg("-inf")
                            .arg(us - 1_000_000)
                            .cmd("ZCOUNT")
                            .arg(&key)
                            .arg("-inf")
                            .arg("+inf")
                            .cmd("EXPIRE")
                            .arg(&key)
                            .arg(1)
                            .query_async(&mut conn)
                            .await;
                        r.is_ok_and(|(_, _, count, _)| count <= i64::from(LIMIT))
                    }
                    Way::CheckThenAdd => {
                        let us = ns / 1000;
                        let r: redis::RedisResult<(i64, i64)> = redis::pipe()
                            .cmd("ZREMRANGEBYSCORE")
                            .arg(&key)
                            .arg("-inf")
                            .arg(us - 1_000_000)
                            .cmd("ZCARD")
                            .arg(&key)
                            .query_async(&mut conn)
                            .await;
                        match r {
                            Ok((_, n)) if n < i64::from(LIMIT) => {
                                let _: redis::RedisResult<(i64, i64)> = redis::pipe()
                                    .cmd("ZADD")
                                    .arg(&key)
                                    .arg(us)
                                    .arg(&member)
                                    .cmd("EXPIRE")
                                    .arg(&key)
                                    .arg(1)
                                    .query_async(&mut conn)
                                    .await;
                                true
                            }
                            _ => false,
                        }
                    }
                };
                decisions += 1;
                if ok {
                    admitted.push((ns, clock.now().as_nanos()));
                }
            }
            (decisions, admitted)
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut decisions, mut admitted) = (0, Vec::new());
    for t in tasks {
        let (d, a) = t.await.unwrap();
        decisions += d;
        admitted.extend(a);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = redis_cpu(&mut admin).await - cpu0;
    let mem: Option<i64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&key)
        .query_async(&mut admin)
        .await
        .ok();
    println!(
        "{:<55} {:>9.0} decisions/s  {:>5.1} us Redis CPU each  admitted {:>5} (max {:>3} in any 1 s)  key {:>8} bytes",
        way.name(),
        decisions as f64 / elapsed,
        cpu * 1e6 / decisions.max(1) as f64,
        admitted.len(),
        max_in_window(admitted),
        mem.unwrap_or(0),
    );
}

fn ingest_config(shared: bool, url: &str) -> Config {
    Config::parse(&format!(
        r#"
[redis]
url = "{url}"
[[windows]]
name = "10s"
buckets = 10
interval_ms = 1000
[[mappings]]
match = "bench.*"
shared = {shared}
"#
    ))
    .unwrap()
}

/// Lines/s ingested on this thread for `secs`, with the fleet sync running
/// on the runtime when `shared`.
fn ingest_phase(rt: &tokio::runtime::Runtime, url: &str, shared: bool, secs: u64) -> f64 {
    let cfg = ingest_config(shared, url);
    let registry = Arc::new(Registry::new(Plan::new(cfg.series_settings()), 16));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let ing = Ingestor::new(
        registry.clone(),
        Arc::new(Telemetry::new().unwrap()),
        clock.clone(),
        Arc::new(ServiceHandle::default()),
    );
    // 1000 counter series, 50 lines a datagram.
    let datagrams: Vec<Vec<u8>> = (0..20)
        .map(|d| {
            (0..50)
                .map(|i| format!("bench.c{}:1|c", d * 50 + i))
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes()
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let sync = shared.then(|| {
        let redis_cfg = cfg.redis.clone().unwrap();
        let (registry, clock, stop) = (registry.clone(), clock.clone(), stop.clone());
        rt.spawn(async move {
            let store = RedisStore::new(redis_cfg.clone()).unwrap();
            let fleet = FleetWindows::new(&redis_cfg, &[0.5, 0.9, 0.99]);
            let (mut syncs, mut pushed) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                let r = fleet.sync(&registry, &store, clock.now()).await;
                syncs += 1;
                pushed += r.pushed;
                tokio::time::sleep(redis_cfg.sync_interval).await;
            }
            (syncs, pushed)
        })
    });
    let mut w = Worker::default();
    let started = Instant::now();
    let mut lines = 0u64;
    while started.elapsed() < Duration::from_secs(secs) {
        for d in &datagrams {
            ing.ingest(d, clock.now(), &mut w);
            lines += 50;
        }
    }
    let rate = lines as f64 / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let note = match sync {
        Some(h) => {
            let (syncs, pushed) = rt.block_on(h).unwrap();
            format!("({syncs} syncs, {pushed} bucket deltas pushed)")
        }
        None => String::new(),
    };
    println!(
        "ingest, sharing {:<3}: {:>10.0} lines/s {note}",
        if shared { "on" } else { "off" },
        rate
    );
    rate
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing we need.
    let secs: u64 = std::env::var("ROLLSTAT_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .clamp(1, 120);
    let (_server, url) = start_redis();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    println!("== shared exact limiter: {CLIENTS} clients, one key, {LIMIT}/s, {secs} s each");
    for way in [Way::Script, Way::NaivePipeline, Way::CheckThenAdd] {
        rt.block_on(limiter_phase(way, &url, secs));
    }
    println!("== ingest with window sharing off vs on ({secs} s each, 1000 series)");
    let off = ingest_phase(&rt, &url, false, secs);
    let on = ingest_phase(&rt, &url, true, secs);
    println!("sharing on / off = {:.0}%", 100.0 * on / off);
}
