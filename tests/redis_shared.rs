//! Limits shared through real `redis-server` processes, started by the tests
//! on free loopback ports and killed on drop (`.ci/install-redis-deps`
//! installs the Debian package).
//!
//! * The Lua sliding log decides exactly like the in-memory `SlidingLog`
//!   (allowed, remaining, reset, retry-after, binding rule) on random
//!   timelines with several rules and weights, and never holds more than
//!   `max` in any window (brute force); the Lua sliding counter decides
//!   exactly like the in-memory `SlidingCounter`.
//! * Two daemons on one Redis, hammered concurrently on one key: at most 100
//!   admitted in any 1 s window, counted with send times at the window's start
//!   and receive times at its end so that loopback jitter cannot fake a
//!   violation.
//! * Faults: Redis killed (decisions continue from local state, `source:
//!   local`, `rollstat_store_up 0`), stopped with SIGSTOP (decisions return
//!   within the deadline), restarted with an empty script cache (NOSCRIPT
//!   handled, sharing resumes, `rollstat_store_up 1`).
//! * Shared windows: two daemons fed statsd separately both publish the
//!   fleet-wide window; an outage pauses the fleet view and counts the bucket
//!   deltas that could not be shared.
//! * Redis Cluster: three masters on loopback made with `redis-cli --cluster
//!   create`; the two-daemon limit and window tests pass against it, and the
//!   keys of many limit keys spread over all three nodes.
//!
//! Without `redis-server` on the PATH these tests print why and pass, except
//! under CI (`CI` set), where they fail.

// These tests drive real processes over real sockets and time them with the
// OS clock; the library itself never reads it.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rollstat::limit::{Limit, LimitState, Limits, SlidingLog};
use rollstat::store::{RedisConfig, RedisStore, RedisTarget, StoreError};
use rollstat::Timestamp;

// ---------------------------------------------------------------------------
// redis-server processes

/// Whether redis-server is installed; under CI its absence is a failure.
fn have_redis() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-server is not installed; run .ci/install-redis-deps"
        );
        eprintln!("skipped: redis-server is not installed (run .ci/install-redis-deps)");
    }
    found
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A redis-server on loopback, killed on drop.
struct Redis {
    child: Option<Child>,
    port: u16,
    extra: Vec<String>,
    dir: std::path::PathBuf,
}

impl Redis {
    fn start() -> Redis {
        Self::start_with(free_port(), Vec::new())
    }

    fn start_with(port: u16, extra: Vec<String>) -> Redis {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("rollstat-redis-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = Redis {
            child: None,
            port,
            extra,
            dir,
        };
        r.restart();
        r
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on the same port, empty, and waits for PONG.
    fn restart(&mut self) {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.ping() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server on port {} did not answer within 10 s",
            self.port
        );
    }

    fn ping(&self) -> bool {
        self.command("PING").is_some_and(|r| r.starts_with("+PONG"))
    }

    /// One inline command; the first line of the answer.
    fn command(&self, cmd: &str) -> Option<String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
        s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
        s.write_all(format!("{cmd}\r\n").as_bytes()).ok()?;
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).ok()?;
        Some(line)
    }

    fn signal(&self, sig: &str) {
        if let Some(c) = &self.child {
            let ok = Command::new("kill")
                .args([sig, &c.id().to_string()])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "kill {sig} failed");
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // A stopped process must be continued to die promptly.
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------
// The Lua script against the in-memory log and a brute-force count

/// xorshift64*: a reproducible stream without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn store(url: String, timeout: Duration) -> Arc<RedisStore> {
    let mut cfg = RedisConfig::url(url);
    cfg.timeout = timeout;
    RedisStore::new(cfg).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lua_sliding_log_decides_like_the_in_memory_log_on_random_timelines() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start();
    let store = store(redis.url(), Duration::from_secs(2));
    let cases: [&[(u32, u64)]; 4] = [
        &[(5, 1_000)],
        &[(5, 1_000), (8, 3_000)],
        &[(3, 250), (10, 2_000), (20, 10_000)],
        &[(1, 100), (4, 700)],
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut compared = 0;
    let started = Instant::now();
    for (case, rules) in cases.iter().enumerate() {
        for run in 0..3 {
            let limits = Limits::new(
                rules
                    .iter()
                    .map(|&(m, w)| Limit::new(m, Duration::from_millis(w)).unwrap()),
            )
            .unwrap();
            let mut model = SlidingLog::new(&limits);
            // Timestamps on whole microseconds, the precision of the scores.
            let mut now_us: u64 = 1_767_225_600_000_000 + rng.below(1_000_000);
            let key = format!("case{case}-run{run}");
            let mut admitted: Vec<(u64, u32)> = Vec::new();
            for step in 0..250 {
                // Bursts at one instant, small steps and long gaps.
                now_us += match rng.below(10) {
                    0..=2 => 0,
                    3..=7 => rng.below(150_000),
                    _ => rng.below(1_500_000),
                };
                let max_w = rules.iter().map(|r| r.0).min().unwrap();
                let n = rng.below(u64::from(max_w) + 1) as u32;
                let now = Timestamp::from_nanos(now_us * 1000);
                let want = model.acquire(n, now).unwrap();
                let got = store
                    .sliding_log("lua", &key, &limits, n, now)
                    .await
                    .unwrap();
                assert_eq!(
                    got, want,
                    "case {case} run {run} step {step}: n = {n} at +{now_us} us"
                );
                if got.allowed && n > 0 {
                    admitted.push((now_us, n));
                }
                compared += 1;
            }
            // Brute force: no window of any rule holds more than its max.
            for &(max, w_ms) in rules.iter() {
                let w = w_ms * 1000;
                for &(end, _) in &admitted {
                    let inside: u32 = admitted
                        .iter()
                        .filter(|(t, _)| *t <= end && *t + w > end)
                        .map(|x| x.1)
                        .sum();
                    assert!(inside <= max, "{inside} > {max} in a {w_ms} ms window");
                }
            }
        }
    }
    // Too heavy a request is refused before anything is sent.
    let limits = Limits::new([Limit::per_second(2).unwrap()]).unwrap();
    let e = store
        .sliding_log(
            "lua",
            "heavy",
            &limits,
            3,
            Timestamp::from_secs(1_767_225_600),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Acquire(_)), "{e}");
    println!(
        "{compared} decisions compared with the in-memory log in {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lua_sliding_counter_decides_like_the_in_memory_counter_on_random_timelines() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start();
    let store = store(redis.url(), Duration::from_secs(2));
    let cases: [&[(u32, u64)]; 3] = [
        &[(10, 1_000)],
        &[(5, 1_000), (12, 3_000)],
        &[(3, 250), (10, 2_000), (40, 10_000)],
    ];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut compared = 0;
    for (case, rules) in cases.iter().enumerate() {
        for run in 0..3 {
            let limits = Limits::new(
                rules
                    .iter()
                    .map(|&(m, w)| Limit::new(m, Duration::from_millis(w)).unwrap()),
            )
            .unwrap();
            let mut model = rollstat::limit::SlidingCounter::new(&limits);
            let mut now_us: u64 = 1_767_225_600_000_000 + rng.below(1_000_000);
            let key = format!("counter-case{case}-run{run}");
            for step in 0..250 {
                now_us += match rng.below(10) {
                    0..=2 => 0,
                    3..=7 => rng.below(150_000),
                    _ => rng.below(1_500_000),
                };
                let max_w = rules.iter().map(|r| r.0).min().unwrap();
                let n = rng.below(u64::from(max_w) + 1) as u32;
                let now = Timestamp::from_nanos(now_us * 1000);
                let want = model.acquire(n, now).unwrap();
                let got = store
                    .sliding_counter("lua", &key, &limits, n, now)
                    .await
                    .unwrap();
                assert_eq!(
                    got, want,
                    "case {case} run {run} step {step}: n = {n} at +{now_us} us"
                );
                compared += 1;
            }
        }
    }
    println!("{compared} counter decisions compared with the in-memory counter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_carry_one_hash_tag_per_limit_and_key_and_expire_after_the_window() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start();
    let store = store(redis.url(), Duration::from_secs(2));
    let limits = Limits::new([
        Limit::per_second(5).unwrap(),
        Limit::per_minute(50).unwrap(),
    ])
    .unwrap();
    let k1 = store.log_key("api", "alice", &limits.as_slice()[0]);
    let k2 = store.log_key("api", "alice", &limits.as_slice()[1]);
    assert_eq!(k1, "rollstat:{api:alice}:5/1s");
    assert_eq!(k2, "rollstat:{api:alice}:50/60s");
    let now = Timestamp::from_secs(1_767_225_600);
    let d = store
        .sliding_log("api", "alice", &limits, 3, now)
        .await
        .unwrap();
    assert!(d.allowed && d.remaining == 2);
    // Weighted: three members in each set; TTL = window + 1 s margin.
    assert_eq!(redis.command(&format!("ZCARD {k1}")).unwrap().trim(), ":3");
    assert_eq!(redis.command(&format!("ZCARD {k2}")).unwrap().trim(), ":3");
    let ttl1: i64 = redis.command(&format!("PTTL {k1}")).unwrap().trim()[1..]
        .parse()
        .unwrap();
    let ttl2: i64 = redis.command(&format!("PTTL {k2}")).unwrap().trim()[1..]
        .parse()
        .unwrap();
    assert!((1_500..=2_000).contains(&ttl1), "{ttl1}");
    assert!((60_500..=61_000).contains(&ttl2), "{ttl2}");
    // A denial records nothing.
    let d = store
        .sliding_log("api", "alice", &limits, 3, now)
        .await
        .unwrap();
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(Duration::from_secs(1)));
    assert_eq!(redis.command(&format!("ZCARD {k1}")).unwrap().trim(), ":3");
}

// ---------------------------------------------------------------------------
// Daemons

/// The daemon, killed on drop.
struct Daemon {
    child: Child,
    http: SocketAddr,
    udp: SocketAddr,
    _dir: TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start(config: &str) -> Daemon {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("rollstat-shared-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.toml");
    std::fs::write(&path, config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rollstat"))
        .arg("--config")
        .arg(&path)
        .args(["--log", "error"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start rollstat");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("rollstat did not print its listening line within 10 s");
    let field = |k: &str| -> SocketAddr {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {line:?}"))
            .parse()
            .unwrap()
    };
    Daemon {
        http: field("http"),
        udp: field("statsd_udp"),
        child,
        _dir: TempDir(dir),
    }
}

/// A keep-alive HTTP/1.1 client on one connection.
struct Http {
    r: BufReader<TcpStream>,
}

impl Http {
    fn connect(addr: SocketAddr) -> Http {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Http {
            r: BufReader::new(s),
        }
    }

    /// Sends a request; returns (status, body).
    fn call(&mut self, method: &str, path: &str, body: &str) -> (u16, String) {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: rollstat\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.r.get_mut().write_all(req.as_bytes()).unwrap();
        let mut status = String::new();
        self.r.read_line(&mut status).unwrap();
        let code: u16 = status.split_whitespace().nth(1).unwrap().parse().unwrap();
        let mut len = 0;
        loop {
            let mut h = String::new();
            self.r.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap();
            if k.trim().eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut buf = vec![0; len];
        self.r.read_exact(&mut buf).unwrap();
        (code, String::from_utf8(buf).unwrap())
    }
}

/// The value of the first /metrics sample whose line starts with `prefix`.
fn metric(addr: SocketAddr, prefix: &str) -> Option<f64> {
    Http::connect(addr)
        .call("GET", "/metrics", "")
        .1
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out after {limit:?} waiting for {what}");
}

fn source(body: &str) -> &str {
    let v = body.split("\"source\":\"").nth(1).unwrap_or("");
    v.split('"').next().unwrap_or("")
}

/// One admitted decision: when its request was sent and its answer received.
/// The server decided somewhere in between.
#[derive(Clone, Copy)]
struct Admitted {
    sent: Instant,
    received: Instant,
}

/// The most admitted decisions that certainly lie in one window of length
/// `w`: for each admitted decision as the window's end, count those whose
/// request was sent after `received − w`. Sound despite network jitter.
fn max_certainly_in_window(admitted: &[Admitted], w: Duration) -> usize {
    let mut sorted = admitted.to_vec();
    sorted.sort_by_key(|a| a.received);
    sorted
        .iter()
        .map(|end| {
            sorted
                .iter()
                .filter(|a| a.received <= end.received && a.sent + w > end.received)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Calls acquire for `key` every `every` until `total` has passed; returns
/// the admitted decisions, the denied count and every answer's source.
fn hammer(
    addr: SocketAddr,
    limit: &str,
    key: &str,
    every: Duration,
    total: Duration,
) -> (Vec<Admitted>, usize, Vec<String>) {
    let mut c = Http::connect(addr);
    let start = Instant::now();
    let mut admitted = Vec::new();
    let mut denied = 0;
    let mut sources = Vec::new();
    let mut next = start;
    let path = format!("/api/v1/limits/{limit}/acquire?key={key}");
    while start.elapsed() < total {
        let sent = Instant::now();
        let (code, body) = c.call("POST", &path, "");
        let received = Instant::now();
        match code {
            200 => admitted.push(Admitted { sent, received }),
            429 => denied += 1,
            other => panic!("unexpected status {other}: {body}"),
        }
        let s = source(&body).to_string();
        if !sources.contains(&s) {
            sources.push(s);
        }
        next += every;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    (admitted, denied, sources)
}

fn shared_config(redis: &str, extra: &str) -> String {
    format!(
        r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[redis]
{redis}
timeout_ms = 200
sync_interval_ms = 100

[[limits]]
name = "api"
shared = true
rules = [{{ max = 100, window_ms = 1000 }}]
{extra}
"#
    )
}

fn two_daemons_stay_within_the_limit(redis_section: &str) {
    let cfg = shared_config(redis_section, "");
    let (a, b) = (start(&cfg), start(&cfg));
    let started = Instant::now();
    // 4 clients on each daemon, one key, one request every 8 ms each: about
    // 1000 requests/s offered against 100/s.
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let addr = if i % 2 == 0 { a.http } else { b.http };
            std::thread::spawn(move || {
                hammer(
                    addr,
                    "api",
                    "fleet",
                    Duration::from_millis(8),
                    Duration::from_secs(6),
                )
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut denied = 0;
    let mut sources = Vec::new();
    let mut per_daemon = [0usize; 2];
    for (i, h) in handles.into_iter().enumerate() {
        let (adm, den, src) = h.join().unwrap();
        per_daemon[i % 2] += adm.len();
        all.extend(adm);
        denied += den;
        sources.extend(src);
    }
    sources.sort();
    sources.dedup();
    let m = max_certainly_in_window(&all, Duration::from_secs(1));
    println!(
        "two daemons, 8 clients, one key: admitted {} ({} on a, {} on b), denied {denied}, \
         max in any 1 s window = {m}, sources {sources:?}, in {:?}",
        all.len(),
        per_daemon[0],
        per_daemon[1],
        started.elapsed()
    );
    assert_eq!(sources, ["redis"], "every decision must come from Redis");
    assert!(m <= 100, "two daemons admitted {m} within one second");
    assert!(m >= 95, "the window count should reach the limit: {m}");
    // One fleet-wide limit: about 100/s over 6 s in total, not 100/s each.
    assert!(
        all.len() <= 700 && all.len() >= 500,
        "admitted {} in 6 s against 100/s fleet-wide",
        all.len()
    );
    assert!(per_daemon[0] > 100 && per_daemon[1] > 100, "{per_daemon:?}");
}

#[test]
fn two_daemons_on_one_redis_never_admit_more_than_100_in_any_second() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start();
    two_daemons_stay_within_the_limit(&format!("url = \"{}\"", redis.url()));
}

fn acquire(addr: SocketAddr, key: &str) -> (u16, String, Duration) {
    let t = Instant::now();
    let (code, body) =
        Http::connect(addr).call("POST", &format!("/api/v1/limits/api/acquire?key={key}"), "");
    (code, body, t.elapsed())
}

#[test]
fn redis_killed_then_restarted_empty_local_decisions_then_sharing_resumes() {
    if !have_redis() {
        return;
    }
    let mut redis = Redis::start();
    let mut d = start(&shared_config(&format!("url = \"{}\"", redis.url()), ""));
    let (code, body, _) = acquire(d.http, "k");
    assert_eq!((code, source(&body)), (200, "redis"), "{body}");
    wait_until("rollstat_store_up 1", Duration::from_secs(5), || {
        metric(d.http, "rollstat_store_up ") == Some(1.0)
    });
    let loads_before = metric(d.http, "rollstat_store_script_loads_total").unwrap_or(0.0);

    redis.kill();
    let mut locals = 0;
    for _ in 0..20 {
        let (code, body, took) = acquire(d.http, "k");
        assert!(code == 200 || code == 429, "{code}: {body}");
        assert_eq!(source(&body), "local", "{body}");
        assert!(took < Duration::from_secs(1), "took {took:?}");
        locals += 1;
    }
    assert_eq!(metric(d.http, "rollstat_store_up "), Some(0.0));
    assert!(metric(d.http, "rollstat_store_errors_total{op=\"limit\"}").unwrap_or(0.0) >= 1.0);
    assert!(d.alive());

    // Back, on the same port, with an empty script cache.
    redis.restart();
    wait_until(
        "sharing to resume after the restart",
        Duration::from_secs(10),
        || source(&acquire(d.http, "k2").1) == "redis",
    );
    wait_until("rollstat_store_up 1", Duration::from_secs(5), || {
        metric(d.http, "rollstat_store_up ") == Some(1.0)
    });
    let loads_after = metric(d.http, "rollstat_store_script_loads_total").unwrap_or(0.0);
    assert!(
        loads_after > loads_before,
        "the script should have been reloaded after NOSCRIPT: {loads_before} -> {loads_after}"
    );
    assert!(d.alive());
    println!(
        "{locals} local decisions during the outage; script loads {loads_before} -> {loads_after}"
    );
}

#[test]
fn redis_stopped_with_sigstop_decisions_return_within_the_deadline() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start();
    let mut d = start(&shared_config(
        &format!("url = \"{}\"", redis.url()),
        "on_store_error = \"local\"",
    ));
    assert_eq!(source(&acquire(d.http, "s").1), "redis");
    redis.signal("-STOP");
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let (code, body, took) = acquire(d.http, "s");
        assert_eq!(code, 200, "{body}");
        assert_eq!(source(&body), "local", "{body}");
        slowest = slowest.max(took);
    }
    // Deadline 200 ms; loopback and scheduling add little.
    assert!(slowest < Duration::from_millis(700), "slowest {slowest:?}");
    assert_eq!(metric(d.http, "rollstat_store_up "), Some(0.0));
    redis.signal("-CONT");
    wait_until(
        "sharing to resume after SIGCONT",
        Duration::from_secs(10),
        || source(&acquire(d.http, "s").1) == "redis",
    );
    assert!(d.alive());
    println!("slowest decision while Redis was stopped: {slowest:?}");
}

#[test]
fn fail_closed_and_fail_open_limits_answer_without_redis() {
    if !have_redis() {
        return;
    }
    // Redis down from the start: nothing listens on this port.
    let port = free_port();
    let cfg = format!(
        r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[redis]
url = "redis://127.0.0.1:{port}"
timeout_ms = 100

[[limits]]
name = "closed"
shared = true
on_store_error = "deny"
rules = [{{ max = 10, window_ms = 1000 }}]

[[limits]]
name = "open"
shared = true
on_store_error = "allow"
rules = [{{ max = 10, window_ms = 1000 }}]
"#
    );
    let mut d = start(&cfg);
    let mut c = Http::connect(d.http);
    let (code, body) = c.call("POST", "/api/v1/limits/closed/acquire?key=a", "");
    assert_eq!((code, source(&body)), (503, "fallback"), "{body}");
    for _ in 0..20 {
        let (code, body) = c.call("POST", "/api/v1/limits/open/acquire?key=a", "");
        assert_eq!((code, source(&body)), (200, "fallback"), "{body}");
    }
    assert_eq!(metric(d.http, "rollstat_store_up "), Some(0.0));
    // Started while Redis was down; it comes up on that port: sharing starts.
    let _redis = Redis::start_with(port, Vec::new());
    wait_until("sharing to start", Duration::from_secs(10), || {
        let (code, body) =
            Http::connect(d.http).call("POST", "/api/v1/limits/closed/acquire?key=b", "");
        code == 200 && source(&body) == "redis"
    });
    assert!(d.alive());
}

#[test]
fn shared_limits_and_windows_need_a_redis_section() {
    let e = rollstat::config::Config::parse(
        r#"
[[limits]]
name = "a"
shared = true
rules = [{ max = 1, window_ms = 1000 }]
"#,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("line 4") && e.contains("needs a `[redis]` section"),
        "{e}"
    );
    let e = rollstat::config::Config::parse(
        r#"
[redis]
url = "redis://127.0.0.1:6379"
timeout_ms = 0

[[limits]]
name = "a"
algorithm = "approximate"
shared = true
on_store_error = "maybe"
rules = [{ max = 1, window_ms = 1000 }]
"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`redis.timeout_ms`"), "{e}");
    assert!(e.contains("unknown policy `maybe`"), "{e}");
    let cfg = rollstat::config::Config::parse(
        r#"
[redis]
cluster_nodes = ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]
sync_interval_ms = 250
"#,
    )
    .unwrap();
    let r = cfg.redis.unwrap();
    assert_eq!(
        r.target,
        RedisTarget::Cluster(vec![
            "redis://127.0.0.1:7000".into(),
            "redis://127.0.0.1:7001".into()
        ])
    );
    assert_eq!(r.sync_interval, Duration::from_millis(250));
}

// ---------------------------------------------------------------------------
// Shared windows

fn window_config(redis: &str, buckets: u32, interval_ms: u32) -> String {
    format!(
        r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[redis]
{redis}
timeout_ms = 200
sync_interval_ms = 100

[[windows]]
name = "w"
buckets = {buckets}
interval_ms = {interval_ms}

[[mappings]]
match = "api.requests"
shared = true
"#
    )
}

/// Sends `n` increments of 1 to `api.requests`, 50 lines a datagram.
fn send_counts(udp: SocketAddr, n: usize) {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut left = n;
    while left > 0 {
        let k = left.min(50);
        let text = vec!["api.requests:1|c"; k].join("\n");
        s.send_to(text.as_bytes(), udp).unwrap();
        left -= k;
        std::thread::sleep(Duration::from_millis(1));
    }
}

const LOCAL: &str = "rollstat_window_samples{metric=\"api.requests\",window=\"w\"}";
const FLEET: &str = "rollstat_fleet_window_samples{metric=\"api.requests\",window=\"w\"}";
const FLEET_RATE: &str = "rollstat_fleet_window_rate{metric=\"api.requests\",window=\"w\"}";
const LOCAL_RATE: &str = "rollstat_window_rate{metric=\"api.requests\",window=\"w\"}";

fn two_daemons_publish_the_fleet_wide_rate(redis_section: &str) {
    let cfg = window_config(redis_section, 30, 1000);
    let (a, b) = (start(&cfg), start(&cfg));
    let started = Instant::now();
    send_counts(a.udp, 300);
    send_counts(b.udp, 600);
    for d in [&a, &b] {
        wait_until(
            "the fleet view to show both daemons",
            Duration::from_secs(10),
            || metric(d.http, FLEET) == Some(900.0),
        );
    }
    assert_eq!(metric(a.http, LOCAL), Some(300.0));
    assert_eq!(metric(b.http, LOCAL), Some(600.0));
    // One scrape: the fleet rate is the local rate scaled by 900/300.
    let body = Http::connect(a.http).call("GET", "/metrics", "").1;
    let find = |p: &str| -> f64 {
        body.lines()
            .find(|l| l.starts_with(p))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {p}"))
    };
    let (fleet_rate, local_rate) = (find(FLEET_RATE), find(LOCAL_RATE));
    assert!(
        (fleet_rate / local_rate - 3.0).abs() < 1e-9,
        "{fleet_rate} vs {local_rate}"
    );
    println!(
        "fleet view 900 = 300 + 600 on both daemons after {:?}; rate {fleet_rate:.2}/s fleet, {local_rate:.2}/s local",
        started.elapsed()
    );
}

#[test]
fn two_daemons_on_one_redis_publish_the_fleet_wide_window() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start();
    two_daemons_publish_the_fleet_wide_rate(&format!("url = \"{}\"", redis.url()));
}

#[test]
fn shared_windows_survive_an_outage_and_count_what_could_not_be_shared() {
    if !have_redis() {
        return;
    }
    let mut redis = Redis::start();
    // A 1 s window of 4 buckets: an outage of 2 s outlives its buckets.
    let mut d = start(&window_config(
        &format!("url = \"{}\"", redis.url()),
        4,
        250,
    ));
    send_counts(d.udp, 100);
    wait_until("the fleet view", Duration::from_secs(5), || {
        metric(d.http, FLEET) == Some(100.0)
    });
    redis.kill();
    // Samples keep arriving during the outage; the local view shows them.
    let outage = Instant::now();
    while outage.elapsed() < Duration::from_secs(2) {
        send_counts(d.udp, 10);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(metric(d.http, LOCAL).unwrap_or(0.0) > 0.0);
    assert_eq!(metric(d.http, "rollstat_store_up "), Some(0.0));
    // The fleet view is stale: not published.
    assert_eq!(metric(d.http, FLEET), None);
    let unshared = metric(d.http, "rollstat_store_unshared_deltas_total").unwrap_or(0.0);
    assert!(unshared >= 1.0, "buckets that expired unshared: {unshared}");
    assert!(d.alive());
    redis.restart();
    // Sharing resumes: the fleet view returns and equals the local one
    // (one instance), once the outage's samples have left the window.
    wait_until("the fleet view to return", Duration::from_secs(10), || {
        metric(d.http, FLEET).is_some()
    });
    send_counts(d.udp, 40);
    wait_until("fleet == local", Duration::from_secs(5), || {
        let (l, f) = (metric(d.http, LOCAL), metric(d.http, FLEET));
        l.is_some() && l == f
    });
    assert_eq!(metric(d.http, "rollstat_store_up "), Some(1.0));
    println!("unshared bucket deltas during a 2 s outage: {unshared}");
}

// ---------------------------------------------------------------------------
// Redis Cluster

/// A port whose cluster bus port (port + 10000) is free too.
fn free_cluster_port() -> u16 {
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        if p < 55_000 && TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok() {
            return p;
        }
    }
    panic!("no free port pair for a cluster node");
}

/// Three masters on loopback, slots spread by `redis-cli --cluster create`.
struct Cluster {
    nodes: Vec<Redis>,
}

impl Cluster {
    fn start() -> Cluster {
        let nodes: Vec<Redis> = (0..3)
            .map(|_| {
                let port = free_cluster_port();
                Redis::start_with(
                    port,
                    vec![
                        "--cluster-enabled".into(),
                        "yes".into(),
                        "--cluster-config-file".into(),
                        format!("nodes-{port}.conf"),
                        "--cluster-node-timeout".into(),
                        "2000".into(),
                    ],
                )
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create (package redis-tools)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let c = Cluster { nodes };
        wait_until(
            "cluster_state:ok on every node",
            Duration::from_secs(20),
            || c.nodes.iter().all(|n| cluster_ok(n.port)),
        );
        c
    }

    fn section(&self) -> String {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("\"{}\"", n.url()))
            .collect();
        format!("cluster_nodes = [{}]", urls.join(", "))
    }
}

fn cluster_ok(port: u16) -> bool {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "CLUSTER", "INFO"])
        .stdin(Stdio::null())
        .output();
    out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
}

#[test]
fn on_a_three_node_cluster_two_daemons_share_one_limit_and_one_window() {
    if !have_redis() {
        return;
    }
    let started = Instant::now();
    let cluster = Cluster::start();
    println!("3-node cluster up in {:?}", started.elapsed());
    two_daemons_stay_within_the_limit(&cluster.section());
    two_daemons_publish_the_fleet_wide_rate(&cluster.section());
    // Keys of many limit keys spread over the nodes; each key's rules stay
    // in one slot (one EVALSHA decides them all).
    let cfg = shared_config(
        &cluster.section(),
        "[[limits]]\nname = \"multi\"\nshared = true\nrules = [{ max = 2, window_ms = 1000 }, { max = 3, window_ms = 60000 }]",
    );
    let d = start(&cfg);
    let mut c = Http::connect(d.http);
    for k in 0..30 {
        let (code, body) = c.call(
            "POST",
            &format!("/api/v1/limits/multi/acquire?key=user{k}"),
            "",
        );
        assert_eq!((code, source(&body)), (200, "redis"), "{body}");
    }
    let mut holding = 0;
    for n in &cluster.nodes {
        let keys = Command::new("redis-cli")
            .args(["-p", &n.port.to_string(), "--no-raw", "DBSIZE"])
            .output()
            .unwrap();
        let count: usize = String::from_utf8_lossy(&keys.stdout)
            .trim()
            .trim_start_matches("(integer) ")
            .parse()
            .unwrap_or(0);
        if count > 0 {
            holding += 1;
        }
    }
    assert_eq!(holding, 3, "the keys should spread over all three nodes");
}
