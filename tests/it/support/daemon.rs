//! The real `rollstat` binary under test: started through the harness's
//! launcher (`rollstat_testkit::daemon`) on a config that binds port 0,
//! its stderr kept for failing tests, and the ways tests talk to it
//! (statsd over UDP, HTTP, scrapes, the series API, signals).

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use rollstat_testkit::daemon::{Launch, Running};
use rollstat_testkit::scrape::{sample_value, Scrape};

use super::configs::TEST_CONFIG;
use super::http::{http, Response};
use super::poll::wait_until;

/// A running `rollstat`, killed on drop.
pub struct Daemon {
    run: Running,
    /// statsd UDP (0.0.0.0:0 if the config turns it off).
    pub udp: SocketAddr,
    /// statsd TCP (0.0.0.0:0 if the config turns it off).
    pub tcp: SocketAddr,
    /// HTTP.
    pub http: SocketAddr,
    /// The config file it was started with (rewrite it to test reloads).
    pub config: PathBuf,
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
        Daemon::launch(Launch::new(env!("CARGO_BIN_EXE_rollstat"), config).wrapper(wrapper))
    }

    /// [`Daemon::start_with`], with the environment variables `env` set
    /// (e.g. the fault hook `ROLLSTAT_TEST_FAULTS`).
    pub fn start_env(config: &str, env: &[(&str, &str)]) -> Daemon {
        let mut l = Launch::new(env!("CARGO_BIN_EXE_rollstat"), config);
        for (k, v) in env {
            l = l.env(k, v);
        }
        Daemon::launch(l)
    }

    fn launch(l: Launch) -> Daemon {
        let run = l
            .log_filter("info")
            .dir_prefix("rollstat-it-daemon")
            .start()
            .unwrap_or_else(|e| panic!("{e}"));
        let off: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let l = run.listening;
        Daemon {
            udp: l.udp.unwrap_or(off),
            tcp: l.tcp.unwrap_or(off),
            http: l.http,
            config: run.config().to_path_buf(),
            run,
        }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.run.try_wait(), Ok(None))
    }

    /// The rate-limit service's gRPC address, if `[rls] grpc` is set.
    pub fn rls_grpc(&self) -> Option<SocketAddr> {
        self.run.listening.rls_grpc
    }

    /// The OTLP/HTTP listener, if the config turns it on.
    pub fn otlp_http(&self) -> Option<SocketAddr> {
        self.run.listening.otlp_http
    }

    /// The OTLP/gRPC listener, if the config turns it on.
    pub fn otlp_grpc(&self) -> Option<SocketAddr> {
        self.run.listening.otlp_grpc
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.run.pid()
    }

    /// Every line it printed on stdout so far (the listening line first).
    pub fn stdout(&self) -> Vec<String> {
        self.run.stdout()
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        self.run.log()
    }

    /// What it logged so far, as raw bytes (for checking that no control
    /// byte from the network reached the log).
    pub fn log_bytes(&self) -> Vec<u8> {
        self.run.log_bytes()
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
        let run = &mut self.run;
        wait_until(limit, "rollstat to exit", || match run.try_wait() {
            Ok(Some(st)) => Ok(st),
            Ok(None) => Err("still running".into()),
            Err(e) => Err(e.to_string()),
        })
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
        self.run.stop();
        if std::thread::panicking() {
            eprintln!("--- rollstat stderr ---\n{}", self.log());
        }
    }
}
