"""The servers benches/compare drives: rollstat and its peers.

Each server is started fresh for a run on free loopback ports, stopped by
its PID, and read back the way its users read it: rollstat and
statsd_exporter through GET /metrics, etsy statsd through what its
graphite backend flushes (to a receiver of this harness's own).
"""

import http.client
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_tcp(port, proc, secs=20):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} before it listened")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listened on 127.0.0.1:{port} within {secs} s")


def proc_stat(pid):
    """(CPU seconds, VmRSS bytes, VmHWM bytes) of `pid`."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / tick
    rss = hwm = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024
    return cpu, rss, hwm


# A sample line of the text exposition: name, labels, value.
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
# A workload name as exposed: `<word>.c<i>` becomes `<word>_c<i>`, and
# the counters profile's `blast.m<i>` `blast_m<i>`; then a family suffix.
CONTEXT = re.compile(r"(?:_c|^blast_m)(\d+)(_total|_count|_sum|_bucket|_created)?$")


def read_prometheus(text):
    """Per context index: {"value", "total", "count"} of its samples.

    Buckets (`_bucket`) and sums are skipped by their suffix, never by a
    label: a workload tag may be called `le` or `quantile`. A summary's
    quantile samples land in "value", which only gauges read. The servers'
    own families (`rollstat_*`, Go's `go_*`) are left out by the name
    pattern alone: a workload name may begin with `go_`."""
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        name, labels, value = m.groups()
        c = CONTEXT.search(name)
        if not c:
            continue
        slot = {None: "value", "_total": "total", "_count": "count"}.get(c.group(2))
        if slot is None:
            continue
        try:
            v = float(value)
        except ValueError:
            continue
        out.setdefault(int(c.group(1)), {})[slot] = v
    return out


def counted_prometheus(samples, kind):
    """What a Prometheus-exposing server counted for a context of `kind`."""
    if samples is None:
        return None
    if kind == "counter":
        return samples.get("total", samples.get("value"))
    if kind == "gauge":
        return samples.get("value")
    if kind in ("timer", "histogram", "distribution"):
        return samples.get("count")
    return None


class Server:
    """One started server; subclasses say how to start and read it."""

    name = "?"
    # Whether it serves GET /metrics (scrape time is measured).
    exposes = True
    compares = ("counter", "gauge", "timer", "histogram", "distribution")

    def __init__(self):
        self.proc = None
        self.udp = free_port(socket.SOCK_DGRAM)
        self.http = free_port()
        self.log = tempfile.TemporaryFile()

    def start(self):
        raise NotImplementedError

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def stat(self):
        return proc_stat(self.proc.pid)

    def scrape(self, conn=None):
        """(text, seconds) of one GET /metrics."""
        own = conn is None
        conn = conn or http.client.HTTPConnection("127.0.0.1", self.http, timeout=30)
        t0 = time.monotonic()
        conn.request("GET", "/metrics", headers={"Accept": "text/plain;version=0.0.4"})
        body = conn.getresponse().read().decode("utf-8", "replace")
        secs = time.monotonic() - t0
        if own:
            conn.close()
        return body, secs

    def counted(self):
        """Per context index: its samples (read_prometheus's shape)."""
        return read_prometheus(self.scrape()[0])

    def value_of(self, samples, kind):
        return counted_prometheus(samples, kind)

    def sees_gauge(self, conn, name, value):
        text, _ = self.scrape(conn)
        metric = name.replace(".", "_")
        return re.search(rf"^{metric}(\{{[^}}]*\}})? {re.escape(value)}$", text, re.M) is not None

    def version(self):
        return "?"


class Rollstat(Server):
    name = "rollstat"
    compares = ("counter", "gauge", "timer", "histogram", "distribution")

    def __init__(self, binary, config):
        super().__init__()
        self.binary, self.config = binary, config

    def start(self):
        text = open(self.config).read()
        text = text.replace('statsd_udp = "127.0.0.1:8125"', f'statsd_udp = "127.0.0.1:{self.udp}"')
        text = text.replace('statsd_tcp = "127.0.0.1:8125"', 'statsd_tcp = ""')
        text = text.replace('http = "127.0.0.1:9102"', f'http = "127.0.0.1:{self.http}"')
        self.cfg = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        self.cfg.write(text)
        self.cfg.close()
        self.proc = subprocess.Popen(
            [self.binary, "--config", self.cfg.name, "--log", "warn"],
            stdout=self.log, stderr=self.log, cwd=REPO)
        wait_tcp(self.http, self.proc)

    def stop(self):
        super().stop()
        os.unlink(self.cfg.name)

    def version(self):
        return subprocess.run([self.binary, "--version"], capture_output=True, text=True).stdout.strip()


class StatsdExporter(Server):
    name = "statsd_exporter"

    def __init__(self, binary):
        super().__init__()
        self.binary = binary

    def start(self):
        self.proc = subprocess.Popen(
            [self.binary, f"--statsd.listen-udp=127.0.0.1:{self.udp}", "--statsd.listen-tcp=",
             f"--web.listen-address=127.0.0.1:{self.http}", "--log.level=warn"],
            stdout=self.log, stderr=self.log)
        wait_tcp(self.http, self.proc)

    def version(self):
        r = subprocess.run([self.binary, "--version"], capture_output=True, text=True)
        first = (r.stdout + r.stderr).strip().splitlines()
        return first[0] if first else "?"


class Graphite(threading.Thread):
    """A plaintext carbon receiver: what etsy statsd's graphite backend
    flushes, summed per flush (counter and timer counts) or kept (gauges)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.counts = {}
        self.gauges = {}
        self.seen = {}
        self.flushes = 0

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(1 << 16):
                    data += chunk
            self.take(data.decode("utf-8", "replace"))

    def take(self, text):
        with self.lock:
            self.flushes += 1
            for line in text.splitlines():
                parts = line.split(" ")
                if len(parts) != 3:
                    continue
                path, value = parts[0].split(";")[0], float(parts[1])
                self.seen[path] = value
                if path.startswith("stats.gauges."):
                    self.gauges[path[len("stats.gauges."):]] = value
                elif path.endswith(".count") and path.startswith(("stats.counters.", "stats.timers.")):
                    key = path[len("stats."):]
                    self.counts[key] = self.counts.get(key, 0.0) + value


ETSY_CONFIG = """{
  address: "127.0.0.1", port: %(udp)d,
  mgmt_address: "127.0.0.1", mgmt_port: %(mgmt)d,
  flushInterval: 1000,
  backends: ["./backends/graphite"],
  graphiteHost: "127.0.0.1", graphitePort: %(graphite)d,
  graphite: { legacyNamespace: false },
  deleteIdleStats: true
}
"""


class Etsy(Server):
    """etsy statsd: its counts come from its flushes; it has no
    histograms or distributions of the DogStatsD kind."""

    name = "etsy_statsd"
    exposes = False
    compares = ("counter", "gauge", "timer")

    def __init__(self, root):
        super().__init__()
        self.root = root
        self.stats_js = os.path.join(root, "node_modules", "statsd", "stats.js")
        if not os.path.exists(self.stats_js):
            raise RuntimeError(f"no etsy statsd at {self.stats_js} (npm install statsd in {root})")

    def start(self):
        self.graphite = Graphite()
        self.graphite.start()
        self.cfg = tempfile.NamedTemporaryFile("w", suffix=".js", delete=False)
        self.cfg.write(ETSY_CONFIG % {"udp": self.udp, "mgmt": self.http, "graphite": self.graphite.port})
        self.cfg.close()
        self.proc = subprocess.Popen(
            ["node", self.stats_js, self.cfg.name], stdout=self.log, stderr=self.log,
            cwd=os.path.dirname(self.stats_js))
        wait_tcp(self.http, self.proc)

    def stop(self):
        super().stop()
        self.graphite.sock.close()
        os.unlink(self.cfg.name)

    def counted(self):
        """Per context index, as read_prometheus gives it."""
        out = {}
        with self.graphite.lock:
            for key, v in self.graphite.counts.items():
                kind, _, name = key.partition(".")
                c = re.search(r"\.c(\d+)\.count$|^blast\.m(\d+)\.count$", name)
                if c:
                    out.setdefault(int(c.group(1) or c.group(2)), {})[kind] = v
            for name, v in self.graphite.gauges.items():
                c = re.search(r"\.c(\d+)$|^blast\.m(\d+)$", name)
                if c:
                    out.setdefault(int(c.group(1) or c.group(2)), {})["gauge"] = v
        return out

    def value_of(self, samples, kind):
        if samples is None:
            return None
        return samples.get({"counter": "counters", "timer": "timers", "gauge": "gauge"}.get(kind, "-"))

    def sees_gauge(self, conn, name, value):
        with self.graphite.lock:
            return self.graphite.gauges.get(name) == float(value)

    def version(self):
        pkg = os.path.join(self.root, "node_modules", "statsd", "package.json")
        import json
        return "etsy statsd " + json.load(open(pkg))["version"]


def make(spec, rollstat_bin, config):
    """A server factory from `--peer NAME=PATH` (or rollstat)."""
    name, _, path = spec.partition("=")
    if name == "rollstat":
        return lambda: Rollstat(path or rollstat_bin, config)
    if name == "statsd_exporter":
        return lambda: StatsdExporter(path)
    if name in ("etsy", "etsy_statsd"):
        return lambda: Etsy(path)
    raise SystemExit(f"--peer {spec}: unknown peer `{name}` (rollstat, statsd_exporter=PATH, etsy=DIR)")
