"""Claims decided as families: Holm over a paper's primaries, Benjamini–Hochberg over the secondaries,
on one-sided p-values from each interval's own statistic (shared.claims_multiplicity)."""
import json

import numpy as np
import pytest
from scipy import stats

from shared.claims import FAIL, INCONCLUSIVE, PASS, UNTESTABLE, evaluate, evaluate_claim
from shared.claims_multiplicity import benjamini_hochberg, holm
from shared.samples import count, sample


def test_holm_and_bh_equal_the_formulas_worked_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04; running max
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: p·m/rank = 0.02, 0.02, 0.04, 0.04; running min from the top
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert holm([0.02, 0.021, 0.5]) == pytest.approx([0.06, 0.06, 0.5])
    assert benjamini_hochberg([0.02, 0.021, 0.5]) == pytest.approx([0.0315, 0.0315, 0.5])
    assert holm([0.9, 0.8]) == [1.0, 1.0] and benjamini_hochberg([]) == []


def claim(metric, test, **kw):
    return {"id": f"p.{metric}", "paper": "p", "claim": "c", "metric": metric, "test": test, "profiles": ["tiny"], **kw}


def test_the_p_value_is_the_interval_s_own_test():
    """An end of the 90 % interval clears c exactly when the one-sided p-value is below 5 %."""
    x = [0.3, 0.9, 0.4, 0.7, 0.55]
    r = evaluate_claim(claim("m", {"op": ">=", "value": 0.3}), {"m": sample(x, "seed")}, "tiny")
    t = (np.mean(x) - 0.3) / stats.sem(x)
    assert r.status == PASS and r.p == pytest.approx(stats.t.sf(t, 4)) and r.lo > 0.3 and r.p < 0.05
    folds = sample(x, "fold", test_train_ratio=0.25)
    r = evaluate_claim(claim("m", {"op": ">=", "value": 0.3}), {"m": folds}, "tiny")
    se = np.std(x, ddof=1) * np.sqrt(1 / 5 + 0.25)
    assert r.p == pytest.approx(stats.t.sf((np.mean(x) - 0.3) / se, 4))
    r = evaluate_claim(claim("m", {"op": ">=", "value": 0.5}), {"m": count(9, 9)}, "tiny")
    assert r.status == PASS and r.p == pytest.approx(0.5 ** 9)
    r = evaluate_claim(claim("m", {"op": ">=", "value": 0.5}), {"m": count(1, 9)}, "tiny")
    assert r.status == FAIL and r.p == pytest.approx(stats.binom.cdf(1, 9, 0.5))


PRIMARIES = """\
- {id: p.strong, claim: x, metric: strong, test: {op: '>', value: 0}, primary: true, why: a}
- {id: p.weak, claim: x, metric: weak, test: {op: '>', value: 0}, primary: true, why: b}
- {id: p.noise, claim: x, metric: noise, test: {op: '>', value: 0}, primary: true, why: c}
- {id: p.second, claim: x, metric: weak, test: {op: '>', value: 0}}
"""
METRICS = {"strong": sample([1.0, 1.1, 0.9, 1.05, 0.95], "seed"),
           "weak": sample([0.5, -0.1, 0.9, 0.3, 0.6], "seed"),
           "noise": sample([0.2, -0.3, 0.1, -0.2, 0.25], "seed")}


def ledger(tmp_path, text, metrics):
    path = tmp_path / "p" / "claims.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    (tmp_path / "p" / "metrics.json").write_text(json.dumps(metrics))
    return {r.id: r for r in evaluate([path], tmp_path, "tiny")}


def test_a_primary_passes_alone_but_not_after_holm_among_three(tmp_path):
    r = ledger(tmp_path, PRIMARIES, METRICS)
    weak, strong, null = r["p.weak"], r["p.strong"], r["p.noise"]
    assert 0.05 / 3 < weak.p < 0.05 and weak.alone == PASS and weak.lo > 0      # its interval alone clears 0
    assert weak.status == INCONCLUSIVE and weak.family == "primary"
    assert weak.p_adjusted == pytest.approx(holm([strong.p, weak.p, null.p])[1]) and weak.p_adjusted > 0.05
    assert "not after Holm among 3 primary claims" in weak.note
    assert strong.status == PASS and strong.p_adjusted < 0.05                      # one that survives
    assert null.status == INCONCLUSIVE
    # the same sample, as a secondary alone in its family: BH over one claim keeps it, with its q shown
    assert r["p.second"].family == "secondary" and r["p.second"].status == PASS
    assert r["p.second"].p_adjusted == pytest.approx(r["p.second"].p)


def test_without_primaries_every_paper_claim_is_secondary_under_bh(tmp_path):
    text = PRIMARIES.replace(", primary: true, why: a", "").replace(", primary: true, why: b", "").replace(
        ", primary: true, why: c", "")
    r = ledger(tmp_path, text, METRICS)
    ps = [r[k].p for k in ("p.strong", "p.weak", "p.noise", "p.second")]
    qs = benjamini_hochberg(ps)
    assert [r[k].family for k in r] == ["secondary"] * 4
    assert [r[k].p_adjusted for k in ("p.strong", "p.weak", "p.noise", "p.second")] == pytest.approx(qs)
    assert [r[k].status == PASS for k in ("p.strong", "p.weak", "p.second")] == [q <= 0.10 for q in (qs[0], qs[1], qs[3])]


def test_a_failed_floor_makes_a_pass_and_a_fail_alike_untestable(tmp_path):
    text = """\
- {id: p.wins, claim: x, metric: strong, test: {op: '>', value: 0}, floors: [p.floor]}
- {id: p.loses, claim: x, metric: strong, test: {op: '<', value: 0}, floors: [p.floor]}
- {id: p.undecided, claim: x, metric: noise, test: {op: '>', value: 0}, floors: [p.floor]}
- {id: p.undecided_ok, claim: x, metric: noise, test: {op: '>', value: 0}, floors: [p.ok_floor]}
- {id: p.floor, kind: floor, why: w, claim: x, metric: noise, test: {op: '>', value: 1}}
- {id: p.ok_floor, kind: floor, why: w, claim: x, metric: strong, test: {op: '>', value: 0}}
"""
    r = ledger(tmp_path, text, METRICS)
    assert r["p.floor"].status == FAIL
    assert [r[k].alone for k in ("p.wins", "p.loses", "p.undecided")] == [PASS, FAIL, INCONCLUSIVE]
    assert [r[k].status for k in ("p.wins", "p.loses", "p.undecided")] == [UNTESTABLE] * 3
    assert r["p.loses"].note.startswith("fails alone, but its floor does not pass (p.floor FAIL)")
    assert r["p.wins"].lo is not None and r["p.wins"].family is None            # shown, not counted
    assert r["p.undecided_ok"].status == INCONCLUSIVE
