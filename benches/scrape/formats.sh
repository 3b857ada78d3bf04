#!/usr/bin/env bash
# /metrics in text 0.0.4 and in protobuf, plain and gzip, over loopback HTTP:
# N series (counters, or KIND=timer), CONFIG (e.g. the shipped config.toml).
#   benches/scrape/formats.sh [series] [scrapes] [CONFIG] [KIND]
# One daemon; k rounds, each scraping plain text, plain protobuf, gzip text,
# gzip protobuf back to back (text first in odd rounds, protobuf first in
# even ones, so a drift of the machine or of the daemon's state lands on
# both formats alike). Prints every scrape (seconds, bytes on the wire),
# then per mode and format the median, min and max, and the protobuf/text
# ratio of the medians. A scrape that fails (curl error or status other
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
text='text/plain;version=0.0.4'
proto='application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited'
out=$(mktemp)
scrape() { # mode format
  local flag=() accept=$text
  [ "$1" = gzip ] && flag=(--compressed)
  [ "$2" = proto ] && accept=$proto
  local r
  r=$(curl -sS "${flag[@]}" -H "Accept: $accept" -o /dev/null \
    -w '%{http_code} %{time_total} %{size_download} %{content_type}' "http://$http/metrics")
  set -- "$1" "$2" $r
  if [ "$3" != 200 ]; then echo "scrape $1 $2 failed: $*" >&2; exit 1; fi
  echo "$1 $2 $4 $5" >> "$out"
  echo "$1 $2 $4 s $5 B (${*:6})"
}
for i in $(seq "$k"); do
  order="text proto"
  [ $((i % 2)) = 0 ] && order="proto text"
  for mode in plain gzip; do
    for f in $order; do scrape $mode "$f"; done
  done
done
stats() { sort -n | awk '{a[NR]=$1} END {printf "%s %s %s", a[int((NR+1)/2)], a[1], a[NR]}'; }
echo "== $n ${kind} series, ${config:-default config}, $k scrapes each: median min max"
for mode in plain gzip; do
  for f in text proto; do
    t=$(awk -v m=$mode -v f=$f '$1==m && $2==f {print $3}' "$out" | stats)
    b=$(awk -v m=$mode -v f=$f '$1==m && $2==f {print $4}' "$out" | stats)
    echo "$mode $f: time $t s; bytes $b"
    eval "med_${mode}_$f='$t $b'"
  done
  set -- $(eval echo "\$med_${mode}_text") ; tt=$1 tb=$4
  set -- $(eval echo "\$med_${mode}_proto"); pt=$1 pb=$4
  echo "$mode proto/text: time $(awk -v a="$pt" -v b="$tt" 'BEGIN {printf "%.2f", a/b}'), bytes $(awk -v a="$pb" -v b="$tb" 'BEGIN {printf "%.2f", a/b}')"
done
rm -f "$out"
