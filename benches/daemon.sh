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
  trap 'kill $daemon_pid 2>/dev/null || true; sleep 0.5; kill -9 $daemon_pid 2>/dev/null || true; rm -f "$daemon_cfg" "$daemon_log" "$daemon_log.err"' EXIT
  for _ in $(seq 50); do grep -q http= "$daemon_log" && break; sleep 0.1; done
}
bound() { sed -n "s/.*$1=\([0-9.:]*\).*/\1/p" "$daemon_log"; }

# start_series_daemon N [CONFIG] [KIND]: the release daemon on free ports with
# room for N counter series (or KIND: timer, histogram, ...; one 10 x 1 s
# window, the default; a TTL of an hour),
# or on CONFIG (e.g. config.toml, the headline configuration) with its
# [listen] moved to free loopback ports and everything else as the file
# says; then N series created with `rollstat-blast` (one line per name,
# repeated until the daemon holds them all). Sets $http and $udp.
# A KIND other than counter then gets VALUES (default 8) more values per
# series, spread over 1-500 (ms for a timer) and different for each series,
# so that its classic and native histograms hold several buckets
# (`send_values`; blast itself sends one value per name).
start_series_daemon() {
  local n=$1 config=${2:-} kind=${3:-counter}
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
  # A pass over the names: ~79 counter lines per datagram, ~65 timer lines.
  local per=80
  [ "$kind" = counter ] || per=60
  for _ in 1 2 3 4 5; do
    ./target/release/rollstat-blast --udp "$udp" --http "$http" --names "$n" \
      --lines-per-datagram 80 --rate 2000000 --max-datagrams $(( (n + per - 1) / per )) \
      --duration-secs 10 --drain-secs 2 --type "$kind" > /dev/null
    [ "$(held_series)" -ge "$n" ] && break
  done
  [ "$kind" = counter ] || send_values "$n" "$kind" "${VALUES:-8}"
  echo "series held: $(held_series)"
}
# send_values N KIND K: K lines per name `blast.m<i>:<v>|<type>` (the names
# blast uses), v = 1 + (37 i + 61 j) mod 500 for j = 0..K-1, in datagrams of
# at most 1400 bytes, paced to ~200k lines/s so that none is dropped.
send_values() {
  python3 - "$udp" "$1" "$2" "$3" <<'PY'
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
n, kind, k = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
t = {"timer": "ms", "histogram": "h", "distribution": "d", "gauge": "g"}[kind]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
buf, sent = b"", 0
def flush():
    global buf, sent
    s.sendto(buf, (host, int(port)))
    buf, sent = b"", sent + 1
    if sent % 40 == 0:
        time.sleep(0.01)
for j in range(k):
    for i in range(n):
        line = b"blast.m%06d:%d|%s\n" % (i, 1 + (37 * i + 61 * j) % 500, t.encode())
        if len(buf) + len(line) > 1400:
            flush()
        buf += line
if buf:
    flush()
PY
  sleep 1
}
held_series() { curl -s "http://$http/metrics" | sed -n 's/^rollstat_series \([0-9]*\).*/\1/p'; }
