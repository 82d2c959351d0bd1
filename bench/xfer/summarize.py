#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints the transfer-study table of docs/RESULTS.md from squeeze_bench_xfer's JSON.

    bench/xfer/summarize.py bench/results/xfer_<gpu>_<date>.json
"""
import json
import sys

METHODS = {
    "per_item_memcpy": "(a) cudaMemcpyAsync per item",
    "cpu_gather_bulk": "(b) CPU gather + one copy",
    "naive_zero_copy": "(c) naive zero-copy",
    "squeeze_gather": "(d) squeeze gather",
}


def cell(gbps, ratio):
    value = f"{gbps:.1f}" if gbps >= 1 else f"{gbps:.2f}"
    return f"{value} ({ratio:.2f})" if ratio >= 0.01 else f"{value} (<0.01)"


def main(path):
    results, again, base = {}, {}, {}
    for b in json.load(open(path))["benchmarks"]:
        _, method, size, placement = b["name"].split("/")[:4]
        size = int(size)
        if method == "bulk_memcpy_ceiling":
            again[size] = b["GB/s"]
            continue
        results[(size, placement, method)] = (b["GB/s"], b["ratio_to_bulk"])
        base[size] = b["GB/s"] / b["ratio_to_bulk"]
    print("| item | placement | " + " | ".join(METHODS.values()) +
          " | (e) bulk cudaMemcpy: ratio base / again |")
    print("|---:|---|" + "---:|" * (len(METHODS) + 1))
    for size in sorted(base):
        label = f"{size} B" if size < 1024 else f"{size // 1024} KiB"
        for placement in ("aligned", "misaligned", "random"):
            cells = []
            for method in METHODS:
                r = results.get((size, placement, method))
                text = cell(*r) if r else "n/a"
                cells.append(f"**{text}**" if r and method == "squeeze_gather" else text)
            ceiling = f"{base[size]:.1f} / {again[size]:.1f}" if placement == "aligned" else ""
            print(f"| {label} | {placement} | " + " | ".join(cells) + f" | {ceiling} |")


if __name__ == "__main__":
    main(sys.argv[1])
