#!/usr/bin/env bash
# rollstat beside its peers, one command (docs/performance.md, "Beside the peers"):
#
#   benches/compare/run.sh --peer statsd_exporter=/path/to/statsd_exporter --peer etsy [compare.py options]
#
# Builds rollstat and rollstat-blast (release), puts matplotlib in a venv at
# benches/compare/.venv, installs etsy statsd from npm into
# benches/compare/.etsy when `--peer etsy` names no directory, then runs
# compare.py (its options: benches/compare/compare.py --help). Loopback only;
# every run is bounded (blast's 120 s cap, a 30 s settle, 200 s a send).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
cargo build --locked --release -p rollstat -p rollstat-blast
if [ ! -x "$here/.venv/bin/python" ]; then
  python3 -m venv "$here/.venv"
  "$here/.venv/bin/pip" install -q -r "$here/requirements.txt"
fi
args=()
for a in "$@"; do
  if [ "$a" = "etsy" ]; then
    if [ ! -f "$here/.etsy/node_modules/statsd/stats.js" ]; then
      mkdir -p "$here/.etsy"
      (cd "$here/.etsy" && npm install --no-audit --no-fund -s statsd@0.9.0)
    fi
    a="etsy=$here/.etsy"
  fi
  args+=("$a")
done
exec "$here/.venv/bin/python" "$here/compare.py" "${args[@]}"
