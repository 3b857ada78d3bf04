#!/usr/bin/env bash
# The daemon figures on the shipped config.toml, in one batch with
# the runs interleaved (a shared machine's speed drifts from minute to minute, so
# compare within a batch):
#   benches/blast/config_toml.sh [ROUNDS]
# * daemon CPU per line at 800k lines/s, 10k counter names, ~80 lines per
#   datagram: config.toml from 1 flow and from 4 flows, and config.toml
#   without its `1m` window (what the second window costs);
# * 3M lines/s from 1 and from 4 flows (counted, lost);
# * 100k names at 1.5M lines/s.
# ROLLSTAT_BIN picks the daemon (default: the release build, built here).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
[ -n "${ROLLSTAT_BIN:-}" ] || cargo build --release --quiet --bins
bin=${ROLLSTAT_BIN:-target/release/rollstat}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# config.toml without the `1m` window: its [[windows]] block removed, and
# the timer rule's window list cut to `10s`.
python3 - "$tmp/config-10s.toml" <<'PY'
import sys
s = open("config.toml").read()
i = s.index('name = "1m"')
start = s.rfind("[[windows]]", 0, i)
end = s.index("ignore_current = true\n", i) + len("ignore_current = true\n")
s = s[:start] + s[end:]
s = s.replace('windows = ["10s", "1m"]', 'windows = ["10s"]')
open(sys.argv[1], "w").write(s)
PY
row() {
  target/release/rollstat-blast --spawn --daemon-bin "$bin" "$@" 2>/dev/null |
    awk '/^(lines_per_sec_counted|loss_pct|kernel_drops_datagrams|daemon_cpu_ns_per_line|drain_secs) /{printf "%s=%s ", $1, $2}'
  echo " [$*]"
}
echo "== start $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== 800k lines/s, 10k names: config.toml 1 flow, 4 flows; 10s-only 1 flow"
for _ in $(seq "$rounds"); do
  row --config config.toml --names 10000 --rate 800000 --flows 1 --duration-secs 3
  row --config config.toml --names 10000 --rate 800000 --flows 4 --duration-secs 3
  row --config "$tmp/config-10s.toml" --names 10000 --rate 800000 --flows 1 --duration-secs 3
done
echo "== 3M lines/s, 10k names, 1 and 4 flows"
for _ in $(seq 3); do
  row --config config.toml --names 10000 --rate 3000000 --flows 1 --duration-secs 5
  row --config config.toml --names 10000 --rate 3000000 --flows 4 --duration-secs 5
done
echo "== 100k names at 1.5M lines/s"
for _ in $(seq 3); do
  row --config config.toml --names 100000 --rate 1500000 --flows 1 --duration-secs 5
done
echo "== end $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
