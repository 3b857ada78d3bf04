//! Helpers shared by the integration tests, one file per concern. The
//! generic pieces (daemon launcher, HTTP client, scrape parser, temporary
//! directories) come from the harness crate `rollstat_testkit`, which the
//! load tool (`rollstat-blast`) uses too; what is here is test-only. Nothing
//! here sleeps without a bound.
//!
//! * `daemon`: the real `rollstat` binary on port 0 ([`Daemon`]) and the
//!   ways tests talk to it.
//! * `configs`: the test configs ([`TEST_CONFIG`], [`LOAD_CONFIG`], the
//!   sample config on port 0).
//! * `http`: [`http`] and [`try_http`], one request per connection.
//! * scrapes: [`Scrape`] reads `/metrics` as Prometheus does (repeated
//!   series, counters that go down), from the harness.
//! * `poll`: bounded waits ([`wait_until`] and friends), [`assert_close`].
//! * `process`: external tools (promtool, statsd clients) run with a time
//!   limit, child processes ([`Proc`]) that die with the test, temp dirs.
//! * `prometheus`: a real Prometheus and its query API.
//! * `receivers`: remote-write receivers (Prometheus, VictoriaMetrics) and
//!   their query API ([`Receiver`]), for the `[[outputs]]` tests;
//!   `rw_fake`: a scripted receiver that fails on purpose ([`FakeReceiver`]);
//!   `rw_killable`: one killed and restarted on its port ([`KillableReceiver`]).
//! * `proto`: `/metrics` as protobuf, decoded ([`decode_families`]).
//! * `load`: a steady load on the daemon ([`Load`]).
//! * `h2_frames`: a raw HTTP/2 client that breaks the rules on purpose.

mod configs;
mod daemon;
pub mod h2_frames;
mod http;
mod load;
mod poll;
mod process;
mod prometheus;
mod proto;
mod receivers;
mod rw_fake;
mod rw_killable;

pub use configs::{sample_config_on_port_0, LOAD_CONFIG, TEST_CONFIG};
pub use daemon::Daemon;
pub use http::{http, try_http, Response};
pub use load::{Load, LOAD_METRICS};
pub use poll::{assert_close, wait_for, wait_true, wait_until, wait_until_every};
pub use process::{free_port, missing, python, repo, require_tool, run, Output, Proc, TempDir};
pub use prometheus::Prometheus;
pub use proto::{decode_families, PROTO_ACCEPT};
pub use receivers::{Labels, PromReceiver, Receiver, VmReceiver};
pub use rollstat_testkit::scrape::{sample_value, Scrape};
pub use rw_fake::{FakeReceiver, Received, Reply};
pub use rw_killable::KillableReceiver;
