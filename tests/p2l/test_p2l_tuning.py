"""The equal-budget tuning grid, the noise draws of the held-out problems, the floor count and the
prior's classifier-free-guidance sampler."""
from pathlib import Path

import numpy as np
import pytest
import torch

from papers.p2l import build_operator, solve
from papers.p2l.experiments import problems as P
from papers.p2l.experiments import references as R
from papers.p2l.experiments import tuning as TU
from papers.p2l.components import sample_prior
from shared.config import load_config
from shared.samples import sample

from test_p2l_solver import CAPTIONS, tiny_ldm

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "p2l" / "config.yaml"


@pytest.fixture(scope="module")
def ldm():
    return tiny_ldm()


def test_per_image_weights_equal_solving_each_point_alone(ldm):
    """A ρ/γ grid solved as one batch with per-image weights gives each point's own reconstruction."""
    g = torch.Generator().manual_seed(1)
    op = build_operator("sr", 16, factor=4)
    y = op.measure(torch.rand(1, 3, 16, 16, generator=g) * 2 - 1, 0).repeat(2, 1, 1, 1)
    rho, gamma = torch.tensor([0.5, 4.0]), torch.tensor([0.1, 0.5])
    z_T = torch.randn(1, 4, 4, 4, generator=g).repeat(2, 1, 1, 1)
    both = solve("psld", y, op, ldm, steps=3, seed=2, rho=rho, gamma_glue=gamma, encoder_sample=False, z_init=z_T)
    for i in range(2):
        alone = solve("psld", y[i:i + 1], op, ldm, steps=3, seed=2, rho=float(rho[i]), gamma_glue=float(gamma[i]),
                      encoder_sample=False, z_init=z_T[:1])
        torch.testing.assert_close(both.x[i:i + 1], alone.x, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(both.x[0], both.x[1], atol=1e-4)


def test_tuning_grid_crosses_rho_with_the_methods_own_axes():
    cfg = load_config(CONFIG, "tiny")
    grid = TU.tuning_grid(cfg, "psld")
    assert len(grid) == len(cfg.tuning.rho) * len(cfg.tuning.extra.psld.gamma_glue)
    assert {p["gamma_glue"] for p in grid} == set(cfg.tuning.extra.psld.gamma_glue)
    assert TU.tuning_grid(cfg, "ldps") == [{"rho": float(r)} for r in cfg.tuning.rho]


def test_tune_picks_the_best_validation_point(ldm, monkeypatch):
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "tuning.extend=0"])
    val = {"images": torch.zeros(2, 3, 16, 16), "captions": CAPTIONS}
    op = build_operator("sr", 16, factor=4)

    def fake(method, y, op_, ldm_, cfg_, seed, captions, repeats=1, **hp):   # reconstruction quality grows with ρ·γ
        w = (hp["rho"] * hp["gamma_glue"])[:, None, None, None]
        return (torch.zeros(len(y), 3, 16, 16) + 1 / (1 + w), 0, 0.0, {}, {}, {})

    monkeypatch.setattr(TU, "_solve_batches", fake)
    best, rows = TU.tune(cfg, "psld", "sr", op, ldm, val, 0)
    assert len(rows) == len(TU.tuning_grid(cfg, "psld"))
    assert best == {"rho": max(cfg.tuning.rho), "gamma_glue": max(cfg.tuning.extra.psld.gamma_glue)}


def test_held_out_problem_stacks_distinct_noise_draws_of_the_same_images():
    cfg = load_config(CONFIG, "smoke", ["data.noise_seeds=3"])
    op, test, y = P.held_out_problem(cfg, "gblur", 0)
    n = cfg.data.n_test
    assert len(y) == len(test["images"]) == len(test["captions"]) == 3 * n
    torch.testing.assert_close(test["images"][:n], test["images"][n:2 * n])
    assert test["captions"][:n] == test["captions"][n:2 * n]
    clean = op.forward(test["images"])
    noise = [(y - clean)[j * n:(j + 1) * n] for j in range(3)]
    assert not torch.allclose(noise[0], noise[1]) and not torch.allclose(noise[1], noise[2])


def test_beats_both_floors_needs_both_intervals_above_zero():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.4, 0.6, 64)
    floors = {"measurement": {"ssim": sample(base, "image")}, "least_squares": {"ssim": sample(base - 0.2, "image")}}
    assert R.beats_both_floors(sample(base + 0.05 + rng.normal(0, 0.01, 64), "image"), floors)
    assert not R.beats_both_floors(sample(base - 0.05, "image"), floors)            # loses to one floor
    assert not R.beats_both_floors(sample(base + rng.normal(0, 0.05, 64), "image"), floors)   # ties one


def test_guidance_zero_is_the_unconditional_sampler_and_guidance_changes_samples(ldm):
    caps = [CAPTIONS[0]] * 2
    null = sample_prior(ldm, ["", ""], steps=3, guidance=0.0, seed=4)
    torch.testing.assert_close(sample_prior(ldm, caps, steps=3, guidance=0.0, seed=4), null)
    guided = sample_prior(ldm, caps, steps=3, guidance=3.0, seed=4)
    assert guided.shape == null.shape and not torch.allclose(guided, null, atol=1e-4)


def test_the_ancestral_sampler_is_seeded_and_is_not_ddim(ldm):
    """The gate's sampler (prior_check.eta = 1): DDPM's ancestral steps, their noise from the seeded
    generator (the same samples again), not the deterministic DDIM path (eta = 0)."""
    caps = ["", ""]
    ancestral = sample_prior(ldm, caps, steps=3, guidance=0.0, seed=4, eta=1.0)
    torch.testing.assert_close(sample_prior(ldm, caps, steps=3, guidance=0.0, seed=4, eta=1.0), ancestral)
    ddim = sample_prior(ldm, caps, steps=3, guidance=0.0, seed=4)
    assert not torch.allclose(ancestral, ddim, atol=1e-4)
    assert float(load_config(CONFIG, "tiny").prior_check.eta) == 1.0


def test_every_method_evaluates_the_same_number_of_points_and_each_axis_value():
    """The equal budget: at tiny every method evaluates `tuning.budget` points, and a method with a larger
    product grid still tries every value of every axis (a Latin-hypercube draw)."""
    cfg = load_config(CONFIG, "tiny")
    budget = int(cfg.tuning.budget)
    for m in cfg.methods:
        points = TU.tuning_points(cfg, m)
        assert len(points) == budget, m
        for axis, values in TU.tuning_axes(cfg, m).items():
            assert {p[axis] for p in points} == set(map(float, values)), (m, axis)
    assert {"tau", "lam", "prompt_lr", "prompt_steps"} <= set(TU.tuning_axes(cfg, "p2l"))


def test_a_best_value_at_an_edge_extends_that_axis(ldm, monkeypatch):
    """Quality grows with ρ past the grid: the search extends ρ beyond its largest value, and only ρ."""
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "tuning.extend=2", "tuning.budget=0"])
    val = {"images": torch.zeros(2, 3, 16, 16), "captions": CAPTIONS}
    op = build_operator("sr", 16, factor=4)

    def fake(method, y, op_, ldm_, cfg_, seed, captions, repeats=1, **hp):
        w = hp["rho"][:, None, None, None]
        return (torch.zeros(len(y), 3, 16, 16) + 1 / (1 + w), 0, 0.0, {}, {}, {})

    monkeypatch.setattr(TU, "_solve_batches", fake)
    best, rows = TU.tune(cfg, "ldps", "sr", op, ldm, val, 0)
    assert best["rho"] == 8.0 and [r["stage"] for r in rows].count("extend") == 2   # 2 → 4 → 8
    assert TU.edge_flags(best, rows) == {"rho": True}


# Each value is solved alone in a batch of the same size (every row the same value): a batch of another
# size sums in another order, by a rounding that the solver's steps amplify to ~1e-4 and that moves with
# the CPU; at the same shape the rows see the same arithmetic, and only the per-image values differ.
def test_per_image_tau_and_lambda_equal_solving_each_value_alone(ldm):
    """P2L with per-image τ and λ (a tuning draw as one batch) gives each point's own solution."""
    g = torch.Generator().manual_seed(5)
    op = build_operator("gblur", 16, kernel_size=5, blur_sigma=1.0)
    y = op.measure(torch.rand(1, 3, 16, 16, generator=g) * 2 - 1, 0).repeat(2, 1, 1, 1)
    tau, lam = torch.tensor([1.0, 2.0]), torch.tensor([1e-4, 1e-2])
    z_T = torch.randn(1, 4, 4, 4, generator=g).repeat(2, 1, 1, 1)
    both = solve("p2l", y, op, ldm, steps=4, seed=2, tau=tau, lam=lam, z_init=z_T)
    for i in range(2):
        alone = solve("p2l", y, op, ldm, steps=4, seed=2, tau=int(tau[i]), lam=float(lam[i]), z_init=z_T)
        torch.testing.assert_close(both.x[i], alone.x[i], atol=1e-6, rtol=1e-5)
    assert not torch.allclose(both.x[0], both.x[1], atol=1e-4)


def test_per_image_prompt_lr_equals_solving_each_value_alone(ldm):
    """P2L with a per-image prompt_lr (one Adam group per value) gives each value's own solution."""
    g = torch.Generator().manual_seed(3)
    op = build_operator("gblur", 16, kernel_size=5, blur_sigma=1.0)
    y = op.measure(torch.rand(1, 3, 16, 16, generator=g) * 2 - 1, 0).repeat(3, 1, 1, 1)
    lr = torch.tensor([0.1, 0.0, 1e-2])   # not sorted, and its group order is no involution
    z_T = torch.randn(1, 4, 4, 4, generator=g).repeat(3, 1, 1, 1)
    both = solve("p2l", y, op, ldm, steps=3, seed=2, prompt_lr=lr, z_init=z_T)
    for i in range(3):   # alone in a batch of the same size, as above
        alone = solve("p2l", y, op, ldm, steps=3, seed=2, prompt_lr=float(lr[i]), z_init=z_T)
        torch.testing.assert_close(both.x[i], alone.x[i], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(both.prompt[i], alone.prompt[i], atol=1e-6, rtol=1e-5)
    assert not torch.allclose(both.prompt[0], both.prompt[2], atol=1e-5)


def test_edge_flags_mark_a_choice_at_the_grids_edge():
    rows = [{"rho": r, "prompt_lr": lr} for r in (0.5, 1.0, 2.0) for lr in (0.001, 0.01)]
    assert TU.edge_flags({"rho": 1.0, "prompt_lr": 0.01}, rows) == {"rho": False, "prompt_lr": True}
    assert TU.edge_flags({"rho": 0.5, "prompt_lr": 0.001}, rows) == {"rho": True, "prompt_lr": True}


def test_a_count_at_one_is_a_bound_not_an_edge():
    """K = 1 (or τ = 1) cannot be extended below: it is no edge left unexplored; K at the top is."""
    rows = [{"rho": r, "prompt_steps": k, "tau": t} for r in (0.5, 1.0) for k in (1.0, 2.0) for t in (1.0, 2.0, 5.0)]
    assert TU.edge_flags({"rho": 1.0, "prompt_steps": 1.0, "tau": 1.0}, rows) == \
        {"rho": True, "prompt_steps": False, "tau": False}
    assert TU.edge_flags({"rho": 0.5, "prompt_steps": 2.0, "tau": 5.0}, rows) == \
        {"rho": True, "prompt_steps": True, "tau": True}
    assert TU.edge_flags({"rho": 1.0}, [{"rho": 1.0}]) == {"rho": True}   # one value: its own edge


def test_extension_stops_at_the_first_edge_that_loses(ldm, monkeypatch):
    """Quality peaks at ρ = 4, past the grid's top (2): ρ = 4 wins, ρ = 8 loses and ends the rounds, and
    the chosen 4 is no longer at an edge."""
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "tuning.extend=3", "tuning.budget=0"])
    val = {"images": torch.zeros(2, 3, 16, 16), "captions": CAPTIONS}
    op = build_operator("sr", 16, factor=4)

    def fake(method, y, op_, ldm_, cfg_, seed, captions, repeats=1, **hp):
        w = hp["rho"][:, None, None, None]
        return (torch.zeros(len(y), 3, 16, 16) + (torch.log2(w) - 2).abs() / 4, 0, 0.0, {}, {}, {})

    monkeypatch.setattr(TU, "_solve_batches", fake)
    best, rows = TU.tune(cfg, "ldps", "sr", op, ldm, val, 0)
    assert best["rho"] == 4.0 and [r["rho"] for r in rows if r["stage"] == "extend"] == [4.0, 8.0]
    assert TU.edge_flags(best, rows) == {"rho": False}


def test_the_main_table_counts_each_priors_validation_solves(tmp_path):
    """Draw plus extensions, per method and prior, from the tuning table (they differ between priors)."""
    import pandas as pd

    from papers.p2l.experiments.main_table import tuning_evaluations

    (tmp_path / "tables").mkdir()
    rows = ([{"prior": 0, "method": "ldps", "stage": "draw", "n_val": 16}] * 9
            + [{"prior": 1, "method": "ldps", "stage": "draw", "n_val": 16}] * 9
            + [{"prior": 1, "method": "ldps", "stage": "extend", "n_val": 16}] * 2
            + [{"prior": 0, "method": "p2l", "stage": "draw", "n_val": 16}] * 9)
    pd.DataFrame(rows).to_csv(tmp_path / "tables" / "tuning_sr.csv", index=False)
    assert tuning_evaluations(tmp_path, "sr") == {"ldps": [144, 176], "p2l": [144]}
    assert tuning_evaluations(tmp_path, "gblur") == {}
