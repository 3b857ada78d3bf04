#!/usr/bin/env bash
# A/B of two builds over HTTP with wrk, alternating (noisy machines):
#   benches/http/ab.sh BASE_TREE NEW_TREE [rounds]
# each tree's release binary on its own config.toml as shipped (ports moved
# to 0): 5 s of acquire (benches/http/acquire.lua), then 5 s of /healthz,
# 32 connections, 1 wrk thread. Prints requests/s per run.
set -u
cd "$(dirname "$0")/../.."
base=$1; new=$2; rounds=${3:-5}
run() {
  local tree=$1
  local cfg
  cfg=$(sed -e 's/"127.0.0.1:8125"/"127.0.0.1:0"/g' -e 's/"127.0.0.1:9102"/"127.0.0.1:0"/' "$tree/config.toml")
  ( ROLLSTAT_BIN=$tree/target/release/rollstat; . benches/daemon.sh; start_daemon "$cfg"; addr=$(bound http)
    r=$(wrk -t1 -c32 -d5s -s benches/http/acquire.lua "http://$addr" | awk '/Requests\/sec/ {print $2}')
    h=$(wrk -t1 -c32 -d5s "http://$addr/healthz" | awk '/Requests\/sec/ {print $2}')
    echo "$r $h" )
}
for _ in $(seq "$rounds"); do
  echo "base $(run "$base")"
  echo "new  $(run "$new")"
done
