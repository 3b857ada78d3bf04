//! Helpers shared by the integration tests: start the real `rollstat` binary
//! on port 0, talk HTTP/UDP/TCP to it, parse what `/metrics` says, poll with
//! a deadline, and run external tools (promtool, Prometheus, statsd clients)
//! with a time limit. Nothing here sleeps without a bound.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The repository root (where `config.toml` and `tests/clients` live).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The message for a missing external tool: never skip silently.
pub fn missing(what: &str) -> ! {
    panic!("{what} is missing: run `.ci/install-deps` (it installs every tool the integration tests use)")
}

/// The absolute path of `name` on PATH, or a failure that says how to get it.
pub fn require_tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| missing(&format!("`{name}`")))
}

/// Polls `f` every 20 ms until it returns `Some`, or fails after `limit`
/// naming `what` and the last value `f` saw (via `last`).
pub fn wait_until<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let last = match f() {
            Ok(v) => return v,
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}; last: {last}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `f` until it returns `want` (at most `limit`), failing with the
/// last value seen. For counters flushed one after another, where reading
/// one as a "done" marker could see the others a moment early.
#[track_caller]
pub fn wait_for<T: PartialEq + std::fmt::Debug>(
    limit: Duration,
    what: &str,
    want: &T,
    mut f: impl FnMut() -> T,
) {
    wait_until(limit, what, || {
        let got = f();
        if &got == want {
            Ok(())
        } else {
            Err(format!("got {got:?}, want {want:?}"))
        }
    });
}

/// A temporary directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory under the system temp dir.
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "rollstat-it-{tag}-{}-{}",
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

/// The test config: every listener on 127.0.0.1 port 0, one UDP reader,
/// small limits (so the hostile tests can reach them), 1 s buckets in a
/// "5s" and a "2s" window.
pub const TEST_CONFIG: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = "127.0.0.1:0"
http = "127.0.0.1:0"

[ingest]
udp_readers = 1
udp_recv_buffer_bytes = 1048576
max_line_bytes = 1024
http_max_body_bytes = 4096

[series]
quantiles = [0.5, 0.99]

[[windows]]
name = "5s"
buckets = 5
interval_ms = 1000

[[windows]]
name = "2s"
buckets = 2
interval_ms = 1000
"#;

/// The sample `config.toml` of the repository with its listeners moved to
/// port 0 (everything else, windows and mappings included, as shipped).
pub fn sample_config_on_port_0() -> String {
    let text = std::fs::read_to_string(repo().join("config.toml")).expect("read config.toml");
    let moved = text
        .replace("\"127.0.0.1:8125\"", "\"127.0.0.1:0\"")
        .replace("\"127.0.0.1:9102\"", "\"127.0.0.1:0\"");
    assert_eq!(
        moved.matches("127.0.0.1:0").count(),
        3,
        "config.toml's listen addresses changed; update sample_config_on_port_0"
    );
    moved
}

/// A running `rollstat`, killed on drop.
pub struct Daemon {
    child: Option<Child>,
    /// statsd UDP (0.0.0.0:0 if the config turns it off).
    pub udp: SocketAddr,
    /// statsd TCP (0.0.0.0:0 if the config turns it off).
    pub tcp: SocketAddr,
    /// HTTP.
    pub http: SocketAddr,
    /// The config file it was started with (rewrite it to test reloads).
    pub config: PathBuf,
    log: PathBuf,
    _dir: TempDir,
}

impl Daemon {
    /// Starts the daemon on [`TEST_CONFIG`].
    pub fn start() -> Daemon {
        Daemon::start_with(TEST_CONFIG)
    }

    /// Starts the daemon on `config` (which must bind port 0 everywhere) and
    /// waits, at most 10 s, for its "listening" line.
    pub fn start_with(config: &str) -> Daemon {
        let dir = TempDir::new("daemon");
        let cfg = dir.path().join("rollstat.toml");
        std::fs::write(&cfg, config).expect("write config");
        let log = dir.path().join("stderr.log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("--config")
            .arg(&cfg)
            .arg("--log")
            .arg("info")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("create log"))
            .spawn()
            .expect("start rollstat");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Forward lines until EOF; the daemon prints one.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(l) => l,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "rollstat printed no listening line within 10 s ({e}); stderr:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
        };
        let addr = |key: &str| -> Option<SocketAddr> {
            let a = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))?;
            Some(
                a.parse()
                    .unwrap_or_else(|e| panic!("bad {key} address in {line:?}: {e}")),
            )
        };
        let off: SocketAddr = "0.0.0.0:0".parse().unwrap();
        assert!(
            line.starts_with("rollstat listening "),
            "unexpected first line: {line:?}"
        );
        Daemon {
            udp: addr("statsd_udp").unwrap_or(off),
            tcp: addr("statsd_tcp").unwrap_or(off),
            http: addr("http").unwrap_or_else(|| panic!("no http= in {line:?}")),
            child: Some(child),
            config: cfg,
            log,
            _dir: dir,
        }
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `sig` (e.g. "TERM", "HUP") with `kill(1)`.
    pub fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -{sig} failed: {st}");
    }

    /// Waits at most `limit` for the process to exit and returns its status.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let child = self.child.as_mut().expect("running");
        let st = wait_until(limit, "rollstat to exit", || match child.try_wait() {
            Ok(Some(st)) => Ok(st),
            Ok(None) => Err("still running".into()),
            Err(e) => Err(e.to_string()),
        });
        self.child = None;
        st
    }

    /// One datagram to the statsd UDP port.
    pub fn send_udp(&self, datagram: &[u8]) {
        let s = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        s.send_to(datagram, self.udp).expect("send udp");
    }

    /// GET `path` (with optional extra headers).
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        http(self.http, "GET", path, headers, b"")
    }

    /// POST `body` to `path` with `content_type`.
    pub fn post(&self, path: &str, content_type: &str, body: &[u8]) -> Response {
        http(
            self.http,
            "POST",
            path,
            &[("Content-Type", content_type)],
            body,
        )
    }

    /// A plain-text scrape, parsed.
    pub fn scrape(&self) -> Scrape {
        let r = self.get("/metrics", &[]);
        assert_eq!(r.status, 200, "GET /metrics: {}", r.text());
        Scrape::parse(&r.text())
    }

    /// `/api/v1/series?match=glob` as JSON.
    pub fn series(&self, glob: &str) -> serde_json::Value {
        let r = self.get(&format!("/api/v1/series?match={glob}"), &[]);
        assert_eq!(r.status, 200, "GET /api/v1/series: {}", r.text());
        serde_json::from_slice(&r.body).expect("series JSON")
    }

    /// Scrapes until `ok` holds for a scrape (at most `limit`), and returns it.
    pub fn wait_scrape(&self, limit: Duration, what: &str, ok: impl Fn(&Scrape) -> bool) -> Scrape {
        wait_until(limit, what, || {
            let s = self.scrape();
            if ok(&s) {
                Ok(s)
            } else {
                Err("condition not met yet".into())
            }
        })
    }

    /// Waits (at most `limit`) until `rollstat_ingest_lines_total` for
    /// `transport` reaches `n`, and returns that scrape. Fails if it passes `n`.
    pub fn wait_lines(&self, transport: &str, n: f64, limit: Duration) -> Scrape {
        wait_until(limit, &format!("{n} accepted {transport} lines"), || {
            let s = self.scrape();
            let got = s.value("rollstat_ingest_lines_total", &[("transport", transport)]);
            match got {
                Some(g) if g == n => Ok(s),
                Some(g) if g > n => panic!("more {transport} lines accepted than sent: {g} > {n}"),
                other => Err(format!("{other:?}")),
            }
        })
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- rollstat stderr ---\n{}", self.log());
        }
    }
}

/// An HTTP response.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// Body, de-chunked (not decompressed).
    pub body: Vec<u8>,
}

impl Response {
    /// The body as UTF-8 (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The first header called `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// A minimal HTTP/1.1 client: one request per connection (`Connection:
/// close`), reads to EOF with a 10 s timeout, understands chunked bodies.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        let _ = write!(req, "{k}: {v}\r\n");
    }
    if method != "GET" || !body.is_empty() {
        let _ = write!(req, "Content-Length: {}\r\n", body.len());
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("write request");
    // A server may answer (413) before reading the whole body and close.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    if let Err(e) = s.read_to_end(&mut raw) {
        // A reset after a complete early response is fine; keep what we read.
        assert!(!raw.is_empty(), "{method} {path}: read failed: {e}");
    }
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let nl = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size_text = String::from_utf8_lossy(&b[..nl]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
            .unwrap_or_else(|e| panic!("bad chunk size {size_text:?}: {e}"));
        b = &b[nl + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// One sample of a Prometheus text exposition.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Sample name (with `_total`, `_bucket`... as written).
    pub name: String,
    /// Labels, unescaped.
    pub labels: BTreeMap<String, String>,
    /// Value.
    pub value: f64,
}

/// A parsed scrape: its samples in order, and its `# TYPE` lines.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// Every sample line.
    pub samples: Vec<Sample>,
    /// (family name, type) per `# TYPE` line.
    pub types: Vec<(String, String)>,
}

impl Scrape {
    /// Parses the classic text format (and the sample lines of OpenMetrics);
    /// panics on a line it cannot read, so a malformed scrape fails the test.
    pub fn parse(text: &str) -> Scrape {
        let mut samples = Vec::new();
        let mut types = Vec::new();
        for line in text.lines() {
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (n, t) = rest.split_once(' ').expect("TYPE line");
                types.push((n.to_string(), t.to_string()));
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            samples.push(parse_sample(line).unwrap_or_else(|e| panic!("{e}: {line:?}")));
        }
        Scrape { samples, types }
    }

    /// The value of the sample with exactly this name and label set.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }

    /// Like [`Scrape::value`], failing with the candidates if absent.
    pub fn must(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(name, labels).unwrap_or_else(|| {
            let near: Vec<String> = self
                .samples
                .iter()
                .filter(|s| s.name == name)
                .map(|s| format!("{:?} {}", s.labels, s.value))
                .collect();
            panic!("no sample {name}{labels:?}; samples of that name: {near:#?}")
        })
    }

    /// The sum of every sample called `name` (e.g. all rejection reasons).
    pub fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.value)
            .sum()
    }

    /// Samples called `name`, by the value of `label`.
    pub fn by_label(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .filter_map(|s| Some((s.labels.get(label)?.clone(), s.value)))
            .collect()
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or_else(|| "no value".to_string())?;
    let name = line[..name_end].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(r) = rest.strip_prefix('{') {
        let mut chars = r.char_indices().peekable();
        let mut end = None;
        loop {
            // key
            let mut key = String::new();
            loop {
                match chars.next() {
                    Some((i, '}')) if key.is_empty() => {
                        end = Some(i + 1);
                        break;
                    }
                    Some((_, '=')) => break,
                    Some((_, c)) => key.push(c),
                    None => return Err("unterminated label set".into()),
                }
            }
            if end.is_some() {
                break;
            }
            if chars.next().map(|x| x.1) != Some('"') {
                return Err(format!("label {key} value not quoted"));
            }
            let mut val = String::new();
            loop {
                match chars.next() {
                    Some((_, '\\')) => match chars.next().map(|x| x.1) {
                        Some('n') => val.push('\n'),
                        Some('\\') => val.push('\\'),
                        Some('"') => val.push('"'),
                        other => return Err(format!("bad escape {other:?}")),
                    },
                    Some((_, '"')) => break,
                    Some((_, c)) => val.push(c),
                    None => return Err("unterminated label value".into()),
                }
            }
            if labels.insert(key.clone(), val).is_some() {
                return Err(format!("label {key} twice"));
            }
            match chars.next() {
                Some((_, ',')) => {}
                Some((i, '}')) => {
                    end = Some(i + 1);
                    break;
                }
                other => return Err(format!("expected , or }} after a label, got {other:?}")),
            }
        }
        rest = &r[end.expect("label end")..];
    }
    let mut fields = rest.split_whitespace();
    let v = fields.next().ok_or("no value")?;
    let value = match v {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().map_err(|e| format!("bad value {v:?}: {e}"))?,
    };
    Ok(Sample {
        name,
        labels,
        value,
    })
}

/// What a finished external command did.
#[derive(Debug)]
pub struct Output {
    /// Exit status.
    pub status: ExitStatus,
    /// stdout.
    pub stdout: String,
    /// stderr.
    pub stderr: String,
}

/// Runs `cmd` with `stdin`, killing it after `limit`.
pub fn run(cmd: &mut Command, stdin: &[u8], limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let mut inp = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = inp.write_all(&data);
    });
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}; stderr so far is lost with the kill");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// A loopback TCP port free right now (for tools that cannot bind port 0
/// and report it, like Prometheus).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind port 0")
        .port()
}

/// Approximate equality with an absolute tolerance, with a readable failure.
#[track_caller]
pub fn assert_close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, want {want} ± {tol}"
    );
}
