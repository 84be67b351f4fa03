import json

import pytest

from shared.claims import FAIL, NOT_RUN, PASS, ClaimsError, evaluate, evaluate_claim, load_claims, write_ledger

METRICS = {"cindex": {"mmp": {"mean": 0.7, "std": 0.05}, "abmil": {"mean": 0.65}}, "ratio": 312.0, "nan": float("nan")}


def claim(**kw):
    base = {"id": "p.c", "paper": "p", "claim": "c", "metric": "ratio", "test": {"op": ">=", "value": 300},
            "profiles": ["tiny"], "paper_value": 312}
    base.update(kw)
    return base


@pytest.mark.parametrize("test, status", [
    ({"op": ">=", "value": 300}, PASS),
    ({"op": ">=", "value": 400}, FAIL),
    ({"op": "<=", "value": 400}, PASS),
    ({"op": "between", "value": [300, 320]}, PASS),
    ({"op": "between", "value": [0, 1]}, FAIL),
    ({"op": "within", "target": 310, "value": 3}, PASS),
    ({"op": "within", "target": 300, "value": 3}, FAIL),
])
def test_ops(test, status):
    assert evaluate_claim(claim(test=test), METRICS, "tiny").status == status


def test_ref_to_another_metric_and_mean_summaries():
    r = evaluate_claim(claim(metric="cindex.mmp", test={"op": ">=", "ref": "cindex.abmil"}), METRICS, "tiny")
    assert r.status == PASS and r.reproduced == 0.7
    r = evaluate_claim(claim(metric="cindex.abmil", test={"op": ">=", "ref": "cindex.mmp"}), METRICS, "tiny")
    assert r.status == FAIL
    r = evaluate_claim(claim(metric="cindex.abmil", test={"op": "within", "ref": "cindex.mmp", "value": 0.03}),
                       METRICS, "tiny")
    assert r.status == FAIL


def test_missing_metric_is_not_run_never_pass():
    assert evaluate_claim(claim(metric="nope"), METRICS, "tiny").status == NOT_RUN
    assert evaluate_claim(claim(test={"op": ">=", "ref": "nope"}), METRICS, "tiny").status == NOT_RUN
    assert evaluate_claim(claim(), None, "tiny").status == NOT_RUN


def test_other_profile_is_not_run_but_shows_value():
    r = evaluate_claim(claim(), METRICS, "smoke")
    assert r.status == NOT_RUN and r.reproduced == 312.0


def test_nan_fails():
    assert evaluate_claim(claim(metric="nan"), METRICS, "tiny").status == FAIL


def test_malformed_claims_are_refused(tmp_path):
    path = tmp_path / "p" / "claims.yaml"
    path.parent.mkdir()
    path.write_text("- {id: a, claim: x, metric: m, test: {op: '~=', value: 1}}\n")
    with pytest.raises(ClaimsError, match="op must be one of"):
        load_claims(path)
    path.write_text("- {id: a, claim: x, test: {op: '>=', value: 1}}\n")
    with pytest.raises(ClaimsError, match="lacks \\['metric'\\]"):
        load_claims(path)


def test_ledger_files(tmp_path, repo):
    claims = repo / "tests/fixtures/papers/toy/claims.yaml"
    res = tmp_path / "smoke"
    (res / "toy").mkdir(parents=True)
    (res / "toy" / "metrics.json").write_text(json.dumps({"fit": {"slope": 2.01, "mse": 0.01, "n": 5}}))
    results = evaluate([claims], res, "smoke")
    assert [r.status for r in results] == [PASS, FAIL, NOT_RUN, NOT_RUN]
    jpath, mpath = write_ledger(results, res, "smoke")
    data = json.loads(jpath.read_text())
    assert data["profile"] == "smoke"
    assert set(data["claims"][0]) >= {"id", "paper", "claim", "paper_value", "reproduced", "test", "status"}
    md = mpath.read_text()
    assert "| toy.slope | toy |" in md and "**PASS**" in md and "1 PASS, 1 FAIL, 2 NOT RUN" in md


def test_every_shipped_claims_file_is_valid(repo):
    for path in [*repo.glob("papers/*/claims.yaml"), *repo.glob("kernels/claims.yaml")]:
        assert load_claims(path)
