"""FreeBind's projector, the mixture of projectors (MoP) and the mixing operator.

Projector [code]: f(x) = l2norm(BN(W2 · ReLU(BN(W1 x + b1)) + b2)), Xavier-uniform weights,
one projector shared by every modality of a space.

`ProjectorBank` holds K projectors as stacked tensors and trains them in one pass: member k sees
its own batch, has its own BatchNorm statistics and (Adam being elementwise) its own optimiser
state, so training a bank is the same computation as training K `Projector`s one after another,
only with K times fewer Python steps. `bank.member(k)` exports member k as a plain `Projector`.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn


def l2norm(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x, dim=-1)


def mix(x: torch.Tensor, y: torch.Tensor, lam: float) -> torch.Tensor:
    """`X^{1-λ} Y^{λ} := l2norm((1-λ)·x + λ·y)`; λ weights the expert-derived term `y`."""
    return l2norm((1.0 - lam) * x + lam * y)


class Projector(nn.Module):
    """Linear → BN → ReLU → Linear → BN → L2-normalise."""

    def __init__(self, d_in: int, d_out: int, hidden: int = 2048):
        super().__init__()
        self.d_in, self.d_out, self.hidden = d_in, d_out, hidden
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Linear(hidden, d_out), nn.BatchNorm1d(d_out))
        for layer in (self.net[0], self.net[3]):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return l2norm(self.net(x))


class MoP(nn.Module):
    """Mixture of projectors: P(x) = l2norm(mean_k f_k(x))."""

    def __init__(self, projectors: Iterable[nn.Module]):
        super().__init__()
        self.members = nn.ModuleList(projectors)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return l2norm(torch.stack([f(x) for f in self.members]).mean(0))


class ProjectorBank(nn.Module):
    """K independent projectors with stacked weights; input (K, B, d_in) -> (K, B, d_out)."""

    def __init__(self, k: int, d_in: int, d_out: int, hidden: int = 2048):
        super().__init__()
        self.k, self.d_in, self.d_out, self.hidden = k, d_in, d_out, hidden
        inits = [Projector(d_in, d_out, hidden) for _ in range(k)]  # same init as K Projectors
        self.w1 = nn.Parameter(torch.stack([p.net[0].weight.detach().t() for p in inits]))
        self.b1 = nn.Parameter(torch.zeros(k, 1, hidden))
        self.w2 = nn.Parameter(torch.stack([p.net[3].weight.detach().t() for p in inits]))
        self.b2 = nn.Parameter(torch.zeros(k, 1, d_out))
        self.bn1 = nn.BatchNorm1d(k * hidden)
        self.bn2 = nn.BatchNorm1d(k * d_out)

    def _bn(self, bn: nn.BatchNorm1d, h: torch.Tensor) -> torch.Tensor:
        k, b, d = h.shape  # per-member, per-feature normalisation == K separate BatchNorm1d(d)
        return bn(h.permute(1, 0, 2).reshape(b, k * d)).reshape(b, k, d).permute(1, 0, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(self.k, -1, -1)
        h = F.relu(self._bn(self.bn1, torch.baddbmm(self.b1, x, self.w1)))
        return l2norm(self._bn(self.bn2, torch.baddbmm(self.b2, h, self.w2)))

    def member(self, i: int) -> Projector:
        p = Projector(self.d_in, self.d_out, self.hidden)
        sl1, sl2 = slice(i * self.hidden, (i + 1) * self.hidden), slice(i * self.d_out, (i + 1) * self.d_out)
        with torch.no_grad():
            p.net[0].weight.copy_(self.w1[i].t())
            p.net[0].bias.copy_(self.b1[i, 0])
            p.net[3].weight.copy_(self.w2[i].t())
            p.net[3].bias.copy_(self.b2[i, 0])
            for bn, src, sl in ((p.net[1], self.bn1, sl1), (p.net[4], self.bn2, sl2)):
                bn.weight.copy_(src.weight[sl])
                bn.bias.copy_(src.bias[sl])
                bn.running_mean.copy_(src.running_mean[sl])
                bn.running_var.copy_(src.running_var[sl])
                bn.num_batches_tracked.copy_(src.num_batches_tracked)
        return p.eval()

    def members(self, which: Sequence[int] | None = None) -> list[Projector]:
        return [self.member(i) for i in (range(self.k) if which is None else which)]


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
