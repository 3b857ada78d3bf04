//! Every family rollstat names, declared once: its name, type, labels and
//! HELP text. The self-metrics are built from these rows (the registered
//! ones in `telemetry` and `store`, those read at scrape time in
//! `telemetry::registry_families` and `expose::signals`), and [`ALL`]
//! lists them for tests and docs. The series' families, [`WINDOWED`]
//! (`expose::families`) and [`FLEET`] (`expose::fleet`), carry the labels
//! named here, then each series' own; the `process_*` families are the
//! prometheus crate's.
//!
//! A row: `CONST: Type "name" [labels] "HELP";`.

use super::{Family, Kind};

/// Declares each row as a constant named after its family, and the list
/// of the rows under the name given first (`$list: $ty`), in order.
macro_rules! table {
    ($(#[$doc:meta])* $list:ident: $ty:ty; $( $id:ident: $kind:ident $name:literal [$($label:literal),*] $help:literal; )*) => {
        $(
            #[doc = concat!("`", $name, "`, its HELP:\n\n```text\n", $help, "\n```")]
            pub const $id: Family = Family {
                name: $name,
                kind: Kind::$kind,
                labels: &[$($label),*],
                help: $help,
            };
        )*
        $(#[$doc])*
        pub const $list: $ty = &[$($id),*];
    };
}

table! {
    /// Every self-metric, in the table's order.
    ALL: &[Family];

    // Ingest: lines, packets and what was refused (`Telemetry`).
    INGEST_LINES_TOTAL: Counter "rollstat_ingest_lines_total" ["transport"]
        "statsd sample lines accepted, by transport.";
    INGEST_PACKETS_TOTAL: Counter "rollstat_ingest_packets_total" ["transport"]
        "Datagrams, TCP reads or HTTP requests received, by transport.";
    INGEST_REJECTED_LINES_TOTAL: Counter "rollstat_ingest_rejected_lines_total" ["reason"]
        "Lines rejected by the statsd parser, or JSON ingest samples rejected before they became lines (bad_json_sample, reserved_character), by reason.";
    INGEST_FRAMING_ERRORS_TOTAL: Counter "rollstat_ingest_framing_errors_total" ["reason"]
        "Lines rejected before parsing (TCP framing), by reason.";
    INGEST_SKIPPED_LINES_TOTAL: Counter "rollstat_ingest_skipped_lines_total" ["kind"]
        "DogStatsD events and service checks recognised and skipped, by kind.";
    INGEST_DROPPED_BY_MAPPING_TOTAL: Counter "rollstat_ingest_dropped_by_mapping_total" []
        "Lines dropped by a `drop` mapping rule.";
    INGEST_TAGS_DROPPED_TOTAL: Counter "rollstat_ingest_tags_dropped_total" ["reason"]
        r#"Tags left out of accepted lines, by reason: valueless (a tag without a value, |#canary or k=, under a statsd_exporter mapping file or cumulative_names = "statsd_exporter", as statsd_exporter leaves it out; otherwise such a tag is published as "true")."#;

    // UDP statsd (`Telemetry`).
    UDP_KERNEL_DROPS: Gauge "rollstat_udp_kernel_drops" []
        "Datagrams the kernel dropped on rollstat's UDP sockets because their receive queue was full (from /proc/net/udp).";
    UDP_RECEIVE_BUFFER_BYTES: Gauge "rollstat_udp_receive_buffer_bytes" []
        "Receive buffer the kernel granted each statsd UDP socket.";
    UDP_WORKER_QUEUE_FULL_TOTAL: Counter "rollstat_udp_worker_queue_full_total" []
        "Times a UDP reader found an ingest worker's queue full and waited for it: the workers are behind, the socket's receive buffer absorbs the wait, and what does not fit is counted in rollstat_udp_kernel_drops.";
    UDP_WORKER_LOST_LINES_TOTAL: Counter "rollstat_udp_worker_lost_lines_total" []
        "Routed statsd lines lost because their ingest worker had stopped (it panicked; see the log). Never expected: above 0 is a bug to report.";
    UDP_ROUTED_DATAGRAMS_TOTAL: Counter "rollstat_udp_routed_datagrams_total" []
        "Datagrams a UDP reader routed to the ingest workers, rather than parsing them itself, because it had fallen behind (4 full drain rounds of 64 datagrams in a row) or lines it routed were not yet applied.";
    UDP_DATAGRAMS_DROPPED_TOTAL: Counter "rollstat_udp_datagrams_dropped_total" ["reason"]
        "statsd UDP datagrams a reader dropped unread, before parsing, by reason: source_not_allowed (a sender address outside ingest.allowed_sources). Not in rollstat_ingest_packets_total.";

    // TCP statsd (`Telemetry`).
    TCP_CONNECTIONS: Gauge "rollstat_tcp_connections" []
        "Open statsd TCP connections (at most ingest.tcp_max_connections).";
    TCP_CONNECTIONS_CLOSED_TOTAL: Counter "rollstat_tcp_connections_closed_total" ["reason"]
        "statsd TCP connections the daemon closed or refused, by reason: connection_cap (beyond ingest.tcp_max_connections, closed at once), idle_timeout (nothing sent for ingest.tcp_idle_timeout_secs), source_not_allowed (a client address outside ingest.allowed_sources, closed at accept).";
    TCP_ACCEPT_ERRORS_TOTAL: Counter "rollstat_tcp_accept_errors_total" []
        "Failed accepts on the statsd TCP listener (e.g. out of file descriptors), each followed by a back-off of up to 1 s.";

    // HTTP (`Telemetry`).
    HTTP_CONNECTIONS: Gauge "rollstat_http_connections" []
        "Open connections to the HTTP listener (at most http.max_connections).";
    HTTP_CONNECTIONS_CLOSED_TOTAL: Counter "rollstat_http_connections_closed_total" ["reason"]
        "HTTP connections the daemon closed or refused, by reason: connection_cap (beyond http.max_connections: 503, closed), header_timeout, body_timeout, idle_timeout, write_timeout (the [http] deadlines; header_timeout includes a TLS handshake not finished in time), tls_handshake (a failed TLS handshake: plain HTTP to an HTTPS listener, a client that refused the certificate or sent none where [http.tls] requires one).";
    HTTP_REQUESTS_REFUSED_TOTAL: Counter "rollstat_http_requests_refused_total" ["reason"]
        r#"HTTP requests refused, by reason: body_too_large (413), unsupported_encoding (415), bad_encoding (400), ambiguous_framing (Content-Length with Transfer-Encoding: 400), api_busy (503), bad_pattern (a ?match= glob: 400), malformed_request (hyper's own 400, e.g. two different Content-Length values, or a broken chunked body), bodies_busy (503), bad_query (a bad limit or cursor: 400), bad_outcomes (breaker outcomes that are not whole numbers up to the cap: 400), unsupported_media_type (an ingest Content-Type other than text/plain, application/x-www-form-urlencoded or application/json, or a JSON route's other than application/json: 415), route_group_off (the route's [http.auth] group is off, e.g. /-/reload by default: 403), unauthenticated (no credentials on a protected route: 401), bad_credentials (a token or user that matches nothing: 401), auth_busy (too many bcrypt verifications at once: 503), host_not_allowed (a Host name the daemon does not answer to: 403), origin_not_allowed (a cross-site Origin: 403), bad_acquire (a rate-limit acquire whose query, key or body cannot be read, e.g. a bad percent-escape or a key that is not UTF-8: 400). A body that does not arrive in time is counted in rollstat_http_connections_closed_total{reason="body_timeout"}."#;
    HTTP_ACCEPT_ERRORS_TOTAL: Counter "rollstat_http_accept_errors_total" []
        "Failed accepts on the HTTP listener (e.g. out of file descriptors), each followed by a back-off of up to 1 s.";

    // Config reloads (`Telemetry`).
    CONFIG_RELOADS_TOTAL: Counter "rollstat_config_reloads_total" ["result"]
        "Config reloads, by result.";
    CONFIG_RELOAD_REFUSALS_TOTAL: Counter "rollstat_config_reload_refusals_total" ["reason"]
        "Config reloads refused (the previous config stays in force), by reason: invalid (a file says something wrong), syntax, unreadable, not_regular (a FIFO, device or directory), too_large, not_utf8, too_deep (nesting), alias_budget (YAML aliases expand too far), services, redis, tls.";
    CONFIG_LAST_RELOAD_SUCCESS: Gauge "rollstat_config_last_reload_success" []
        "1 if the last config reload succeeded (or none was tried), 0 if it failed.";

    // Scrapes (`Telemetry`).
    SCRAPE_DURATION_SECONDS: Histogram "rollstat_scrape_duration_seconds" []
        "Time to render /metrics.";
    SCRAPES_REJECTED_TOTAL: Counter "rollstat_scrapes_rejected_total" []
        "/metrics requests answered 503 because the most scrapes allowed at once were already rendering.";
    SCRAPE_SERIES_LEFT_OUT_TOTAL: Counter "rollstat_scrape_series_left_out_total" []
        "Series left out of a scrape's cumulative families because a family of another type had the same name in the escaping the scraper asked for (under dots or values: statsd a.b and a_dot_b); the family that sorts first is kept.";

    // The process: build, tasks, clock, stop (`Telemetry`).
    BUILD_INFO: Gauge "rollstat_build_info" ["version", "commit", "rustc", "profile"]
        "A metric with a constant 1 value labelled by the version, git commit, rustc version and build profile rollstat was built from.";
    TASK_PANICS_TOTAL: Counter "rollstat_task_panics_total" ["task"]
        "Panics of the daemon's background tasks, by task: sweep (idle series), tick (breakers), store_sync (shared windows), clock (the offset check), sighup_reload; output (an [[outputs]] push task, restarted with its queue); and the statsd reader threads: udp_reader, unix_reader (restarted on the same socket). The task logs it and goes on at its next round; never expected.";
    CLOCK_OFFSET_SECONDS: Gauge "rollstat_clock_offset_seconds" []
        "The wall clock minus the daemon's clock, in seconds, checked every second. The daemon's clock is the wall clock at start plus monotonic time since, so windows never jump; this moves when the wall clock is stepped (NTP, an operator), and a change of a second or more is logged.";
    SHUTDOWN_DRAIN_DEADLINE_TOTAL: Counter "rollstat_shutdown_drain_deadline_total" ["transport"]
        "Stop drains cut short by ingest.drain_timeout_ms, by transport (udp, unix, tcp): at stop, datagrams or bytes were still queued for that transport when the deadline passed, and were not applied. Counted once per transport per stop; the stop log says how much was drained and left.";

    // `[[relay]]` destinations (`RelayFamilies`).
    RELAY_LINES_SENT_TOTAL: Counter "rollstat_relay_lines_sent_total" ["relay"]
        "statsd lines sent to a [[relay]] destination, by relay (name, default its address). A UDP datagram counts as sent when the kernel took it.";
    RELAY_DATAGRAMS_SENT_TOTAL: Counter "rollstat_relay_datagrams_sent_total" ["relay"]
        "Datagrams (UDP) or writes (TCP) sent to a [[relay]] destination, each at most its max_datagram_bytes, by relay.";
    RELAY_BYTES_SENT_TOTAL: Counter "rollstat_relay_bytes_sent_total" ["relay"]
        "Bytes of statsd lines sent to a [[relay]] destination, by relay.";
    RELAY_LINES_DROPPED_TOTAL: Counter "rollstat_relay_lines_dropped_total" ["relay", "reason"]
        "Lines meant for a [[relay]] destination that did not reach it, by relay and reason: buffer_full (buffer_bytes full: the destination is slow or down; ingest never waits), too_long (longer than max_datagram_bytes), send_error (UDP send failed, e.g. nothing listens), connection_lost (TCP write failed or timed out), stop_deadline (still buffered when the stop's deadline passed). Lines rollstat itself counts are not affected.";
    RELAY_BUFFERED_BYTES: Gauge "rollstat_relay_buffered_bytes" ["relay"]
        "Bytes of lines waiting for a [[relay]] destination (at most its buffer_bytes), by relay.";
    RELAY_CONNECTED: Gauge "rollstat_relay_connected" ["relay"]
        "1 while a [[relay]] destination is usable (UDP: address resolved; TCP: connected), else 0, by relay.";

    // `[[outputs]]`: pushes to remote-write receivers (`output::metrics`).
    OUTPUT_BATCHES_TOTAL: Counter "rollstat_output_batches_total" ["output", "result"]
        "Batches an [[outputs]] receiver was sent or lost, by output and result: sent (answered 2xx), refused (answered 4xx other than 429, or for OTLP any failure but 429, 502, 503 and 504: never retried, the receiver says the batch is bad), queue_full (dropped unsent, the oldest first, to keep queue_max_bytes), stop_deadline (still queued when the stop's final flush ran out of stop_timeout_ms), removed (queued for an output a reload removed).";
    OUTPUT_SAMPLES_TOTAL: Counter "rollstat_output_samples_total" ["output", "result"]
        "Samples in the batches of rollstat_output_batches_total, by output and the batch's result.";
    OUTPUT_SENT_BYTES_TOTAL: Counter "rollstat_output_sent_bytes_total" ["output"]
        "Compressed request bytes an [[outputs]] receiver accepted (2xx), by output.";
    OUTPUT_RETRIES_TOTAL: Counter "rollstat_output_retries_total" ["output", "reason"]
        "Tries of a batch that failed and will be tried again after a capped, jittered back-off, by output and reason: server_error (5xx; for OTLP 502, 503, 504), too_many_requests (429; its Retry-After is honoured), connect, tls, timeout (timeout_ms), protocol (a broken HTTP answer).";
    OUTPUT_QUEUE_BYTES: Gauge "rollstat_output_queue_bytes" ["output"]
        "Compressed bytes of batches waiting for an [[outputs]] receiver (at most its queue_max_bytes), by output.";
    OUTPUT_LAST_SUCCESS_SECONDS: Gauge "rollstat_output_last_success_timestamp_seconds" ["output"]
        "Unix time of the last batch an [[outputs]] receiver accepted (0: none yet), by output.";
    OUTPUT_UNWRITTEN_SAMPLES_TOTAL: Counter "rollstat_output_unwritten_samples_total" ["output"]
        "Samples (native histograms among them) in batches a receiver answered 2xx but said it did not write (remote write 2.0: its X-Prometheus-Remote-Write-*-Written headers; OTLP: rejected_data_points of its partial_success), by output.";
    OUTPUT_PROTOCOL: Gauge "rollstat_output_protocol" ["output"]
        "The remote write version an [[outputs]] output speaks now, 1 or 2 (protocol = \"2.0\" falls back to 1 for a receiver that does not speak 2.0, until a reload changes the output); 0 for an OTLP output, by output.";
    OUTPUT_PUSH_SECONDS: Gauge "rollstat_output_push_seconds" ["output"]
        "Seconds the last push of an [[outputs]] output took to write and compress its batches (not to send them), by output.";

    // The series registry, read at scrape time (`telemetry::registry_families`).
    SERIES: Gauge "rollstat_series" []
        "Series held (name + tag set).";
    SERIES_CREATED_TOTAL: Counter "rollstat_series_created_total" []
        "Series created.";
    SERIES_EXPIRED_TOTAL: Counter "rollstat_series_expired_total" []
        "Series removed after their TTL without writes.";
    SERIES_TAGS_DROPPED_TOTAL: Counter "rollstat_series_tags_dropped_total" []
        "Tags left out of a new series' labels because another tag on the line sanitised to the same label name (e.g. content-type and content_type).";
    SERIES_REFUSED_TOTAL: Counter "rollstat_series_refused_total" ["reason"]
        "Lines refused by the series registry, by reason: type_conflict (the name belongs to another statsd type), series_cap (series.max_series), label_collision (another raw name or tag set publishes the same series), overflow (the line would make a stored number infinite), labels_too_large (series.max_label_bytes), metric_series_cap (series.max_series_per_metric).";
    SERIES_NEGATIVE_INCREMENTS_TOTAL: Counter "rollstat_series_negative_increments_total" []
        "Counter lines with a negative increment (statsd decrement): folded into the windows (whose sums may go negative), left out of the cumulative _total, which only goes up.";
    SERIES_REPLANNED_TOTAL: Counter "rollstat_series_replanned_total" ["outcome"]
        "Existing series re-planned by config reloads, by outcome: kept (unchanged), rewindowed (new windows, cumulative values kept), removed (dropped, renamed or relabelled by the new rules).";

    // The sketches' memory budget, read at scrape time (`telemetry::registry_families`).
    SKETCH_MEMORY_BYTES: Gauge "rollstat_sketch_memory_bytes" []
        "Heap bytes the window buckets' quantile sketches and distinct counters hold.";
    SKETCH_MEMORY_LIMIT_BYTES: Gauge "rollstat_sketch_memory_limit_bytes" []
        "What the sketches may hold: series.max_memory_bytes less what series.max_series series need at their worst without sketches.";
    SKETCH_COARSENED_TOTAL: Counter "rollstat_sketch_coarsened_total" ["kind"]
        "Values that would have grown a sketch past rollstat_sketch_memory_limit_bytes, by kind: quantile (a timer, histogram or distribution value counted in the nearest bin the sketch has; sums, counts, min and max stay exact), distinct (a set member left out; the distinct count may be low).";

    // The shared store, Redis (`store::StoreMetrics`).
    STORE_UP: Gauge "rollstat_store_up" []
        "1 if the last call of every operation (limit, windows) to the shared store (Redis) succeeded, else 0";
    STORE_OP_UP: Gauge "rollstat_store_op_up" ["op"]
        "1 if the last call of this operation to the shared store succeeded, else 0; each operation has its own health and backoff";
    STORE_ERRORS_TOTAL: Counter "rollstat_store_errors_total" ["op"]
        "Calls to the shared store that failed or timed out, by operation";
    STORE_REFUSED_TOTAL: Counter "rollstat_store_refused_total" ["op", "reason"]
        "Limit calls and window syncs Redis refused for their keys (the store staying up), by operation and reason: wrong_type (a key of another type), script (the script failed on what a key holds), oom (writes refused at maxmemory)";
    STORE_SKIPPED_TOTAL: Counter "rollstat_store_skipped_total" ["op"]
        "Calls not sent to the shared store because it is down and backing off";
    STORE_CALLS_TOTAL: Counter "rollstat_store_calls_total" ["op"]
        "Successful calls to the shared store, by operation";
    STORE_SCRIPT_LOADS_TOTAL: Counter "rollstat_store_script_loads_total" []
        "Lua scripts loaded into the shared store after a NOSCRIPT answer";
    STORE_UNSHARED_DELTAS_TOTAL: Counter "rollstat_store_unshared_deltas_total" ["reason"]
        "Window bucket deltas that could not be pushed to the shared store, by reason";
    STORE_WRITEBACK_TOTAL: Counter "rollstat_store_writeback_total" ["result"]
        "Admissions made by a shared limit's local fallback, by what became of them when written back to the shared store";
    STORE_FINAL_SYNC_TOTAL: Counter "rollstat_store_final_sync_total" ["result"]
        "The last shared-window sync at stop, by result";
    FLEET_UNSHARED_SERIES: Gauge "rollstat_fleet_unshared_series" ["reason"]
        "Series of a shared mapping rule whose windows are kept local, by reason (cap: redis.max_shared_series reached; labels: name and labels over redis.max_shared_label_bytes)";
    FLEET_FOLDED_DELTAS_TOTAL: Counter "rollstat_fleet_folded_deltas_total" []
        "Shared bucket deltas whose quantile bins were more than redis.max_shared_bins and were sent with their lowest bins folded into the next one up (upper quantiles keep their accuracy, lower ones read high)";
    FLEET_PARTIAL_WINDOWS: Gauge "rollstat_fleet_partial_windows" []
        "Shared windows whose fleet min, max and quantiles are left out because an instance sharing them sends no range or bins (an older rollstat); their samples, sum, rate and average are still published";

    // Breakers, read at scrape time (`expose::signals`).
    BREAKER_STATE: Gauge "rollstat_breaker_state" ["breaker", "kind"]
        "Breaker state: 0 closed, 1 open, 2 half-open (SRE breakers: 1 while the drop ratio is above 0).";
    BREAKER_DROP_RATIO: Gauge "rollstat_breaker_drop_ratio" ["breaker", "kind"]
        "Probability that a call is shed now (SRE: the adaptive-throttling ratio; error-rate: 0 or 1).";
    BREAKER_REQUESTS: Gauge "rollstat_breaker_requests" ["breaker", "kind"]
        "Requests in the window (or half-open trials) the breaker's decision rests on.";
    BREAKER_FAILURES: Gauge "rollstat_breaker_failures" ["breaker", "kind"]
        "Failures among rollstat_breaker_requests.";
    BREAKER_FAILURE_RATIO: Gauge "rollstat_breaker_failure_ratio" ["breaker", "kind"]
        "Failures over the calls that ran, in the window.";
    BREAKER_TRANSITIONS_TOTAL: Counter "rollstat_breaker_transitions_total" ["breaker", "from", "to"]
        "Breaker state transitions, by from and to.";

    // Envoy's rate-limit service (`rls::service::Rls`).
    RLS_REQUESTS_TOTAL: Counter "rollstat_rls_requests_total" ["result"]
        "ShouldRateLimit calls answered (over gRPC, or POST /json), by result: ok, over_limit, refused (a malformed request or one past an [rls] cap, answered INVALID_ARGUMENT or RESOURCE_EXHAUSTED).";
    RLS_HITS_TOTAL: Counter "rollstat_rls_hits_total" ["domain", "descriptor", "result"]
        "Hits of descriptors that fell under a configured rule, by domain, descriptor (the rule's place below its domain, as envoyproxy/ratelimit names its stats: key_value.key2; with detailed_metric or value_to_metric, the request's values as the reference names them, up to [rls] max_detailed_series names per rule) and result: total_hits, within_limit (recorded), near_limit (recorded past 80% of the limit), over_limit, shadow_mode (over the limit, answered OK in shadow mode).";
    RLS_SHARED_TOTAL: Counter "rollstat_rls_shared_total" ["by"]
        "ShouldRateLimit calls decided with [rls] shared = true, by who decided: store (Redis, all or nothing), partial (a Redis Cluster race: refused on one slot after the request's other slots recorded it), local_history (refused by this instance's own history, or a new key past max_keys, without asking Redis), fallback_local, fallback_allow, fallback_deny (answered as on_store_error says while Redis failed).";
    RLS_HITS_RATE: Gauge "rollstat_rls_hits_rate" ["domain", "descriptor", "result", "window"]
        "Hits per second of each rollstat_rls_hits_total row over each of the [[windows]] (read at scrape time, as rollstat_window_rate is): by domain, descriptor, result and window.";
    RLS_DETAIL_DROPPED_TOTAL: Counter "rollstat_rls_detail_dropped_total" ["domain", "descriptor"]
        "Descriptors of a rule with detailed_metric or value_to_metric counted under the rule's own name (descriptor) because the rule already had [rls] max_detailed_series names of request values.";
    OTLP_STREAMS: Gauge "rollstat_otlp_streams" []
        "Cumulative OTLP streams whose last point rollstat keeps to turn their totals into increments (at most series.max_series, within [otlp] max_stream_bytes; forgotten after series.ttl_secs unwritten).";
    OTLP_STREAM_RESETS_TOTAL: Counter "rollstat_otlp_stream_resets_total" []
        "Cumulative OTLP points that reset their stream (a new start time, a value or bucket count that went down, a finer scale) and were counted whole, never as a negative increment.";
    OTLP_GRPC_CONNECTIONS: Gauge "rollstat_otlp_grpc_connections" []
        "Connections open on the OTLP/gRPC listener ([listen] otlp_grpc), in setup or served (at most 1024; one more is refused, counted as connection_cap).";
    OTLP_GRPC_REFUSED_TOTAL: Counter "rollstat_otlp_grpc_refused_total" ["reason"]
        "OTLP/gRPC connections refused or closed before or outside an Export call, by reason: tls_handshake (with [http.tls]: a failed or stalled handshake), connection_cap (past 1024 connections: GOAWAY, closed), preface_timeout (no HTTP/2 preface within 10 s), bad_preface (first bytes that are not the HTTP/2 preface), connection_age (never: no age cap), busy (an Export call answered UNAVAILABLE while OTLP requests were applied in every slot for a second).";
    RLS_CONNECTIONS: Gauge "rollstat_rls_connections" []
        "Connections open on the rate-limit service's gRPC listener, in setup or served (at most [rls] max_connections; one more is refused, counted as connection_cap).";
    RLS_REFUSED_TOTAL: Counter "rollstat_rls_refused_total" ["reason"]
        "ShouldRateLimit calls refused before any decision, by reason: tls_handshake (a connection, with [rls.tls]: a failed or stalled handshake), connection_cap (a connection past rls.max_connections: GOAWAY, closed), preface_timeout (a connection that sent no HTTP/2 preface within rls.handshake_timeout_ms), bad_preface (a connection whose first bytes are not the HTTP/2 preface), connection_age (a connection closed at rls.max_connection_age_ms), bad_json (a POST /json body that is not a request), too_large (past max_request_bytes), no_domain, no_descriptors, no_entries, too_many_descriptors, too_many_entries, value_too_long, hits_too_large, bad_override.";

    // Rate limits, read at scrape time (`expose::signals`).
    LIMIT_DECISIONS_TOTAL: Counter "rollstat_limit_decisions_total" ["limit", "decision"]
        "Rate-limit decisions, by limit and decision: allowed and denied by a limiter (this instance's, its local fallback, or Redis), error (a request refused: too heavy, or a new key at max_keys), fallback_allowed and fallback_denied (answered by on_store_error = allow or deny while the shared store failed).";
    LIMIT_KEYS: Gauge "rollstat_limit_keys" ["limit"]
        "Keys a rate limit tracks now.";
    LIMIT_EVICTED_KEYS_TOTAL: Counter "rollstat_limit_evicted_keys_total" ["limit", "cause"]
        "Keys a rate limit dropped: idle (no information lost), cap (a key with history forgotten: only under overflow = evict_least_recent, or at a reload to a smaller max_keys), rejected_new (new key refused at max_keys).";
}

table! {
    /// The windowed families of every series and window, in the order they
    /// are written (`expose::families::windowed_values` gives their values
    /// by the same index).
    WINDOWED: &[Family; 8];
    WINDOW_SAMPLES: Gauge "rollstat_window_samples" ["metric", "window"]
        "Samples in the window, weighted by 1/sample_rate (go-zero Count).";
    WINDOW_SUM_VALUE: Gauge "rollstat_window_sum_value" ["metric", "window"]
        "Sum of values in the window, weighted by 1/sample_rate (go-zero Sum).";
    WINDOW_RATE: Gauge "rollstat_window_rate" ["metric", "window"]
        "Per second over the time the window's buckets cover: increments for counters, samples for other types.";
    WINDOW_AVG: Gauge "rollstat_window_avg" ["metric", "window"]
        "Average value in the window (sum / samples).";
    WINDOW_MIN: Gauge "rollstat_window_min" ["metric", "window"]
        "Smallest value in the window.";
    WINDOW_MAX: Gauge "rollstat_window_max" ["metric", "window"]
        "Largest value in the window.";
    WINDOW_QUANTILE: Gauge "rollstat_window_quantile" ["metric", "window", "q"]
        "Quantile of the values in the window (DDSketch, 1% relative error), by q.";
    WINDOW_UNIQUE: Gauge "rollstat_window_unique" ["metric", "window"]
        "Distinct set members in the window.";
}

table! {
    /// The fleet view of every shared series and window (through Redis),
    /// in the order `expose::fleet` fills them.
    FLEET: &[Family; 8];
    FLEET_WINDOW_SAMPLES: Gauge "rollstat_fleet_window_samples" ["metric", "window"]
        "Samples in the window over every instance sharing the series (fleet view through Redis).";
    FLEET_WINDOW_SUM_VALUE: Gauge "rollstat_fleet_window_sum_value" ["metric", "window"]
        "Sum of values in the window over every instance sharing the series.";
    FLEET_WINDOW_RATE: Gauge "rollstat_fleet_window_rate" ["metric", "window"]
        "Per second over the window, over every instance sharing the series: increments for counters, samples for other types.";
    FLEET_WINDOW_AVG: Gauge "rollstat_fleet_window_avg" ["metric", "window"]
        "Average value in the window over every instance sharing the series.";
    FLEET_WINDOW_MIN: Gauge "rollstat_fleet_window_min" ["metric", "window"]
        "Smallest value in the window over every instance sharing the series.";
    FLEET_WINDOW_MAX: Gauge "rollstat_fleet_window_max" ["metric", "window"]
        "Largest value in the window over every instance sharing the series.";
    FLEET_WINDOW_QUANTILE: Gauge "rollstat_fleet_window_quantile" ["metric", "window", "q"]
        "Quantile of the values in the window over every instance sharing the series (DDSketch bins added up in Redis, 1% relative error), by q.";
    FLEET_WINDOW_UNIQUE: Gauge "rollstat_fleet_window_unique" ["metric", "window"]
        "Distinct set members in the window over every instance sharing the series (exact while no bucket holds more than 512 over the fleet, else Redis HyperLogLog, 0.81% standard error).";
}
