"""The summary of benches/push/ingest.sh (see there for what and why).
    python3 ingest.py ROWS
ROWS holds one run per line, `key=value` pairs, `run=A` (config.toml) or
`run=B` (config.toml + one remote write output), in the order they ran
(ABBA rounds). Prints medians with min to max of A and B, and the ratio
B / A of the ceiling and of CPU per line: of the medians, and per round
(each round's B against its own A)."""
import statistics
import sys

rows = []
for line in open(sys.argv[1]).read().split("run=")[1:]:
    kv = dict(p.split("=", 1) for p in ("run=" + line).split())
    rows.append(kv)
a = [r for r in rows if r["run"] == "A"]
b = [r for r in rows if r["run"] == "B"]
if not a or len(a) != len(b):
    sys.exit(f"{len(a)} A runs and {len(b)} B runs: a run failed (see above)")


def nums(rs, key):
    return [float(r[key]) for r in rs]


def spread(v):
    return f"{statistics.median(v):.0f} ({min(v):.0f} to {max(v):.0f})"


for key, what in (("lines_per_sec_counted", "lines counted per s"),
                  ("daemon_cpu_ns_per_line", "daemon CPU ns per line"),
                  ("loss_pct", "loss %")):
    va, vb = nums(a, key), nums(b, key)
    if key == "loss_pct":
        print(f"{what}: A {statistics.median(va):.2f} ({min(va):.2f} to {max(va):.2f}); "
              f"B {statistics.median(vb):.2f} ({min(vb):.2f} to {max(vb):.2f})")
        continue
    per_round = [y / x for x, y in zip(va, vb)]
    print(f"{what}: A (no output) {spread(va)}; B (one output) {spread(vb)}; "
          f"B / A {statistics.median(vb) / statistics.median(va):.3f} of the medians, "
          f"per round {min(per_round):.3f} to {max(per_round):.3f} (median {statistics.median(per_round):.3f})")
posts = nums(b, "sink_posts")
print(f"POSTs the sink got per B run: {spread(posts)}")
