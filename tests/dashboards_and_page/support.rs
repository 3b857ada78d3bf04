//! Small helpers for tests/dashboards_and_page.rs: temp dirs, child processes
//! killed on drop, a blocking HTTP/1.1 client, the real `rollstat` binary on
//! port 0 and a steady statsd + acquire load. Every wait has a deadline.
//! (tests/it/support.rs has richer versions; this file stays self-contained.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The absolute path of `name` on PATH, or a failure saying how to get it.
pub fn require_tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("`{name}` is missing: run .ci/install-deps (it calls .ci/install-page-deps)")
        })
}

/// Polls `f` every `every` until it returns `Ok`, or fails after `limit`
/// naming `what` and the last error.
pub fn wait_until<T>(
    limit: Duration,
    every: Duration,
    what: &str,
    mut f: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let last = match f() {
            Ok(v) => return v,
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}; last: {last}");
        }
        std::thread::sleep(every);
    }
}

/// A temporary directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory under the system temp dir.
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "rollstat-page-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process killed (by its own pid) and reaped on drop.
pub struct Proc {
    /// The child.
    pub child: Child,
    /// Its name, for messages.
    pub name: String,
}

impl Proc {
    /// Starts `cmd` with stdout/stderr sent to files in `dir`.
    pub fn spawn(name: &str, mut cmd: Command, dir: &Path) -> Proc {
        let out = std::fs::File::create(dir.join(format!("{name}.out"))).expect("log file");
        let err = std::fs::File::create(dir.join(format!("{name}.err"))).expect("log file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Proc {
            child,
            name: name.to_string(),
        }
    }

    /// Fails if the process has exited, quoting its log.
    pub fn assert_running(&mut self, dir: &Path) {
        if let Ok(Some(st)) = self.child.try_wait() {
            let log =
                std::fs::read_to_string(dir.join(format!("{}.err", self.name))).unwrap_or_default();
            panic!("{} exited early ({st}); its stderr:\n{log}", self.name);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

/// An HTTP response.
#[derive(Debug)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Body, decoded from chunked if it was.
    pub body: String,
}

/// One HTTP/1.1 request with `Connection: close` and a 30 s read timeout
/// (Chromium can take a while to start under a loaded CI machine).
pub fn http(
    method: &str,
    addr: SocketAddr,
    path: &str,
    body: Option<&str>,
) -> Result<Resp, String> {
    let err = |e: std::io::Error| format!("{method} http://{addr}{path}: {e}");
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(err)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(err)?;
    s.set_write_timeout(Some(Duration::from_secs(10)))
        .map_err(err)?;
    let body = body.unwrap_or("");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(err)?;
    // Some servers (chromedriver) keep the connection open despite
    // `Connection: close`: read by Content-Length or chunks, not to EOF.
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    let mut head_end = None;
    loop {
        if let Some(split) = head_end {
            let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
            let body = &raw[split + 4..];
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            let done = match length {
                Some(n) => body.len() >= n,
                None if head.contains("transfer-encoding: chunked") => body.ends_with(b"0\r\n\r\n"),
                None => false,
            };
            if done {
                break;
            }
        }
        let n = s.read(&mut buf).map_err(err)?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        if head_end.is_none() {
            head_end = raw.windows(4).position(|w| w == b"\r\n\r\n");
        }
    }
    let split =
        head_end.ok_or_else(|| format!("{method} {path}: no header end in {} bytes", raw.len()))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut rest = raw[split + 4..].to_vec();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("{method} {path}: bad status line in {head:?}"))?;
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        rest = dechunk(&rest);
    }
    Ok(Resp {
        status,
        body: String::from_utf8_lossy(&rest).to_string(),
    })
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 || b.len() < eol + 2 + size {
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[(eol + 4 + size).min(b.len())..];
    }
    out
}

/// GET returning parsed JSON from a 2xx answer.
pub fn get_json(addr: SocketAddr, path: &str) -> Result<serde_json::Value, String> {
    let r = http("GET", addr, path, None)?;
    if !(200..300).contains(&r.status) {
        return Err(format!("GET {path}: HTTP {}: {}", r.status, r.body));
    }
    serde_json::from_str(&r.body).map_err(|e| format!("GET {path}: not JSON ({e}): {}", r.body))
}

/// The rollstat config the tests run: two windows named like the sample
/// config's, a breaker that trips under the load and a limit the load hits.
pub const CONFIG: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = "127.0.0.1:0"
http = "127.0.0.1:0"

[ingest]
udp_readers = 1
udp_recv_buffer_bytes = 1048576

[series]
quantiles = [0.5, 0.9, 0.99]

[[windows]]
name = "10s"
buckets = 10
interval_ms = 1000

[[windows]]
name = "1m"
buckets = 60
interval_ms = 1000
ignore_current = true

[[mappings]]
match = "debug.**"
action = "drop"

[[breakers]]
name = "checkout"
kind = "error_rate"
requests_metric = "checkout.requests"
failures_metric = "checkout.failures"
min_calls = 5
failure_rate_threshold = 0.5
open_duration_ms = 2000
half_open_trials = 3

[[limits]]
name = "api"
algorithm = "exact"
rules = [{ max = 5, window_ms = 1000 }]
"#;

/// The statsd metrics the load sends, one per type.
pub const LOAD_METRICS: [&str; 6] = [
    "load.requests",
    "load.queue",
    "load.latency",
    "load.size",
    "load.dist",
    "load.users",
];

/// The real `rollstat` binary, killed on drop.
pub struct Daemon {
    /// The process (killed when the daemon drops).
    _proc: Proc,
    /// statsd UDP address.
    pub udp: SocketAddr,
    /// HTTP address.
    pub http: SocketAddr,
    /// Holds the config.
    _dir: TempDir,
}

impl Daemon {
    /// Starts rollstat with [`CONFIG`] and reads the addresses it bound.
    pub fn start() -> Daemon {
        let dir = TempDir::new("daemon");
        let cfg = dir.path().join("rollstat.toml");
        std::fs::write(&cfg, CONFIG).expect("write config");
        let mut child = Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("--config")
            .arg(&cfg)
            .arg("--log")
            .arg("error")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start rollstat");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let proc = Proc {
            child,
            name: "rollstat".into(),
        };
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| {
                panic!(
                    "{} printed no `rollstat listening` line ({e}); its stderr is above",
                    env!("CARGO_BIN_EXE_rollstat")
                )
            });
        let field = |k: &str| -> SocketAddr {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(&format!("{k}=")))
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("no {k}= in {line:?}"))
        };
        let (udp, http_addr) = (field("statsd_udp"), field("http"));
        wait_until(
            Duration::from_secs(10),
            Duration::from_millis(20),
            "rollstat /healthz",
            || match http("GET", http_addr, "/healthz", None) {
                Ok(r) if r.status == 200 => Ok(()),
                other => Err(format!("{other:?}")),
            },
        );
        Daemon {
            _proc: proc,
            udp,
            http: http_addr,
            _dir: dir,
        }
    }
}

/// A steady load on a [`Daemon`] until dropped (or 180 s, whichever first):
/// every 100 ms one line of every statsd type over UDP, breaker outcomes
/// (mostly failures for 10 s, then healthy for 10 s, and so on, so the
/// breaker trips at once and later recovers) and a breaker decision, a
/// dropped `debug.*` line, a bad line, and acquire calls over the `api`
/// limit (5/s).
pub struct Load {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Load {
    /// Starts the load.
    pub fn start(d: &Daemon) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let (udp, http_addr, flag) = (d.udp, d.http, stop.clone());
        let thread = std::thread::spawn(move || {
            let sock = UdpSocket::bind("127.0.0.1:0").expect("bind UDP");
            let deadline = Instant::now() + Duration::from_secs(180);
            let mut i: u64 = 0;
            while !flag.load(Ordering::Relaxed) && Instant::now() < deadline {
                let wave = (i % 40) as f64 / 40.0 * std::f64::consts::TAU;
                let lines = format!(
                    "load.requests:{}|c|#route:/checkout\nload.requests:{}|c|#route:/search\n\
                     load.queue:{}|g\nload.latency:{}|ms|#route:/checkout\nload.latency:{}|ms|#route:/checkout\n\
                     load.size:{}|h\nload.dist:{}|d\nload.users:user{}|s\n\
                     checkout.requests:4|c\ncheckout.failures:{}|c\ndebug.noise:1|c\nbad line\n",
                    2 + i % 3,
                    1 + i % 2,
                    20.0 + 10.0 * wave.sin(),
                    40.0 + 25.0 * wave.sin() + (i % 7) as f64,
                    120.0 + (i % 13) as f64 * 9.0,
                    512 + (i % 5) * 100,
                    0.25 + 0.1 * wave.cos(),
                    i % 25,
                    if (i / 100) % 2 == 0 && i % 10 < 8 { 3 } else { 0 },
                );
                let _ = sock.send_to(lines.as_bytes(), udp);
                // About 10 acquire calls per second for one key against 5/s: half denied.
                let _ = http(
                    "POST",
                    http_addr,
                    "/api/v1/limits/api/acquire?key=client",
                    None,
                );
                // Ask the breaker too, so that it hands out half-open trials
                // and moves between its states.
                let _ = http("GET", http_addr, "/api/v1/breakers/checkout/decision", None);
                i += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Load {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Decodes standard base64 (WebDriver screenshots).
pub fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    let val = |c: u8| -> Result<u32, String> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("bad base64 byte {c}")),
        }
        .into())
    };
    let clean: Vec<u8> = s
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= val(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Ok(out)
}
