#!/usr/bin/env bash
# What one remote write output costs the ingest ceiling, in one batch with
# the runs interleaved (ABBA: a shared machine's speed drifts from minute to
# minute, so the ratio is taken within the batch):
#   benches/push/ingest.sh [rounds] [names] [duration_secs]
# (defaults 5 rounds, 100000 counter names, 35 s a run).
# Each round runs the release daemon twice with `rollstat-blast --spawn`
# sending counters as fast as one sender can (`--rate 0`, ~80 lines per
# datagram, a fresh daemon per run):
# * A: config.toml as shipped, no [[outputs]];
# * B: the same plus one [[outputs]] (kind = "remote_write", name =
#   "bench", interval_ms = 15000) to a local sink that answers 204
#   (benches/push/sink.py, Python, on the same cores; its CPU is not the
#   daemon's but it is taken from the same 2 cores, as a receiver's would be
#   on a shared host).
# A run of 35 s holds the pushes at 15 and 30 s after the daemon started;
# the POSTs the sink got during each B run are printed with it.
# Prints per run the lines counted per second (the ceiling: lines the
# daemon counted over the seconds spent sending), the loss and the
# daemon's CPU ns per line; then medians with min to max for A and B and
# the ratio B / A (of the medians, and per round).
# ROLLSTAT_BIN picks the daemon (default: the release build, built here).
# Loopback only; every run is bounded by blast (--duration-secs, at most
# 120 s, and --drain-secs); the sink is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
names=${2:-100000}
secs=${3:-35}
[ -n "${ROLLSTAT_BIN:-}" ] || cargo build --release --quiet --bins
bin=${ROLLSTAT_BIN:-target/release/rollstat}
blast=$(dirname "$bin")/rollstat-blast
dir=$(mktemp -d)
python3 benches/push/sink.py "$dir/sink.log" > "$dir/sink.port" &
sink_pid=$!
trap 'kill "$sink_pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 50); do [ -s "$dir/sink.port" ] && break; sleep 0.1; done
port=$(cat "$dir/sink.port")
[ -n "$port" ] || { echo "the sink did not start" >&2; exit 1; }
cp config.toml "$dir/without.toml"
cp config.toml "$dir/with.toml"
[ "$names" -le 100000 ] || sed -i "s/^max_series = .*/max_series = $((names + 1000))/" "$dir/without.toml" "$dir/with.toml"
cat >> "$dir/with.toml" <<TOML

[[outputs]]
name = "bench"
kind = "remote_write"
url = "http://127.0.0.1:$port/api/v1/write"
interval_ms = 15000
TOML
# row TAG CONFIG: one blast run, its figures as key=value on one line.
row() {
  local before after
  before=$(wc -l < "$dir/sink.log" 2>/dev/null || echo 0)
  "$blast" --spawn --daemon-bin "$bin" --config "$2" --names "$names" --rate 0 \
    --duration-secs "$secs" --drain-secs 10 2>/dev/null |
    awk -v tag="$1" 'BEGIN{printf "run=%s ", tag} /^(lines_sent|lines_counted|lines_per_sec_counted|loss_pct|kernel_drops_datagrams|daemon_cpu_ns_per_line|send_secs) /{printf "%s=%s ", $1, $2}' |
    tee -a "$dir/rows"
  after=$(wc -l < "$dir/sink.log" 2>/dev/null || echo 0)
  echo "sink_posts=$((after - before))" | tee -a "$dir/rows"
}
echo "== config.toml, $names counter names, rate 0 (as fast as one sender), $secs s a run, $rounds rounds ABBA; A: no [[outputs]], B: one remote_write output every 15000 ms to 127.0.0.1:$port; $(nproc) cores; start $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then
    row A "$dir/without.toml"; row B "$dir/with.toml"
  else
    row B "$dir/with.toml"; row A "$dir/without.toml"
  fi
done
python3 benches/push/ingest.py "$dir/rows"
echo "== end $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
