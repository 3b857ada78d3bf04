"""The measuring half of benches/push/run.sh (see there for what and why).
    python3 measure.py PID HTTP SINK_LOG RUNS INTERVAL_MS IDLE_SECS OUT_DIR
Each run, on one daemon:
  1. waits for a push to end (its batches arrive at the sink, then nothing
     for QUIET s), measures the idle CPU rate over IDLE_SECS, then takes one
     scrape (curl to a file, text 0.0.4) and charges it the CPU it added
     above that rate; the scrape is discarded if a batch arrived meanwhile;
  2. waits for the next push to end, then for the one after: that window
     holds exactly one push (write, compress and send) and no scrape; the
     push is charged the window's CPU less the idle rate times its length.
CPU is the daemon's, all threads: clock ticks from /proc/PID/stat (utime +
stime, every thread ever, 10 ms steps: the figure to quote), and ns from
/proc/PID/task/*/schedstat (precise, but a thread that exits in the window
takes its time with it, as a scrape's scoped walker threads do), both
printed. The idle rate is the schedstat one (ticks are too coarse over
1 s; nothing exits while idle)."""
import glob
import statistics
import subprocess
import sys
import time

pid, http, sink_log = sys.argv[1], sys.argv[2], sys.argv[3]
runs, interval, idle_secs, out = int(sys.argv[4]), int(sys.argv[5]) / 1000, float(sys.argv[6]), sys.argv[7]
hz = int(subprocess.check_output(["getconf", "CLK_TCK"]))
QUIET = 0.4
# Prometheus 3's scrape Accept header (scrape_protocols' default order
# without protobuf, which it asks for only with native histograms on).
PROM3_ACCEPT = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
                "application/openmetrics-text;version=0.0.1;q=0.4,"
                "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,"
                "text/plain;version=0.0.4;q=0.2,*/*;q=0.1")


def cpu():
    """(wall s, schedstat ns over threads, ticks ms, {thread name: ns})."""
    wall = time.time()
    by = {}
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            ns = int(open(f"{task}/schedstat").read().split()[0])
            name = open(f"{task}/comm").read().strip()
        except OSError:
            continue
        by[name] = by.get(name, 0) + ns
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    ticks_ms = (int(f[11]) + int(f[12])) * 1000 / hz
    return wall, sum(by.values()), ticks_ms, by


def sink_lines():
    return open(sink_log).read().splitlines()


def wait_push_end():
    """Blocks until one push's batches have all arrived (at least one new
    POST, then QUIET s of none); returns (POSTs, body bytes) of that push.
    Bounded: 3 intervals plus 30 s."""
    start = len(sink_lines())
    deadline = time.time() + 3 * interval + 30
    while time.time() < deadline:
        lines = sink_lines()
        if len(lines) > start and time.time() - float(lines[-1].split()[0]) > QUIET:
            new = lines[start:]
            return len(new), sum(int(l.split()[1]) for l in new)
        time.sleep(0.02)
    sys.exit("no push reached the sink within 3 intervals: is the output configured?")


def delta(a, b, rate):
    """CPU ms between two readings above `rate` (ms per s), ns and ticks."""
    secs = b[0] - a[0]
    return (b[1] - a[1]) / 1e6 - rate * secs, b[2] - a[2] - rate * secs, secs


def value(text, name, labels):
    for line in text.splitlines():
        if line.startswith(name + "{") and all(l in line for l in labels):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


rows, scrapes = [], []
for r in range(runs):
    wait_push_end()
    a = cpu()
    time.sleep(idle_secs)
    b = cpu()
    rate = (b[1] - a[1]) / 1e6 / (b[0] - a[0])
    n0 = len(sink_lines())
    s0 = cpu()
    path = f"{out}/scrape{r}.txt"
    subprocess.run(["curl", "-s", "--max-time", "60", "-o", path, f"http://{http}/metrics"], check=True)
    s1 = cpu()
    clean = len(sink_lines()) == n0
    scrape_ms, scrape_ticks, scrape_secs = delta(s0, s1, rate)
    # The same scrape as Prometheus 3 asks for it: OpenMetrics first, gzip.
    g0 = cpu()
    subprocess.run(["curl", "-s", "--max-time", "60", "-o", f"{out}/scrape{r}.om.gz",
                    "-H", f"Accept: {PROM3_ACCEPT}", "-H", "Accept-Encoding: gzip",
                    f"http://{http}/metrics"], check=True)
    g1 = cpu()
    clean = clean and len(sink_lines()) == n0
    prom3_ms, prom3_ticks, _ = delta(g0, g1, rate)
    text = open(path).read()
    scrapes.append(text)
    wait_push_end()
    p0 = cpu()
    posts, body = wait_push_end()
    p1 = cpu()
    push_ms, push_ticks, push_secs = delta(p0, p1, rate)
    top = sorted(((p1[3].get(k, 0) - p0[3].get(k, 0)) / 1e6, k) for k in p1[3])[-3:]
    row = dict(run=r + 1, idle_ms_per_s=rate, scrape_ms=scrape_ms, scrape_ticks_ms=scrape_ticks,
               scrape_wall_s=scrape_secs, scrape_bytes=len(text), scrape_clean=clean,
               prom3_ms=prom3_ms, prom3_ticks_ms=prom3_ticks,
               push_ms=push_ms, push_ticks_ms=push_ticks, window_s=push_secs, posts=posts,
               body_bytes=body,
               push_seconds=value(text, "rollstat_output_push_seconds", ['output="bench"']))
    rows.append(row)
    print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
          "push_window_top_threads_ms=" + ",".join(f"{k}:{v:.0f}" for v, k in reversed(top)), flush=True)

ok = [r for r in rows if r["scrape_clean"]]
if len(ok) < len(rows):
    print(f"{len(rows) - len(ok)} scrape(s) overlapped a push's batches and are left out of the scrape figures")


def spread(key, rs):
    v = [r[key] for r in rs]
    return f"{statistics.median(v):.1f} ({min(v):.1f} to {max(v):.1f})"


print(f"idle CPU ms per s: {spread('idle_ms_per_s', rows)}")
print(f"scrape CPU ms (schedstat): {spread('scrape_ms', ok)}; ticks: {spread('scrape_ticks_ms', ok)}; "
      f"wall s {spread('scrape_wall_s', ok)}; bytes {statistics.median(r['scrape_bytes'] for r in ok):.0f}")
print(f"scrape as Prometheus 3 asks (OpenMetrics, gzip) CPU ms (schedstat): {spread('prom3_ms', ok)}; "
      f"ticks: {spread('prom3_ticks_ms', ok)}")
print(f"push CPU ms (schedstat): {spread('push_ms', rows)}; ticks: {spread('push_ticks_ms', rows)}; "
      f"window s {spread('window_s', rows)}; POSTs {spread('posts', rows)}; body bytes {spread('body_bytes', rows)}")
print(f"rollstat_output_push_seconds (write + compress): {spread('push_seconds', rows)}")
for scrape, what in (("scrape", "scrape"), ("prom3", "Prometheus 3 scrape")):
    for unit, key in (("schedstat", "_ms"), ("ticks", "_ticks_ms")):
        per_run = [r["push" + key] / r[scrape + key] for r in ok]
        med = statistics.median(r["push" + key] for r in rows) / statistics.median(r[scrape + key] for r in ok)
        print(f"push / {what} CPU ({unit}): {med:.2f} (of the medians; per run {min(per_run):.2f} to {max(per_run):.2f})")
first, last = scrapes[0], scrapes[-1]
sent = ['output="bench"', 'result="sent"']
d_bytes = value(last, "rollstat_output_sent_bytes_total", ['output="bench"']) - value(first, "rollstat_output_sent_bytes_total", ['output="bench"'])
d_samples = value(last, "rollstat_output_samples_total", sent) - value(first, "rollstat_output_samples_total", sent)
print(f"remote write on the wire: {d_bytes:.0f} bytes for {d_samples:.0f} samples sent between the first and last scrape: "
      f"{d_bytes / d_samples:.2f} bytes per sample; {d_samples / max(1, 3 * (runs - 1)):.0f} samples per push (3 pushes a run between them)")
