"""A notebook opened before any run stops in one line that says what to run (no traceback)."""
import pytest

from shared.notebook import NotRunYet, require_results


def test_missing_results_say_what_to_run(tmp_path):
    with pytest.raises(NotRunYet) as err:
        require_results(tmp_path / "tiny/mmp", "mmp", "tiny")
    lines = err.value._render_traceback_()   # what Jupyter shows instead of a traceback
    assert len(lines) == 1 and "make reproduce" in lines[0]
    assert f"profile=tiny {tmp_path / 'tiny/mmp'}/metrics.json" in lines[0]
    (tmp_path / "tiny/mmp").mkdir(parents=True)
    (tmp_path / "tiny/mmp/metrics.json").write_text("{}")
    assert require_results(tmp_path / "tiny/mmp", "mmp", "tiny") == tmp_path / "tiny/mmp"
