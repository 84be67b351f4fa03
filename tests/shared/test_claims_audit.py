"""The audit across claims: gates that guard nothing, floors without a reason, duplicate claims and
claims that cannot fail here (shared.claims_audit)."""
import json

from shared.claims import evaluate, main, write_ledger
from shared.claims_audit import audit_files, structural_findings
from shared.claims_spec import load_claims
from shared.samples import sample

TOY = "tests/fixtures/papers/toy/claims.yaml"


def smoke_metrics(res):
    (res / "toy").mkdir(parents=True)
    (res / "toy" / "metrics.json").write_text(json.dumps({"fit": {
        "slope": sample([2.01, 1.99, 2.0, 2.02], "seed"), "mse": sample([0.01, 0.012, 0.011, 0.009], "seed"),
        "first_seed_slope": sample([2.01], "seed"), "n": 5}}))


def test_the_fixture_paper_s_orphan_gate_is_refused(tmp_path, repo, capsys):
    found = structural_findings(load_claims(repo / TOY))
    assert list(found) == ["toy.not_at_smoke"] and "guards no claim" in found["toy.not_at_smoke"][0]
    smoke_metrics(tmp_path)
    flagged, _ = audit_files([repo / TOY], tmp_path)
    assert "toy.not_at_smoke" in flagged
    try:
        main(["--audit", "--results", str(tmp_path), str(repo / TOY)])
    except SystemExit as stop:
        assert stop.code == 1
    assert "toy.not_at_smoke: a gate that guards no claim" in capsys.readouterr().out


def test_a_floor_needs_its_reason_and_a_named_gate_is_no_orphan(tmp_path):
    path = tmp_path / "p" / "claims.yaml"
    path.parent.mkdir()
    path.write_text("- {id: p.a, claim: x, metric: m, test: {op: '>', value: 0}, floors: [p.f, p.g]}\n"
                    "- {id: p.f, kind: floor, claim: x, metric: m, test: {op: '>', value: 0}}\n"
                    "- {id: p.g, kind: gate, claim: x, metric: m, test: {op: '>', value: 0}}\n")
    assert structural_findings(load_claims(path)) == {"p.f": ["a floor without why: (why it bears on the claims naming it)"]}


def test_the_duplicate_claim_and_one_that_cannot_fail_are_listed_in_claims_md(tmp_path, repo):
    claims = tmp_path / "toy" / "claims.yaml"
    claims.parent.mkdir()
    claims.write_text((repo / TOY).read_text() + (
        "- {id: toy.slope_again, claim: x, metric: fit.slope, test: {op: '>=', value: 1.9}}\n"
        "- {id: toy.slope_above, claim: x, metric: fit.slope, test: {op: '>=', value: 1.95}}\n"
        "- {id: toy.slope_positive, claim: x, metric: fit.slope, test: {op: '>', value: 0.1}}\n"))
    res = tmp_path / "smoke"
    smoke_metrics(res)
    r = {c.id: c for c in evaluate([claims], res, "smoke")}
    assert r["toy.slope_above"].audit == ["decided on the same sample, in the same direction, as toy.slope_again"]
    assert any(a.startswith("cannot fail here") for a in r["toy.slope_positive"].audit)
    assert r["toy.slope"].audit == []                      # a two-sided band: not the same direction
    md = write_ledger(list(r.values()), res, "smoke")[1].read_text()
    assert "decided on the same sample, in the same direction, as toy.slope_again" in md
    assert "cannot fail here" in md
