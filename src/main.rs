//! The `rollstat` binary: command line, logging, then `daemon::run`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use rollstat::config::{ClientAuth, Config};
use rollstat::daemon::{self, Listeners};
use rollstat::error::Causes;
use rollstat::series::footprint::{self, Footprint};
use rollstat::SystemClock;

/// `rollstat --version`: the version, the git commit and the build profile
/// (build.rs), e.g. `rollstat 0.1.0 (commit 1a2b3c4d5e6f, release build)`.
const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ROLLSTAT_GIT_COMMIT"),
    ", ",
    env!("ROLLSTAT_BUILD_PROFILE"),
    " build)"
);

/// Real-time statsd aggregator with rolling windows, breaker signals and
/// sliding-window rate limits, served on Prometheus /metrics and a JSON API.
#[derive(Parser)]
#[command(name = "rollstat", version = VERSION_LINE, about, long_about = None)]
struct Cli {
    /// Config file (see the sample config.toml). Without it, built-in
    /// defaults: statsd on 127.0.0.1:8125 (UDP and TCP), HTTP on 127.0.0.1:9102.
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log filter, e.g. `info`, `debug`, `rollstat=debug` (or RUST_LOG).
    #[arg(long, default_value = "info", value_name = "FILTER")]
    log: String,
    /// Log line format on stderr: `text` for people, `json` for log
    /// shippers (one JSON object per line: timestamp, level, target, fields
    /// with the message).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, value_name = "FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a config file; print every problem and exit non-zero if any.
    CheckConfig {
        /// The file to check.
        file: PathBuf,
    },
    /// Print a statsd_exporter mapping file (YAML) as config.toml
    /// `[[mappings]]` rules with the same meaning, or its problems.
    ConvertMapping {
        /// The statsd_exporter mapping file.
        file: PathBuf,
    },
    /// Health check for containers (no curl needed): GET a URL over plain
    /// HTTP; exit 0 on a 2xx answer, 1 otherwise with the reason on stderr.
    Probe {
        /// The URL to GET (http:// only).
        #[arg(long, default_value = rollstat::probe::DEFAULT_URL)]
        url: String,
        /// Give up after this long in all (connect, send, status line).
        #[arg(long, default_value_t = 2000, value_name = "MS")]
        timeout_ms: u64,
    },
    /// Print a shell completion script to stdout, e.g.
    /// `rollstat completions bash > /etc/bash_completion.d/rollstat`.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout, e.g.
    /// `rollstat man > /usr/local/share/man/man1/rollstat.1`.
    Man,
}

/// `--log-format`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// One human-readable line per event (colour on a terminal).
    Text,
    /// One JSON object per line.
    Json,
}

/// Set once logging is JSON: errors that stop the daemon are then logged
/// as JSON too, so that every stderr line parses.
static JSON_LOGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::ConvertMapping { file }) = &cli.command {
        return convert_mapping(file);
    }
    if let Some(Command::Probe { url, timeout_ms }) = &cli.command {
        return match rollstat::probe::probe(url, std::time::Duration::from_millis(*timeout_ms)) {
            Ok(code) => {
                println!("{url}: HTTP {code}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        };
    }
    match &cli.command {
        Some(Command::Completions { shell }) => {
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "rollstat",
                &mut std::io::stdout(),
            );
            return ExitCode::SUCCESS;
        }
        Some(Command::Man) => {
            return match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: cannot write the man page to stdout: {e}");
                    ExitCode::from(1)
                }
            };
        }
        _ => {}
    }
    if let Some(Command::CheckConfig { file }) = &cli.command {
        // What only this host can tell (the Unix socket's group, what sits
        // at its path) is a problem like the file's own.
        let loaded = Config::load(file).and_then(|cfg| {
            let problems = daemon::check_listeners(&cfg);
            if problems.is_empty() {
                Ok(cfg)
            } else {
                Err(rollstat::config::ConfigError {
                    path: Some(file.clone()),
                    problems,
                    refusal: None,
                })
            }
        });
        return match loaded {
            Ok(cfg) => {
                // What only building them tells (nothing is connected): the
                // reader saw the [http.tls] files readable, but whether they
                // hold a certificate chain and the key that matches it is
                // known only by building the server's TLS settings; the Redis
                // client and rustls may still refuse [redis] (a CA file
                // rustls cannot read, a client key that does not match its
                // certificate).
                let mut problems = Vec::new();
                if let Some(Err(e)) = cfg.http.tls.as_ref().map(rollstat::tls::server_config) {
                    problems.push(e.to_string());
                }
                if let Some(Err(e)) = cfg.redis.as_ref().map(rollstat::store::check) {
                    problems.push(e.to_string());
                }
                if !problems.is_empty() {
                    let file = file.display();
                    eprintln!("error: {} problem(s) in {file}:", problems.len());
                    for p in &problems {
                        eprintln!("  {file}: {p}");
                    }
                    return ExitCode::from(2);
                }
                println!(
                    "{}: ok ({} window(s), {} mapping rule(s))",
                    file.display(),
                    cfg.windows.len(),
                    cfg.mappings.len()
                );
                println!("{}", rollstat::config::exposure::summary(&cfg));
                println!("{}", cfg.names_summary());
                println!("{}", cfg.native_histograms_summary());
                for w in rollstat::config::exposure::warnings(&cfg) {
                    eprintln!("{}: warning: {w}", file.display());
                }
                if let Some(se) = &cfg.statsd_exporter {
                    println!(
                        "{}: statsd_exporter mapping file {}: {} rule(s), tried after the file's own [[mappings]]",
                        file.display(),
                        se.path.display(),
                        se.rules
                    );
                    for w in &se.warnings {
                        eprintln!("{}: warning: {}: {w}", file.display(), se.path.display());
                    }
                }
                if let Some(tls) = &cfg.http.tls {
                    let clients = match (&tls.client_ca_file, tls.client_auth) {
                        (None, _) => "no client certificate asked".to_string(),
                        (Some(ca), auth) => format!(
                            "client certificates signed by {} {}",
                            ca.display(),
                            match auth {
                                ClientAuth::Require => "required",
                                ClientAuth::Optional => "verified if given",
                            }
                        ),
                    };
                    println!(
                        "{}: HTTPS on {} ({} or later): the key matches the certificate of {}; {clients}",
                        file.display(),
                        cfg.listen.http,
                        tls.min_version.as_str(),
                        tls.cert_file.display(),
                    );
                }
                // A warning, not an error: the limit belongs to where the
                // daemon runs, which may differ from here.
                match rollstat::fdlimit::check(&cfg) {
                    Ok(None) => {}
                    Ok(Some(s)) => eprintln!("{}: warning: {s}", file.display()),
                    Err(e) => eprintln!("{}: warning: {e}", file.display()),
                }
                let footprint = Footprint::of(&cfg);
                println!("{}", footprint.report());
                let machine = rollstat::host::memory_total_bytes();
                let budget = footprint::registry_budget(&cfg, machine);
                if let Some((memory, from)) = budget {
                    let line = footprint.budget_report(memory, from);
                    if footprint.sketch_budget(memory).is_some() {
                        println!("{line}");
                    } else {
                        eprintln!("{}: warning: {line}", file.display());
                    }
                }
                // A warning, for the same reason: memory belongs to where
                // the daemon runs.
                if let Some(total) = machine {
                    let worst =
                        budget.map_or(footprint.worst_total(), |(m, _)| footprint.worst_within(m));
                    if footprint.worst_counters() > total {
                        eprintln!(
                            "{}: warning: series.max_series = {} counter series at their caps could take {}, more than this machine's {}; lower series.max_series or series.max_label_bytes",
                            file.display(),
                            cfg.series.max_series,
                            footprint::bytes(footprint.worst_counters()),
                            footprint::bytes(total)
                        );
                    } else if worst > total {
                        eprintln!(
                            "{}: warning: the worst case ({}) is more than this machine's {}: lower series.max_memory_bytes, series.max_series or series.max_series_per_metric",
                            file.display(),
                            footprint::bytes(worst),
                            footprint::bytes(total)
                        );
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                report(&e);
                ExitCode::from(2)
            }
        };
    }
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&cli.log))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // rustls logs at `warn` what a TLS client sends (a warning alert, an
    // unexpected message): a line per connection anyone can open. Unless
    // the filter names rustls itself, only its errors are logged (traffic
    // keys exhausted, nothing a peer can cause); rollstat counts failed
    // handshakes and logs them at debug.
    let filter = if filter.to_string().contains("rustls") {
        filter
    } else {
        filter.add_directive(RUSTLS_LOGS.parse().expect("a valid directive"))
    };
    match cli.log_format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            // Colour only for a terminal, not for log files and journald.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => {
            tracing_subscriber::fmt()
                .json()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .init();
            JSON_LOGS.store(true, std::sync::atomic::Ordering::Relaxed);
            // A panic (the supervisor restarts the task) as a JSON line
            // too, instead of the default hook's plain text.
            std::panic::set_hook(Box::new(|info| {
                let thread = std::thread::current();
                tracing::error!(
                    thread = thread.name().unwrap_or("unnamed"),
                    panic = %info,
                    "A thread panicked."
                );
            }));
        }
    }

    let cfg = match &cli.config {
        Some(path) => match Config::load(path) {
            Ok(c) => c,
            Err(e) => {
                report(&e);
                return ExitCode::from(2);
            }
        },
        None => Config::default(),
    };
    // Before binding: every connection the caps allow needs a descriptor.
    rollstat::fdlimit::raise_at_start(&cfg);
    let listeners = match Listeners::bind(&cfg) {
        Ok(l) => l,
        Err(e) => {
            report(&e);
            return ExitCode::from(1);
        }
    };
    // A relay to one of the sockets just bound would feed itself without
    // end: refused before anything starts (the names resolved).
    let loops = daemon::relay_loops(&cfg, &listeners.own());
    if !loops.is_empty() {
        report(&rollstat::config::ConfigError {
            path: cli.config.clone(),
            problems: loops,
            refusal: None,
        });
        return ExitCode::from(2);
    }
    // The bound addresses, for the ready line below.
    let bound = listeners.bound();
    let addresses = bound.describe();
    let log_format = cli.log_format;

    // The integration tests' fault hook (src/ingest/fault.rs), read once
    // here: only whoever starts the process can set it.
    let faults = match std::env::var(rollstat::ingest::fault::ENV) {
        Ok(v) => match rollstat::ingest::fault::Faults::parse(&v) {
            Ok(f) => f,
            Err(e) => {
                report(&e);
                return ExitCode::from(1);
            }
        },
        Err(_) => rollstat::ingest::fault::Faults::none(),
    };
    if faults.any() {
        tracing::warn!(
            faults = %std::env::var(rollstat::ingest::fault::ENV).unwrap_or_default(),
            "Test faults are injected ({}): this daemon will panic on purpose. Unset it outside tests.",
            rollstat::ingest::fault::ENV
        );
    }
    // The sketches' share of the registry's memory budget.
    let sketch_limit = footprint::sketch_limit(&cfg, rollstat::host::memory_total_bytes());
    rollstat::sketch::budget::process().set_limit(sketch_limit);
    if sketch_limit == Some(0) {
        tracing::warn!("The series at series.max_series need the whole memory budget before any sketch grows: every timer, histogram, distribution and set value past a bucket's first four is coarsened (rollstat check-config says by how much). Raise series.max_memory_bytes or lower series.max_series.");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            report(&RuntimeError(e));
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(daemon::run(
        cfg,
        cli.config.clone(),
        listeners,
        Arc::new(SystemClock::new()),
        faults,
        // Once the state is built: tests and scripts read this line to
        // learn the bound ports, and may send at once.
        || {
            ready_line(&bound, log_format);
            tracing::info!(addresses = %addresses, "rollstat started.");
        },
        shutdown_signal(),
    ));
    // A reload stuck reading a file (a hung network mount) holds a
    // blocking thread; the stop has drained everything else by now.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(&e);
            ExitCode::from(1)
        }
    }
}

/// The ready line on stdout, which tests and scripts read to learn the
/// bound ports: `rollstat listening statsd_udp=A ... http=C` in text, and
/// under `--log-format json` one JSON object shaped like the log lines
/// (`fields.message` is "rollstat listening", one field per listener), so
/// that a merged stdout + stderr is JSON throughout. Printed whatever the
/// `--log` filter.
fn ready_line(bound: &daemon::Bound, format: LogFormat) {
    use std::io::Write;
    if format == LogFormat::Text {
        println!("rollstat listening {}", bound.describe());
        return;
    }
    let stdout = tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stdout)
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(stdout, || {
        tracing::info!(
            target: "rollstat",
            statsd_udp = bound.statsd_udp.as_deref(),
            statsd_tcp = bound.statsd_tcp.as_deref(),
            statsd_unix = bound.statsd_unix.as_deref(),
            http = bound.http.as_deref(),
            "rollstat listening"
        );
    });
    let _ = std::io::stdout().flush();
}

/// The log directive for rustls unless the filter names it: see `main`.
const RUSTLS_LOGS: &str = "rustls=error";

/// Prints `e` to stderr with every cause under it, one per line
/// (`error: ...` then `  caused by: ...`): the one way the binary reports an
/// error that stops it.
/// Under `--log-format json`, the same text as one JSON log line.
fn report(e: &(dyn std::error::Error + 'static)) {
    if JSON_LOGS.load(std::sync::atomic::Ordering::Relaxed) {
        tracing::error!(error = %Causes(e), "rollstat stopped on an error.");
    } else {
        eprintln!("error: {}", Causes(e));
    }
}

/// The async runtime could not be built.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot start the async runtime (tokio); check this process's limits on threads and memory"
)]
struct RuntimeError(#[source] std::io::Error);

/// Ctrl-C or SIGTERM. A second one while the graceful stop is still
/// running (it waits up to 5 s for open HTTP connections, and for the
/// receivers to drain) exits at once, with status 1.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    // Both streams exist from here on, so that a signal between the first
    // and the watcher below is not missed.
    let listen = |kind: SignalKind, name: &str| match signal(kind) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "Cannot listen for {name}; it will not stop rollstat.");
            None
        }
    };
    let mut signals = [
        listen(SignalKind::terminate(), "SIGTERM"),
        listen(SignalKind::interrupt(), "SIGINT (Ctrl-C)"),
    ];
    stop_requested(&mut signals).await;
    tokio::spawn(async move {
        stop_requested(&mut signals).await;
        tracing::warn!("A second stop signal: exiting now, without finishing the graceful stop.");
        std::process::exit(1);
    });
}

/// The next SIGTERM or SIGINT.
async fn stop_requested(signals: &mut [Option<tokio::signal::unix::Signal>; 2]) {
    async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
        match s {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    let [term, int] = signals;
    tokio::select! {
        _ = next(term) => {}
        _ = next(int) => {}
    }
}

/// `rollstat convert-mapping FILE`: the rules on stdout, or every problem
/// (with the file's line) on stderr and exit status 2.
fn convert_mapping(file: &std::path::Path) -> ExitCode {
    use rollstat::config::statsd_exporter;
    let text = match rollstat::config::file::read_text(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    match statsd_exporter::parse(&text) {
        Ok(rules) => {
            // A rule whose templates do not compile is a problem too.
            let bad: Vec<String> = rules
                .rules
                .iter()
                .filter_map(|r| {
                    r.to_mapping()
                        .err()
                        .map(|e| format!("  {}:{}: {e}", file.display(), r.line))
                })
                .collect();
            if !bad.is_empty() {
                eprintln!("error: {} problem(s) in {}:", bad.len(), file.display());
                for b in bad {
                    eprintln!("{b}");
                }
                return ExitCode::from(2);
            }
            print!("{}", rules.to_toml(file));
            for w in &rules.warnings {
                eprintln!("{}: warning: {w}", file.display());
            }
            ExitCode::SUCCESS
        }
        Err(problems) => {
            eprintln!(
                "error: {} problem(s) in {}:",
                problems.len(),
                file.display()
            );
            for p in problems {
                eprintln!(
                    "  {}:{}: `{}`: {}",
                    file.display(),
                    p.line,
                    p.key,
                    p.message
                );
            }
            ExitCode::from(2)
        }
    }
}
