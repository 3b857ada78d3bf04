#!/usr/bin/env python3
"""rollstat beside its peers, on one machine, with one generator.

    benches/compare/run.sh --peer statsd_exporter=PATH --peer etsy=DIR [options]

For every server (rollstat with config.toml as shipped, and each --peer),
profile (--profiles) and context count (--contexts), this:

1. searches the highest offered rate the server counts at least 99.9 % of
   (the ceiling): one run a step, doubling from --start-rate until a step
   falls short, then --bisect steps between the last good and the first
   short rate (geometric means);
2. runs --runs more runs at the ceiling and reports their medians and
   spread: CPU seconds per million lines, peak RSS and RSS per context,
   /metrics scrape time, kernel drops, what was counted per type;
3. probes ingest-to-visible latency on the last of those runs (--probes
   gauges, each sent once, until a keep-alive scraper sees it).

Every run starts the server fresh on free loopback ports, sends whole
passes of `rollstat-blast --profile` lines (seed fixed) for about
--duration seconds, waits until what the server shows stops moving, reads
it back, and stops the server by its PID. What was counted is checked per
context against the ledger blast writes: counter sums, weighted timer,
histogram and distribution counts, last gauge values.

Writes results.json, table.md and two PNG plots to --out.
"""

import argparse
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402
import report  # noqa: E402

GOAL = 0.999
SETTLE_CAP = 30.0


def kernel_udp_drops():
    """The kernel's UDP receive errors (buffer overflows), system-wide."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    head, vals = rows[0], rows[1]
    return int(vals[head.index("RcvbufErrors")])


def send(blast, server, profile, contexts, rate, duration, seed):
    """Sends whole passes for about `duration` s at `rate`: the ledger."""
    lines = max(1000, min(int(rate * duration), 400_000))
    passes = max(1, round(rate * duration / lines))
    ledger = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
    ledger.close()
    # `dogstatsd-unpacked`: lading's mix with no packed values, for servers
    # that refuse them (statsd_exporter counts a packed line as malformed).
    base, _, variant = profile.partition("-")
    pack = ["--pack-pct", "0"] if variant == "unpacked" else []
    cmd = [blast, "--send-only", "--udp", f"127.0.0.1:{server.udp}", "--profile", base, *pack,
           "--names", str(contexts), "--profile-lines", str(lines), "--passes", str(passes),
           "--rate", str(int(rate)), "--seed", str(seed), "--ledger", ledger.name]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=200)
    if r.returncode != 0:
        raise RuntimeError(f"rollstat-blast failed: {r.stderr.strip()[-400:]}")
    with open(ledger.name) as f:
        doc = json.load(f)
    os.unlink(ledger.name)
    return doc


def settle(server, cap=SETTLE_CAP):
    """Reads what the server shows until three reads agree (or `cap` s)."""
    deadline = time.monotonic() + cap
    last, same = None, 0
    while time.monotonic() < deadline:
        now = server.counted()
        same = same + 1 if now == last else 0
        if same >= 2:
            break
        last = now
        time.sleep(1.1 if isinstance(server, peers.Etsy) else 0.3)
    return last or {}


def check(server, counted, ledger):
    """Per type: expected, counted, the share counted, contexts exact."""
    types = {}
    for e in ledger["expect"]:
        kind = e["kind"]
        if kind not in server.compares:
            continue
        t = types.setdefault(kind, {"contexts": 0, "exact": 0, "expected": 0.0, "counted": 0.0})
        got = server.value_of(counted.get(e["index"]), kind)
        t["contexts"] += 1
        if kind == "gauge":
            want = e["last"]
            ok = got is not None and abs(got - want) <= 1e-9 * max(1.0, abs(want))
            t["expected"] += 1
            t["counted"] += 1 if ok else 0
        else:
            want = e["weighted"]
            ok = got is not None and abs(got - want) <= 1e-6 * max(1.0, want)
            t["expected"] += want
            t["counted"] += min(got or 0.0, want)
        t["exact"] += 1 if ok else 0
    for t in types.values():
        t["share"] = t["counted"] / t["expected"] if t["expected"] else 1.0
    return types


def one_run(args, make, profile, contexts, rate, probes=0):
    """One fresh server, one load: the measures of the run."""
    server = make()
    server.start()
    try:
        time.sleep(0.3)
        cpu0, rss0, _ = server.stat()
        drops0 = kernel_udp_drops()
        ledger = send(args.blast, server, profile, contexts, rate, args.duration, args.seed)
        counted = settle(server)
        cpu1, rss1, hwm = server.stat()
        drops = kernel_udp_drops() - drops0
        scrapes = [server.scrape()[1] for _ in range(3)] if server.exposes else [None]
        types = check(server, counted, ledger)
        share = min((t["share"] for t in types.values()), default=0.0)
        run = {
            "server": server.name, "profile": profile, "contexts": contexts,
            "offered": rate, "lines": ledger["lines_sent"],
            "sent_rate": ledger["lines_sent"] / max(ledger["send_secs"], 1e-9),
            "share": share, "types": types,
            "cpu_s_per_m_lines": (cpu1 - cpu0) * 1e6 / max(ledger["lines_sent"], 1),
            "contexts_sent": len(ledger["expect"]),
            "rss_peak": hwm, "rss_per_context": (rss1 - rss0) / max(len(ledger["expect"]), 1),
            "scrape_s": scrapes[len(scrapes) // 2], "kernel_drops": drops,
        }
        if probes:
            run["visible_s"] = probe(server, probes)
        return run
    finally:
        server.stop()


def probe(server, n):
    """Ingest-to-visible seconds of `n` gauges, each seen by a keep-alive
    scraper (etsy: its graphite flush)."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", server.http, timeout=30)
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for k in range(n):
            value = str(1000 + k)
            t0 = time.monotonic()
            s.sendto(f"compare.probe:{value}|g\n".encode(), ("127.0.0.1", server.udp))
            while time.monotonic() - t0 < 10:
                if server.sees_gauge(conn, "compare.probe", value):
                    out.append(time.monotonic() - t0)
                    break
                time.sleep(0.001)
    conn.close()
    return out


def ceiling(args, make, profile, contexts, log):
    """The search: every step's run, and the highest rate that made it."""
    steps, good, bad = [], None, None
    rate = args.start_rate
    while rate <= args.max_rate:
        r = one_run(args, make, profile, contexts, rate)
        steps.append(r)
        log(r)
        if r["sent_rate"] < 0.9 * rate:
            bad = bad or rate  # the sender's own limit: stop here
            break
        if r["share"] >= GOAL:
            good, rate = rate, rate * 2
        else:
            bad = rate
            break
    rate = args.start_rate / 2
    while good is None and rate >= args.start_rate / 16:
        r = one_run(args, make, profile, contexts, rate)
        steps.append(r)
        log(r)
        if r["share"] >= GOAL and r["sent_rate"] >= 0.9 * rate:
            good = rate
        else:
            bad, rate = rate, rate / 2
    for _ in range(args.bisect if good and bad else 0):
        rate = math.sqrt(good * bad)
        r = one_run(args, make, profile, contexts, rate)
        steps.append(r)
        log(r)
        if r["share"] >= GOAL and r["sent_rate"] >= 0.9 * rate:
            good = rate
        else:
            bad = rate
    return steps, good


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--peer", action="append", default=[], help="statsd_exporter=PATH, etsy=DIR (node_modules/statsd inside)")
    p.add_argument("--rollstat", default=os.path.join(peers.REPO, "target/release/rollstat"))
    p.add_argument("--blast", default=os.path.join(peers.REPO, "target/release/rollstat-blast"))
    p.add_argument("--config", default=os.path.join(peers.REPO, "config.toml"))
    p.add_argument("--profiles", default="statsd,dogstatsd-unpacked,dogstatsd",
                   help="statsd, dogstatsd (lading's mix), dogstatsd-unpacked (no packed values), counters")
    p.add_argument("--contexts", default="3000,10000,100000")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--start-rate", type=float, default=25_000)
    p.add_argument("--max-rate", type=float, default=4_000_000)
    p.add_argument("--bisect", type=int, default=2)
    p.add_argument("--probes", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--servers", default=None,
                   help="run only these servers (comma-separated names, e.g. statsd_exporter)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="rollstat-compare-")
    os.makedirs(out, exist_ok=True)
    makers = [peers.make("rollstat", args.rollstat, args.config)]
    makers += [peers.make(s, args.rollstat, args.config) for s in args.peer]
    servers = {m().name: m for m in makers}
    if args.servers:
        servers = {n: m for n, m in servers.items() if n in args.servers.split(",")}
    result = {"machine": machine(), "versions": {n: m().version() for n, m in servers.items()},
              "args": vars(args), "cells": []}
    for profile in args.profiles.split(","):
        for contexts in [int(c) for c in args.contexts.split(",")]:
            for name, make in servers.items():
                if profile.startswith("dogstatsd") and name == "etsy_statsd":
                    continue  # no DogStatsD histograms, distributions or tags
                result["cells"].append(cell(args, make, name, profile, contexts))
                json.dump(result, open(os.path.join(out, "results.json"), "w"), indent=1)
    report.write(result, out)
    print(f"compare: results in {out}")


def cell(args, make, name, profile, contexts):
    """One server, profile and context count: its search, then its runs."""
    def log(r):
        print(f"  {name} {profile} {contexts}: offered {r['offered']:,.0f}/s sent {r['sent_rate']:,.0f}/s "
              f"counted {100 * r['share']:.2f} %", flush=True)
    steps, good = ceiling(args, make, profile, contexts, log)
    runs = []
    if good:
        for k in range(args.runs):
            last = k == args.runs - 1
            r = one_run(args, make, profile, contexts, good, probes=args.probes if last else 0)
            log(r)
            runs.append(r)
    return {"server": name, "profile": profile, "contexts": contexts, "ceiling": good,
            "steps": steps, "runs": runs}


def machine():
    model = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    commit = subprocess.run(["git", "-C", peers.REPO, "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release(), "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


if __name__ == "__main__":
    main()
