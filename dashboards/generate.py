#!/usr/bin/env python3
"""Writes rollstat's Grafana dashboards (overview, explorer, breakers, limits).

    python3 dashboards/generate.py          # rewrite dashboards/*.json
    python3 dashboards/generate.py --check  # exit 1 if a committed file differs

The JSON files are committed; `cargo test --test it dashboards` runs --check
and then evaluates every query against a real Prometheus scraping a real rollstat.

Every panel reads the datasource from the `datasource` template variable (type
`datasource`, query `prometheus`), so the files import as they are and work
when provisioned: no datasource UID is written anywhere. Standard library only.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DS = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 39


# === templating ===


def datasource_var():
    return {
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        # Grafana's pattern for dashboards shared outside their instance: the
        # UI import replaces ${DS_PROMETHEUS} (see __inputs) with the chosen
        # datasource; provisioned, the variable falls back to the default
        # Prometheus datasource and stays switchable.
        "current": {"selected": False, "text": "${DS_PROMETHEUS}", "value": "${DS_PROMETHEUS}"},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
    }


def query_var(name, query, label=None, multi=True):
    """A variable filled by label_values(); multi-valued ones default to All (.*)."""
    v = {
        "name": name,
        "label": label or name,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "current": {},
        "hide": 0,
        "includeAll": multi,
        "multi": multi,
        "options": [],
        "refresh": 2,
        "regex": "",
        "sort": 1,
    }
    if multi:
        v["allValue"] = ".*"
        v["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
    return v


INSTANCE = query_var("instance", "label_values(rollstat_build_info, instance)")


# === panels ===


def target(expr, legend="", ref="A", instant=False, fmt=None):
    t = {"datasource": DS, "refId": ref, "expr": expr, "legendFormat": legend, "range": not instant}
    if instant:
        t["instant"] = True
    if fmt:
        t["format"] = fmt
    return t


def targets(*pairs, **kw):
    """(expr, legend) pairs -> targets with refIds A, B, C...; `kw` goes to each target()."""
    return [target(e, l, chr(ord("A") + i), **kw) for i, (e, l) in enumerate(pairs)]


GREEN = {"mode": "absolute", "steps": [{"color": "green", "value": None}]}
LEGEND = {"displayMode": "list", "placement": "bottom", "showLegend": True}


def panel(kind, title, tgts, desc, size, defaults, options, **extra):
    """The fields every panel has, in the order Grafana writes them; `extra` after the options."""
    return {
        "type": kind,
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options,
        **extra,
        "_size": size,
    }


def timeseries(title, tgts, unit="short", desc="", w=12, h=8, stack=False, bars=False, minimum=None, maximum=None):
    custom = {
        "drawStyle": "bars" if bars else "line",
        "lineWidth": 1,
        "fillOpacity": 60 if bars else 10,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"mode": "normal" if stack else "none", "group": "A"},
    }
    defaults = {"unit": unit, "custom": custom, "color": {"mode": "palette-classic"}}
    if minimum is not None:
        defaults["min"] = minimum
    if maximum is not None:
        defaults["max"] = maximum
    options = {"legend": LEGEND, "tooltip": {"mode": "multi", "sort": "desc"}}
    return panel("timeseries", title, tgts, desc, (w, h), defaults, options)


def share(title, tgts, desc="", **kw):
    """A timeseries of a ratio in [0, 1], drawn as a percentage."""
    return timeseries(title, tgts, unit="percentunit", desc=desc, minimum=0, maximum=1, **kw)


def stat(title, tgts, unit="short", desc="", w=6, h=4, mappings=None, thresholds=None):
    defaults = {"unit": unit, "color": {"mode": "thresholds"}, "mappings": mappings or []}
    defaults["thresholds"] = thresholds or GREEN
    options = {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "colorMode": "background",
        "graphMode": "none",
        "textMode": "auto",
        "justifyMode": "auto",
        "orientation": "auto",
    }
    return panel("stat", title, tgts, desc, (w, h), defaults, options)


def table(title, exprs, desc="", w=24, h=8, renames=None):
    """One instant query per expression; several become one row per label set."""
    tgts = targets(*((e, "") for e in exprs), instant=True, fmt="table")
    return panel(
        "table",
        title,
        tgts,
        desc,
        (w, h),
        {"custom": {"align": "auto"}},
        {"showHeader": True, "cellHeight": "sm"},
        transformations=([{"id": "merge", "options": {}}] if len(tgts) > 1 else [])
        + [{"id": "organize", "options": {"excludeByName": {"Time": True, "__name__": True}, "renameByName": renames or {}}}],
    )


BREAKER_STATES = [
    {
        "type": "value",
        "options": {
            "0": {"text": "closed", "color": "green", "index": 0},
            "1": {"text": "open", "color": "red", "index": 1},
            "2": {"text": "half-open", "color": "orange", "index": 2},
        },
    }
]


def state_timeline(title, tgts, desc="", w=24, h=8):
    defaults = {
        "color": {"mode": "thresholds"},
        "mappings": BREAKER_STATES,
        "thresholds": GREEN,
        "custom": {"lineWidth": 0, "fillOpacity": 80},
    }
    options = {
        "mergeValues": True,
        "showValue": "auto",
        "alignValue": "left",
        "rowHeight": 0.9,
        "legend": LEGEND,
        "tooltip": {"mode": "single", "sort": "none"},
    }
    return panel("state-timeline", title, tgts, desc, (w, h), defaults, options)


def row(title):
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "_size": (24, 1)}


def layout(panels):
    """Assigns ids and gridPos left to right, wrapping at Grafana's 24 columns."""
    x = y = row_h = 0
    out = []
    for i, p in enumerate(panels, start=1):
        w, h = p.pop("_size")
        if x + w > 24 or p["type"] == "row":
            x, y, row_h = 0, y + row_h, 0
        p["id"] = i
        p["gridPos"] = {"h": h, "w": w, "x": x, "y": y}
        x += w
        row_h = max(row_h, h)
        if p["type"] == "row":
            x, y, row_h = 0, y + h, 0
        out.append(p)
    return out


def dashboard(uid, title, desc, variables, panels, time_from="now-1h"):
    return {
        "__inputs": [
            {
                "name": "DS_PROMETHEUS",
                "label": "Prometheus",
                "description": "The Prometheus that scrapes rollstat",
                "type": "datasource",
                "pluginId": "prometheus",
                "pluginName": "Prometheus",
            }
        ],
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
        ],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "description": desc,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [
            {"title": "rollstat", "type": "dashboards", "tags": ["rollstat"], "asDropdown": True, "includeVars": False, "keepTime": True}
        ],
        "panels": layout(panels),
        "refresh": "10s",
        "schemaVersion": SCHEMA_VERSION,
        "tags": ["rollstat"],
        "templating": {"list": [datasource_var()] + variables},
        "time": {"from": time_from, "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": title,
        "uid": uid,
        "version": 1,
    }


# === the four dashboards ===

I = 'instance=~"$instance"'
RI = "[$__rate_interval]"


def overview():
    return dashboard(
        "rollstat-overview",
        "rollstat / overview",
        "rollstat's own health: ingest by transport, rejections, UDP drops, series, scrape time, reloads.",
        [INSTANCE],
        [
            row("Ingest"),
            timeseries(
                "Lines accepted by transport",
                targets((f"sum by (transport) (rate(rollstat_ingest_lines_total{{{I}}}{RI}))", "{{transport}}")),
                unit="ops",
                desc="statsd sample lines accepted per second (rollstat_ingest_lines_total).",
                w=8,
            ),
            timeseries(
                "Packets by transport",
                targets((f"sum by (transport) (rate(rollstat_ingest_packets_total{{{I}}}{RI}))", "{{transport}}")),
                unit="pps",
                desc="Datagrams, TCP reads or HTTP requests per second (rollstat_ingest_packets_total).",
                w=8,
            ),
            timeseries(
                "Rejections by reason",
                targets(
                    (f"sum by (reason) (rate(rollstat_ingest_rejected_lines_total{{{I}}}{RI}))", "parse: {{reason}}"),
                    (f"sum by (reason) (rate(rollstat_ingest_framing_errors_total{{{I}}}{RI}))", "framing: {{reason}}"),
                    (f"sum by (reason) (rate(rollstat_series_refused_total{{{I}}}{RI}))", "refused: {{reason}}"),
                    (f"sum(rate(rollstat_ingest_dropped_by_mapping_total{{{I}}}{RI}))", "dropped by mapping"),
                    (f"sum by (kind) (rate(rollstat_ingest_skipped_lines_total{{{I}}}{RI}))", "skipped: {{kind}}"),
                ),
                unit="ops",
                desc="Lines rejected by the parser, by TCP framing and by the series registry; lines dropped by a mapping rule; DogStatsD events and service checks skipped.",
                w=8,
                stack=True,
            ),
            timeseries(
                "UDP kernel drops",
                targets(
                    (f"sum by (instance) (delta(rollstat_udp_kernel_drops{{{I}}}{RI}))", "dropped {{instance}}"),
                    (f"sum by (instance) (increase(rollstat_udp_routed_datagrams_total{{{I}}}{RI}))", "routed to workers {{instance}}"),
                    (f"sum by (instance) (increase(rollstat_udp_worker_queue_full_total{{{I}}}{RI}))", "workers behind {{instance}}"),
                ),
                desc="Per rate interval: datagrams the kernel dropped because rollstat's receive queue was full (from /proc/net/udp); datagrams a UDP reader that fell behind routed to the ingest workers; the times a reader waited for a full ingest-worker queue. Drops above 0 mean lost metrics: with 'workers behind' rising too, add CPU or udp_workers; otherwise raise net.core.rmem_max (or run with CAP_NET_ADMIN) so the buffer covers the stalls. Routing without drops is the hand-off doing its job.",
                w=12,
            ),
            timeseries(
                "UDP receive buffer",
                targets((f"rollstat_udp_receive_buffer_bytes{{{I}}}", "{{instance}}")),
                unit="bytes",
                desc="Receive buffer the kernel granted each statsd UDP socket (capped by net.core.rmem_max).",
                w=12,
            ),
            row("Series"),
            timeseries(
                "Series held",
                targets((f"sum by (instance) (rollstat_series{{{I}}})", "{{instance}}")),
                desc="Series (statsd name + tag set) held; compare with series.max_series.",
                w=12,
            ),
            timeseries(
                "Series churn",
                targets(
                    (f"sum(rate(rollstat_series_created_total{{{I}}}{RI}))", "created"),
                    (f"sum(rate(rollstat_series_expired_total{{{I}}}{RI}))", "expired"),
                    (f"sum by (outcome) (rate(rollstat_series_replanned_total{{{I}}}{RI}))", "reload: {{outcome}}"),
                ),
                unit="ops",
                desc="Series created and expired (series.ttl_secs without writes) per second, and existing series re-planned by config reloads (kept, rewindowed, removed).",
                w=12,
            ),
            row("HTTP refusals and scrapes"),
            timeseries(
                "HTTP requests refused",
                targets((f"sum by (instance, reason) (rate(rollstat_http_requests_refused_total{{{I}}}{RI}))", "{{instance}} {{reason}}")),
                unit="reqps",
                desc="HTTP requests refused per second by reason (rollstat_http_requests_refused_total): 413, 415, 400, 401, 403, 503...",
                w=8,
            ),
            timeseries(
                "HTTP connections closed",
                targets(
                    (f"sum by (instance, reason) (rate(rollstat_http_connections_closed_total{{{I}}}{RI}))", "{{instance}} {{reason}}"),
                    (f"sum by (instance) (rate(rollstat_http_accept_errors_total{{{I}}}{RI}))", "{{instance}} accept errors"),
                ),
                unit="ops",
                desc="Connections the daemon closed or refused by reason (connection_cap, the [http] timeouts, tls_handshake), and failed accepts.",
                w=8,
            ),
            timeseries(
                "Scrapes refused and connections open",
                targets(
                    (f"sum by (instance) (increase(rollstat_scrapes_rejected_total{{{I}}}{RI}))", "{{instance}} scrapes answered 503"),
                    (f"sum by (instance) (rollstat_http_connections{{{I}}})", "{{instance}} open connections"),
                ),
                desc="/metrics requests answered 503 because the most scrapes allowed at once were rendering (per rate interval), and open HTTP connections (at most http.max_connections).",
                w=8,
            ),
            row("Redis store"),
            timeseries(
                "Store up",
                targets(
                    (f"min by (instance) (rollstat_store_up{{{I}}})", "{{instance}} all operations"),
                    (f"min by (instance, op) (rollstat_store_op_up{{{I}}})", "{{instance}} {{op}}"),
                ),
                desc="1 while the last call to Redis succeeded: every operation (rollstat_store_up) and each on its own (rollstat_store_op_up). Only with a [redis] section.",
                w=8,
                minimum=0,
                maximum=1,
            ),
            timeseries(
                "Store calls and errors",
                targets(
                    (f"sum by (instance, op) (rate(rollstat_store_calls_total{{{I}}}{RI}))", "{{instance}} {{op}} ok"),
                    # Failed calls have no series before the first failure: 0 for
                    # every operation that made calls, so the line shows.
                    (
                        f"sum by (instance, op) (rate(rollstat_store_errors_total{{{I}}}{RI})) or 0 * sum by (instance, op) (rate(rollstat_store_calls_total{{{I}}}{RI}))",
                        "{{instance}} {{op}} failed",
                    ),
                ),
                unit="ops",
                desc="Successful and failed (or timed-out) calls to Redis per second, by operation.",
                w=8,
            ),
            timeseries(
                "Series kept local",
                targets(
                    (f"sum by (instance, reason) (rollstat_fleet_unshared_series{{{I}}})", "{{instance}} {{reason}}"),
                    (f"sum by (instance) (rollstat_fleet_partial_windows{{{I}}})", "{{instance}} windows without fleet quantiles"),
                ),
                desc="Series of a shared mapping rule whose windows stay local, by reason (cap: redis.max_shared_series; labels: redis.max_shared_label_bytes); and shared windows whose fleet min, max and quantiles are left out because an older instance shares them.",
                w=8,
            ),
            row("Scrape and config"),
            timeseries(
                "/metrics render time",
                targets(
                    (f"histogram_quantile(0.99, sum by (le) (rate(rollstat_scrape_duration_seconds_bucket{{{I}}}{RI})))", "p99"),
                    (f"histogram_quantile(0.5, sum by (le) (rate(rollstat_scrape_duration_seconds_bucket{{{I}}}{RI})))", "p50"),
                    (f"max by (instance) (scrape_duration_seconds{{{I}}})", "Prometheus scrape {{instance}}"),
                ),
                unit="s",
                desc="Time rollstat takes to render /metrics (rollstat_scrape_duration_seconds), and the whole scrape as Prometheus sees it (scrape_duration_seconds).",
                w=12,
            ),
            timeseries(
                "Config reloads",
                targets((f"sum by (result) (increase(rollstat_config_reloads_total{{{I}}}{RI}))", "{{result}}")),
                desc="Reloads (SIGHUP or POST /-/reload) by result.",
                w=6,
                bars=True,
            ),
            stat(
                "Last reload",
                targets((f"min(rollstat_config_last_reload_success{{{I}}})", "")),
                desc="1 if the last config reload succeeded (or none was tried). A failed reload keeps the previous config in force.",
                w=6,
                mappings=[{"type": "value", "options": {"0": {"text": "failed", "color": "red", "index": 0}, "1": {"text": "ok", "color": "green", "index": 1}}}],
            ),
            table(
                "Instances",
                [f"max by (instance, version) (rollstat_build_info{{{I}}})", f"max by (instance) (up{{{I}}})"],
                desc="rollstat instances, their version (rollstat_build_info) and whether Prometheus reaches them (up).",
                h=6,
            ),
        ],
    )


MW = f'{I}, metric="$metric", window="$window"'
# Empty legendFormat: Grafana names the series by its metric name and every
# label, the only legend that tells arbitrary tag sets apart.
TAGS = ""


def explorer():
    return dashboard(
        "rollstat-explorer",
        "rollstat / metric explorer",
        "Any statsd metric's windowed statistics: pick $metric and $window. Each line is one tag set.",
        [
            INSTANCE,
            query_var("metric", "label_values(rollstat_window_samples, metric)", multi=False),
            query_var("window", 'label_values(rollstat_window_samples{metric="$metric"}, window)', multi=False),
        ],
        [
            timeseries(
                "Rate /s ($window window)",
                targets((f"rollstat_window_rate{{{MW}}}", TAGS)),
                unit="ops",
                desc="Per second over the time the window's buckets cover: increments for counters, samples for other types (rollstat_window_rate).",
            ),
            timeseries(
                "Rate /s, all tags, every window",
                targets((f'sum by (window) (rollstat_window_rate{{{I}, metric="$metric"}})', "{{window}}")),
                unit="ops",
                desc="The metric's rate summed over its tag sets, one line per window.",
            ),
            timeseries(
                "Average",
                targets((f"rollstat_window_avg{{{MW}}}", TAGS)),
                desc="Average value in the window (sum / samples). Timers are in seconds.",
                w=8,
            ),
            timeseries(
                "Min and max",
                targets(
                    (f"rollstat_window_min{{{MW}}}", TAGS),
                    (f"rollstat_window_max{{{MW}}}", TAGS),
                ),
                desc="Smallest and largest value in the window.",
                w=8,
            ),
            timeseries(
                "Quantiles",
                targets((f"rollstat_window_quantile{{{MW}}}", TAGS)),
                desc="DDSketch quantiles (1% relative error) of timers, histograms and distributions; q from series.quantiles.",
                w=8,
            ),
            timeseries(
                "Samples in the window",
                targets(
                    (f"rollstat_window_samples{{{MW}}}", TAGS),
                    (f"rollstat_window_sum_value{{{MW}}}", TAGS),
                ),
                desc="Samples weighted by 1/sample_rate (go-zero Count) and their weighted sum (go-zero Sum).",
            ),
            timeseries(
                "Distinct members (sets)",
                targets((f"rollstat_window_unique{{{MW}}}", TAGS)),
                desc="Distinct set members in the window (exact up to 1024, then HyperLogLog, 0.81% standard error). Empty for other types.",
            ),
            table(
                "Per tag set, now",
                [f"sum without (__name__) (rollstat_window_rate{{{MW}}})", f"sum without (__name__) (rollstat_window_avg{{{MW}}})"],
                desc="Every tag set of $metric, one row each, with its current rate and average. Both queries drop __name__ so that Grafana's merge joins their rows on the tag labels.",
                renames={"Value #A": "rate /s", "Value #B": "average"},
            ),
            row("Fleet (Redis-shared rules)"),
            timeseries(
                "Fleet rate /s ($window window)",
                targets((f"rollstat_fleet_window_rate{{{MW}}}", TAGS)),
                unit="ops",
                desc="The rate over every instance sharing the series through Redis (rollstat_fleet_window_rate); only for series of a mapping rule with shared windows and a [redis] section.",
            ),
            timeseries(
                "Fleet average and samples",
                targets(
                    (f"rollstat_fleet_window_avg{{{MW}}}", TAGS),
                    (f"rollstat_fleet_window_samples{{{MW}}}", TAGS),
                    (f"rollstat_fleet_window_sum_value{{{MW}}}", TAGS),
                ),
                desc="Average, weighted samples and their sum over every instance sharing the series (rollstat_fleet_window_{avg,samples,sum_value}).",
            ),
            timeseries(
                "Fleet min and max",
                targets(
                    (f"rollstat_fleet_window_min{{{MW}}}", TAGS),
                    (f"rollstat_fleet_window_max{{{MW}}}", TAGS),
                ),
                desc="Smallest and largest value over every instance sharing the series (exact): gauges, timers, histograms, distributions.",
                w=8,
            ),
            timeseries(
                "Fleet quantiles",
                targets((f"rollstat_fleet_window_quantile{{{MW}}}", TAGS)),
                desc="Quantiles of the union of every instance's samples (DDSketch bins added up in Redis, 1% relative error), not an average of per-instance quantiles; timers, histograms, distributions.",
                w=8,
            ),
            timeseries(
                "Fleet distinct members (sets)",
                targets(
                    (f"rollstat_fleet_window_unique{{{MW}}}", TAGS),
                    (f"rollstat_window_unique{{{MW}}}", TAGS),
                ),
                desc="Distinct members over every instance sharing the set (rollstat_fleet_window_unique: a member two instances saw counts once; exact up to 512 a bucket, then Redis HyperLogLog, 0.81% standard error), beside this instance's own (rollstat_window_unique).",
                w=8,
            ),
        ],
        time_from="now-30m",
    )


B = f'{I}, breaker=~"$breaker"'


def breakers():
    return dashboard(
        "rollstat-breakers",
        "rollstat / breakers",
        "Circuit breakers served by rollstat: state over time, drop ratio, failure ratio, transitions.",
        [INSTANCE, query_var("breaker", "label_values(rollstat_breaker_state, breaker)")],
        [
            state_timeline(
                "State",
                targets((f"max by (breaker) (rollstat_breaker_state{{{B}}})", "{{breaker}}")),
                desc="closed (0), open (1), half-open (2). SRE breakers count as open while their drop ratio is above 0.",
            ),
            share(
                "Drop ratio",
                targets((f"max by (breaker) (rollstat_breaker_drop_ratio{{{B}}})", "{{breaker}}")),
                desc="Probability that a call is shed now (SRE: adaptive throttling; error-rate: 0 or 1).",
            ),
            share(
                "Failure ratio",
                targets((f"max by (breaker) (rollstat_breaker_failure_ratio{{{B}}})", "{{breaker}}")),
                desc="Failures over the calls that ran, in the breaker's window.",
            ),
            timeseries(
                "Requests and failures in the window",
                targets(
                    (f"sum by (breaker) (rollstat_breaker_requests{{{B}}})", "{{breaker}} requests"),
                    (f"sum by (breaker) (rollstat_breaker_failures{{{B}}})", "{{breaker}} failures"),
                ),
                desc="The counts the breaker's decision rests on (half-open: the trial calls).",
            ),
            timeseries(
                "Transitions",
                targets((f"sum by (breaker, from, to) (increase(rollstat_breaker_transitions_total{{{B}}}{RI}))", "{{breaker}}: {{from}} → {{to}}")),
                desc="State changes per rate interval.",
                bars=True,
            ),
        ],
    )


L = f'{I}, limit=~"$limit"'


def decisions(d):
    return f'sum by (limit) (rate(rollstat_limit_decisions_total{{{L}, decision="{d}"}}{RI}))'


def limits():
    return dashboard(
        "rollstat-limits",
        "rollstat / limits",
        "Rate limits served by rollstat: decisions allowed and denied by limit, keys tracked, evictions.",
        [INSTANCE, query_var("limit", "label_values(rollstat_limit_keys, limit)")],
        [
            timeseries("Allowed /s", targets((decisions("allowed"), "{{limit}}")), unit="reqps", desc="Requests admitted per second, by limit.", w=8),
            timeseries("Denied /s", targets((decisions("denied"), "{{limit}}")), unit="reqps", desc="Requests answered 429 per second, by limit.", w=8),
            share(
                "Denied share",
                targets((f"{decisions('denied')} / sum by (limit) (rate(rollstat_limit_decisions_total{{{L}}}{RI}))", "{{limit}}")),
                desc="Denied over all decisions.",
                w=8,
            ),
            timeseries(
                "Errors /s",
                targets((decisions("error"), "{{limit}}")),
                unit="reqps",
                desc="Acquire calls that failed: over capacity (n larger than the limit) or a new key refused at max_keys (503).",
                w=8,
            ),
            timeseries(
                "Keys tracked",
                targets((f"sum by (limit) (rollstat_limit_keys{{{L}}})", "{{limit}}")),
                desc="Keys each limit holds now; compare with max_keys.",
                w=8,
            ),
            timeseries(
                "Keys evicted",
                targets((f"sum by (limit, cause) (rate(rollstat_limit_evicted_keys_total{{{L}}}{RI}))", "{{limit}}: {{cause}}")),
                unit="ops",
                desc="idle: no information lost; cap: least recently used key forgotten at max_keys; rejected_new: new key refused at max_keys.",
                w=8,
            ),
            table(
                "Decisions in the time range",
                [f"sum by (limit, decision) (increase(rollstat_limit_decisions_total{{{L}}}[$__range]))"],
                desc="Allowed, denied and error decisions over the dashboard's time range, by limit.",
            ),
        ],
    )


DASHBOARDS = {"overview.json": overview, "explorer.json": explorer, "breakers.json": breakers, "limits.json": limits}


def render(build):
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv):
    check = "--check" in argv[1:]
    stale = []
    for name, build in DASHBOARDS.items():
        path = HERE / name
        text = render(build)
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"dashboards/{', '.join(stale)} differ from dashboards/generate.py; run python3 dashboards/generate.py and commit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
