"""Training and prediction of the survival models: `train_survival` fits one model through
`shared.training` (the LightningModule of `survival_module`), `predict_risk` scores patients.

MMP runs many small fits (folds × arms), so a fit keeps Lightning's per-fit costs low: no progress
bar, no model summary, and no checkpoint files unless it is given a folder (the main training, which
keeps `last.ckpt` at epoch ends and every `trainer.every_n_train_steps` steps and resumes from it
after a kill). Every fit logs its batch loss at every step to CSV and returns that curve; the
experiments gather the curves into one CSV per experiment (`curves`).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from .batches import PatientBatches, make_batch
from .losses import nll_bins, nll_risk, to_bins


def train_survival(model, data: dict, time, event, *, loss: str, epochs: int, batch_size: int, lr: float,
                   weight_decay: float, seed: int, n_bins: int = 4, alpha: float = 0.5,
                   out_dir: str | Path | None = None, options: dict | None = None,
                   cache_config: dict | None = None) -> dict:
    """Train `model` on all patients of `data` with the Cox (batch) or NLL loss.

    out_dir: the folder of a checkpointed fit (`checkpoints/last.ckpt`, resumed when its key, the
    hash of `cache_config` and `seed`, matches; `logs/metrics.csv`); None: a throw-away folder and no
    checkpoint files. options: `shared.training.trainer_options` of the config (one process only:
    MMP's fits last seconds on a CPU).
    Returns what predicting needs (the loss, the NLL bin edges) and the loss curve (rows of epoch,
    step, loss: the batch loss of every step, so a resumed fit logs what an uninterrupted one does).
    """
    from torch.utils.data import DataLoader

    from shared.training import fit, fit_folder, make_trainer

    from .survival_module import LoopOrderSampler, SurvivalModule

    options = dict(options or {})
    if options.get("devices", 1) != 1 or options.get("num_nodes", 1) != 1:
        raise ValueError("MMP trains each fit in one process (trainer.devices: 1, trainer.num_nodes: 1): "
                         "its fits last seconds, and the experiments run every fold and arm in one script")
    time, event = np.asarray(time, dtype=float), np.asarray(event, dtype=bool)
    n = len(time)
    edges = nll_bins(time, event, n_bins) if loss == "nll" else None
    bins = to_bins(time, edges) if loss == "nll" else None
    loader = DataLoader(range(n), batch_size=batch_size, sampler=LoopOrderSampler(n, seed),
                        collate_fn=PatientBatches(data, time, event, bins))
    module = SurvivalModule(model, loss=loss, lr=lr, weight_decay=weight_decay, alpha=alpha,
                            steps_per_epoch=math.ceil(n / batch_size), epochs=epochs)
    with fit_folder(out_dir, options, prefix="mmp_fit_") as root:
        trainer = make_trainer(root, seed=seed, max_epochs=epochs, progress=False, cache_config=cache_config,
                               log_every_n_steps=1, checkpoint=out_dir is not None, **options)
        fit(trainer, module, loader)
        curve = read_curve(root / "logs" / "metrics.csv")
    model.eval()
    return {"loss": loss, "edges": edges, "curve": curve}


def read_curve(path: Path) -> list[dict]:
    """The (epoch, step, loss) rows of a fit's CSV log."""
    import pandas as pd

    df = pd.read_csv(path)
    return [{"epoch": int(e), "step": int(s), "loss": float(v)} for e, s, v in zip(df.epoch, df.step, df.loss)]


@torch.no_grad()
def predict_risk(model, data: dict, idx, state: dict, chunk: int = 64) -> np.ndarray:
    """Risk scores (higher = earlier event): η for Cox, -Σ_k S_k for NLL."""
    model.eval()
    idx = np.asarray(idx)
    out = []
    for start in range(0, len(idx), chunk):
        o = model(make_batch(data, idx[start:start + chunk]))
        out.append(o[:, 0] if state["loss"] == "cox" else nll_risk(o))
    return torch.cat(out).double().numpy()
