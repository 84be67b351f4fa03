"""The CPU kernels pinned to one instruction set (shared/cpu_isa.py): one small training step and one P2L
solve, each in a fresh process, give bitwise the same numbers run after run under the pinned setting, and
other numbers under another capability (so the switch reaches the kernels the workflow runs)."""
import os
import subprocess
import sys

import pytest
import torch

from conftest import REPO
from shared import cpu_isa

# one Adam step of the tiny P2L prior's UNet on its denoising loss, then a 2-step P2L solve with that prior
SCRIPT = """
import hashlib, sys, torch
sys.path.insert(0, "tests/p2l")
torch.set_num_threads(1)
from test_p2l_solver import tiny_ldm
from papers.p2l import build_operator, solve
ldm = tiny_ldm()
g = torch.Generator().manual_seed(0)
unet = ldm.unet.train().requires_grad_(True)
opt = torch.optim.Adam(unet.parameters(), lr=1e-3)
z, noise = torch.randn(4, 4, 4, 4, generator=g), torch.randn(4, 4, 4, 4, generator=g)
C = ldm.embed(["red circle dark"] * 4)
loss = (unet(z + noise, torch.tensor([10, 200, 500, 900]), encoder_hidden_states=C).sample - noise).square().mean()
loss.backward()
opt.step()
step = torch.cat([p.detach().flatten() for p in unet.parameters()])
ldm.freeze()
op = build_operator("sr", 16, factor=4)
y = op.measure(torch.rand(2, 3, 16, 16, generator=g) * 2 - 1, 0)
x = solve("p2l", y, op, ldm, steps=2, seed=3).x
digest = lambda t: hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()[:16]
print(torch.backends.cpu.get_cpu_capability(), digest(step), digest(x))
"""


def run(**env):
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, **cpu_isa.PINNED, "OMP_NUM_THREADS": "1", **env})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


@pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() == "DEFAULT" and not cpu_isa.is_pinned(),
                    reason="this CPU has no AVX2: the pinned level cannot be reached")
def test_pinned_kernels_repeat_bitwise_and_another_capability_differs():
    first, second = run(), run()
    assert first[0] == "AVX2", first                  # the pin reached ATen
    assert first == second                            # training step and solve, bitwise, in two processes
    other = run(ATEN_CPU_CAPABILITY="default")
    assert other[0] == "DEFAULT"
    assert other[1:] != first[1:], "another capability gave the same bits: the pin would prove nothing"


def test_pin_fills_only_what_is_unset():
    env = {"ATEN_CPU_CAPABILITY": "default"}
    assert cpu_isa.pin(env) == {**cpu_isa.PINNED, "ATEN_CPU_CAPABILITY": "default"}
    assert not cpu_isa.is_pinned(env) and cpu_isa.is_pinned(cpu_isa.PINNED)
    assert cpu_isa.in_effect({}) == dict.fromkeys(cpu_isa.PINNED, "free")
    free = {cpu_isa.OPT_OUT: "free"}
    assert cpu_isa.pin(free) == dict.fromkeys(cpu_isa.PINNED, "free") and not cpu_isa.needs_pin(free)
    assert cpu_isa.needs_pin({"MKL_CBWR": "AUTO"}) and not cpu_isa.needs_pin(dict(cpu_isa.PINNED))


def test_smoke_and_tiny_runs_and_the_suite_are_pinned(repo):
    """The Snakefile pins its own environment at smoke and tiny, before any job starts; the suite runs pinned
    unless told otherwise (REPRO_CPU_ISA=free)."""
    text = (repo / "Snakefile").read_text()
    assert "if PROFILE in cpu_isa.PINNED_PROFILES:\n    cpu_isa.pin()" in text
    assert text.index("cpu_isa.pin()") < text.index("WARM_ENV =")
    assert set(cpu_isa.PINNED_PROFILES) == {"smoke", "tiny"}
    assert cpu_isa.is_free() or all(os.environ.get(k) for k in cpu_isa.PINNED)


def test_an_experiment_run_by_hand_at_tiny_or_smoke_runs_pinned(tmp_path):
    """`python -m <paper> <experiment>` outside the workflow starts again pinned (its provenance says so); a
    setting the user gave is kept, and REPRO_CPU_ISA=free pins nothing."""
    from conftest import FIXTURE_PAPERS

    env = {k: v for k, v in os.environ.items() if k not in cpu_isa.PINNED}
    for extra, want in (({}, cpu_isa.PINNED), ({"MKL_CBWR": "AUTO"}, {**cpu_isa.PINNED, "MKL_CBWR": "AUTO"}),
                        ({cpu_isa.OPT_OUT: "free"}, dict.fromkeys(cpu_isa.PINNED, "free"))):
        out = tmp_path / "_".join(extra.values() or ["none"])
        run = subprocess.run([sys.executable, "-m", "toy", "fit", "--profile", "smoke", "--out", str(out)],
                             env={**env, **extra, "PYTHONPATH": str(FIXTURE_PAPERS)}, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-2000:]
        import json

        sidecars = [json.loads(p.read_text()) for p in out.rglob("*.provenance.json")]
        assert sidecars and all(s["device"]["cpu_isa"] == want for s in sidecars), sidecars[0]["device"]
