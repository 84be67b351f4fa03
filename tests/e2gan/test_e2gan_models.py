"""The PatchGAN's receptive field, measured from the module by the gradient of one output logit."""
import copy
import re

import pytest
import torch
from torch import nn

from papers.e2gan.models import PatchDiscriminator


def measured_receptive_field(D: PatchDiscriminator, size: int = 160) -> tuple[int, int]:
    """Rows and columns of the input that one central logit depends on.

    Instance norm mixes every pixel through its statistics, so it is replaced by the identity; the
    weights are made positive so no gradient cancels inside the patch."""
    D = copy.deepcopy(D).double()
    D.net = nn.Sequential(*[nn.Identity() if isinstance(m, nn.InstanceNorm2d) else m for m in D.net])
    with torch.no_grad():
        for p in D.parameters():
            p.copy_(p.abs() + 0.01)
    x = torch.rand(1, 3, size, size, dtype=torch.double, requires_grad=True)
    y = torch.rand(1, 3, size, size, dtype=torch.double)
    out = D(x, y)
    h, w = out.shape[-2:]
    out[0, 0, h // 2, w // 2].backward()
    hit = x.grad[0].abs().sum(0) > 0
    rows, cols = hit.any(1).nonzero().flatten(), hit.any(0).nonzero().flatten()
    assert rows.min() > 0 and rows.max() < size - 1, "patch touches the border: use a larger input"
    assert bool(hit[rows.min():rows.max() + 1, cols.min():cols.max() + 1].all())
    return int(rows.max() - rows.min() + 1), int(cols.max() - cols.min() + 1)


def test_receptive_field_is_34_px_as_the_docstring_says():
    D = PatchDiscriminator(ndf=4, n_layers=3)  # the tiny and full profiles' d_layers
    assert measured_receptive_field(D) == (34, 34)
    assert D.receptive_field() == 34
    doc = " ".join(PatchDiscriminator.__doc__.split())
    assert re.search(r"\b34 × 34 px\b", doc)


@pytest.mark.parametrize("n_layers", [1, 2, 3, 4])
def test_receptive_field_formula_matches_the_gradient(n_layers):
    D = PatchDiscriminator(ndf=4, n_layers=n_layers)
    assert measured_receptive_field(D) == (D.receptive_field(),) * 2
