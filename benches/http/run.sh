#!/usr/bin/env bash
# Acquire decisions per second over HTTP with keep-alive on loopback, with
# /healthz in the same run as the baseline (the HTTP stack alone).
#   benches/http/run.sh [seconds] [connections]
# Needs wrk (Debian package `wrk`). Builds the release binary, starts it with
# the sample config's limit `api` on free ports, and prints wrk's summaries.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
conns=${2:-32}
command -v wrk >/dev/null || { echo "needs wrk: apt-get install wrk" >&2; exit 1; }
cargo build --release --quiet
. benches/daemon.sh
start_daemon "$(cat <<CFG
[listen]
statsd_udp = ""
statsd_tcp = ""
http = "127.0.0.1:0"
[[limits]]
name = "api"
algorithm = "exact"
rules = [{ max = 100, window_ms = 1000 }]
max_keys = 100000
CFG
)"
addr=$(bound http)
echo "== baseline: GET /healthz ($secs s, $conns connections, 1 wrk thread)"
wrk -t1 -c"$conns" -d"${secs}s" --latency "http://$addr/healthz" | grep -E "Requests/sec|50%|99%|Latency  "
echo "== POST /api/v1/limits/api/acquire, 10k keys, exact sliding log 100/s per key"
wrk -t1 -c"$conns" -d"${secs}s" --latency -s benches/http/acquire.lua "http://$addr" | grep -E "Requests/sec|50%|99%|Latency  |Non-2xx"
