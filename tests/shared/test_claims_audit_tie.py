"""The audit's swap test on one-seed metrics: a tie that a CPU's rounding can break decides nothing."""
from shared.claims_audit import audit_claim
from shared.samples import sample

ENTRY = {"id": "p.x_ge_r", "paper": "p", "kind": "paper", "metric": "x", "test": {"op": ">=", "ref": "r"}}


def test_a_one_seed_tie_is_not_flagged_and_a_structural_one_is():
    tie = {"x": sample([0.5], "seed"), "r": sample([0.5], "seed")}
    assert audit_claim(ENTRY, tie) == []
    assert audit_claim({**ENTRY, "test": {"op": ">", "ref": "r"}}, tie) == []
    # an exact quantity equal to its ref is a form, not a chance: still flagged
    assert any("swapped" in f for f in audit_claim(ENTRY, {"x": 2.0, "r": 2.0}))
    # three seeds tied on every one: the swap test runs, and flags it
    three = {"x": sample([0.5, 0.6, 0.7], "seed"), "r": sample([0.5, 0.6, 0.7], "seed")}
    assert audit_claim(ENTRY, three)
