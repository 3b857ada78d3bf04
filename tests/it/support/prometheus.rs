//! A real Prometheus scraping the daemon, and its query API.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use super::http::try_http;
use super::poll::wait_until;
use super::process::{free_port, require_tool, Proc, TempDir};

/// A real Prometheus (the Debian `prometheus` binary) on a free loopback
/// port, scraping one target every second (or none, as the remote-write
/// receiver of `receivers`); killed on drop.
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
        Prometheus::start_scraping(target, "")
    }

    /// [`Prometheus::start`] over HTTPS, trusting the CA in `ca_file` and
    /// checking the certificate against the name `localhost`.
    pub fn start_https(target: SocketAddr, ca_file: &std::path::Path) -> Prometheus {
        Prometheus::start_scraping(
            target,
            &format!(
                "    scheme: https\n    tls_config:\n      ca_file: '{}'\n      server_name: localhost\n",
                ca_file.display()
            ),
        )
    }

    /// Starts Prometheus scraping `target` with `job` (more YAML keys of
    /// the scrape job, indented by 4) added to its job.
    fn start_scraping(target: SocketAddr, job: &str) -> Prometheus {
        Prometheus::start_configured(target, &[], job)
    }

    /// [`Prometheus::start`] with more command-line `flags` (e.g.
    /// `--enable-feature=native-histograms`) and `job` (more YAML keys of
    /// the scrape job, each line indented by 4, ending in a newline; "" for
    /// none) added to its scrape job.
    pub fn start_configured(target: SocketAddr, flags: &[&str], job: &str) -> Prometheus {
        Prometheus::launch(
            &format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: rollstat\n{job}    static_configs:\n      - targets: ['{target}']\n"
            ),
            flags,
            Duration::from_secs(30),
        )
    }

    /// Prometheus on a free loopback port with `config` as its
    /// prometheus.yml, its own TSDB in a temporary directory and more
    /// command-line `flags`; fails unless it is ready within `ready_within`
    /// (its stderr follows the failure).
    pub(super) fn launch(config: &str, flags: &[&str], ready_within: Duration) -> Prometheus {
        let bin = require_tool("prometheus");
        let dir = TempDir::new("prometheus");
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(&cfg, config).expect("write prometheus.yml");
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
                .arg("--log.level=warn")
                .args(flags),
            dir.path(),
        );
        wait_until(ready_within, "Prometheus to be ready", || {
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

    /// The scrape target's state as `/api/v1/targets` shows it (the one
    /// active target: `health`, `lastError`, ...).
    pub fn target(&self) -> Result<serde_json::Value, String> {
        let r = try_http(self.addr, "GET", "/api/v1/targets", &[], b"")?;
        let v: serde_json::Value = serde_json::from_slice(&r.body)
            .map_err(|e| format!("targets: HTTP {}: not JSON ({e}): {}", r.status, r.text()))?;
        match v["data"]["activeTargets"].as_array().map(Vec::as_slice) {
            Some([t]) => Ok(t.clone()),
            _ => Err(format!("not one active target: {v}")),
        }
    }

    /// An instant query: the series of its result (one element for a scalar
    /// or string result; none if nothing matched), or the error it got.
    pub fn query_result(&self, promql: &str) -> Result<Vec<serde_json::Value>, String> {
        let r = try_http(
            self.addr,
            "GET",
            &format!("/api/v1/query?query={}", query_escape(promql)),
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

/// `s` percent-encoded for a URL's query string (all but the unreserved
/// characters), as the query APIs of Prometheus and VictoriaMetrics read it.
pub(super) fn query_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
