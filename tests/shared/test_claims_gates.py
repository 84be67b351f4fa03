"""Gates as preconditions (`guards:`): a claim over priors rests on every prior passing its gate, and
is UNTESTABLE, whichever way it points, when one does not (shared.claims.apply_gates)."""
import json

import pytest

from shared.claims import FAIL, PASS, UNTESTABLE, ClaimsError, evaluate, load_claims
from shared.samples import sample

# three priors, four images each: method a beats b on every prior; c loses to b on every prior
PRIORS = [0] * 4 + [1] * 4 + [2] * 4
A = sample([0.8, 0.82, 0.81, 0.83, 0.79, 0.81, 0.8, 0.8, 0.82, 0.83, 0.84, 0.82], "image", groups=PRIORS, group_unit="prior")
B = sample([0.6, 0.61, 0.62, 0.6] * 3, "image", groups=PRIORS, group_unit="prior")
C = sample([0.4, 0.41, 0.42, 0.4, 0.38, 0.4, 0.41, 0.4, 0.43, 0.42, 0.42, 0.41], "image", groups=PRIORS, group_unit="prior")
IMAGES = sample([0.8, 0.82, 0.81, 0.83, 0.79], "image")
METRICS = {"a": A, "b": B, "c": C, "images": IMAGES, "freq": {"good": 0.5, "bad": 0.7}}

CLAIMS = """\
- {id: p.a_beats_b, claim: x, metric: a, test: {op: '>', ref: b}}
- {id: p.c_beats_b, claim: x, metric: c, test: {op: '>', ref: b}}
- {id: p.over_images, claim: x, metric: images, test: {op: '>', value: 0.5}}
- {id: p.gate_good, claim: x, kind: gate, guards: prior, metric: freq.good, test: {op: within, target: 0.5, value: 0.1}}
- {id: p.gate_second, claim: x, kind: gate, guards: prior, metric: freq.%s, test: {op: within, target: 0.5, value: 0.1}}
"""


def ledger(tmp_path, second: str):
    path = tmp_path / "p" / "claims.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(CLAIMS % second)
    (tmp_path / "p" / "metrics.json").write_text(json.dumps(METRICS))
    return {r.id: r for r in evaluate([path], tmp_path, "tiny")}


def test_claims_over_priors_need_every_prior_gate(tmp_path):
    ok = ledger(tmp_path, "good")
    assert [ok[k].status for k in ("p.a_beats_b", "p.c_beats_b", "p.over_images")] == [PASS, FAIL, PASS]
    assert ok["p.a_beats_b"].unit == "prior" and ok["p.a_beats_b"].gates == ["p.gate_good", "p.gate_second"]
    bad = ledger(tmp_path, "bad")
    assert bad["p.gate_second"].status == FAIL
    # a PASS and a FAIL over priors both rest on the failing gate; the claim over images does not
    assert [bad[k].status for k in ("p.a_beats_b", "p.c_beats_b", "p.over_images")] == [UNTESTABLE, UNTESTABLE, PASS]
    assert bad["p.a_beats_b"].note.startswith("passes alone, but its priors' gates do not all pass (p.gate_second FAIL)")
    assert bad["p.a_beats_b"].alone == PASS and bad["p.a_beats_b"].lo > 0      # its own interval, shown beside
    assert bad["p.c_beats_b"].note.startswith("fails alone, but its priors' gates")
    assert bad["p.over_images"].gates == []


def test_guards_is_for_a_gate_on_a_trained_unit(tmp_path):
    path = tmp_path / "p" / "claims.yaml"
    path.parent.mkdir()
    path.write_text("- {id: p.a, claim: x, metric: m, guards: prior, test: {op: '>', value: 0}}\n")
    with pytest.raises(ClaimsError, match="guards"):
        load_claims(path)
    path.write_text("- {id: p.a, claim: x, kind: gate, metric: m, guards: image, test: {op: '>', value: 0}}\n")
    with pytest.raises(ClaimsError, match="guards"):
        load_claims(path)
