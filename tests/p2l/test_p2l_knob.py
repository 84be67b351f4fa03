"""The severity knob (`severity_knob`): both methods at every SR factor, paired by image along the knob."""
from pathlib import Path

import numpy as np

from papers.p2l.experiments import knob as K
from shared.config import load_config
from shared.experiment import Run
from shared.samples import is_knob

from test_p2l_solver import tiny_ldm

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "p2l" / "config.yaml"


def test_knob_tunes_and_solves_each_factor_on_the_same_images(tmp_path, monkeypatch):
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "data.n_val=1", "knob.n=3"])
    ldm = tiny_ldm()
    monkeypatch.setattr(K, "load_prior", lambda cfg_, out_: ldm)
    seen = []
    real = K._solve_batches

    def spy(method, y, op, *a, **kw):
        seen.append((method, op.factor, tuple(y.shape)))
        return real(method, y, op, *a, **kw)

    monkeypatch.setattr(K, "_solve_batches", spy)
    res = K.severity_knob(Run("p2l", "severity_knob", cfg, tmp_path))
    assert res["factors"] == [2, 4] and res["n"] == 3
    assert [(m, f, s) for m, f, s in seen] == [("ldps", 2, (3, 3, 8, 8)), ("p2l", 2, (3, 3, 8, 8)),
                                              ("ldps", 4, (3, 3, 4, 4)), ("p2l", 4, (3, 3, 4, 4))]
    for k in ("ssim", "psnr"):
        p2l, ldps, gain = res["methods"]["p2l"][k], res["methods"]["ldps"][k], res["methods"]["gain"][k]
        assert is_knob(p2l) and p2l["points"] == [2.0, 4.0] and p2l["samples"][0]["n"] == 3
        for j in range(2):
            np.testing.assert_allclose(gain["samples"][j]["values"],
                                       np.subtract(p2l["samples"][j]["values"], ldps["samples"][j]["values"]))
    assert (tmp_path / "tables" / "severity_knob.csv").is_file()
