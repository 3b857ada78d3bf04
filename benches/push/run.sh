#!/usr/bin/env bash
# What one remote write push costs the daemon beside one /metrics scrape, in
# the same run, on config.toml as shipped plus one [[outputs]]
# (kind = "remote_write", name = "bench") pushing to a local sink:
#   benches/push/run.sh [series] [runs] [interval_ms] [idle_secs]
# (defaults 100000 counters, 5 runs, a push every 5000 ms, 1 s idle windows).
# Prints per run, then medians with min to max:
# * the daemon's CPU ms for one scrape (curl, text 0.0.4, no other load),
#   and for one as Prometheus 3 asks for it (OpenMetrics first, gzip);
# * its CPU ms for one push (write, compress, send: a window from the end
#   of one push to the end of the next, holding no scrape);
#   both less the idle CPU rate (window rotation, timers) measured over
#   idle_secs just before, see benches/push/measure.py for how;
# * push / scrape CPU, rollstat_output_push_seconds (wall time to write
#   and compress), POSTs and body bytes per push as the sink saw them;
# * bytes on the wire per sample: rollstat_output_sent_bytes_total over
#   rollstat_output_samples_total{result="sent"}, deltas between the first
#   and last scrape.
# CPU: the figure to quote is ticks (/proc/PID/stat, every thread ever);
# the schedstat one misses threads that exit in the window, which a scrape
# of 20k series or more has (its walk's scoped threads), so it undercounts
# the scrape (about 113 against 169 ms at 100k) but not the push (one
# thread from tokio's blocking pool, kept).
# The series are not updated during the runs, so about 60 s after they are
# created their 1m window empties and a scrape and a push get smaller
# (at 100k: 61.0 to 53.4 MB of text, 7.2 to 6.2 MB and 35 to 31 POSTs per
# push); each run's scrape and push are about 10 s apart and see the same.
# The sink (benches/push/sink.py, Python, 204 to every POST) runs on the
# same cores; its CPU is not counted as the daemon's. The series are
# created once with rollstat-blast and are not updated during the runs.
# max_series is raised only if series exceeds config.toml's 100000.
# PROTOCOL=2.0 pushes remote write 2.0 (default 1.0; the sink answers a 2.0
# request with Written headers, so the output stays on 2.0): run it once
# each way to compare bytes per sample; the last line says the protocol the
# output spoke at the end (rollstat_output_protocol).
# KIND=otlp pushes OTLP/HTTP (gzip protobuf) instead, PROTOCOL ignored:
# its bytes per sample are per data point (a classic histogram is one).
# ROLLSTAT_BIN picks the daemon (default: the release build, built here).
# Loopback only; the daemon and the sink are stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-100000}
runs=${2:-5}
interval=${3:-5000}
idle=${4:-1}
protocol=${PROTOCOL:-1.0}
case "$protocol" in 1.0|2.0) ;; *) echo "PROTOCOL is 1.0 or 2.0, not $protocol" >&2; exit 2;; esac
kind=${KIND:-remote_write}
case "$kind" in
  remote_write) output="kind = \"remote_write\"
protocol = \"$protocol\"" path=/api/v1/write ;;
  otlp) output='kind = "otlp"' path=/v1/metrics protocol=otlp ;;
  *) echo "KIND is remote_write or otlp, not $kind" >&2; exit 2 ;;
esac
[ -n "${ROLLSTAT_BIN:-}" ] || cargo build --release --quiet --bins
dir=$(mktemp -d)
python3 benches/push/sink.py "$dir/sink.log" > "$dir/sink.port" &
sink_pid=$!
for _ in $(seq 50); do [ -s "$dir/sink.port" ] && break; sleep 0.1; done
port=$(cat "$dir/sink.port")
[ -n "$port" ] || { echo "the sink did not start" >&2; kill "$sink_pid"; exit 1; }
cp config.toml "$dir/config.toml"
[ "$n" -le 100000 ] || sed -i "s/^max_series = .*/max_series = $((n + 1000))/" "$dir/config.toml"
cat >> "$dir/config.toml" <<TOML

[[outputs]]
name = "bench"
$output
url = "http://127.0.0.1:$port$path"
interval_ms = $interval
TOML
. benches/daemon.sh
start_series_daemon "$n" "$dir/config.toml"
# daemon.sh's trap stops the daemon; this one adds the sink and the files.
# At stop the daemon makes a last push (up to stop_timeout_ms, 5 s), so it
# is given 10 s before SIGKILL; the sink is stopped after it.
stop_all() {
  kill "$daemon_pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$daemon_pid" 2>/dev/null || true
  kill "$sink_pid" 2>/dev/null || true
  rm -rf "$dir" "$daemon_cfg" "$daemon_log" "$daemon_log.err"
}
trap stop_all EXIT
echo "== config.toml + [[outputs]] $kind $protocol every $interval ms to 127.0.0.1:$port; $n counters; $runs runs; $(nproc) cores; start $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 benches/push/measure.py "$daemon_pid" "$http" "$dir/sink.log" "$runs" "$interval" "$idle" "$dir"
spoken=$(curl -s "http://$http/metrics" | awk '/^rollstat_output_protocol\{/ {print $2}')
echo "== remote write protocol spoken at the end: ${spoken:-?} (asked $protocol)"
echo "== end $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
