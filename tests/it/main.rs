//! Integration tests: the real `rollstat` binary on loopback, driven the way
//! users drive it (statsd clients, HTTP, signals) and read back through
//! `/metrics`, the JSON API, promtool, a real Prometheus, the Grafana
//! dashboards' queries and the live page in headless Chromium.
//!
//! External tools (promtool, prometheus, the Python and Node clients,
//! chromium and chromedriver, redis-server and redis-cli, victoria-metrics)
//! are installed by `.ci/install-deps`; a test that misses one fails and
//! says so. The exceptions: off CI, the `redis` tests skip with a message
//! when redis-server is missing, and the VictoriaMetrics receiver's tests
//! when victoria-metrics is (under CI, with `CI` set, they fail).

// These tests run a real process on the real clock: deadlines need `Instant`.
#![allow(clippy::disallowed_methods)]

// Helpers by concern (daemon, configs, HTTP, polling, processes, Prometheus, load), over the harness in crates/testkit.
mod support;
// A WebDriver client: chromedriver driving headless Chromium (for `page`).
mod browser;
// The sliding-window exactness validator over a keep-alive HTTP client (for `signals` and `redis`).
mod exactness;
// redis-server processes and a 3-node cluster on loopback (for `redis`).
mod redis_server;

// Route groups, credentials, Host and Origin rules on the real binary.
mod access;
// Real statsd clients (Python statsd, datadog, Node hot-shots) end to end.
mod clients;
// statsd_exporter's own mapper scenarios: check-config loads every file as statsd_exporter does; one scenario's lines on /metrics.
mod compat_mappings;
// Client tag forms (PHP `|#k:v,#k2:v2`, SignalFx mid-name) get statsd_exporter's labels on /metrics.
mod compat_lines;
// Files a config names, hostile or careless: deep nesting, alias bombs, FIFOs, huge files; refused, counted, the old config kept.
mod config_files;
// The registry's memory budget: spread timer values coarsened and counted, the sketches within their limit.
mod memory_budget;
// The docs: links, TOML and shell snippets, the config reference and the self-metrics list, against the real binary.
mod docs;
// The Grafana dashboards: generated, importable, every query checked by promtool and a real Prometheus.
mod dashboards;
// What /metrics and the JSON API publish: promtool, duplicates, OpenMetrics, gzip.
mod exposition;
// Every negotiated format (text 0.0.4/1.0.0, OpenMetrics, protobuf) and escaping read back by an independent parser.
mod formats;
// Malformed datagrams, HTTP bodies and TCP lines: counted, never costing good lines.
mod hostile;
// Bad input costs only itself: JSON ingest sample by sample, media types, escaped logs.
mod ingest_input;
// HTTP deadlines and caps, body rules, linear globs, paginated registry reads.
mod http_limits;
// Process lifecycle: check-config, SIGTERM, reloads, the sample config.
mod lifecycle;
// The key cap is global and evicts no active key; strict percent-decoding and JSON errors; true fallback answers and counts; [redis] at check-config and reload.
mod limit_caps;
// The live page at / in headless Chromium: real data, no console errors, a screenshot.
mod page;
// Operations: --version and rollstat_build_info, JSON logs, completions and the man page.
mod ops;
// Absurd outcome counts (statsd 1e300, outcomes above the cap): capped, refused, counted; the ticker lives on.
mod overflow;
// Native histograms over protobuf, read by a real Prometheus with native histograms on.
mod native_histograms;
// A real Prometheus scraping the daemon.
mod prometheus;
// The remote-write receivers of the [[outputs]] tests (Prometheus, VictoriaMetrics), proven with hand-built requests: 1.0 stored, 2.0 dropped, stale markers.
mod push_receivers;
// [[outputs]] remote write: what Prometheus and VictoriaMetrics store equals /metrics; the stop's flush; 5xx, 429, 400, a hanging or absent receiver.
mod push;
// [[outputs]] when the receiver is killed mid-run and restarted on its port: the queue delivered once, ingest and scrapes unblocked, a small queue under its cap.
mod push_faults;
// OTLP ingest: the Python (protobuf) and Node (JSON) OpenTelemetry SDKs, cumulative and delta; hostile points and bodies.
mod otlp_ingest;
// [[outputs]] kind = "otlp": requests decoded with the OpenTelemetry protos equal /metrics; delta temporality; partial_success, 400 and 503.
mod push_otlp;
// [[outputs]] protocol = "2.0": 2.0 requests decoded, the Written headers, the fallback to 1.0 on 415.
mod push_v2;
// statsd_exporter mapping files as they are, convert-mapping, check-config, reload.
mod statsd_exporter;
// statsd_exporter's summaries: each quantile within its objective's rank error, batches seen at a scrape.
mod summaries;
// statsd_exporter mapping files as shops have them: labels named like rollstat's own, invalid regexes, exact durations, short TTLs.
mod statsd_exporter_files;
// Limits and windows shared through real redis-server processes and a cluster: Lua vs memory, two daemons, faults.
mod redis;
// Fleet quantiles, min and max over 3 daemons through a real redis-server and a 3-master cluster; an older instance in the fleet.
mod fleet_sets;
mod fleet_sketches;
// The Redis-format HyperLogLog against a real redis-server: the same registers as PFADD's, counted and merged by PFCOUNT.
mod redis_hll;
// Redis as production runs it: requirepass, an ACL user, TLS (rcgen certificates); credentials never shown.
mod redis_access;
// One acquire of weight 1,000,000 on a shared exact limit is one member and a fast script.
mod redis_heavy;
// One Redis key of the wrong type fails that key only; Redis at maxmemory refuses writes up front.
mod redis_isolation;
// The shared exact log (weighted members, late write-backs, old members) against the in-memory log and a brute-force count, by proptest.
mod redis_log_model;
// max_shared_series and max_shared_label_bytes keep series local, counted.
mod redis_caps;
// Many shared series on a cluster, one pipeline per slot, beside a fail-closed limit.
mod redis_cluster_scale;
// Failover without double admission (two daemons, Redis killed and restarted), per-operation store health, the final sync at stop.
mod redis_failover;
// A window sync that timed out is sent again under its sequence number, applied once.
mod redis_retry;
// Two shapes of one window name on one Redis never trim each other.
mod redis_shapes;
// [[relay]] to a second rollstat over UDP and TCP, filtered, and to destinations that are down.
mod relay;
mod rls;
mod rls_shared;
// The rate-limit service's per-rule metrics: windowed rates of the hits, detailed_metric and value_to_metric names, capped.
mod rls_metrics;
// Hostile clients on the rate-limit gRPC listener: connection and stream caps, deadlines, slow readers, statsd beside a flood.
mod rls_hostile;
// Series bounds from outside: cap, type conflicts, expiry.
mod registry;
// Reload keeps state: limits and breakers edited at a SIGHUP.
mod reload;
// Breakers and rate limits over HTTP and statsd: exactness, trials, recovery.
mod signals;
// The Unix socket's mode, group and life; allowed_sources on UDP and TCP.
mod sockets;
mod stop;
// Service packaging: systemd's READY/RELOADING/STOPPING on NOTIFY_SOCKET, `rollstat probe`.
mod systemd;
// statsd TCP idle timeout and connection cap; the open-file limit at start and in check-config.
mod tcp_limits;
// HTTPS with certificates made in the test: serving, plain HTTP refused, stalled handshakes, client certificates, reloads, Prometheus over TLS.
mod tls;
// Every number served is true as Prometheus reads it; memory bounded in bytes.
mod truth;
// The same lines over UDP, TCP, Unix datagrams and HTTP.
mod transports;
// Rolling windows on the wall clock: rates and values leaving the window.
mod windows;
