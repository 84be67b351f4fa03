"""The experiments (`python -m papers.everest <experiment>`), one file per product, one Snakemake rule each.

pretraining      pretrain_<arm>: VideoMAE tube masking / EVEREST / ascending, and EVEREST on candidate
                 clips with information-intensive or uniform frame pairs; knob_pretrain_<arm>: the
                 VideoMAE and EVEREST pre-trainings at the other points of the static-context knob;
                 budget_pretrain_<arm>: VideoMAE and EVEREST pre-trained for the budget curve's shorter lengths
finetuning       finetune_<arm>: the 2×2 of pre-training {VideoMAE, EVEREST} × fine-tuning {all tokens,
                 top 60%}, plus random-60%, ascending, scratch and frame-selection arms, each at the lr its
                 first seed chose from one grid on validation clips; knob_finetune_<arm>: the 2×2's EVEREST
                 column and VideoMAE along the knob; budget_finetune_<arm>: the budget curve's fine-tunes
label_leak       a linear probe on the keep mask alone: the class (chance) and the direction (control)
accuracy         the 2×2 table, the gaps the claims test, the control, frame-selection, lr-grid and
                 budget-curve tables
camera_pan       VideoMAE and EVEREST pre-trained, fine-tuned and tested with the camera panning, beside
                 the main world (pan off)
static_knob      EVEREST − VideoMAE, the pruning cost and the two readers along the static-context knob
efficiency       tiny model: tokens, FLOPs, saved activations (explicit and fused attention), step times
                 (and efficiency_vit_b: the paper's ViT-B at 16×224²)
token_overlay    selected tokens overlaid on clips, and the moving-digit recall of the selection
common           arms, data, initial encoders, checkpoint folders, knob points, formatting
"""
from functools import partial

from shared.config import Config, ConfigError
from shared.experiment import per_seed

from .accuracy import accuracy
from .camera_pan import camera_pan
from .common import (BUDGET_ARMS, FINETUNE_ARMS, KNOB_FINETUNE_ARMS, KNOB_PRETRAIN_ARMS, PRETRAIN_ARMS, at_point, dataset,
                     initial_autoencoder, knob_points, mean_ci, mean_std, pretrain_dir, schedule, seeds_of,
                     snapshot_name)
from .efficiency import efficiency, efficiency_vit_b
from .finetuning import budget_finetune, finetune_arm, knob_finetune, run_finetune
from .label_leak import label_leak
from .pretraining import budget_pretrain, knob_pretrain, pair_has_motion, run_pretrain
from .static_knob import static_knob
from .token_overlay import token_overlay

EXPERIMENTS = {
    **{f"pretrain_{arm}": partial(run_pretrain, arm=arm) for arm in PRETRAIN_ARMS},
    **{f"finetune_{arm}": partial(run_finetune, arm=arm) for arm in FINETUNE_ARMS},
    **{f"knob_pretrain_{arm}": partial(knob_pretrain, arm=arm) for arm in KNOB_PRETRAIN_ARMS},
    **{f"knob_finetune_{arm}": partial(knob_finetune, arm=arm) for arm in KNOB_FINETUNE_ARMS},
    **{f"budget_pretrain_{arm}": partial(budget_pretrain, arm=arm) for arm in BUDGET_ARMS},
    **{f"budget_finetune_{arm}": partial(budget_finetune, arm=arm) for arm in BUDGET_ARMS},
}
SEEDED = tuple(EXPERIMENTS)   # the trainings above, one record per seed


def seed_job(experiment, name: str):
    """`<name>_seed --seed S`: `name` for seed S alone (the full profile's SLURM job per seed), its
    checkpoints and seed record where `name` over all seeds finds them and merges (common.seed_record)."""
    @per_seed
    def one_seed(run):
        seed = int(run.cfg["seed"])
        if seed not in seeds_of(run.cfg):
            raise ConfigError(f"{name}_seed --seed {seed}: not one of seeds={seeds_of(run.cfg)}")
        if "finetune" in name and run.cfg.finetune.lr_grid:
            raise ConfigError(f"{name}_seed: the lr grid is chosen on the first seed, so seed jobs need "
                              f"finetune.lr_grid: [] (every seed at finetune.lr)")
        run.experiment, run.seed_job = name, True
        run.cfg = Config.wrap({**run.cfg.to_dict(), "seeds": [seed]})
        return experiment(run)
    return one_seed


EXPERIMENTS = {
    **EXPERIMENTS,
    **{f"{name}_seed": seed_job(EXPERIMENTS[name], name) for name in SEEDED
       if name.startswith(("pretrain_", "finetune_", "budget_pretrain_", "budget_finetune_"))},
    "label_leak": label_leak,
    "accuracy": accuracy,
    "static_knob": static_knob,
    "camera_pan": camera_pan,
    "efficiency": efficiency,
    "efficiency_vit_b": efficiency_vit_b,
    "token_overlay": token_overlay,
}

__all__ = ["EXPERIMENTS", "at_point", "camera_pan", "budget_finetune", "budget_pretrain", "dataset", "finetune_arm", "initial_autoencoder", "knob_finetune", "knob_points",
           "knob_pretrain", "label_leak", "mean_ci", "mean_std", "pair_has_motion", "pretrain_dir", "run_finetune",
           "run_pretrain", "schedule", "snapshot_name", "static_knob"]
