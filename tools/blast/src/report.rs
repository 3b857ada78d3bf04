//! What the daemon counted, read from its `/metrics`, and the report of a
//! blast: lines sent, counted, and lost, the loss split into what the
//! daemon or the kernel counted and what nobody did; for `--transport
//! otlp`, points and requests ([`OtlpReport`]).

use std::fmt::Write as _;

use rollstat_testkit::scrape::Scrape;

/// The daemon's counters the report needs, read from `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    /// `rollstat_ingest_lines_total{transport=T}`, T the transport read
    /// (`udp`, or `otlp`: data points).
    pub lines: f64,
    /// `rollstat_ingest_packets_total{transport="udp"}`.
    pub packets: f64,
    /// All `rollstat_ingest_rejected_lines_total`.
    pub rejected: f64,
    /// All `rollstat_series_refused_total`.
    pub refused: f64,
    /// `rollstat_ingest_dropped_by_mapping_total`.
    pub dropped_by_mapping: f64,
    /// `rollstat_udp_kernel_drops` (datagrams).
    pub kernel_drops: f64,
}

impl Counters {
    /// Reads the counters from a Prometheus text exposition, the lines of
    /// `transport` (`udp`, `otlp`).
    pub fn from_exposition(text: &str, transport: &str) -> Result<Counters, String> {
        let s = Scrape::try_parse(text)?;
        Ok(Counters {
            lines: s.sum_where("rollstat_ingest_lines_total", "transport", transport),
            packets: s.sum_where("rollstat_ingest_packets_total", "transport", "udp"),
            rejected: s.sum("rollstat_ingest_rejected_lines_total"),
            refused: s.sum("rollstat_series_refused_total"),
            dropped_by_mapping: s.sum("rollstat_ingest_dropped_by_mapping_total"),
            kernel_drops: s.sum("rollstat_udp_kernel_drops"),
        })
    }

    /// What was counted since `before`.
    pub fn minus(self, before: Counters) -> Counters {
        Counters {
            lines: self.lines - before.lines,
            packets: self.packets - before.packets,
            rejected: self.rejected - before.rejected,
            refused: self.refused - before.refused,
            dropped_by_mapping: self.dropped_by_mapping - before.dropped_by_mapping,
            kernel_drops: self.kernel_drops - before.kernel_drops,
        }
    }
}

/// CPU seconds (user + system) of process `pid` from `/proc/<pid>/stat`,
/// assuming the usual 100 clock ticks per second.
pub fn cpu_secs(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let after = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Resident memory of process `pid`, bytes (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_bytes(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// `daemon_rss_*` rows: resident memory before and after, and its growth
/// per `what` (`series`, `stream`) over `n` of them.
fn rss_rows(kv: &mut impl FnMut(&str, String), rss: Option<(u64, u64)>, n: usize, what: &str) {
    if let Some((before, after)) = rss {
        let growth = after as f64 - before as f64;
        kv("daemon_rss_before_bytes", format!("{before}"));
        kv("daemon_rss_after_bytes", format!("{after}"));
        kv(
            &format!("rss_bytes_per_{what}"),
            format!("{:.0}", growth / n.max(1) as f64),
        );
    }
}

/// The outcome of one blast.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The daemon's config: the file given with --config, blast's own, or
    /// the running daemon's.
    pub config: String,
    /// UDP flows (source ports) over all senders.
    pub flows: usize,
    /// Lines sent successfully.
    pub lines_sent: u64,
    /// Datagrams sent successfully.
    pub datagrams_sent: u64,
    /// Failed sends.
    pub send_errors: u64,
    /// Longest sender time.
    pub send_secs: f64,
    /// Time from the end of sending until the daemon's counters settled.
    pub drain_secs: f64,
    /// Counter deltas over the run.
    pub delta: Counters,
    /// Daemon CPU seconds over the run (with `--spawn`).
    pub daemon_cpu_secs: Option<f64>,
    /// This tool's CPU seconds over the run.
    pub tool_cpu_secs: Option<f64>,
    /// Average lines per datagram.
    pub lines_per_datagram: f64,
    /// Distinct names sent (the series they make).
    pub names: usize,
    /// The daemon's resident memory before and after (with `--spawn`).
    pub rss: Option<(u64, u64)>,
    /// `--send-only`: no counters were read, so only the sending rows
    /// are reported.
    pub send_only: bool,
}

impl Report {
    /// Lines sent but not counted, in percent of lines sent.
    pub fn loss_pct(&self) -> f64 {
        if self.lines_sent == 0 {
            return 0.0;
        }
        100.0 * (self.lines_sent as f64 - self.delta.lines) / self.lines_sent as f64
    }

    /// The report, one `key=value` per line.
    pub fn render(&self) -> String {
        let d = &self.delta;
        let lost = self.lines_sent as f64 - d.lines;
        let kernel_lines = d.kernel_drops * self.lines_per_datagram;
        let unexplained = lost - d.rejected - d.refused - d.dropped_by_mapping - kernel_lines;
        let mut s = String::new();
        let mut kv = |k: &str, v: String| {
            let _ = writeln!(s, "{k:<26}{v}");
        };
        kv("config", self.config.clone());
        kv("flows", format!("{}", self.flows));
        kv("lines_sent", format!("{}", self.lines_sent));
        kv("datagrams_sent", format!("{}", self.datagrams_sent));
        kv(
            "lines_per_datagram",
            format!("{:.1}", self.lines_per_datagram),
        );
        kv("send_errors", format!("{}", self.send_errors));
        kv("send_secs", format!("{:.3}", self.send_secs));
        if self.send_only {
            let secs = self.send_secs.max(1e-9);
            kv(
                "lines_per_sec_sent",
                format!("{:.0}", self.lines_sent as f64 / secs),
            );
            return s;
        }
        kv("drain_secs", format!("{:.3}", self.drain_secs));
        kv("lines_counted", format!("{}", d.lines));
        kv("datagrams_counted", format!("{}", d.packets));
        kv("lines_lost", format!("{lost}"));
        kv("loss_pct", format!("{:.4}", self.loss_pct()));
        kv("kernel_drops_datagrams", format!("{}", d.kernel_drops));
        kv("rejected_lines", format!("{}", d.rejected));
        kv("refused_lines", format!("{}", d.refused));
        kv("dropped_by_mapping", format!("{}", d.dropped_by_mapping));
        kv("lost_unaccounted_est", format!("{unexplained:.0}"));
        let secs = self.send_secs.max(1e-9);
        kv(
            "lines_per_sec_sent",
            format!("{:.0}", self.lines_sent as f64 / secs),
        );
        kv(
            "datagrams_per_sec_sent",
            format!("{:.0}", self.datagrams_sent as f64 / secs),
        );
        kv("lines_per_sec_counted", format!("{:.0}", d.lines / secs));
        kv(
            "datagrams_per_sec_counted",
            format!("{:.0}", d.packets / secs),
        );
        if let Some(c) = self.daemon_cpu_secs {
            kv("daemon_cpu_secs", format!("{c:.2}"));
            if d.lines > 0.0 {
                kv(
                    "daemon_cpu_ns_per_line",
                    format!("{:.0}", c * 1e9 / d.lines),
                );
            }
        }
        if let Some(c) = self.tool_cpu_secs {
            kv("tool_cpu_secs", format!("{c:.2}"));
        }
        rss_rows(&mut kv, self.rss, self.names, "series");
        s
    }
}

/// The outcome of one OTLP blast.
#[derive(Clone, Debug, Default)]
pub struct OtlpReport {
    /// The daemon's config, as [`Report::config`].
    pub config: String,
    /// Sender threads (= connections).
    pub senders: usize,
    /// Distinct streams, points per request, percent gauges.
    pub streams: usize,
    pub points_per_request: usize,
    pub gauge_pct: usize,
    /// Requests answered 200, and their points.
    pub requests_sent: u64,
    pub points_sent: u64,
    /// Requests answered otherwise.
    pub requests_failed: u64,
    /// Points a `partial_success` said were not applied.
    pub points_refused: u64,
    /// The first failure or partial success.
    pub first_error: Option<String>,
    /// Longest sender time.
    pub send_secs: f64,
    /// Time from the end of sending until the counters settled.
    pub drain_secs: f64,
    /// Counter deltas (`lines` = OTLP data points).
    pub delta: Counters,
    pub daemon_cpu_secs: Option<f64>,
    pub tool_cpu_secs: Option<f64>,
    /// The daemon's resident memory before and after.
    pub rss: Option<(u64, u64)>,
}

impl OtlpReport {
    /// Whether every request was answered 200 without a partial success.
    pub fn clean(&self) -> bool {
        self.requests_failed == 0 && self.points_refused == 0
    }

    /// The report, one `key=value` per line.
    pub fn render(&self) -> String {
        let d = &self.delta;
        let mut s = String::new();
        let mut kv = |k: &str, v: String| {
            let _ = writeln!(s, "{k:<26}{v}");
        };
        kv("config", self.config.clone());
        kv("transport", "otlp_http (protobuf)".into());
        kv("senders", format!("{}", self.senders));
        kv("streams", format!("{}", self.streams));
        kv("points_per_request", format!("{}", self.points_per_request));
        kv("gauge_pct", format!("{}", self.gauge_pct));
        kv("requests_sent", format!("{}", self.requests_sent));
        kv("points_sent", format!("{}", self.points_sent));
        kv("requests_failed", format!("{}", self.requests_failed));
        kv("points_refused", format!("{}", self.points_refused));
        if let Some(e) = &self.first_error {
            kv("first_error", e.clone());
        }
        kv("send_secs", format!("{:.3}", self.send_secs));
        kv("drain_secs", format!("{:.3}", self.drain_secs));
        kv("points_counted", format!("{}", d.lines));
        kv(
            "points_lost",
            format!("{}", self.points_sent as f64 - d.lines),
        );
        kv("rejected_lines", format!("{}", d.rejected));
        kv("refused_lines", format!("{}", d.refused));
        let secs = self.send_secs.max(1e-9);
        kv(
            "requests_per_sec",
            format!("{:.0}", self.requests_sent as f64 / secs),
        );
        kv(
            "points_per_sec_sent",
            format!("{:.0}", self.points_sent as f64 / secs),
        );
        kv("points_per_sec_counted", format!("{:.0}", d.lines / secs));
        if let Some(c) = self.daemon_cpu_secs {
            kv("daemon_cpu_secs", format!("{c:.2}"));
            if d.lines > 0.0 {
                kv(
                    "daemon_cpu_ns_per_point",
                    format!("{:.0}", c * 1e9 / d.lines),
                );
            }
        }
        if let Some(c) = self.tool_cpu_secs {
            kv("tool_cpu_secs", format!("{c:.2}"));
        }
        rss_rows(&mut kv, self.rss, self.streams, "stream");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_from_the_exposition() {
        let text = "# HELP rollstat_ingest_lines_total x\n\
rollstat_ingest_lines_total{transport=\"tcp\"} 5\n\
rollstat_ingest_lines_total{transport=\"udp\"} 1234567\n\
rollstat_ingest_lines_total_other{transport=\"udp\"} 9\n\
rollstat_ingest_rejected_lines_total{reason=\"bad_value\"} 2\n\
rollstat_ingest_rejected_lines_total{reason=\"no_type\"} 3\n\
rollstat_udp_kernel_drops 7\n";
        let c = Counters::from_exposition(text, "udp").unwrap();
        assert_eq!(c.lines, 1_234_567.0);
        assert_eq!(Counters::from_exposition(text, "tcp").unwrap().lines, 5.0);
        assert_eq!(c.rejected, 5.0);
        assert_eq!(c.kernel_drops, 7.0);
        assert_eq!(c.refused, 0.0);
    }
}
