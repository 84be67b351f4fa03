"""What a verdict rests on: grouped samples, folds, counts and knobs (shared.claims_evidence)."""
import numpy as np
import pytest
from scipy import stats

from shared.claims import FAIL, INCONCLUSIVE, PASS, ClaimsError, evaluate_claim
from shared.intervals import corrected_t_interval, t_interval
from shared.samples import count, gap, knob, sample


def claim(metric, test, **kw):
    return {"id": "p.c", "paper": "p", "claim": "c", "metric": metric, "test": test, "profiles": ["tiny"], **kw}


def decided(metrics, metric, test, **kw):
    return evaluate_claim(claim(metric, test, **kw), metrics, "tiny")


# ------------------------------------------------------------------ grouped samples (trained components)
def grouped(group_means, per_group=40, spread=0.01, seed=0):
    """Values around each group's mean: tight within a group, the groups far apart."""
    rng = np.random.default_rng(seed)
    values = np.concatenate([m + spread * rng.standard_normal(per_group) for m in group_means])
    groups = np.repeat(np.arange(len(group_means)), per_group)
    return sample(values, "image", groups=groups, group_unit="prior")


def test_one_prior_passes_at_unit_level_but_not_at_group_level():
    s = grouped([0.05])
    flat = {"m": sample(s["values"], "image")}
    assert decided(flat, "m", {"op": ">", "value": 0}).status == PASS          # 40 images of one prior
    r = decided({"m": s}, "m", {"op": ">", "value": 0})
    assert r.status == INCONCLUSIVE and r.n == 1 and r.unit == "prior"
    assert r.note.startswith("1 prior: needs ≥ 3 priors")


def test_groups_that_disagree_are_inconclusive_where_units_pass():
    s = grouped([0.08, -0.03, 0.06, 0.01])     # one prior reverses the sign
    assert decided({"m": sample(s["values"], "image")}, "m", {"op": ">", "value": 0}).status == PASS
    r = decided({"m": s}, "m", {"op": ">", "value": 0})
    assert r.status == INCONCLUSIVE and r.n == 4
    means = [np.mean(s["values"][i * 40:(i + 1) * 40]) for i in range(4)]
    assert (r.lo, r.hi) == pytest.approx(t_interval(means))
    assert "t on 4 priors' means of 160 images" in r.note


def test_three_well_separated_groups_pass():
    r = decided({"m": grouped([0.05, 0.06, 0.055])}, "m", {"op": ">", "value": 0})
    assert r.status == PASS and r.n == 3


def test_grouped_pairing_matches_group_and_unit_not_position():
    a = grouped([0.5, 0.6, 0.55], per_group=5)
    b = [v - 0.1 for v in a["values"]]
    # the ref written with its priors in another order (2, 0, 1), units in order within each prior
    idx = [*range(10, 15), *range(0, 5), *range(5, 10)]
    b_reordered = sample([b[i] for i in idx], "image", groups=[a["groups"][i] for i in idx], group_unit="prior")
    r = decided({"a": a, "b": b_reordered}, "a", {"op": ">", "ref": "b"})
    # the same gap on every unit: paired right, and a point (SD = 0) that decides nothing
    assert r.reproduced == pytest.approx(0.1) and r.hi - r.lo < 1e-9
    assert r.status == INCONCLUSIVE and "do not vary (SD = 0)" in r.note
    with pytest.raises(ClaimsError, match="one is grouped"):
        decided({"a": a, "b": sample(b, "image")}, "a", {"op": ">", "ref": "b"})
    fewer = sample(b[:10], "image", groups=a["groups"][:10], group_unit="prior")
    with pytest.raises(ClaimsError, match="pairs differ"):
        decided({"a": a, "b": fewer}, "a", {"op": ">", "ref": "b"})


# ------------------------------------------------------------------ folds
def test_corrected_resampled_t_matches_the_formula_and_is_wider():
    scores = [0.70, 0.74, 0.66, 0.72, 0.69]
    k = len(scores)
    mean, s2 = np.mean(scores), np.var(scores, ddof=1)
    t = stats.t.ppf(0.95, df=k - 1)
    half = t * np.sqrt((1 / k + 1 / (k - 1)) * s2)          # Nadeau & Bengio: (1/J + n_test/n_train)·s²
    assert corrected_t_interval(scores, 0.25) == pytest.approx((mean - half, mean + half))
    plain = t_interval(scores)
    assert plain[0] > mean - half and plain[1] < mean + half
    r = decided({"m": sample(scores, "fold")}, "m", {"op": ">", "value": 0.5})
    assert (r.lo, r.hi) == pytest.approx((mean - half, mean + half))
    assert "corrected resampled t" in r.note and "test/train 0.25" in r.note
    r = decided({"m": sample(scores, "fold", test_train_ratio=0.5)}, "m", {"op": ">", "value": 0.5})
    assert r.hi - r.lo == pytest.approx(2 * t * np.sqrt((1 / k + 0.5) * s2))


def test_a_fold_gap_that_passes_plainly_can_be_inconclusive_corrected():
    d = [0.030, 0.002, 0.045, -0.004, 0.028]
    assert t_interval(d)[0] > 0
    r = decided({"a": sample(d, "fold"), "b": sample([0.0] * 5, "fold")}, "a", {"op": ">", "ref": "b"})
    assert r.status == INCONCLUSIVE and r.lo < 0 < r.hi


def test_folds_of_cohorts_are_decided_on_the_cohort_means():
    values = [0.70, 0.72, 0.69, 0.71, 0.70] * 3
    cohorts = np.repeat([0, 1, 2], 5)
    r = decided({"m": sample(np.asarray(values) + np.repeat([0.0, 0.02, 0.01], 5), "fold", groups=cohorts,
                                group_unit="cohort")}, "m", {"op": ">", "value": 0.6})
    assert r.status == PASS and r.n == 3 and r.unit == "cohort"


# ------------------------------------------------------------------ counts
@pytest.mark.parametrize("k, n", [(9, 9), (1, 9), (384, 384), (7, 20)])
def test_counts_use_the_exact_binomial_interval(k, n):
    r = decided({"m": count(k, n)}, "m", {"op": ">=", "value": 0.5})
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
    assert (r.lo, r.hi) == pytest.approx((ci.low, ci.high)) and r.evidence == "count"
    assert r.note.startswith(f"p = {k / n:.4g}") and f"{k} of {n}" in r.note


def test_nine_of_nine_pass_and_one_of_nine_fails_against_one_half():
    assert decided({"m": count(9, 9)}, "m", {"op": ">=", "value": 0.5}).status == PASS
    assert decided({"m": count(1, 9)}, "m", {"op": ">=", "value": 0.5}).status == FAIL
    assert decided({"m": count(2, 2)}, "m", {"op": ">=", "value": 0.5}).status == INCONCLUSIVE
    with pytest.raises(ValueError):
        count(3, 2)


# ------------------------------------------------------------------ knobs
POINTS = [0.0, 0.25, 0.5, 1.0]


def sweep(means, noise=0.02, seeds=5, seed=0):
    rng = np.random.default_rng(seed)
    return knob("static_share", POINTS, [sample(m + noise * rng.standard_normal(seeds), "seed") for m in means])


def test_trend_rise_passes_reverse_fails_flat_noise_is_inconclusive():
    up = sweep([0.0, 0.1, 0.2, 0.4])
    assert decided({"m": up}, "m", {"trend": "increasing"}).status == PASS
    assert decided({"m": up}, "m", {"trend": "decreasing"}).status == FAIL
    down = sweep([0.4, 0.2, 0.1, 0.0])
    assert decided({"m": down}, "m", {"trend": "increasing"}).status == FAIL
    flat = sweep([0.1, 0.1, 0.1, 0.1], noise=0.3)
    assert decided({"m": flat}, "m", {"trend": "increasing"}).status == INCONCLUSIVE


def test_trend_is_the_interval_of_per_replicate_slopes():
    up = sweep([0.0, 0.1, 0.2, 0.4])
    r = decided({"m": up}, "m", {"trend": "increasing"})
    slopes = [stats.linregress(POINTS, [s["values"][i] for s in up["samples"]]).slope for i in range(5)]
    assert (r.lo, r.hi) == pytest.approx(t_interval(slopes)) and r.n == 5
    assert r.knob["points"] == POINTS and len(r.knob["lo"]) == 4


def test_trend_of_a_gap_subtracts_the_ref_knob_point_by_point():
    a, b = sweep([0.5, 0.5, 0.5, 0.5], seed=1), sweep([0.5, 0.4, 0.3, 0.1], seed=2)
    assert decided({"a": a, "b": b}, "a", {"trend": "increasing", "ref": "b"}).status == PASS


def test_holds_from_reports_the_first_knob_value_from_which_it_holds():
    m = sweep([-5.0, -3.5, 0.5, 1.0], noise=0.3)
    r = decided({"m": m}, "m", {"holds_from": {"op": ">=", "value": -2.0}})
    assert r.status == FAIL and r.knob["holds_from"] == 0.5
    assert r.knob["verdicts"] == [FAIL, FAIL, PASS, PASS] and "holds from static_share ≥ 0.5" in r.note
    assert decided({"m": m}, "m", {"holds_from": {"op": ">=", "value": -2.0}, "from": 0.5}).status == PASS
    nowhere = decided({"m": m}, "m", {"holds_from": {"op": ">=", "value": 5.0}})
    assert nowhere.status == FAIL and nowhere.knob["holds_from"] is None and "holds from nowhere" in nowhere.note


def test_holds_from_pairs_with_a_ref_knob():
    a, b = sweep([1.0, 1.0, 1.0, 1.0], seed=3), sweep([0.0, 0.5, 1.0, 1.5], seed=4)
    r = decided({"a": a, "b": b}, "a", {"holds_from": {"op": ">", "ref": "b"}})
    assert r.knob["verdicts"][:2] == [PASS, PASS] and r.knob["verdicts"][-1] == FAIL and r.status == FAIL


# ------------------------------------------------------------------ robustness over a world knob
def test_robust_over_counts_the_worlds_that_agree():
    m = {"m": sample([0.3, 0.31, 0.29, 0.3], "seed"), "w": sweep([0.3, 0.2, 0.1, -0.3], noise=0.01)}
    r = decided(m, "m", {"op": ">", "value": 0}, robust_over={"knob": "static_share", "metric": "w"})
    assert r.status == PASS and r.robust == "3/4 worlds of static_share"


def test_gap_keeps_groups_and_is_marked():
    a = sample([1.0, 2.0, 3.0], "seed", groups=[0, 1, 2], group_unit="base")
    g = gap(a, sample([0.5, 1.0, 1.0], "seed", groups=[0, 1, 2], group_unit="base"))
    assert g["gap"] and g["groups"] == [0, 1, 2] and g["values"] == [0.5, 1.0, 2.0]


def test_holds_from_fails_a_noisy_point_only_where_holm_reaches_it():
    steady = sample([0.1, -0.1, 0.05, -0.05, 0.0], "seed")
    noisy = sample(-2.6 + np.array([0.6, -0.6, 0.5, -0.5, 0.0]), "seed")     # alone: p ≈ 0.04 below -2
    m = knob("static_share", [0.0, 0.5, 1.0], [steady, steady, noisy])
    alone = decided({"m": m}, "m", {"holds_from": {"op": ">=", "value": -2.0}, "from": 1.0})
    assert alone.status == FAIL                                  # one point: Holm is the point's own test
    r = decided({"m": m}, "m", {"holds_from": {"op": ">=", "value": -2.0}})
    assert r.status == INCONCLUSIVE and r.knob["verdicts"] == [PASS, PASS, INCONCLUSIVE]
    clear = sample(-4.0 + np.array([0.1, -0.1, 0.05, -0.05, 0.0]), "seed")
    m = knob("static_share", [0.0, 0.5, 1.0], [steady, clear, noisy])
    r = decided({"m": m}, "m", {"holds_from": {"op": ">=", "value": -2.0}})
    assert r.status == FAIL and r.knob["decisive_point"] == 0.5 and r.hi < -2      # the failing point's interval


def test_a_sample_that_does_not_vary_decides_nothing_unless_accounting():
    same = {"m": sample([0.5, 0.5, 0.5], "seed")}
    r = decided(same, "m", {"op": ">=", "value": 0.1})
    assert r.status == INCONCLUSIVE and "do not vary (SD = 0)" in r.note and r.p is None
    assert decided(same, "m", {"op": ">=", "value": 0.1}, kind="accounting").status == PASS
    assert decided({"m": count(9, 9)}, "m", {"op": ">=", "value": 0.5}).status == PASS     # an exact count


def test_a_count_over_shared_components_is_decided_on_the_components():
    flat = decided({"m": count(8, 9)}, "m", {"op": ">=", "value": 0.5})
    assert flat.status == PASS and flat.n == 9
    split = count(8, 9, per_group={"b0": (3, 3), "b1": (2, 3), "b2": (3, 3)}, group_unit="base")
    r = decided({"m": split}, "m", {"op": ">=", "value": 0.5})
    assert r.n == 3 and r.unit == "base" and (r.lo, r.hi) == pytest.approx(t_interval([1.0, 2 / 3, 1.0]))
    assert "t on 3 bases' shares of 8 of 9 trials" in r.note
    every = count(9, 9, per_group={"b0": (3, 3), "b1": (3, 3), "b2": (3, 3)}, group_unit="base")
    assert decided({"m": every}, "m", {"op": ">=", "value": 0.5}).status == INCONCLUSIVE    # 3 bases, SD = 0
    with pytest.raises(ValueError, match="per_group"):
        count(9, 9, per_group={"b0": (3, 3)}, group_unit="base")
