#!/usr/bin/env python3
"""What sharing a window costs in Redis, per metric type.

Each run starts a fresh redis-server and a fresh release daemon with the
shipped config.toml (ports moved to free ones) plus a first mapping rule
`fleet.**` with shared = true and a [redis] section pointing at that
redis-server (--bin: the daemon's binary, by default the repo's
target/release/rollstat; copy it elsewhere first if others rebuild while
you measure). Then --series series `fleet.s<i>` of --kind (c, g, ms, s)
get --rate samples a second each over UDP for --seconds (65 s by default,
so that config.toml's `1m` window of 60 x 1 s buckets is full); timer
values are log-normal around 20 ms, gauge values uniform, counters 1, and
a set's member is drawn uniformly from `u0` .. `u<--members - 1>`
(`fleet.s<i>:u<k>|s`; 1000 members by default).

Reported, after the run:
  * Redis bytes per shared series, by key kind (`MEMORY USAGE` of every
    key): the window hashes (`rollstat:win:...`, sums, counts and ranges;
    for sets also `<slot>:u` and the cached distinct count `#u`), the
    quantile bins (`...:q:<slot>`, timers, histograms, distributions),
    and for sets the members' HyperLogLog per bucket (`...:u:<slot>`, a
    string of at most 12,304 bytes) and, while a bucket's members are
    within the exact limit (EXACT_LIMIT in src/store/redis/window_sync.lua),
    the set of their hashes (`...:e:<slot>`); and the largest key;
  * bytes/s into and out of Redis (INFO stats total_net_input_bytes and
    total_net_output_bytes) and Redis CPU (INFO cpu, user + sys) over the
    last --steady seconds, and per sync (config.toml syncs every 100 ms);
  * timers: the fleet p99 of series 0 next to its local p99 (one instance:
    equal within the sketch's accuracy); sets: the fleet distinct count of
    series 0 over 1m (rollstat_fleet_window_unique) next to its local one
    (rollstat_window_unique; one instance: they agree).

Everything goes to loopback; every loop is bounded.

Usage:
  cargo build --release
  python3 benches/fleet/sketch_cost.py --kind ms --series 1000 --rate 10
  python3 benches/fleet/sketch_cost.py --kind c --series 1000 --rate 10
  python3 benches/fleet/sketch_cost.py --kind s --series 100 --rate 100 --members 100000
  python3 benches/fleet/sketch_cost.py --bin /tmp/rollstat-bench --kind s --series 100 --rate 10
"""

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import http.client

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, deadline=10.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def config(udp, tcp, http_port, redis_port):
    text = open(os.path.join(REPO, "config.toml")).read()
    text = text.replace('statsd_udp = "127.0.0.1:8125"', f'statsd_udp = "127.0.0.1:{udp}"')
    text = text.replace('statsd_tcp = "127.0.0.1:8125"', f'statsd_tcp = "127.0.0.1:{tcp}"')
    text = text.replace('http = "127.0.0.1:9102"', f'http = "127.0.0.1:{http_port}"')
    shared = '[[mappings]]\nmatch = "fleet.**"\nshared = true\n\n'
    text = text.replace("[[mappings]]\n", shared + "[[mappings]]\n", 1)
    return text + f'\n[redis]\nurl = "redis://127.0.0.1:{redis_port}/"\n'


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                          text=True, timeout=60).stdout


def info(port, section, keys):
    out = {}
    for line in cli(port, "INFO", section).splitlines():
        k, _, v = line.partition(":")
        if k in keys:
            out[k] = float(v)
    return out


def counters(port):
    a = info(port, "stats", ("total_net_input_bytes", "total_net_output_bytes"))
    a.update(info(port, "cpu", ("used_cpu_user", "used_cpu_sys")))
    return a


def commandstats(port):
    """(command, calls, usec) from INFO commandstats, most time first."""
    out = []
    for line in cli(port, "INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, _, rest = line[len("cmdstat_"):].partition(":")
            f = dict(kv.split("=") for kv in rest.split(","))
            out.append((name, int(f["calls"]), float(f["usec"])))
    return sorted(out, key=lambda x: -x[2])


KINDS = (("window", "window hashes"), ("bins", "`:q:` bins"), ("hll", "`:u:` HyperLogLogs"),
         ("exact", "`:e:` hash sets"))


def key_kind(k):
    """The kind of a key under `rollstat:win:`: the suffix after the window's
    own name (`:q:<slot>`, `:u:<slot>`, `:e:<slot>`), else its hash."""
    for kind, mark in (("bins", ":q:"), ("hll", ":u:"), ("exact", ":e:")):
        if mark in k:
            return kind
    return "window"


def memory(port):
    """Bytes and keys by key kind (window hashes, bin hashes, HyperLogLogs,
    exact hash sets) and the largest key: every MEMORY USAGE in one
    redis-cli session, so that keys do not expire while they are
    measured."""
    keys = [k for k in cli(port, "--scan", "--pattern", "rollstat:win:*").split() if k]
    script = "".join(f'MEMORY USAGE "{k}"\n' for k in keys)
    out = subprocess.run(["redis-cli", "-p", str(port)], input=script, capture_output=True,
                         text=True, timeout=300).stdout.split("\n")
    by = {kind: 0 for kind, _ in KINDS}
    n = {kind: 0 for kind, _ in KINDS}
    largest = (0, "")
    for k, line in zip(keys, out):
        b = int(line.strip()) if line.strip().isdigit() else 0
        kind = key_kind(k)
        by[kind] += b
        n[kind] += 1 if b else 0
        largest = max(largest, (b, k))
    return by, n, largest


def value(rng, kind, members):
    if kind == "s":
        return f"u{rng.randrange(members)}"
    if kind == "ms":
        return f"{rng.lognormvariate(3.0, 0.8):.3f}"
    if kind == "g":
        return f"{rng.uniform(0, 1000):.2f}"
    return "1"


def scrape(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return text


def sample(text, family, *labels):
    """The value of the first sample of `family` holding every label given."""
    for line in text.splitlines():
        if line.startswith(family + "{") and all(lab in line for lab in labels):
            return float(line.rsplit(" ", 1)[1])
    return None


def run(args):
    work = tempfile.mkdtemp(prefix="rollstat-sketch-cost-")
    udp, tcp, hp, rp = free_port(socket.SOCK_DGRAM), free_port(), free_port(), free_port()
    redis = subprocess.Popen(
        [shutil.which("redis-server"), "--port", str(rp), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", work],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    daemon = None
    try:
        if not wait_port(rp):
            sys.exit("redis-server did not start")
        cfg = os.path.join(work, "config.toml")
        open(cfg, "w").write(config(udp, tcp, hp, rp))
        log = open(os.path.join(work, "daemon.log"), "w")
        daemon = subprocess.Popen([args.bin, "--config", cfg], stdout=log, stderr=log)
        if not wait_port(hp):
            sys.exit(f"the daemon did not start; see {work}/daemon.log")
        rng = random.Random(7)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        t0 = time.monotonic()
        before = None
        tick = 0
        while time.monotonic() - t0 < args.seconds:
            if before is None and time.monotonic() - t0 >= args.seconds - args.steady:
                before = (counters(rp), time.monotonic())
            batch = []
            each = int((tick + 1) * args.rate / 10) - int(tick * args.rate / 10)
            for i in range(args.series):
                for _ in range(each):
                    batch.append(f"fleet.s{i}:{value(rng, args.kind, args.members)}|{args.kind}")
            for j in range(0, len(batch), 40):
                s.sendto("\n".join(batch[j:j + 40]).encode(), ("127.0.0.1", udp))
            tick += 1
            wait = t0 + tick * 0.1 - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        after = (counters(rp), time.monotonic())
        stats = commandstats(rp)
        secs = after[1] - before[1]
        d = {k: after[0][k] - before[0][k] for k in after[0]}
        cpu = d["used_cpu_user"] + d["used_cpu_sys"]
        by, n, largest = memory(rp)
        text = scrape(hp)
        shared = sum(1 for line in text.splitlines()
                     if line.startswith("rollstat_fleet_window_samples{") and 'window="1m"' in line)
        print(f"kind {args.kind}: {args.series} series x {args.rate}/s for {args.seconds} s "
              f"(config.toml, windows 10s and 1m); {shared} with a fleet view of 1m")
        for kind, name in KINDS:
            if n[kind]:
                print(f"  {name:18} keys {n[kind]:6}: {by[kind] / args.series:9.0f} B a series "
                      f"({by[kind] / n[kind]:7.0f} B a key)")
        total = sum(by.values()) / args.series
        print(f"  total {total:.0f} B a series; largest key {largest[0]} B ({largest[1]})")
        print(f"  over the last {secs:.0f} s: into Redis {d['total_net_input_bytes'] / secs / 1e3:.1f} kB/s, "
              f"out {d['total_net_output_bytes'] / secs / 1e3:.1f} kB/s, Redis CPU {cpu / secs * 100:.1f} % "
              f"of a core ({cpu / secs / 10 * 1e3:.2f} ms a sync)")
        total_usec = sum(u for _, _, u in stats) or 1
        print("  Redis CPU by command (whole run, scripts' own calls included): " + ", ".join(
            f"{name} {u / total_usec * 100:.0f} % ({u / max(calls, 1):.1f} us a call)"
            for name, calls, u in stats[:6]))
        if args.kind == "ms":
            labels = ('metric="fleet.s0"', 'window="1m"', 'q="0.99"')
            print(f"  series 0, 1m p99: fleet {sample(text, 'rollstat_fleet_window_quantile', *labels)} "
                  f"local {sample(text, 'rollstat_window_quantile', *labels)}")
        if args.kind == "s":
            labels = ('metric="fleet.s0"', 'window="1m"')
            print(f"  series 0, 1m distinct: fleet {sample(text, 'rollstat_fleet_window_unique', *labels)} "
                  f"local {sample(text, 'rollstat_window_unique', *labels)} "
                  f"(members drawn from {args.members})")
    finally:
        for p in (daemon, redis):
            if p is not None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/rollstat"),
                    help="the daemon's binary (default: the repo's target/release/rollstat)")
    ap.add_argument("--kind", choices=("c", "g", "ms", "s"), default="ms")
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--rate", type=int, default=10, help="samples a second per series")
    ap.add_argument("--members", type=int, default=1000,
                    help="sets: each sample's member is drawn uniformly from u0 .. u<N-1>")
    ap.add_argument("--seconds", type=float, default=65)
    ap.add_argument("--steady", type=float, default=20)
    run(ap.parse_args())


if __name__ == "__main__":
    main()
