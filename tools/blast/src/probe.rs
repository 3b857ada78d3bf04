//! `--probe N`: ingest-to-visible latency. N times, one gauge sample with
//! a new, larger value (a statsd line over UDP, or one OTLP gauge point
//! posted to `/v1/metrics`) is sent, and `GET /api/v1/series?metric=NAME`
//! is polled on a keep-alive connection until the series' `10s` window
//! shows it as its max. The latency runs from just before the send to the
//! answer of the first poll that shows the value, so it includes the
//! OTLP POST's round trip and one poll's. Each probe waits at most
//! [`PROBE_TIMEOUT`]; probes are [`GAP`] apart.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use prost::Message;
use rollstat::otlp::proto::opentelemetry::proto::metrics::v1::{
    metric, number_data_point, Gauge, Metric, NumberDataPoint,
};
use rollstat::{Clock, SystemClock};
use rollstat_testkit::http::Conn;

use crate::otlp::{check, kv, request};
use crate::send::since;

/// Longest wait for one sample to be visible.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between two probes.
const GAP: Duration = Duration::from_millis(5);
/// The gauges probed.
const STATSD_NAME: &str = "blast.probe.statsd";
const OTLP_NAME: &str = "blast.probe.otlp";

/// Where a probe sends its sample.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// statsd over UDP.
    Udp(SocketAddr),
    /// OTLP/HTTP.
    Otlp(SocketAddr),
}

/// Latencies of the probes that became visible (sorted), and how many
/// did not within [`PROBE_TIMEOUT`].
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    pub transport: &'static str,
    pub sorted: Vec<Duration>,
    pub timeouts: usize,
}

impl Latencies {
    /// The `q` quantile (nearest rank), or zero without probes.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((q * self.sorted.len() as f64).ceil() as usize).clamp(1, self.sorted.len());
        self.sorted[rank - 1]
    }

    /// The report, one `key=value` per line (microseconds).
    pub fn render(&self, config: &str) -> String {
        let us = |d: Duration| format!("{:.0}", d.as_secs_f64() * 1e6);
        let mut s = String::new();
        let mut kv = |k: &str, v: String| s.push_str(&format!("{k:<26}{v}\n"));
        kv("config", config.to_string());
        kv("probe_transport", self.transport.to_string());
        kv("probes_visible", format!("{}", self.sorted.len()));
        kv("probes_timed_out", format!("{}", self.timeouts));
        kv("visible_p50_us", us(self.quantile(0.5)));
        kv("visible_p90_us", us(self.quantile(0.9)));
        kv("visible_p99_us", us(self.quantile(0.99)));
        kv(
            "visible_max_us",
            us(self.sorted.last().copied().unwrap_or_default()),
        );
        s
    }
}

/// One OTLP request: gauge `OTLP_NAME` at `value`, stamped `time_ns`.
fn otlp_point(value: f64, time_ns: u64) -> Vec<u8> {
    request(vec![Metric {
        name: OTLP_NAME.into(),
        data: Some(metric::Data::Gauge(Gauge {
            data_points: vec![NumberDataPoint {
                attributes: vec![kv("route", "/probe")],
                time_unix_nano: time_ns,
                value: Some(number_data_point::Value::AsDouble(value)),
                ..Default::default()
            }],
        })),
        ..Default::default()
    }])
    .encode_to_vec()
}

/// Runs `n` probes against `target`, polling the daemon's HTTP at `http`.
pub fn probe(target: Target, http: SocketAddr, n: usize) -> io::Result<Latencies> {
    let clock = SystemClock::new();
    let (name, transport) = match target {
        Target::Udp(_) => (STATSD_NAME, "statsd_udp"),
        Target::Otlp(_) => (OTLP_NAME, "otlp_http"),
    };
    let udp = UdpSocket::bind("127.0.0.1:0")?;
    let mut otlp = match target {
        Target::Otlp(addr) => Some(Conn::connect(addr).map_err(io::Error::other)?),
        Target::Udp(addr) => {
            udp.connect(addr)?;
            None
        }
    };
    let mut poll = Conn::connect(http).map_err(io::Error::other)?;
    let path = format!("/api/v1/series?metric={name}");
    let mut out = Latencies {
        transport,
        ..Latencies::default()
    };
    for k in 1..=n {
        // The 10s window's max is the newest value: values only grow.
        let shown = format!("\"max\":{k}.0");
        let body = otlp_point(k as f64, clock.now().as_nanos());
        let t0 = clock.now();
        match &mut otlp {
            Some(conn) => {
                let r = conn
                    .request(
                        "POST",
                        "/v1/metrics",
                        &[("Content-Type", "application/x-protobuf")],
                        &body,
                    )
                    .map_err(|e| io::Error::other(format!("probe {k}: {e}")))?;
                match check(r.status, &r.body) {
                    Ok((0, _)) => {}
                    Ok((_, why)) | Err(why) => {
                        return Err(io::Error::other(format!("probe {k}: {why}")))
                    }
                }
            }
            None => {
                udp.send(format!("{STATSD_NAME}:{k}|g\n").as_bytes())?;
            }
        }
        loop {
            let r = poll
                .request("GET", &path, &[], b"")
                .map_err(|e| io::Error::other(format!("probe {k}: {e}")))?;
            if r.status == 200 && r.text().contains(&shown) {
                out.sorted.push(since(&clock, t0));
                break;
            }
            if since(&clock, t0) >= PROBE_TIMEOUT {
                out.timeouts += 1;
                break;
            }
        }
        std::thread::sleep(GAP);
    }
    out.sorted.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let l = Latencies {
            sorted: (1..=200).map(Duration::from_micros).collect(),
            ..Latencies::default()
        };
        assert_eq!(l.quantile(0.5), Duration::from_micros(100));
        assert_eq!(l.quantile(0.99), Duration::from_micros(198));
        assert_eq!(Latencies::default().quantile(0.99), Duration::ZERO);
    }
}
