"""benches/compare's output: table.md and two PNG plots from results.json.

    python3 benches/compare/report.py OUT_DIR     # again, from OUT_DIR/results.json
"""

import json
import os
import statistics
import sys
import textwrap

ERRATIC_CV = 0.3
GOAL = 0.999


def spread(values, fmt):
    """`median (min-max)` of `values`, `fmt` each; `erratic` past CV 0.3."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    med = statistics.median(values)
    text = fmt(med)
    if len(values) > 1:
        text += f" ({fmt(min(values))}-{fmt(max(values))})"
        mean = statistics.mean(values)
        if mean and statistics.pstdev(values) / mean > ERRATIC_CV:
            text += " erratic"
    return text


def pct(values, q):
    values = sorted(values)
    if not values:
        return None
    return values[min(len(values) - 1, int(q * len(values)))]


def ceiling_text(c):
    """The ceiling, or a bound: the search's top or the sender's limit was
    reached before any step fell short, or every step fell short."""
    if not c["ceiling"]:
        return "below the search"
    steps = c["steps"]
    if any(r["sent_rate"] < 0.9 * r["offered"] for r in steps):
        return f">= {c['ceiling']:,.0f} (the sender's limit)"
    if all(r["share"] >= GOAL for r in steps):
        return f">= {c['ceiling']:,.0f} (the search's top)"
    return f"{c['ceiling']:,.0f}"


def sent(r):
    """The contexts a run's lines touched (a slow run's passes may not reach them all)."""
    return r.get("contexts_sent", 0)


def contexts_text(c):
    touched = [sent(r) for r in c["runs"]]
    med = statistics.median(touched) if touched else c["contexts"]
    return f"{c['contexts']:,}" if med >= 0.98 * c["contexts"] else f"{c['contexts']:,} ({med:,.0f} sent)"


def rows(result):
    out = []
    for c in result["cells"]:
        runs = c["runs"]
        ok = sum(1 for r in runs if r["share"] >= GOAL)
        vis = [v for r in runs for v in r.get("visible_s", [])]
        kinds = sorted({k for r in runs for k in r["types"]})
        worst = {k: min(r["types"][k]["share"] for r in runs) for k in kinds}
        out.append({
            "server": c["server"], "profile": c["profile"], "contexts": contexts_text(c),
            "ceiling": ceiling_text(c),
            "held": f"{ok} of {len(runs)}" if runs else "-",
            "cpu": spread([r["cpu_s_per_m_lines"] for r in runs], lambda v: f"{v:.2f}"),
            "rss": spread([r["rss_peak"] / 2**20 for r in runs], lambda v: f"{v:.0f}"),
            "per_ctx": spread([r["rss_per_context"] for r in runs], lambda v: f"{v:,.0f}"),
            "scrape": spread([r["scrape_s"] and r["scrape_s"] * 1e3 for r in runs], lambda v: f"{v:.1f}"),
            "visible": (f"{pct(vis, 0.5) * 1e3:.1f} / {pct(vis, 0.99) * 1e3:.1f}" if vis else "-"),
            "drops": spread([r["kernel_drops"] for r in runs], lambda v: f"{v:.0f}"),
            "types": ", ".join(f"{k} {100 * v:.2f}" for k, v in worst.items()) or "-",
        })
    return out


HEAD = ("| server | profile | contexts | ceiling, lines/s | runs >= 99.9 % | CPU s per M lines "
        "| peak RSS MiB | RSS per context sent, B | /metrics ms | visible p50 / p99 ms | kernel drops "
        "| worst run's counted % per type |")


def table(result):
    m = result["machine"]
    lines = [
        f"Commit {m['commit']}, {m['date']}; {m['cpu']}, {m['cores']} cores, Linux {m['kernel']}.",
        "Versions: " + "; ".join(f"{k}: {v}" for k, v in result["versions"].items()) + ".",
        *([f"Rerun: the {r['cells']} rows, at {r['commit']} on {r['date']}: {r['why']}."]
          if (r := result.get("rerun")) else []),
        "",
        HEAD,
        "|" + " --- |" * 12,
    ]
    for r in rows(result):
        lines.append("| " + " | ".join(str(r[k]) for k in (
            "server", "profile", "contexts", "ceiling", "held", "cpu", "rss", "per_ctx",
            "scrape", "visible", "drops", "types")) + " |")
    lines.append("")
    lines.append("Medians of the runs at each ceiling, (min-max); `erratic`: coefficient of variation above 0.3.")
    return "\n".join(lines) + "\n"


def plots(result, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report: matplotlib is missing (benches/compare/run.sh installs it); no plots", file=sys.stderr)
        return
    m = result["machine"]
    caption = "\n".join(textwrap.wrap(f"{m['commit']} · {m['cpu']} · {m['cores']} cores · "
                                      + "; ".join(result["versions"].values()), 120))
    profiles = sorted({c["profile"] for c in result["cells"]})
    fig, axes = plt.subplots(1, len(profiles), figsize=(6 * len(profiles), 5), squeeze=False)
    colours = {n: f"C{i}" for i, n in enumerate(sorted({c["server"] for c in result["cells"]}))}
    dashes = {n: d for n, d in zip(sorted({c["contexts"] for c in result["cells"]}), ["-", "--", ":", "-."])}
    for ax, prof in zip(axes[0], profiles):
        for c in result["cells"]:
            if c["profile"] != prof:
                continue
            pts = sorted((r["offered"], 100 * r["share"]) for r in c["steps"] + c["runs"])
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3,
                    color=colours[c["server"]], linestyle=dashes[c["contexts"]],
                    label=f"{c['server']}, {c['contexts']:,} contexts")
        ax.axhline(100 * GOAL, color="grey", linestyle=":", linewidth=1, label="99.9 % counted")
        ax.set_xscale("log")
        ax.set_ylim(0, 102)
        ax.set_xlabel("offered lines/s")
        ax.set_ylabel("counted, % of what was sent (the worst type)")
        ax.set_title(f"profile {prof}")
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(caption, fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "offered_vs_counted.png"), dpi=90)
    fig, ax = plt.subplots(figsize=(7, 5))
    for server in sorted({c["server"] for c in result["cells"]}):
        for prof in profiles:
            pts = sorted((statistics.median([sent(r) for r in c["runs"]]),
                          statistics.median([r["rss_peak"] / 2**20 for r in c["runs"]]))
                         for c in result["cells"]
                         if c["server"] == server and c["profile"] == prof and c["runs"])
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{server}, {prof}")
    ax.set_xscale("log")
    ax.set_xlabel("contexts the lines touched")
    ax.set_ylabel("peak RSS, MiB (median of the runs at the ceiling)")
    ax.legend(fontsize=7)
    fig.suptitle(caption, fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "rss_vs_contexts.png"), dpi=90)


def write(result, out):
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table(result))
    plots(result, out)
    print(table(result))


if __name__ == "__main__":
    d = sys.argv[1]
    write(json.load(open(os.path.join(d, "results.json"))), d)
