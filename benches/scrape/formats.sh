#!/usr/bin/env bash
# /metrics in text 0.0.4 and in protobuf, plain and gzip, over loopback HTTP:
# N series (counters, or KIND=timer), CONFIG (e.g. the shipped config.toml).
#   benches/scrape/formats.sh [series] [scrapes] [CONFIG] [KIND]
# One daemon; k rounds, each scraping every format plain, then gzip, back
# to back (the given order in odd rounds, reversed in even ones, so a drift
# of the machine or of the daemon's state lands on every format alike).
# Prints every scrape (seconds, bytes on the wire), then per mode and format
# the median, min and max, and the ratios of the medians to the first
# format's. A scrape that fails (curl error or status other
# than 200) stops the run.
# KIND=timer: timers with a few values each (see start_series_daemon).
# Builds the release binary unless ROLLSTAT_BIN is set.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-100000}
k=${2:-9}
config=${3:-}
kind=${4:-counter}
[ -n "${ROLLSTAT_BIN:-}" ] || cargo build --release --quiet
. benches/daemon.sh
start_series_daemon "$n" "$config" "$kind"
# FORMATS (default "text proto"): which formats, by these names; ratios are
# against the first. "om-utf8" is what Prometheus 3 asks for first by default.
formats=${FORMATS:-text proto}
accept_of() {
  case $1 in
    text) echo 'text/plain;version=0.0.4' ;;
    proto) echo 'application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited' ;;
    proto-utf8) echo 'application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=allow-utf-8' ;;
    text1-utf8) echo 'text/plain;version=1.0.0;escaping=allow-utf-8' ;;
    om-utf8) echo 'application/openmetrics-text;version=1.0.0;escaping=allow-utf-8' ;;
    om) echo 'application/openmetrics-text;version=1.0.0' ;;
    *) echo "unknown format $1" >&2; exit 2 ;;
  esac
}
for f in $formats; do accept_of "$f" >/dev/null; done
out=$(mktemp)
scrape() { # mode format
  local flag=() accept
  accept=$(accept_of "$2")
  [ "$1" = gzip ] && flag=(--compressed)
  local r
  r=$(curl -sS "${flag[@]}" -H "Accept: $accept" -o /dev/null \
    -w '%{http_code} %{time_total} %{size_download} %{content_type}' "http://$http/metrics")
  set -- "$1" "$2" $r
  if [ "$3" != 200 ]; then echo "scrape $1 $2 failed: $*" >&2; exit 1; fi
  echo "$1 $2 $4 $5" >> "$out"
  echo "$1 $2 $4 s $5 B (${*:6})"
}
for i in $(seq "$k"); do
  # Odd rounds in the given order, even ones reversed, so that a drift of
  # the machine or of the daemon's state lands on every format alike.
  order=$formats
  [ $((i % 2)) = 0 ] && order=$(echo "$formats" | tr ' ' '\n' | tac | tr '\n' ' ')
  for mode in plain gzip; do
    for f in $order; do scrape $mode "$f"; done
  done
done
stats() { sort -n | awk '{a[NR]=$1} END {printf "%s %s %s", a[int((NR+1)/2)], a[1], a[NR]}'; }
echo "== $n ${kind} series, ${config:-default config}, $k scrapes each: median min max"
first=${formats%% *}
for mode in plain gzip; do
  ft=$(awk -v m=$mode -v f="$first" '$1==m && $2==f {print $3}' "$out" | stats | cut -d' ' -f1)
  fb=$(awk -v m=$mode -v f="$first" '$1==m && $2==f {print $4}' "$out" | stats | cut -d' ' -f1)
  for f in $formats; do
    t=$(awk -v m=$mode -v f=$f '$1==m && $2==f {print $3}' "$out" | stats)
    b=$(awk -v m=$mode -v f=$f '$1==m && $2==f {print $4}' "$out" | stats)
    echo "$mode $f: time $t s; bytes $b; against $first: time $(awk -v a="${t%% *}" -v b="$ft" 'BEGIN {printf "%.2f", a/b}'), bytes $(awk -v a="${b%% *}" -v b="$fb" 'BEGIN {printf "%.2f", a/b}')"
  done
done
rm -f "$out"
