"""LoRA on the crucial layers: identity at init, exact merge, gradients only in adapters, storage."""
import copy

import pytest
import torch

from papers.e2gan.lora import LoRAConvTranspose2d, adapter_state, add_lora, merge_lora, state_bytes
from papers.e2gan.models import CRUCIAL_GROUPS, E2GANGenerator

RANKS = {"down": 2, "ds": 4, "tb": 2, "us": 3, "up": 8}


def model_and_inputs():
    torch.manual_seed(0)
    G = E2GANGenerator(ngf=4, text_dim=8, heads=2)
    x = torch.rand(2, 3, 16, 16) * 2 - 1
    text, mask = torch.randn(2, 3, 8), torch.tensor([[True, True, False], [True, True, True]])
    return G, x, text, mask


def randomise_b(G):
    with torch.no_grad():
        for n, p in G.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.2)


def test_lora_starts_as_identity():
    G, x, t, m = model_and_inputs()
    before = G(x, t, m)
    add_lora(G, RANKS)
    assert all((p == 0).all() for n, p in G.named_parameters() if "lora_B" in n)
    torch.testing.assert_close(G(x, t, m), before, rtol=0, atol=0)


@pytest.mark.parametrize("groups", [CRUCIAL_GROUPS, (*CRUCIAL_GROUPS, "rb")])
def test_merged_adapter_matches_unmerged(groups):
    G, x, t, m = model_and_inputs()
    add_lora(G, {g: RANKS.get(g, 2) for g in groups})
    randomise_b(G)
    unmerged = G(x, t, m)
    merged = merge_lora(copy.deepcopy(G))
    assert not any("lora_" in n for n, _ in merged.named_parameters())
    assert isinstance(merged.us, torch.nn.ConvTranspose2d) and type(merged.down.stem) is torch.nn.Conv2d
    torch.testing.assert_close(merged(x, t, m), unmerged, rtol=1e-5, atol=1e-5)
    assert (merged(x, t, m) - E2GANGenerator(ngf=4, text_dim=8, heads=2)(x, t, m)).abs().max() > 0


def test_conv_transpose_lora_shapes_follow_the_brief():
    base = torch.nn.ConvTranspose2d(6, 5, 3, stride=2, padding=1, output_padding=1)
    layer = LoRAConvTranspose2d(base, r=2, alpha=2)
    assert isinstance(layer.lora_A, torch.nn.ConvTranspose2d) and layer.lora_A.stride == (2, 2)
    assert layer.lora_B.kernel_size == (1, 1)
    x = torch.randn(1, 6, 4, 4)
    torch.nn.init.normal_(layer.lora_B.weight)
    out = layer(x)
    torch.testing.assert_close(layer.merged()(x), out, rtol=1e-5, atol=1e-5)


def test_only_adapter_parameters_receive_gradients():
    G, x, t, m = model_and_inputs()
    add_lora(G, RANKS)
    randomise_b(G)
    G(x, t, m).square().mean().backward()
    for name, p in G.named_parameters():
        if "lora_" in name:
            assert p.requires_grad and p.grad is not None and p.grad.abs().sum() > 0, name
        else:
            assert not p.requires_grad and p.grad is None, name
    # ResNet blocks are frozen and carry no adapter on the crucial-layer arm
    assert not any("lora_" in n for n, _ in G.named_parameters() if n.startswith(("rb1", "rb2", "rb3")))


def test_adapter_is_stored_in_fp16_and_small():
    G, *_ = model_and_inputs()
    full = sum(t.numel() * t.element_size() for t in G.state_dict().values())
    add_lora(G, {g: 1 for g in CRUCIAL_GROUPS})
    state = adapter_state(G)
    assert all(t.dtype == torch.float16 for t in state.values())
    assert state_bytes(state) == 2 * sum(t.numel() for t in state.values())
    assert state_bytes(state) < full / 4


def test_ranks_are_cut_to_each_layers_useful_rank():
    """min(C_out, C_in·k²) (a linear layer: min(in, out)); a group rank above it adds nothing."""
    from papers.e2gan.lora import layer_ranks, lora_param_count, useful_rank
    from papers.e2gan.ranks import rank_params

    G = E2GANGenerator(ngf=8, text_dim=64, heads=4)
    assert useful_rank(G.up.head) == 3 and useful_rank(G.up.up2) == 8 and useful_rank(G.up.up1) == 16
    assert useful_rank(G.down.stem) == 8 and useful_rank(G.tb.ff1) == 32 and useful_rank(G.ds) == 32
    add_lora(G, {"up": 16})
    assert G.up.head.lora_A["default"].out_channels == 3 and G.up.up2.r == 8 and G.up.up1.r == 16
    layers = layer_ranks(E2GANGenerator(ngf=8, text_dim=64, heads=4), {g: 1 for g in CRUCIAL_GROUPS})
    for ranks in ({"up": 16}, {"up": 64}, {"down": 2, "ds": 40, "tb": 4, "us": 2, "up": 8}):
        assert rank_params(ranks, layers) == lora_param_count(add_lora(E2GANGenerator(8, 64, 4), ranks))
    assert rank_params({"up": 64}, layers) == rank_params({"up": 16}, layers)


@pytest.mark.parametrize("alpha", [None, 2.0])
def test_alpha_fixed_or_equal_to_the_rank(alpha):
    """Fixed α: the scale α/r falls as r grows; α = r (None): scale 1 at every rank."""
    for r in (2, 8):
        G = add_lora(E2GANGenerator(ngf=8, text_dim=64, heads=4), {"ds": r, "us": r}, alpha)
        want = 1.0 if alpha is None else alpha / r
        assert G.ds.scaling["default"] == pytest.approx(want) and G.us.scaling == pytest.approx(want)


def test_counted_step_flops_match_training():
    """`count_step_flops` (the rank search's budget) counts what a training step counts, with or without LoRA."""
    from papers.e2gan.gan_module import count_step_flops
    from papers.e2gan.models import PatchDiscriminator
    from papers.e2gan.train import Pairs, train_gan

    torch.manual_seed(0)
    x = torch.rand(4, 3, 16, 16) * 2 - 1
    pairs = Pairs(x, -x, torch.randn(1, 3, 8), torch.ones(1, 3, dtype=torch.bool), torch.zeros(4, dtype=torch.long))
    for ranks in (None, {"up": 4, "tb": 2}):
        G, D = E2GANGenerator(4, 8, 2), PatchDiscriminator(8)
        if ranks:
            add_lora(G, ranks)
        counted = count_step_flops(G, D, pairs.batch(torch.arange(4)))
        assert counted == train_gan(G, D, pairs, 1, seed=0, batch_size=4)["flops_per_step"] > 0
