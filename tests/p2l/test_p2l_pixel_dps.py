"""DPS in pixel space (`papers.p2l.pixel_dps`) and the pixel comparison's pipeline at the smoke profile:
ζ = 0 is diffusers' DDPM ancestral step; the measurement step follows the gradient of the residual's
norm (not its square); the experiment pairs DPS with the latent solvers image by image, grouped by prior."""
import json
from pathlib import Path

import numpy as np
import torch

from papers.p2l.experiments import pixel_dps as PX
from papers.p2l.experiments.problems import grouped_by_prior
from papers.p2l.operators import build_operator
from papers.p2l.pixel_dps import ancestral, dps, dps_step, timesteps
from papers.p2l.pixel_prior import build_pixel_scheduler, build_pixel_unet
from shared.config import load_config
from shared.experiment import Run

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "p2l" / "config.yaml"


class ZeroEps(torch.nn.Module):
    """ε_θ ≡ 0 (x̂₀ = x_t / √ᾱ_t): the gradient step has a closed form."""

    class Out:
        def __init__(self, sample):
            self.sample = sample

    def forward(self, x, t):
        return self.Out(0 * x)


def test_zeta_zero_is_the_ddpm_ancestral_step():
    torch.manual_seed(0)
    sched = build_pixel_scheduler()
    unet = build_pixel_unet([8, 16], 16, norm_groups=4).eval()
    op = build_operator("sr", 16, factor=4)
    x = torch.randn(2, 3, 16, 16)
    y = op.measure(torch.rand(2, 3, 16, 16) * 2 - 1, 0)
    for t, t_prev in timesteps(sched, 5)[1:3]:
        noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(3))
        ours, x0 = dps_step(unet, sched, op, y, x, t, t_prev, 0.0, noise)
        with torch.no_grad():
            eps = unet(x, torch.full((2,), t)).sample
        ref = sched.step(eps, t, x, generator=torch.Generator().manual_seed(3))
        torch.testing.assert_close(ours, ref.prev_sample, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(x0, ref.pred_original_sample, rtol=1e-5, atol=1e-5)


def test_the_measurement_step_is_the_gradient_of_the_norm():
    sched = build_pixel_scheduler()
    op = build_operator("sr", 16, factor=4)
    t, t_prev = timesteps(sched, 10)[-3]
    a_t = sched.alphas_cumprod[t]
    g = torch.Generator().manual_seed(1)
    x = 0.3 * torch.rand(2, 3, 16, 16, generator=g) - 0.15    # x̂₀ = x/√ᾱ_t stays inside [-1, 1]: no clipping
    y = 0.5 * torch.randn(2, 3, 4, 4, generator=g)
    noise = torch.randn(x.shape, generator=g)
    zeta = torch.tensor([0.7, 2.0])
    moved, _ = dps_step(ZeroEps(), sched, op, y, x, t, t_prev, zeta, noise)
    still, _ = dps_step(ZeroEps(), sched, op, y, x, t, t_prev, 0.0, noise)
    r = op.forward(x / a_t.sqrt()) - y                          # A x̂₀ − y
    grad = op.adjoint(r / r.flatten(1).norm(dim=1)[:, None, None, None]) / a_t.sqrt()
    torch.testing.assert_close(still - moved, zeta[:, None, None, None] * grad, rtol=1e-4, atol=1e-6)
    # each image moves by its own ζ and its own residual alone
    alone, _ = dps_step(ZeroEps(), sched, op, y[1:], x[1:], t, t_prev, zeta[1:], noise[1:])
    torch.testing.assert_close(alone, moved[1:])


def test_a_tuning_draw_shares_each_images_draws():
    sched = build_pixel_scheduler()
    unet = build_pixel_unet([8, 16], 16, norm_groups=4).eval()
    op = build_operator("inpaint_box", 16, box=6)
    y = op.measure(torch.rand(3, 3, 16, 16) * 2 - 1, 0)
    both = dps(unet, sched, op, y.repeat(2, 1, 1, 1), 3, torch.tensor([0.0] * 3 + [1.0] * 3), seed=4, repeats=2)
    alone = dps(unet, sched, op, y, 3, 1.0, seed=4)
    torch.testing.assert_close(both.x[3:], alone.x)
    assert both.nfe == 3 and not torch.equal(both.x[:3], both.x[3:])


def test_pixel_pipeline_at_smoke(tmp_path, monkeypatch):
    cfg = load_config(CONFIG, "smoke", ["main_tasks=[sr]"])
    P = int(cfg.priors)
    for k in range(P):
        res = PX.train_pixel_prior_job(Run("p2l", "train_pixel_prior" + (f"_{k}" if k else ""), cfg, tmp_path), prior=k)
        assert res["seed"] == cfg.seed + k and res["steps"] == cfg.ldm.steps and res["parameters"] > 0
    # the latent solvers' per-image scores as main_sr writes them (grouped by prior, one value per image)
    n = cfg.data.n_test
    rng = np.random.default_rng(0)
    main = {m: {key: grouped_by_prior([rng.random(n) for _ in range(P)], P) for key in ("ssim", "psnr")}
            for m in ("p2l", "psld", "ldps")}
    (tmp_path / "metrics").mkdir(exist_ok=True)
    (tmp_path / "metrics" / "main_sr.json").write_text(json.dumps({"methods": main}))
    monkeypatch.setattr(PX, "latent_parameters", lambda cfg_, out: {"unet": 1000, "total": 2000})
    out = PX.pixel_dps(Run("p2l", "pixel_dps", cfg, tmp_path))
    dps_sr = out["tasks"]["sr"]["dps"]
    for key in ("ssim", "psnr"):
        s = dps_sr[key]
        assert s["n"] == n * P and s["group_unit"] == "prior" and s["groups"] == main["p2l"][key]["groups"]
        gap = out["tasks"]["sr"]["p2l_minus_dps"][key]
        np.testing.assert_allclose(gap["values"], np.subtract(main["p2l"][key]["values"], s["values"]))
    assert len(dps_sr["tuned_by_prior"]) == P and set(dps_sr["tuned_at_edge_by_prior"][0]) == {"zeta"}
    assert dps_sr["tuning_evaluations"] >= cfg.tuning.budget * cfg.data.n_val and dps_sr["nfe"] == cfg.solve.steps
    assert out["parameters"]["pixel_unet"] > 0
    table = (tmp_path / "tables" / "pixel_dps.md").read_text()
    assert "DPS (pixel)" in table and "P2L" in table and "PSLD" in table and "LDPS" in table
