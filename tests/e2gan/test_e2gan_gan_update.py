"""The GAN update of `train_gan` (`GanModule`): each iteration is one LSGAN D step on the detached fake,
then one G step against the updated D plus λ·L1, on the minibatch `RandomBatchSampler` draws; and the
logged losses are those of the iteration their row names. Checked against the equations written out by
hand (brief: L_D = ½[(D(x, y) − 1)² + D(x, G(x, c))²], L_G = (D(x, G(x, c)) − 1)² + λ‖y − G(x, c)‖₁)."""
import copy

import pytest
import torch

from papers.e2gan.models import E2GANGenerator, PatchDiscriminator
from papers.e2gan.train import Pairs, train_gan
from shared.sampling import RandomBatchSampler

LR, LR_D, BETA1, LAMBDA, BATCH, SEED, STEPS = 2e-3, 1e-3, 0.5, 100.0, 4, 7, 4


def toy_pairs(n=8, res=16):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 3, res, res, generator=g) * 2 - 1
    y = torch.flip(x, dims=[1]) * 0.5   # a fixed "edit": channels reversed, contrast halved
    return Pairs(x, y, torch.randn(1, 2, 8, generator=g), torch.ones(1, 2, dtype=torch.bool),
                 torch.zeros(n, dtype=torch.long))


def by_hand(G, D, pairs):
    """The update written out: per iteration, L_D on the detached fake and a D step; then L_G through the
    stepped D and a G step. Returns the per-iteration (loss_g, loss_d)."""
    opt_g = torch.optim.Adam(G.parameters(), lr=LR, betas=(BETA1, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=LR_D, betas=(BETA1, 0.999))
    losses = []
    for idx in RandomBatchSampler(len(pairs), BATCH, STEPS, SEED, num_replicas=1, rank=0):
        x, y, t, m = pairs.batch(torch.tensor(idx))
        fake = G(x, t, m)
        real_term = (D(x, y) - 1).pow(2).mean()        # real pairs pushed to 1
        fake_term = D(x, fake.detach()).pow(2).mean()  # fakes pushed to 0, no gradient into G
        loss_d = 0.5 * (real_term + fake_term)
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        loss_g = (D(x, fake) - 1).pow(2).mean() + LAMBDA * (fake - y).abs().mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        losses.append((float(loss_g), float(loss_d)))
    return losses


def test_each_iteration_is_the_lsgan_d_step_then_the_g_step_and_logs_its_own_losses():
    pairs = toy_pairs()
    torch.manual_seed(3)
    G, D = E2GANGenerator(4, 8, 2), PatchDiscriminator(8)
    G_ref, D_ref = copy.deepcopy(G), copy.deepcopy(D)
    hist = train_gan(G, D, pairs, STEPS, seed=SEED, lr=LR, lr_d=LR_D, beta1=BETA1, batch_size=BATCH, lambda_l1=LAMBDA)
    expected = by_hand(G_ref, D_ref, pairs)
    for name, module, ref in (("G", G, G_ref), ("D", D, D_ref)):
        for (key, a), b in zip(module.state_dict().items(), ref.state_dict().values()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=f"{name}.{key}")
    # a 4-step fit logs every 2nd step: the row at step k holds iteration k's losses
    assert [r["step"] for r in hist["losses"]] == [2, 4]
    for row, (loss_g, loss_d) in zip(hist["losses"], expected[1::2]):
        assert row["loss_g"] == pytest.approx(loss_g, rel=1e-5)
        assert row["loss_d"] == pytest.approx(loss_d, rel=1e-5)
