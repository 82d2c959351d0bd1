#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Time per CB-GMRES iteration against the matrix's rows, one line per basis storage.

    tools/plot_cb_gmres.py bench/results/cb_gmres_sizes_<gpu>_<date>.txt [-o PNG]

Reads the output of examples/cb_gmres runs on the generated convection-diffusion matrices
(`--generate N`; other matrices in the file are skipped), takes the median ms an iteration
of each storage over the runs of each size, and draws them on log-log axes. Default output:
docs/img/cb_gmres_per_iteration.png. Needs matplotlib (pip install matplotlib); nothing in the
build or the tests needs this script.
"""
import argparse
import collections
import re
import statistics
import sys

STORAGES = ["float64", "float32", "float16", "bfloat16", "frsz2_16", "frsz2_21", "frsz2_32"]


def parse(path):
    """{storage: {rows: [ms an iteration, ...]}} and the GPU named in the output."""
    times = collections.defaultdict(lambda: collections.defaultdict(list))
    gpu, rows = "unknown GPU", None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"matrix: convection_diffusion_\d+\^3, (\d+) rows", line)
            if m:
                rows = int(m.group(1))
                continue
            if line.startswith("matrix: "):
                rows = None  # a file matrix: not on the size axis
                continue
            m = re.match(r"GPU: (.+?) \(", line)
            if m:
                gpu = m.group(1)
                continue
            fields = line.split()
            if rows is not None and len(fields) >= 9 and fields[0] in STORAGES:
                times[fields[0]][rows].append(float(fields[6]))
    return times, gpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="cb_gmres output (bench/results/cb_gmres_sizes_*.txt)")
    parser.add_argument("-o", "--output", default="docs/img/cb_gmres_per_iteration.png")
    args = parser.parse_args()
    times, gpu = parse(args.results)
    if not times:
        sys.exit(f"{args.results}: no runs on generated matrices found")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for storage in STORAGES:
        if storage not in times:
            continue
        sizes = sorted(times[storage])
        medians = [statistics.median(times[storage][n]) for n in sizes]
        style = "-" if storage.startswith("frsz2") else "--"
        ax.plot(sizes, medians, style, marker="o", label=storage)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows of the 3D convection-diffusion matrix")
    ax.set_ylabel("ms per iteration")
    ax.set_title(f"CB-GMRES time per iteration by basis storage ({gpu})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
