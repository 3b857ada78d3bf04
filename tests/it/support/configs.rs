//! The daemon configs of the tests: every listener on 127.0.0.1 port 0, so
//! that each test's daemon gets free ports and prints them.

use super::process::repo;

/// The head of the test configs: every listener on 127.0.0.1 port 0 (as
/// [`Daemon::start_with`] expects), one UDP reader. A macro so that
/// `concat!` can build the configs as constants.
macro_rules! port_0_head {
    () => {
        r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = "127.0.0.1:0"
http = "127.0.0.1:0"

[ingest]
udp_readers = 1
udp_recv_buffer_bytes = 1048576
"#
    };
}

/// The test config: every listener on 127.0.0.1 port 0, one UDP reader,
/// small limits (so the hostile tests can reach them), 1 s buckets in a
/// "5s" and a "2s" window.
pub const TEST_CONFIG: &str = concat!(
    port_0_head!(),
    r#"max_line_bytes = 1024
http_max_body_bytes = 4096

[series]
quantiles = [0.5, 0.99]

[[windows]]
name = "5s"
buckets = 5
interval_ms = 1000

[[windows]]
name = "2s"
buckets = 2
interval_ms = 1000

# The lifecycle tests reload over HTTP (off by default).
[http.auth.admin]
access = "open"
"#
);

/// The sample `config.toml` of the repository with its listeners moved to
/// port 0 (everything else, windows and mappings included, as shipped).
pub fn sample_config_on_port_0() -> String {
    let text = std::fs::read_to_string(repo().join("config.toml")).expect("read config.toml");
    let moved = text
        .replace("\"127.0.0.1:8125\"", "\"127.0.0.1:0\"")
        .replace("\"127.0.0.1:9102\"", "\"127.0.0.1:0\"");
    assert_eq!(
        moved.matches("127.0.0.1:0").count(),
        3,
        "config.toml's listen addresses changed; update sample_config_on_port_0"
    );
    moved
}

/// The config of the dashboards and page tests: every listener on port 0,
/// two windows named like the sample config's, a breaker that trips under
/// [`Load`] and a limit it hits.
pub const LOAD_CONFIG: &str = concat!(
    port_0_head!(),
    r#"
[series]
quantiles = [0.5, 0.9, 0.99]

[[windows]]
name = "10s"
buckets = 10
interval_ms = 1000

[[windows]]
name = "1m"
buckets = 60
interval_ms = 1000
ignore_current = true

[[mappings]]
match = "debug.**"
action = "drop"

[[breakers]]
name = "checkout"
kind = "error_rate"
requests_metric = "checkout.requests"
failures_metric = "checkout.failures"
min_calls = 5
failure_rate_threshold = 0.5
open_duration_ms = 2000
half_open_trials = 3

[[limits]]
name = "api"
algorithm = "exact"
rules = [{ max = 5, window_ms = 1000 }]
"#
);
