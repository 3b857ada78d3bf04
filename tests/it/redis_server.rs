//! Real `redis-server` processes for the shared-state tests (`redis`,
//! `redis_access`): one server on a free loopback port, or three masters
//! made into a cluster with `redis-cli --cluster create`, in plain TCP or
//! TLS only ([`ServerTls`], certificates made by [`Pki`] with rcgen);
//! killed on drop. `.ci/install-redis-deps` installs the Debian packages
//! (Debian's redis-server is built with TLS).
//!
//! Unlike the other external tools, a missing `redis-server` skips the tests
//! that need it, with a message, except under CI (`CI` set), where it fails.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
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
    /// Its port on 127.0.0.1 (its TLS port when it speaks TLS).
    pub port: u16,
    extra: Vec<String>,
    /// TLS only (`--port 0 --tls-port <port>`), when given.
    tls: Option<ServerTls>,
    /// The `default` user's password (`--requirepass`), for the test's own
    /// commands.
    admin_password: Option<String>,
    dir: TempDir,
}

/// A server's TLS files, and the client certificate `redis-cli` shows.
#[derive(Clone)]
pub struct ServerTls {
    /// The CA that signed the server's and the client's certificates.
    pub ca: PathBuf,
    /// The server's certificate and key.
    pub cert: PathBuf,
    pub key: PathBuf,
    /// A client certificate and key the server accepts.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// Whether the server requires a client certificate
    /// (`--tls-auth-clients yes`).
    pub require_client_cert: bool,
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
        Redis::start_full(port, extra, None, None)
    }

    /// A server on `port` with `extra` arguments, speaking only TLS when
    /// `tls` is given, with `admin_password` as the `default` user's
    /// password (`--requirepass`) when given.
    pub fn start_full(
        port: u16,
        extra: Vec<String>,
        tls: Option<ServerTls>,
        admin_password: Option<String>,
    ) -> Redis {
        let mut r = Redis {
            proc: None,
            port,
            extra,
            tls,
            admin_password,
            dir: TempDir::new("redis"),
        };
        r.restart();
        r
    }

    /// Its `redis://` URL (`rediss://` when it speaks TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// `redis-cli` for this server: its port, TLS files and admin password.
    pub fn cli(&self) -> Command {
        let mut c = Command::new("redis-cli");
        c.args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .stdin(Stdio::null());
        if let Some(t) = &self.tls {
            c.arg("--tls")
                .arg("--cacert")
                .arg(&t.ca)
                .arg("--cert")
                .arg(&t.client_cert)
                .arg("--key")
                .arg(&t.client_key);
        }
        if let Some(pw) = &self.admin_password {
            c.args(["--no-auth-warning", "-a", pw]);
        }
        c
    }

    /// One command through [`Redis::cli`]; its output, trimmed.
    pub fn cli_command(&self, args: &[&str]) -> String {
        let out = self.cli().args(args).output().expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The `[redis]` line that points a daemon at this server.
    pub fn section(&self) -> String {
        format!("url = \"{}\"", self.url())
    }

    /// Starts the server (again) on the same port, empty, and waits for PONG.
    pub fn restart(&mut self) {
        self.kill();
        let mut cmd = Command::new("redis-server");
        match &self.tls {
            None => {
                cmd.args(["--port", &self.port.to_string()]);
            }
            Some(t) => {
                cmd.args(["--port", "0", "--tls-port", &self.port.to_string()])
                    .arg("--tls-cert-file")
                    .arg(&t.cert)
                    .arg("--tls-key-file")
                    .arg(&t.key)
                    .arg("--tls-ca-cert-file")
                    .arg(&t.ca)
                    .args([
                        "--tls-auth-clients",
                        if t.require_client_cert { "yes" } else { "no" },
                    ]);
            }
        }
        if let Some(pw) = &self.admin_password {
            cmd.args(["--requirepass", pw]);
        }
        cmd.args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
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
        if self.tls.is_some() || self.admin_password.is_some() {
            return self.cli_command(&["PING"]) == "PONG";
        }
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
        Cluster::start_full(None)
    }

    /// [`Cluster::start`], speaking only TLS (clients and the cluster bus)
    /// when `tls` is given.
    pub fn start_full(tls: Option<ServerTls>) -> Option<Cluster> {
        if !have_redis() {
            return None;
        }
        let nodes: Vec<Redis> = (0..3)
            .map(|_| {
                let port = free_cluster_port();
                let mut extra = vec![
                    "--cluster-enabled".into(),
                    "yes".into(),
                    "--cluster-config-file".into(),
                    format!("nodes-{port}.conf"),
                    "--cluster-node-timeout".into(),
                    "2000".into(),
                ];
                if tls.is_some() {
                    extra.extend(["--tls-cluster".into(), "yes".into()]);
                }
                Redis::start_full(port, extra, tls.clone(), None)
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = nodes[0]
            .cli()
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
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
            || c.nodes.iter().all(cluster_ok),
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
                let keys = n.cli().args(["--no-raw", "DBSIZE"]).output().unwrap();
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

fn cluster_ok(node: &Redis) -> bool {
    let out = node.cli().args(["CLUSTER", "INFO"]).output();
    out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
}

/// Certificates made for a test with rcgen, written as PEM files: a CA, a
/// server certificate for 127.0.0.1 and localhost, and a client
/// certificate, all signed by the CA.
pub struct Pki {
    /// The files, for [`Redis::start_full`] (client certificate required).
    pub files: ServerTls,
}

impl Pki {
    /// New certificates in `dir`.
    pub fn new(dir: &Path) -> Pki {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "rollstat test CA");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = ca.self_signed(&ca_key).unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let leaf = |names: &[&str], usages: &[rcgen::ExtendedKeyUsagePurpose]| {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(
                names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
            .unwrap();
            params.extended_key_usages = usages.to_vec();
            let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
            (cert.pem(), key.serialize_pem())
        };
        use rcgen::ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        // The server's certificate is a client's too: cluster nodes show it
        // to each other on the TLS cluster bus.
        let (server_cert, server_key) =
            leaf(&["127.0.0.1", "localhost"], &[ServerAuth, ClientAuth]);
        let (client_cert, client_key) = leaf(&["rollstat"], &[ClientAuth]);
        Pki {
            files: ServerTls {
                ca: write("ca.pem", &ca.pem()),
                cert: write("server.pem", &server_cert),
                key: write("server.key", &server_key),
                client_cert: write("client.pem", &client_cert),
                client_key: write("client.key", &client_key),
                require_client_cert: true,
            },
        }
    }
}
