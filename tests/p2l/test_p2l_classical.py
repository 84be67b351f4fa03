"""The classical floors (`papers.p2l.classical`) and their validation search (`references.classical_search`)."""
from pathlib import Path

import numpy as np
import pytest
import torch

from papers.p2l import classical as CL
from papers.p2l import metrics as M
from papers.p2l.data import make_split
from papers.p2l.experiments import references as R
from papers.p2l.operators import build_operator
from shared.config import load_config

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "p2l" / "config.yaml"


@pytest.fixture(scope="module")
def images():
    return make_split(0, "val", 8, 16)["images"]


@pytest.mark.parametrize("task,solver,value", [("gblur", "tv", 0.02), ("motion", "tv", 0.02), ("gblur", "tikhonov", 0.05),
                                                ("sr", "bicubic", None), ("sr", "lanczos", None),
                                                ("inpaint_box", "biharmonic", None), ("inpaint_random", "tv", 0.02)])
def test_each_classical_solver_beats_the_measurement(images, task, solver, value):
    op = build_operator(task, 16, sigma_y=0.05, box=10, kernel_size=7, blur_sigma=1.5)
    y = op.measure(images, 0)
    fn, _ = CL.SOLVERS[solver]
    x = fn(y, op, value)
    assert x.shape == images.shape and x.min() >= -1 and x.max() <= 1
    base = M.psnr(op.pseudo_adjoint(y).clamp(-1, 1), images).mean()
    assert M.psnr(x, images).mean() > base - 0.5, solver   # at least the measurement's PSNR (SR: A⁺y is close)
    if task != "sr":
        assert M.ssim(x, images).mean() > M.ssim(op.pseudo_adjoint(y).clamp(-1, 1), images).mean() + 0.05


def test_per_image_parameters_equal_solving_each_alone(images):
    op = build_operator("gblur", 16, kernel_size=7, blur_sigma=1.5)
    y = op.measure(images[:2], 0)
    both = CL.tikhonov(y, op, torch.tensor([0.01, 0.1]))
    for i, lam in enumerate((0.01, 0.1)):
        torch.testing.assert_close(both[i:i + 1], CL.tikhonov(y[i:i + 1], op, lam), atol=1e-5, rtol=1e-4)


def test_generator_fit_recovers_a_template_from_its_noiseless_measurement():
    bank = CL.templates(16, centres=3, radii=2)
    op = build_operator("sr", 16, factor=4)
    truth = bank[[5, 77, 140]]
    fit = CL.generator_fit(op.forward(truth), op, bank)
    torch.testing.assert_close(op.forward(fit), op.forward(truth), atol=1e-6, rtol=0)   # a perfect fit
    assert len(bank) == 18 * 9 * 2


def test_search_extends_a_grid_whose_best_is_at_the_edge(images):
    cfg = load_config(CONFIG, "smoke", ["references.grid.weight=[0.0001,0.0002]", "references.extend=2",
                                        "references.tv_steps=60"])
    op = build_operator("gblur", 16, kernel_size=7, blur_sigma=1.5)
    choice, rows = R.classical_search(cfg, op, images[:3], 1)
    tv = sorted(r["value"] for r in rows if r["solver"] == "tv")
    assert tv == pytest.approx([0.0001, 0.0002, 0.0004, 0.0008])   # best above the top edge: extended twice
    assert set(choice) == {"ssim", "psnr"}
    best = max(rows, key=lambda r: r["ssim"])
    assert choice["ssim"]["solver"] == best["solver"] and choice["ssim"]["val"] == best["ssim"]
    top = [r for r in rows if r["solver"] == "tv" and r["value"] == pytest.approx(0.0008)][0]
    assert top["edge"]
