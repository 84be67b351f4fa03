# Kernels: correctness under the Triton interpreter (every profile, CPU) and the GPU claims from a
# committed GPU benchmark CSV when one exists (kernels/benchmarks/gpu.csv), then the kernels notebook.
KERNELS = f"{RESULTS}/kernels"
GPU_CSV = "kernels/benchmarks/gpu.csv"
PAPER_METRICS["kernels"] = [f"{KERNELS}/metrics/kernels.json"]
PAPER_TARGETS.extend(prov(f"{KERNELS}/tables/interpreter_bench.csv", f"{KERNELS}/kernels.ipynb"))

rule kernels_interpreter_bench:
    input: [GPU_CSV] if Path(GPU_CSV).exists() else []
    output: prov(f"{KERNELS}/tables/interpreter_bench.csv", f"{KERNELS}/metrics/kernels.json")
    threads: 1
    benchmark: bench("kernels_interpreter_bench")
    shell:
        "OMP_NUM_THREADS=1 TRITON_INTERPRET=1 REPRO_PROFILE={PROFILE} {PY} -m kernels.bench --quick "
        "--out {output[0]} --metrics {output[2]} --gpu-csv {GPU_CSV} --profile {PROFILE} --rule {rule}"

rule kernels_notebook:
    input:
        nb="notebooks/kernels.ipynb",
        metrics=f"{KERNELS}/metrics.json",
    output: prov(f"{KERNELS}/kernels.ipynb")
    log: f"{RESULTS}/logs/kernels_notebook.log"
    benchmark: bench("kernels_notebook")
    shell:
        "{PAPERMILL} {input.nb} {output[0]} --cwd {KERNELS} "
        "-p profile {PROFILE} -p results_dir $(realpath {KERNELS}) -p claims_path $(realpath kernels/claims.yaml) "
        "-p gpu_csv $(realpath -m {GPU_CSV}) > {log} 2>&1 && "
        "{PY} -m shared.provenance {output[0]} --profile {PROFILE} --rule {rule}"

ruleorder: kernels_notebook > paper_notebook
