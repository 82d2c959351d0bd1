#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Headline charts of xfer, roast and coll against their baselines, drawn from the bench JSON.

    tools/plot_results.py xfer bench/results/xfer_<gpu>_<date>.json [-o PNG]
        The row gather (squeeze_bench_xfer's squeeze_gather) in GB/s delivered against the
        item size, aligned, misaligned and at random offsets, beside the baselines of the same
        run: one bulk cudaMemcpyAsync of the same bytes (the link ceiling every ratio in
        docs/RESULTS.md is taken against) and the naive zero-copy gather.
    tools/plot_results.py roast bench/results/roast_<...>_<gpu>_<date>.json [MORE.json ...] [-o PNG]
        ROAST's time over cuBLAS's against K = N (|M| = 4 MB): forward TF32, forward bf16, dX,
        dM (against cuBLAS's dW) and the training step. The first file gives the line; with
        more runs of the same machine, their range is shaded around it.
    tools/plot_results.py coll bench/results/coll_shm_<gpu>x<ranks>_<date>.json [-o PNG]
        Speedup over ncclAllReduce (its time over the variant's, same run) against the message
        size, for the FRSZ2 variants (ring and recursive doubling; frsz2_16 and frsz2_8) and
        the uncompressed ring.

Times are the benches' medians: for roast the median is carried by the TFLOPS counter
(Google Benchmark's real_time is the mean of the timed replays), as in the bench's summary.
Default output: docs/img/xfer_gather.png, docs/img/roast_vs_cublas.png and
docs/img/coll_vs_nccl.png. Needs matplotlib (pip install matplotlib); nothing in the build or
the tests needs this script.
"""
import argparse
import collections
import json
import pathlib
import re
import sys

DEFAULT_OUTPUT = {
    "xfer": "docs/img/xfer_gather.png",
    "roast": "docs/img/roast_vs_cublas.png",
    "coll": "docs/img/coll_vs_nccl.png",
}


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def gpu_of(doc):
    """The GPU's name as the bench recorded it, without the details in brackets."""
    context = doc.get("context", {})
    full = context.get("gpu") or context.get("device") or doc.get("gpu") or "unknown GPU"
    return full.split(" (")[0]


def date_of(doc, path):
    """The run's date: the context's (Google Benchmark) or the one in the file's name."""
    date = doc.get("context", {}).get("date", "")[:10]
    if not date:
        m = re.search(r"(\d{4}-\d{2}-\d{2})", pathlib.Path(path).name)
        date = m.group(1) if m else "undated"
    return date


def size_label(n):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def log2_axis(ax, values, what, label=size_label):
    ax.set_xscale("log", base=2)
    ax.set_xticks(values)
    ax.set_xticklabels([label(v) for v in values])
    ax.minorticks_off()
    ax.set_xlabel(what)


def plot_xfer(paths, out, plt):
    doc = load(paths[0])
    gbps = collections.defaultdict(dict)  # (method, placement) -> {size: GB/s}
    base, again = {}, {}
    for b in doc.get("benchmarks", []):
        if not b["name"].startswith("xfer/"):
            continue
        _, method, size, placement = b["name"].split("/")[:4]
        size = int(size)
        if method == "bulk_memcpy_ceiling":
            again[size] = b["GB/s"]
            continue
        gbps[(method, placement)][size] = b["GB/s"]
        # Every ratio_to_bulk is against the copy measured first in the process.
        base[size] = b["GB/s"] / b["ratio_to_bulk"]
    sizes = sorted(base)
    if not sizes:
        sys.exit(f"{paths[0]}: no xfer benchmarks in this file")

    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot(sizes, [base[s] for s in sizes], color="black", linewidth=2, marker="s",
            label="bulk cudaMemcpyAsync (link ceiling)")
    ax.plot(sorted(again), [again[s] for s in sorted(again)], linestyle="none", marker="s",
            markerfacecolor="none", color="black", label="bulk cudaMemcpyAsync, again later")
    ax.plot([s for s in sizes if s >= 1024], [0.9 * base[s] for s in sizes if s >= 1024],
            color="black", linestyle=":", linewidth=1, label="0.90 x ceiling (target from 1 KiB)")
    styles = {
        ("squeeze_gather", "aligned"): dict(color="C0", marker="o", linewidth=2.5,
                                            label="squeeze gather, aligned"),
        ("squeeze_gather", "misaligned"): dict(color="C1", marker="o", linewidth=2.5,
                                               label="squeeze gather, misaligned"),
        ("squeeze_gather", "random"): dict(color="C2", marker="o", linewidth=1.5,
                                           label="squeeze gather, random offsets"),
        ("naive_zero_copy", "aligned"): dict(color="C0", marker="x", linestyle="--",
                                             linewidth=1.2, label="naive zero-copy, aligned"),
        ("naive_zero_copy", "misaligned"): dict(color="C1", marker="x", linestyle="--",
                                                linewidth=1.2, label="naive zero-copy, misaligned"),
    }
    for key, style in styles.items():
        series = gbps.get(key)
        if series:
            xs = sorted(series)
            ax.plot(xs, [series[s] for s in xs], zorder=3, **style)
    log2_axis(ax, sizes, "item size (100 000 items at random slots of pinned, mapped "
                   "host memory)")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("GB/s delivered into device memory (higher is better)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"xfer row gather against its baselines ({gpu_of(doc)}, "
                 f"{date_of(doc, paths[0])})")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


ROAST_SERIES = [  # label, ROAST benchmark, cuBLAS benchmark (both before "/<K>/<N>")
    ("forward TF32", "roast/forward/tf32/4MB", "cublas/forward/tf32"),
    ("forward bf16", "roast/forward/bf16/4MB", "cublas/forward/bf16"),
    ("dX bf16", "roast/dx/bf16/4MB", "cublas/dx/bf16"),
    ("dM bf16 (cuBLAS: dW)", "roast/dm/bf16/4MB", "cublas/dw/bf16"),
    ("training step bf16", "roast/step/bf16/4MB", "cublas/step/bf16"),
]


def roast_ratios(doc):
    """{label: {K: ROAST median / cuBLAS median}} of one run."""
    batch = int(doc["context"].get("roast_batch", 512))
    median_us = {}
    for b in doc["benchmarks"]:
        if "TFLOPS" not in b:
            continue
        name = b["name"].split("/iterations")[0]
        *head, k, n = name.split("/")
        # The bench's TFLOPS = 2 * batch * K * N / (median ms) / 1e9, for every benchmark.
        median_us[("/".join(head), int(k))] = 2e-6 * batch * int(k) * int(n) / b["TFLOPS"]
    ratios = {}
    for label, ours, theirs in ROAST_SERIES:
        ratios[label] = {k: t / median_us[(theirs, k)] for (name, k), t in median_us.items()
                         if name == ours and (theirs, k) in median_us}
    return ratios


def plot_roast(paths, out, plt):
    docs = [load(p) for p in paths]
    gpus = {gpu_of(d) for d in docs}
    if len(gpus) > 1:
        sys.exit(f"runs of different GPUs ({', '.join(sorted(gpus))}): plot one GPU at a time")
    runs = [roast_ratios(d) for d in docs]
    if not any(runs[0].values()):
        sys.exit(f"{paths[0]}: no ROAST and cuBLAS pairs in this file")

    fig, ax = plt.subplots(figsize=(8, 5))
    ax.axhline(1.0, color="black", linewidth=1.2)
    ax.text(1.01, 1.0, "cuBLAS", transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    markers = ["o", "s", "^", "v", "D"]
    sizes = set()
    for i, (label, _, _) in enumerate(ROAST_SERIES):
        first = runs[0][label]
        if not first:
            continue
        ks = sorted(first)
        sizes.update(ks)
        ax.plot(ks, [first[k] for k in ks], marker=markers[i], color=f"C{i}", linewidth=2,
                label=label, zorder=3)
        if len(runs) > 1:
            lo = [min(r[label].get(k, first[k]) for r in runs) for k in ks]
            hi = [max(r[label].get(k, first[k]) for r in runs) for k in ks]
            ax.fill_between(ks, lo, hi, color=f"C{i}", alpha=0.15, linewidth=0)
    log2_axis(ax, sorted(sizes), "K = N (batch 512, |M| = 4 MB)", label=str)
    top = max(max(r[label].values(), default=1.0) for r in runs for label in r)
    ax.set_ylim(top=top + 0.12)  # room for the legend above the lines
    ax.set_ylabel("ROAST time / cuBLAS time (below 1: ROAST faster)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", ncol=3)
    spread = f"; shaded: range over {len(runs)} runs" if len(runs) > 1 else ""
    ax.set_title(f"ROAST-MM against cuBLAS on the dense W that ROAST's mapping defines\n"
                 f"({gpus.pop()}, {date_of(docs[0], paths[0])}{spread})", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


COLL_SERIES = [  # variant, label, style
    ("ring+frsz2_16", "ring + frsz2_16", dict(color="C0", marker="o", linewidth=2)),
    ("rd+frsz2_16", "recursive doubling + frsz2_16", dict(color="C0", marker="s",
                                                          linestyle="--", linewidth=2)),
    ("ring+frsz2_8", "ring + frsz2_8", dict(color="C1", marker="o", linewidth=2)),
    ("rd+frsz2_8", "recursive doubling + frsz2_8", dict(color="C1", marker="s",
                                                        linestyle="--", linewidth=2)),
    ("ring", "ring, uncompressed", dict(color="gray", marker=".", linestyle=":",
                                        linewidth=1.2)),
]


def plot_coll(paths, out, plt):
    doc = load(paths[0])
    median = collections.defaultdict(dict)
    transports = set()
    for r in doc.get("allreduce", []):
        median[r["variant"]][r["bytes"]] = r["median_us"]
        transports.add(r.get("transport", "nccl"))
    native = median.get("native")
    if not native or len(transports) != 1:
        sys.exit(f"{paths[0]}: needs the records of one transport with its native allreduce")
    context = doc.get("context", {})
    transport = transports.pop()
    baseline = "ncclAllReduce" if transport == "nccl" else "the native allreduce"

    fig, ax = plt.subplots(figsize=(8, 5))
    ax.axhline(1.0, color="black", linewidth=1.2)
    ax.text(1.01, 1.0, "NCCL" if transport == "nccl" else "native",
            transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    sizes = sorted(native)
    for variant, label, style in COLL_SERIES:
        series = median.get(variant)
        if not series:
            continue
        xs = [s for s in sizes if s in series]
        ax.plot(xs, [native[s] / series[s] for s in xs], label=label, zorder=3, **style)
    # The project's targets for the best of ring and recursive doubling on dense data through
    # shared host memory (NCCL_P2P_DISABLE=1; docs/RESULTS.md, coll).
    if (transport == "nccl" and context.get("NCCL_P2P_DISABLE") == "1"
            and not context.get("NCCL_SHM_DISABLE") and context.get("data") == "dense"):
        mid = [s for s in sizes if 4 << 20 <= s < 64 << 20]
        big = [s for s in sizes if s >= 64 << 20]
        target = dict(linestyle=":", linewidth=1.2)
        if mid:
            ax.hlines(1.2, mid[0], mid[-1], color="C0", **target)
        if big:
            ax.hlines(1.6, big[0], big[-1], color="C0",
                      label="target, best of ring / rd + frsz2_16", **target)
            ax.hlines(2.5, big[0], big[-1], color="C1",
                      label="target, best of ring / rd + frsz2_8", **target)
    log2_axis(ax, sizes, f"message size ({context.get('type', 'float')} values, "
              "the same count on each rank)")
    ax.tick_params(axis="x", labelrotation=35)
    ax.set_ylim(bottom=0)
    ax.set_ylabel(f"speedup over {baseline} (above 1: squeeze faster)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    env = ", ".join(f"{k}={context[k]}" for k in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")
                    if context.get(k))
    data = f"{context['data']} data" if context.get("data") else "data as generated"
    over = "" if transport == "nccl" else f" over {transport}"
    ax.set_title(f"coll allreduce{over} against {baseline}, {data}{', ' + env if env else ''}\n"
                 f"({context.get('ranks', '?')} ranks, {gpu_of(doc)}, "
                 f"{date_of(doc, paths[0])})", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=sorted(DEFAULT_OUTPUT))
    parser.add_argument("json", nargs="+", help="bench JSON (roast: one or more runs)")
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    if args.kind != "roast" and len(args.json) > 1:
        parser.error(f"{args.kind} takes one JSON file")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("needs matplotlib: pip install matplotlib")
    out = pathlib.Path(args.output or DEFAULT_OUTPUT[args.kind])
    out.parent.mkdir(parents=True, exist_ok=True)
    {"xfer": plot_xfer, "roast": plot_roast, "coll": plot_coll}[args.kind](args.json, out, plt)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
