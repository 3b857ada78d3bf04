//! Helpers shared by the integration tests: start the real `rollstat` binary
//! on port 0, talk HTTP/UDP/TCP to it, parse what `/metrics` says and read
//! it as Prometheus does (repeated series, counters that go down), poll
//! with a deadline, run external tools (promtool, statsd clients) with a
//! time limit, keep child processes (Prometheus, chromedriver) that die with
//! the test, and put a steady load on the daemon. Nothing here sleeps
//! without a bound.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
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

/// The Python of `tests/clients/python/.venv`, with the packages of its
/// `requirements.txt`: the statsd clients and `prometheus_client`.
pub fn python() -> PathBuf {
    let p = repo().join("tests/clients/python/.venv/bin/python");
    if !p.is_file() {
        missing("the Python venv (tests/clients/python/.venv)");
    }
    p
}

/// Polls `f` every 20 ms until it returns `Ok`, or fails after `limit`
/// naming `what` and the last error `f` returned.
pub fn wait_until<T>(limit: Duration, what: &str, f: impl FnMut() -> Result<T, String>) -> T {
    wait_until_every(limit, Duration::from_millis(20), what, f)
}

/// [`wait_until`], polling every `every` (for checks that cost more than a
/// scrape, like a script run in a browser).
pub fn wait_until_every<T>(
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

/// Polls `f` until it returns true, or fails after `limit` naming `what`.
pub fn wait_true(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    wait_until(limit, what, || {
        if f() {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
}

/// A temporary directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory under the system temp dir.
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::AtomicU32;
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

/// A child process with its stdout and stderr in `<dir>/<name>.out` and
/// `<dir>/<name>.err`, killed (by its own pid) and reaped on drop, which
/// also prints its stderr if the test is failing.
pub struct Proc {
    child: Child,
    name: String,
    stderr: PathBuf,
}

impl Proc {
    /// Starts `cmd` (stdin closed) with its output in files under `dir`.
    pub fn spawn(name: &str, cmd: &mut Command, dir: &Path) -> Proc {
        let file = |ext: &str| {
            std::fs::File::create(dir.join(format!("{name}.{ext}"))).expect("create log file")
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file("out"))
            .stderr(file("err"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Proc {
            child,
            name: name.to_string(),
            stderr: dir.join(format!("{name}.err")),
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails if the process has exited (its stderr follows, from drop).
    pub fn assert_running(&mut self) {
        if let Ok(Some(st)) = self.child.try_wait() {
            panic!("{} exited early ({st}); its stderr follows", self.name);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- {} stderr ---\n{}",
                self.name,
                std::fs::read_to_string(&self.stderr).unwrap_or_default()
            );
        }
    }
}

/// A real Prometheus (the Debian `prometheus` binary) on a free loopback
/// port, scraping one target every second; killed on drop.
pub struct Prometheus {
    // Declared before `_dir`: dropped (and its log read) before the dir goes.
    _proc: Proc,
    /// Its HTTP address.
    pub addr: SocketAddr,
    _dir: TempDir,
}

impl Prometheus {
    /// Starts Prometheus scraping `target` every second and waits, at most
    /// 30 s, until it is ready.
    pub fn start(target: SocketAddr) -> Prometheus {
        let bin = require_tool("prometheus");
        let dir = TempDir::new("prometheus");
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: rollstat\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("write prometheus.yml");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut proc = Proc::spawn(
            "prometheus",
            Command::new(bin)
                .arg(format!("--config.file={}", cfg.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address={addr}"))
                .arg("--log.level=warn"),
            dir.path(),
        );
        wait_until(Duration::from_secs(30), "Prometheus to be ready", || {
            proc.assert_running();
            let r = try_http(addr, "GET", "/-/ready", &[], b"")?;
            if r.status == 200 {
                Ok(())
            } else {
                Err(format!("{} {}", r.status, r.text()))
            }
        });
        Prometheus {
            _proc: proc,
            addr,
            _dir: dir,
        }
    }

    /// An instant query: the series of its result (one element for a scalar
    /// or string result; none if nothing matched), or the error it got.
    pub fn query_result(&self, promql: &str) -> Result<Vec<serde_json::Value>, String> {
        let q: String = promql
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let r = try_http(
            self.addr,
            "GET",
            &format!("/api/v1/query?query={q}"),
            &[],
            b"",
        )?;
        let v: serde_json::Value = serde_json::from_slice(&r.body)
            .map_err(|e| format!("{promql}: HTTP {}: not JSON ({e}): {}", r.status, r.text()))?;
        if r.status != 200 || v["status"] != "success" {
            return Err(format!("{promql}: HTTP {}: {}", r.status, v["error"]));
        }
        Ok(match v["data"]["resultType"].as_str() {
            Some("scalar" | "string") => vec![v["data"]["result"].clone()],
            _ => v["data"]["result"].as_array().cloned().unwrap_or_default(),
        })
    }

    /// An instant query; the values of its vector result.
    pub fn query(&self, promql: &str) -> Result<Vec<f64>, String> {
        Ok(self
            .query_result(promql)?
            .iter()
            .filter_map(|x| x["value"][1].as_str()?.parse().ok())
            .collect())
    }
}

/// The head of the test configs: every listener on 127.0.0.1 port 0 (as
/// [`Daemon::start_with`] expects), one UDP reader. A macro so that
/// `concat!` can build the configs as constants.
macro_rules! port_0_head {
    () => {
        r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = "127.0.0.1:0"
http = "127.0.0.1:0"

[ingest]
udp_readers = 1
udp_recv_buffer_bytes = 1048576
"#
    };
}

/// The test config: every listener on 127.0.0.1 port 0, one UDP reader,
/// small limits (so the hostile tests can reach them), 1 s buckets in a
/// "5s" and a "2s" window.
pub const TEST_CONFIG: &str = concat!(
    port_0_head!(),
    r#"max_line_bytes = 1024
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
"#
);

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
        Daemon::start_wrapped(config, &[])
    }

    /// [`Daemon::start_with`], the binary run through `wrapper` (a program
    /// and its first arguments, followed by the binary and its arguments),
    /// e.g. `["sh", "-c", "ulimit -Sn 256; exec \"$0\" \"$@\""]`.
    pub fn start_wrapped(config: &str, wrapper: &[&str]) -> Daemon {
        let dir = TempDir::new("daemon");
        let cfg = dir.path().join("rollstat.toml");
        std::fs::write(&cfg, config).expect("write config");
        let log = dir.path().join("stderr.log");
        let bin = env!("CARGO_BIN_EXE_rollstat");
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let mut child = cmd
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

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What it logged so far, as raw bytes (for checking that no control
    /// byte from the network reached the log).
    pub fn log_bytes(&self) -> Vec<u8> {
        std::fs::read(&self.log).unwrap_or_default()
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

    /// Creates `n` counter series `<prefix>.m0` … over UDP (50 lines per
    /// datagram) and waits until the daemon has applied them all.
    pub fn create_counters(&self, prefix: &str, n: usize) {
        let s = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        for chunk in (0..n).collect::<Vec<_>>().chunks(50) {
            let dgram: String = chunk
                .iter()
                .map(|i| format!("{prefix}.m{i}:1|c\n"))
                .collect();
            s.send_to(dgram.as_bytes(), self.udp).expect("send udp");
        }
        self.wait_lines("udp", n as f64, Duration::from_secs(60));
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

    /// The value of the first `/metrics` sample whose line starts with
    /// `prefix` (a name, or a name and the start of its labels).
    pub fn metric(&self, prefix: &str) -> Option<f64> {
        sample_value(&self.get("/metrics", &[]).text(), prefix)
    }

    /// A plain-text scrape, parsed.
    pub fn scrape(&self) -> Scrape {
        let r = self.get("/metrics", &[]);
        assert_eq!(r.status, 200, "GET /metrics: {}", r.text());
        Scrape::parse(&r.text())
    }

    /// The series of `/api/v1/series?match=glob` (one page: the test
    /// holds fewer than a page), as a JSON array.
    pub fn series(&self, glob: &str) -> serde_json::Value {
        let r = self.get(&format!("/api/v1/series?match={glob}"), &[]);
        assert_eq!(r.status, 200, "GET /api/v1/series: {}", r.text());
        let mut page: serde_json::Value = serde_json::from_slice(&r.body).expect("series JSON");
        assert_eq!(
            page["next_cursor"],
            serde_json::Value::Null,
            "more than one page"
        );
        page["series"].take()
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
/// close`), a 30 s read timeout, understands chunked bodies. Panics on a
/// failure; see [`try_http`].
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    try_http(addr, method, path, headers, body).unwrap_or_else(|e| panic!("{e}"))
}

/// [`http`] with a failure (nothing listening, a reset, a malformed answer)
/// as `Err`: for polling a server that is starting, and for load that must
/// go on when one request fails.
pub fn try_http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Response, String> {
    let fail = |e: &dyn std::fmt::Display| format!("{method} http://{addr}{path}: {e}");
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| fail(&e))?;
    // 30 s: chromedriver answers POST /session only once Chromium started,
    // which can take a while on a loaded machine.
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| fail(&e))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| fail(&e))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        let _ = write!(req, "{k}: {v}\r\n");
    }
    if method != "GET" || !body.is_empty() {
        let _ = write!(req, "Content-Length: {}\r\n", body.len());
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).map_err(|e| fail(&e))?;
    // A server may answer (413) before reading the whole body and close.
    let _ = s.write_all(body);
    // Read until the body is complete by Content-Length or chunks, else to
    // EOF: some servers (chromedriver) keep the connection open despite
    // `Connection: close`.
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    // Where the head ends, and the response without its body.
    let mut head: Option<(usize, Response)> = None;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            // A reset after a complete early response is fine; keep what we read.
            Err(_) if !raw.is_empty() => break,
            Err(e) => return Err(fail(&format!("read failed: {e}"))),
        }
        if head.is_none() {
            if let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                head = Some((split, parse_head(&raw[..split]).map_err(|e| fail(&e))?));
            }
        }
        if let Some((split, r)) = &head {
            if r.body_complete(&raw[split + 4..]).map_err(|e| fail(&e))? {
                break;
            }
        }
    }
    let (split, mut r) = head.ok_or_else(|| {
        fail(&format!(
            "no header end in {:?}",
            String::from_utf8_lossy(&raw)
        ))
    })?;
    r.body = raw[split + 4..].to_vec();
    if r.is_chunked() {
        r.body = dechunk(&r.body)
            .map_err(|e| fail(&e))?
            .ok_or_else(|| fail(&"the chunked body ends early"))?;
    }
    Ok(r)
}

/// The status code and the headers (names lowercased) of a response head,
/// as a response with an empty body.
fn parse_head(head: &[u8]) -> Result<Response, String> {
    let head = String::from_utf8_lossy(head);
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Response {
        status,
        headers,
        body: Vec::new(),
    })
}

impl Response {
    fn is_chunked(&self) -> bool {
        self.header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    }

    /// Whether `body` (as read so far) is all of this response's body: by
    /// Content-Length, by the last chunk, or (with neither) never before EOF.
    fn body_complete(&self, body: &[u8]) -> Result<bool, String> {
        if self.is_chunked() {
            return Ok(dechunk(body)?.is_some());
        }
        let length = self
            .header("content-length")
            .and_then(|v| v.parse::<usize>().ok());
        Ok(length.is_some_and(|n| body.len() >= n))
    }
}

/// A chunked body, decoded; `None` while its last chunk has not arrived.
fn dechunk(mut b: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut out = Vec::new();
    loop {
        let Some(nl) = b.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_text = String::from_utf8_lossy(&b[..nl]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|e| format!("bad chunk size {size_text:?}: {e}"))?;
        b = &b[nl + 2..];
        if size == 0 {
            return Ok(Some(out));
        }
        if b.len() < size + 2 {
            return Ok(None);
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
    /// The type of its family: that of the last `# TYPE` line before it
    /// (`counter`, `histogram`...), empty if none came before.
    pub kind: String,
}

impl Sample {
    /// The series as Prometheus identifies it: the name and the labels
    /// whose value is not empty (`x{a=""}` and `x` are one series).
    pub fn series(&self) -> (String, BTreeMap<String, String>) {
        let labels = self
            .labels
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (self.name.clone(), labels)
    }

    /// Whether Prometheus reads this sample as a count that only grows
    /// while its series lives: a counter's `_total`, a histogram's
    /// `_bucket` and `_count` (not `_sum`, which negative observations
    /// lower, nor `_created`).
    pub fn is_monotonic(&self) -> bool {
        match self.kind.as_str() {
            "counter" => self.name.ends_with("_total"),
            "histogram" => self.name.ends_with("_bucket") || self.name.ends_with("_count"),
            _ => false,
        }
    }
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
    /// Every sample named `name`, as `labels value` lines: for messages.
    pub fn show(&self, name: &str) -> Vec<String> {
        self.samples
            .iter()
            .filter(|x| x.name == name)
            .map(|x| format!("{:?} {}", x.labels, x.value))
            .collect()
    }

    /// Parses the classic text format (and the sample lines of OpenMetrics);
    /// panics on a line it cannot read, so a malformed scrape fails the test.
    pub fn parse(text: &str) -> Scrape {
        let mut samples = Vec::new();
        let mut types: Vec<(String, String)> = Vec::new();
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
            let mut s = parse_sample(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
            s.kind = types.last().map(|(_, t)| t.clone()).unwrap_or_default();
            samples.push(s);
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

    /// Every sample that repeats the series of an earlier one, as
    /// Prometheus identifies series ([`Sample::series`]), described; and
    /// every family declared twice. Prometheus keeps the first of two
    /// such samples silently, and neither promtool nor a real Prometheus
    /// complains (reliability.md 1.1): tests must.
    pub fn duplicates(&self) -> Vec<String> {
        let mut families = std::collections::BTreeSet::new();
        let mut out: Vec<String> = self
            .types
            .iter()
            .filter(|(name, _)| !families.insert(name))
            .map(|(name, t)| format!("family {name} declared twice (the second as {t})"))
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        out.extend(
            self.samples
                .iter()
                .filter(|x| !seen.insert(x.series()))
                .map(|x| format!("{} {:?} repeats a series", x.name, x.labels)),
        );
        out
    }

    /// The series of this scrape whose count went down since `before`
    /// ([`Sample::is_monotonic`]), described: Prometheus reads each as a
    /// counter reset. A series absent from either scrape is not compared,
    /// and of two samples of one series the first counts, as in Prometheus.
    pub fn decreased_since(&self, before: &Scrape) -> Vec<String> {
        let mut old = BTreeMap::new();
        for x in before.samples.iter().filter(|x| x.is_monotonic()) {
            old.entry(x.series()).or_insert(x.value);
        }
        let mut seen = std::collections::BTreeSet::new();
        self.samples
            .iter()
            .filter(|x| x.is_monotonic() && seen.insert(x.series()))
            .filter_map(|x| {
                let was = *old.get(&x.series())?;
                (x.value < was)
                    .then(|| format!("{} {:?}: {was} then {}", x.name, x.labels, x.value))
            })
            .collect()
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

/// The value of the first line of the exposition `text` that starts with
/// `prefix`.
pub fn sample_value(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
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
        kind: String::new(),
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

/// The config of the dashboards and page tests: every listener on port 0,
/// two windows named like the sample config's, a breaker that trips under
/// [`Load`] and a limit it hits.
pub const LOAD_CONFIG: &str = concat!(
    port_0_head!(),
    r#"
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
"#
);

/// The statsd metrics [`Load`] sends, one per type.
pub const LOAD_METRICS: [&str; 6] = [
    "load.requests",
    "load.queue",
    "load.latency",
    "load.size",
    "load.dist",
    "load.users",
];

/// A steady load on a daemon started with [`LOAD_CONFIG`], until dropped
/// (or 180 s, whichever first): every 100 ms one line of every statsd type
/// over UDP, breaker outcomes (mostly failures for 10 s, then healthy for
/// 10 s, and so on, so the breaker trips at once and later recovers) and a
/// breaker decision, a dropped `debug.*` line, a bad line, and acquire calls
/// over the `api` limit (5/s).
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
                let acquire = "/api/v1/limits/api/acquire?key=client";
                let _ = try_http(http_addr, "POST", acquire, &[], b"");
                // Ask the breaker too, so that it hands out half-open trials
                // and moves between its states.
                let decision = "/api/v1/breakers/checkout/decision";
                let _ = try_http(http_addr, "GET", decision, &[], b"");
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
