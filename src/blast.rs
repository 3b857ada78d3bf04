//! `rollstat blast`: a bounded statsd load generator for loopback, and the
//! loss report that goes with it.
//!
//! The tool renders every datagram before the timed loop (so sending costs a
//! `send` per datagram and nothing else; with `--gso`, one `send` per 64
//! equal-size datagrams, which the kernel splits before they reach the
//! daemon's socket), sends them from `--senders` threads
//! at a set rate or as fast as possible, and reads the daemon's own counters
//! from `/metrics` before and after. The difference is what the daemon
//! counted; what is missing is reported as loss, split into what the daemon
//! or the kernel counted (rejected, refused, kernel drops) and what nobody
//! counted, so loss is never silent.
//!
//! Every loop is bounded twice: by `--duration-secs` (hard cap
//! [`MAX_DURATION`]) and by `--max-datagrams`. The drain wait after sending
//! is bounded by `--drain-secs`. `--spawn` starts the daemon binary itself
//! with port-0 listeners, so one command measures everything, and reports the
//! daemon's CPU time per line.

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock, Timestamp};

/// Longest a blast may send, whatever `--duration-secs` says.
pub const MAX_DURATION: Duration = Duration::from_secs(120);
/// Longest the tool waits for the daemon to drain after sending.
pub const MAX_DRAIN: Duration = Duration::from_secs(30);
/// Datagrams sent between two looks at the clock (at least one send).
const CHUNK: u64 = 32;

/// statsd types the tool can send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// `name:1|c`
    Counter,
    /// `name:42|g`
    Gauge,
    /// `name:12.5|ms`
    Timer,
    /// `name:3|h`
    Histogram,
    /// `name:3|d`
    Distribution,
    /// `name:u123|s`
    Set,
}

/// Options of `rollstat blast`.
#[derive(Clone, Debug, clap::Args)]
pub struct BlastArgs {
    /// statsd UDP address of the daemon (ignored with --spawn).
    #[arg(long, default_value = "127.0.0.1:8125")]
    pub udp: SocketAddr,
    /// HTTP address of the daemon, to read its counters (ignored with --spawn).
    #[arg(long, default_value = "127.0.0.1:9102")]
    pub http: SocketAddr,
    /// Start this binary as the daemon (port-0 listeners, temp config) and
    /// stop it afterwards.
    #[arg(long)]
    pub spawn: bool,
    /// With --spawn: UDP reader threads of the daemon.
    #[arg(long, default_value_t = 2)]
    pub daemon_readers: usize,
    /// With --spawn: ingest workers of the daemon (`[ingest] udp_workers`;
    /// 0 = the readers parse themselves).
    #[arg(long, default_value_t = 2)]
    pub daemon_workers: usize,
    /// Distinct metric names (= series, tags are fixed per name).
    #[arg(long, default_value_t = 10_000)]
    pub names: usize,
    /// Tags per line (DogStatsD `|#k:v`), one value per name.
    #[arg(long, default_value_t = 0)]
    pub tags: usize,
    /// Lines packed into one datagram (fewer if --max-datagram-bytes is reached).
    #[arg(long, default_value_t = 80)]
    pub lines_per_datagram: usize,
    /// Largest datagram payload.
    #[arg(long, default_value_t = 1432)]
    pub max_datagram_bytes: usize,
    /// Lines per second over all senders; 0 = as fast as possible.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// How long to send (capped at 120 s).
    #[arg(long, default_value_t = 10.0)]
    pub duration_secs: f64,
    /// Upper bound on datagrams sent (over all senders).
    #[arg(long, default_value_t = 200_000_000)]
    pub max_datagrams: u64,
    /// Sender threads.
    #[arg(long, default_value_t = 1)]
    pub senders: usize,
    /// Send with UDP GSO (`UDP_SEGMENT`): one `send` carries up to 64
    /// datagrams of one size, which the kernel splits into separate
    /// datagrams before they reach the daemon's socket. Cuts the sender's
    /// per-datagram cost, so one machine can offer more one-line datagrams
    /// than a client sending one per syscall. Needs every datagram the same
    /// size (`--lines-per-datagram 1 --tags 0`, fewer than a million names).
    #[arg(long)]
    pub gso: bool,
    /// statsd type of every line.
    #[arg(long = "type", value_enum, default_value_t = Kind::Counter)]
    pub kind: Kind,
    /// Longest wait for the daemon's counters to settle after sending
    /// (capped at 30 s).
    #[arg(long, default_value_t = 10.0)]
    pub drain_secs: f64,
}

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
    #[must_use]
    pub fn from_exposition(text: &str) -> Counters {
        Counters {
            lines: sum_samples(
                text,
                "rollstat_ingest_lines_total",
                Some("transport=\"udp\""),
            ),
            packets: sum_samples(
                text,
                "rollstat_ingest_packets_total",
                Some("transport=\"udp\""),
            ),
            rejected: sum_samples(text, "rollstat_ingest_rejected_lines_total", None),
            refused: sum_samples(text, "rollstat_series_refused_total", None),
            dropped_by_mapping: sum_samples(text, "rollstat_ingest_dropped_by_mapping_total", None),
            kernel_drops: sum_samples(text, "rollstat_udp_kernel_drops", None),
        }
    }

    fn minus(self, before: Counters) -> Counters {
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

/// Sums the samples of family `name` (exact name) whose label set contains
/// `label` (e.g. `transport="udp"`), or all of them.
#[must_use]
pub fn sum_samples(text: &str, name: &str, label: Option<&str>) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = match rest.as_bytes().first()? {
                b'{' => {
                    let end = rest.rfind('}')?;
                    (&rest[1..end], &rest[end + 1..])
                }
                b' ' => ("", rest),
                _ => return None,
            };
            if label.is_some_and(|want| !labels.contains(want)) {
                return None;
            }
            value.split_whitespace().next()?.parse::<f64>().ok()
        })
        .sum()
}

/// The statsd line for name number `i`.
#[must_use]
pub fn render_line(i: usize, tags: usize, kind: Kind) -> String {
    let mut s = format!("blast.m{i:06}:");
    match kind {
        Kind::Counter => s.push_str("1|c"),
        Kind::Gauge => s.push_str("42|g"),
        Kind::Timer => s.push_str("12.5|ms"),
        Kind::Histogram => s.push_str("3|h"),
        Kind::Distribution => s.push_str("3|d"),
        Kind::Set => {
            let _ = write!(s, "u{}|s", i % 1000);
        }
    }
    for j in 0..tags {
        s.push_str(if j == 0 { "|#" } else { "," });
        let _ = write!(s, "k{j}:v{}", (i + j) % 97);
    }
    s.push('\n');
    s
}

/// Every datagram of one pass over the names, and the line count of each.
/// Lines are packed up to `per_datagram` lines and `max_bytes` bytes (a line
/// longer than `max_bytes` goes alone).
#[must_use]
pub fn render_datagrams(
    names: usize,
    tags: usize,
    kind: Kind,
    per_datagram: usize,
    max_bytes: usize,
) -> Vec<(Vec<u8>, u64)> {
    let mut out = Vec::new();
    let mut cur = Vec::with_capacity(max_bytes);
    let mut n = 0u64;
    for i in 0..names.max(1) {
        let line = render_line(i, tags, kind);
        if n > 0 && (n as usize >= per_datagram.max(1) || cur.len() + line.len() > max_bytes) {
            out.push((std::mem::take(&mut cur), n));
            n = 0;
        }
        cur.extend_from_slice(line.as_bytes());
        n += 1;
    }
    if n > 0 {
        out.push((cur, n));
    }
    out
}

/// What one sender did.
#[derive(Clone, Copy, Debug, Default)]
struct Sent {
    datagrams: u64,
    lines: u64,
    errors: u64,
    elapsed: Duration,
}

/// Datagrams per GSO send, at most (the kernel's limit is 64 segments of
/// one send, and 64 KiB in all).
const GSO_SEGMENTS: usize = 64;

/// What one `send` carries: a datagram, or with GSO several of one size.
struct Send {
    bytes: Vec<u8>,
    datagrams: u64,
    lines: u64,
}

/// The sends of one pass over `datagrams` starting at `offset`: one per
/// datagram, or with `gso` runs of up to [`GSO_SEGMENTS`] concatenated.
fn sends(datagrams: &[(Vec<u8>, u64)], offset: usize, gso: bool) -> io::Result<Vec<Send>> {
    let n = datagrams.len();
    let order = (0..n).map(|k| &datagrams[(offset + k) % n]);
    if !gso {
        return Ok(order
            .map(|(d, lines)| Send {
                bytes: d.clone(),
                datagrams: 1,
                lines: *lines,
            })
            .collect());
    }
    let size = datagrams[0].0.len();
    if datagrams.iter().any(|d| d.0.len() != size) {
        return Err(io::Error::other(
            "--gso needs every datagram the same size: use --lines-per-datagram 1 and --tags 0 with fewer than a million names",
        ));
    }
    let per_send = GSO_SEGMENTS.min(65_000 / size.max(1)).max(1);
    let all: Vec<_> = order.collect();
    Ok(all
        .chunks(per_send)
        .map(|run| Send {
            bytes: run.iter().flat_map(|d| d.0.iter().copied()).collect(),
            datagrams: run.len() as u64,
            lines: run.iter().map(|d| d.1).sum(),
        })
        .collect())
}

/// How one sender thread sends.
#[derive(Clone, Copy, Debug)]
struct Pace {
    /// Lines per second; 0 = as fast as possible.
    rate: f64,
    duration: Duration,
    max_datagrams: u64,
    gso: bool,
}

/// Sends `datagrams` in turn, starting at `offset`, to `target`.
fn sender(
    target: SocketAddr,
    datagrams: &[(Vec<u8>, u64)],
    offset: usize,
    pace: Pace,
) -> io::Result<Sent> {
    let Pace {
        rate,
        duration,
        max_datagrams,
        gso,
    } = pace;
    let sock = UdpSocket::bind(if target.is_ipv4() {
        "127.0.0.1:0"
    } else {
        "[::1]:0"
    })?;
    sock.connect(target)?;
    let sends = sends(datagrams, offset, gso)?;
    if gso {
        let size = i32::try_from(datagrams[0].0.len()).unwrap_or(i32::MAX);
        nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::UdpGsoSegment, &size)
            .map_err(|e| io::Error::other(format!("--gso: setting UDP_SEGMENT failed: {e}")))?;
    }
    let clock = SystemClock::new();
    let start = clock.now();
    let mut s = Sent::default();
    let mut i = 0;
    loop {
        let mut round = 0;
        while round < CHUNK {
            let send = &sends[i];
            round += send.datagrams;
            match sock.send(&send.bytes) {
                Ok(_) => {
                    s.datagrams += send.datagrams;
                    s.lines += send.lines;
                }
                Err(_) => s.errors += send.datagrams,
            }
            i += 1;
            if i == sends.len() {
                i = 0;
            }
        }
        let elapsed = since(&clock, start);
        if elapsed >= duration || s.datagrams + s.errors >= max_datagrams {
            s.elapsed = elapsed;
            return Ok(s);
        }
        if rate > 0.0 {
            let due = Duration::from_secs_f64(s.lines as f64 / rate);
            if due > elapsed {
                std::thread::sleep((due - elapsed).min(duration - elapsed));
            }
        }
    }
}

fn since(clock: &SystemClock, t: Timestamp) -> Duration {
    Duration::from_nanos(clock.now().as_nanos().saturating_sub(t.as_nanos()))
}

/// GETs `path` over plain HTTP/1.1 and returns the body.
pub fn http_get(addr: SocketAddr, path: &str) -> io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Err(io::Error::other("malformed HTTP response"));
    };
    if !head.starts_with("HTTP/1.1 200") {
        return Err(io::Error::other(format!(
            "GET {path}: {}",
            head.lines().next().unwrap_or("")
        )));
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok(dechunk(body));
    }
    Ok(body.to_string())
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn read_counters(http: SocketAddr) -> io::Result<Counters> {
    Ok(Counters::from_exposition(&http_get(http, "/metrics")?))
}

/// CPU seconds (user + system) of process `pid` from `/proc/<pid>/stat`,
/// assuming the usual 100 clock ticks per second.
#[must_use]
pub fn cpu_secs(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let after = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// A daemon started by `--spawn`; killed on drop.
struct Spawned {
    child: Child,
    config: PathBuf,
    udp: SocketAddr,
    http: SocketAddr,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config);
    }
}

fn spawn_daemon(readers: usize, workers: usize, names: usize) -> io::Result<Spawned> {
    let exe = std::env::current_exe()?;
    let config = std::env::temp_dir().join(format!("rollstat-blast-{}.toml", std::process::id()));
    std::fs::write(
        &config,
        format!(
            "[listen]\nstatsd_udp = \"127.0.0.1:0\"\nstatsd_tcp = \"\"\nhttp = \"127.0.0.1:0\"\n\
             [ingest]\nudp_readers = {readers}\nudp_workers = {workers}\n\
             [series]\nmax_series = {}\n",
            (names + 1000).max(100_000)
        ),
    )?;
    let mut child = Command::new(exe)
        .arg("--config")
        .arg(&config)
        .arg("--log")
        .arg("warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| io::Error::other("no stdout"))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let mut spawned = Spawned {
        child,
        config,
        udp: SocketAddr::from(([127, 0, 0, 1], 0)),
        http: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| io::Error::other("the daemon did not print its listening line within 10 s"))?;
    let addr = |key: &str| -> io::Result<SocketAddr> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| io::Error::other(format!("no {key} in {line:?}")))
    };
    spawned.udp = addr("statsd_udp=")?;
    spawned.http = addr("http=")?;
    Ok(spawned)
}

/// The outcome of one blast.
#[derive(Clone, Debug, Default)]
pub struct Report {
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
    #[must_use]
    pub fn loss_pct(&self) -> f64 {
        if self.lines_sent == 0 {
            return 0.0;
        }
        100.0 * (self.lines_sent as f64 - self.delta.lines) / self.lines_sent as f64
    }

    /// The report, one `key=value` per line.
    #[must_use]
    pub fn render(&self) -> String {
        let d = &self.delta;
        let lost = self.lines_sent as f64 - d.lines;
        let kernel_lines = d.kernel_drops * self.lines_per_datagram;
        let unexplained = lost - d.rejected - d.refused - d.dropped_by_mapping - kernel_lines;
        let mut s = String::new();
        let mut kv = |k: &str, v: String| {
            let _ = writeln!(s, "{k:<26}{v}");
        };
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

/// Runs a blast and returns its report.
pub fn run(a: &BlastArgs) -> io::Result<Report> {
    if a.names == 0 || a.senders == 0 {
        return Err(io::Error::other("--names and --senders must be at least 1"));
    }
    let duration = Duration::from_secs_f64(a.duration_secs.max(0.0)).min(MAX_DURATION);
    let drain = Duration::from_secs_f64(a.drain_secs.max(0.0)).min(MAX_DRAIN);
    let spawned = if a.spawn {
        Some(spawn_daemon(a.daemon_readers, a.daemon_workers, a.names)?)
    } else {
        None
    };
    let (udp, http) = spawned
        .as_ref()
        .map_or((a.udp, a.http), |s| (s.udp, s.http));
    let datagrams = render_datagrams(
        a.names,
        a.tags,
        a.kind,
        a.lines_per_datagram,
        a.max_datagram_bytes,
    );
    let per_datagram = datagrams.iter().map(|d| d.1).sum::<u64>() as f64 / datagrams.len() as f64;
    eprintln!(
        "blast: {} datagrams pre-rendered ({per_datagram:.1} lines, up to {} bytes each); sending to {udp} for {:.1} s, {}",
        datagrams.len(),
        datagrams.iter().map(|d| d.0.len()).max().unwrap_or(0),
        duration.as_secs_f64(),
        if a.rate == 0 { "as fast as possible".to_string() } else { format!("{} lines/s", a.rate) }
    );
    let before = read_counters(http)?;
    let pid = spawned.as_ref().map(|s| s.child.id().to_string());
    let daemon_cpu0 = pid.as_deref().and_then(cpu_secs);
    let tool_cpu0 = cpu_secs("self");

    let pace = Pace {
        rate: a.rate as f64 / a.senders as f64,
        duration,
        max_datagrams: (a.max_datagrams / a.senders as u64).max(1),
        gso: a.gso,
    };
    let results: Vec<io::Result<Sent>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..a.senders)
            .map(|k| {
                let d = &datagrams;
                let offset = k * d.len() / a.senders;
                s.spawn(move || sender(udp, d, offset, pace))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("sender panicked")))
            })
            .collect()
    });
    let mut report = Report {
        lines_per_datagram: per_datagram,
        ..Report::default()
    };
    for r in results {
        let s = r?;
        report.lines_sent += s.lines;
        report.datagrams_sent += s.datagrams;
        report.send_errors += s.errors;
        report.send_secs = report.send_secs.max(s.elapsed.as_secs_f64());
    }

    // Wait, bounded, until every line is counted or the count stops moving.
    let clock = SystemClock::new();
    let drain_start = clock.now();
    let mut after = read_counters(http)?;
    let mut settled_at = since(&clock, drain_start);
    let mut still = 0;
    while after.lines - before.lines < report.lines_sent as f64
        && still < 3
        && since(&clock, drain_start) < drain
    {
        std::thread::sleep(Duration::from_millis(100));
        let next = read_counters(http)?;
        if next == after {
            still += 1;
        } else {
            still = 0;
            settled_at = since(&clock, drain_start);
        }
        after = next;
    }
    report.drain_secs = settled_at.as_secs_f64();
    report.delta = after.minus(before);
    report.daemon_cpu_secs = pid
        .as_deref()
        .and_then(cpu_secs)
        .zip(daemon_cpu0)
        .map(|(b, a)| b - a);
    report.tool_cpu_secs = cpu_secs("self").zip(tool_cpu0).map(|(b, a)| b - a);
    drop(spawned);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_cover_every_name_once_and_respect_both_limits() {
        let d = render_datagrams(1000, 2, Kind::Counter, 80, 1432);
        assert_eq!(d.iter().map(|x| x.1).sum::<u64>(), 1000);
        for (bytes, n) in &d {
            assert!(bytes.len() <= 1432, "{}", bytes.len());
            assert!(*n <= 80);
            assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count() as u64, *n);
        }
        let one = render_datagrams(10, 0, Kind::Timer, 1, 1432);
        assert_eq!(one.len(), 10);
        assert_eq!(one[3].0, b"blast.m000003:12.5|ms\n");
    }

    #[test]
    fn gso_sends_group_one_pass_of_equal_datagrams() {
        let d = render_datagrams(150, 0, Kind::Counter, 1, 1432);
        let plain = sends(&d, 5, false).unwrap();
        assert_eq!(plain.len(), 150);
        assert_eq!(plain[0].bytes, d[5].0);
        let gso = sends(&d, 5, true).unwrap();
        assert_eq!(
            gso.iter().map(|s| s.datagrams).collect::<Vec<_>>(),
            [64, 64, 22]
        );
        assert_eq!(gso.iter().map(|s| s.lines).sum::<u64>(), 150);
        assert_eq!(&gso[0].bytes[..d[5].0.len()], &d[5].0[..]);
        // Datagrams of several sizes cannot be one GSO send.
        let mixed = render_datagrams(150, 2, Kind::Counter, 1, 1432);
        assert!(sends(&mixed, 0, true).is_err());
    }

    #[test]
    fn a_gso_send_arrives_as_separate_datagrams() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let d = render_datagrams(100, 0, Kind::Counter, 1, 1432);
        let target = rx.local_addr().unwrap();
        let pace = Pace {
            rate: 0.0,
            duration: Duration::from_secs(5),
            max_datagrams: 128,
            gso: true,
        };
        let sent = sender(target, &d, 0, pace).unwrap();
        // The cap is checked between rounds of sends: 64 + 36 + 64.
        assert_eq!(sent.datagrams, 164);
        let mut buf = [0u8; 2048];
        for k in 0..164 {
            let n = rx.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &d[k % 100].0[..], "datagram {k}");
        }
    }

    #[test]
    fn every_rendered_line_parses() {
        use crate::parse::{parse_datagram, Line};
        for kind in [
            Kind::Counter,
            Kind::Gauge,
            Kind::Timer,
            Kind::Histogram,
            Kind::Distribution,
            Kind::Set,
        ] {
            for (d, n) in render_datagrams(200, 3, kind, 80, 1432) {
                let ok = parse_datagram(&d)
                    .filter(|l| matches!(l, Ok(Line::Sample(_))))
                    .count();
                assert_eq!(ok as u64, n, "{kind:?}");
            }
        }
    }

    #[test]
    fn counters_are_read_from_the_exposition() {
        let text = "# HELP rollstat_ingest_lines_total x\n\
rollstat_ingest_lines_total{transport=\"tcp\"} 5\n\
rollstat_ingest_lines_total{transport=\"udp\"} 1234567\n\
rollstat_ingest_lines_total_other{transport=\"udp\"} 9\n\
rollstat_ingest_rejected_lines_total{reason=\"bad_value\"} 2\n\
rollstat_ingest_rejected_lines_total{reason=\"no_type\"} 3\n\
rollstat_udp_kernel_drops 7\n";
        let c = Counters::from_exposition(text);
        assert_eq!(c.lines, 1_234_567.0);
        assert_eq!(c.rejected, 5.0);
        assert_eq!(c.kernel_drops, 7.0);
        assert_eq!(c.refused, 0.0);
    }

    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "hello world"
        );
    }
}
