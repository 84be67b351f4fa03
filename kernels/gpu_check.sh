#!/usr/bin/env bash
# One prepared GPU check (for the device tool or any CUDA machine; installs nothing):
# the kernel tests on CUDA (compiled: no interpreter), then the benchmark sweep. Logs and the CSV go to
# ${OUT:-kernels/benchmarks}. It stops at the first failure and exits with that step's status.
set -euo pipefail
OUT=${OUT:-kernels/benchmarks}
mkdir -p "$OUT"
unset TRITON_INTERPRET
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
step() {   # step <name> <command...>: run it into $OUT/<name>.log; on failure show the log's tail and stop
    local name=$1; shift
    if "$@" > "$OUT/$name.log" 2>&1; then echo "$name: ok"; else
        local rc=$?; echo "$name: FAILED (rc=$rc)"; tail -20 "$OUT/$name.log"; exit "$rc"; fi
}
step gpu_tests python -m pytest tests/kernels -q -p no:cacheprovider -o addopts=""
step gpu_bench python -m kernels.bench --out "$OUT/gpu.csv"
tail -3 "$OUT/gpu_tests.log" "$OUT/gpu_bench.log"
