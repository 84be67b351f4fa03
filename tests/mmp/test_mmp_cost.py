"""The peak-memory tracker behind the cost figure, and the compression arithmetic."""
import pytest
import torch

from conftest import REPO

from papers.mmp.measure import PeakMemory


def test_peak_memory_counts_live_tensors():
    x = torch.ones(1000)
    with torch.no_grad(), PeakMemory() as mem:
        a = x * 2                     # 4000 bytes live
        b = a + 1                     # 8000 bytes live
        del a, b                      # freed
        c = x * 3                     # 4000 bytes live again
    assert mem.peak == 8000
    assert mem.live == 4000
    del c


def test_peak_memory_grows_quadratically_for_attention():
    def attn(n):
        q = torch.randn(n, 8)
        with torch.no_grad(), PeakMemory() as mem:
            torch.softmax(q @ q.T, dim=-1)
        return mem.peak

    assert attn(200) / attn(100) > 3.5


def test_peak_memory_matches_the_torch_profilers_allocation_records():
    """What the tracker adds up is what the CPU allocator really hands out: the running peak of
    torch.profiler's per-op allocations and frees (profile_memory=True) over one full-token forward."""
    import numpy as np
    from torch.profiler import ProfilerActivity, profile

    from papers.mmp.models import FullTokenTransformer

    pathways = [np.arange(i, i + 5) for i in range(6)]
    model = FullTokenTransformer(8, pathways, dim=8, snn_dropout=0.25, dropout=0.1, n_out=1).eval()
    batch = {"bags": [torch.randn(300, 8)], "genes": torch.randn(1, 11)}
    with torch.no_grad():
        with PeakMemory() as mem:
            model(batch)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            model(batch)
    live = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += event.self_cpu_memory_usage
        peak = max(peak, live)
    assert mem.peak == peak and peak > 300 ** 2 * 4       # at least the 300 x 300 attention map


def test_measure_repeats_cheap_calls_until_min_time():
    from papers.mmp.measure import measure

    calls = []
    best, _ = measure(lambda: calls.append(1), 2, memory=False, min_time=0.05)
    assert len(calls) > 100 and best < 0.05 / 100                     # microsecond calls: many repeats
    calls.clear()
    measure(lambda: calls.append(1), 3, memory=False)
    assert len(calls) == 4                                            # warm-up + exactly `repeats`


def test_loglog_slope_recovers_a_power_law():
    import numpy as np

    from papers.mmp.measure import loglog_slope

    n = np.array([100, 300, 1000, 3000, 10000])
    assert loglog_slope(n, 3 * n ** 2.0) == pytest.approx(2.0)
    assert loglog_slope(n, 5 + 0 * n) == pytest.approx(0.0, abs=1e-12)
    assert loglog_slope(n, n + 1e3) < 0.8      # an offset bends the fit below 1


def test_cost_experiment_writes_slopes_per_seed_and_the_ot_speedup(tmp_path):
    from papers.mmp.experiments import cost_vs_patches
    from shared.config import load_config
    from shared.experiment import Run

    cfg = load_config(REPO / "papers" / "mmp" / "config.yaml", "smoke")
    metrics = cost_vs_patches(Run("mmp", "cost", cfg, tmp_path))
    for key in ("aggregation_time_slope", "fusion_time_slope", "mmp_time_slope", "full_token_time_slope",
                "end_to_end_time_ratio"):
        assert metrics[key]["unit"] == "seed" and metrics[key]["n"] == cfg.cost.seeds
    assert metrics["end_to_end_at_n"] == cfg.cost_shapes.at_n
    # memory depends on shapes only: a plain number; the full-token model's grows faster than linear
    assert isinstance(metrics["full_token_memory_slope"], float) and metrics["full_token_memory_slope"] > 1.3
    assert metrics["fusion_memory_slope"] == pytest.approx(0.0, abs=1e-9)
    assert metrics["ot_speed"]["plan_max_rel_diff"] < 1e-6 and metrics["ot_speed"]["speedup"] > 0
    # the diagnostic upper-range slopes sit beside the claimed ones, and the fixed per-call cost is kept
    assert metrics["upper"]["aggregation_time_slope"]["n"] == cfg.cost.seeds and metrics["aggregation_fixed_s"] > 0
    assert "diagnostic slope (no claim)" in (tmp_path / "tables" / "cost.md").read_text()
    assert "log-log slope" in (tmp_path / "tables" / "cost.md").read_text()


def test_breast_cancer_gene_groups_see_only_the_training_fold(tmp_path, monkeypatch):
    from papers.mmp.experiments import breast_cancer as ex
    from shared.config import load_config
    from shared.experiment import Run

    seen = []
    real = ex.gene_groups

    def spy(genes, n_groups, seed):
        seen.append(len(genes))
        return real(genes, n_groups, seed)

    monkeypatch.setattr(ex, "gene_groups", spy)
    cfg = load_config(REPO / "papers" / "mmp" / "config.yaml", "smoke")
    ex.breast_cancer_check(Run("mmp", "breast_cancer", cfg, tmp_path))
    assert len(seen) == cfg.breast_cancer.n_folds and all(n < 198 for n in seen)


def test_shape_counts_equal_the_measured_flops_and_bytes(tmp_path, monkeypatch):
    """The FLOP and byte counts from shapes (cost_shapes.py) equal FlopCounterMode and the peak tracker
    at every measured N, and the claims' N is a measured point. The aggregation is counted on its torch
    reference, which a CPU run takes (the tests' TRITON_INTERPRET would send it to the interpreter)."""
    monkeypatch.setenv("KERNELS_FORCE_REFERENCE", "1")
    from papers.mmp.experiments.cost_shapes import cost_at_paper_dims
    from shared.config import load_config
    from shared.experiment import Run

    cfg = load_config(REPO / "papers" / "mmp" / "config.yaml", "smoke",
                      ["cost_shapes.measure_n=[100, 300, 1000, 3000]", "cost_shapes.project_n=[1000, 100000]"])
    metrics = cost_at_paper_dims(Run("mmp", "cost_shapes", cfg, tmp_path))
    assert metrics["check"]["max_rel_error"] == 0.0, metrics["check"]
    at = metrics["paper_n"]
    assert at["N"] == cfg.cost_shapes.at_n and at["memory_ratio"] > 1 and at["flop_ratio"] > 1
    # two fp32 T x T maps: the fitted N² coefficient is 8 bytes per token pair
    assert metrics["quadratic_fit_bytes"]["c_per_token_pair"] == pytest.approx(8.0, rel=0.05)
    proj = metrics["projected"]
    assert proj["from_config"] is True and proj["rows"]["quadratic_share"][-1] > 0.99
    assert proj["rows"]["fused_MB"][-1] < proj["rows"]["full_MB"][-1] / 100


def test_fused_attention_is_the_same_function_without_the_map():
    import numpy as np

    from papers.mmp.experiments.cost_shapes import full_token_bytes, peak_bytes
    from papers.mmp.models import FullTokenTransformer

    pathways = [np.arange(i, i + 5) for i in range(6)]
    explicit = FullTokenTransformer(8, pathways, dim=8, snn_dropout=0.25, dropout=0.1, n_out=1).eval()
    fused = FullTokenTransformer(8, pathways, dim=8, snn_dropout=0.25, dropout=0.1, n_out=1, fused_attention=True).eval()
    fused.load_state_dict(explicit.state_dict())
    bags = [torch.randn(300, 8), torch.randn(170, 8)]          # padded: the key mask matters
    batch = {"bags": bags, "genes": torch.randn(2, 11)}
    with torch.no_grad():
        assert torch.allclose(explicit(batch), fused(batch), atol=1e-5)
    one = {"bags": bags[:1], "genes": batch["genes"][:1]}
    snn = peak_bytes(lambda: explicit.pathway_tokens(one["genes"]))
    shape = dict(d=8, dim=8, n_pathways=6, pathway_bytes=snn)
    assert peak_bytes(lambda: explicit(one)) == full_token_bytes(300, **shape)
    assert peak_bytes(lambda: fused(one)) == full_token_bytes(300, fused=True, **shape)
    assert full_token_bytes(300, fused=True, **shape) < full_token_bytes(300, **shape) - 300 ** 2 * 4
