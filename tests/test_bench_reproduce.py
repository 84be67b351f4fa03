"""tools/bench_reproduce.py: a warm job is counted from its own accounting, every other job from its
benchmark file; per rule and per paper sums; the start-up share."""
import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_reproduce", REPO / "tools/bench_reproduce.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

HEAD = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def write_bench(path: Path, wall: float, cpu: float, rss: float = 100.0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEAD + f"{wall}\t0:00:01\t{rss}\t0\t0\t0\t0\t0\t0\t{cpu}\n")


def write_prov(path: Path, rule: str, pid: int, wall: float, cpu: float, warm: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    Path(f"{path}.provenance.json").write_text(json.dumps(
        {"rule": rule, "process": {"pid": pid, "wall_s": wall, "cpu_s": cpu, "max_rss_mib": 300.0, "warm": warm}}))


def test_warm_jobs_are_counted_from_their_own_accounting(tmp_path):
    res = tmp_path / "tiny"
    # a warm experiment rule: its benchmark is the client's (0.1 CPU-s), its provenance the job's
    write_bench(res / "mmp/benchmarks/mmp_cindex_table.tsv", 20.0, 0.1)
    write_prov(res / "mmp/metrics/cindex.json", "mmp_cindex_table", 11, 18.0, 15.0, True)
    write_prov(res / "mmp/tables/cindex.md", "mmp_cindex_table", 11, 19.0, 16.0, True)   # same job, later
    # a cold experiment rule with two jobs: from its benchmark files
    write_bench(res / "everest/benchmarks/everest_finetune_top1@everest.tsv", 30.0, 29.0)
    write_bench(res / "everest/benchmarks/everest_finetune_top1@random.tsv", 32.0, 31.0)
    write_prov(res / "everest/metrics/finetune_everest.json", "everest_finetune_top1", 12, 28.0, 27.0, False)
    # a notebook: benchmark only
    write_bench(res / "benchmarks/paper_notebook@mmp.tsv", 10.0, 8.0)
    prof = bench.profile(res, wall_s=100.0, startup_s=3.0)
    assert prof["per_rule"]["mmp_cindex_table"] == {"jobs": 1, "cpu_s": 16.0, "wall_s": 19.0, "max_rss_mib": 300.0}
    assert prof["per_rule"]["everest_finetune_top1"]["cpu_s"] == 60.0
    assert prof["per_paper"]["workflow"]["cpu_s"] == 8.0 and prof["per_paper"]["mmp"]["cpu_s"] == 16.0
    assert prof["cpu_s"] == 84.0 and prof["warm_jobs"] == 1 and prof["cold_experiment_jobs"] == 2
    assert prof["startup_cpu_s"] == 6.0 and prof["imports_avoided_cpu_s"] == 3.0
    text = bench.report(prof, {"cpu_s": 168.0, "per_paper": {"mmp": {"cpu_s": 32.0}}})
    assert "| **all** | 4 | **84** | | 0.50× |" in text and "| mmp | 1 | 16 | 19 | 0.50× |" in text
    assert text.splitlines()[-1].startswith("Workflow wall: 100 s")


def test_the_run_records_its_instruction_sets_and_cpu_in_probe_units(tmp_path):
    res = tmp_path / "tiny"
    pinned = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE"}
    for pid, name in ((11, "a"), (12, "b")):
        path = res / f"mmp/metrics/{name}.json"
        write_prov(path, "mmp_cindex_table", pid, 10.0, 9.0, False)
        rec = json.loads(Path(f"{path}.provenance.json").read_text())
        Path(f"{path}.provenance.json").write_text(json.dumps({**rec, "device": {"cpu_isa": pinned}}))
    write_bench(res / "mmp/benchmarks/mmp_cindex_table.tsv", 20.0, 18.0)
    prof = bench.profile(res, wall_s=30.0)
    assert prof["cpu_isa"] == pinned
    prof.update(probe_cpu_s=2.0, cpu_s_in_probes=9.0)
    text = bench.report(prof, {"cpu_s_in_probes": 18.0})
    assert ("Machine-speed probe: 2.00 CPU-s; the run's CPU is 9 probe units (0.50× the last record's); "
            "instruction sets: ATEN_CPU_CAPABILITY=avx2, MKL_CBWR=COMPATIBLE, ONEDNN_MAX_CPU_ISA=AVX2.") in text
    # a run whose jobs ran under two settings is refused: its numbers would mix two arithmetics
    other = res / "mmp/metrics/c.json"
    write_prov(other, "mmp_cindex_table", 13, 10.0, 9.0, False)
    Path(f"{other}.provenance.json").write_text(json.dumps(
        {**json.loads(Path(f"{other}.provenance.json").read_text()), "device": {"cpu_isa": {**pinned, "MKL_CBWR": "free"}}}))
    import pytest

    with pytest.raises(SystemExit, match="2 instruction-set settings"):
        bench.profile(res)
    assert bench.machine_probe_s(pinned) > 0
