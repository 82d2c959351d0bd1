#!/usr/bin/env bash
# tools/sanitize.sh [-b BUILD] [-o OUT] [-s INDEX/COUNT] [-f FILTER] [TOOL ...]: runs every
# GPU test program under NVIDIA's compute-sanitizer, once per TOOL (default: memcheck
# racecheck synccheck initcheck), and prints one line per tool and program: the tests run,
# the tests that failed, and the errors the sanitizer reported.
#
#   BUILD   a configured and built tree (default build/test): its tests/squeeze_*gpu_tests
#   OUT     where the logs go (default BUILD/sanitize): OUT/<tool>.<program>[.<shard>].log
#   -s I/N  run shard I of N of each program's tests (GoogleTest sharding), for runs that
#           must be split across calls; the shards of a tool together cover every test
#   -f      a --gtest_filter for a quick look at some tests (a full run leaves it out)
#
# memcheck runs with --leak-check full, so device memory a test leaves allocated counts as an
# error; racecheck reports shared-memory hazards, synccheck misuse of barriers and warp
# synchronization, initcheck reads of device memory nothing wrote. Multi-GPU tests (coll)
# use every visible GPU; NCCL's NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
# Exit status: 0 when every program passed with no sanitizer error, 1 otherwise, 2 on bad use.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build/test out="" shard="" filter=""
while getopts "b:o:s:f:" opt; do
  case $opt in
    b) build=$OPTARG ;;
    o) out=$OPTARG ;;
    s) shard=$OPTARG ;;
    f) filter=$OPTARG ;;
    *) sed -n '2,17p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(memcheck racecheck synccheck initcheck)
out=${out:-$build/sanitize}
sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
[ -x "$sanitizer" ] || { echo "compute-sanitizer not found (set COMPUTE_SANITIZER)"; exit 2; }
mapfile -t programs < <(find "$build/tests" -maxdepth 1 -type f -name 'squeeze_*gpu_tests' -perm -u+x | sort)
[ ${#programs[@]} -gt 0 ] || { echo "no GPU test programs in $build/tests (build them first)"; exit 2; }
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
  for program in "${programs[@]}"; do
    name=$(basename "$program")
    log=$out/$tool.$name$suffix.log
    args=(--gtest_brief=1)
    [ -n "$filter" ] && args+=("--gtest_filter=$filter")
    start=$SECONDS
    # shellcheck disable=SC2086  # the options are words
    "$sanitizer" --tool "$tool" ${options[$tool]} --target-processes all --print-limit 100 \
      "$program" "${args[@]}" > "$log" 2>&1
    rc=$?
    seconds=$((SECONDS - start))
    errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | awk '{s += $3} END {print s + 0}')
    tests=$(grep -Eo '\[==========\] [0-9]+ tests? from' "$log" | awk '{s += $2} END {print s + 0}')
    failed=$(grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sort -u | wc -l)
    summaries=$(grep -c 'ERROR SUMMARY' "$log")
    printf '%-10s %-28s %6d %6d %8d %8d\n' "$tool" "$name" "$tests" "$failed" "$errors" "$seconds"
    if [ "$rc" -ne 0 ] || [ "$errors" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$summaries" -eq 0 ]; then
      status=1
      [ "$summaries" -eq 0 ] && echo "  (no sanitizer summary: the run did not finish, see $log)"
      [ "$rc" -ne 0 ] && echo "  (exit status $rc, see $log)"
    fi
  done
done
exit $status
