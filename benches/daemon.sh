# Sourced by the benches' shell scripts: start_daemon CONFIG_TEXT starts the
# release binary on that config (written to a temp file), stops it on exit,
# and sets $daemon_log to its stdout, from which the addresses it bound are
# read with `bound http` or `bound statsd_udp`.
start_daemon() {
  daemon_cfg=$(mktemp)
  daemon_log=$(mktemp)
  printf '%s\n' "$1" > "$daemon_cfg"
  # stderr to a file of its own: a daemon left behind must not hold the
  # caller's pipe open.
  "${ROLLSTAT_BIN:-./target/release/rollstat}" --config "$daemon_cfg" --log warn > "$daemon_log" 2> "$daemon_log.err" &
  daemon_pid=$!
  # SIGKILL if SIGTERM did not stop it (an older build stuck in a request).
  trap 'kill $daemon_pid 2>/dev/null; sleep 0.5; kill -9 $daemon_pid 2>/dev/null; rm -f "$daemon_cfg" "$daemon_log" "$daemon_log.err"' EXIT
  for _ in $(seq 50); do grep -q http= "$daemon_log" && break; sleep 0.1; done
}
bound() { sed -n "s/.*$1=\([0-9.:]*\).*/\1/p" "$daemon_log"; }

# start_series_daemon N [CONFIG]: the release daemon on free ports with room
# for N counter series (one 10 x 1 s window, the default; a TTL of an hour),
# or on CONFIG (e.g. config.toml, the headline configuration) with its
# [listen] moved to free loopback ports and everything else as the file
# says; then N series created with `rollstat-blast` (one line per name,
# repeated until the daemon holds them all). Sets $http and $udp.
start_series_daemon() {
  local n=$1 config=${2:-}
  if [ -n "$config" ]; then
    start_daemon "$(sed -e 's/^statsd_udp = .*/statsd_udp = "127.0.0.1:0"/' \
      -e 's/^statsd_tcp = .*/statsd_tcp = ""/' -e 's/^statsd_unix = .*/statsd_unix = ""/' \
      -e 's/^http = .*/http = "127.0.0.1:0"/' "$config")"
  else
  start_daemon "$(cat <<CFG
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"
[series]
max_series = $((n + 1000))
ttl_secs = 3600
CFG
)"
  fi
  http=$(bound http)
  udp=$(bound statsd_udp)
  for _ in 1 2 3 4 5; do
    ./target/release/rollstat-blast --udp "$udp" --http "$http" --names "$n" \
      --lines-per-datagram 80 --rate 2000000 --max-datagrams $(( (n + 79) / 80 )) \
      --duration-secs 10 --drain-secs 2 > /dev/null
    [ "$(held_series)" -ge "$n" ] && break
  done
  echo "series held: $(held_series)"
}
held_series() { curl -s "http://$http/metrics" | sed -n 's/^rollstat_series \([0-9]*\).*/\1/p'; }
