"""`python -m shared.claims --compare A B`: exactly the claims whose verdict differs between two records."""
import json
import subprocess
import sys

from conftest import REPO
from shared.claims_compare import differing, load_verdicts


def row(cid, status, est=0.1, lo=0.0, hi=0.2, n=3):
    return {"id": cid, "paper": cid.split(".")[0], "status": status, "reproduced": est, "lo": lo, "hi": hi, "n": n}


def write(path, rows, name="record.json"):
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_text(json.dumps({"profile": "tiny", "claims": rows}))
    return path


def test_compare_lists_exactly_the_changed_verdicts(tmp_path):
    a = write(tmp_path / "a", [row("p.same", "PASS"), row("p.moved_number", "FAIL", est=0.3),
                               row("p.flip", "PASS"), row("p.undecided", "INCONCLUSIVE"), row("p.gone", "PASS")])
    b = write(tmp_path / "b", [row("p.same", "PASS"), row("p.moved_number", "FAIL", est=0.5, lo=0.4, hi=0.6),
                               row("p.flip", "FAIL", est=-0.1, lo=-0.2, hi=-0.01), row("p.undecided", "UNTESTABLE"),
                               row("p.new", "PASS")], name="claims.json")
    assert [cid for cid, _, _ in differing(load_verdicts(a), load_verdicts(b / "claims.json"))] == ["p.flip", "p.undecided"]
    out = subprocess.run([sys.executable, "-m", "shared.claims", "--compare", str(a), str(b)], cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("2 of 4 claims in both change verdict"), out.stdout
    assert "p.flip: PASS → FAIL   0.1 [0, 0.2] n=3 → -0.1 [-0.2, -0.01] n=3" in out.stdout
    assert "p.undecided: INCONCLUSIVE → UNTESTABLE" in out.stdout
    assert "p.moved_number" not in out.stdout and "p.same" not in out.stdout
    assert "1 only in" in out.stdout and "p.gone" in out.stdout and "p.new" in out.stdout


def test_compare_of_the_record_with_itself_is_empty():
    record = load_verdicts(REPO / "record" / "tiny")
    assert record and differing(record, record) == []
