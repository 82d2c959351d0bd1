#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/sanitize.sh [-b BUILD] [-o OUT] [-s INDEX/COUNT] [-f FILTER] [-p PROGRAM] [-t SECONDS]
#                   [TOOL ...]: runs every GPU test program under NVIDIA's compute-sanitizer,
# once per TOOL (default: memcheck racecheck synccheck initcheck), and prints one line per
# tool and program: the tests run, the tests that failed, and the errors the sanitizer
# reported.
#
#   BUILD   a configured and built tree (default build/test): its tests/squeeze_*gpu_tests
#   OUT     where the logs go (default BUILD/sanitize): OUT/<tool>.<program>[.<shard>].log
#   -s I/N  run shard I of N of each program's tests (GoogleTest sharding), for runs that
#           must be split across calls; the shards of a tool together cover every test
#   -f      a --gtest_filter for a quick look at some tests (a full run leaves it out)
#   -p      only the programs whose name matches this shell pattern (default squeeze_*gpu_tests)
#   -t      stop a program after SECONDS (default: no limit); a stopped run counts as failed
#
# racecheck is slow (it instruments shared memory): run shards side by side. The main
# program in 48 shards, 12 at once over two GPUs, took about 6 minutes on 2 x H100 for all
# but the shard with CB-GMRES's badly scaled frsz2_16 solve (over 6 minutes on its own):
#   seq 0 47 | xargs -P 12 -I{} sh -c 'CUDA_VISIBLE_DEVICES=$(({} % 2)) \
#     tools/sanitize.sh -b build/bench -p squeeze_gpu_tests -s {}/48 racecheck'
#
# memcheck runs with --leak-check full, so device memory a test leaves allocated counts as an
# error; racecheck reports shared-memory hazards, synccheck misuse of barriers and warp
# synchronization, initcheck reads of device memory nothing wrote. Multi-GPU tests (coll)
# use every visible GPU; NCCL's NVLink multicast stays off (NCCL_NVLS_ENABLE=0). Failed CUDA
# API calls are not counted as errors (--report-api-errors no): squeeze checks the status of
# every call it makes, and some tests provoke failures on purpose and assert on them (a range
# registered twice, a capture begun inside a capture, a device ordinal that does not exist).
# Exit status: 0 when every program passed with no sanitizer error, 1 otherwise, 2 on bad use.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build/test out="" shard="" filter="" pattern='squeeze_*gpu_tests' limit=""
while getopts "b:o:s:f:p:t:" opt; do
  case $opt in
    b) build=$OPTARG ;;
    o) out=$OPTARG ;;
    s) shard=$OPTARG ;;
    f) filter=$OPTARG ;;
    p) pattern=$OPTARG ;;
    t) limit=$OPTARG ;;
    *) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(memcheck racecheck synccheck initcheck)
out=${out:-$build/sanitize}
sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
[ -x "$sanitizer" ] || { echo "compute-sanitizer not found (set COMPUTE_SANITIZER)"; exit 2; }
mapfile -t programs < <(find "$build/tests" -maxdepth 1 -type f -name "$pattern" -perm -u+x | sort)
[ ${#programs[@]} -gt 0 ] || { echo "no GPU test programs '$pattern' in $build/tests (build them first)"; exit 2; }
[ -z "$limit" ] || [[ $limit =~ ^[1-9][0-9]*$ ]] || { echo "-t wants whole seconds, got '$limit'"; exit 2; }
suffix=""
if [ -n "$shard" ]; then
  [[ $shard =~ ^([0-9]+)/([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -lt "${BASH_REMATCH[2]}" ] ||
    { echo "-s wants INDEX/COUNT with INDEX < COUNT, got '$shard'"; exit 2; }
  export GTEST_SHARD_INDEX=${BASH_REMATCH[1]} GTEST_TOTAL_SHARDS=${BASH_REMATCH[2]}
  suffix=".${BASH_REMATCH[1]}of${BASH_REMATCH[2]}"
fi
export NCCL_NVLS_ENABLE=0
mkdir -p "$out"

declare -A options=(
  [memcheck]="--leak-check full"
  [racecheck]="--racecheck-report hazard"
  [synccheck]=""
  [initcheck]=""
)
status=0
printf '%-10s %-28s %6s %6s %8s %8s\n' tool program tests failed errors seconds
for tool in "${tools[@]}"; do
  [ -n "${options[$tool]+set}" ] || { echo "unknown tool '$tool'"; exit 2; }
  # The tests skip their upper bounds on time under a sanitizer (tests/common/gpu_test.hpp).
  export SQUEEZE_SANITIZER=$tool
  for program in "${programs[@]}"; do
    name=$(basename "$program")
    log=$out/$tool.$name$suffix.log
    args=()
    [ -n "$filter" ] && args+=("--gtest_filter=$filter")
    start=$SECONDS
    # Line-buffered, so a run that is stopped still names the test it was in.
    # shellcheck disable=SC2086  # the options are words
    ${limit:+timeout "$limit"} stdbuf -oL "$sanitizer" --tool "$tool" ${options[$tool]} --target-processes all \
      --report-api-errors no --print-limit 100 "$program" "${args[@]}" > "$log" 2>&1
    rc=$?
    seconds=$((SECONDS - start))
    # memcheck, synccheck and initcheck end with "ERROR SUMMARY: N errors", racecheck with
    # "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)": its warnings count too.
    errors=$(sed -nE -e 's/.*ERROR SUMMARY: ([0-9]+).*/\1/p' \
      -e 's/.*RACECHECK SUMMARY: .*\(([0-9]+) errors?, ([0-9]+) warnings?\).*/\1 \2/p' "$log" |
      awk '{s += $1 + $2} END {print s + 0}')
    tests=$(grep -Eo '\[==========\] [0-9]+ tests? from' "$log" | awk '{s += $2} END {print s + 0}')
    failed=$(grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | awk '{print $4}' | sort -u | wc -l)
    summaries=$(grep -Ec '(ERROR|RACECHECK) SUMMARY' "$log")
    printf '%-10s %-28s %6d %6d %8d %8d\n' "$tool" "$name" "$tests" "$failed" "$errors" "$seconds"
    if [ "$rc" -ne 0 ] || [ "$errors" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$summaries" -eq 0 ]; then
      status=1
      [ "$summaries" -eq 0 ] && echo "  (no sanitizer summary: the run did not finish; last test" \
        "started: $(grep -E '^\[ RUN +\]' "$log" | tail -1 | sed -E 's/^\[ RUN +\] //'); see $log)"
      [ "$rc" -ne 0 ] && echo "  (exit status $rc, see $log)"
    fi
  done
done
exit $status
