//! The HTTP API: a router built from shared state, testable without a socket.
//!
//! * [`serve`]: the listener: connection cap, `TCP_NODELAY`, accept
//!   back-off, hyper's HTTP/1 per connection, graceful shutdown;
//! * [`conn`]: one connection's header, idle and write deadlines at the
//!   socket;
//! * [`tls`]: the TLS handshake of an HTTPS connection (`[http.tls]`);
//! * [`access`]: route groups, credentials, the Host and Origin rules;
//! * [`body`]: request bodies (framing, encoding, caps, body deadline);
//!   both run in `door`, the one middleware in front of every route;
//! * [`reads`]: registry reads (`/api/v1/series`, `/api/v1/metrics`) off the
//!   reactor under a concurrency cap;
//! * [`ingest`]: `POST /api/v1/ingest`;
//! * [`breakers`]: the breaker routes;
//! * [`limits`]: the limit routes (the list, acquire);
//! * this file: the router and the other handlers.
//!
//! | route | what |
//! |---|---|
//! | `GET /metrics` | Prometheus text (OpenMetrics if asked), gzip if asked |
//! | `GET /api/v1/series?match=<glob>\|metric=<name>&limit=&cursor=` | windowed statistics per series, JSON, paginated |
//! | `GET /api/v1/metrics` | metric names with type and series count |
//! | `POST /api/v1/ingest` | statsd lines (text/plain) or a JSON array of samples (application/json), each line or sample applied or rejected on its own |
//! | `POST /-/reload` | reload the config file |
//! | `GET /healthz` | `ok` |
//! | `GET /-/healthy`, `GET /-/ready` | liveness; readiness (serving, store reachable) ([`health`]) |
//! | `GET /api/v1/breakers`, `GET /api/v1/breakers/{name}` | breaker signals, JSON |
//! | `GET /api/v1/breakers/{name}/decision` | allow or shed, the central verdict |
//! | `POST /api/v1/breakers/{name}/outcomes` | `{"success": n, "failure": n, "slow": n}` |
//! | `GET /api/v1/limits` | limits, rules, key counts and decision counts |
//! | `GET /`, `GET /assets/*` | the live page ([`crate::expose::page`]) |
//! | `POST /api/v1/limits/{name}/acquire` | `?key=..&n=..` or `{"key": .., "n": ..}`: 200 or 429 with RateLimit headers; `"source"` says who decided (`local`, `redis`, `fallback`), `"fallback"` which `on_store_error` answered; every error is JSON `{"error": ...}` |

use std::sync::Arc;
use std::task::Poll;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tower_http::compression::{CompressionLayer, CompressionLevel};

pub mod access;
pub mod body;
pub mod breakers;
pub mod conn;
pub mod handshake;
pub mod health;
pub mod held;
pub mod ingest;
pub mod limits;
pub mod otlp;
pub mod query;
pub mod reads;
pub mod rls;
pub mod serve;
pub mod settings;

pub use settings::HttpLimits;

use crate::expose::negotiate::{negotiate, Escaping, Negotiated, Protocol};
use crate::expose::prometheus::SeriesCollector;
use crate::expose::{openmetrics, proto, text};
use crate::ingest::Ingestor;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Ingest path (registry, telemetry, clock).
    pub ingestor: Arc<Ingestor>,
    /// Config reloads.
    pub reloader: Arc<dyn Reload>,
    /// UDP port whose kernel drops /metrics reports, if UDP is on.
    pub udp_port: Option<u16>,
    /// Largest ingest body.
    pub max_body: usize,
    /// `/metrics` text buffers, reused from one scrape to the next.
    pub metrics_buffers: Arc<text::ChunkPool>,
    /// `/metrics` families other than the series and the self-metrics:
    /// registry statistics, breakers, limits, the fleet view.
    pub state_families: Arc<SeriesCollector>,
    /// Renders of `/metrics` allowed at once ([`MAX_CONCURRENT_SCRAPES`]).
    pub scrape_slots: Arc<tokio::sync::Semaphore>,
    /// Registry reads (`/api/v1/series`, `/api/v1/metrics`) allowed at once.
    pub api_slots: Arc<tokio::sync::Semaphore>,
    /// Their number (`http.max_concurrent_api_reads`), for messages.
    pub api_slots_max: usize,
    /// `http.body_timeout_ms`.
    pub body_timeout: std::time::Duration,
    /// `http.response_timeout_ms`: the time a response that holds a slot
    /// (a scrape without the scraper's own timeout, a registry read) may
    /// take to send ([`held`]).
    pub response_timeout: std::time::Duration,
    /// Who may use which route ([`access`]).
    pub access: access::AccessState,
    /// What `/-/ready` reads ([`health`]).
    pub health: health::Health,
    /// Envoy's rate-limit service, for `POST /json` (with `[rls]`).
    pub rls: Option<Arc<crate::rls::service::RlsHandle>>,
    /// OTLP ingest, for `POST /v1/metrics` (with `[listen] otlp_http`).
    pub otlp: Option<Arc<crate::ingest::otlp::OtlpIngest>>,
}

/// What `POST /-/reload` asks of the daemon: read the config file again
/// and apply it. The daemon's reloader answers; the HTTP layer knows only
/// this much of it.
pub trait Reload: Send + Sync {
    /// On success, what the file changes that takes effect only after a
    /// restart, one sentence each.
    ///
    /// # Errors
    ///
    /// Why the previous config stays in force: the file cannot be read, has
    /// problems, or its breakers and limits cannot be built.
    fn reload_config(&self) -> Result<Vec<&'static str>, Box<dyn std::error::Error + Send + Sync>>;
}

impl AppState {
    /// The state of a daemon under `limits` (`[http]`), taking request
    /// bodies of at most `max_body` bytes (`ingest.http_max_body_bytes`).
    #[must_use]
    pub fn new(
        ingestor: Arc<Ingestor>,
        reloader: Arc<dyn Reload>,
        state_families: Arc<SeriesCollector>,
        access: Arc<crate::access::AccessHandle>,
        health: health::Health,
        limits: &HttpLimits,
        max_body: usize,
    ) -> AppState {
        let api = limits.max_concurrent_api_reads;
        let access = access::AccessState {
            handle: access,
            telemetry: ingestor.telemetry.clone(),
            https: limits.tls_enabled(),
            bcrypt_slots: Arc::new(tokio::sync::Semaphore::new(access::MAX_BCRYPT_AT_ONCE)),
        };
        AppState {
            ingestor,
            reloader,
            udp_port: None,
            rls: None,
            otlp: None,
            max_body,
            metrics_buffers: text::ChunkPool::new(),
            state_families,
            scrape_slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_SCRAPES)),
            api_slots: Arc::new(tokio::sync::Semaphore::new(api)),
            api_slots_max: api,
            body_timeout: limits.body_timeout,
            response_timeout: limits.response_timeout,
            access,
            health,
        }
    }

    /// This state, reporting the kernel's drops on the statsd UDP socket
    /// bound to `port` (if UDP is served).
    #[must_use]
    pub fn with_udp_port(mut self, port: Option<u16>) -> AppState {
        self.udp_port = port;
        self
    }

    /// This state, answering `POST /json` with `rls`.
    #[must_use]
    pub fn with_otlp(mut self, otlp: Option<Arc<crate::ingest::otlp::OtlpIngest>>) -> AppState {
        self.otlp = otlp;
        self
    }

    /// This state with the rate-limit service.
    pub fn with_rls(mut self, rls: Option<Arc<crate::rls::service::RlsHandle>>) -> AppState {
        self.rls = rls;
        self
    }
}

/// `/metrics` scrapes at once; more get 503 with `Retry-After: 1` (counted
/// in `rollstat_scrapes_rejected_total`). A scrape holds its slot while it
/// renders (a core) and until its body is sent or its connection closed (a
/// body's worth of buffers, 54 MB at 100k series), so a burst of scrapers,
/// or clients that stop reading, cannot multiply either; two Prometheus
/// servers of an HA pair and a person with curl fit. A client that stops
/// reading loses its connection (and slot) at `http.write_timeout_ms`; one
/// that reads too slowly at its own scrape timeout or
/// `http.response_timeout_ms` ([`held`]).
pub const MAX_CONCURRENT_SCRAPES: usize = 4;

/// The router.
pub fn router(state: AppState) -> Router {
    let max_body = state.max_body;
    let entry = Door::of(&state);
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/-/healthy", get(health::healthy))
        .route("/-/ready", get(health::ready))
        .route("/healthcheck", get(health::ready))
        .route("/json", post(rls::decide))
        .route("/api/v1/series", get(reads::series))
        .route("/api/v1/metrics", get(reads::metric_names))
        .route(
            "/api/v1/ingest",
            post(ingest::ingest).layer(DefaultBodyLimit::max(max_body)),
        )
        // PUT too, as Prometheus' lifecycle API.
        .route("/-/reload", post(reload).put(reload))
        .route("/api/v1/breakers", get(breakers::list))
        .route("/api/v1/breakers/{name}", get(breakers::one))
        // GET reads what a decision would be; POST takes one (and, half
        // open, a trial permit).
        .route(
            "/api/v1/breakers/{name}/decision",
            get(breakers::peek).post(breakers::decision),
        )
        .route("/api/v1/breakers/{name}/outcomes", post(breakers::outcomes))
        .route("/api/v1/limits", get(limits::list))
        .route(
            "/api/v1/limits/{name}/acquire",
            post(limits::acquire).fallback(limits::wrong_method),
        )
        .merge(crate::expose::page::routes())
        .layer(axum::middleware::from_fn_with_state(entry, door))
        // Fastest gzip: Prometheus asks for gzip on every scrape, and at 100k
        // series level 1 took 0.17 s where the default level took 0.57 s,
        // for a body 7.5% larger (benches/scrape/run.sh).
        .layer(CompressionLayer::new().quality(CompressionLevel::Fastest))
        .with_state(state)
}

/// The OTLP/HTTP listener's router: `POST /v1/metrics` alone, behind the
/// same door (route groups, body deadline, caps, gzip) as the HTTP API;
/// its body cap is `ingest.http_max_body_bytes`.
pub fn otlp_router(state: AppState) -> Router {
    let max_body = state.max_body;
    Router::new()
        .route(
            otlp::PATH,
            post(otlp::export).layer(DefaultBodyLimit::max(max_body)),
        )
        .layer(axum::middleware::from_fn_with_state(Door::of(&state), door))
        .with_state(state)
}

/// What [`door`] holds.
#[derive(Clone)]
struct Door {
    access: access::AccessState,
    body: Arc<body::BodyRules>,
}

impl Door {
    /// The door of a router over `state`: its access rules, and body
    /// rules with a memory budget of their own.
    fn of(state: &AppState) -> Door {
        let max_body = state.max_body;
        Door {
            access: state.access.clone(),
            body: Arc::new(body::BodyRules {
                max_ingest: max_body,
                max_other: body::MAX_SMALL_BODY,
                timeout: state.body_timeout,
                telemetry: state.ingestor.telemetry.clone(),
                budget: Arc::new(tokio::sync::Semaphore::new(body::body_budget(max_body))),
            }),
        }
    }
}

/// One middleware in front of every route: who may come in
/// ([`access::guard`]), then the body ([`body::guard`]), then the handler.
/// Access first, so a refused request's body is never read; one layer, not
/// two, because each layer costs every request a boxed future and a clone
/// of the routes (docs/performance.md).
async fn door(
    State(d): State<Door>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    access::guard(&d.access, req, |req| {
        body::guard(&d.body, req, |req| next.run(req))
    })
    .await
}

async fn metrics(State(st): State<AppState>, headers: HeaderMap) -> Response {
    let asked = negotiated(&st, &headers);
    let Ok(slot) = st.scrape_slots.clone().try_acquire_owned() else {
        st.ingestor.telemetry.scrapes_rejected.inc();
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            format!(
                "{MAX_CONCURRENT_SCRAPES} /metrics scrapes are already rendering; retry in a second\n"
            ),
        )
            .into_response();
    };
    // Sent within the scraper's own timeout (or http.response_timeout_ms): a
    // client that reads slowly cannot keep the slot for hours.
    let within = held::scrape_deadline(
        headers
            .get("x-prometheus-scrape-timeout-seconds")
            .and_then(|v| v.to_str().ok()),
        st.response_timeout,
    );
    let closed = st.ingestor.telemetry.http_closed.clone();
    // Rendering is CPU work proportional to the series count: keep it off
    // the reactor. Pieces come through a channel as they are final, so the
    // response starts while the cumulative families are still being
    // gathered; the channel only holds pointers to buffers the render has
    // already filled (unbounded: a slow client does not stall the render).
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Rendered>();
    tokio::task::spawn_blocking(move || {
        let emit = |p: text::Piece| {
            if !p.is_empty() {
                // The receiver is gone only if the client went away.
                let _ = tx.send(Rendered::Piece(p));
            }
        };
        match render_metrics(&st, asked, emit) {
            Ok(()) => {
                let _ = tx.send(Rendered::Done);
            }
            Err(e) => {
                tracing::error!(error = %e, "Rendering /metrics failed.");
                let _ = tx.send(Rendered::Failed(format!(
                    "rendering /metrics failed: {e}\n"
                )));
            }
        }
    });
    // The first piece (the self-metrics) or the error that came instead.
    let first = match rx.recv().await {
        Some(Rendered::Piece(p)) => Some(p),
        Some(Rendered::Done) => None,
        Some(Rendered::Failed(msg)) => {
            return (StatusCode::INTERNAL_SERVER_ERROR, msg).into_response()
        }
        None => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "rendering /metrics failed: the render task stopped\n",
            )
                .into_response()
        }
    };
    let ct = asked.content_type();
    // The pieces go out as they are: at 100k series they are ~54 MB that a
    // single buffer would copy once more. Each piece's buffer returns to the
    // pool once sent. The body ends cleanly only after the render said it is
    // done: a render that stops half way (a panic) makes the body fail, so
    // the client sees a broken response rather than a valid partial scrape.
    // The scrape's slot is held until the body is sent or dropped, so that
    // at most MAX_CONCURRENT_SCRAPES bodies are in memory at once. A poll_fn
    // stream may be polled again after it ended (the compression layer does).
    let chunks = body_stream(first, rx, slot);
    let body = axum::body::Body::new(held::Held::new(
        axum::body::Body::from_stream(chunks),
        within,
        (),
        closed,
    ));
    (
        [
            (header::CONTENT_TYPE, ct),
            // A cache between scraper and daemon must not give one
            // scraper's format to another.
            (header::VARY, "accept"),
        ],
        body,
    )
        .into_response()
}

/// The format and name escaping of a `/metrics` response, from its
/// `Accept` headers (several are joined with `,`): see [`answered`].
fn negotiated(st: &AppState, headers: &HeaderMap) -> Negotiated {
    let mut accept = Vec::new();
    for v in headers.get_all(header::ACCEPT) {
        if !accept.is_empty() {
            accept.push(b',');
        }
        accept.extend_from_slice(v.as_bytes());
    }
    answered(st, (!accept.is_empty()).then_some(&accept[..]))
}

/// What a scrape whose `Accept` is `accept` is answered with: what it asks
/// for ([`negotiate`]), names escaped with underscores whatever it asks
/// where the plan says so ([`Plan::names_as_asked`](crate::series::Plan::names_as_asked)).
pub fn answered(st: &AppState, accept: Option<&[u8]>) -> Negotiated {
    let mut asked = negotiate(accept);
    if !st.ingestor.registry.plan().names_as_asked() {
        asked.escaping = Escaping::Underscores;
    }
    asked
}

/// The `/metrics` body: `first`, then the pieces from `rx` until the render
/// says [`Rendered::Done`]; an error if it fails or stops without saying so.
/// `hold` (the scrape's slot) lives as long as the body.
fn body_stream(
    mut first: Option<text::Piece>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Rendered>,
    hold: impl Send + 'static,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let mut finished = false;
    futures_util::stream::poll_fn(move |cx| {
        let _held = &hold;
        if let Some(p) = first.take() {
            return Poll::Ready(Some(Ok(Bytes::from_owner(p))));
        }
        if finished {
            return Poll::Ready(None);
        }
        rx.poll_recv(cx).map(|m| match m {
            Some(Rendered::Piece(p)) => Some(Ok(Bytes::from_owner(p))),
            Some(Rendered::Done) => {
                finished = true;
                None
            }
            Some(Rendered::Failed(msg)) => {
                finished = true;
                Some(Err(std::io::Error::other(msg)))
            }
            None => {
                finished = true;
                Some(Err(std::io::Error::other(
                    "rendering /metrics stopped before the end",
                )))
            }
        })
    })
}

/// What the render task hands the `/metrics` response.
enum Rendered {
    /// The next piece of the body.
    Piece(text::Piece),
    /// The render finished; the body is complete.
    Done,
    /// The render failed (only the head can, before any piece).
    Failed(String),
}

/// Renders the whole exposition, handing `emit` the pieces to send in order: the
/// self-metrics, breakers, limits and fleet view through the `prometheus`
/// crate, then every series written by [`text::render`], all as of one
/// clock reading.
pub fn render_metrics(
    st: &AppState,
    asked: Negotiated,
    mut emit: impl FnMut(text::Piece),
) -> prometheus::Result<()> {
    let tel = &st.ingestor.telemetry;
    let timer = tel.scrape_duration.start_timer();
    if let Some(port) = st.udp_port {
        if let Some(d) = crate::ingest::udp::kernel_drops(port) {
            tel.udp_kernel_drops.set(d as i64);
        }
    }
    // One clock reading for everything this scrape publishes.
    let now = st.state_families.now();
    let mut families = tel.registry.gather();
    families.extend(st.state_families.collect_at(now));
    if let Some(rls) = &st.rls {
        families.extend(rls.current().families(now));
    }
    // One writer per core, up to MAX_RENDER_THREADS (below 20k series one
    // writer does it all).
    let threads =
        std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, MAX_RENDER_THREADS));
    let (registry, pool, escaping) = (&st.ingestor.registry, &st.metrics_buffers, asked.escaping);
    let text_format = match asked.protocol {
        Protocol::PrometheusProto => {
            let mut head = Vec::new();
            proto::encode_families(&families, escaping, &mut head);
            emit(text::Piece::owned(head));
            let w = proto::render_each(registry, now, escaping, threads, pool, &mut emit);
            tel.scrape_series_left_out.inc_by(w.left_out as u64);
            None
        }
        Protocol::OpenMetricsText1_0_0 | Protocol::OpenMetricsText0_0_1 => {
            let mut head = String::new();
            openmetrics::encode_families(&families, &mut head)?;
            emit(text::Piece::owned(head.into_bytes()));
            Some(text::Format::OpenMetrics)
        }
        Protocol::PrometheusText1_0_0 | Protocol::PrometheusText0_0_4 => {
            let mut head = String::new();
            prometheus::TextEncoder::new().encode_utf8(&families, &mut head)?;
            emit(text::Piece::owned(head.into_bytes()));
            Some(text::Format::Prometheus)
        }
    };
    if let Some(format) = text_format {
        let w = text::render_each(registry, now, format, escaping, threads, pool, &mut emit);
        // Counted here, published by the next scrape (this one's head is
        // written).
        tel.scrape_series_left_out.inc_by(w.left_out as u64);
        if format == text::Format::OpenMetrics {
            emit(text::Piece::owned(b"# EOF\n".to_vec()));
        }
    }
    timer.observe_duration();
    Ok(())
}

/// Threads that write a large `/metrics` at most (one per core up to this).
/// On the 2-core machine of the README's figures, two writers made a
/// 100k-series scrape faster end to end than one (78-91 against 117 ms,
/// alternating runs), and with statsd arriving at 3M lines/s and a scrape
/// every 0.5 s they lost fewer lines (1.24% and 0.18% against 4.36% and
/// 1.72%): a scrape that ends sooner holds the shard locks and a core for
/// less time.
const MAX_RENDER_THREADS: usize = 4;

pub(crate) fn api_error(code: StatusCode, msg: String) -> Response {
    (code, Json(serde_json::json!({ "error": msg }))).into_response()
}

async fn reload(State(st): State<AppState>) -> Response {
    // Reading the file and re-planning every series is blocking work.
    let reloader = st.reloader.clone();
    match tokio::task::spawn_blocking(move || reloader.reload_config()).await {
        Ok(Ok(r)) => {
            // What the file changes but this process cannot apply, said
            // here as in the log, not only on the next start.
            let mut text = String::from("config reloaded\n");
            for note in r {
                text.push_str("not applied: ");
                text.push_str(note);
                text.push('\n');
            }
            (StatusCode::OK, text).into_response()
        }
        // Either kind of ReloadError is a config to fix: 400.
        Ok(Err(e)) => (
            StatusCode::BAD_REQUEST,
            format!(
                "{}\nthe previous config stays in force\n",
                crate::error::Causes(&*e)
            ),
        )
            .into_response(),
        Err(e) => api_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the reload task failed: {e}"),
        ),
    }
}

pub(crate) fn services(st: &AppState) -> std::sync::Arc<crate::service::Services> {
    st.ingestor.services.current()
}

pub(crate) fn unknown(what: &str, name: &str) -> Response {
    api_error(
        StatusCode::NOT_FOUND,
        format!("no {what} named `{name}` in the config"),
    )
}

#[cfg(test)]
mod tests;
