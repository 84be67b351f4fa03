"""Training curves: the loss curve of every fit (read from its Lightning CSV log) gathered into one
CSV per experiment, `<out>/logs/<experiment>.csv`, with columns fit, epoch, step and loss (the batch
loss of every step; `shared.curves`); and their figure (the epoch means). A fit is named
`<arm or variant>/fold<k>`."""
from __future__ import annotations

import pandas as pd

from shared import curves as shared_curves
from shared.curves import load_curves  # noqa: F401  (the notebook's reader)

COLUMNS = ["epoch", "step", "loss"]


class Curves(shared_curves.Curves):
    """The curves of one experiment's fits, written once at its end."""

    def __init__(self):
        super().__init__(COLUMNS)

    def add(self, fit: str, state: dict) -> None:
        """Add the curve of the fit named `fit` (`train_survival`'s returned state)."""
        super().add(fit, state["curve"])


def curves_figure(curves: pd.DataFrame):
    """One panel per experiment: the epoch-mean training loss against the epoch, one line per group of
    fits (an arm, a loss or a variant: the part of `<group>/fold<k>` before the slash), its mean over the
    folds with the folds' range shaded."""
    epochs = (curves.groupby(["experiment", "fit", "epoch"], as_index=False).loss.mean()
              .assign(epoch=lambda d: d.epoch + 1))
    return shared_curves.curves_figure(epochs, "epoch", "loss", ylabel="training loss (epoch mean)")
