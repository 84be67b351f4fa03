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
    """A main_sr tuning on prior 0 (and on prior 1, which the knob must not read) at the main factor."""
    (out / "metrics").mkdir(parents=True)
    (out / "tables").mkdir()
    write_json(out / "metrics" / "main_sr.json", {"methods": {
        "ldps": {"tuned_by_prior": [{"rho": rho["ldps"]}, {"rho": 99.0}]},
        "p2l": {"tuned_by_prior": [{"rho": rho["p2l"], "prompt_lr": 0.01}, {"rho": 99.0, "prompt_lr": 0.01}]}}})
    rows = [{"prior": p, "task": "sr", "method": m, "rho": r, "prompt_lr": (0.01 if m == "p2l" else np.nan),
             "stage": "draw", "n_val": 1, "val_ssim": 0.5, "val_psnr": 20.0}
            for p in (0, 1) for m in ("ldps", "p2l") for r in (rho[m], 99.0)]
    pd.DataFrame(rows).to_csv(out / "tables" / "tuning_sr.csv", index=False)


def test_knob_tunes_and_solves_each_factor_on_the_same_images(tmp_path, monkeypatch):
    """Both methods tuned at every factor but the main table's own (4), where main_sr's prior-0 values are
    used; the same images at every factor."""
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "data.n_val=1", "knob.n=3"])
    ldm = tiny_ldm()
    monkeypatch.setattr(K, "load_prior", lambda cfg_, out_: ldm)
    _main_sr_tuning(tmp_path, {"ldps": 0.25, "p2l": 0.75})
    seen, tuned_at = [], []
    real, real_tune = K._solve_batches, K.tune

    def spy(method, y, op, *a, **kw):
        seen.append((method, op.factor, tuple(y.shape), float(kw["rho"])))
        return real(method, y, op, *a, **kw)

    def spy_tune(cfg_, m, task, op, *a, **kw):
        tuned_at.append((m, op.factor))
        return real_tune(cfg_, m, task, op, *a, **kw)

    monkeypatch.setattr(K, "_solve_batches", spy)
    monkeypatch.setattr(K, "tune", spy_tune)
    res = K.severity_knob(Run("p2l", "severity_knob", cfg, tmp_path))
    assert res["factors"] == [2, 4] and res["n"] == 3
    assert tuned_at == [("ldps", 2), ("p2l", 2)]
    assert [(m, f, s) for m, f, s, _ in seen] == [("ldps", 2, (3, 3, 8, 8)), ("p2l", 2, (3, 3, 8, 8)),
                                                 ("ldps", 4, (3, 3, 4, 4)), ("p2l", 4, (3, 3, 4, 4))]
    assert [r for *_, r in seen[2:]] == [0.25, 0.75]   # main_sr's prior-0 choices
    for k in ("ssim", "psnr"):
        p2l, ldps, gain = res["methods"]["p2l"][k], res["methods"]["ldps"][k], res["methods"]["gain"][k]
        assert is_knob(p2l) and p2l["points"] == [2.0, 4.0] and p2l["samples"][0]["n"] == 3
        for j in range(2):
            np.testing.assert_allclose(gain["samples"][j]["values"],
                                       np.subtract(p2l["samples"][j]["values"], ldps["samples"][j]["values"]))
    table = pd.read_csv(tmp_path / "tables" / "severity_knob_tuning.csv")
    assert sorted(table[table["factor"] == 4]["rho"]) == [0.25, 0.75, 99.0, 99.0]   # prior 0's rows only


def test_knob_without_the_main_tuning_stops_with_one_line(tmp_path, monkeypatch):
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "data.n_val=1", "knob.n=3", "knob.factors=[4]"])
    monkeypatch.setattr(K, "load_prior", lambda cfg_, out_: tiny_ldm())
    with pytest.raises(MissingAssetError, match="main_sr"):
        K.severity_knob(Run("p2l", "severity_knob", cfg, tmp_path))
