import json

import numpy as np
import pytest
from scipy import stats

from shared.claims import (FAIL, INCONCLUSIVE, NOT_RUN, PASS, UNTESTABLE, ClaimsError, evaluate, evaluate_claim,
                           load_claims, write_ledger)
from shared.claims_audit import audit_claim
from shared.intervals import bootstrap_interval, mean_interval, t_interval
from shared.samples import sample

HIGH = sample([0.80, 0.82, 0.81, 0.83, 0.79], "fold")
LOW = sample([0.60, 0.62, 0.61, 0.58, 0.63], "fold")
WIDE = sample([0.50, 0.95, 0.70, 0.55, 0.90], "fold")
METRICS = {"cindex": {"high": HIGH, "low": LOW, "wide": WIDE, "one": sample([0.9], "seed"),
                      "seeds": sample([0.8, 0.82, 0.81, 0.83, 0.79], "seed"),
                      "summary": {"mean": 0.7, "std": 0.05}},
           "ratio": 312.0, "nan": float("nan"), "null": None}


def claim(**kw):
    base = {"id": "p.c", "paper": "p", "claim": "c", "metric": "ratio", "test": {"op": ">=", "value": 300},
            "profiles": ["tiny"], "paper_value": 312}
    base.update(kw)
    return base


def status(**kw):
    return evaluate_claim(claim(**kw), METRICS, "tiny").status


@pytest.mark.parametrize("test, expected", [
    ({"op": ">=", "value": 300}, PASS),
    ({"op": ">=", "value": 400}, FAIL),
    ({"op": "<=", "value": 400}, PASS),
    ({"op": "<", "value": 312}, FAIL),
    ({"op": "between", "value": [300, 320]}, PASS),
    ({"op": "between", "value": [0, 1]}, FAIL),
    ({"op": "within", "target": 310, "value": 3}, PASS),
    ({"op": "within", "target": 300, "value": 3}, FAIL),
])
def test_exact_numbers(test, expected):
    r = evaluate_claim(claim(test=test), METRICS, "tiny")
    assert r.status == expected and r.evidence == "exact" and r.note.startswith("exact")


def test_separated_reversed_and_overlapping_samples():
    assert status(metric="cindex.high", test={"op": ">", "ref": "cindex.low"}) == PASS
    assert status(metric="cindex.low", test={"op": ">", "ref": "cindex.high"}) == FAIL
    assert status(metric="cindex.wide", test={"op": ">", "ref": "cindex.high"}) == INCONCLUSIVE
    assert status(metric="cindex.high", test={"op": ">=", "value": 0.75}) == PASS
    assert status(metric="cindex.high", test={"op": "<=", "value": 0.75}) == FAIL
    assert status(metric="cindex.wide", test={"op": ">=", "value": 0.75}) == INCONCLUSIVE


def test_one_unit_is_inconclusive_never_pass():
    r = evaluate_claim(claim(metric="cindex.one", test={"op": ">=", "value": 0.1}), METRICS, "tiny")
    assert r.status == INCONCLUSIVE and r.note.startswith("1 seed: needs ≥ 3 seeds")


def test_pairing_by_unit():
    rng = np.random.default_rng(0)
    b = rng.uniform(0.0, 10.0, size=6)
    jitter = np.array([0.001, -0.001, 0.0005, -0.0005, 0.0002, -0.0002])    # a constant gap would be SD = 0
    metrics = {"a": sample(b + 0.01 + jitter, "seed"), "b": sample(b, "seed")}
    r = evaluate_claim(claim(metric="a", test={"op": ">", "ref": "b"}), metrics, "tiny")
    assert r.status == PASS and r.evidence == "paired" and r.n == 6
    assert r.note.startswith("Δ = +0.01 [") and r.note.endswith("n=6 seeds")
    # Unpaired, the two intervals overlap almost completely: no verdict could be reached.
    lo_a, hi_a = t_interval(b + 0.01)
    lo_b, hi_b = t_interval(b)
    assert lo_a < hi_b and lo_b < hi_a


def test_factor_scales_the_ref():
    r = evaluate_claim(claim(metric="cindex.low", test={"op": ">=", "ref": "cindex.high", "factor": 0.5}),
                       METRICS, "tiny")
    assert r.status == PASS


def test_within_is_an_equivalence_test():
    base = np.array([0.6, 0.7, 0.8, 0.65, 0.75])
    jitter = np.array([0.004, 0.006, 0.005, 0.003, 0.007])       # a constant gap would be SD = 0
    metrics = {"a": sample(base + jitter, "fold"), "b": sample(base, "fold"), "c": sample(base + 0.2 + jitter, "fold"),
               "d": sample(base + np.array([0.1, -0.1, 0.08, -0.09, 0.02]), "fold")}
    assert evaluate_claim(claim(metric="a", test={"op": "within", "ref": "b", "value": 0.03}), metrics, "tiny").status == PASS
    assert evaluate_claim(claim(metric="c", test={"op": "within", "ref": "b", "value": 0.03}), metrics, "tiny").status == FAIL
    assert evaluate_claim(claim(metric="d", test={"op": "within", "ref": "b", "value": 0.03}), metrics, "tiny").status == INCONCLUSIVE


def test_mismatched_units_or_n_name_both_metrics():
    with pytest.raises(ClaimsError, match="cindex.seeds.*cindex.high"):
        evaluate_claim(claim(metric="cindex.seeds", test={"op": ">", "ref": "cindex.high"}), METRICS, "tiny")
    metrics = {"a": sample([1, 2, 3], "seed"), "b": sample([1, 2, 3, 4], "seed")}
    with pytest.raises(ClaimsError, match="'a'.*'b'"):
        evaluate_claim(claim(metric="a", test={"op": ">", "ref": "b"}), metrics, "tiny")


def test_a_mean_without_values_is_inconclusive():
    r = evaluate_claim(claim(metric="cindex.summary", test={"op": ">=", "value": 0.1}), METRICS, "tiny")
    assert r.status == INCONCLUSIVE and "per-unit values" in r.note


def test_intervals_match_scipy():
    x = np.array([0.3, 0.9, 0.4, 0.7, 0.55, 0.61, 0.2])
    lo, hi = t_interval(x)
    ref = stats.t.interval(0.9, df=len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert np.allclose((lo, hi), ref)
    y = np.random.default_rng(3).normal(size=40)
    res = stats.bootstrap((y,), np.mean, confidence_level=0.9, n_resamples=2000, method="percentile",
                          rng=np.random.default_rng(0))
    assert np.allclose(bootstrap_interval(y), (res.confidence_interval.low, res.confidence_interval.high))
    assert mean_interval(x)[2] == "t" and mean_interval(y)[2] == "bootstrap"
    # The percentile bootstrap is the 5th and 95th percentile of resampled means.
    rng = np.random.default_rng(1)
    means = y[rng.integers(0, len(y), size=(20000, len(y)))].mean(axis=1)
    assert np.allclose(bootstrap_interval(y), np.percentile(means, [5, 95]), atol=0.03)


def test_sample_helper():
    s = sample([1.0, 2.0, 4.0], "seed")
    assert s["n"] == 3 and s["mean"] == pytest.approx(7 / 3) and s["std"] == pytest.approx(np.std([1, 2, 4], ddof=1))
    assert sample([5.0], "image")["std"] is None
    with pytest.raises(ValueError, match="unit"):
        sample([1.0], "run")


def test_missing_metric_is_not_run_never_pass():
    assert status(metric="nope") == NOT_RUN
    assert status(metric="null") == NOT_RUN   # a metric the run could not compute (JSON null): missing
    assert status(test={"op": ">=", "ref": "nope"}) == NOT_RUN
    assert evaluate_claim(claim(), None, "tiny").status == NOT_RUN


def test_other_profile_is_not_run_but_shows_value():
    r = evaluate_claim(claim(), METRICS, "smoke")
    assert r.status == NOT_RUN and r.reproduced == 312.0


def test_nan_fails():
    assert status(metric="nan") == FAIL


def test_audit_flags_unfalsifiable_claims_and_passes_sound_ones():
    same = claim(metric="cindex.high", test={"op": ">=", "ref": "cindex.high"})
    assert any("same key" in f for f in audit_claim(same, METRICS))
    metrics = {"x": sample([0.5, 0.5, 0.5], "fold"), "y": sample([0.5, 0.5, 0.5], "fold"), **METRICS}
    flagged = audit_claim(claim(metric="x", test={"op": ">=", "ref": "y"}), metrics)
    assert any("swapped" in f for f in flagged) and any("identical across all 3 folds" in f for f in flagged)
    assert audit_claim(claim(metric="cindex.high", test={"op": ">", "ref": "cindex.low"}), METRICS) == []
    assert audit_claim(claim(metric="cindex.high", test={"op": "within", "ref": "cindex.low", "value": 1}), METRICS) == []
    assert any("without per-unit" in f for f in audit_claim(claim(metric="cindex.summary"), METRICS))


def test_a_pass_with_a_failing_floor_is_untestable(tmp_path):
    path = tmp_path / "p" / "claims.yaml"
    path.parent.mkdir()
    path.write_text(
        "- {id: p.beats_baseline, claim: x, metric: cindex.high, test: {op: '>', ref: cindex.low}, floors: [p.beats_floor]}\n"
        "- {id: p.beats_floor, claim: y, metric: cindex.high, test: {op: '>', value: 0.9}, floor: true}\n")
    (tmp_path / "p" / "metrics.json").write_text(json.dumps(METRICS))
    results = evaluate([path], tmp_path, "tiny")
    assert [r.status for r in results] == [UNTESTABLE, FAIL]
    assert results[0].note.startswith("passes alone, but its floor does not pass (p.beats_floor FAIL)")
    path.write_text("- {id: p.a, claim: x, metric: m, test: {op: '>', value: 0}, floors: [p.nope]}\n")
    with pytest.raises(ClaimsError, match="floors"):
        load_claims(path)


def test_malformed_claims_are_refused(tmp_path):
    path = tmp_path / "p" / "claims.yaml"
    path.parent.mkdir()
    path.write_text("- {id: a, claim: x, metric: m, test: {op: '~=', value: 1}}\n")
    with pytest.raises(ClaimsError, match="op must be one of"):
        load_claims(path)
    path.write_text("- {id: a, claim: x, test: {op: '>=', value: 1}}\n")
    with pytest.raises(ClaimsError, match="lacks \\['metric'\\]"):
        load_claims(path)


def test_ledger_files_show_all_four_statuses(tmp_path, repo):
    claims = repo / "tests/fixtures/papers/toy/claims.yaml"
    res = tmp_path / "smoke"
    (res / "toy").mkdir(parents=True)
    metrics = {"fit": {"slope": sample([2.01, 1.99, 2.0, 2.02], "seed"), "mse": sample([0.01, 0.012, 0.011, 0.009], "seed"),
                       "first_seed_slope": sample([2.01], "seed"), "n": 5}}
    (res / "toy" / "metrics.json").write_text(json.dumps(metrics))
    results = evaluate([claims], res, "smoke")
    assert {r.status for r in results} == {PASS, FAIL, INCONCLUSIVE, NOT_RUN}
    paths = write_ledger(results, res, "smoke", plot=True)
    data = json.loads(paths[0].read_text())
    assert data["profile"] == "smoke"
    assert set(data["claims"][0]) >= {"id", "paper", "claim", "paper_value", "reproduced", "lo", "hi", "n", "status"}
    md = paths[1].read_text()
    assert "## toy" in md and "| toy |" in md and "**INCONCLUSIVE**" in md
    assert [p.suffix for p in paths[2:]] == [".png", ".pdf"] and paths[2].stat().st_size > 1000


def test_every_shipped_claims_file_is_valid(repo):
    for path in [*repo.glob("papers/*/claims.yaml"), *repo.glob("kernels/claims.yaml")]:
        assert load_claims(path)


# ------------------------------------------------------------------ 0/1 samples: exact binomial interval
def test_proportion_interval_is_clopper_pearson():
    from shared.intervals import proportion_interval

    # all hits: the exact lower end is ((1 − level)/2)^(1/n), never 1 (the normal approximation gives [1, 1])
    lo, hi = proportion_interval(384, 384)
    assert lo == pytest.approx(0.05 ** (1 / 384)) and lo < 0.993 and hi == 1.0
    # in the middle: beta quantiles, independent of the implementation
    lo, hi = proportion_interval(7, 20)
    assert (lo, hi) == pytest.approx((stats.beta.ppf(0.05, 7, 14), stats.beta.ppf(0.95, 8, 13)))
    assert proportion_interval(0, 10) == pytest.approx((0.0, 1 - 0.05 ** (1 / 10)))


def test_an_all_correct_binary_sample_is_a_claim_that_could_fail():
    hits = {"all": sample([1] * 384, "image", binary=True), "few": sample([1] * 5, "image", binary=True),
            "one_miss": sample([1] * 9 + [0], "image", binary=True), "plain": sample([1] * 384, "image")}
    ev = evaluate_claim(claim(metric="acc.all", test={"op": ">=", "value": 0.8}), {"acc": hits}, "tiny")
    assert ev.status == PASS and ev.lo == pytest.approx(0.05 ** (1 / 384)) and ev.hi == 1.0
    # five hits out of five: the exact interval [0.55, 1] does not clear 0.8 (the bootstrap's [1, 1] would)
    few = evaluate_claim(claim(metric="acc.few", test={"op": ">=", "value": 0.8}), {"acc": hits}, "tiny")
    assert few.status == INCONCLUSIVE and few.lo == pytest.approx(0.05 ** (1 / 5))
    miss = evaluate_claim(claim(metric="acc.one_miss", test={"op": ">=", "value": 0.99}), {"acc": hits}, "tiny")
    assert miss.status == INCONCLUSIVE and miss.hi < 1
    # the audit: a constant 0/1 sample decided alone is sound; unmarked, or against a ref, it is still flagged
    assert audit_claim(claim(metric="acc.all", test={"op": ">=", "value": 0.8}), {"acc": hits}) == []
    assert any("identical" in f for f in audit_claim(claim(metric="acc.plain", test={"op": ">=", "value": 0.8}),
                                                     {"acc": hits}))
    assert any("identical" in f for f in audit_claim(
        claim(metric="acc.all", test={"op": ">=", "ref": "acc.plain"}), {"acc": hits}))


def test_binary_sample_holds_only_zeros_and_ones():
    assert sample([0, 1, 1], "image", binary=True)["binary"] is True
    assert "binary" not in sample([0, 1, 1], "image")
    with pytest.raises(ValueError, match="0/1"):
        sample([0, 0.5, 1], "image", binary=True)
