"""Claim kinds: paper claims counted first, the rest apart; the audit's new checks (shared.claims_report,
shared.claims_audit)."""
import json

import pytest

from shared.claims import ClaimsError, evaluate, load_claims, write_ledger
from shared.claims_audit import audit_claim
from shared.samples import gap, sample


def test_fixture_paper_counts_each_kind_apart(tmp_path, repo):
    res = tmp_path / "smoke"
    (res / "toy").mkdir(parents=True)
    metrics = {"fit": {"slope": sample([2.01, 1.99, 2.0, 2.02], "seed"), "mse": sample([0.01, 0.012, 0.011, 0.009], "seed"),
                       "first_seed_slope": sample([2.01], "seed"), "n": 5}}
    (res / "toy" / "metrics.json").write_text(json.dumps(metrics))
    results = evaluate([repo / "tests/fixtures/papers/toy/claims.yaml"], res, "smoke")
    assert [r.kind for r in results] == ["paper", "paper", "floor", "diagnostic", "gate"]
    paths = write_ledger(results, res, "smoke")
    md = paths[1].read_text()
    assert ("paper claims 1 PASS · 1 FAIL · 0 INCONCLUSIVE; floors 0/1 PASS, 1 INCONCLUSIVE; "
            "gates 0/1 PASS, 1 NOT RUN; diagnostics 1 (not counted).") in md
    assert "| toy | 0 | 1 | 0 | 0 | 0 | 0/1 | 0/1 | – | 1 |" in md      # secondaries: toy.slope is primary
    primaries = md.split("## Primary claims")[1].split("Paper claims, all papers")[0]
    assert "| toy | toy.slope | **PASS** |" in primaries
    assert "2 claims tested; under this rule at most 0.2 false decisions are expected" in primaries
    assert "Paper claims, all papers: 1 PASS, 1 FAIL, 0 INCONCLUSIVE, 0 UNTESTABLE, 0 NOT RUN." in md
    summary = json.loads(paths[0].read_text())["summary"]["toy"]
    assert summary["paper"]["PASS"] == 1 and summary["diagnostic"]["NOT RUN"] == 1
    rows = md.split("## toy")[1].splitlines()
    kinds = [line.split(" | ")[1] for line in rows if line.startswith("| toy.")]
    assert kinds == ["paper", "paper", "floor", "gate", "diagnostic"]      # paper claims first


def test_kinds_are_validated_and_floor_true_reads_as_a_floor(tmp_path):
    path = tmp_path / "p" / "claims.yaml"
    path.parent.mkdir()
    path.write_text("- {id: p.a, claim: x, metric: m, test: {op: '>', value: 0}, floor: true}\n"
                    "- {id: p.b, claim: x, metric: m, test: {op: '>', value: 0}, floors: [p.a]}\n")
    assert [e["kind"] for e in load_claims(path)] == ["floor", "paper"]
    path.write_text("- {id: p.a, claim: x, metric: m, kind: headline, test: {op: '>', value: 0}}\n")
    with pytest.raises(ClaimsError, match="kind"):
        load_claims(path)
    path.write_text("- {id: p.a, claim: x, metric: m, test: {trend: upward}}\n")
    with pytest.raises(ClaimsError, match="trend"):
        load_claims(path)
    path.write_text("- {id: p.a, claim: x, metric: m, test: {op: '>', value: 0, trend: increasing}}\n")
    with pytest.raises(ClaimsError, match="exactly one"):
        load_claims(path)


def test_audit_refuses_a_paper_claim_computed_from_configuration():
    metrics = {"cost": {"from_config": ["flops_ratio"], "flops_ratio": 0.56, "measured_s": 1.2},
               "compression": {"from_config": True, "paper_dims": {"ratio": 400.0}}}
    entry = {"id": "p.a", "metric": "cost.flops_ratio", "test": {"op": "<=", "value": 0.6}, "kind": "paper"}
    assert any("configuration alone" in f for f in audit_claim(entry, metrics))
    assert audit_claim({**entry, "kind": "accounting"}, metrics) == []
    assert audit_claim({**entry, "metric": "cost.measured_s"}, metrics) == []
    nested = {**entry, "metric": "compression.paper_dims.ratio", "test": {"op": ">=", "value": 300}}
    assert any("configuration alone" in f for f in audit_claim(nested, metrics))


def test_audit_swaps_the_arms_of_a_constant_test_on_a_gap():
    a = sample([70.0, 71.0, 69.0], "seed")
    same = gap(a, sample([70.5, 70.0, 69.5], "seed"))
    entry = {"id": "p.a", "metric": "g", "test": {"op": ">=", "value": -2.0}}
    assert any("gap's two arms are swapped" in f for f in audit_claim(entry, {"g": same}))
    wins = gap(a, sample([50.0, 52.0, 49.0], "seed"))
    assert audit_claim(entry, {"g": wins}) == []
    tie = gap(a, a)                                    # one seed's tie at smoke: its own swap
    assert audit_claim(entry, {"g": {**tie, "values": [0.0], "n": 1}}) == []
    assert any("identical across all 3 seeds" in f for f in audit_claim(entry, {"g": tie}))
    one_seed = {**same, "values": [0.5], "n": 1}        # one smoke seed inside a margin: no interval to judge
    assert audit_claim(entry, {"g": one_seed}) == []
    plain = {**same}
    plain.pop("gap")
    assert audit_claim(entry, {"g": plain}) == []       # not marked a gap: not swapped


def test_the_audit_does_not_import_the_ledger():
    import ast
    import inspect

    import shared.claims_audit as audit

    tree = ast.parse(inspect.getsource(audit))
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "claims" not in modules and all(not (m or "").endswith(".claims") for m in modules)
