#!/usr/bin/env python3
"""Soak: ten minutes of mixed load on the release daemon running the shipped
config.toml (ports moved to free ones, plus a [redis] section so that one
limit and one mapping are shared), with a real redis-server that is killed
and restarted half-way.

Not part of CI (it runs for --minutes, 10 by default). Everything goes to
loopback; every loop is bounded in count and in time.

Load, all at once:
  * good lines: `soak.good:1|c` at a steady --rate lines/s over UDP, in
    datagrams of 40 lines, and over TCP (1 line in 10), each line counted
    by the sender;
  * hostile lines: malformed lines, invalid UTF-8, NaN values, oversized
    tags and datagrams, lines beside good ones;
  * new names beyond the cap: `soak.new.<i>:1|c`, a new name every
    1/--new-rate s (config.toml caps series at 100,000);
  * scrapes of /metrics every second (and the OpenMetrics form every 10th),
    each read back for its series count;
  * limit decisions: the local `api` limit and the shared `shared_api` one;
  * hostile HTTP: cross-origin POSTs, a foreign Host, slow-header connections;
  * reloads: SIGHUP every 60 s, alternating the shared limit's max;
  * a Redis outage: redis-server SIGKILLed at 50 % of the run, restarted on
    the same port 10 s later.

Reported (Markdown on stdout, raw figures in --json):
  * RSS and open fds every 10 s;
  * loss: good lines sent against what the daemon counted for soak.good;
  * every self-metric (rollstat_*, process_*) whose value moved, first and
    last scrape side by side;
  * what the stop logged (drain and final sync lines).

Usage:
  cargo build --release
  python3 benches/soak/soak.py [--minutes 10] [--rate 20000] [--json soak.json] [--log daemon.log]
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_redis(port, workdir):
    exe = shutil.which("redis-server")
    if not exe:
        sys.exit("redis-server not found: .ci/install-redis-deps installs it")
    return subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_port(port, deadline=10.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def soak_config(udp, tcp, http, redis_port, shared_max):
    """config.toml as shipped, on free ports, with a shared limit and a shared mapping."""
    text = open(os.path.join(REPO, "config.toml")).read()
    text = text.replace('statsd_udp = "127.0.0.1:8125"', f'statsd_udp = "127.0.0.1:{udp}"')
    text = text.replace('statsd_tcp = "127.0.0.1:8125"', f'statsd_tcp = "127.0.0.1:{tcp}"')
    text = text.replace('http = "127.0.0.1:9102"', f'http = "127.0.0.1:{http}"')
    # Shared mapping first: first match wins.
    shared_mapping = ('[[mappings]]\nmatch = "soak.shared.*"\nmatch_type = "counter"\n'
                      'rename = "soak.shared"\nlabels = { part = "$1" }\nshared = true\n\n')
    text = text.replace("[[mappings]]\n", shared_mapping + "[[mappings]]\n", 1)
    text += f"""
[[limits]]
name = "shared_api"
algorithm = "exact"
rules = [{{ max = {shared_max}, window_ms = 60000 }}]
shared = true
on_store_error = "local"

[redis]
url = "redis://127.0.0.1:{redis_port}/"
"""
    return text


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.n = {}

    def add(self, k, v=1):
        with self.lock:
            self.n[k] = self.n.get(k, 0) + v


def http(method, port, path, body=None, headers=None, timeout=5.0):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return None, b""


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')


def parse_scrape(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if m:
            try:
                out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
            except ValueError:
                pass
    return out


def rss_fds(pid):
    rss = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss, fds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=20000, help="good lines per second")
    ap.add_argument("--new-rate", type=int, default=400, help="new names per second")
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/rollstat"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--log", default=None, help="keep the daemon's log at this path")
    args = ap.parse_args()
    duration = args.minutes * 60
    work = tempfile.mkdtemp(prefix="rollstat-soak-")
    udp, tcp, hp, rp = free_port(socket.SOCK_DGRAM), free_port(), free_port(), free_port()
    redis = start_redis(rp, work)
    if not wait_port(rp):
        sys.exit("redis-server did not start")
    cfg_path = os.path.join(work, "config.toml")
    open(cfg_path, "w").write(soak_config(udp, tcp, hp, rp, 600))
    log_path = os.path.join(work, "daemon.log")
    log = open(log_path, "w")
    daemon = subprocess.Popen([args.bin, "--config", cfg_path, "--log", "info"], stdout=log, stderr=log)
    if not wait_port(hp):
        sys.exit(f"the daemon did not start; see {log_path}")
    start = time.monotonic()
    stop_at = start + duration
    stop = threading.Event()
    sent = Counter()
    events = []

    def ev(what):
        events.append((round(time.monotonic() - start, 1), what))

    def good_udp():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        per = 40
        dgram = b"\n".join([b"soak.good:1|c"] * per)
        shared = b"soak.shared.a:1|c\nsoak.shared.b:2|c"
        rate = args.rate * 0.9
        t0 = time.monotonic()
        n = 0
        while not stop.is_set():
            due = t0 + n * per / rate
            now = time.monotonic()
            if due > now:
                time.sleep(min(due - now, 0.05))
                continue
            s.sendto(dgram, ("127.0.0.1", udp))
            sent.add("good_udp", per)
            n += 1
            if n % 50 == 0:
                s.sendto(shared, ("127.0.0.1", udp))
                sent.add("shared_udp", 2)

    def good_tcp():
        rate = args.rate * 0.1
        while not stop.is_set():
            try:
                c = socket.create_connection(("127.0.0.1", tcp), timeout=2)
            except OSError:
                time.sleep(0.2)
                continue
            t0 = time.monotonic()
            n = 0
            try:
                while not stop.is_set() and n < 200_000:
                    due = t0 + n * 10 / rate
                    now = time.monotonic()
                    if due > now:
                        time.sleep(min(due - now, 0.05))
                        continue
                    c.sendall(b"soak.good:1|c\n" * 10)
                    sent.add("good_tcp", 10)
                    n += 1
            except OSError:
                sent.add("tcp_errors")
            c.close()

    hostile_lines = [
        b"soak.bad", b"soak.bad:1|zz", b"soak.bad:abc|c", b"\xff\xfe\xfd:1|c", b"soak.nan:nan|g",
        b"soak.inf:inf|c", b"soak.tags:1|c|#" + b",".join(b"k%d:%s" % (i, b"v" * 200) for i in range(64)),
        b":1|c", b"soak.rate:1|c|@0", b"soak.rate:1|c|@2", b"soak.bad:1|c|#\x00",
    ]

    def hostile():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        while not stop.is_set():
            dg = b"\n".join(random.choice(hostile_lines) for _ in range(20))
            # Good lines beside bad ones: they must be kept.
            dg = dg[:60000] + b"\nsoak.good:1|c"
            s.sendto(dg, ("127.0.0.1", udp))
            sent.add("hostile_datagrams")
            sent.add("good_udp", 1)
            s.sendto(b"x" * 65000, ("127.0.0.1", udp))
            sent.add("oversized_datagrams")
            time.sleep(0.01)

    def new_names():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        i = 0
        t0 = time.monotonic()
        while not stop.is_set():
            due = t0 + i * 20 / args.new_rate
            now = time.monotonic()
            if due > now:
                time.sleep(min(due - now, 0.05))
                continue
            s.sendto(b"\n".join(b"soak.new.%d:1|c" % (i * 20 + j) for j in range(20)), ("127.0.0.1", udp))
            sent.add("new_names", 20)
            i += 1

    scrapes = []

    def scraper():
        k = 0
        while not stop.is_set():
            k += 1
            om = k % 10 == 0
            t0 = time.monotonic()
            st, body = http("GET", hp, "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"} if om else {})
            ms = (time.monotonic() - t0) * 1000
            if st == 200:
                scrapes.append((round(time.monotonic() - start, 1), ms, len(body)))
                sent.add("scrapes_ok")
            else:
                sent.add(f"scrapes_{st}")
            time.sleep(1.0)

    def decisions():
        while not stop.is_set():
            for name in ("api", "shared_api"):
                st, body = http("POST", hp, f"/api/v1/limits/{name}/acquire?key=user{random.randint(0, 50)}")
                sent.add(f"acquire_{name}_{st}")
            time.sleep(0.02)

    def hostile_http():
        while not stop.is_set():
            st, _ = http("POST", hp, "/api/v1/limits/api/acquire?key=x",
                         headers={"Origin": "http://evil.example"})
            sent.add(f"cross_origin_{st}")
            st, _ = http("GET", hp, "/metrics", headers={"Host": "rebind.evil.example"})
            sent.add(f"foreign_host_{st}")
            try:
                c = socket.create_connection(("127.0.0.1", hp), timeout=2)
                c.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                sent.add("slow_headers_opened")
                time.sleep(0.5)
                c.close()
            except OSError:
                sent.add("slow_headers_refused")
            time.sleep(0.5)

    samples = []

    def sampler():
        while not stop.is_set():
            try:
                rss, fds = rss_fds(daemon.pid)
                samples.append((round(time.monotonic() - start, 1), rss, fds))
            except OSError:
                pass
            stop.wait(10)

    first_scrape = parse_scrape(http("GET", hp, "/metrics")[1].decode("utf-8", "replace"))
    threads = [threading.Thread(target=f, daemon=True) for f in
               (good_udp, good_tcp, hostile, new_names, scraper, decisions, hostile_http, sampler)]
    for t in threads:
        t.start()
    ev("load started")
    next_reload = start + 60
    reload_max = 600
    redis_killed = False
    redis_back = False
    while time.monotonic() < stop_at:
        now = time.monotonic()
        if now >= next_reload:
            reload_max = 700 if reload_max == 600 else 600
            open(cfg_path, "w").write(soak_config(udp, tcp, hp, rp, reload_max))
            daemon.send_signal(signal.SIGHUP)
            ev(f"SIGHUP (shared_api max {reload_max})")
            next_reload += 60
        if not redis_killed and now >= start + duration / 2:
            redis.kill()
            redis.wait()
            redis_killed = True
            killed_at = now
            ev("redis-server SIGKILLed")
        if redis_killed and not redis_back and now >= killed_at + 10:
            redis = start_redis(rp, work)
            redis_back = wait_port(rp)
            ev("redis-server restarted" if redis_back else "redis-server did not restart")
        if daemon.poll() is not None:
            ev(f"the daemon exited by itself: {daemon.returncode}")
            break
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(timeout=10)
    time.sleep(1.5)  # the last datagrams in flight
    last_text = http("GET", hp, "/metrics")[1].decode("utf-8", "replace")
    last_scrape = parse_scrape(last_text)
    t0 = time.monotonic()
    daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(timeout=30)
    except subprocess.TimeoutExpired:
        daemon.kill()
        ev("the daemon did not stop within 30 s of SIGTERM: killed")
    stop_secs = time.monotonic() - t0
    redis.kill()
    log.close()
    log_text = open(log_path, errors="replace").read()

    # Loss: the cumulative counter of soak.good against the lines sent.
    good_sent = sent.n.get("good_udp", 0) + sent.n.get("good_tcp", 0)
    good_seen = sum(v for k, v in last_scrape.items()
                    if k.startswith("soak_good") and (k.endswith("_total") or "_total{" in k))
    moved = []
    for k in sorted(set(first_scrape) | set(last_scrape)):
        if not (k.startswith("rollstat_") or k.startswith("process_")):
            continue
        if k.startswith("rollstat_window") or k.startswith("rollstat_fleet_window"):
            continue
        a, b = first_scrape.get(k), last_scrape.get(k)
        if a != b:
            moved.append((k, a, b))
    stop_lines = [l for l in log_text.splitlines()
                  if re.search(r"drain|final|stopped|Shutting down|sync", l, re.I)][-12:]

    report = {
        "config": "config.toml as shipped, free ports, plus [redis], a shared limit and a shared mapping",
        "minutes": args.minutes, "rate": args.rate, "new_rate": args.new_rate,
        "rss_fds": samples, "events": events, "sent": sent.n,
        "good_sent": good_sent, "good_counted": good_seen,
        "loss_pct": (100.0 * (good_sent - good_seen) / good_sent) if good_sent else None,
        "scrape_ms": sorted(s[1] for s in scrapes),
        "scrape_bytes_last": scrapes[-1][2] if scrapes else None,
        "moved": moved, "stop_secs": stop_secs, "exit_code": daemon.returncode, "stop_log": stop_lines,
    }
    if args.json:
        json.dump(report, open(args.json, "w"), indent=1)
    p = print
    p(f"# Soak: {args.minutes:g} min, {args.rate} good lines/s, {args.new_rate} new names/s\n")
    p(f"config: {report['config']}\n")
    p("## Events\n")
    for t, e in events:
        p(f"- {t:7.1f} s: {e}")
    p("\n## RSS and open fds\n\n| t (s) | RSS (MiB) | fds |\n| ---: | ---: | ---: |")
    for t, rss, fds in samples:
        p(f"| {t} | {rss:.1f} | {fds} |")
    p("\n## Loss\n")
    p(f"good lines sent {good_sent}, counted {good_seen:.0f}: loss {report['loss_pct']:.4f} %" if good_sent else "no good lines sent")
    sm = report["scrape_ms"]
    if sm:
        p(f"\nscrapes: {len(sm)} ok, median {sm[len(sm)//2]:.1f} ms, p99 {sm[int(len(sm)*0.99)]:.1f} ms, max {sm[-1]:.1f} ms; last body {report['scrape_bytes_last']} bytes")
    p("\n## What was sent\n")
    for k in sorted(sent.n):
        p(f"- {k}: {sent.n[k]}")
    p("\n## Self-metrics that moved (first scrape -> last scrape)\n\n| series | first | last |\n| --- | ---: | ---: |")
    for k, a, b in moved:
        p(f"| `{k}` | {a if a is not None else '-'} | {b if b is not None else '-'} |")
    p(f"\n## Stop\n\nSIGTERM to exit: {stop_secs:.2f} s, exit code {daemon.returncode}\n")
    for l in stop_lines:
        p(f"    {l[:300]}")
    if args.log:
        shutil.copy(log_path, args.log)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
