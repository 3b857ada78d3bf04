//! `rollstat check-config FILE`: every problem the file has, or a summary
//! of what it sets up and the warnings that belong to the host.

use std::path::Path;
use std::process::ExitCode;

use rollstat::config::{exposure, Config, ConfigError};
use rollstat::daemon;
use rollstat::series::footprint::{self, Footprint};
use rollstat::tls::{ClientAuth, TlsConfig};

use super::report;

pub fn run(file: &Path) -> ExitCode {
    let cfg = match load(file) {
        Ok(cfg) => cfg,
        Err(e) => {
            report(&e);
            return ExitCode::from(2);
        }
    };
    let problems = built_problems(&cfg);
    if !problems.is_empty() {
        let file = file.display();
        eprintln!("error: {} problem(s) in {file}:", problems.len());
        for p in &problems {
            eprintln!("  {file}: {p}");
        }
        return ExitCode::from(2);
    }
    print_summary(file, &cfg);
    print_statsd_exporter(file, &cfg);
    if let Some(tls) = &cfg.http.tls {
        print_tls(file, &cfg, tls);
    }
    warn_fd_limit(file, &cfg);
    print_memory(file, &cfg);
    ExitCode::SUCCESS
}

/// The file read; what only this host can tell (the Unix socket's group,
/// what sits at its path) is a problem like the file's own.
fn load(file: &Path) -> Result<Config, ConfigError> {
    let cfg = Config::load(file)?;
    let problems = daemon::check_listeners(&cfg);
    if problems.is_empty() {
        Ok(cfg)
    } else {
        Err(ConfigError {
            path: Some(file.to_path_buf()),
            problems,
            refusal: None,
        })
    }
}

/// What only building them tells (nothing is connected): the reader saw
/// the [http.tls] and [rls.tls] files readable, but whether they hold a certificate
/// chain and the key that matches it is known only by building the
/// server's TLS settings; the Redis client and rustls may still refuse
/// [redis] (a CA file rustls cannot read, a client key that does not match
/// its certificate).
fn built_problems(cfg: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    let rls_tls = cfg.rls.as_ref().and_then(|r| r.tls.as_ref());
    for tls in cfg.http.tls.iter().chain(rls_tls) {
        if let Err(e) = rollstat::tls::server_config(tls) {
            problems.push(e.to_string());
        }
    }
    if let Some(Err(e)) = cfg.redis.as_ref().map(rollstat::store::check) {
        problems.push(e.to_string());
    }
    problems
}

fn print_summary(file: &Path, cfg: &Config) {
    println!(
        "{}: ok ({} window(s), {} mapping rule(s))",
        file.display(),
        cfg.windows.len(),
        cfg.mappings.len()
    );
    println!("{}", exposure::summary(cfg));
    println!("{}", cfg.names_summary());
    println!("{}", cfg.native_histograms_summary());
    for w in exposure::warnings(cfg) {
        eprintln!("{}: warning: {w}", file.display());
    }
}

fn print_statsd_exporter(file: &Path, cfg: &Config) {
    let Some(se) = &cfg.statsd_exporter else {
        return;
    };
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

fn print_tls(file: &Path, cfg: &Config, tls: &TlsConfig) {
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

/// A warning, not an error: the limit belongs to where the daemon runs,
/// which may differ from here.
fn warn_fd_limit(file: &Path, cfg: &Config) {
    match rollstat::fdlimit::check(cfg) {
        Ok(None) => {}
        Ok(Some(s)) => eprintln!("{}: warning: {s}", file.display()),
        Err(e) => eprintln!("{}: warning: {e}", file.display()),
    }
}

/// The worst-case memory per series, the budget, and a warning when the
/// worst case is more than this host has.
fn print_memory(file: &Path, cfg: &Config) {
    let footprint = Footprint::of(cfg.series_settings());
    println!("{}", footprint.report());
    let machine = rollstat::host::memory_total_bytes();
    let budget = footprint::registry_budget(&cfg.series, machine);
    if let Some((memory, from)) = budget {
        let line = footprint.budget_report(memory, from);
        if footprint.sketch_budget(memory).is_some() {
            println!("{line}");
        } else {
            eprintln!("{}: warning: {line}", file.display());
        }
    }
    if let Some(total) = machine {
        let worst = budget.map_or(footprint.worst_total(), |(m, _)| footprint.worst_within(m));
        warn_machine_memory(file, cfg, &footprint, worst, total);
    }
}

/// A warning, for the same reason as the open-file limit's: memory belongs
/// to where the daemon runs.
fn warn_machine_memory(file: &Path, cfg: &Config, footprint: &Footprint, worst: u64, total: u64) {
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
