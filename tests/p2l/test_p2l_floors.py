"""The floors (`floors`, `floor_images`, `least_squares_image`, `measurement_image`): the same test images
and noise as the main table, and a least-squares arm that does fit the measurement."""
from pathlib import Path

import numpy as np
import pytest
import torch

from papers.p2l.experiments import problems as P
from papers.p2l.experiments import references as R
from papers.p2l.experiments import task_solutions as T
from papers.p2l.experiments import tuning as TU
from papers.p2l import metrics as M
from papers.p2l.operators import TASKS, build_operator
from papers.p2l.solver import hparams_of
from shared.config import load_config
from shared.experiment import Run

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "p2l" / "config.yaml"


@pytest.fixture(scope="module")
def cfg():
    return load_config(CONFIG, "smoke", ["priors=1"])


def _main_task_inputs(cfg, task, out, monkeypatch) -> list[tuple]:
    """Run `main_task` with the solver replaced by a recorder: the (y, seed) of every call it makes."""
    calls = []

    def record(method, y, op, ldm, cfg_, seed, captions, repeats=1, **hp):
        calls.append((method, y.clone(), seed, "record_every" in hp))
        x = torch.zeros_like(op.adjoint(y))
        return (x, 1, 1.0, {"step": [], "t": [], "off_range": [], "prompt_cos": [], "null_cos": []}, {},
                {"nfe": 1, "decoder": 1, "encoder": 0})

    monkeypatch.setattr(T, "load_prior", lambda cfg_, out_, prior=0: None)
    monkeypatch.setattr(T, "load_classifier", lambda cfg_, out_, prior=0: None)
    monkeypatch.setattr(T, "_solve_batches", record)
    monkeypatch.setattr(TU, "_solve_batches", record)       # the tuning runs
    T.main_task(Run("p2l", f"main_{task}", cfg, out), task)
    return calls


@pytest.mark.parametrize("task", ["sr", "motion", "inpaint_box"])
def test_floors_see_the_main_tables_images_and_noise(cfg, task, tmp_path, monkeypatch):
    calls = _main_task_inputs(cfg, task, tmp_path, monkeypatch)
    test_calls = [c for c in calls if c[3]]          # the held-out runs (tuning runs do not record)
    assert {c[0] for c in test_calls} == set(T.task_methods(cfg, task))
    seed = int(cfg.seed)
    op, gt, y, arms = R.floor_images(cfg, task, seed)
    for method, y_main, seed_main, _ in test_calls:
        assert seed_main == seed
        assert torch.equal(y_main, y), method         # the same images, order and noise, bit for bit
    # and the floors experiment itself scores its arms against those images, from that y
    cfg_one = load_config(CONFIG, "smoke", [f"main_tasks=[{task}]", "priors=1"])
    monkeypatch.setattr(R, "ceilings", lambda *a: {})      # no trained prior here
    result = R.floors(Run("p2l", "floors", cfg_one, tmp_path))
    k, n = cfg.data.noise_seeds, cfg.data.n_test
    per_draw = M.ssim(R.measurement_image(op, y_main).clamp(-1, 1), gt)     # seed-major: draw j is rows j·n …
    expected = np.mean([per_draw[j * n:(j + 1) * n] for j in range(k)], 0)  # one value per image
    np.testing.assert_allclose(result["tasks"][task]["measurement"]["ssim"]["values"], expected)
    assert result["tasks"][task]["measurement"]["ssim"]["n"] == n and k == 3


@pytest.mark.parametrize("task", TASKS)
def test_least_squares_floor_lowers_the_residual(cfg, task):
    op = build_operator(task, cfg.image_size, sigma_y=cfg.solve.sigma_y, seed=cfg.seed)
    gt = P.load_images(cfg, "test", cfg.data.n_test)["images"]
    y = op.measure(gt, 0)
    hp = hparams_of("p2l", **P.method_hparams(cfg, "p2l"))
    x = R.least_squares_image(op, y, hp["lam"], hp["cg_iters"])
    fit = (op.forward(x) - y).flatten(1).norm(dim=1)
    zero = y.flatten(1).norm(dim=1)                  # ‖A·0 − y‖
    assert torch.all(fit < 0.5 * zero), (fit / zero)
    # with P2L's iterations it gets close to the noise floor σ_y √m, or (inpainting) to the noise outside the mask
    noise = (y - op.forward(gt)).flatten(1).norm(dim=1)
    assert torch.all(fit < 2 * noise), (fit / noise)


def test_floors_table_lists_every_task_and_the_main_methods(cfg, tmp_path, monkeypatch):
    from shared.io import write_json
    from shared.samples import sample

    n = cfg.data.n_test
    for i, task in enumerate(cfg.main_tasks):
        methods = {m: {"ssim": sample(np.linspace(0.1, 0.2, n) + i, "image"),
                       "psnr": sample(np.linspace(10, 12, n) + i, "image")} for m in ("ldps", "psld", "p2l")}
        write_json(tmp_path / "metrics" / f"main_{task}.json", {"methods": methods})
    ceiling = {"ssim": np.full(n, 0.9), "psnr": np.full(n, 30.0)}
    monkeypatch.setattr(R, "ceilings", lambda *a: {"vae_round_trip": ceiling, "generator_fit": ceiling})
    result = R.floors(Run("p2l", "floors", cfg, tmp_path))
    assert set(result["tasks"]) == set(cfg.main_tasks) and result["cg_iters"] == 5
    import pandas as pd

    table = pd.read_csv(tmp_path / "tables" / "floors.csv")
    for col in ("metric", "measurement", "least_squares", "classical", "classical solver", "p2l", "psld", "ldps",
                "vae_round_trip", "generator_fit"):
        assert col in table.columns, col
    assert len(table) == 2 * len(cfg.main_tasks) and set(table.metric) == {"ssim", "psnr"}
    for task in cfg.main_tasks:
        res = result["tasks"][task]
        assert {"ssim", "psnr"} <= set(res["classical"]) and res["classical"]["ssim"]["n"] == n
        assert set(res["classical"]["chosen"]) == {"ssim", "psnr"}
        assert res["generator_fit"]["ssim"]["mean"] == 0.9
    assert set(result["p2l_tasks_beating_classical"]) == {"ssim", "psnr"}
    standing = (tmp_path / "tables" / "floors_standing.csv").read_text().splitlines()
    assert len(standing) == 1 + 3 * 2 * len(cfg.main_tasks)
    assert (tmp_path / "tables" / "floors_tuning.csv").is_file()
    assert (tmp_path / "figures" / "main_comparison.png").is_file()   # the headline figure


def test_headline_interval_is_over_priors_not_images():
    """The headline figure's interval of a grouped sample is the t-interval of the priors' means (n = 3),
    as the ledger's: wider than one over the 96 images."""
    from papers.p2l.experiments.comparison_figure import interval
    from shared.intervals import mean_interval
    from shared.samples import sample

    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(mu, 0.05, 32) for mu in (0.6, 0.7, 0.8)])
    grouped = sample(values, "image", groups=[k for k in range(3) for _ in range(32)], group_unit="prior")
    mean, lo, hi = interval(grouped)
    means = [values[32 * k:32 * (k + 1)].mean() for k in range(3)]
    assert np.isclose(mean, np.mean(means))
    assert np.allclose((lo, hi), mean_interval(means)[:2])
    _, lo_img, hi_img = interval(sample(values, "image"))
    assert hi - lo > 3 * (hi_img - lo_img)


def test_main_task_averages_the_noise_draws_per_image(cfg, tmp_path, monkeypatch):
    """With k noise draws, each method's per-image sample holds one value per image: the mean of that
    image's k draws in the per-image table (the images are the units, n = n_test)."""
    def solve_as_measurement(method, y, op, ldm, cfg_, seed, captions, repeats=1, **hp):
        # P2L alone records its prompt's caption rank (a per-image score the other methods lack)
        records = {"caption_top1": np.ones((1, len(y)))} if method == "p2l" else {}
        return (R.measurement_image(op, y).clamp(-1, 1), 1, 1.0,
                {"step": [], "t": [], "off_range": [], "prompt_cos": [], "null_cos": []}, records,
                {"nfe": 1, "decoder": 1, "encoder": 0})

    monkeypatch.setattr(T, "load_prior", lambda cfg_, out_, prior=0: None)
    monkeypatch.setattr(T, "load_classifier", lambda cfg_, out_, prior=0: None)
    monkeypatch.setattr(T, "_solve_batches", solve_as_measurement)
    monkeypatch.setattr(TU, "_solve_batches", solve_as_measurement)
    res = T.main_task(Run("p2l", "main_gblur", cfg, tmp_path), "gblur")
    import pandas as pd

    table = pd.read_csv(tmp_path / "tables" / "per_image_gblur.csv")
    n, k = cfg.data.n_test, cfg.data.noise_seeds
    assert len(table) == len(T.task_methods(cfg, "gblur")) * n * k and sorted(table.noise_seed.unique()) == list(range(k))
    ssim = res["methods"]["psld"]["ssim"]
    assert ssim["n"] == n == res["n_test"]
    by_image = table[table.method == "psld"].groupby("image")["ssim"].mean()
    np.testing.assert_allclose(ssim["values"], by_image.loc[range(n)].values)
    first = table[(table.method == "psld") & (table.noise_seed == 0)].sort_values("image")["ssim"].values
    np.testing.assert_allclose(res["methods"]["psld"]["first_draw"]["ssim"]["values"], first)
    assert not np.allclose(ssim["values"], first)        # the draws differ, so the mean is not the first draw
    assert res["methods"]["p2l"]["caption_top1"]["mean"] == 1.0 and "caption_top1" not in res["paired"]["p2l_minus_psld"]
    # artifacts as an outcome: per image, |hf(x̂) − hf(x)| averaged over the draws, as in the per-image table
    by_image_hf = table[table.method == "psld"].groupby("image")["hf_error"].mean()
    np.testing.assert_allclose(res["methods"]["psld"]["hf_error"]["values"], by_image_hf.loc[range(n)].values)
    gt_hf = M.high_frequency_energy(P.load_images(cfg, "test", n)["images"])
    x_hf = table[(table.method == "psld") & (table.noise_seed == 0)].sort_values("image")["hf_energy"].values
    first_err = table[(table.method == "psld") & (table.noise_seed == 0)].sort_values("image")["hf_error"].values
    np.testing.assert_allclose(first_err, np.abs(x_hf - gt_hf), rtol=1e-6)
