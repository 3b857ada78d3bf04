//! The daemon: wires bound sockets, the registry, the HTTP API and the
//! background tasks together, and shuts them down in order. No business logic
//! lives here.
//!
//! [`Listeners::bind`] binds everything first (so a port clash fails before
//! anything starts, and tests can bind port 0 and read the ports back);
//! [`run`] then serves until the `shutdown` future completes: it stops the
//! receivers, lets them process what they already received, and returns.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::Clock;
use crate::config::Config;
use crate::expose::prometheus::SeriesCollector;
use crate::http::{router, AppState};
use crate::ingest::{tcp, udp, unix, Ingestor};
use crate::parse::ParseOptions;
use crate::reload::Reloader;
use crate::series::{Plan, Registry};
use crate::service::{ServiceHandle, Services};
use crate::fleet::FleetWindows;
use crate::store::RedisStore;
use crate::telemetry::{Telemetry, Transport};

/// Every socket the daemon serves, bound.
pub struct Listeners {
    /// statsd UDP readers.
    pub udp: Option<udp::UdpSockets>,
    /// statsd TCP.
    pub tcp: Option<std::net::TcpListener>,
    /// statsd Unix datagram socket and its path.
    pub unix: Option<(UnixDatagram, PathBuf)>,
    /// HTTP.
    pub http: std::net::TcpListener,
}

/// A socket that could not be bound, and what to do about it.
#[derive(Debug, thiserror::Error)]
#[error("cannot bind {what} on {addr}: {source}; is another process using it? Change `{key}` in the config")]
pub struct BindError {
    what: &'static str,
    addr: String,
    key: &'static str,
    #[source]
    source: io::Error,
}

impl Listeners {
    /// Binds every listener the config asks for.
    pub fn bind(cfg: &Config) -> Result<Listeners, BindError> {
        let err = |what, addr: &dyn std::fmt::Display, key| {
            let addr = addr.to_string();
            move |source| BindError {
                what,
                addr,
                key,
                source,
            }
        };
        let udp =
            cfg.listen
                .statsd_udp
                .map(|a| {
                    udp::bind(a, cfg.ingest.udp_readers, cfg.ingest.udp_recv_buffer_bytes)
                        .map_err(err("statsd UDP", &a, "listen.statsd_udp"))
                })
                .transpose()?;
        let tcp = cfg
            .listen
            .statsd_tcp
            .map(|a| {
                let l = std::net::TcpListener::bind(a)?;
                l.set_nonblocking(true)?;
                Ok(l)
            })
            .transpose()
            .map_err(err(
                "statsd TCP",
                &format!("{:?}", cfg.listen.statsd_tcp),
                "listen.statsd_tcp",
            ))?;
        let unix = cfg
            .listen
            .statsd_unix
            .as_ref()
            .map(|p| {
                unix::bind(p).map(|s| (s, p.clone())).map_err(err(
                    "statsd Unix socket",
                    &p.display(),
                    "listen.statsd_unix",
                ))
            })
            .transpose()?;
        let http = std::net::TcpListener::bind(cfg.listen.http)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(err("HTTP", &cfg.listen.http, "listen.http"))?;
        Ok(Listeners {
            udp,
            tcp,
            unix,
            http,
        })
    }

    /// The HTTP address actually bound.
    pub fn http_addr(&self) -> io::Result<SocketAddr> {
        self.http.local_addr()
    }

    /// One line naming every bound address, e.g. for logs and tests.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(u) = &self.udp {
            s += &format!("statsd_udp={} ", u.local_addr);
        }
        if let Some(Ok(a)) = self.tcp.as_ref().map(|t| t.local_addr()) {
            s += &format!("statsd_tcp={a} ");
        }
        if let Some((_, p)) = &self.unix {
            s += &format!("statsd_unix={} ", p.display());
        }
        if let Ok(a) = self.http.local_addr() {
            s += &format!("http={a}");
        }
        s
    }
}

/// Serves until `shutdown` completes, then stops gracefully.
pub async fn run(
    cfg: Config,
    config_path: Option<PathBuf>,
    listeners: Listeners,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let shards = std::thread::available_parallelism().map_or(8, |n| n.get() * 8);
    // Windows are watched from now: their rates divide by the time the
    // daemon has been up until they are full.
    let registry = Arc::new(Registry::new(
        Plan::from_config(&cfg).watched_from(clock.now()),
        shards,
    ));
    // The shared store connects lazily: Redis need not be up at start.
    let store = cfg
        .redis
        .clone()
        .map(RedisStore::new)
        .transpose()
        .map_err(io::Error::other)?;
    let services = Arc::new(ServiceHandle::new(
        Services::with_store(&cfg, clock.now(), None, store.clone()).map_err(io::Error::other)?,
    ));
    let telemetry = Arc::new(Telemetry::new().map_err(io::Error::other)?);
    if let Some(s) = &store {
        s.metrics()
            .register(&telemetry.registry)
            .map_err(io::Error::other)?;
    }
    // Shared windows: only when a mapping rule shares its series at start.
    let fleet = store
        .as_ref()
        .filter(|_| cfg.mappings.iter().any(|m| m.shared))
        .map(|s| Arc::new(FleetWindows::new(s.config())));
    // Not registered in the telemetry registry: /metrics calls it with the
    // scrape's one clock reading, and writes the series itself.
    let state_families = Arc::new(
        SeriesCollector::new(registry.clone(), clock.clone(), services.clone())
            .without_series()
            .with_fleet(fleet.clone()),
    );
    let ingestor = Arc::new(
        Ingestor::new(
            registry.clone(),
            telemetry.clone(),
            clock.clone(),
            services.clone(),
        )
        .with_parse_options(ParseOptions::default().tag_styles(cfg.ingest.tag_styles)),
    );
    let reloader = Arc::new(Reloader::new(
        config_path,
        cfg.clone(),
        registry.clone(),
        telemetry.clone(),
        services.clone(),
        clock.clone(),
    ));

    let stop = Arc::new(AtomicBool::new(false));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut threads = Vec::new();

    let mut udp_port = None;
    if let Some(u) = listeners.udp {
        udp_port = Some(u.local_addr.port());
        telemetry
            .udp_recv_buffer
            .set(i64::try_from(u.recv_buffer).unwrap_or(i64::MAX));
        let asked = cfg.ingest.udp_recv_buffer_bytes;
        if u.capped(asked) {
            tracing::warn!(asked, granted = u.recv_buffer, "The kernel granted a smaller UDP receive buffer than ingest.udp_recv_buffer_bytes asks for (Linux reports twice the usable size); raise net.core.rmem_max, or run with CAP_NET_ADMIN, to avoid drops under bursts.");
        } else if u.forced {
            tracing::info!(
                asked,
                granted = u.recv_buffer,
                "UDP receive buffer forced past net.core.rmem_max (CAP_NET_ADMIN)."
            );
        } else {
            tracing::info!(granted = u.recv_buffer, "UDP receive buffer set.");
        }
        threads.extend(udp::spawn(
            u.sockets,
            ingestor.clone(),
            stop.clone(),
            cfg.ingest.udp_workers,
        )?);
    }
    if let Some((sock, _)) = listeners.unix {
        threads.push(unix::spawn(sock, ingestor.clone(), stop.clone())?);
    }
    let tcp_task = match listeners.tcp {
        Some(l) => {
            let l = tokio::net::TcpListener::from_std(l)?;
            Some(tokio::spawn(tcp::serve(
                l,
                ingestor.clone(),
                tcp::TcpSettings::from_config(&cfg.ingest),
                stop_rx.clone(),
            )))
        }
        None => None,
    };

    // Sweeper: expire idle series.
    let sweep_every =
        (cfg.series.ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(10));
    let sweeper = {
        let (registry, clock, mut rx) = (registry.clone(), clock.clone(), stop_rx.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(sweep_every);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        let n = registry.sweep(clock.now());
                        if n > 0 {
                            tracing::debug!(expired = n, "Expired idle series.");
                        }
                    }
                    _ = rx.changed() => return,
                }
            }
        })
    };

    // Breaker ticker: pending statsd outcomes into the breakers, and
    // time-driven transitions (open -> half-open), every 100 ms.
    let ticker = {
        let (services, clock, mut rx) = (services.clone(), clock.clone(), stop_rx.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        let s = services.current();
                        let now = clock.now();
                        s.breakers.tick(now);
                        s.limits.sweep_if_due(now);
                    }
                    _ = rx.changed() => return,
                }
            }
        })
    };

    // Shared store: push and read shared windows every sync interval, and
    // probe the store while it is down (so that sharing resumes and
    // `rollstat_store_up` returns to 1 without waiting for traffic).
    let store_task = store.clone().map(|store| {
        let (clock, mut rx) = (clock.clone(), stop_rx.clone());
        let (fleet, registry) = (fleet.clone(), registry.clone());
        let every = store.config().sync_interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut first = true;
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        let synced = match &fleet {
                            Some(f) => f.sync(&registry, &store, clock.now()).await.windows,
                            None => 0,
                        };
                        if synced == 0 && (first || !store.is_up()) {
                            let _ = store.ping(clock.now()).await;
                        }
                        first = false;
                    }
                    _ = rx.changed() => return,
                }
            }
        })
    });

    // SIGHUP reloads the config.
    let hup = {
        let (reloader, mut rx) = (reloader.clone(), stop_rx.clone());
        let mut sig = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    s = sig.recv() => {
                        if s.is_none() { return; }
                        let r = reloader.clone();
                        let _ = tokio::task::spawn_blocking(move || r.reload()).await;
                    }
                    _ = rx.changed() => return,
                }
            }
        })
    };

    let state = AppState::new(ingestor.clone(), reloader, state_families, udp_port, &cfg);
    let http = tokio::net::TcpListener::from_std(listeners.http)?;
    let server = tokio::spawn(crate::http::serve::serve(
        http,
        router(state),
        cfg.http.clone(),
        telemetry.clone(),
        stop_rx.clone(),
    ));

    shutdown.await;
    tracing::info!("Shutting down: processing what was received, then exiting.");
    stop.store(true, Ordering::Relaxed);
    let _ = stop_tx.send(true);
    for t in threads {
        let _ = tokio::task::spawn_blocking(move || t.join()).await;
    }
    if let Some(t) = tcp_task {
        let _ = t.await;
    }
    let _ = sweeper.await;
    let _ = ticker.await;
    let _ = hup.await;
    if let Some(t) = store_task {
        let _ = t.await;
    }
    match tokio::time::timeout(Duration::from_secs(5), server).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "HTTP server task failed."),
        Err(_) => tracing::warn!("HTTP connections still open after 5s; exiting anyway."),
    }
    // Every receiver has stopped and flushed: these totals are final. They
    // let an operator (and the integration tests) check that a graceful stop
    // kept what was received.
    tracing::info!(
        udp = ingestor.telemetry.lines(Transport::Udp),
        tcp = ingestor.telemetry.lines(Transport::Tcp),
        unix = ingestor.telemetry.lines(Transport::Unix),
        http = ingestor.telemetry.lines(Transport::Http),
        "rollstat stopped; lines accepted since start, by transport."
    );
    Ok(())
}
