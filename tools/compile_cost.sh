#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/compile_cost.sh [-a ARCH] [HEADER ...]: what including a squeeze header costs a
# translation unit that uses nothing from it: nvcc's wall time and the object's size.
#
# Each HEADER (default: the umbrella squeeze/squeeze.cuh and every family header) is
# included by a file holding only `int main() { return 0; }`, compiled with
#   nvcc -std=c++20 -O2 -arch=ARCH (default sm_90a) -c
# one at a time (run it on an idle machine: the times are wall clock). A header whose kernels
# are templates instantiated only where they are used costs front-end time and an object of
# a few kilobytes; kernels referenced by non-template host functions are compiled into every
# object that includes them. Prints one line per header: seconds, object bytes. Extra nvcc
# options come from $NVCC_FLAGS (e.g. -DCCCL_DISABLE_NVTX, to see what CUB's NVTX ranges add).
set -euo pipefail
cd "$(dirname "$0")/.."
arch=sm_90a
if [ "${1:-}" = "-a" ]; then arch=$2; shift 2; fi
headers=("$@")
if [ ${#headers[@]} -eq 0 ]; then
  headers=(squeeze/squeeze.cuh)
  for h in include/squeeze/*.cuh include/squeeze/*.hpp; do
    h=${h#include/}
    [ "$h" = squeeze/squeeze.cuh ] || headers+=("$h")
  done
fi
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-24s %9s %12s\n' header seconds object_bytes
for h in "${headers[@]}"; do
  printf '#include <%s>\nint main() { return 0; }\n' "$h" > "$work/tu.cu"
  start=$(date +%s%N)
  # shellcheck disable=SC2086 # NVCC_FLAGS is a list of options
  "$nvcc" -std=c++20 -O2 -arch="$arch" ${NVCC_FLAGS:-} -Iinclude -c "$work/tu.cu" -o "$work/tu.o"
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  printf '%-24s %5d.%01d %12d\n' "$h" $((ms / 1000)) $((ms % 1000 / 100)) "$(stat -c %s "$work/tu.o")"
done
