#!/usr/bin/env bash
# Rate-limit decisions per second and latency through Envoy's gRPC door
# (ShouldRateLimit) beside rollstat's own HTTP acquire, the same generator
# (examples/rls_load.rs, 32 calls in flight, 1000 keys) in the same run, on
# config.toml as shipped plus an [rls] section:
#   benches/rls/run.sh [rounds] [seconds] [streams]
# Each round runs gRPC then HTTP for `seconds` each; prints every round and
# the medians with their spread, and the gRPC/HTTP ratio of the medians.
# Loopback only; the daemon is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
secs=${2:-5}
streams=${3:-32}
cargo build --release --quiet --bin rollstat --example rls_load
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
# The gRPC rule mirrors config.toml's demo limit `api` (100 a second per key).
mkdir "$dir/rls"
cat > "$dir/rls/bench.yaml" <<YAML
domain: bench
descriptors:
  - key: api_key
    rate_limit: {unit: second, requests_per_unit: 100}
YAML
sed -e 's/"127.0.0.1:8125"/"127.0.0.1:0"/g' -e 's/"127.0.0.1:9102"/"127.0.0.1:0"/' config.toml > "$dir/rollstat.toml"
printf '\n[rls]\ngrpc = "127.0.0.1:0"\nconfig_dir = "%s/rls"\n' "$dir" >> "$dir/rollstat.toml"
target/release/rollstat --config "$dir/rollstat.toml" > "$dir/out" 2> "$dir/err" &
pid=$!
for _ in $(seq 100); do grep -q "rollstat listening" "$dir/out" 2>/dev/null && break; sleep 0.1; done
grep -q "rollstat listening" "$dir/out" || { echo "the daemon did not start:" >&2; cat "$dir/err" >&2; exit 1; }
grpc=$(sed -n 's/.*rls_grpc=\([0-9.:]*\).*/\1/p' "$dir/out")
http=$(sed -n 's/.* http=\([0-9.:]*\).*/\1/p' "$dir/out")
echo "config.toml + [rls]; gRPC $grpc, HTTP $http; $rounds rounds of $secs s, $streams in flight, $(nproc) cores shared with the generator"
# The daemon's CPU time (user + system, clock ticks) from /proc.
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
one() { # door address: the generator's line, then the daemon's CPU per decision
  local before after line n
  before=$(ticks)
  line=$(target/release/examples/rls_load "$1" "$2" "$secs" "$streams")
  after=$(ticks)
  n=$(awk '{print $2 * '"$secs"'}' <<<"$line")
  echo "$line daemon_cpu_us $(awk -v t=$((after - before)) -v n="$n" -v hz="$hz" 'BEGIN {printf "%.2f", t * 1e6 / hz / n}')"
}
for r in $(seq "$rounds"); do
  echo "round $r grpc $(one grpc "$grpc")"
  echo "round $r http $(one http "$http")"
done | tee "$dir/rounds"
python3 - "$dir/rounds" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    w = line.split()
    door = w[2]
    vals = dict(zip(w[3::2], w[4::2]))
    rows.setdefault(door, []).append({k: float(v) for k, v in vals.items()})
med = {}
for door, rs in rows.items():
    m = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
    lo = min(r["decisions/s"] for r in rs); hi = max(r["decisions/s"] for r in rs)
    med[door] = m
    print(f"{door}: median {m['decisions/s']:.0f} decisions/s (runs {lo:.0f} to {hi:.0f}), p50 {m['p50_us']:.0f} us, p99 {m['p99_us']:.0f} us, p999 {m['p999_us']:.0f} us, daemon CPU {m['daemon_cpu_us']:.2f} us per decision, errors {m['errors']:.0f}")
print(f"gRPC / HTTP decisions/s: {med['grpc']['decisions/s'] / med['http']['decisions/s']:.2f}; daemon CPU per decision: {med['grpc']['daemon_cpu_us'] / med['http']['daemon_cpu_us']:.2f}")
PY
