//! Config reloads (SIGHUP and `POST /-/reload`): a bad file keeps the old
//! config in force, says why, and sets the last-reload-success gauge to 0.
//!
//! Reloads run one at a time: the config lock is taken before the file is
//! read and held until the series are re-planned, so a SIGHUP and a
//! `POST /-/reload` at once never mix two file reads, and the second builds
//! on what the first applied.
//!
//! # What a reload keeps
//!
//! * **Limits** (service/limits.rs): an unchanged limit is kept as it is.
//!   A limit whose definition changes keeps every key's history,
//!   re-evaluated under the new rules (the limit module's "Rules that
//!   change"): the exact log keeps the `(t, weight)` entries of its old
//!   longest window that lie inside each new window; the approximate
//!   counter keeps a rule's fixed windows where its window is unchanged and
//!   re-bases a rule with a new window on the nearest old rule's estimate
//!   (rounded up, counted in the new current fixed window); log → counter
//!   sums the entries into fixed windows; counter → log stamps each fixed
//!   window's count at the latest time it could have happened. The most
//!   recently used keys up to a new `max_keys` (the rest counted as evicted,
//!   cause `cap`); the decision and key counters go on. Shared limits keep
//!   their Redis history (keys name the window, not `max`).
//! * **Breakers** (service/breakers.rs): same kind, other parameters: the
//!   state (open stays open from the same instant, half-open keeps its
//!   trials), window counts, transitions, pending statsd counts and debt are
//!   kept and the new thresholds apply from the next decision or tick; a new
//!   window shape moves each bucket to the new slot holding its start
//!   ([`RollingWindow::rebucketed`](crate::window::RollingWindow::rebucketed)).
//!   A new kind (sre <-> error_rate) starts fresh.
//! * **Series windows** ([`Registry::replan`]): a window whose name and shape
//!   (buckets, interval, ignore_current) are unchanged keeps its buckets
//!   and the time it is watched from; a new, renamed or reshaped window
//!   starts empty on the epoch grid at the reload, watched from then.
//! * **Series**: kept, given their new windows (cumulative values and
//!   histogram bounds kept), or removed if the new rules drop, rename or
//!   relabel them (the next line starts them fresh). New windows, mappings,
//!   quantiles, histogram buckets, TTL and the series cap apply to series
//!   created afterwards.
//! * **Access**: `allowed_hosts`, `allowed_origins`, `[http.auth.*]` and the
//!   credentials files they name (read again) are taken at once.
//! * **TLS**: `[http.tls]` is taken at every reload: its files
//!   (certificate, key, client CAs) are read again and the next connections
//!   use them; files that are bad fail the whole reload (the certificate in
//!   use stays, as the rest of the config does). Turning HTTPS on or off
//!   needs a restart, and the reload log says so.
//! * **Restart only**: `[listen]`, `[ingest]` (limits and `tag_styles`), the
//!   rest of `[http]` (deadlines and caps), `[redis]` and `[[relay]]`. A reload whose file
//!   differs there from the config the daemon started with says so in its
//!   log and in its answer ([`Reloaded::needs_restart`]; `POST /-/reload`
//!   prints it after "config reloaded"), at every reload until a restart. A
//!   `[redis]` the Redis client could not be built from (what `check-config`
//!   and the start refuse) fails the reload.
//!
//! Requests a limit decides, and outcomes the breaker ticker records,
//! between the copy of the old state and the switch to the new one are
//! decided by the old generation and not carried.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::access::AccessHandle;
use crate::clock::Clock;
use crate::config::{Config, ConfigError};
use crate::error::Causes;
use crate::http::HttpLimits;
use crate::rls::service::RlsHandle;
use crate::series::Registry;
use crate::service::{ServiceError, ServiceHandle, Services};
use crate::telemetry::Telemetry;
use crate::tls::{ServerTls, TlsError};

/// Why a reload was refused; the previous config stays in force.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file cannot be read, or has problems (every one is listed).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The file reads well, but a breaker or limit cannot be built from it.
    #[error("{}: the config reads well, but its breakers and limits cannot be built", path.display())]
    Services {
        /// The config file.
        path: PathBuf,
        /// Which entry, and why.
        #[source]
        source: ServiceError,
    },
    /// The file reads well, but the Redis client of its `[redis]` cannot be
    /// built (the daemon could not start with it).
    #[error("{}: the config reads well, but the daemon could not start with its [redis]", path.display())]
    Redis {
        /// The config file.
        path: PathBuf,
        /// What the client refuses.
        #[source]
        source: crate::store::StoreSetupError,
    },
    /// The file reads well, but the files of its `[http.tls]` (or
    /// `[rls.tls]`) cannot be used; the certificates in use stay.
    #[error("{}: the config reads well, but the files of its [{section}] cannot be used; the certificates in use stay", path.display())]
    Tls {
        /// The config file.
        path: PathBuf,
        /// `http.tls` or `rls.tls`.
        section: &'static str,
        /// Which file, and why.
        #[source]
        source: TlsError,
    },
}

/// Every reason [`ReloadError::reason`] gives, so each is published at 0
/// before the first refusal.
pub const REFUSAL_REASONS: [&str; 11] = [
    "invalid",
    "syntax",
    "unreadable",
    "not_regular",
    "too_large",
    "not_utf8",
    "too_deep",
    "alias_budget",
    "services",
    "redis",
    "tls",
];

impl ReloadError {
    /// The stable reason `rollstat_config_reload_refusals_total` counts
    /// this refusal under (one of [`REFUSAL_REASONS`]).
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            ReloadError::Config(e) => e.reason(),
            ReloadError::Services { .. } => "services",
            ReloadError::Redis { .. } => "redis",
            ReloadError::Tls { .. } => "tls",
        }
    }
}

/// What a reload applied: everything but the sections that need a restart.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// What the file changes that takes effect only after a restart, one
    /// sentence each (e.g. a changed `[redis]`), compared with the config
    /// the daemon started with.
    pub needs_restart: Vec<&'static str>,
}

impl crate::http::Reload for Reloader {
    fn reload_config(&self) -> Result<Vec<&'static str>, Box<dyn std::error::Error + Send + Sync>> {
        self.reload().map(|r| r.needs_restart).map_err(Into::into)
    }
}

/// Reloads the config file into the registry.
pub struct Reloader {
    path: Option<PathBuf>,
    registry: Arc<Registry>,
    telemetry: Arc<Telemetry>,
    services: Arc<ServiceHandle>,
    clock: Arc<dyn Clock>,
    access: Arc<AccessHandle>,
    /// The config in force. Its lock is held for a whole reload, from
    /// reading the file to the replan, so reloads run one at a time (a
    /// SIGHUP and a `POST /-/reload` at once never mix two file reads).
    current: Mutex<Config>,
    /// The config the daemon started with: what the restart-only sections
    /// still run on.
    started: Config,
    /// The HTTP listener's TLS settings, when it speaks HTTPS.
    tls: Option<Arc<ServerTls>>,
    /// Envoy's rate-limit service, whose rules a reload replaces.
    rls: Option<Arc<RlsHandle>>,
    /// Its gRPC listener's TLS settings, when it speaks TLS.
    rls_tls: Option<Arc<ServerTls>>,
    /// `[[outputs]]`, which a reload adds, changes and removes.
    outputs: Option<Arc<crate::output::Outputs>>,
}

/// The TLS settings a reload puts in force, built before anything is
/// applied: for the HTTP listener and the rate-limit service's (each `None`
/// when that listener speaks no TLS, or the new config turns it off).
struct NextTls {
    http: Option<Arc<rustls::ServerConfig>>,
    rls: Option<Arc<rustls::ServerConfig>>,
}

impl Reloader {
    /// A reloader for the config at `path` (None: built-in defaults, nothing
    /// to reload), currently `config`.
    #[must_use]
    pub fn new(
        path: Option<PathBuf>,
        config: Config,
        registry: Arc<Registry>,
        telemetry: Arc<Telemetry>,
        services: Arc<ServiceHandle>,
        clock: Arc<dyn Clock>,
        access: Arc<AccessHandle>,
    ) -> Self {
        for reason in REFUSAL_REASONS {
            telemetry.reload_refusals.with_label_values(&[reason]);
        }
        Reloader {
            path,
            registry,
            telemetry,
            services,
            clock,
            access,
            started: config.clone(),
            current: Mutex::new(config),
            tls: None,
            rls: None,
            rls_tls: None,
            outputs: None,
        }
    }

    /// Reloads also re-read the files of `[http.tls]` into `tls`, the
    /// settings the HTTP listener's handshakes use.
    #[must_use]
    pub fn with_tls(mut self, tls: Option<Arc<ServerTls>>) -> Self {
        self.tls = tls;
        self
    }

    /// The reloader of a daemon that serves `rls`, the rate-limit service
    /// whose rules and caps a reload replaces (each rule's history kept).
    #[must_use]
    pub fn with_rls(mut self, rls: Option<Arc<RlsHandle>>) -> Self {
        self.rls = rls;
        self
    }

    /// Reloads also apply `[[outputs]]` to `outputs`: new ones start,
    /// changed ones keep their queue, removed ones stop.
    #[must_use]
    pub fn with_outputs(mut self, outputs: Arc<crate::output::Outputs>) -> Self {
        self.outputs = Some(outputs);
        self
    }

    /// Reloads also re-read the files of `[rls.tls]` into `tls`, the
    /// settings the rate-limit service's handshakes use.
    #[must_use]
    pub fn with_rls_tls(mut self, tls: Option<Arc<ServerTls>>) -> Self {
        self.rls_tls = tls;
        self
    }

    /// Reads the file again and applies it, or keeps the old config.
    ///
    /// # Errors
    ///
    /// [`ReloadError`]: the new config cannot be read or built; the old one
    /// stays in force.
    pub fn reload(&self) -> Result<Reloaded, ReloadError> {
        // One reload at a time: the next one reads the file only after this
        // one has applied everything (services, TLS, access, plan, replan),
        // and builds its services from what this one applied.
        let mut cur = self.current.lock();
        let Some(path) = &self.path else {
            tracing::info!("Reload asked, but rollstat runs on built-in defaults (no --config); nothing to reload.");
            self.telemetry.reloads.with_label_values(&["ok"]).inc();
            return Ok(Reloaded::default());
        };
        match self.build(path) {
            Ok((cfg, services, tls)) => {
                self.services.replace(services);
                let rls_tls = cfg.rls.as_ref().and_then(|r| r.tls.as_ref());
                apply_tls(
                    path,
                    "http.tls",
                    "HTTPS",
                    &self.tls,
                    cfg.http.tls.as_ref(),
                    tls.http,
                );
                apply_tls(path, "rls.tls", "TLS", &self.rls_tls, rls_tls, tls.rls);
                self.apply_rls(&cfg);
                if let Some(o) = &self.outputs {
                    o.apply(&cfg.outputs);
                }
                let needs_restart = self.restart_notes(path, &cfg);
                let now = self.clock.now();
                self.registry
                    .set_plan(self.registry.plan().successor(cfg.series_settings(), now));
                *cur = cfg;
                self.telemetry.reloads.with_label_values(&["ok"]).inc();
                self.telemetry.last_reload_success.set(1);
                crate::sketch::budget::process().set_limit(crate::series::footprint::sketch_limit(
                    cur.series_settings(),
                    crate::host::memory_total_bytes(),
                ));
                // New series follow the new plan from here; existing ones
                // are moved onto it shard by shard.
                let r = self.registry.replan(now);
                tracing::info!(
                    path = %path.display(),
                    kept = r.kept,
                    rewindowed = r.rewindowed,
                    removed = r.removed,
                    "Config reloaded and applied to existing series: unchanged ones kept, those with other windows rewindowed (cumulative values kept), those the new rules drop, rename or relabel removed (they start fresh on their next line)."
                );
                Ok(Reloaded { needs_restart })
            }
            Err(e) => {
                self.telemetry.reloads.with_label_values(&["error"]).inc();
                self.telemetry
                    .reload_refusals
                    .with_label_values(&[e.reason()])
                    .inc();
                self.telemetry.last_reload_success.set(0);
                tracing::error!(
                    "Config reload failed; the previous config stays in force. {}",
                    Causes(&e)
                );
                Err(e)
            }
        }
    }

    /// Reads `path` and builds everything a reload applies, before any of
    /// it is applied: the config, its services, the TLS settings.
    fn build(&self, path: &std::path::Path) -> Result<(Config, Services, NextTls), ReloadError> {
        let cfg = Config::load(path)?;
        // Breakers and limits whose definition is unchanged keep their state.
        let previous = self.services.current();
        let services = Services::new(cfg.service_settings(), self.clock.now(), Some(&previous))
            .map_err(|source| ReloadError::Services {
                path: path.to_path_buf(),
                source,
            })?;
        // The client the daemon would build at a start, connecting to
        // nothing: what it refuses, the next start would too.
        if let Some(Err(source)) = cfg.redis.as_ref().map(crate::store::check) {
            return Err(ReloadError::Redis {
                path: path.to_path_buf(),
                source,
            });
        }
        // Built before anything is applied: bad files fail the whole
        // reload, and the certificates in use stay.
        let tls = NextTls {
            http: next_tls(path, "http.tls", &self.tls, cfg.http.tls.as_ref())?,
            rls: next_tls(
                path,
                "rls.tls",
                &self.rls_tls,
                cfg.rls.as_ref().and_then(|r| r.tls.as_ref()),
            )?,
        };
        Ok((cfg, services, tls))
    }

    /// Takes the new access rules at once, and says (logged, returned)
    /// what else changed that only a restart applies: against the config
    /// the daemon started with, so that a second reload of the same change
    /// still says so.
    /// The new `[rls]` rules and caps in force (the listener's address
    /// needs a restart: [`Self::restart_notes`]).
    fn apply_rls(&self, cfg: &Config) {
        let (Some(handle), Some(settings)) = (&self.rls, &cfg.rls) else {
            return;
        };
        let current = handle.current();
        if current.settings() == settings {
            return;
        }
        handle.replace(current.successor(settings.clone(), self.clock.now()));
        tracing::info!(
            domains = settings.domains.len(),
            "Rate-limit service rules reloaded; each unchanged rule keeps its history, a changed one carries it onto its new limit."
        );
    }

    fn restart_notes(&self, path: &std::path::Path, cfg: &Config) -> Vec<&'static str> {
        let mut needs_restart = Vec::new();
        let started = &self.started;
        let mut note = |changed: bool, log: &'static str, said: &'static str| {
            if changed {
                tracing::warn!(path = %path.display(), "{log}");
                needs_restart.push(said);
            }
        };
        note(
            cfg.listen != started.listen || cfg.ingest != started.ingest,
            "[listen] and [ingest] changes (tag_styles included) take effect only after a restart.",
            "[listen] and [ingest] changes (tag_styles included) take effect only after a restart",
        );
        note(
            cfg.rls.as_ref().map(|r| r.grpc) != started.rls.as_ref().map(|r| r.grpc),
            "[rls] grpc changes (turning the rate-limit service on, off, or onto another address) take effect only after a restart.",
            "[rls] grpc changes take effect only after a restart",
        );
        note(
            cfg.rls.as_ref().map(|r| r.listener) != started.rls.as_ref().map(|r| r.listener),
            "[rls] max_connections, max_streams_per_connection and the listener's timeouts take effect only after a restart.",
            "[rls] listener caps and timeouts take effect only after a restart",
        );
        note(
            cfg.otlp != started.otlp,
            "[otlp] changes take effect only after a restart; OTLP points are read as the daemon started.",
            "[otlp] changes take effect only after a restart",
        );
        note(
            cfg.relays != started.relays,
            "[[relay]] changes take effect only after a restart; the relays the daemon started with go on.",
            "[[relay]] changes take effect only after a restart",
        );
        // Access (credentials files included, read again just now) is
        // taken at once, and so is [http.tls] (above); the rest of [http]
        // needs a restart.
        self.access.replace(cfg.http.access.clone());
        let restart_only = |h: &HttpLimits| HttpLimits {
            access: crate::access::Access::default(),
            tls: None,
            ..h.clone()
        };
        note(
            restart_only(&cfg.http) != restart_only(&started.http),
            "[http] changes other than allowed_hosts, allowed_origins, [http.auth], [http.tls] and web_config_file (deadlines and caps) take effect only after a restart.",
            "[http] changes other than allowed_hosts, allowed_origins, [http.auth], [http.tls] and web_config_file (deadlines and caps) take effect only after a restart",
        );
        note(
            cfg.redis != started.redis,
            "[redis] changes take effect only after a restart; the shared store keeps the [redis] the daemon started with.",
            "[redis] changes take effect only after a restart; the shared store keeps the [redis] the daemon started with",
        );
        needs_restart
    }
}

/// The settings of a listener's new TLS files (`wanted`, the config's
/// `[section]`), if the listener speaks TLS (`server`) and still asks for
/// it.
///
/// # Errors
///
/// [`ReloadError::Tls`]: a file cannot be used.
fn next_tls(
    path: &std::path::Path,
    section: &'static str,
    server: &Option<Arc<ServerTls>>,
    wanted: Option<&crate::tls::TlsConfig>,
) -> Result<Option<Arc<rustls::ServerConfig>>, ReloadError> {
    match (server, wanted) {
        (Some(_), Some(t)) => {
            crate::tls::server_config(t)
                .map(Some)
                .map_err(|source| ReloadError::Tls {
                    path: path.to_path_buf(),
                    section,
                    source,
                })
        }
        _ => Ok(None),
    }
}

/// The new `[section]` files in use by the listener's next handshakes;
/// TLS (`what`: HTTPS on the HTTP listener) turned on or off waits for a
/// restart (logged).
fn apply_tls(
    path: &std::path::Path,
    section: &str,
    what: &str,
    server: &Option<Arc<ServerTls>>,
    wanted: Option<&crate::tls::TlsConfig>,
    next: Option<Arc<rustls::ServerConfig>>,
) {
    if let (Some(server), Some(next)) = (server, next) {
        server.replace(next);
        tracing::info!(path = %path.display(), "[{section}] files read again; new connections use them.");
    }
    match (server, wanted) {
        (None, Some(_)) => {
            tracing::warn!(path = %path.display(), "[{section}] is set, but turning {what} on takes effect only after a restart; the listener keeps speaking without TLS.")
        }
        (Some(_), None) => {
            tracing::warn!(path = %path.display(), "[{section}] is gone, but turning {what} off takes effect only after a restart; the listener keeps speaking {what} with the certificate in use.")
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;
    use crate::clock::ManualClock;
    use crate::series::Plan;

    const FILES: [&str; 2] = [
        "[[limits]]\nname = \"l\"\nrules = [{ max = 1, window_ms = 60000 }]\n",
        "[[limits]]\nname = \"l\"\nrules = [{ max = 2, window_ms = 60000 }]\n",
    ];

    /// The max of limit `l` in `cfg`.
    fn max_of(cfg: &Config) -> u32 {
        cfg.limits[0].rules[0].0
    }

    #[test]
    fn concurrent_reloads_apply_the_config_and_services_of_one_file_read() {
        let dir =
            std::env::temp_dir().join(format!("rollstat-reload-serial-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rollstat.toml");
        std::fs::write(&path, FILES[0]).unwrap();
        let config = Config::load(&path).unwrap();
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
        let services = Arc::new(ServiceHandle::new(
            Services::new(config.service_settings(), clock.now(), None).unwrap(),
        ));
        let reloader = Reloader::new(
            Some(path.clone()),
            config.clone(),
            Arc::new(Registry::new(Plan::new(config.series_settings()), 4)),
            Arc::new(Telemetry::new().unwrap()),
            services.clone(),
            clock,
            Arc::new(AccessHandle::new(config.http.access.clone(), Vec::new())),
        );
        let (done, mismatches, checks) = (
            AtomicBool::new(false),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        std::thread::scope(|s| {
            // The file flips between the two contents (whole files, renamed
            // into place, so that every read is one of them).
            s.spawn(|| {
                let tmp = dir.join("next.toml");
                let mut i = 0;
                while !done.load(Ordering::Relaxed) {
                    i += 1;
                    std::fs::write(&tmp, FILES[i % 2]).unwrap();
                    std::fs::rename(&tmp, &path).unwrap();
                }
            });
            // Between reloads (the config lock held), the services in force
            // come from the same file read as the config in force.
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    let cur = reloader.current.lock();
                    let applied = services.current();
                    let def = &applied.limits.get("l").unwrap().def;
                    if def.rules[0].0 != max_of(&cur) {
                        mismatches.fetch_add(1, Ordering::Relaxed);
                    }
                    checks.fetch_add(1, Ordering::Relaxed);
                }
            });
            let reloaders: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        for _ in 0..300 {
                            reloader.reload().unwrap();
                        }
                    })
                })
                .collect();
            for r in reloaders {
                r.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
        });
        let _ = std::fs::remove_dir_all(&dir);
        assert!(checks.load(Ordering::Relaxed) > 0);
        assert_eq!(
            mismatches.load(Ordering::Relaxed),
            0,
            "of {checks:?} checks"
        );
        let cur = reloader.current.lock();
        assert_eq!(
            services.current().limits.get("l").unwrap().def.rules[0].0,
            max_of(&cur)
        );
    }
}
