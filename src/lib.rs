//! # rollstat
//!
//! A real-time metrics aggregator with rolling windows. This crate is both the
//! library (every algorithm, usable on its own inside a Rust service, the way
//! go-zero's `collection` package is used inside Go services) and the
//! `rollstat` daemon built on it.
//!
//! ## Data flow
//!
//! ```text
//!              +-------------------- daemon (wiring, tasks, shutdown) --------------------+
//!  UDP/TCP/HTTP|                                                                          |
//!   bytes ---> ingest ---> parse ---> series ---> window ---> stats/breaker/limit ---> expose
//!              (sockets)   (pure)     (registry)  (ring of    (signals: rate, avg,     (/metrics,
//!                                                  buckets)    quantiles, decisions)    JSON, page)
//!    clock ------------------------------------------^ read once per batch / scrape / request,
//!                                                      then passed down as `now`
//! ```
//!
//! The rule behind the layout: arrows point one way, and the middle of the
//! pipeline is plain data and functions. The algorithm modules (`clock`,
//! `parse`, `window`, `sketch`, `stats`, `limit`, `breaker`, `mapping`,
//! `names`, `access`, `config`, `series`) never touch a socket, tokio, hyper, redis or
//! the prometheus crate, and never read the OS clock; only [`clock`] does.
//! The daemon modules (`store`, `fleet`, `service`, `telemetry`, `expose`,
//! `ingest`, `http`, `reload`, `daemon`) wire them to the world.
//!
//! ## Library modules, in flow order
//!
//! * [`clock`]: [`Timestamp`] (Unix nanoseconds), the [`Clock`] trait,
//!   [`SystemClock`] and [`ManualClock`]. The only reader of OS time.
//! * [`parse`]: statsd/DogStatsD datagrams to borrowed samples, one result
//!   per line, no allocation; rejections carry a stable reason label.
//! * [`window`]: [`RollingWindow<B>`](window::RollingWindow), go-zero's ring of
//!   time buckets with `add(v, now)` / `reduce(now)` and ignore-current, generic
//!   over the bucket type; the bucket types in [`window::bucket`].
//! * [`stats`]: windowed statistics from a reduce: sum, count, average, rate
//!   per second over the time actually covered, min/max, quantiles from a
//!   mergeable DDSketch, distinct counts for sets.
//! * [`limit`]: keyed sliding-window rate limiters: the exact sliding log (at
//!   most N in *any* interval of length W) and the approximate sliding counter.
//! * [`breaker`]: circuit breakers fed with outcomes: Google SRE adaptive
//!   throttling as in go-zero, and an error-rate breaker with
//!   closed/open/half-open states.
//! * [`sketch`]: the mergeable sketches inside buckets (DDSketch quantiles,
//!   exact-then-HyperLogLog distinct counts).
//! * [`mapping`]: globs and anchored regexes with captures, and templates, for mapping rules.
//! * [`series`]: the sharded, bounded registry from statsd samples to
//!   per-series windows.
//!
//! ## Daemon modules
//!
//! * [`config`]: `config.toml` read into [`config::Config`], a record of the
//!   settings each module owns (`series::SeriesConfig`, `service::LimitDef`,
//!   `store::RedisConfig`, ...), every problem reported with its key and
//!   line; [`file`]: the files a config names, read under a cap.
//! * [`access`]: who may use which HTTP route (route groups, bearer tokens
//!   and bcrypt users, the Host and Origin rules), as pure data and checks
//!   the HTTP layer asks.
//! * [`store`]: Redis, for limits and window buckets shared by a fleet;
//!   [`fleet`]: which shared windows to push, and the fleet view.
//! * [`service`]: named breakers (fed by statsd) and keyed limits, and what
//!   a shared limit answers when the store fails.
//! * [`telemetry`] holds the self-metrics, declared once in
//!   [`family::table`]; [`family`] builds every family on `/metrics`.
//! * [`expose`]: `/metrics` (text and OpenMetrics), the JSON shapes, the
//!   live page.
//! * [`relay`]: accepted lines copied to other statsd servers (`[[relay]]`),
//!   through bounded buffers the ingest path never waits on.
//! * [`ingest`]: UDP, TCP and Unix transports, and the one path from bytes to
//!   the registry.
//! * [`daemon`]: [`daemon::State::build`] makes the whole state without a
//!   socket (and its HTTP router, for in-process tests); `run` binds, spawns,
//!   waits and stops in order. The router (`http`), reloads (`reload`) and
//!   log escaping (`escape`) are crate-internal.
//! * [`fdlimit`]: the open-file limit, raised at start and checked against
//!   the connection caps.
//! * [`tls`]: the HTTP listener's TLS settings from `[http.tls]` (built by
//!   `check-config` too), swapped on reload.
//! * [`error`]: an error shown with its chain of causes, one per line.
//!
//! The layers, and a test that keeps every import pointing down them, are
//! in `docs/architecture.md` and `tests/layering.rs`.
//!
//! ## Quick example
//!
//! ```
//! use std::time::Duration;
//! use rollstat::{ManualClock, Clock};
//! use rollstat::window::{RollingWindow, WindowSpec, bucket::SumCount};
//!
//! let clock = ManualClock::new();
//! // 10 buckets of 100 ms: a 1 s window, grid anchored where go-zero anchors it.
//! let spec = WindowSpec::new(10, Duration::from_millis(100)).unwrap();
//! let mut w: RollingWindow<SumCount> = RollingWindow::new(spec, clock.now());
//! w.add(2.0, clock.now());
//! clock.advance(Duration::from_millis(250));
//! w.add(3.0, clock.now());
//! let total = w.reduce(clock.now());
//! assert_eq!((total.sum, total.count), (5.0, 2));
//! // A second later the first value has expired; the second is still there.
//! clock.advance(Duration::from_millis(800));
//! assert_eq!(w.reduce(clock.now()).sum, 3.0);
//! ```
//!
//! ## Concurrency
//!
//! The core types are plain single-owner structs whose methods take
//! `&mut self` and `now`; they hold no locks and no clock. Sharing across
//! threads is a wrapper's job: [`window::SharedWindow`] puts a window behind a
//! short `parking_lot::Mutex`, and the keyed limiters shard their keys over
//! several mutexes. The `core` benchmarks measure both under two threads.

// Functions short enough to read at once (threshold in .clippy.toml).
#![deny(clippy::too_many_lines)]
#![forbid(unsafe_code)]
#![deny(clippy::disallowed_methods, clippy::disallowed_types)]
#![warn(missing_docs)]

pub mod access;
pub mod breaker;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod error;
pub(crate) mod escape;
pub mod expose;
pub mod family;
pub mod fdlimit;
pub mod file;
pub mod fleet;
pub mod host;
pub(crate) mod http;
pub mod ingest;
pub mod limit;
pub mod mapping;
pub mod names;
pub mod otlp;
pub mod output;
pub mod parse;
pub mod probe;
pub mod relay;
pub(crate) mod reload;
pub mod rls;
pub mod series;
pub mod service;
pub mod sketch;
pub mod stats;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod window;

pub use clock::{Clock, ManualClock, SystemClock, Timestamp};

/// The Rust examples of `docs/library.md`, compiled and run by `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../docs/library.md")]
pub struct LibraryDoctests;
