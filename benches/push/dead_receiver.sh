#!/usr/bin/env bash
# What a dead receiver does to the daemon: config.toml as shipped plus one
# [[outputs]] (kind = "remote_write", name = "dead") pointing at a loopback
# port where nothing listens (every connect refused), 100k counter series,
# statsd load for DURATION s:
#   DURATION=120 benches/push/dead_receiver.sh [series]
# (DURATION defaults to 120; DURATION=20 is the quick check).
# The output pushes every INTERVAL_MS (default 5000, so that the queue
# reaches its cap within the run) into a queue of QUEUE_MAX_BYTES (default
# 67108864, the shipped 64 MiB); RATE lines/s of counters over the same
# names (default 200000, ~80 lines per datagram) come from rollstat-blast
# meanwhile. Every second benches/push/dead_receiver.py takes one /metrics
# (curl, text 0.0.4, its rollstat_output_* lines kept), and reports the
# highest rollstat_output_queue_bytes against the cap, the batches and
# samples dropped (rollstat_output_batches_total{result="queue_full"}), the
# failed tries by reason, the scrape times, the daemon's RSS; then blast's
# count of the lines it sent against those the daemon counted.
# ROLLSTAT_BIN picks the daemon (default: the release build, built here).
# Loopback only; bounded: the sampler stops after DURATION s (at most 120,
# blast's own cap), blast after DURATION s; the daemon is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-100000}
duration=${DURATION:-120}
interval=${INTERVAL_MS:-5000}
cap=${QUEUE_MAX_BYTES:-67108864}
rate=${RATE:-200000}
[ "$duration" -le 120 ] || { echo "DURATION is at most 120 s" >&2; exit 1; }
[ -n "${ROLLSTAT_BIN:-}" ] || cargo build --release --quiet --bins
dir=$(mktemp -d)
# A port nothing listens on: bound and closed at once.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cp config.toml "$dir/config.toml"
[ "$n" -le 100000 ] || sed -i "s/^max_series = .*/max_series = $((n + 1000))/" "$dir/config.toml"
cat >> "$dir/config.toml" <<TOML

[[outputs]]
name = "dead"
kind = "remote_write"
url = "http://127.0.0.1:$port/api/v1/write"
interval_ms = $interval
queue_max_bytes = $cap
TOML
# A config the daemon refuses (QUEUE_MAX_BYTES below batch_max_bytes, 2 MiB)
# fails here, with the reason, rather than as a daemon that never listens.
"${ROLLSTAT_BIN:-target/release/rollstat}" check-config "$dir/config.toml" > /dev/null || { rm -rf "$dir"; exit 1; }
. benches/daemon.sh
start_series_daemon "$n" "$dir/config.toml"
# daemon.sh's trap stops the daemon; this one adds the load and the files.
stop_all() {
  [ -z "${blast_pid:-}" ] || kill "$blast_pid" 2>/dev/null || true
  kill "$daemon_pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$daemon_pid" 2>/dev/null || true
  rm -rf "$dir" "$daemon_cfg" "$daemon_log" "$daemon_log.err"
}
trap stop_all EXIT
echo "== config.toml + [[outputs]] remote_write every $interval ms to 127.0.0.1:$port (nothing listens), queue_max_bytes $cap; $n counters; $rate lines/s for $duration s; $(nproc) cores; start $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$(dirname "${ROLLSTAT_BIN:-target/release/rollstat}")"/rollstat-blast --udp "$udp" --http "$http" --names "$n" --rate "$rate" \
  --duration-secs "$duration" --drain-secs 5 > "$dir/blast.txt" 2>&1 &
blast_pid=$!
python3 benches/push/dead_receiver.py "$daemon_pid" "$http" "$duration" "$cap" dead
wait "$blast_pid" || true
blast_pid=
awk '/^(lines_sent|lines_counted|loss_pct|kernel_drops_datagrams|lines_per_sec_counted) /{printf "%s=%s ", $1, $2} END{print ""}' "$dir/blast.txt"
echo "== end $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
