#!/usr/bin/env bash
# OTLP/HTTP ingest against rollstat's own statsd ingest, in one batch on
# one machine (sender and daemon share its cores), with the runs
# interleaved (a shared machine's speed drifts from minute to minute, so
# compare within a batch):
#   benches/otlp/run.sh [ROUNDS]        (default 5)
# Every daemon is spawned by rollstat-blast on config.toml as shipped plus
# `[listen] otlp_http` (its listeners moved to free loopback ports), fresh
# for each run. Per round, in this order:
# 1. throughput, A then B (ABAB... over the rounds):
#    A statsd: 10k counter names, ~80 lines per datagram over UDP, offered
#      at $STATSD_RATE lines/s (default 3M: more than the daemon takes, so
#      "counted" is its capacity; the loss is reported, not hidden);
#    B OTLP: 10k streams (100 metric names x 100 `route` values; 80 names
#      cumulative monotonic Sums (as_int), 20 Gauges (as_double); no
#      histograms), 1,000 points per protobuf request, $OTLP_SENDERS
#      keep-alive connections, as fast as answers come back; every answer
#      must be 200 without partial_success (blast exits 2 otherwise);
#    each $SECS s. Counted = the daemon's own
#    rollstat_ingest_lines_total{transport="udp"|"otlp"} before and after;
#    CPU = the daemon's utime+stime from /proc over the run, per line/point.
# 2. memory: a fresh daemon, one pass of 10k statsd counter series (one
#    line each: 127 datagrams of up to 79 lines; the sender stops at the
#    next 32, so one datagram goes twice), RSS (VmRSS) 100 ms after the
#    last send minus before, per series; and a fresh
#    daemon, 10k OTLP cumulative Sum streams (10 requests), per stream (a
#    stream is a series plus the cumulative state the daemon keeps).
# 3. ingest-to-visible latency on an idle daemon: $PROBES times, one gauge
#    sample with a new value (one statsd UDP line; one OTLP point in its own
#    POST), then GET /api/v1/series?metric=NAME polled on a keep-alive
#    connection until the 10s window's max shows it; p50/p99 per run.
#    It includes the POST's round trip (OTLP) and one poll's (both).
# The summary gives, over the rounds, the median and [min-max] of each
# figure; the ratio OTLP points/s / statsd lines/s is taken per round
# (both runs of a round are seconds apart), then its median.
# The issue's targets: OTLP >= max(1M points/s, 0.5 x statsd lines/s);
# OTLP p99 ingest-to-visible <= 5 ms.
#
# Environment: ROLLSTAT_BIN / BLAST_BIN (default: the release builds,
# built here unless both are given), CONFIG (config.toml), SECS (5),
# OTLP_SENDERS (4), STATSD_RATE (3000000), PROBES (200).
# Loopback only; every run is bounded by --duration-secs, --max-datagrams /
# --max-requests and blast's own caps (120 s, 2 s per probe).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
config=${CONFIG:-config.toml}
secs=${SECS:-5}
senders=${OTLP_SENDERS:-4}
statsd_rate=${STATSD_RATE:-3000000}
probes=${PROBES:-200}
if [ -z "${ROLLSTAT_BIN:-}" ] || [ -z "${BLAST_BIN:-}" ]; then
  cargo build --release --quiet -p rollstat -p rollstat-blast
fi
target=${CARGO_TARGET_DIR:-target}
bin=${ROLLSTAT_BIN:-$target/release/rollstat}
blast=${BLAST_BIN:-$target/release/rollstat-blast}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME ARGS...: one blast; its report's key/value rows appended to
# $tmp/NAME, one "key value" per line, a "--" line after each run.
run() {
  local name=$1
  shift
  if ! "$blast" --spawn --daemon-bin "$bin" --config "$config" "$@" >"$tmp/out" 2>"$tmp/err"; then
    echo "!! blast failed: $*" >&2
    cat "$tmp/err" "$tmp/out" >&2
    exit 1
  fi
  awk '{k=$1; $1=""; sub(/^ +/, ""); print k, $0}' "$tmp/out" >>"$tmp/$name"
  echo "--" >>"$tmp/$name"
  awk -v n="$name" '/^(lines_per_sec_counted|points_per_sec_counted|loss_pct|daemon_cpu_ns_per_line|daemon_cpu_ns_per_point|rss_bytes_per_series|rss_bytes_per_stream|visible_p50_us|visible_p99_us|probes_timed_out) /{printf "%s=%s ", $1, $2} END {print " [" n "]"}' "$tmp/out"
}

echo "== start $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo "== config $config + otlp_http; $rounds rounds; ${secs}s per throughput run"
for r in $(seq "$rounds"); do
  echo "-- round $r"
  run statsd --names 10000 --rate "$statsd_rate" --duration-secs "$secs"
  run otlp --transport otlp --names 10000 --per-metric 100 --gauge-pct 20 \
    --points-per-request 1000 --senders "$senders" --duration-secs "$secs"
  run rss_statsd --names 10000 --max-datagrams 127 --duration-secs 5
  run rss_otlp --transport otlp --names 10000 --per-metric 100 --gauge-pct 0 \
    --points-per-request 1000 --senders 1 --max-requests 10 --duration-secs 5
  run probe_statsd --probe "$probes"
  run probe_otlp --transport otlp --probe "$probes"
done
echo "== end $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$tmp" <<'PY'
import os, statistics, sys
tmp = sys.argv[1]

def runs(name):
    """Each run's report of `name` as a dict."""
    out, cur = [], {}
    for line in open(os.path.join(tmp, name)):
        line = line.rstrip("\n")
        if line == "--":
            out.append(cur)
            cur = {}
        else:
            k, _, v = line.partition(" ")
            cur[k] = v
    return out

def col(name, key):
    return [float(r[key]) for r in runs(name)]

def show(label, xs, fmt="{:,.0f}"):
    if not xs:
        return
    print(f"{label:<42} median {fmt.format(statistics.median(xs)):>12}"
          f"   [{fmt.format(min(xs))} - {fmt.format(max(xs))}]  n={len(xs)}")

statsd = col("statsd", "lines_per_sec_counted")
otlp = col("otlp", "points_per_sec_counted")
print("== throughput (counted by the daemon)")
show("statsd lines/s", statsd)
show("statsd loss % (offered beyond capacity)", col("statsd", "loss_pct"), "{:.1f}")
show("OTLP points/s", otlp)
show("ratio OTLP points/s / statsd lines/s", [o / s for o, s in zip(otlp, statsd)], "{:.3f}")
show("daemon CPU us per statsd line", [x / 1000 for x in col("statsd", "daemon_cpu_ns_per_line")], "{:.3f}")
show("daemon CPU us per OTLP point", [x / 1000 for x in col("otlp", "daemon_cpu_ns_per_point")], "{:.3f}")
show("OTLP requests/s", col("otlp", "requests_per_sec"))
show("blast CPU s in an OTLP run", col("otlp", "tool_cpu_secs"), "{:.2f}")
print("== memory: RSS growth for 10k new series / streams")
per_series = col("rss_statsd", "rss_bytes_per_series")
per_stream = col("rss_otlp", "rss_bytes_per_stream")
show("bytes per statsd series", per_series)
show("bytes per OTLP cumulative stream", per_stream)
show("ratio stream / series", [o / s for o, s in zip(per_stream, per_series)], "{:.2f}")
print("== ingest-to-visible latency, us (per run p50 and p99)")
for name, label in (("probe_statsd", "statsd UDP line"), ("probe_otlp", "OTLP point")):
    show(f"{label} p50", col(name, "visible_p50_us"))
    show(f"{label} p99", col(name, "visible_p99_us"))
    show(f"{label} timeouts", col(name, "probes_timed_out"))
med = statistics.median
target = max(1e6, 0.5 * med(statsd))
print(f"== target: OTLP >= {target:,.0f} points/s (max of 1M and 0.5 x statsd): "
      f"median {med(otlp):,.0f} -> {'met' if med(otlp) >= target else 'NOT met'}; "
      f"OTLP p99 <= 5000 us: median {med(col('probe_otlp', 'visible_p99_us')):,.0f} -> "
      f"{'met' if med(col('probe_otlp', 'visible_p99_us')) <= 5000 else 'NOT met'}")
PY
