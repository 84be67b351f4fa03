"""shared.seed_stack: K members trained at once equal K separate runs, member by member."""
import copy

import pytest
import torch
from torch import nn

from shared.seed_stack import SeedStack

K, STEPS = 3, 25


def mlp(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))


def member_data(k: int):
    g = torch.Generator().manual_seed(100 + k)
    x = torch.randn(STEPS, 8, 6, generator=g)
    return x, torch.randn(STEPS, 8, 2, generator=g) + x[..., :2] ** 2


def train_alone(model, x, y):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-2)
    for t in range(STEPS):
        loss = ((model(x[t]) - y[t]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def test_stacked_training_equals_separate_runs_member_by_member():
    inits = [mlp(s) for s in range(K)]
    data = [member_data(k) for k in range(K)]
    alone = [train_alone(copy.deepcopy(m), *d) for m, d in zip(inits, data)]

    stack = SeedStack(inits)
    x = torch.stack([d[0] for d in data], 1)   # (STEPS, K, 8, 6)
    y = torch.stack([d[1] for d in data], 1)
    opt = torch.optim.AdamW(stack.parameters(), lr=1e-2, weight_decay=1e-2)
    for t in range(STEPS):
        out = stack(x[t])
        loss = sum(((out[k] - y[t, k]) ** 2).mean() for k in range(K))   # the sum of the members' own losses
        opt.zero_grad()
        loss.backward()
        opt.step()
    for k in range(K):
        got, want = stack.member(k).state_dict(), alone[k].state_dict()
        for name in want:
            assert torch.allclose(got[name], want[name], atol=1e-6, rtol=1e-5), (k, name)
    # and the members did move apart from their start and from each other
    assert not torch.allclose(stack.member(0)[0].weight, inits[0][0].weight)
    assert not torch.allclose(stack.member(0)[0].weight, stack.member(1)[0].weight)


def test_shared_input_and_member_export():
    inits = [mlp(s) for s in range(K)]
    stack = SeedStack(inits)
    x = torch.randn(5, 6)
    out = stack(x, in_dims=(None,))
    assert out.shape == (K, 5, 2)
    for k in range(K):
        assert torch.allclose(out[k], inits[k](x), atol=1e-6)
        assert torch.allclose(stack.member(k)(x), inits[k](x), atol=1e-6)


def test_refuses_what_it_cannot_batch():
    with pytest.raises(ValueError, match="BatchNorm"):
        SeedStack([nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)) for _ in range(2)])
    with pytest.raises(ValueError, match="one architecture"):
        SeedStack([nn.Linear(3, 3), nn.Linear(3, 4)])
    with pytest.raises(ValueError, match="member axis"):
        SeedStack([nn.Linear(3, 3) for _ in range(2)])(torch.randn(3, 5, 3))
