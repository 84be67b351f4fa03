"""The `fd` proxy's edit classifier as a LightningModule (`fd_net.train_edit_net` trains it).

    L = CE(EditNet(x), class)       Adam(lr)

Its own file so that importing `fd_net` does not import Lightning (the jobs that only read cached
nets stay light).
"""
from __future__ import annotations

import lightning as L
import torch
from torch import nn


class EditNetModule(L.LightningModule):
    """Cross-entropy of the edit classes with Adam; the loss of every `log_every`-th step is logged."""

    def __init__(self, net: nn.Module, lr: float, log_every: int):
        super().__init__()
        self.net, self.lr, self.log_every = net, lr, log_every

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        if (self.global_step + 1) % self.log_every == 0:   # the steps Lightning flushes (log_every_n_steps); `log` costs ~1 ms a call
            self.log("loss", loss.detach(), on_step=True, on_epoch=False)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.net.parameters(), lr=self.lr, foreach=True)
