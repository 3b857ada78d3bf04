#!/bin/sh
# Checks contrib/systemd/rollstat.service (or the unit given as $1) with
# systemd-analyze:
#   verify    the unit parses and every directive is known (fails the script)
#   security  the sandbox's exposure score (printed, informational)
# The unit names /usr/local/bin/rollstat, which verify requires to exist: a
# copy of the unit pointing at the built binary ($ROLLSTAT_BIN, default
# target/debug/rollstat, then target/release/rollstat) is checked instead.
# Without systemd-analyze, says it was skipped and exits 0: nothing was
# checked, and the output says so.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
unit=${1:-"$here/rollstat.service"}

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "SKIPPED: systemd-analyze is not installed; $unit was not checked." >&2
    exit 0
fi

bin=${ROLLSTAT_BIN:-}
if [ -z "$bin" ]; then
    for b in "$repo/target/debug/rollstat" "$repo/target/release/rollstat"; do
        if [ -x "$b" ]; then bin=$b; break; fi
    done
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    echo "error: no rollstat binary to point the unit at; run 'cargo build' or set ROLLSTAT_BIN" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s#/usr/local/bin/rollstat#$bin#g" "$unit" > "$tmp/rollstat.service"

systemd-analyze --version | head -n 1
# verify prints warnings and errors; any output about the unit is a failure
# (it exits 0 on some warnings, e.g. an unknown directive).
out=$(systemd-analyze verify "$tmp/rollstat.service" 2>&1) || {
    echo "$out" >&2
    echo "FAILED: systemd-analyze verify $unit" >&2
    exit 1
}
# Lines about other units (the host's own) are not ours.
ours=$(printf '%s\n' "$out" | grep 'rollstat.service' || true)
if [ -n "$ours" ]; then
    echo "$ours" >&2
    echo "FAILED: systemd-analyze verify $unit has warnings" >&2
    exit 1
fi
echo "ok: systemd-analyze verify $unit"

# Exposure score (0 = most locked down, 10 = not at all), informational.
if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
    systemd-analyze security --offline=true --no-pager "$tmp/rollstat.service" | tail -n 1
else
    echo "systemd-analyze security --offline is not available here; no score"
fi
