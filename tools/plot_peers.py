#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Charts of squeeze against what users would pick instead, drawn from the bench JSON.

    tools/plot_peers.py nvcomp bench/results/ibp_nvcomp_<gpu>_<date>.json [-o PNG]
        IBP against nvCOMP: rows delivered from pinned host memory into a GPU tensor (GB/s)
        against the savings IBP finds in each data set, one panel per row size; IBP at its
        fastest chunk size, each nvCOMP codec at its faster chunking, and the plain gather.
    tools/plot_peers.py uvm bench/results/bam_uvm_<gpu>_<date>.json [-o PNG]
        bam arrays against CUDA unified memory: milliseconds per traversal (BFS, CC) or per
        pass (random reads), cold and warm, one panel per kernel and graph.

Default output: docs/img/ibp_vs_nvcomp.png and docs/img/bam_vs_uvm.png. Needs matplotlib
(pip install matplotlib); nothing in the build or the tests needs this script.
"""
import argparse
import collections
import json
import math
import pathlib
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def gpu_of(doc):
    return doc.get("gpu") or doc.get("context", {}).get("gpu_name") or "unknown GPU"


def plot_nvcomp(doc, out, plt):
    ok = [r for r in doc["records"] if r.get("status") == "ok" and r.get("delivered_gbps")]
    sizes = sorted({r["row_bytes"] for r in ok})
    if not sizes:
        sys.exit("no delivered rows with status ok in this file")
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.2 * len(sizes), 4.4), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        here = [r for r in ok if r["row_bytes"] == size]
        # Each data set sits at the savings IBP finds in it (its best ratio over C).
        best_ratio = collections.defaultdict(lambda: 1.0)
        for r in here:
            if r["codec"] == "ibp" and r.get("ratio"):
                best_ratio[r["dataset"]] = max(best_ratio[r["dataset"]], r["ratio"])
        savings = {d: 100.0 * (1.0 - 1.0 / best_ratio[d]) for d in {r["dataset"] for r in here}}
        # Per codec and data set: the fastest delivery (IBP over C, nvCOMP over chunkings).
        fastest = collections.defaultdict(dict)
        for r in here:
            key = "plain gather" if r["codec"] == "plain" else (
                "IBP" if r["codec"] == "ibp" else "nvCOMP " + r["codec"])
            prev = fastest[key].get(r["dataset"])
            if prev is None or r["delivered_gbps"] > prev:
                fastest[key][r["dataset"]] = r["delivered_gbps"]
        for key in sorted(fastest, key=lambda k: (k != "IBP", k != "plain gather", k)):
            points = sorted((savings[d], v) for d, v in fastest[key].items())
            style = dict(marker="o", linewidth=2.5, zorder=3) if key == "IBP" else (
                dict(linestyle="--", color="black") if key == "plain gather" else
                dict(marker=".", linewidth=1, alpha=0.8))
            ax.plot([p[0] for p in points], [p[1] for p in points], label=key, **style)
        for d, s in savings.items():
            ax.annotate(d, (s, 0), xycoords=("data", "axes fraction"), rotation=90,
                        fontsize=7, va="bottom", ha="center", alpha=0.6)
        ax.set_title(f"rows of {size} B")
        ax.set_xlabel("savings IBP finds in the data set (%)")
        ax.set_ylabel("rows delivered (GB/s, higher is better)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"IBP against nvCOMP: a random batch of rows from pinned host memory "
                 f"into a GPU tensor ({gpu_of(doc)})")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_uvm(doc, out, plt):
    ok = [r for r in doc["records"] if r.get("verified") and r.get("median_ms")]
    cases = sorted({(r["kernel"], r["graph"]) for r in ok})
    if not cases:
        sys.exit("no verified records in this file")
    cols = min(len(cases), 3)
    rows = math.ceil(len(cases) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.2 * rows), squeeze=False)
    for ax, (kernel, graph) in zip(axes.flat, cases):
        here = [r for r in ok if r["kernel"] == kernel and r["graph"] == graph]
        variants = sorted({r["variant"] for r in here},
                          key=lambda v: (not v.startswith("uvm"), v))
        width = 0.4
        for i, temperature in enumerate(("cold", "warm")):
            times = {r["variant"]: r["median_ms"] for r in here
                     if r["temperature"] == temperature}
            xs = [j + (i - 0.5) * width for j in range(len(variants))]
            ax.bar(xs, [times.get(v, float("nan")) for v in variants], width,
                   label=temperature, alpha=0.85)
        ax.set_xticks(range(len(variants)))
        ax.set_xticklabels(variants, rotation=35, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("ms (lower is better)")
        ax.set_title(kernel if graph == "none" else f"{kernel} on {graph}")
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(cases):]:
        ax.set_visible(False)
    axes[0][0].legend()
    fig.suptitle(f"bam arrays against CUDA unified memory ({gpu_of(doc)})")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["nvcomp", "uvm"])
    parser.add_argument("json")
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("needs matplotlib: pip install matplotlib")
    default = {"nvcomp": "docs/img/ibp_vs_nvcomp.png", "uvm": "docs/img/bam_vs_uvm.png"}
    out = pathlib.Path(args.output or default[args.kind])
    out.parent.mkdir(parents=True, exist_ok=True)
    (plot_nvcomp if args.kind == "nvcomp" else plot_uvm)(load(args.json), out, plt)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
