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


def test_long_loops_at_full_go_through_the_bar():
    """The loops that run for hours at full (P2L's DDIM solve, pixel DPS, EVEREST's test evaluation, E2GAN's teacher edits, FreeBind's bond training) iterate
    through `progress`."""
    import inspect

    from papers.e2gan.teacher import InstructPix2PixTeacher
    from papers.everest.train import scores
    from papers.freebind.bonds import train_bond
    from papers.p2l.pixel_dps import dps
    from papers.p2l.solver import solve

    for fn in (solve, dps, scores, InstructPix2PixTeacher.edit, train_bond):
        assert "in progress(" in inspect.getsource(fn) or "enumerate(progress(" in inspect.getsource(fn), fn.__name__
