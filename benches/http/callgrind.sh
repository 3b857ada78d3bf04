#!/usr/bin/env bash
# Instructions per request under callgrind (repeatable on a busy machine):
#   benches/http/callgrind.sh TREE [N]
# starts TREE/target/release/rollstat under valgrind on TREE/config.toml
# (ports moved to 0), sends N keep-alive GET /healthz then N POST acquire
# (curl URL globbing: one connection), and prints the instructions the
# daemon spent on each batch. Needs valgrind and curl; build TREE first.
set -u
tree=$1; n=${2:-2000}
cfg=$(mktemp); log=$(mktemp)
sed -e 's/"127.0.0.1:8125"/"127.0.0.1:0"/g' -e 's/"127.0.0.1:9102"/"127.0.0.1:0"/' "$tree/config.toml" > "$cfg"
out=$(mktemp -d)
valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p.out" "$tree/target/release/rollstat" --config "$cfg" --log warn > "$log" 2>/dev/null &
pid=$!
for _ in $(seq 300); do grep -q http= "$log" && break; sleep 0.2; done
addr=$(sed -n 's/.*http=\([0-9.:]*\).*/\1/p' "$log")
measure() {
  callgrind_control -z $pid >/dev/null 2>&1
  "$@"
  callgrind_control -d $pid >/dev/null 2>&1
  sleep 2
  callgrind_annotate $(ls -t $out/cg.* | head -1) 2>/dev/null | grep -m1 "PROGRAM TOTALS" | awk '{print $1}'
}
curl -s -o /dev/null "http://$addr/healthz?[1-10]"
a=$(measure curl -s -o /dev/null "http://$addr/healthz?[1-$n]")
b=$(measure curl -s -o /dev/null -X POST "http://$addr/api/v1/limits/api/acquire?key=u[1-$n]")
kill $pid; wait $pid 2>/dev/null
echo "$tree healthz=$a acquire=$b n=$n"
