"""The sampling half of benches/push/dead_receiver.sh (see there for what
and why).
    python3 dead_receiver.py PID HTTP DURATION_S CAP_BYTES OUTPUT
Once a second for DURATION_S seconds: one /metrics through curl (its
rollstat_output_* lines kept by grep, so that Python never parses the
whole page), the scrape's wall time, the daemon's VmRSS. Prints one line
per 10 s, then the highest rollstat_output_queue_bytes{output=OUTPUT}
against CAP_BYTES, the batches and samples dropped and sent by result, the
failed tries by reason, the scrape times and the RSS. Bounded: DURATION_S
samples, each curl at most 10 s."""
import re
import statistics
import subprocess
import sys
import time

pid, http, duration, cap, output = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
LINE = re.compile(r'^(rollstat_output_\w+)\{([^}]*)\} (\S+)$')


def scrape():
    """({(name, other label): value} of OUTPUT's lines, wall s)."""
    t0 = time.time()
    out = subprocess.run(
        f"curl -s --max-time 10 http://{http}/metrics | grep '^rollstat_output_'",
        shell=True, capture_output=True, text=True).stdout
    wall = time.time() - t0
    got = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m or f'output="{output}"' not in m.group(2):
            continue
        other = [l for l in m.group(2).split(",") if not l.startswith("output=")]
        got[(m.group(1), other[0] if other else "")] = float(m.group(3))
    return got, wall


def rss_mib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


start = time.time()
queue, walls, rss, last = [], [], [], {}
for i in range(duration):
    got, wall = scrape()
    if got:
        last = got
    q = got.get(("rollstat_output_queue_bytes", ""), float("nan"))
    queue.append(q)
    walls.append(wall)
    rss.append(rss_mib())
    if i % 10 == 9 or i == duration - 1:
        dropped = got.get(("rollstat_output_batches_total", 'result="queue_full"'), 0)
        print(f"t={time.time() - start:.0f}s queue_bytes={q:.0f} ({q / cap:.3f} of the cap) "
              f"batches_dropped={dropped:.0f} scrape_s={wall:.3f} rss_mib={rss[-1]:.0f}", flush=True)
    time.sleep(max(0, start + i + 1 - time.time()))

seen = [q for q in queue if q == q]
print(f"samples: {len(seen)} of {duration}; highest rollstat_output_queue_bytes {max(seen):.0f} "
      f"against the cap {cap}: {max(seen) / cap:.4f} of it; above the cap in {sum(q > cap for q in seen)} samples")
for result in ("sent", "queue_full", "refused", "stop_deadline", "removed"):
    b = last.get(("rollstat_output_batches_total", f'result="{result}"'), 0)
    s = last.get(("rollstat_output_samples_total", f'result="{result}"'), 0)
    print(f"result={result}: {b:.0f} batches, {s:.0f} samples")
retries = {k[1]: v for k, v in last.items() if k[0] == "rollstat_output_retries_total" and v}
print(f"failed tries by reason: {retries}")
print(f"scrape wall s: median {statistics.median(walls):.3f}, max {max(walls):.3f}; "
      f"daemon RSS MiB: first {rss[0]:.0f}, max {max(rss):.0f}, last {rss[-1]:.0f}")
