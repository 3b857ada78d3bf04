#!/usr/bin/env bash
# Rate-limit decisions per second and latency through Envoy's gRPC door
# (ShouldRateLimit) beside rollstat's own HTTP acquire, the same generator
# (examples/rls_load.rs, 32 calls in flight, 1000 keys) in the same run, on
# config.toml as shipped plus an [rls] section:
#   benches/rls/run.sh [rounds] [seconds] [streams] [local|redis]
# Each round runs gRPC then HTTP for `seconds` each; prints every round and
# the medians with their spread, and the gRPC/HTTP ratio of the medians.
# With `redis`, a redis-server is started on a free loopback port and both
# doors decide there: [rls] shared = true, and the HTTP door asks a shared
# [[limits]] entry of the same rule (100 a second); Redis's CPU per
# decision is reported beside the daemon's.
# Loopback only; the daemon (and redis-server) are stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
secs=${2:-5}
streams=${3:-32}
mode=${4:-local}
cargo build --release --quiet --bin rollstat --example rls_load
dir=$(mktemp -d)
rpid=
trap 'kill "$pid" $rpid 2>/dev/null || true; rm -rf "$dir"' EXIT
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
if [ "$mode" = redis ]; then
  rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no > "$dir/redis.log" 2>&1 &
  rpid=$!
  for _ in $(seq 50); do redis-cli -p "$rport" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
  printf 'shared = true\n\n[[limits]]\nname = "api_shared"\nshared = true\nrules = [{ max = 100, window_ms = 1000 }]\n\n[redis]\nurl = "redis://127.0.0.1:%s"\ntimeout_ms = 100\n' "$rport" >> "$dir/rollstat.toml"
  export ROLLSTAT_LIMIT=api_shared
fi
target/release/rollstat --config "$dir/rollstat.toml" > "$dir/out" 2> "$dir/err" &
pid=$!
for _ in $(seq 100); do grep -q "rollstat listening" "$dir/out" 2>/dev/null && break; sleep 0.1; done
grep -q "rollstat listening" "$dir/out" || { echo "the daemon did not start:" >&2; cat "$dir/err" >&2; exit 1; }
grpc=$(sed -n 's/.*rls_grpc=\([0-9.:]*\).*/\1/p' "$dir/out")
http=$(sed -n 's/.* http=\([0-9.:]*\).*/\1/p' "$dir/out")
echo "config.toml + [rls] ($mode); gRPC $grpc, HTTP $http; $rounds rounds of $secs s, $streams in flight, $(nproc) cores shared with the generator"
# A process's CPU time (user + system, clock ticks) from /proc.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
per() { awk -v t="$1" -v n="$2" -v hz="$hz" 'BEGIN {printf "%.2f", t * 1e6 / hz / n}'; }
one() { # door address: the generator's line, then the daemon's (and Redis's) CPU per decision
  local before after rbefore rafter line n extra=
  before=$(ticks "$pid")
  [ -n "$rpid" ] && rbefore=$(ticks "$rpid")
  line=$(target/release/examples/rls_load "$1" "$2" "$secs" "$streams")
  after=$(ticks "$pid")
  n=$(awk '{print $2 * '"$secs"'}' <<<"$line")
  if [ -n "$rpid" ]; then rafter=$(ticks "$rpid"); extra=" redis_cpu_us $(per $((rafter - rbefore)) "$n")"; fi
  echo "$line daemon_cpu_us $(per $((after - before)) "$n")$extra"
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
    redis = f", Redis CPU {m['redis_cpu_us']:.2f} us per decision" if "redis_cpu_us" in m else ""
    print(f"{door}: median {m['decisions/s']:.0f} decisions/s (runs {lo:.0f} to {hi:.0f}), p50 {m['p50_us']:.0f} us, p99 {m['p99_us']:.0f} us, p999 {m['p999_us']:.0f} us, daemon CPU {m['daemon_cpu_us']:.2f} us per decision{redis}, errors {m['errors']:.0f}")
print(f"gRPC / HTTP decisions/s: {med['grpc']['decisions/s'] / med['http']['decisions/s']:.2f}; daemon CPU per decision: {med['grpc']['daemon_cpu_us'] / med['http']['daemon_cpu_us']:.2f}")
PY
