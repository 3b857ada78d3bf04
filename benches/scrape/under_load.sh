#!/usr/bin/env bash
# /metrics while statsd arrives: N counter names at R lines/s for 10 s over
# UDP (80 lines per datagram) with a curl scrape every 0.5 s; prints the
# daemon's loss (from `rollstat-blast`) and the scrape times.
#   benches/scrape/under_load.sh [names] [lines_per_sec]
# Builds the release binary, starts it on free ports, creates the series
# first, then sends and scrapes at once.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-100000}
rate=${2:-3000000}
cargo build --release --quiet
. benches/daemon.sh
start_series_daemon "$n"
times=$(mktemp)
( for _ in $(seq 20); do
    sleep 0.5
    curl -s -o /dev/null -w '%{time_total}\n' "http://$http/metrics" >> "$times"
  done ) &
scraper=$!
./target/release/rollstat-blast --udp "$udp" --http "$http" --names "$n" \
  --lines-per-datagram 80 --rate "$rate" --duration-secs 10 \
  | grep -E '^(lines_sent|lines_counted|loss_pct|kernel_drops_datagrams)'
wait $scraper
echo "scrapes (s): $(tr '\n' ' ' < "$times")"
echo "scrape median $(sort -n "$times" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') s"
rm -f "$times"
