#!/usr/bin/env bash
# One prepared GPU check (for the device tool or any CUDA machine; installs nothing):
# the kernel tests on CUDA, then the benchmark sweep. Logs and the CSV go to ${OUT:-kernels/benchmarks}.
set -uo pipefail
OUT=${OUT:-kernels/benchmarks}
mkdir -p "$OUT"
unset TRITON_INTERPRET
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
python -m pytest tests/kernels -q -p no:cacheprovider -o addopts="" > "$OUT/gpu_tests.log" 2>&1; echo "tests rc=$?" >> "$OUT/gpu_tests.log"
python -m kernels.bench --out "$OUT/gpu.csv" > "$OUT/gpu_bench.log" 2>&1; echo "bench rc=$?" >> "$OUT/gpu_bench.log"
tail -3 "$OUT/gpu_tests.log" "$OUT/gpu_bench.log"
