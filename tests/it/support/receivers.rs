//! Real remote-write receivers for the `[[outputs]]` tests: a Prometheus
//! with its remote-write receiver on ([`PromReceiver`]) and a
//! VictoriaMetrics single node ([`VmReceiver`]), each on a free loopback
//! port with its own storage in a temporary directory, killed on drop, and
//! read back through the Prometheus query API both serve ([`Receiver`]).
//!
//! Prometheus comes from `.ci/install-page-deps`, VictoriaMetrics from
//! `.ci/install-push-deps` (Debian's `victoria-metrics`:
//! `/usr/bin/victoria-metrics`). A missing `prometheus` fails the test, as
//! everywhere; a missing `victoria-metrics` skips it with a message off CI
//! and fails it under CI (`CI` set), as redis-server does.
//!
//! # What the receivers do
//!
//! Measured on Debian bookworm's Prometheus 2.42.0 and VictoriaMetrics
//! 1.79.5, by hand and by `tests/it/push_receivers.rs`, which keeps
//! checking the first three points and Prometheus' native histograms:
//!
//! * Remote write 1.0 (`Content-Type: application/x-protobuf`,
//!   `Content-Encoding: snappy`, `X-Prometheus-Remote-Write-Version:
//!   0.1.0`): 204 with an empty body and no
//!   `X-Prometheus-Remote-Write-*-Written` header. Prometheus can be queried
//!   for the samples as soon as it answers. VictoriaMetrics moves its
//!   buffered rows to searchable parts once a second: a sample can be
//!   queried within about 1 s of the write when `/internal/force_flush` is
//!   called before each read, as [`VmReceiver`] does; without it, a series
//!   new to VictoriaMetrics appeared only 8 to 10 s after its write (the
//!   three VictoriaMetrics tests took 32 s instead of 2.4 s).
//! * Remote write 2.0 (`Content-Type:
//!   application/x-protobuf;proto=io.prometheus.write.v2.Request`, version
//!   header `2.0.0`): both answer **204, without
//!   `X-Prometheus-Remote-Write-Samples-Written`, and store nothing**. Neither
//!   looks at the content type: each reads the body as a 1.0
//!   `WriteRequest`, where the 2.0 fields (symbols = 4, timeseries = 5) are
//!   unknown and skipped. A 2.0 sender must take a 2xx without that header
//!   as "not written" (Prometheus' own 2.0 sender does: "got 2xx, but PRW 2.0
//!   response header statistics indicate 0 samples ... were accepted"),
//!   never as success.
//! * A stale marker (a sample whose bits are `0x7ff0000000000002`): both
//!   answer 204 and drop the series from instant queries at and after the
//!   marker's timestamp; at a time before it the earlier sample is still
//!   there, and `/api/v1/series` still lists the series. A range selector
//!   (`x[10s]`) shows the marker as a `"NaN"` point in VictoriaMetrics;
//!   Prometheus leaves it out.
//! * Native histograms over remote write 1.0 (`TimeSeries.histograms`):
//!   Prometheus stores them when started with
//!   `--enable-feature=native-histograms`, as [`PromReceiver`] is
//!   (`histogram_count(x)` and `histogram_sum(x)` read them; an instant
//!   query of `x` answers a `histogram`, which [`Receiver::query`] refuses);
//!   without the flag it answers 500 `native histograms are disabled`.
//!   VictoriaMetrics 1.79 answers 204 and drops them.
//! * Instant queries look back 5 min in Prometheus; VictoriaMetrics found a
//!   sample 310 s old (not one 600 s old). It answers `time()` as a vector
//!   of one element without labels, Prometheus as a scalar; both read the
//!   same here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use super::http::try_http;
use super::poll::wait_until;
use super::process::{find_tool, free_port, Proc, TempDir};
use super::prometheus::{query_escape, Prometheus};

/// A series' labels, `__name__` included.
pub type Labels = BTreeMap<String, String>;

/// A range query's points of one series: `(Unix seconds, value)`.
pub type Points = Vec<(f64, f64)>;

/// The longest a receiver may take to be ready after its start.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// A remote-write receiver on loopback and its Prometheus query API. Each
/// read first calls [`Receiver::settle`], so what was written before it is
/// there to read.
pub trait Receiver {
    /// Its HTTP address.
    fn addr(&self) -> SocketAddr;

    /// What it is, for messages ("prometheus", "victoria-metrics").
    fn name(&self) -> &'static str;

    /// Makes what was written so far searchable, where the receiver needs
    /// to be asked. Called before every read.
    fn settle(&self) -> Result<(), String> {
        Ok(())
    }

    /// Where remote write requests go: `http://127.0.0.1:PORT/api/v1/write`.
    fn write_url(&self) -> String {
        format!("http://{}/api/v1/write", self.addr())
    }

    /// `GET path` (with its query string) on the query API: its `data`, or
    /// why not (the HTTP status and the API's error).
    fn api(&self, path: &str) -> Result<serde_json::Value, String> {
        self.settle()?;
        let r = try_http(self.addr(), "GET", path, &[], b"")?;
        let v: serde_json::Value = serde_json::from_slice(&r.body).map_err(|e| {
            format!(
                "{} {path}: HTTP {}: not JSON ({e}): {}",
                self.name(),
                r.status,
                r.text()
            )
        })?;
        if r.status != 200 || v["status"] != "success" {
            return Err(format!(
                "{} {path}: HTTP {}: {}",
                self.name(),
                r.status,
                v["error"]
            ));
        }
        Ok(v["data"].clone())
    }

    /// An instant query at `at` (Unix seconds), or at the receiver's now
    /// with `None`: each series' labels and value (one element without
    /// labels for a scalar), or why not.
    fn try_query(&self, promql: &str, at: Option<f64>) -> Result<Vec<(Labels, f64)>, String> {
        let time = at.map(|t| format!("&time={t:.3}")).unwrap_or_default();
        let data = self.api(&format!(
            "/api/v1/query?query={}{time}",
            query_escape(promql)
        ))?;
        instant_result(&data).map_err(|e| format!("{} {promql}: {e}", self.name()))
    }

    /// [`Receiver::try_query`] at `at_unix_secs`; fails the test on an error.
    fn query(&self, promql: &str, at_unix_secs: f64) -> Vec<(Labels, f64)> {
        self.try_query(promql, Some(at_unix_secs))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Receiver::try_query`] at the receiver's now; fails the test on an
    /// error.
    fn query_now(&self, promql: &str) -> Vec<(Labels, f64)> {
        self.try_query(promql, None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A range query from `start` to `end` (Unix seconds) every `step`
    /// seconds: each series' labels and its `(time, value)` points.
    fn query_range(&self, promql: &str, start: f64, end: f64, step: f64) -> Vec<(Labels, Points)> {
        let data = self
            .api(&format!(
                "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step={step}",
                query_escape(promql)
            ))
            .unwrap_or_else(|e| panic!("{e}"));
        range_result(&data).unwrap_or_else(|e| panic!("{} {promql}: {e}", self.name()))
    }

    /// The label sets of the series `matcher` (a series selector such as
    /// `up{job="a"}`) selects, as `/api/v1/series` lists them.
    fn series(&self, matcher: &str) -> Vec<Labels> {
        let data = self
            .api(&format!(
                "/api/v1/series?match%5B%5D={}",
                query_escape(matcher)
            ))
            .unwrap_or_else(|e| panic!("{e}"));
        data.as_array()
            .unwrap_or_else(|| panic!("{} series {matcher}: not a list: {data}", self.name()))
            .iter()
            .map(|s| labels(s).unwrap_or_else(|e| panic!("{} series {matcher}: {e}", self.name())))
            .collect()
    }

    /// Polls an instant query of `promql` at the receiver's now (every
    /// 100 ms) until `ok` holds for its result, which it returns; fails after
    /// `limit` with the last result or error.
    fn wait_for(
        &self,
        promql: &str,
        mut ok: impl FnMut(&[(Labels, f64)]) -> bool,
        limit: Duration,
    ) -> Vec<(Labels, f64)> {
        let what = format!("{} to answer {promql} as wanted", self.name());
        super::poll::wait_until_every(limit, Duration::from_millis(100), &what, || {
            let got = self.try_query(promql, None)?;
            if ok(&got) {
                Ok(got)
            } else {
                Err(format!("{got:?}"))
            }
        })
    }
}

/// A real Prometheus receiving remote write (`--web.enable-remote-write-receiver`)
/// with native histograms on and no scrape jobs; killed on drop.
pub struct PromReceiver {
    prom: Prometheus,
}

impl PromReceiver {
    /// Starts it and waits, at most 20 s, until it is ready.
    pub fn start() -> PromReceiver {
        let prom = Prometheus::launch(
            "global:\n  evaluation_interval: 1s\nscrape_configs: []\n",
            &[
                "--web.enable-remote-write-receiver",
                "--enable-feature=native-histograms",
            ],
            READY_WITHIN,
        );
        PromReceiver { prom }
    }
}

impl Receiver for PromReceiver {
    fn addr(&self) -> SocketAddr {
        self.prom.addr
    }

    fn name(&self) -> &'static str {
        "prometheus"
    }
}

/// A VictoriaMetrics single node (`victoria-metrics`) receiving remote
/// write, every read made after `/internal/force_flush` and with its
/// response cache off; killed on drop.
pub struct VmReceiver {
    // Declared before `_dir`: killed (and its log read) before the dir goes.
    _proc: Proc,
    addr: SocketAddr,
    _dir: TempDir,
}

impl VmReceiver {
    /// Starts it and waits, at most 20 s, until it is ready; `None` (the
    /// test then returns) off CI when `victoria-metrics` is not installed,
    /// after printing why.
    pub fn start() -> Option<VmReceiver> {
        let Some(bin) = find_tool("victoria-metrics") else {
            assert!(
                std::env::var_os("CI").is_none(),
                "victoria-metrics is not installed; run .ci/install-push-deps"
            );
            eprintln!("skipped: victoria-metrics is not installed (run .ci/install-push-deps)");
            return None;
        };
        let dir = TempDir::new("victoria-metrics");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut proc = Proc::spawn(
            "victoria-metrics",
            Command::new(bin)
                .arg(format!("-httpListenAddr={addr}"))
                .arg(format!(
                    "-storageDataPath={}",
                    dir.path().join("data").display()
                ))
                // Points as new as now are answered (the default hides the
                // last 30 s), and no answer comes from the response cache.
                .arg("-search.latencyOffset=0s")
                .arg("-search.disableCache")
                .arg("-loggerLevel=WARN"),
            dir.path(),
        );
        wait_until(READY_WITHIN, "victoria-metrics to be ready", || {
            proc.assert_running();
            let r = try_http(addr, "GET", "/health", &[], b"")?;
            if r.status == 200 {
                Ok(())
            } else {
                Err(format!("{} {}", r.status, r.text()))
            }
        });
        Some(VmReceiver {
            _proc: proc,
            addr,
            _dir: dir,
        })
    }
}

impl Receiver for VmReceiver {
    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn name(&self) -> &'static str {
        "victoria-metrics"
    }

    /// `/internal/force_flush`: without it a new series shows up in queries
    /// up to 10 s after its write, with it about 1 s after.
    fn settle(&self) -> Result<(), String> {
        let r = try_http(self.addr, "GET", "/internal/force_flush", &[], b"")?;
        if r.status == 200 {
            Ok(())
        } else {
            Err(format!("force_flush: HTTP {}: {}", r.status, r.text()))
        }
    }
}

/// The series of an instant query's `data` (a vector, or a scalar as one
/// element without labels), refusing histogram samples.
fn instant_result(data: &serde_json::Value) -> Result<Vec<(Labels, f64)>, String> {
    match data["resultType"].as_str() {
        Some("scalar") => Ok(vec![(Labels::new(), point(&data["result"])?.1)]),
        Some("vector") => data["result"]
            .as_array()
            .ok_or_else(|| format!("no result list: {data}"))?
            .iter()
            .map(|s| {
                if s.get("histogram").is_some() {
                    return Err(format!(
                        "a native histogram sample (read it with histogram_count() or histogram_sum()): {s}"
                    ));
                }
                Ok((labels(&s["metric"])?, point(&s["value"])?.1))
            })
            .collect(),
        _ => Err(format!("neither a vector nor a scalar: {data}")),
    }
}

/// The series of a range query's `data` (a matrix).
fn range_result(data: &serde_json::Value) -> Result<Vec<(Labels, Points)>, String> {
    if data["resultType"] != "matrix" {
        return Err(format!("not a matrix: {data}"));
    }
    data["result"]
        .as_array()
        .ok_or_else(|| format!("no result list: {data}"))?
        .iter()
        .map(|s| {
            let points = s["values"]
                .as_array()
                .ok_or_else(|| format!("no values: {s}"))?
                .iter()
                .map(point)
                .collect::<Result<_, _>>()?;
            Ok((labels(&s["metric"])?, points))
        })
        .collect()
}

/// One `[time, "value"]` pair of the query API ("NaN" and "+Inf" included).
fn point(p: &serde_json::Value) -> Result<(f64, f64), String> {
    let t = p[0].as_f64().ok_or_else(|| format!("no time in {p}"))?;
    let v = p[1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no value in {p}"))?;
    Ok((t, v))
}

/// A JSON object of label names to values.
fn labels(m: &serde_json::Value) -> Result<Labels, String> {
    m.as_object()
        .ok_or_else(|| format!("labels are not an object: {m}"))?
        .iter()
        .map(|(k, v)| {
            v.as_str()
                .map(|v| (k.clone(), v.to_string()))
                .ok_or_else(|| format!("label {k} is not a string: {m}"))
        })
        .collect()
}
