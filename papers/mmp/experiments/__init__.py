"""The MMP experiments, one module per product (each `fn(run) -> metrics`):

    cindex_arms        cindex_<arm>: one arm on the folds; cindex_mmp_trans also figures/interpretability
    oracle_ceilings    linear Cox on the synthetic cohort's true signals
    cindex_table       cindex: tables/cindex, tables/token_spread
    replication        tables/replication: the arms over cohorts
    trans_diagnostics  tables/trans_diagnostics, tables/trans_factorial
    trans_factorial_cohorts  tables/trans_factorial_cohorts: the factorial's effects over cohorts
    cost               figures/cost, tables/cost (with ot_speed: tables/ot_speed)
    cost_shapes        tables/cost_shapes, tables/cost_shapes_measured
    compression        tables/compression
    loss_ablation      tables/loss_ablation
    recovery           figures/recovery, tables/recovery (and the notebook's prototype_view)
    breast_cancer      tables/breast_cancer
    pi_share_knob      tables/pi_share_knob: the arms along π's share of the histology risk
    cohort_size_knob   tables/cohort_size_knob: the arms along the cohort's size

`arms` holds what they share: the cohort, its folds, a fold's inputs, an arm's model and fit;
`knob_sweep` what the two knobs share.
"""
from .arms import ARM_NAMES
from .breast_cancer import breast_cancer_check
from .cindex_arms import cindex_arm
from .cindex_table import cindex_table
from .cohort_size_knob import cohort_size_knob
from .compression import compression
from .cost import cost_vs_patches
from .cost_shapes import cost_at_paper_dims
from .loss_ablation import loss_ablation
from .oracle_ceilings import oracle_ceilings
from .pi_share_knob import pi_share_knob
from .recovery import prototype_recovery
from .replication import replication
from .trans_diagnostics import trans_diagnostics
from .trans_factorial_cohorts import trans_factorial_cohorts

EXPERIMENTS = {**{f"cindex_{arm}": cindex_arm(arm) for arm in ARM_NAMES}, "oracle_ceilings": oracle_ceilings,
               "cindex": cindex_table, "trans_diagnostics": trans_diagnostics, "cost": cost_vs_patches,
               "cost_shapes": cost_at_paper_dims, "replication": replication, "compression": compression,
               "loss_ablation": loss_ablation, "recovery": prototype_recovery, "breast_cancer": breast_cancer_check,
               "pi_share_knob": pi_share_knob, "cohort_size_knob": cohort_size_knob,
               "trans_factorial_cohorts": trans_factorial_cohorts}
