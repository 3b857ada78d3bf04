# Sourced by the benches' shell scripts: start_daemon CONFIG_TEXT starts the
# release binary on that config (written to a temp file), stops it on exit,
# and sets $daemon_log to its stdout, from which the addresses it bound are
# read with `bound http` or `bound statsd_udp`.
start_daemon() {
  daemon_cfg=$(mktemp)
  daemon_log=$(mktemp)
  printf '%s\n' "$1" > "$daemon_cfg"
  ./target/release/rollstat --config "$daemon_cfg" --log warn > "$daemon_log" &
  daemon_pid=$!
  trap 'kill $daemon_pid 2>/dev/null; rm -f "$daemon_cfg" "$daemon_log"' EXIT
  for _ in $(seq 50); do grep -q http= "$daemon_log" && break; sleep 0.1; done
}
bound() { sed -n "s/.*$1=\([0-9.:]*\).*/\1/p" "$daemon_log"; }
