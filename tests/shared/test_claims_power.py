"""Power per claim and the replicates a primary claim needs (shared.claims_power, `--power`)."""
import json

import numpy as np
import pytest
from scipy import stats

from shared.claims import INCONCLUSIVE, evaluate_claim, main
from shared.samples import sample


def claim(metric, test, **kw):
    return {"id": "p.c", "paper": "p", "claim": "c", "metric": metric, "test": test, "profiles": ["tiny"], **kw}


def test_detectable_effect_is_the_noncentral_t_by_hand():
    # three seeds with SD 1: a one-sided 5 % t test has power 0.32 at 1 SD and needs 2.30 SD for 80 %
    r = evaluate_claim(claim("m", {"op": ">=", "value": 0.0}), {"m": sample([0.0, 1.0, 2.0], "seed")}, "tiny")
    crit = stats.t.isf(0.05, 2)
    assert stats.nct.sf(crit, 2, 1.0 * np.sqrt(3)) == pytest.approx(0.3218, abs=1e-4)
    assert r.detectable == pytest.approx(2.2973, abs=1e-4)
    assert stats.nct.sf(crit, 2, r.detectable * np.sqrt(3)) == pytest.approx(0.80)


def test_an_inconclusive_claim_says_the_n_its_effect_needs():
    x = [0.3, -0.2, 0.5, 0.1, 0.4]
    r = evaluate_claim(claim("m", {"op": ">=", "value": 0.0}), {"m": sample(x, "seed")}, "tiny")
    assert r.status == INCONCLUSIVE
    m, s = np.mean(x), np.std(x, ddof=1)
    power = [stats.nct.sf(stats.t.isf(0.05, n - 1), n - 1, m / (s / np.sqrt(n))) for n in range(2, 200)]
    assert r.needs == next(n for n, p in zip(range(2, 200), power) if p >= 0.8)
    assert r.needs > 5


def test_power_sizes_each_primary_from_a_pilot(tmp_path, repo, capsys):
    pilot = tmp_path / "smoke"
    (pilot / "toy").mkdir(parents=True)
    slopes = [2.01, 1.95, 2.04, 1.98]
    (pilot / "toy" / "metrics.json").write_text(json.dumps({"fit": {"slope": sample(slopes, "seed")}}))
    main(["--power", str(pilot), str(repo / "tests/fixtures/papers/toy/claims.yaml")])
    out = capsys.readouterr().out
    s = np.std(slopes, ddof=1)        # paper_effect 2.0 lies 0.1 inside the band 2.0 ± 0.1
    n = next(n for n in range(2, 1000)
             if stats.nct.sf(stats.t.isf(0.05, n - 1), n - 1, 0.1 / (s / np.sqrt(n))) >= 0.8)
    assert out.startswith("toy.slope: paper effect 2 is 0.1 from the threshold 1.9") and f"needs n ≈ {n} seeds" in out
