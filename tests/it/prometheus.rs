//! A real Prometheus (the Debian `prometheus` binary) scrapes the daemon
//! every second; PromQL sees the rate we send, and the scrape (Prometheus
//! asks for OpenMetrics and gzip) is healthy.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{free_port, http, require_tool, wait_until, Daemon, TempDir};

/// A Prometheus process, killed on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    log: std::path::PathBuf,
    _dir: TempDir,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Prometheus {
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
        .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let log = dir.path().join("prometheus.log");
        let child = Command::new(bin)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start prometheus");
        let p = Prometheus {
            child,
            addr,
            log,
            _dir: dir,
        };
        wait_until(Duration::from_secs(15), "Prometheus to be ready", || {
            if std::net::TcpStream::connect_timeout(&p.addr, Duration::from_millis(200)).is_err() {
                return Err("not listening".into());
            }
            let r = http(p.addr, "GET", "/-/ready", &[], b"");
            if r.status == 200 {
                Ok(())
            } else {
                Err(format!("{} {}", r.status, r.text()))
            }
        });
        p
    }

    /// An instant query; the values of its vector result.
    fn query(&self, promql: &str) -> Result<Vec<f64>, String> {
        let q: String = promql
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let r = http(
            self.addr,
            "GET",
            &format!("/api/v1/query?query={q}"),
            &[],
            b"",
        );
        if r.status != 200 {
            return Err(format!("{promql}: HTTP {} {}", r.status, r.text()));
        }
        let j = r.json();
        let result = j["data"]["result"].as_array().cloned().unwrap_or_default();
        Ok(result
            .iter()
            .filter_map(|x| x["value"][1].as_str()?.parse().ok())
            .collect())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- prometheus log ---\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }
}

#[test]
fn a_real_prometheus_scrapes_the_rate_we_send() {
    let d = Daemon::start();
    let prom = Prometheus::start(d.http);

    // 10 increments every 100 ms = 100/s, until told to stop (at most 30 s).
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (stop, udp) = (stop.clone(), d.udp);
        std::thread::spawn(move || {
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            let dgram = "prom.req:1|c|#route:/p\n".repeat(10);
            let start = Instant::now();
            for i in 1..=300u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                sock.send_to(dgram.as_bytes(), udp).unwrap();
                let next = start + Duration::from_millis(100) * i;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        })
    };
    let _stop_on_exit = StopOnDrop(stop.clone());

    // The windowed rate as Prometheus stored it: the "2s" window holds only
    // time we were sending once 2 s have passed. ± 25% (see windows.rs).
    let rate = wait_until(
        Duration::from_secs(20),
        "rollstat_window_rate ≈ 100 in Prometheus",
        || {
            let v =
                prom.query(r#"rollstat_window_rate{metric="prom.req",window="2s",route="/p"}"#)?;
            match v.as_slice() {
                [x] if (*x - 100.0).abs() <= 25.0 => Ok(*x),
                other => Err(format!("{other:?}")),
            }
        },
    );
    // PromQL's own rate over the cumulative counter: after a few 1 s scrapes,
    // rate() over 5 s sees the same ~100/s (± 30%: it extrapolates).
    let promql_rate = wait_until(
        Duration::from_secs(15),
        "rate(prom_req_total[5s]) ≈ 100",
        || {
            let v = prom.query(r#"rate(prom_req_total{route="/p"}[5s])"#)?;
            match v.as_slice() {
                [x] if (*x - 100.0).abs() <= 30.0 => Ok(*x),
                other => Err(format!("{other:?}")),
            }
        },
    );
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();

    // The target is healthy: Prometheus asked for OpenMetrics and gzip and
    // parsed what it got.
    let t = http(prom.addr, "GET", "/api/v1/targets", &[], b"").json();
    let target = &t["data"]["activeTargets"][0];
    assert_eq!(target["health"], "up", "{t}");
    assert_eq!(target["lastError"], "", "{t}");
    assert_eq!(prom.query(r#"up{job="rollstat"}"#).unwrap(), [1.0]);
    // Self-metrics made it too.
    let lines = prom
        .query(r#"rollstat_ingest_lines_total{transport="udp"}"#)
        .unwrap();
    assert!(lines.first().is_some_and(|n| *n > 0.0), "{lines:?}");
    eprintln!("window rate {rate}/s, PromQL rate {promql_rate}/s");
}

struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
