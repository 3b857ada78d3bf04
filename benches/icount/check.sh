#!/usr/bin/env bash
# Instructions per ingested line, counted by valgrind (callgrind), against
# the numbers committed in benches/icount/baseline.txt. Not a timed test:
# an instruction count is the same on a busy machine and an idle one, for
# the same binary, input and toolchain.
#
#   benches/icount/check.sh            # build, count, compare (exit 1 on > 5 % growth)
#   benches/icount/check.sh --update   # count and write baseline.txt
#
# Each workload runs tools/icount (rollstat-icount) on config.toml as
# shipped: it builds the workload's series, then callgrind counts only the
# steady part (`rollstat_icount::steady`, the same datagrams again). The cache
# geometry is fixed (--I1/--D1/--LL below) so that the modelled last-level
# misses do not depend on the host CPU; only instructions are gated.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=benches/icount
baseline=$here/baseline.txt
limit_pct=${ROLLSTAT_ICOUNT_LIMIT_PCT:-5}
update=0
[ "${1:-}" = "--update" ] && update=1

command -v valgrind >/dev/null || { echo "error: valgrind is not installed (Debian: apt-get install valgrind)" >&2; exit 2; }
bin=${ROLLSTAT_ICOUNT_BIN:-target/release/rollstat-icount}
if [ -z "${ROLLSTAT_ICOUNT_BIN:-}" ]; then
  cargo build --locked --release -p rollstat-icount
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# run NAME ARGS...: rollstat-icount ARGS under callgrind; prints
# "NAME instructions_per_line ll_misses_per_line lines".
run() {
  local name=$1; shift
  ROLLSTAT_ICOUNT_CONFIG=config.toml \
    valgrind --tool=callgrind --cache-sim=yes \
      --I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64 \
      --toggle-collect='rollstat_icount::steady' \
      --callgrind-out-file="$out/$name.out" \
      "$bin" "$@" > "$out/$name.stdout" 2> "$out/$name.stderr" || {
        echo "error: $name: $bin failed under valgrind:" >&2; tail -5 "$out/$name.stderr" >&2; exit 2; }
  local lines
  lines=$(sed -n 's/.* lines=\([0-9]*\).*/\1/p' "$out/$name.stdout")
  # callgrind's totals: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
  awk -v name="$name" -v lines="$lines" '
    /^events:/ { for (i = 2; i <= NF; i++) col[$i] = i - 1 }
    /^totals:/ {
      ir = $(col["Ir"] + 1); ll = $(col["ILmr"] + 1) + $(col["DLmr"] + 1) + $(col["DLmw"] + 1)
      printf "%s %.0f %.2f %d\n", name, ir / lines, ll / lines, lines
    }' "$out/$name.out"
}

measured=$(
  run counters counters 2000 10000
  run dogstatsd dogstatsd 20000 10000 20000
)

if [ $update = 1 ]; then
  {
    echo "# Instructions and modelled last-level cache misses per ingested line,"
    echo "# counted by benches/icount/check.sh on config.toml ($(rustc --version))."
    echo "# Update deliberately: benches/icount/check.sh --update, and say why in the commit."
    echo "# workload instructions_per_line ll_misses_per_line lines_counted"
    echo "$measured"
  } > "$baseline"
  cat "$baseline"
  exit 0
fi

fail=0
printf '%-10s %12s %12s %8s %10s\n' workload baseline measured change ll_misses
while read -r name ir ll lines; do
  base=$(awk -v n="$name" '$1 == n { print $2 }' "$baseline")
  [ -n "$base" ] || { echo "error: no baseline for $name in $baseline" >&2; exit 2; }
  pct=$(awk -v a="$ir" -v b="$base" 'BEGIN { printf "%+.1f", (a - b) * 100 / b }')
  printf '%-10s %12s %12s %7s%% %10s\n' "$name" "$base" "$ir" "$pct" "$ll"
  if awk -v a="$ir" -v b="$base" -v l="$limit_pct" 'BEGIN { exit !(a > b * (1 + l / 100)) }'; then
    echo "FAIL: $name costs $ir instructions a line, more than $limit_pct % above the committed $base." >&2
    echo "      Find the change that added the work (callgrind_annotate on the workload), or, if it is" >&2
    echo "      worth its cost, run benches/icount/check.sh --update and say why in the commit." >&2
    fail=1
  fi
done <<< "$measured"
[ $fail = 0 ] && echo "instructions per line: within $limit_pct % of $baseline"
exit $fail
