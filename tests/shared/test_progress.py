"""Long work shows progress at full and stays quiet in CI logs."""
from shared import loggers
from shared.progress import progress
from shared.training import show_progress


def test_bars_follow_the_profile_and_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(loggers, "RUN_CONTEXT", {"config": {"profile": "full"}})
    assert show_progress(False) is True                  # at full, whatever a training asks
    assert hasattr(progress(range(3), "solve"), "update")   # a tqdm bar
    monkeypatch.setattr(loggers, "RUN_CONTEXT", {"config": {"profile": "tiny"}})
    assert show_progress(False) is False and show_progress(None) is True
    assert progress(range(3), "solve") == range(3)       # tiny: plain loops
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(loggers, "RUN_CONTEXT", {"config": {"profile": "full"}})
    assert show_progress(True) is False and progress(range(3), "solve") == range(3)
