#!/usr/bin/env bash
# GET /api/v1/series?match=<glob> end to end over loopback at N counter
# series (names blast.m000000 ... from `rollstat-blast`): the time of each
# pattern, medians of K requests. Every request has a 30 s limit, so a
# matcher that backtracks shows as "timeout" instead of hanging the bench.
#   benches/api/match.sh [series] [requests]
# ROLLSTAT_BIN=path/to/another/rollstat runs the same against another build
# (e.g. the previous commit's) for a before/after in one session.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-100000}
k=${2:-11}
[ -n "${ROLLSTAT_BIN:-}" ] || cargo build --release --quiet
. benches/daemon.sh
start_series_daemon "$n"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
long=$(printf 'a%.0s' $(seq 200))
printf '%s:1|c\n' "$long" > /dev/udp/${udp%:*}/${udp#*:}
sleep 0.5
# A pattern selecting 10 series, one selecting none (prefix rejects every
# name), one selecting none that must scan each name, and the pathological
# glob against the 200-character name.
for pattern in 'blast.m00001*' 'nomatch.*' '*x*' '*a*a*a*a*a*a*a*a*b'; do
  times=$(mktemp)
  for i in $(seq "$k"); do
    curl -s -m 30 -o /dev/null -w '%{time_total} %{http_code}\n' -G \
      --data-urlencode "match=$pattern" "http://$http/api/v1/series" >> "$times" || echo "timeout 000" >> "$times"
    if grep -q timeout "$times"; then break; fi
  done
  echo "== match=$pattern: seconds and status of each request"
  tr '\n' ';' < "$times"; echo
  if grep -q timeout "$times"; then echo "median: timeout (> 30 s)"; else echo "median $(cut -d' ' -f1 "$times" | median) s"; fi
  rm -f "$times"
done
