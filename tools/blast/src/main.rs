//! `rollstat-blast`: a bounded statsd load generator for loopback, and the
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
//! is bounded by `--drain-secs`. `--spawn` starts the `rollstat` daemon
//! itself with port-0 listeners, so one command measures everything, and
//! reports the daemon's CPU time per line.
//!
//! `--transport otlp` sends OTLP/HTTP protobuf instead: requests of
//! `--points-per-request` data points over `--names` streams, encoded
//! before the timed loop, posted over one keep-alive connection per
//! sender, every answer checked (200, no `partial_success`); the report
//! counts data points (`rollstat_ingest_lines_total{transport="otlp"}`).
//! `--probe N` measures ingest-to-visible latency instead of throughput.
//! With `--spawn`, both modes also report the daemon's resident memory
//! before and after, and its growth per series or stream.
//!
//! Files: `send.rs` (the statsd senders), `otlp.rs` (the OTLP requests
//! and senders), `probe.rs` (the latency probe), `report.rs` (the
//! daemon's counters and the reports). The lines come from
//! `rollstat_testkit::fixtures`, and the daemon launcher, the HTTP client
//! and the `/metrics` reader from the same harness as the integration
//! tests'.

#![forbid(unsafe_code)]
#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

mod ledger;
mod otlp;
mod probe;
mod report;
mod send;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rollstat::{Clock, SystemClock};
use rollstat_testkit::daemon::{Launch, Running};
use rollstat_testkit::fixtures::{render_datagrams, Kind};
use rollstat_testkit::http::try_http;
use rollstat_testkit::profile::{Ledger, Profile, Workload};

use report::{cpu_secs, rss_bytes, Counters, OtlpReport, Report};
use send::{sender, since, Pace, Sent};

/// Longest a blast may send, whatever `--duration-secs` says.
const MAX_DURATION: Duration = Duration::from_secs(120);
/// Longest the tool waits for the daemon to drain after sending.
const MAX_DRAIN: Duration = Duration::from_secs(30);
/// The daemon's resident memory is read this long after the last send
/// (the UDP readers have applied a small burst by then; OTLP points are
/// applied before their answer), before the counters are scraped: a
/// scrape of many series would add its own buffers to the growth.
const RSS_SETTLE: Duration = Duration::from_millis(100);

/// The daemon's RSS once the sends have settled ([`RSS_SETTLE`]).
fn rss_settled(pid: Option<&str>) -> Option<u64> {
    let pid = pid?;
    std::thread::sleep(RSS_SETTLE);
    rss_bytes(pid)
}

/// What the load is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Transport {
    /// statsd lines over UDP.
    Udp,
    /// OTLP/HTTP protobuf to POST /v1/metrics.
    Otlp,
}

impl Transport {
    /// The `transport` label of its `rollstat_ingest_lines_total`.
    fn label(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Otlp => "otlp",
        }
    }
}

/// Send statsd (or OTLP/HTTP) load over loopback and report what the
/// daemon counted (from its /metrics) and what was lost.
#[derive(Clone, Debug, Parser)]
#[command(name = "rollstat-blast", version)]
struct Args {
    /// statsd UDP address of the daemon (ignored with --spawn).
    #[arg(long, default_value = "127.0.0.1:8125")]
    udp: SocketAddr,
    /// HTTP address of the daemon, to read its counters (ignored with --spawn).
    #[arg(long, default_value = "127.0.0.1:9102")]
    http: SocketAddr,
    /// The load: statsd lines over UDP, or OTLP/HTTP protobuf requests.
    #[arg(long, value_enum, default_value_t = Transport::Udp)]
    transport: Transport,
    /// OTLP/HTTP address of the daemon (`[listen] otlp_http`; ignored with
    /// --spawn).
    #[arg(long, default_value = "127.0.0.1:4318")]
    otlp_http: SocketAddr,
    /// OTLP: data points per request.
    #[arg(long, default_value_t = 1000)]
    points_per_request: usize,
    /// OTLP: streams (attribute values) per metric name; --names streams
    /// make --names / --per-metric metric names.
    #[arg(long, default_value_t = 100)]
    per_metric: usize,
    /// OTLP: percent of the metric names that are gauges (spread evenly);
    /// the others are cumulative monotonic sums.
    #[arg(long, default_value_t = 20)]
    gauge_pct: usize,
    /// OTLP: upper bound on requests sent (over all senders).
    #[arg(long, default_value_t = 10_000_000)]
    max_requests: u64,
    /// Instead of load: N ingest-to-visible probes over --transport (one
    /// gauge sample each, polled on /api/v1/series); at most 10000.
    #[arg(long, default_value_t = 0)]
    probe: usize,
    /// Start the rollstat daemon (port-0 listeners, temp config) and stop it
    /// afterwards.
    #[arg(long)]
    spawn: bool,
    /// With --spawn: the daemon binary [default: `rollstat` next to this
    /// executable, as `cargo build` leaves it].
    #[arg(long, value_name = "PATH")]
    daemon_bin: Option<PathBuf>,
    /// With --spawn: run the daemon with this config file (e.g. the shipped
    /// config.toml, the headline configuration of every figure), its
    /// `[listen]` moved to free loopback ports (statsd UDP and HTTP on port
    /// 0, TCP and Unix off); everything else as the file says. Without it,
    /// blast's own minimal config (no windows or mappings beyond the
    /// defaults): name the config with every figure.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// With --spawn: UDP reader threads of the daemon [default: 2, or what
    /// --config says].
    #[arg(long)]
    daemon_readers: Option<usize>,
    /// With --spawn: ingest workers of the daemon (`[ingest] udp_workers`;
    /// 0 = the readers parse themselves) [default: 2, or what --config
    /// says].
    #[arg(long)]
    daemon_workers: Option<usize>,
    /// Distinct metric names (= series, tags are fixed per name); OTLP:
    /// distinct streams (metric name and attributes).
    #[arg(long, default_value_t = 10_000)]
    names: usize,
    /// Tags per line (DogStatsD `|#k:v`), one value per name.
    #[arg(long, default_value_t = 0)]
    tags: usize,
    /// Lines packed into one datagram (fewer if --max-datagram-bytes is reached).
    #[arg(long, default_value_t = 80)]
    lines_per_datagram: usize,
    /// Largest datagram payload.
    #[arg(long, default_value_t = 1432)]
    max_datagram_bytes: usize,
    /// Lines (OTLP: data points) per second over all senders; 0 = as fast
    /// as possible.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// How long to send (capped at 120 s).
    #[arg(long, default_value_t = 10.0)]
    duration_secs: f64,
    /// Upper bound on datagrams sent (over all senders).
    #[arg(long, default_value_t = 200_000_000)]
    max_datagrams: u64,
    /// Sender threads (OTLP: keep-alive connections, each with its own
    /// share of the streams; at most one per request of a pass).
    #[arg(long, default_value_t = 1)]
    senders: usize,
    /// UDP flows (source ports) per sender thread, used in turn, one
    /// datagram each: as a fleet of clients sends, each from its own port,
    /// so the kernel spreads them over the daemon's SO_REUSEPORT readers.
    /// 1 = one flow per sender.
    #[arg(long, default_value_t = 1)]
    flows: usize,
    /// Send with UDP GSO (`UDP_SEGMENT`): one `send` carries up to 64
    /// datagrams of one size, which the kernel splits into separate
    /// datagrams before they reach the daemon's socket. Cuts the sender's
    /// per-datagram cost, so one machine can offer more one-line datagrams
    /// than a client sending one per syscall. Needs every datagram the same
    /// size (`--lines-per-datagram 1 --tags 0`, fewer than a million names).
    #[arg(long)]
    gso: bool,
    /// statsd type of every line: counter, gauge, timer, histogram,
    /// distribution or set.
    #[arg(long = "type", default_value = "counter")]
    kind: Kind,
    /// A realistic workload instead of one line per name: `dogstatsd`
    /// (lading's DogStatsD mix: counts 34 : gauges 34 : histograms 25 :
    /// timers 5 : distributions 1 : sets 1, 3 to 64 tags, packing,
    /// sampling), `statsd` (counts, gauges and timers, no DogStatsD
    /// extensions: every statsd server parses every line) or `counters`.
    /// --names is then the number of contexts, --tags (when not 0) the
    /// most tags a DogStatsD context gets (3 to 64 by default), --type and
    /// --lines-per-datagram are ignored, and datagrams fill up to
    /// --max-datagram-bytes.
    #[arg(long)]
    profile: Option<Profile>,
    /// With --profile: lines rendered (sent in turn, again and again).
    #[arg(long, default_value_t = 200_000)]
    profile_lines: usize,
    /// With --profile dogstatsd: percent of the counter, timer, histogram
    /// and distribution lines that pack 2 to 32 values (lading's 8 by
    /// default; 0 for servers that refuse packed values).
    #[arg(long, default_value_t = 8.0)]
    pack_pct: f64,
    /// With --profile: the seed of the contexts and lines.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// With --profile: send exactly this many passes over the rendered
    /// lines, at --rate, instead of sending for --duration-secs (still
    /// capped at 120 s), so that what was sent is the ledger of one pass
    /// times N. Needs --senders 1.
    #[arg(long, default_value_t = 0)]
    passes: u64,
    /// Only send: read no daemon counters before or after (for a server
    /// that is not rollstat, such as a peer of benches/compare, which
    /// reads what that server counted itself). Not with --spawn.
    #[arg(long)]
    send_only: bool,
    /// With --profile: write what was sent, per context, as JSON to FILE
    /// (the name, tags and kind of each context; its lines, values,
    /// counter sum or weighted count, last gauge value, distinct members).
    #[arg(long, value_name = "FILE")]
    ledger: Option<PathBuf>,
    /// Longest wait for the daemon's counters to settle after sending
    /// (capped at 30 s).
    #[arg(long, default_value_t = 10.0)]
    drain_secs: f64,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let done = if a.probe > 0 {
        run_probe(&a).map(|text| (text, true))
    } else if a.transport == Transport::Otlp {
        run_otlp(&a).map(|r| (r.render(), r.clean()))
    } else {
        run(&a).map(|r| (r.render(), true))
    };
    match done {
        Ok((text, clean)) => {
            print!("{text}");
            if clean {
                ExitCode::SUCCESS
            } else {
                eprintln!("rollstat-blast: some OTLP requests failed or had points refused (see requests_failed, points_refused, first_error)");
                ExitCode::from(2)
            }
        }
        Err(e) => {
            eprintln!("rollstat-blast: {e}");
            ExitCode::from(1)
        }
    }
}

/// The daemon binary for --spawn: --daemon-bin, else `rollstat` beside
/// this executable.
fn daemon_bin(a: &Args) -> io::Result<PathBuf> {
    if let Some(p) = &a.daemon_bin {
        return Ok(p.clone());
    }
    let exe = std::env::current_exe()?;
    let bin = exe.with_file_name("rollstat");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(io::Error::other(format!(
            "--spawn: no daemon binary at {} (build it, e.g. `cargo build --release`, or pass --daemon-bin)",
            bin.display()
        )))
    }
}

/// blast's own config: port-0 listeners (statsd UDP, HTTP, OTLP/HTTP),
/// `readers` UDP readers, `workers` ingest workers and room for `names`
/// series.
fn own_config(readers: usize, workers: usize, names: usize) -> String {
    format!(
        "[listen]\nstatsd_udp = \"127.0.0.1:0\"\nstatsd_tcp = \"\"\nhttp = \"127.0.0.1:0\"\notlp_http = \"127.0.0.1:0\"\n\
         [ingest]\nudp_readers = {readers}\nudp_workers = {workers}\n\
         [series]\nmax_series = {}\n",
        (names + 1000).max(100_000)
    )
}

/// The config file `text` (from `path`) with its `[listen]` moved to free
/// loopback ports: statsd UDP, HTTP and OTLP/HTTP on port 0, TCP and Unix
/// off; the readers and workers set if given. Comments are not kept. Refused: HTTPS
/// (`[http.tls]`, `web_config_file`), which blast does not speak.
fn file_config(
    path: &std::path::Path,
    text: &str,
    readers: Option<usize>,
    workers: Option<usize>,
) -> io::Result<String> {
    let bad = |why: String| io::Error::other(format!("--config {}: {why}", path.display()));
    let mut doc: toml::Table = text.parse().map_err(|e| bad(format!("{e}")))?;
    if let Some(http) = doc.get("http").and_then(|h| h.as_table()) {
        if http.contains_key("tls") || http.contains_key("web_config_file") {
            return Err(bad(
                "[http.tls] or web_config_file: blast reads /metrics over plain HTTP; remove them for the run".into(),
            ));
        }
    }
    let table = |doc: &mut toml::Table, name: &str| -> io::Result<toml::Table> {
        match doc.remove(name) {
            None => Ok(toml::Table::new()),
            Some(toml::Value::Table(t)) => Ok(t),
            Some(_) => Err(bad(format!("`{name}` is not a table"))),
        }
    };
    let mut listen = table(&mut doc, "listen")?;
    listen.insert("statsd_udp".into(), "127.0.0.1:0".into());
    listen.insert("statsd_tcp".into(), "".into());
    listen.insert("statsd_unix".into(), "".into());
    listen.insert("http".into(), "127.0.0.1:0".into());
    listen.insert("otlp_http".into(), "127.0.0.1:0".into());
    doc.insert("listen".into(), toml::Value::Table(listen));
    let mut ingest = table(&mut doc, "ingest")?;
    for (key, v) in [("udp_readers", readers), ("udp_workers", workers)] {
        if let Some(v) = v {
            ingest.insert(key.into(), toml::Value::Integer(v as i64));
        }
    }
    doc.insert("ingest".into(), toml::Value::Table(ingest));
    toml::to_string(&doc).map_err(|e| bad(format!("cannot write it back: {e}")))
}

/// Starts the daemon with `config`, logging at `warn` (or `RUST_LOG`) to
/// this process's stderr.
fn spawn_daemon(bin: PathBuf, config: &str) -> io::Result<Running> {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_string());
    let running = Launch::new(bin, config)
        .log_filter(&filter)
        .inherit_stderr()
        .dir_prefix("rollstat-blast")
        .start()
        .map_err(io::Error::other)?;
    if running.listening.udp.is_none() {
        return Err(io::Error::other(
            "the spawned daemon listens on no statsd UDP port",
        ));
    }
    Ok(running)
}

/// The daemon's counters (lines of `transport`), from a GET /metrics.
fn read_counters(http: SocketAddr, transport: Transport) -> io::Result<Counters> {
    let r = try_http(http, "GET", "/metrics", &[("Accept", "text/plain")], b"")
        .map_err(io::Error::other)?;
    if r.status != 200 {
        return Err(io::Error::other(format!(
            "GET /metrics: status {}: {}",
            r.status,
            r.text()
        )));
    }
    Counters::from_exposition(&r.text(), transport.label())
        .map_err(|e| io::Error::other(format!("GET /metrics: {e}")))
}

/// The flags that only go together, checked before anything starts.
fn check_modes(a: &Args) -> io::Result<()> {
    let bad = |why: &str| Err(io::Error::other(why.to_string()));
    if a.names == 0 || a.senders == 0 || a.flows == 0 {
        return bad("--names, --senders and --flows must be at least 1");
    }
    if (a.passes > 0 || a.ledger.is_some()) && a.profile.is_none() {
        return bad("--passes and --ledger need --profile");
    }
    if a.ledger.is_some() && a.passes == 0 {
        return bad("--ledger needs --passes N: the ledger is exact for whole passes");
    }
    if a.passes > 0 && a.senders != 1 {
        return bad("--passes needs --senders 1 (use --flows for more source ports)");
    }
    if a.send_only && a.spawn {
        return bad("--send-only is for a server blast did not start; drop --spawn");
    }
    Ok(())
}

/// Runs a blast and returns its report.
fn run(a: &Args) -> io::Result<Report> {
    check_modes(a)?;
    let duration = match a.passes {
        0 => Duration::from_secs_f64(a.duration_secs.max(0.0)).min(MAX_DURATION),
        _ => MAX_DURATION,
    };
    let drain = Duration::from_secs_f64(a.drain_secs.max(0.0)).min(MAX_DRAIN);
    let (config, config_name) = config_of(a)?;
    let spawned = daemon_for(a, &config)?;
    let (udp, http) = match &spawned {
        Some(s) => (s.listening.udp.unwrap_or(a.udp), s.listening.http),
        None => (a.udp, a.http),
    };
    let (datagrams, book) = match a.profile {
        Some(p) => {
            let (d, w, pass) = profile_datagrams(a, p);
            (d, Some((w, pass)))
        }
        None => (
            render_datagrams(
                a.names,
                a.tags,
                a.kind,
                a.lines_per_datagram,
                a.max_datagram_bytes,
            ),
            None,
        ),
    };
    let per_datagram = datagrams.iter().map(|d| d.1).sum::<u64>() as f64 / datagrams.len() as f64;
    announce(&datagrams, per_datagram, udp, duration, a.rate);
    let start = match a.send_only {
        true => None,
        false => Some(Start::read(spawned.as_ref(), http, Transport::Udp)?),
    };
    let max_datagrams = match a.passes {
        0 => a.max_datagrams / a.senders as u64,
        n => n.saturating_mul(datagrams.len() as u64),
    };
    let pace = Pace {
        rate: a.rate as f64 / a.senders as f64,
        duration,
        max_datagrams: max_datagrams.max(1),
        gso: a.gso,
        flows: a.flows,
    };
    let mut report = Report {
        lines_per_datagram: per_datagram,
        config: if a.spawn {
            config_name
        } else {
            format!("the daemon's at {http}")
        },
        flows: a.senders * a.flows,
        names: a.names,
        send_only: a.send_only,
        ..Report::default()
    };
    for r in send_all(&datagrams, udp, a.senders, pace) {
        let s = r?;
        report.lines_sent += s.lines;
        report.datagrams_sent += s.datagrams;
        report.send_errors += s.errors;
        report.send_secs = report.send_secs.max(s.elapsed.as_secs_f64());
    }
    if let Some(start) = start {
        let e = start.settle(http, Transport::Udp, report.lines_sent, drain)?;
        (report.drain_secs, report.delta, report.rss) = (e.drain_secs, e.delta, e.rss);
        (report.daemon_cpu_secs, report.tool_cpu_secs) = (e.daemon_cpu_secs, e.tool_cpu_secs);
    }
    drop(spawned);
    if let (Some(path), Some((w, pass))) = (&a.ledger, &book) {
        write_ledger(path, a, w, pass, &report, datagrams.len() as u64)?;
    }
    Ok(report)
}

/// `--ledger`: what was sent, if it was every pass asked for.
fn write_ledger(
    path: &std::path::Path,
    a: &Args,
    w: &Workload,
    pass: &Ledger,
    report: &Report,
    per_pass: u64,
) -> io::Result<()> {
    let whole = report.datagrams_sent == a.passes * per_pass && report.send_errors == 0;
    if !whole {
        return Err(io::Error::other(format!(
            "sent {} datagrams with {} errors, not the {} of {} passes (the 120 s cap, or a failed send): the ledger would not be exact, so none was written to {}",
            report.datagrams_sent,
            report.send_errors,
            a.passes * per_pass,
            a.passes,
            path.display()
        )));
    }
    ledger::write(
        path,
        &ledger::Sent {
            profile: a.profile.unwrap_or(Profile::Counters),
            seed: a.seed,
            pack_pct: a.pack_pct,
            contexts: w.contexts(),
            pass,
            passes: a.passes,
            lines_sent: report.lines_sent,
            datagrams_sent: report.datagrams_sent,
            send_errors: report.send_errors,
            send_secs: report.send_secs,
        },
    )
}

/// With `--spawn`, the spawned daemon's OTLP/HTTP and HTTP addresses;
/// without, `--otlp-http` and `--http`.
fn otlp_addrs(a: &Args, spawned: &Option<Running>) -> io::Result<(SocketAddr, SocketAddr)> {
    match spawned {
        Some(s) => Ok((
            s.listening.otlp_http.ok_or_else(|| {
                io::Error::other("the spawned daemon listens on no OTLP/HTTP port")
            })?,
            s.listening.http,
        )),
        None => Ok((a.otlp_http, a.http)),
    }
}

/// Runs an OTLP blast and returns its report.
fn run_otlp(a: &Args) -> io::Result<OtlpReport> {
    if a.names == 0 || a.senders == 0 || a.per_metric == 0 || a.points_per_request == 0 {
        return Err(io::Error::other(
            "--names, --senders, --per-metric and --points-per-request must be at least 1",
        ));
    }
    let duration = Duration::from_secs_f64(a.duration_secs.max(0.0)).min(MAX_DURATION);
    let drain = Duration::from_secs_f64(a.drain_secs.max(0.0)).min(MAX_DRAIN);
    let shape = otlp::Shape {
        streams: a.names,
        per_metric: a.per_metric,
        per_request: a.points_per_request,
        gauge_pct: a.gauge_pct.min(100),
    };
    let clock = SystemClock::new();
    let bodies = otlp::encode_all(&shape, clock.now().as_nanos())?;
    if a.senders > bodies.len() {
        return Err(io::Error::other(format!(
            "--senders {} is more than the {} requests one pass takes: each sender owns its streams",
            a.senders,
            bodies.len()
        )));
    }
    let (config, config_name) = config_of(a)?;
    let spawned = daemon_for(a, &config)?;
    let (otlp_http, http) = otlp_addrs(a, &spawned)?;
    eprintln!(
        "blast: {} OTLP requests pre-encoded ({} points, {} metric names, up to {} bytes each); posting to {otlp_http} from {} connections for {:.1} s",
        bodies.len(),
        a.points_per_request,
        shape.metrics(),
        bodies.iter().map(|b| b.bytes.len()).max().unwrap_or(0),
        a.senders,
        duration.as_secs_f64(),
    );
    // Sender k owns requests k, k + senders, ...
    let mut owned: Vec<Vec<otlp::Body>> = (0..a.senders).map(|_| Vec::new()).collect();
    for (i, b) in bodies.into_iter().enumerate() {
        owned[i % a.senders].push(b);
    }
    let start = Start::read(spawned.as_ref(), http, Transport::Otlp)?;
    let pace = otlp::Pace {
        rate: a.rate as f64 / a.senders as f64,
        duration,
        max_requests: (a.max_requests / a.senders as u64).max(1),
    };
    let mut report = OtlpReport {
        config: if a.spawn {
            config_name
        } else {
            format!("the daemon's at {http}")
        },
        senders: a.senders,
        streams: a.names,
        points_per_request: a.points_per_request,
        gauge_pct: shape.gauge_pct,
        ..OtlpReport::default()
    };
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = owned
            .iter_mut()
            .map(|mine| s.spawn(move || otlp::sender(otlp_http, mine, pace)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("OTLP sender panicked")))
            })
            .collect::<Vec<_>>()
    });
    for r in results {
        let s = r?;
        report.requests_sent += s.requests;
        report.points_sent += s.points;
        report.requests_failed += s.failed;
        report.points_refused += s.refused;
        report.send_secs = report.send_secs.max(s.elapsed.as_secs_f64());
        if report.first_error.is_none() {
            report.first_error = s.first_error;
        }
    }
    let e = start.settle(http, Transport::Otlp, report.points_sent, drain)?;
    (report.drain_secs, report.delta, report.rss) = (e.drain_secs, e.delta, e.rss);
    (report.daemon_cpu_secs, report.tool_cpu_secs) = (e.daemon_cpu_secs, e.tool_cpu_secs);
    drop(spawned);
    Ok(report)
}

/// Runs `--probe N` over `--transport`; its report.
fn run_probe(a: &Args) -> io::Result<String> {
    let (config, config_name) = config_of(a)?;
    let spawned = daemon_for(a, &config)?;
    let target = match a.transport {
        Transport::Otlp => probe::Target::Otlp(otlp_addrs(a, &spawned)?.0),
        Transport::Udp => probe::Target::Udp(
            spawned
                .as_ref()
                .and_then(|s| s.listening.udp)
                .unwrap_or(a.udp),
        ),
    };
    let http = spawned.as_ref().map_or(a.http, |s| s.listening.http);
    let latencies = probe::probe(target, http, a.probe.min(10_000))?;
    Ok(latencies.render(&if a.spawn {
        config_name
    } else {
        format!("the daemon's at {http}")
    }))
}

/// The daemon's config (`--config` with its listeners moved, or blast's
/// own) and how the report names it.
fn config_of(a: &Args) -> io::Result<(String, String)> {
    let Some(path) = &a.config else {
        return Ok((
            own_config(
                a.daemon_readers.unwrap_or(2),
                a.daemon_workers.unwrap_or(2),
                a.names,
            ),
            "blast's own (no --config)".to_string(),
        ));
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        io::Error::other(format!("--config {}: cannot read it: {e}", path.display()))
    })?;
    Ok((
        file_config(path, &text, a.daemon_readers, a.daemon_workers)?,
        format!("{} (listeners moved to free ports)", path.display()),
    ))
}

/// With `--spawn`, the daemon started on `config`; without, none (and
/// `--config` is refused: a running daemon's config is its own).
fn daemon_for(a: &Args, config: &str) -> io::Result<Option<Running>> {
    if a.spawn {
        Ok(Some(spawn_daemon(daemon_bin(a)?, config)?))
    } else if a.config.is_some() {
        Err(io::Error::other(
            "--config needs --spawn (a running daemon's config is its own)",
        ))
    } else {
        Ok(None)
    }
}

/// What is about to be sent, on stderr.
fn announce(
    datagrams: &[(Vec<u8>, u64)],
    per_datagram: f64,
    udp: SocketAddr,
    duration: Duration,
    rate: u64,
) {
    eprintln!(
        "blast: {} datagrams pre-rendered ({per_datagram:.1} lines, up to {} bytes each); sending to {udp} for {:.1} s, {}",
        datagrams.len(),
        datagrams.iter().map(|d| d.0.len()).max().unwrap_or(0),
        duration.as_secs_f64(),
        if rate == 0 { "as fast as possible".to_string() } else { format!("{rate} lines/s") }
    );
}

/// The datagrams of `--profile p`: `--profile-lines` lines over `--names`
/// contexts, seeded; what one pass sends of each type goes to stderr.
fn profile_datagrams(a: &Args, p: Profile) -> (Vec<(Vec<u8>, u64)>, Workload, Ledger) {
    let mut w = match a.tags {
        0 => Workload::new(p, a.names, a.seed),
        n => Workload::with_max_tags(p, a.names, a.seed, n as u64),
    }
    .with_packed(a.pack_pct / 100.0);
    let mut ledger = Ledger::default();
    let datagrams = w.datagrams(a.profile_lines.max(1), a.max_datagram_bytes, &mut ledger);
    let by_kind: Vec<String> = Kind::ALL
        .iter()
        .map(|&k| (k, ledger.lines_of(w.contexts(), k)))
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k:?} {n}"))
        .collect();
    eprintln!(
        "blast: profile {p:?} (seed {}), {} contexts; one pass of {} lines: {}",
        a.seed,
        w.contexts().len(),
        a.profile_lines.max(1),
        by_kind.join(", ")
    );
    (datagrams, w, ledger)
}

/// `senders` threads, each sending `datagrams` from its own offset at
/// `pace`; what each sent.
fn send_all(
    datagrams: &[(Vec<u8>, u64)],
    udp: SocketAddr,
    senders: usize,
    pace: Pace,
) -> Vec<io::Result<Sent>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..senders)
            .map(|k| {
                let offset = k * datagrams.len() / senders;
                s.spawn(move || sender(udp, datagrams, offset, pace))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("sender panicked")))
            })
            .collect()
    })
}

/// Waits, bounded by `drain`, until every line `sent` is counted (from
/// `before`) or the count stops moving (three reads alike, 100 ms apart):
/// the last counters, and when they last moved.
/// What a run reads of the daemon and of this process before sending.
struct Start {
    pid: Option<String>,
    before: Counters,
    rss: Option<u64>,
    daemon_cpu: Option<f64>,
    tool_cpu: Option<f64>,
}

/// What the daemon did over a run, read once what was sent has settled.
struct Settled {
    drain_secs: f64,
    delta: Counters,
    rss: Option<(u64, u64)>,
    daemon_cpu_secs: Option<f64>,
    tool_cpu_secs: Option<f64>,
}

impl Start {
    /// The counters of `transport` at `http`, and the spawned daemon's
    /// memory and CPU, before a run.
    fn read(
        spawned: Option<&Running>,
        http: SocketAddr,
        transport: Transport,
    ) -> io::Result<Start> {
        let before = read_counters(http, transport)?;
        let pid = spawned.map(|s| s.pid().to_string());
        Ok(Start {
            rss: pid.as_deref().and_then(rss_bytes),
            daemon_cpu: pid.as_deref().and_then(cpu_secs),
            tool_cpu: cpu_secs("self"),
            pid,
            before,
        })
    }

    /// Waits for the `sent` lines or points to be counted (at most
    /// `drain`), then reads what changed.
    fn settle(
        self,
        http: SocketAddr,
        transport: Transport,
        sent: u64,
        drain: Duration,
    ) -> io::Result<Settled> {
        let rss_after = rss_settled(self.pid.as_deref());
        let (after, settled_at) = drained(http, transport, self.before, sent, drain)?;
        let since = |now: Option<f64>, then: Option<f64>| now.zip(then).map(|(b, a)| b - a);
        Ok(Settled {
            drain_secs: settled_at.as_secs_f64(),
            delta: after.minus(self.before),
            rss: self.rss.zip(rss_after),
            daemon_cpu_secs: since(self.pid.as_deref().and_then(cpu_secs), self.daemon_cpu),
            tool_cpu_secs: since(cpu_secs("self"), self.tool_cpu),
        })
    }
}

fn drained(
    http: SocketAddr,
    transport: Transport,
    before: Counters,
    sent: u64,
    drain: Duration,
) -> io::Result<(Counters, Duration)> {
    let clock = SystemClock::new();
    let drain_start = clock.now();
    let mut after = read_counters(http, transport)?;
    let mut settled_at = since(&clock, drain_start);
    let mut still = 0;
    while after.lines - before.lines < sent as f64
        && still < 3
        && since(&clock, drain_start) < drain
    {
        std::thread::sleep(Duration::from_millis(100));
        let next = read_counters(http, transport)?;
        if next == after {
            still += 1;
        } else {
            still = 0;
            settled_at = since(&clock, drain_start);
        }
        after = next;
    }
    Ok((after, settled_at))
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;
    use std::path::Path;

    use super::*;

    /// The shipped config.toml, as --config reads it: listeners moved,
    /// everything else kept.
    #[test]
    fn a_config_file_keeps_everything_but_its_listeners() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config.toml"));
        let text = std::fs::read_to_string(path).unwrap();
        let out = file_config(path, &text, None, Some(0)).unwrap();
        let doc: toml::Table = out.parse().unwrap();
        let listen = doc["listen"].as_table().unwrap();
        assert_eq!(listen["statsd_udp"].as_str(), Some("127.0.0.1:0"));
        assert_eq!(listen["http"].as_str(), Some("127.0.0.1:0"));
        assert_eq!(listen["statsd_tcp"].as_str(), Some(""));
        assert_eq!(listen["statsd_unix"].as_str(), Some(""));
        // The file's own keys stay: its windows, mappings, limits, readers.
        let orig: toml::Table = text.parse().unwrap();
        for key in ["windows", "mappings", "limits", "breakers", "series"] {
            assert_eq!(doc.get(key), orig.get(key), "{key}");
        }
        let ingest = doc["ingest"].as_table().unwrap();
        assert_eq!(
            ingest["udp_readers"],
            orig["ingest"].as_table().unwrap()["udp_readers"]
        );
        assert_eq!(ingest["udp_workers"].as_integer(), Some(0));
        assert_eq!(
            listen["statsd_unix_mode"],
            orig["listen"].as_table().unwrap()["statsd_unix_mode"]
        );
    }

    #[test]
    fn https_and_broken_files_are_refused_with_the_file_named() {
        let p = Path::new("x.toml");
        let e = file_config(p, "[http.tls]\ncert_file = \"a\"\n", None, None).unwrap_err();
        assert!(
            e.to_string().contains("x.toml") && e.to_string().contains("tls"),
            "{e}"
        );
        let e = file_config(p, "listen = 3\n", None, None).unwrap_err();
        assert!(e.to_string().contains("not a table"), "{e}");
        assert!(file_config(p, "[listen\n", None, None).is_err());
    }

    #[test]
    fn a_sender_uses_its_flows_in_turn() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let d = render_datagrams(10, 0, Kind::Counter, 1, 1432);
        let pace = Pace {
            rate: 0.0,
            duration: Duration::from_secs(5),
            max_datagrams: 32,
            gso: false,
            flows: 4,
        };
        let sent = sender(rx.local_addr().unwrap(), &d, 0, pace).unwrap();
        assert_eq!(sent.datagrams, 32);
        let mut from = std::collections::BTreeMap::new();
        let mut buf = [0u8; 2048];
        for _ in 0..32 {
            let (_, src) = rx.recv_from(&mut buf).unwrap();
            *from.entry(src.port()).or_insert(0) += 1;
        }
        assert_eq!(from.len(), 4, "{from:?}");
        assert!(from.values().all(|&n| n == 8), "{from:?}");
    }
}
