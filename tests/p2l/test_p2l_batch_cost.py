"""tools/bench_p2l_batch.py: it times every arm at every batch size, with the reference at ratio 1, and
writes what it printed."""
import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_tool():
    spec = importlib.util.spec_from_file_location("bench_p2l_batch", REPO / "tools/bench_p2l_batch.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_the_batch_benchmark_times_each_arm_at_each_size(tmp_path):
    tool = load_tool()
    out = tool.main(["--batches", "2", "--reference", "3", "--steps", "1", "--repeats", "1",
                     "--save", str(tmp_path / "b.json")])
    assert {(r["arm"], r["batch"]) for r in out["rows"]} == {(a, b) for a in tool.ARMS for b in (2, 3)}
    assert all(r["cpu_ms_per_image_step"] > 0 for r in out["rows"])
    assert all(r["ratio_to_reference"] == 1.0 for r in out["rows"] if r["batch"] == 3)
    assert json.loads((tmp_path / "b.json").read_text()) == out
