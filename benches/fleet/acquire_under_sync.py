#!/usr/bin/env python3
"""Shared-limit acquire latency while many shared series with long tags sync.

Each run starts a fresh redis-server and a fresh release daemon with the
shipped config.toml (ports moved to free ones) plus:
  * a mapping rule `fleet.**` with shared = true (first rule, so it wins),
    its tags kept as labels;
  * a shared exact limit `shared_api` (1,000,000 per 60 s, so every answer
    is a 200 and what is measured is the round trip through Redis);
  * a [redis] section pointing at that redis-server.

Then, on one keep-alive HTTP connection, POST
/api/v1/limits/shared_api/acquire?key=k<i % 100> one after the other:
  1. `idle`: --acquires requests with no statsd traffic;
  2. `sync`: --series series `fleet.s<i>` with --tags DogStatsD tags of
     --tag-len bytes each are sent over UDP every --period seconds (one line
     per datagram; every line changes the series' current bucket, so every
     shared window has deltas at every sync), and after --warmup seconds,
     --acquires requests again.
Reported per phase: p50, p99 and max latency (ms, seen by the client), and
bytes/s into Redis (INFO stats total_net_input_bytes) over the sync phase.

config.toml caps a series' label bytes at 2048 ([series] max_label_bytes)
and, from issue #17, a shared series' name and labels at 1024
([redis] max_shared_label_bytes): the default 18 tags of 48 bytes stay below
both, so every series is kept and shared. Each run reports how many series
have a fleet view on /metrics at the end, so a run where they are not
shared shows it.

With --label-bytes, both caps are raised to it (the second only for a
binary that has it), for the issue's long-tag case: e.g. --tags 64
--tag-len 384 --label-bytes 32768 --period 1.

With several --bin, runs alternate between them (A B A B ...), so that the
machine's noise falls on both alike; medians of the runs are printed with
their min and max. Everything goes to loopback; every loop is bounded.

Usage:
  cargo build --release
  python3 benches/fleet/acquire_under_sync.py --bin new=target/release/rollstat \\
      [--bin old=/path/to/older/rollstat] [--runs 3] [--json out.json]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
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


def config(udp, tcp, http_port, redis_port, label_bytes=None, shared_label_bytes=False):
    text = open(os.path.join(REPO, "config.toml")).read()
    if label_bytes:
        text = text.replace("max_label_bytes = 2048", f"max_label_bytes = {label_bytes}")
    text = text.replace('statsd_udp = "127.0.0.1:8125"', f'statsd_udp = "127.0.0.1:{udp}"')
    text = text.replace('statsd_tcp = "127.0.0.1:8125"', f'statsd_tcp = "127.0.0.1:{tcp}"')
    text = text.replace('http = "127.0.0.1:9102"', f'http = "127.0.0.1:{http_port}"')
    shared = '[[mappings]]\nmatch = "fleet.**"\nshared = true\n\n'
    text = text.replace("[[mappings]]\n", shared + "[[mappings]]\n", 1)
    text += f"""
[[limits]]
name = "shared_api"
algorithm = "exact"
rules = [{{ max = 1000000, window_ms = 60000 }}]
shared = true
on_store_error = "local"

[redis]
url = "redis://127.0.0.1:{redis_port}/"
"""
    if label_bytes and shared_label_bytes:
        text += f"max_shared_label_bytes = {label_bytes}\n"
    return text


def knows_shared_label_bytes(bin_path, work):
    """Whether this binary reads [redis] max_shared_label_bytes (issue #17 on)."""
    cfg = os.path.join(work, "probe.toml")
    open(cfg, "w").write(config(1, 1, 1, 1, 4096, True))
    r = subprocess.run([bin_path, "check-config", cfg], capture_output=True, timeout=30)
    return r.returncode == 0


def redis_input_bytes(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", "stats"],
                         capture_output=True, text=True, timeout=5).stdout
    for line in out.splitlines():
        if line.startswith("total_net_input_bytes:"):
            return int(line.split(":")[1])
    return 0


def acquires(port, n, deadline):
    """n sequential acquires on one keep-alive connection: latencies (ms) and statuses."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    lat, status = [], {}
    end = time.monotonic() + deadline
    for i in range(n):
        if time.monotonic() > end:
            break
        t0 = time.perf_counter()
        conn.request("POST", f"/api/v1/limits/shared_api/acquire?key=k{i % 100}", body=b"")
        r = conn.getresponse()
        r.read()
        lat.append((time.perf_counter() - t0) * 1000)
        status[r.status] = status.get(r.status, 0) + 1
    conn.close()
    return lat, status


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def one_run(bin_path, args):
    work = tempfile.mkdtemp(prefix="rollstat-fleet-")
    udp, tcp, hp, rp = free_port(socket.SOCK_DGRAM), free_port(), free_port(), free_port()
    redis = subprocess.Popen(
        [shutil.which("redis-server"), "--port", str(rp), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", work],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    daemon = None
    stop = threading.Event()
    try:
        if not wait_port(rp):
            sys.exit("redis-server did not start")
        cfg = os.path.join(work, "config.toml")
        big = args.label_bytes
        open(cfg, "w").write(config(udp, tcp, hp, rp, big,
                                    big and knows_shared_label_bytes(bin_path, work)))
        log = open(os.path.join(work, "daemon.log"), "w")
        daemon = subprocess.Popen([bin_path, "--config", cfg], stdout=log, stderr=log)
        if not wait_port(hp):
            sys.exit(f"the daemon did not start; see {work}/daemon.log")
        acquires(hp, 200, 10)  # connection, scripts loaded
        idle, idle_status = acquires(hp, args.acquires, 60)

        # A tag of --tag-len bytes: key up to 128 bytes, value up to 256 (the
        # parser's caps on a tag key and a tag value).
        klen = max(3, min(128, args.tag_len // 3))
        vlen = min(256, args.tag_len - klen - 1)
        tags = ",".join((f"t{j:02d}" + "k" * (klen - 3))[:klen] + ":" + "v" * vlen
                        for j in range(args.tags))
        lines = [f"fleet.s{i}:1|c|#{tags}".encode() for i in range(args.series)]

        def sender():
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            rounds = 0
            t0 = time.monotonic()
            end = t0 + args.warmup + 120
            while not stop.is_set() and time.monotonic() < end:
                for line in lines:
                    s.sendto(line, ("127.0.0.1", udp))
                rounds += 1
                due = t0 + rounds * args.period
                wait = due - time.monotonic()
                if wait > 0:
                    stop.wait(wait)

        th = threading.Thread(target=sender, daemon=True)
        th.start()
        time.sleep(args.warmup)
        b0, t0 = redis_input_bytes(rp), time.monotonic()
        busy, busy_status = acquires(hp, args.acquires, 120)
        b1, t1 = redis_input_bytes(rp), time.monotonic()
        stop.set()
        conn = http.client.HTTPConnection("127.0.0.1", hp, timeout=30)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        shared = len({line.split("window=")[0] for line in text.splitlines()
                      if line.startswith("rollstat_fleet_window_samples{")})
        th.join(5)
        return {
            "idle": {"p50": pct(idle, 50), "p99": pct(idle, 99), "max": max(idle),
                     "n": len(idle), "status": idle_status},
            "sync": {"p50": pct(busy, 50), "p99": pct(busy, 99), "max": max(busy),
                     "n": len(busy), "status": busy_status,
                     "redis_in_mb_s": (b1 - b0) / (t1 - t0) / 1e6,
                     "fleet_series": shared},
        }
    finally:
        stop.set()
        if daemon:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(15)
            except subprocess.TimeoutExpired:
                daemon.kill()
        redis.kill()
        redis.wait(5)
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", default=[],
                    help="label=path of a rollstat binary (repeat to compare)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--tags", type=int, default=18)
    ap.add_argument("--tag-len", type=int, default=48, help="bytes per tag, key:value")
    ap.add_argument("--period", type=float, default=0.2, help="seconds between rounds")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--acquires", type=int, default=3000)
    ap.add_argument("--label-bytes", type=int, default=None,
                    help="raise [series] max_label_bytes (and, where the binary has it, [redis] "
                         "max_shared_label_bytes) to this, for long tag sets")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    bins = [b.split("=", 1) for b in (args.bin or [f"new={REPO}/target/release/rollstat"])]
    results = {label: [] for label, _ in bins}
    for r in range(args.runs):
        for label, path in bins:
            res = one_run(path, args)
            results[label].append(res)
            print(f"run {r + 1} {label}: idle p50 {res['idle']['p50']:.2f} ms p99 "
                  f"{res['idle']['p99']:.2f}; sync p50 {res['sync']['p50']:.2f} ms p99 "
                  f"{res['sync']['p99']:.2f} max {res['sync']['max']:.1f}; into Redis "
                  f"{res['sync']['redis_in_mb_s']:.2f} MB/s; fleet view of {res['sync']['fleet_series']} "
                  f"series; status {res['sync']['status']}",
                  flush=True)
    print()
    print(f"{args.series} shared series x {args.tags} tags x {args.tag_len} B, a round every "
          f"{args.period}s; {args.acquires} sequential acquires per phase; {args.runs} runs; "
          "median (min-max)")
    print()
    print("| binary | phase | p50 ms | p99 ms | into Redis MB/s |")
    print("| --- | --- | --- | --- | --- |")

    def cell(xs, f="{:.2f}"):
        return f"{f.format(statistics.median(xs))} ({f.format(min(xs))}-{f.format(max(xs))})"

    for label, runs in results.items():
        for phase in ("idle", "sync"):
            ps = [x[phase] for x in runs]
            mb = cell([x.get("redis_in_mb_s", 0) for x in ps]) if phase == "sync" else ""
            print(f"| {label} | {phase} | {cell([x['p50'] for x in ps])} | "
                  f"{cell([x['p99'] for x in ps])} | {mb} |")
    if args.json:
        json.dump(results, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
