//! The daemon's state, built without sockets: the registry, the services
//! (breakers and limits), the shared store handle, self-metrics, the fleet
//! view, the ingest path and the reloader, all wired to one clock.
//!
//! [`State::build`] opens nothing: the Redis store connects lazily on its
//! first call, and no listener is bound. Tests build a `State` under a
//! [`ManualClock`](crate::ManualClock), call [`State::router`] and drive the
//! HTTP handlers in-process; the periodic work ([`State::sweep`],
//! [`State::tick`], [`State::sync_store`]) runs when the test says so.

use crate::ingest::otlp::OtlpIngest;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;

use crate::access::AccessHandle;
use crate::clock::Clock;
use crate::config::Config;
use crate::expose::prometheus::SeriesCollector;
use crate::fleet::FleetWindows;
use crate::http::{router, AppState};
use crate::ingest::fault::Faults;
use crate::ingest::supervise::Liveness;
use crate::ingest::Ingestor;
use crate::output::metrics::OutputFamilies;
use crate::output::{Outputs, Source as OutputSource};
use crate::parse::ParseOptions;
use crate::relay::Relays;
use crate::reload::Reloader;
use crate::rls::service::{Rls, RlsHandle};
use crate::series::{Plan, Registry};
use crate::service::{ServiceError, ServiceHandle, Services};
use crate::store::{Op, RedisStore, StoreSetupError};
use crate::telemetry::Telemetry;
use crate::tls::{ServerTls, TlsError};

/// Why the daemon's state could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `[redis]` names a store that cannot be used (e.g. a URL scheme the
    /// client does not support).
    #[error("cannot set up the shared store of [redis]")]
    Store(#[source] StoreSetupError),
    /// A breaker or limit of the config cannot be built.
    #[error("cannot build the breakers and limits of the config")]
    Services(#[source] ServiceError),
    /// A self-metric could not be registered (a bug: names clash).
    #[error("cannot register rollstat's own metrics")]
    Telemetry(#[source] prometheus::Error),
    /// A `[http.tls]` file cannot be used (`check-config` says the same).
    #[error("cannot set up HTTPS from [http.tls]")]
    Tls(#[source] TlsError),
}

/// Everything the daemon serves from, built without I/O.
pub struct State {
    /// The config the daemon started with (reloads replace the parts they
    /// can inside the registry, services and reloader).
    pub config: Config,
    /// The one clock every part reads.
    pub clock: Arc<dyn Clock>,
    /// Series and their windows.
    pub registry: Arc<Registry>,
    /// The shared store, when `[redis]` is configured.
    pub store: Option<Arc<RedisStore>>,
    /// Named breakers and limits, swapped whole on reload.
    pub services: Arc<ServiceHandle>,
    /// Self-metrics.
    pub telemetry: Arc<Telemetry>,
    /// Shared windows, when a mapping rule shares its series at start.
    pub fleet: Option<Arc<FleetWindows>>,
    /// `/metrics` families other than the series and the self-metrics.
    pub families: Arc<SeriesCollector>,
    /// The one path from bytes to the registry.
    pub ingestor: Arc<Ingestor>,
    /// `[[relay]]` destinations (their senders start with the daemon).
    pub relays: Option<Arc<Relays>>,
    /// Config reloads (SIGHUP, `POST /-/reload`).
    pub reloader: Arc<Reloader>,
    /// Who may use which HTTP route (replaced at reload).
    pub access: Arc<AccessHandle>,
    /// The HTTP listener's TLS settings with `[http.tls]`, swapped by
    /// reloads.
    pub tls: Option<Arc<ServerTls>>,
    /// Envoy's rate-limit service, with `[rls] grpc`.
    pub rls: Option<Arc<RlsHandle>>,
    /// Its listener's TLS settings, with `[rls.tls]`.
    pub rls_tls: Option<Arc<ServerTls>>,
    /// OTLP ingest, with `[listen] otlp_http` or `otlp_grpc`.
    pub otlp: Option<Arc<OtlpIngest>>,
    /// `[[outputs]]`: started by the daemon, replaced by reloads.
    pub outputs: Arc<Outputs>,
    /// Set while every listener and task runs (`/-/ready`).
    pub serving: Arc<std::sync::atomic::AtomicBool>,
    /// The statsd receivers (reader threads, TCP accept loop) and whether
    /// each still runs (`/-/ready`).
    pub liveness: Arc<Liveness>,
    /// Faults the integration tests inject (`ROLLSTAT_TEST_FAULTS`); none
    /// unless [`State::with_faults`] sets them.
    pub faults: Arc<Faults>,
    /// The clock offset last warned about ([`State::watch_clock`]).
    clock_warned: parking_lot::Mutex<f64>,
}

/// OTLP ingest into `ingestor`'s registry, with `[listen] otlp_http` or
/// `otlp_grpc`.
fn build_otlp(config: &Config, ingestor: &Arc<Ingestor>) -> Option<Arc<OtlpIngest>> {
    config
        .listen
        .otlp_http
        .or(config.listen.otlp_grpc)
        .is_some()
        .then(|| Arc::new(OtlpIngest::new(ingestor.clone(), config.otlp_settings())))
}

/// `[[outputs]]`, not yet started, reading what `/metrics` reads.
fn build_outputs(
    registry: &Arc<Registry>,
    families: &Arc<SeriesCollector>,
    telemetry: &Telemetry,
    rls: Option<Arc<RlsHandle>>,
    clock: &Arc<dyn Clock>,
) -> Result<Arc<Outputs>, BuildError> {
    let source = OutputSource {
        registry: registry.clone(),
        state: families.clone(),
        telemetry: telemetry.registry.clone(),
        rls,
    };
    Ok(Arc::new(Outputs::new(
        Arc::new(source),
        OutputFamilies::register(&telemetry.registry).map_err(BuildError::Telemetry)?,
        clock.clone(),
        telemetry.task_panics.clone(),
    )))
}

/// Whether the clock offset moved by a second or more from the one last
/// warned about.
fn drifted(last: f64, offset: f64) -> bool {
    (offset - last).abs() >= 1.0
}

// === impl State ===

/// This machine's host name, accepted as an HTTP `Host` (see
/// `http.allowed_hosts`); none if it cannot be read.
fn machine_names() -> Vec<String> {
    nix::unistd::gethostname()
        .ok()
        .and_then(|n| n.into_string().ok())
        .into_iter()
        .collect()
}

impl State {
    /// The state of a daemon running `config` (read from `config_path`, if
    /// any, for reloads) on `clock`. Binds nothing and sends nothing; with
    /// `[redis]` it must run inside a Tokio runtime, whose tasks the store's
    /// connection manager uses once it connects.
    ///
    /// # Errors
    ///
    /// [`BuildError`]: a store, breaker, limit or self-metric that cannot
    /// be built.
    pub fn build(
        config: Config,
        config_path: Option<PathBuf>,
        clock: Arc<dyn Clock>,
    ) -> Result<State, BuildError> {
        let shards = std::thread::available_parallelism().map_or(8, |n| n.get() * 8);
        // Windows are watched from now: their rates divide by the time the
        // daemon has been up until they are full.
        let registry = Arc::new(Registry::new(
            Plan::new(config.series_settings()).watched_from(clock.now()),
            shards,
        ));
        // The shared store connects lazily: Redis need not be up at start.
        let store = config
            .redis
            .clone()
            .map(RedisStore::new)
            .transpose()
            .map_err(BuildError::Store)?;
        let services =
            Services::with_store(config.service_settings(), clock.now(), None, store.clone())
                .map_err(BuildError::Services)?;
        let services = Arc::new(ServiceHandle::new(services));
        let telemetry = Arc::new(Telemetry::new().map_err(BuildError::Telemetry)?);
        if let Some(s) = &store {
            s.metrics()
                .register(&telemetry.registry)
                .map_err(BuildError::Telemetry)?;
        }
        let (rls, rls_tls) = build_rls(&config, &telemetry, store.clone(), clock.now())?;
        // Shared windows: only when a mapping rule shares its series at start.
        let fleet = store
            .as_ref()
            .filter(|_| config.mappings.iter().any(|m| m.shared))
            .map(|s| Arc::new(FleetWindows::new(s.config(), &config.series.quantiles)));
        // Not registered in the telemetry registry: /metrics calls it with
        // the scrape's one clock reading, and writes the series itself.
        let families = Arc::new(
            SeriesCollector::new(registry.clone(), clock.clone(), services.clone())
                .without_series()
                .with_fleet(fleet.clone()),
        );
        let relays = Relays::new(&config.relays, &telemetry.relay).map(Arc::new);
        let ingestor = Arc::new(
            Ingestor::new(
                registry.clone(),
                telemetry.clone(),
                clock.clone(),
                services.clone(),
            )
            .with_parse_options(
                ParseOptions::default()
                    .tag_styles(config.ingest.tag_styles)
                    // statsd_exporter's compatibility mode, read at start.
                    .statsd_exporter(config.exporter_compatible()),
            )
            .with_relays(relays.clone()),
        );
        let otlp = build_otlp(&config, &ingestor);
        let access = Arc::new(AccessHandle::new(
            config.http.access.clone(),
            machine_names(),
        ));
        // Reads the certificate and key files: a pair that does not match
        // stops the start here, as check-config would have said.
        let tls = config
            .http
            .tls
            .as_ref()
            .map(|t| ServerTls::new(t).map(Arc::new))
            .transpose()
            .map_err(BuildError::Tls)?;
        let outputs = build_outputs(&registry, &families, &telemetry, rls.clone(), &clock)?;
        let reloader = Arc::new(
            Reloader::new(
                config_path,
                config.clone(),
                registry.clone(),
                telemetry.clone(),
                services.clone(),
                clock.clone(),
                access.clone(),
            )
            .with_tls(tls.clone())
            .with_rls(rls.clone())
            .with_rls_tls(rls_tls.clone())
            .with_outputs(outputs.clone()),
        );
        Ok(State {
            config,
            clock,
            registry,
            store,
            services,
            telemetry,
            fleet,
            families,
            ingestor,
            relays,
            reloader,
            access,
            tls,
            rls,
            rls_tls,
            otlp,
            outputs,
            serving: Arc::default(),
            liveness: Arc::default(),
            faults: Arc::new(Faults::none()),
            clock_warned: parking_lot::Mutex::new(0.0),
        })
    }

    /// This state with the integration tests' injected `faults`.
    #[must_use]
    pub fn with_faults(mut self, faults: Faults) -> State {
        self.faults = Arc::new(faults);
        self
    }

    /// The HTTP API over this state. `udp_port` is the statsd UDP port whose
    /// kernel drop counter `/metrics` reports, if UDP is served.
    pub fn router(&self, udp_port: Option<u16>) -> Router {
        router(self.app_state(udp_port))
    }

    /// The OTLP/HTTP listener's router over this state.
    pub fn otlp_router(&self) -> Router {
        crate::http::otlp_router(self.app_state(None))
    }

    fn app_state(&self, udp_port: Option<u16>) -> AppState {
        AppState::new(
            self.ingestor.clone(),
            self.reloader.clone(),
            self.families.clone(),
            self.access.clone(),
            crate::http::health::Health {
                serving: self.serving.clone(),
                store: self.store.clone(),
                receivers: self.liveness.clone(),
            },
            &self.config.http,
            self.config.ingest.http_max_body_bytes,
        )
        .with_udp_port(udp_port)
        .with_rls(self.rls.clone())
        .with_otlp(self.otlp.clone())
    }

    /// The whole `/metrics` body as of the clock's now, as the handler
    /// writes it (without gzip): the text format 0.0.4, or OpenMetrics with
    /// its `# EOF`. For embedding the daemon's state without its HTTP
    /// server, and for the fuzz targets that read it back.
    ///
    /// # Errors
    ///
    /// The `prometheus` crate cannot encode the self-metrics.
    pub fn metrics_body(&self, openmetrics: bool) -> prometheus::Result<Vec<u8>> {
        let accept: &[u8] = if openmetrics {
            b"application/openmetrics-text;version=1.0.0"
        } else {
            b"text/plain;version=0.0.4"
        };
        self.metrics_body_for(Some(accept))
    }

    /// The whole `/metrics` body for a scraper whose `Accept` header is
    /// `accept` (any format and escaping [`negotiate`](crate::expose::negotiate::negotiate)
    /// chooses), without gzip.
    ///
    /// # Errors
    ///
    /// The `prometheus` crate cannot encode the self-metrics.
    pub fn metrics_body_for(&self, accept: Option<&[u8]>) -> prometheus::Result<Vec<u8>> {
        let app = self.app_state(None);
        let asked = crate::http::answered(&app, accept);
        let mut body = Vec::new();
        crate::http::render_metrics(&app, asked, |p| body.extend_from_slice(p.as_ref()))?;
        Ok(body)
    }

    /// Publishes how far the wall clock is from the daemon's clock
    /// (`rollstat_clock_offset_seconds`), and logs a warning when it has
    /// moved by a second or more since the last warning (or since start).
    pub fn watch_clock(&self) {
        let offset = self.clock.wall_offset_seconds();
        self.telemetry.clock_offset.set(offset);
        let mut last = self.clock_warned.lock();
        if drifted(*last, offset) {
            tracing::warn!(
                offset_seconds = offset,
                "The wall clock has moved away from the daemon's clock (an NTP step or a manual change?). Windows and limits keep the daemon's clock, which never jumps; timestamps in logs and the daemon's differ by this much until a restart."
            );
            *last = offset;
        }
    }

    /// Expires idle series; returns how many.
    pub fn sweep(&self) -> usize {
        let n = self.registry.sweep(self.clock.now());
        if n > 0 {
            tracing::debug!(expired = n, "Expired idle series.");
        }
        n
    }

    /// Feeds pending statsd outcomes to the breakers, applies time-driven
    /// transitions (open to half-open), and sweeps idle limit keys when due.
    pub fn tick(&self) {
        let s = self.services.current();
        let now = self.clock.now();
        s.breakers.tick(now);
        s.limits.sweep_if_due(now);
    }

    /// One round with the shared store, if there is one: pushes and reads
    /// the shared windows; writes back what shared limits admitted locally
    /// during an outage; and, when the limit operation is down (or this is
    /// the first round), probes it, so that shared limits resume and
    /// `rollstat_store_up` returns to 1 without waiting for traffic.
    pub async fn sync_store(&self, first: bool) {
        let Some(store) = &self.store else { return };
        if let Some(f) = &self.fleet {
            f.sync(&self.registry, store, self.clock.now()).await;
        }
        if first || !store.is_op_up(Op::Limit) {
            let _ = store.ping(self.clock.now()).await;
        }
        let services = self.services.current();
        services.limits.flush_writebacks(self.clock.now()).await;
    }

    /// The last round with the shared store at stop, once the receivers
    /// have processed what they received: pushes what the shared windows
    /// have not pushed yet (and writes back what shared limits admitted
    /// locally), under `redis.final_sync_timeout_ms`. Logged, and counted
    /// in `rollstat_store_final_sync_total{result}`.
    pub async fn final_sync(&self) {
        let Some(store) = &self.store else { return };
        let deadline = store.config().final_sync_timeout;
        let now = self.clock.now();
        let work = async {
            let report = match &self.fleet {
                Some(f) => Some(f.sync(&self.registry, store, now).await),
                None => None,
            };
            let services = self.services.current();
            services.limits.flush_writebacks(now).await;
            report
        };
        let result = match tokio::time::timeout(deadline, work).await {
            Ok(Some(r)) if !r.read && r.windows > 0 => {
                tracing::warn!(windows = r.windows, pushed = r.pushed, unshared = r.unshared, "The final shared-window sync at stop did not complete; what it could not push stays local only (rollstat_store_unshared_deltas_total).");
                "failed"
            }
            Ok(r) => {
                let r = r.unwrap_or_default();
                tracing::info!(
                    windows = r.windows,
                    pushed = r.pushed,
                    unshared = r.unshared,
                    "Final shared-window sync done."
                );
                "done"
            }
            Err(_) => {
                tracing::warn!(?deadline, "The final shared-window sync at stop missed redis.final_sync_timeout_ms; what it had not pushed stays local only.");
                "timeout"
            }
        };
        store
            .metrics()
            .final_sync
            .with_label_values(&[result])
            .inc();
    }
}

/// The rate-limit service and its listener's TLS settings, each if on.
type RlsParts = (Option<Arc<RlsHandle>>, Option<Arc<ServerTls>>);

/// Envoy's rate-limit service of `config` (its families registered in
/// `telemetry`, deciding in `store` with `[rls] shared = true`) and its
/// listener's TLS settings, each if configured; its rates watched from
/// `now`.
fn build_rls(
    config: &Config,
    telemetry: &Telemetry,
    store: Option<Arc<RedisStore>>,
    now: crate::clock::Timestamp,
) -> Result<RlsParts, BuildError> {
    let Some(settings) = &config.rls else {
        return Ok((None, None));
    };
    let rls = Rls::new(settings.clone(), store)
        .map_err(BuildError::Telemetry)?
        .watched_from(now);
    rls.register(&telemetry.registry)
        .map_err(BuildError::Telemetry)?;
    let tls = settings
        .tls
        .as_ref()
        .map(|t| ServerTls::new(t).map(Arc::new).map_err(BuildError::Tls))
        .transpose()?;
    Ok((Some(Arc::new(RlsHandle::new(rls))), tls))
}

#[cfg(test)]
mod tests {
    use super::drifted;

    #[test]
    fn a_second_of_drift_is_worth_a_warning_and_jitter_is_not() {
        assert!(!drifted(0.0, 0.003));
        assert!(!drifted(0.0, -0.9));
        assert!(drifted(0.0, 1.0));
        assert!(drifted(0.0, -3600.0));
        // Once warned at 5 s, 5.5 s is the same drift; 4 s is a new move.
        assert!(!drifted(5.0, 5.5));
        assert!(drifted(5.0, 4.0));
    }
}
