"""FreeBind experiments: `fn(run) -> metrics` (see shared.experiment); the registry of the paper's jobs.

bonds_s0..s7  one seed each (`seeds`): train the spaces and the 8 bond MoPs (with the two shuffled-pairs
              arms), score every table row, the references without training, each bond and late fusion
              at the λ best on validation, and the λ curves (run side by side by Snakemake; spaces and
              bonds are cached under checkpoints/, keyed by config hash and seed)
main_table    paper Tables 3-4 analogue with the late-fusion references (main_table.py)
lambda_tradeoff  the customised-inference curves (lambda_tradeoff.py)
fragile_p0..p2  one visibility each, every loudness reliability, over `fragile.seeds` (knob_sweeps.py)
fragile       the fragile claim along visibility × reliability (knob_sweeps.py)
cost          parameters, training FLOPs and time of the bonds vs retraining the unified space (cost.py)
"""
from __future__ import annotations

from functools import partial

from .cost import cost
from .knob_sweeps import N_FRAGILE_JOBS, fragile, fragile_point
from .lambda_tradeoff import lambda_tradeoff
from .main_table import main_table
from .summaries import N_SEED_JOBS


def bonds_seed(index: int, run) -> dict:
    seeds = list(run.cfg.seeds)
    if index >= len(seeds):
        return {"skipped": True, "reason": f"profile {run.profile} has {len(seeds)} seed(s)"}
    if run.profile == "full":  # real embeddings + released projectors: one evaluation, no seeds
        if index:
            return {"skipped": True, "reason": "the full profile evaluates the released projectors once"}
        from .full import evaluate_full

        return {"seed": run.seed, **evaluate_full(run.cfg)}
    from .pipeline import run_seed

    seed = int(seeds[index])
    cfg = run.cfg
    if index != 0:
        cfg = type(cfg).wrap({**cfg, "eval": {**cfg.eval, "save_explore": False}})
    return run_seed(cfg, seed, run.checkpoint_dir())

EXPERIMENTS = {**{f"bonds_s{i}": partial(bonds_seed, i) for i in range(N_SEED_JOBS)},
               **{f"fragile_p{i}": partial(fragile_point, i) for i in range(N_FRAGILE_JOBS)},
               "main_table": main_table, "lambda_tradeoff": lambda_tradeoff, "fragile": fragile, "cost": cost}
