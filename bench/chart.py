#!/usr/bin/env python3
"""chart.png from a bench/run.py results.json: reads (ops/s and server CPU µs/op per system and
shape) and writes (rows/s per system and shape, without and with the binary log).

    /usr/bin/python3 bench/chart.py results.json chart.png

Needs matplotlib (Debian: python3-matplotlib, installed by scripts/setup.sh); bench/run.py runs it
with the first Python that has it (its own, then /usr/bin/python3).
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# tablesocket in blues/greens, the references in warm colours and greys
COLORS = {
    "ts-hs": "#1f5fa8", "handlersocket": "#e08a2c", "sql": "#8c8c8c", "ts-mc-text": "#2e9e5b",
    "memcached-text": "#c0392b", "ts-mc-meta": "#7fcf9b", "memcached-meta": "#f1948a", "redis": "#7d3c98",
}
HATCH = {"ts-hs": "", "ts-mc-text": "", "ts-mc-meta": ""}


def bars(ax, groups, systems, get, labels, ylabel, title, fmt):
    n = len(systems)
    width = 0.8 / max(1, n)
    drew = False
    for i, s in enumerate(systems):
        xs, ys, lo, hi = [], [], [], []
        for j, g in enumerate(groups):
            v = get(s, g)
            if v is None or v[0] is None:
                continue
            xs.append(j - 0.4 + width * (i + 0.5))
            ys.append(v[0])
            lo.append(max(0.0, v[0] - (v[1] if v[1] is not None else v[0])))
            hi.append(max(0.0, (v[2] if v[2] is not None else v[0]) - v[0]))
        if not xs:
            continue
        drew = True
        ax.bar(xs, ys, width * 0.95, label=labels[s], color=COLORS.get(s, None),
               yerr=[lo, hi], capsize=1.5, error_kw={"elinewidth": 0.7, "alpha": 0.7})
        if n <= 4:
            for x, y in zip(xs, ys):
                ax.annotate(fmt(y), (x, y), ha="center", va="bottom", fontsize=6, rotation=90,
                            xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    return drew


def log_axis(ax, fmt):
    """Log scale with 1-2-5 labels and headroom above the bars for the legend."""
    lo, hi = ax.get_ylim()
    ax.set_yscale("log")
    ys = [b.get_height() for b in ax.patches if b.get_height() > 0]
    if ys:
        ax.set_ylim(min(ys) / 1.6, max(ys) * 6)
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt(v)))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def kfmt(v):
    return f"{v / 1e6:.1f}M" if v >= 1e6 else f"{v / 1e3:.0f}k" if v >= 1e3 else f"{v:.0f}"


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    data = json.load(open(sys.argv[1]))
    meta, summary = data["meta"], data["summary"]
    st = meta["settings"]
    idx = {(g["phase"], g["system"], g["shape"], g["op"], g["binlog"]): g for g in summary}
    labels = {g["system"]: g["label"] for g in summary}
    read_systems = [s for s in st["systems"] if any(k[0] == "read" and k[1] == s for k in idx)]
    write_systems = [s for s in st["write_systems"] if any(k[0] == "write" and k[1] == s for k in idx)]
    write_panels = [(op, b) for op in st["write_ops"] for b in st["binlog"]
                    if any(k[0] == "write" and k[3] == op and k[4] == b for k in idx)]
    nrows = (1 if read_systems else 0) + (len(write_panels) + 1) // 2
    if nrows == 0:
        print("nothing to chart", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(nrows, 2, figsize=(13, 3.6 * nrows + 0.8), squeeze=False)
    row = 0
    if read_systems:
        shapes = st["shapes"]

        def rd(key):
            def get(s, sh):
                g = idx.get(("read", s, sh, "get", None))
                return (g[key], g[key + "_min"], g[key + "_max"]) if g else None
            return get

        bars(axes[0][0], shapes, read_systems, rd("ops_per_sec"), labels, "ops/s (log scale)",
             "Reads: ops/s (higher is better), shape = connections x depth", kfmt)
        log_axis(axes[0][0], kfmt)
        bars(axes[0][1], shapes, read_systems, rd("cpu_us_per_op"), labels, "server CPU µs / op (log scale)",
             "Reads: server CPU µs per operation (lower is better)", lambda v: f"{v:.0f}")
        log_axis(axes[0][1], lambda v: f"{v:g}")
        axes[0][0].legend(fontsize=6.5, ncol=3, loc="upper left")
        row = 1
    for i, (op, b) in enumerate(write_panels):
        ax = axes[row + i // 2][i % 2]

        def wr(s, sh, op=op, b=b):
            g = idx.get(("write", s, sh, op, b))
            return (g["ops_per_sec"], g["ops_per_sec_min"], g["ops_per_sec_max"]) if g else None

        bl = "binlog off" if b == "off" else "binlog on, sync_binlog=1 (HandlerSocket's writes skip it)"
        bars(ax, st["write_shapes"], write_systems, wr, labels, "rows/s",
             f"Writes: single-row {op} by key, rows/s, {bl}", kfmt)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: kfmt(v)))
        if i == 0:
            ax.legend(fontsize=7, loc="upper left")
    if len(write_panels) % 2 == 1:
        axes[-1][1].axis("off")
    m = meta["machine"]
    title = (f"tablesocket benchmark, {meta['started_utc']}: {st['rows']:,} rows, {st['duration']:g} s x "
             f"{st['rounds']} round(s), medians (bars) and min-max, innodb_flush_log_at_trx_commit=1\n{m['cpu_model']}, {m['cpus']} CPUs, "
             f"Linux {m['kernel']}, {meta.get('mariadb_version', '')}; "
             + ("servers on CPU %s, load generators on CPU %s" % (st["server_cpus"], st["client_cpus"])
                if st["pin"] else "not pinned")
             + (" - SMOKE RUN" if st["smoke"] else ""))
    fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
