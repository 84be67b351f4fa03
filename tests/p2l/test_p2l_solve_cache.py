"""Resuming a solving job per solver batch (`papers.p2l.solve_cache`): a rerun after a failure reads the
batches that finished and ends with the uninterrupted run's result."""
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from papers.p2l import solve_cache
from papers.p2l.experiments import EXPERIMENTS
from papers.p2l.experiments import problems
from papers.p2l.operators import build_operator
from shared.config import load_config

from test_p2l_solver import tiny_ldm

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "p2l" / "config.yaml"


@pytest.fixture
def setting(tmp_path):
    """A prior 'loaded' from a folder, six SR problems solved two a batch (three batches)."""
    prior = tmp_path / "prior"
    prior.mkdir()
    (prior / "weights.bin").write_bytes(b"w")
    ldm = tiny_ldm()
    ldm.source = str(prior)
    cfg = load_config(CONFIG, "smoke", ["solve.steps=3", "solve.batch_size=2"])
    x = torch.rand(6, 3, 16, 16, generator=torch.Generator().manual_seed(1)) * 2 - 1
    op = build_operator("sr", 16, factor=4)
    return SimpleNamespace(ldm=ldm, cfg=cfg, op=op, y=op.measure(x, 0), prior=prior, folder=tmp_path / "solves")


def _solve(s, **hp):
    return problems._solve_batches("p2l", s.y, s.op, s.ldm, s.cfg, 3, None, record_every=1,
                                   **{"rho": torch.tensor([0.5, 1.0, 2.0, 0.5, 1.0, 2.0]), "prompt_lr": 0.01, **hp})


def _counting(monkeypatch, fail_at=None):
    calls = []
    real = problems.solve

    def solve(*a, **kw):
        calls.append(kw["seed"])
        if len(calls) == fail_at:
            raise RuntimeError("killed")
        return real(*a, **kw)

    monkeypatch.setattr(problems, "solve", solve)
    return calls


def _same(a, b):
    x, nfe, _, traj, per_image, calls = a
    rx, rnfe, _, rtraj, rper, rcalls = b
    assert torch.equal(x, rx) and nfe == rnfe and traj == rtraj and calls == rcalls
    assert per_image.keys() == rper.keys() and all(np.array_equal(per_image[k], rper[k]) for k in per_image)


def test_a_rerun_after_a_failure_reads_the_finished_batches_and_equals_an_uninterrupted_run(setting, monkeypatch):
    reference = _solve(setting)   # no cache active: nothing written
    assert not setting.folder.exists()
    calls = _counting(monkeypatch, fail_at=3)
    with pytest.raises(RuntimeError, match="killed"):
        with solve_cache.batch_cache(setting.folder):
            _solve(setting)
    assert calls == [3, 5, 7] and len(list(setting.folder.glob("*.pt"))) == 2   # kept after the failure
    calls = _counting(monkeypatch)
    with solve_cache.batch_cache(setting.folder):
        resumed = _solve(setting)
        assert calls == [7]   # only the batch that had not finished
    _same(resumed, reference)
    assert not setting.folder.exists()   # removed when the experiment returned
    assert setting.folder.parent.exists()   # not the folder above while it holds anything else


def test_the_key_changes_with_what_the_batch_depends_on(setting, monkeypatch):
    y, ldm = setting.y[:2], setting.ldm
    hp = {"rho": torch.tensor([0.5, 1.0]), "z_init": torch.zeros(2, 4, 4, 4), "record_every": 1}

    def key(method="p2l", y=y, steps=3, seed=3, captions=None, **change):
        return solve_cache.batch_key(method, y, ldm, steps=steps, seed=seed, captions=captions,
                                     hparams={**hp, **change})

    base = key()
    assert key() == base
    others = [key(method="ldps"), key(y=y + 1e-6), key(steps=4), key(seed=4), key(captions=["a", "b"]),
              key(rho=torch.tensor([0.5, 1.5])), key(z_init=torch.ones(2, 4, 4, 4)), key(record_every=0),
              key(tau=5)]
    assert base not in others and len(set(others)) == len(others)
    with monkeypatch.context() as m:
        m.setattr(solve_cache, "code_digest", lambda: "the solving code changed")
        assert key() != base
    weights = setting.prior / "weights.bin"
    weights.write_bytes(b"retrained")   # the prior's folder changed
    os.utime(weights, ns=(1, 1))
    assert key() != base
    ldm.source = ""   # a prior built in memory: never cached
    assert key() is None


def test_the_solving_experiments_resume_in_their_own_folder(tmp_path):
    run = SimpleNamespace(out=tmp_path, experiment="main_sr")
    seen = solve_cache.resumable(lambda r: {"folder": solve_cache.active()})(run)
    assert seen["folder"] == tmp_path / "checkpoints" / "solves" / "main_sr" and solve_cache.active() is None
    assert not (tmp_path / "checkpoints" / "solves").exists()   # the empty folder above goes too
    wrapped = {name for name, fn in EXPERIMENTS.items() if getattr(fn, "__name__", "") == "run_resumable"}
    assert wrapped == {"main_sr", "main_gblur", "main_motion", "main_inpaint_box", "main_inpaint_random",
                       "ablation", "severity_knob", "steps_check"}
