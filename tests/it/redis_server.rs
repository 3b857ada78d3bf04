//! Real `redis-server` processes for the shared-state tests (`redis`): one
//! server on a free loopback port, or three masters made into a cluster with
//! `redis-cli --cluster create`; killed on drop. `.ci/install-redis-deps`
//! installs the Debian packages.
//!
//! Unlike the other external tools, a missing `redis-server` skips the tests
//! that need it, with a message, except under CI (`CI` set), where it fails.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{free_port, wait_true, Proc, TempDir};

/// Whether redis-server is installed; under CI its absence is a failure.
/// Off CI it prints why the calling test skips.
pub fn have_redis() -> bool {
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

/// A redis-server on loopback, killed on drop.
pub struct Redis {
    // Declared before `dir`: killed (and its log read) before the dir goes.
    proc: Option<Proc>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    extra: Vec<String>,
    dir: TempDir,
}

impl Redis {
    /// A server on a free port, or `None` (the test then returns) if
    /// redis-server is not installed; see [`have_redis`].
    pub fn start() -> Option<Redis> {
        have_redis().then(|| Redis::start_with(free_port(), Vec::new()))
    }

    /// A server on `port` with `extra` arguments, once [`Redis::start`] has
    /// found redis-server.
    pub fn start_with(port: u16, extra: Vec<String>) -> Redis {
        let mut r = Redis {
            proc: None,
            port,
            extra,
            dir: TempDir::new("redis"),
        };
        r.restart();
        r
    }

    /// Its `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The `[redis]` line that points a daemon at this server.
    pub fn section(&self) -> String {
        format!("url = \"{}\"", self.url())
    }

    /// Starts the server (again) on the same port, empty, and waits for PONG.
    pub fn restart(&mut self) {
        self.kill();
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra);
        self.proc = Some(Proc::spawn("redis-server", &mut cmd, self.dir.path()));
        wait_true(
            Duration::from_secs(10),
            &format!("redis-server on port {} to answer PING", self.port),
            || self.ping(),
        );
    }

    fn ping(&self) -> bool {
        self.command("PING").is_some_and(|r| r.starts_with("+PONG"))
    }

    /// One inline command; the first line of the answer.
    pub fn command(&self, cmd: &str) -> Option<String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
        s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
        s.write_all(format!("{cmd}\r\n").as_bytes()).ok()?;
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).ok()?;
        Some(line)
    }

    /// Sends `sig` (e.g. "-STOP", "-CONT") with `kill(1)`.
    pub fn signal(&self, sig: &str) {
        if let Some(p) = &self.proc {
            let ok = Command::new("kill")
                .args([sig, &p.pid().to_string()])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "kill {sig} failed");
        }
    }

    /// Kills the server (a stopped one too); [`Redis::restart`] brings it back.
    pub fn kill(&mut self) {
        if let Some(p) = self.proc.take() {
            // A stopped process must be continued to die promptly.
            let _ = Command::new("kill")
                .args(["-CONT", &p.pid().to_string()])
                .status();
            drop(p);
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

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
pub struct Cluster {
    /// The masters.
    pub nodes: Vec<Redis>,
}

impl Cluster {
    /// The cluster, ready (`cluster_state:ok` on every node), or `None` if
    /// redis-server is not installed; see [`have_redis`].
    pub fn start() -> Option<Cluster> {
        if !have_redis() {
            return None;
        }
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
        wait_true(
            Duration::from_secs(20),
            "cluster_state:ok on every node",
            || c.nodes.iter().all(|n| cluster_ok(n.port)),
        );
        Some(c)
    }

    /// The `[redis]` lines that point a daemon at the cluster.
    pub fn section(&self) -> String {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("\"{}\"", n.url()))
            .collect();
        format!("cluster_nodes = [{}]", urls.join(", "))
    }

    /// How many nodes hold at least one key.
    pub fn nodes_holding_keys(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| {
                let keys = Command::new("redis-cli")
                    .args(["-p", &n.port.to_string(), "--no-raw", "DBSIZE"])
                    .output()
                    .unwrap();
                let count: usize = String::from_utf8_lossy(&keys.stdout)
                    .trim()
                    .trim_start_matches("(integer) ")
                    .parse()
                    .unwrap_or(0);
                count > 0
            })
            .count()
    }
}

fn cluster_ok(port: u16) -> bool {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "CLUSTER", "INFO"])
        .stdin(Stdio::null())
        .output();
    out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
}
