#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/fuzz.sh [-t SECONDS] [TARGET ...]: fuzzes squeeze's readers and decoders of outside
# bytes with clang's libFuzzer (+ AddressSanitizer, UndefinedBehaviorSanitizer).
#
# Each tests/fuzz/fuzz_<TARGET>.cpp (default: all) is built into build/fuzz/fuzz_<TARGET>
# and run for SECONDS (default 600), starting from a copy of its checked-in corpus
# (tests/fuzz/corpus/<TARGET>/) in build/fuzz/<TARGET>.corpus/. Crashes, leaks and timeouts
# land in build/fuzz/<TARGET>.findings/ (libFuzzer's -artifact_prefix); a reproducer worth
# keeping goes into the checked-in corpus, so that ctest's fuzz.<TARGET> (tests/fuzz/
# CMakeLists.txt) replays it on every CI run. The last line per target: executions, the
# coverage (libFuzzer's cov: edges, ft: features), the corpus it grew to, and the findings.
#
# To refresh a checked-in corpus with the inputs that add coverage:
#   build/fuzz/fuzz_X -merge=1 tests/fuzz/corpus/X build/fuzz/X.corpus
# Needs clang++ with compiler-rt's libFuzzer (Debian: clang and libclang-rt-dev or
# llvm's clang package). Run from anywhere in the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=600
if [ "${1:-}" = "-t" ]; then seconds=$2; shift 2; fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do t=${f#tests/fuzz/fuzz_}; targets+=("${t%.cpp}"); done
fi
cxx=${CXX_FUZZ:-clang++}
cuda_include=${CUDA_INCLUDE:-/usr/local/cuda/include}
mkdir -p build/fuzz
for t in "${targets[@]}"; do
  src=tests/fuzz/fuzz_$t.cpp
  [ -f "$src" ] || { echo "no target $t ($src)"; exit 2; }
  exe=build/fuzz/fuzz_$t
  "$cxx" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Iinclude -Itests -isystem "$cuda_include" "$src" -o "$exe"
  corpus=build/fuzz/$t.corpus findings=build/fuzz/$t.findings
  mkdir -p "$corpus" "$findings"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  log=build/fuzz/$t.log
  set +e
  "$exe" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$findings/" "$corpus" > "$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo ?)
  cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -o 'cov: [0-9]* ft: [0-9]*' || echo 'cov: ?')
  found=$(find "$findings" -type f | wc -l)
  echo "$t: ${seconds} s, $execs executions, $cov, corpus $(ls "$corpus" | wc -l) inputs, findings $found (exit $rc, log $log)"
done
