#!/usr/bin/env bash
# /metrics end to end over loopback HTTP: time and size of a scrape of N
# counter series (one 10 x 1 s window, the default; or CONFIG, e.g. the
# shipped config.toml), plain and gzip.
#   benches/scrape/run.sh [series] [scrapes] [CONFIG]
# Builds the release binary, starts it on free ports, creates the series
# with `rollstat-blast` (one line per name, repeated until the daemon holds
# them all), then times `curl` scrapes and prints each and the medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-100000}
k=${2:-11}
config=${3:-}
[ -n "${ROLLSTAT_BIN:-}" ] || cargo build --release --quiet
. benches/daemon.sh
start_series_daemon "$n" "$config"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for mode in plain gzip; do
  flag=()
  [ $mode = gzip ] && flag=(--compressed)
  times=$(mktemp)
  for i in $(seq "$k"); do
    curl -s "${flag[@]}" -o /dev/null -w '%{time_total} %{size_download}\n' "http://$http/metrics" >> "$times"
  done
  echo "== $mode: $k scrapes, seconds and bytes on the wire"
  tr '\n' ';' < "$times"; echo
  echo "median $(cut -d' ' -f1 "$times" | median) s, $(cut -d' ' -f2 "$times" | median) bytes"
  rm -f "$times"
done
