#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One build-check-measure cycle on a GPU machine (see the device notes in docs/RESULTS.md).
#   bench/device_cycle.sh [build] [test] [sanitize] [bench] [frsz2] [tour] [example]
#                         [coll-build] [coll-test] [coll-bench] [coll-links] [ibp-wire] [uvm]
#                         [nvcomp]
# uvm: bam arrays against CUDA unified memory: configures, builds only
# squeeze_bench_uvm and runs it (UVM_ARGS: its options, e.g. --kernels bfs --scale 22).
# coll-links (two GPUs or more): the allreduce table under three link settings (NVLink as
# set, NCCL_P2P_DISABLE=1, and also NCCL_SHM_DISABLE=1), one JSON each, the sparse-gradient
# table with NCCL_P2P_DISABLE=1, then examples/allreduce_sgd over NCCL on NVLink and with
# NCCL_P2P_DISABLE=1 (ring and recursive doubling; its data: $FASHION_MNIST, default /tmp/fm).
# The CB-GMRES tests on the shared matrices read them from $SQUEEZE_MATRIX_DIR (skipped
# when absent).
# nvcomp: IBP against nvCOMP's batched codecs (bench/ibp/nvcomp_bench.cu) into
# $OUT/ibp_nvcomp_<gpu>_<date>.json: configures, builds only squeeze_bench_nvcomp and runs it.
# The target exists only when the configure finds nvCOMP 6: pass the unpacked
# nvidia-libnvcomp-cu13 wheel (carried along; the machine has no network) as
# SQUEEZE_CMAKE_ARGS=-DNVCOMP_ROOT=$PWD/.whl/nvcomp/nvidia/libnvcomp. Fashion-MNIST comes from
# $FASHION_MNIST (default /tmp/fm), unpacked there from .data/fm/train-images-idx3-ubyte.gz
# when missing; NVCOMP_BENCH_ARGS narrows the run (e.g. --datasets normal --rows 1024).
# Extra configure arguments in SQUEEZE_CMAKE_ARGS.
# Logs and JSON go to $OUT (or ./device-out). Stages run in the order given.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
stamp=$(date -u +%Y-%m-%d)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '-' | tr -cd '[:alnum:]-')
gpu=${gpu:-nogpu}
build=build/bench
status=0
run() {  # run <log> <command...>: tee into $OUT/<log>, remember failure
  local log=$1; shift
  echo "== $*" | tee -a "$OUT/$log"
  "$@" 2>&1 | tee -a "$OUT/$log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "!! exit $rc: $*" | tee -a "$OUT/$log"; status=1; }
}
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(build test)
for stage in "${stages[@]}"; do
  case $stage in
    build)
      run build.log nvidia-smi
      run build.log cmake --version
      run build.log cmake --preset bench ${SQUEEZE_CMAKE_ARGS:-}
      run build.log cmake --build --preset bench -j 16 ;;
    test)
      run tests.log ctest --test-dir "$build" -L "gpu|host" --output-on-failure -j 4 ;;
    sanitize)  # every GPU test program under the four tools; SANITIZE_SHARD=I/N splits it,
      # SANITIZE_OPTS adds options (-p PATTERN, -t SECONDS), SANITIZE_TOOLS names the tools
      run sanitize.log tools/sanitize.sh -b "$build" -o "$OUT/sanitize" \
        ${SANITIZE_SHARD:+-s "$SANITIZE_SHARD"} ${SANITIZE_OPTS:-} ${SANITIZE_TOOLS:-} ;;
    bench)
      run bench.log "$build/bench/squeeze_bench_xfer" --benchmark_out="$OUT/xfer_${gpu}_${stamp}.json" \
        --benchmark_out_format=json ;;
    frsz2)
      run frsz2.log "$build/bench/squeeze_bench_frsz2" \
        --benchmark_out="$OUT/frsz2_${gpu}_${stamp}.json" --benchmark_out_format=json
      run frsz2.log "$build/examples/cb_gmres" --tol 1e-12 --max-iters 4000 \
        --json "$OUT/cb_gmres_generated_${gpu}_${stamp}.json" ;;
    tour)  # TOUR_FAMILIES: only these sections (default all)
      run tour.log "$build/bench/squeeze_tour" ${TOUR_FAMILIES:-} ;;
    example)
      run example.log "$build/examples/gather_features" ;;
    uvm)
      run uvm.log cmake --preset bench ${SQUEEZE_CMAKE_ARGS:-}
      run uvm.log cmake --build --preset bench -j 16 --target squeeze_bench_uvm
      run uvm.log "$build/bench/squeeze_bench_uvm" ${UVM_ARGS:-} \
        --json "$OUT/bam_uvm_${gpu}_${stamp}.json" ;;
    coll-build)  # only what coll needs (MPI is found on the GPU machine)
      run coll.log bash -c 'command -v mpiexec; mpiexec --version | head -2; ompi_info 2>/dev/null | grep -i "cuda support" | head -3; nvidia-smi topo -m'
      run coll.log cmake --preset bench ${SQUEEZE_CMAKE_ARGS:-}
      run coll.log cmake --build --preset bench -j "$(nproc)" --target squeeze_host_tests \
        squeeze_coll_gpu_tests squeeze_coll_mpi_tests squeeze_bench_coll allreduce_sgd \
        squeeze_tour -- -k 0 ;;
    coll-test)
      run coll.log ctest --test-dir "$build" -R "host\..*Coll|host\..*Schedule|gpu\.Coll|Shapes/Coll|mpi\." \
        --output-on-failure -j 2
      run coll.log compute-sanitizer --tool memcheck --error-exitcode 1 \
        "$build/tests/squeeze_coll_gpu_tests" --gtest_filter='*N3_n100003_ring*:*N5_n1000_recursive*:*GatheringTransport/N2_*:CollWireCodec.*' ;;
    coll-links)
      export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      ngpu=$(nvidia-smi -L | wc -l)
      mpi="mpiexec -n $ngpu --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE"
      run coll_links.log env $mpi "$build/bench/squeeze_bench_coll" --label nvlink \
        ${COLL_BENCH_ARGS:-} --json "$OUT/coll_nvlink_${gpu}x${ngpu}_${stamp}.json"
      run coll_links.log env NCCL_P2P_DISABLE=1 $mpi -x NCCL_P2P_DISABLE \
        "$build/bench/squeeze_bench_coll" --label p2p-disabled --transport nccl ${COLL_BENCH_ARGS:-} \
        --json "$OUT/coll_shm_${gpu}x${ngpu}_${stamp}.json"
      run coll_links.log env NCCL_P2P_DISABLE=1 $mpi -x NCCL_P2P_DISABLE \
        "$build/bench/squeeze_bench_coll" --label p2p-disabled --transport nccl --data sparse \
        ${COLL_BENCH_ARGS:-} --json "$OUT/coll_shm_sparse_${gpu}x${ngpu}_${stamp}.json"
      run coll_links.log env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 $mpi -x NCCL_P2P_DISABLE \
        -x NCCL_SHM_DISABLE "$build/bench/squeeze_bench_coll" --label sockets --transport nccl \
        ${COLL_SOCKET_ARGS:---iters 5 --warmup 2} --json "$OUT/coll_socket_${gpu}x${ngpu}_${stamp}.json"
      fm=${FASHION_MNIST:-/tmp/fm}
      run sgd_nvlink.log $mpi "$build/examples/allreduce_sgd" --data "$fm"
      for alg in ring rd; do
        run "sgd_shm_$alg.log" env NCCL_P2P_DISABLE=1 $mpi -x NCCL_P2P_DISABLE \
          "$build/examples/allreduce_sgd" --data "$fm" --algorithm $alg
      done ;;
    ibp-wire)  # IBP's wire codec (coll's lossless codec): its GPU tests, then under memcheck
      run ibp_wire.log cmake --build --preset bench -j 16 --target squeeze_gpu_tests
      run ibp_wire.log "$build/tests/squeeze_gpu_tests" --gtest_filter='IbpWire*'
      run ibp_wire.log compute-sanitizer --tool memcheck --error-exitcode 1 \
        "$build/tests/squeeze_gpu_tests" --gtest_filter='IbpWire*' ;;
    nvcomp)  # needs SQUEEZE_CMAKE_ARGS=-DNVCOMP_ROOT=... (see above)
      run nvcomp.log cmake --preset bench ${SQUEEZE_CMAKE_ARGS:-}
      run nvcomp.log cmake --build --preset bench -j 16 --target squeeze_bench_nvcomp
      fm=${FASHION_MNIST:-/tmp/fm}
      if [ ! -f "$fm/train-images-idx3-ubyte" ] && [ -f .data/fm/train-images-idx3-ubyte.gz ]; then
        mkdir -p "$fm" && gunzip -c .data/fm/train-images-idx3-ubyte.gz > "$fm/train-images-idx3-ubyte"
      fi
      run nvcomp.log "$build/bench/squeeze_bench_nvcomp" --fashion-mnist "$fm" ${NVCOMP_BENCH_ARGS:-} \
        --json "$OUT/ibp_nvcomp_${gpu}_${stamp}.json" ;;
    coll-bench)
      export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      ngpu=$(nvidia-smi -L | wc -l)
      run coll.log mpiexec -n "$ngpu" --oversubscribe --bind-to none "$build/bench/squeeze_bench_coll" --codec-study \
        ${COLL_BENCH_ARGS:-} --json "$OUT/coll_${gpu}_${stamp}.json" ;;
    *) echo "unknown stage $stage"; status=1 ;;
  esac
done
exit $status
