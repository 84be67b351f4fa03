"""The solver's switches: plain DDIM, LDPS + projection, prompt gradients, determinism.

The update rules themselves (DC step, projection, gluing, C* in the latent step, Tweedie) are checked
in closed form on a linear prior in test_p2l_solve_linear.py."""
import pytest
import torch

from papers.p2l import build_operator, solve
from papers.p2l.data import WORDS
from papers.p2l.models import (LatentDiffusion, build_scheduler, build_text_encoder, build_tokenizer, build_unet,
                               build_vae)
from papers.p2l.solver import prompt_loss

CAPTIONS = ["red circle dark", "blue cross light"]


def tiny_ldm(seed=0):
    torch.manual_seed(seed)
    tok = build_tokenizer(WORDS, 3)
    return LatentDiffusion(vae=build_vae([8, 16, 16], 4, 16), unet=build_unet([16, 32], 4, 4, 16, head_dim=4),
                           text_encoder=build_text_encoder(len(tok), 16, 1, 3), tokenizer=tok,
                           scheduler=build_scheduler(), scale=0.7).freeze()


@pytest.fixture(scope="module")
def ldm():
    return tiny_ldm()


@pytest.fixture(scope="module")
def problem():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 16, 16, generator=g) * 2 - 1
    op = build_operator("sr", 16, factor=4)
    return op, op.measure(x, 0)


def test_zero_steps_no_projection_is_plain_ddim(ldm, problem):
    op, y = problem
    steps, seed = 4, 5
    sol = solve("ldps", y, op, ldm, steps=steps, seed=seed, rho=0.0)
    # reference: diffusers' DDIMScheduler (η = 0) with the null prompt, from the same initial noise
    sched = build_scheduler()
    sched.set_timesteps(steps)
    z = torch.randn(2, 4, 4, 4, generator=torch.Generator().manual_seed(seed))
    C = ldm.null_prompt(2)
    with torch.no_grad():
        for t in sched.timesteps:
            out = sched.step(ldm.eps(z, t, C), t, z, eta=0.0)
            z = out.prev_sample
        x_ref = ldm.decode(out.pred_original_sample).clamp(-1, 1)
    assert torch.allclose(sol.x, x_ref, atol=1e-5)
    assert sol.nfe == steps


def test_prompt_lr_zero_is_ldps_plus_projection(ldm, problem):
    op, y = problem
    a = solve("p2l", y, op, ldm, steps=3, seed=1, prompt_lr=0.0)
    b = solve("p2l_projection_only", y, op, ldm, steps=3, seed=1)
    c = solve("ldps", y, op, ldm, steps=3, seed=1)
    assert torch.equal(a.x, b.x)
    assert not torch.allclose(b.x, c.x)            # the projection does change the trajectory
    assert torch.equal(a.prompt, ldm.null_prompt(2))


def test_one_prompt_step_lowers_data_loss(ldm, problem):
    op, y = problem
    z_t = torch.randn(2, 4, 4, 4, generator=torch.Generator().manual_seed(3))
    t = 501
    a = ldm.scheduler.alphas_cumprod[t]
    C = ldm.null_prompt(2).requires_grad_(True)
    opt = torch.optim.Adam([C], lr=1e-3)
    before = prompt_loss(ldm, z_t, t, C, a, y, op)
    before.backward()
    opt.step()
    after = prompt_loss(ldm, z_t, t, C, a, y, op)
    assert after.item() < before.item()


def test_prompt_gets_gradient_frozen_modules_do_not(ldm, problem):
    op, y = problem
    z_t = torch.randn(2, 4, 4, 4, requires_grad=True)
    C = ldm.null_prompt(2).requires_grad_(True)
    loss = prompt_loss(ldm, z_t, 400, C, ldm.scheduler.alphas_cumprod[400], y, op)
    loss.backward()
    assert C.grad is not None and C.grad.abs().sum() > 0
    assert z_t.grad is None                         # z_t is held fixed during the prompt update
    for module in (ldm.vae, ldm.unet, ldm.text_encoder):
        assert all(p.grad is None for p in module.parameters())


def test_p2l_moves_the_prompt_and_records_trajectory(ldm, problem):
    op, y = problem
    sol = solve("p2l", y, op, ldm, steps=3, seed=0, captions=CAPTIONS, record_every=1, prompt_lr=0.1)
    assert not torch.allclose(sol.prompt, ldm.null_prompt(2))
    assert len(sol.trajectory["prompt_cos"]) == 3 and len(sol.trajectory["off_range"]) == 3
    # the per-image records behind the trajectory's batch means: [n_records, B]
    for k in ("off_range", "prompt_cos", "null_cos"):
        assert sol.per_image[k].shape == (3, 2)
        assert torch.allclose(sol.per_image[k].mean(1), torch.tensor(sol.trajectory[k], dtype=torch.float64))
    assert torch.allclose(sol.per_image["prompt_cos"][-1],
                          torch.nn.functional.cosine_similarity(sol.prompt.flatten(1).double(),
                                                                ldm.embed(CAPTIONS).flatten(1).double(), dim=1),
                          atol=1e-5)
    assert sol.nfe == 6                             # K = 1 prompt step + 1 latent step per DDIM step


@pytest.mark.parametrize("method", ["ldps", "gml_dps", "psld", "p2l", "oracle"])
def test_seeded_determinism(ldm, problem, method):
    op, y = problem
    a = solve(method, y, op, ldm, steps=2, seed=7, captions=CAPTIONS)
    b = solve(method, y, op, ldm, steps=2, seed=7, captions=CAPTIONS)
    assert torch.equal(a.x, b.x)
    assert a.x.shape == (2, 3, 16, 16) and torch.isfinite(a.x).all()


def test_unknown_method_or_hparam_is_refused(ldm, problem):
    op, y = problem
    with pytest.raises(ValueError, match="unknown method"):
        solve("dps++", y, op, ldm, steps=1, seed=0)
    with pytest.raises(ValueError, match="unknown hyper-parameter"):
        solve("p2l", y, op, ldm, steps=1, seed=0, learning_rate=1.0)
