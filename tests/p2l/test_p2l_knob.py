"""The severity knob (`severity_knob`): both methods at every SR factor, paired by image along the knob."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from papers.p2l.experiments import knob as K
from shared.assets import MissingAssetError
from shared.io import write_json
from shared.config import load_config
from shared.experiment import Run
from shared.samples import is_knob

from test_p2l_solver import tiny_ldm

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "p2l" / "config.yaml"


def _main_sr_tuning(out: Path, rho: dict):
    """A main_sr tuning at the main factor on priors 0 and 1 (`rho[m]`: each prior's chosen ρ; a losing
    ρ = 99 is tried on both)."""
    (out / "metrics").mkdir(parents=True)
    (out / "tables").mkdir()
    write_json(out / "metrics" / "main_sr.json", {"methods": {
        m: {"tuned_by_prior": [{"rho": r, **({"prompt_lr": 0.01} if m == "p2l" else {})} for r in rho[m]]}
        for m in ("ldps", "p2l")}})
    rows = [{"prior": p, "task": "sr", "method": m, "rho": r, "prompt_lr": (0.01 if m == "p2l" else np.nan),
             "stage": "draw", "n_val": 1, "val_ssim": 0.5, "val_psnr": 20.0}
            for p in (0, 1) for m in ("ldps", "p2l") for r in (rho[m][p], 99.0)]
    pd.DataFrame(rows).to_csv(out / "tables" / "tuning_sr.csv", index=False)


def test_knob_tunes_and_solves_each_factor_on_every_prior(tmp_path, monkeypatch):
    """On each prior, both methods tuned at every factor but the main table's own (4), where main_sr's
    values on that prior are used; the same images at every factor; samples grouped by prior."""
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "data.n_val=1", "knob.n=3"])
    assert cfg.priors == 2
    ldms = [tiny_ldm(), tiny_ldm()]
    loaded = []

    def load(cfg_, out_, prior=0):
        loaded.append(prior)
        return ldms[prior]

    monkeypatch.setattr(K, "load_prior", load)
    _main_sr_tuning(tmp_path, {"ldps": [0.25, 0.5], "p2l": [0.75, 1.5]})
    seen, tuned_at = [], []
    real, real_tune = K._solve_batches, K.tune

    def spy(method, y, op, ldm, *a, **kw):
        seen.append((ldms.index(ldm), method, op.factor, tuple(y.shape), float(kw["rho"])))
        return real(method, y, op, ldm, *a, **kw)

    def spy_tune(cfg_, m, task, op, ldm, *a, **kw):
        tuned_at.append((ldms.index(ldm), m, op.factor))
        return real_tune(cfg_, m, task, op, ldm, *a, **kw)

    monkeypatch.setattr(K, "_solve_batches", spy)
    monkeypatch.setattr(K, "tune", spy_tune)
    res = K.severity_knob(Run("p2l", "severity_knob", cfg, tmp_path))
    assert loaded == [0, 1] and res["factors"] == [2, 4] and res["n"] == 3 and res["priors"] == 2
    assert tuned_at == [(p, m, 2) for p in (0, 1) for m in ("ldps", "p2l")]
    assert [s[:4] for s in seen] == [(p, m, f, (3, 3, 8 // (f // 2), 8 // (f // 2)))
                                     for p in (0, 1) for f in (2, 4) for m in ("ldps", "p2l")]
    assert [s[4] for s in seen if s[2] == 4] == [0.25, 0.75, 0.5, 1.5]   # main_sr's choices on each prior
    for k in ("ssim", "psnr"):
        p2l, ldps, gain = res["methods"]["p2l"][k], res["methods"]["ldps"][k], res["methods"]["gain"][k]
        assert is_knob(p2l) and p2l["points"] == [2.0, 4.0]
        s0 = p2l["samples"][0]
        assert s0["n"] == 6 and s0["groups"] == [0, 0, 0, 1, 1, 1] and s0["group_unit"] == "prior"
        for j in range(2):
            np.testing.assert_allclose(gain["samples"][j]["values"],
                                       np.subtract(p2l["samples"][j]["values"], ldps["samples"][j]["values"]))
    table = pd.read_csv(tmp_path / "tables" / "severity_knob_tuning.csv")
    at4 = table[table["factor"] == 4]
    assert sorted(at4[at4["prior"] == 1]["rho"]) == [0.5, 1.5, 99.0, 99.0]   # each prior's own rows
    knob_table = pd.read_csv(tmp_path / "tables" / "severity_knob.csv")
    assert list(knob_table[knob_table["factor"] == 4]["tuned rho"]) == ["0.25 / 0.5", "0.75 / 1.5"]


def test_knob_without_the_main_tuning_stops_with_one_line(tmp_path, monkeypatch):
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "data.n_val=1", "knob.n=3", "knob.factors=[4]"])
    monkeypatch.setattr(K, "load_prior", lambda cfg_, out_, prior=0: tiny_ldm())
    with pytest.raises(MissingAssetError, match="main_sr"):
        K.severity_knob(Run("p2l", "severity_knob", cfg, tmp_path))


def test_knob_reads_the_main_tables_solves_at_its_factor(tmp_path, monkeypatch):
    """With one noise draw and the main table's image count, the ×4 samples are main_sr's per-image values
    on each prior, not solved again."""
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "data.n_val=1", "data.noise_seeds=1", "data.n_test=3",
                                        "knob.n=3"])
    ldms = [tiny_ldm(), tiny_ldm()]
    monkeypatch.setattr(K, "load_prior", lambda cfg_, out_, prior=0: ldms[prior])
    _main_sr_tuning(tmp_path, {"ldps": [0.25, 0.5], "p2l": [0.75, 1.5]})
    main = {"ldps": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], "p2l": [0.7, 0.8, 0.9, 1.0, 1.1, 1.2]}
    path = tmp_path / "metrics" / "main_sr.json"
    from shared.io import read_json
    from shared.samples import sample
    metrics = read_json(path)
    for m, v in main.items():
        for k in ("ssim", "psnr"):
            metrics["methods"][m][k] = sample(v, "image", groups=[0, 0, 0, 1, 1, 1], group_unit="prior")
    write_json(path, metrics)
    factors = []
    real = K._solve_batches
    monkeypatch.setattr(K, "_solve_batches", lambda m, y, op, *a, **kw: factors.append(op.factor) or real(m, y, op, *a, **kw))
    res = K.severity_knob(Run("p2l", "severity_knob", cfg, tmp_path))
    assert 4 not in factors and factors.count(2) > 0
    for m, v in main.items():
        at4 = res["methods"][m]["ssim"]["samples"][1]
        assert at4["values"] == v and at4["groups"] == [0, 0, 0, 1, 1, 1]


def test_main_solves_are_not_read_where_the_main_table_averaged_noise_draws():
    """With k > 1 noise draws main's per-image values are means over the draws, not the first draw a knob
    or ablation solve gives: nothing is read."""
    from papers.p2l.experiments.problems import main_solves
    from shared.samples import sample

    rec = {"ssim": sample([0.5] * 6, "image"), "psnr": sample([20.0] * 6, "image")}
    one = load_config(CONFIG, "smoke", ["data.noise_seeds=1"])
    three = load_config(CONFIG, "smoke", ["data.noise_seeds=3"])
    assert one.data.n_test == 6
    assert main_solves(one, {"p2l": rec}, "p2l", 0, 6, ("ssim", "psnr")) is not None
    assert main_solves(three, {"p2l": rec}, "p2l", 0, 6, ("ssim", "psnr")) is None
    assert main_solves(one, {"p2l": rec}, "p2l", 0, 3, ("ssim", "psnr")) is None
