"""E²GAN experiments (`python -m papers.e2gan <experiment> --profile P --out DIR`), one file per product.

Dependencies (see rules.smk): base_clustered → rank_search → lr_grid → concept_table / base_ablation /
data_size_curve; base_variants → base_ablation; scratch_s0 … scratch_s2 (one job per seed) →
concept_table (the PSNR target and scratch rows); lr_grid → finetune_s0 … finetune_s2 (the fine-tuning
arms, one job per seed, beside the scratch jobs) → concept_table.
"""
from functools import partial

from .arms import arm_ranks, count_lora_params, finetune, random_ranks, relative_change
from .base_ablation import base_ablation
from .bases import base_clustered, base_concepts, base_variants, load_base
from .concept_table import concept_table
from .data_size_curve import data_size_curve
from .feature_net import fd_net
from .finetune_runs import N_FT_JOBS, finetune_seed
from .latency_table import forward_seconds, latency_table, synchronize
from .lr_grid import lr_grid, lr_grid_scratch, tune_lr
from .rank_search import rank_search, search_ranks
from .scratch import N_SCRATCH_JOBS, scratch_seed
from .setup import Setup, concept_pool, geomean, make_teacher, with_curves

EXPERIMENTS = {
    "fd_net": fd_net,
    "base_clustered": with_curves(base_clustered),
    "base_variants": with_curves(base_variants),
    **{f"scratch_s{i}": with_curves(partial(scratch_seed, i)) for i in range(N_SCRATCH_JOBS)},
    **{f"finetune_s{i}": with_curves(partial(finetune_seed, i)) for i in range(N_FT_JOBS)},
    "rank_search": with_curves(rank_search),
    "lr_grid": with_curves(lr_grid),
    "lr_grid_scratch": with_curves(lr_grid_scratch),
    "concept_table": concept_table,
    "base_ablation": with_curves(base_ablation),
    "data_size_curve": with_curves(data_size_curve),
    "latency_table": latency_table,
}

__all__ = ["EXPERIMENTS", "Setup", "arm_ranks", "base_concepts", "concept_pool", "count_lora_params", "finetune",
           "forward_seconds", "geomean", "latency_table", "load_base", "make_teacher", "random_ranks",
           "relative_change", "search_ranks", "synchronize", "tune_lr"]
