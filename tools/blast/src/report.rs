//! What the daemon counted, read from its `/metrics`, and the report of a
//! blast: lines sent, counted, and lost, the loss split into what the
//! daemon or the kernel counted and what nobody did.

use std::fmt::Write as _;

use rollstat_testkit::scrape::Scrape;

/// The daemon's counters the report needs, read from `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    /// `rollstat_ingest_lines_total{transport="udp"}`.
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
    /// Reads the counters from a Prometheus text exposition.
    pub fn from_exposition(text: &str) -> Result<Counters, String> {
        let s = Scrape::try_parse(text)?;
        Ok(Counters {
            lines: s.sum_where("rollstat_ingest_lines_total", "transport", "udp"),
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
        let c = Counters::from_exposition(text).unwrap();
        assert_eq!(c.lines, 1_234_567.0);
        assert_eq!(c.rejected, 5.0);
        assert_eq!(c.kernel_drops, 7.0);
        assert_eq!(c.refused, 0.0);
    }
}
