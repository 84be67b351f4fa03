"""Every tensor the generators see goes to the model's device; CUDA timings are synchronized.

The `meta` device stands in for CUDA: a model there fails on any input left on the CPU, as a CUDA model
would, and needs no GPU."""
from importlib import import_module
from pathlib import Path

import numpy as np
import torch

from papers.e2gan.experiments import Setup, forward_seconds, latency_table, synchronize
from papers.e2gan.explore import student_forward
from papers.e2gan.models import E2GANGenerator
from papers.e2gan.text import HashedTextEncoder
from shared.config import load_config
from shared.experiment import Run

latency_module = import_module("papers.e2gan.experiments.latency_table")   # the file, not its function
CONFIG = Path(__file__).resolve().parents[2] / "papers" / "e2gan" / "config.yaml"


def meta_run(tmp_path):
    cfg = load_config(CONFIG, "smoke", ["data.n_inputs=10", "data.resolution=16", "device=meta"])
    return Run("e2gan", "test", cfg, tmp_path)


def test_latency_table_runs_with_the_model_off_the_cpu(tmp_path):
    run = meta_run(tmp_path)
    assert Setup(run).device.type == "meta"
    metrics = latency_table(run)
    res = run.cfg.latency.resolutions[0]
    assert metrics[f"e2gan_{res}"]["flops"] > 0 and metrics[f"pix2pix_{res}"]["flops"] > 0


def test_explorer_forward_runs_with_the_model_off_the_cpu():
    enc = HashedTextEncoder(dim=8, max_tokens=4)
    G = E2GANGenerator(ngf=4, text_dim=8, heads=2).to("meta").eval()
    x = np.zeros((2, 16, 16, 3), np.float32)  # numpy images, tokens and mask all start on the CPU
    out = student_forward(G, enc, x, "blue pencil sketch")
    assert out.device.type == "meta" and out.shape == (2, 3, 16, 16)


def test_explorer_forward_matches_a_plain_cpu_forward():
    torch.manual_seed(0)
    enc = HashedTextEncoder(dim=8, max_tokens=4)
    G = E2GANGenerator(ngf=4, text_dim=8, heads=2).eval()
    x = np.random.default_rng(0).random((1, 16, 16, 3)).astype(np.float32)
    tokens, mask = enc.encode(["sepia"])
    with torch.no_grad():
        ref = G(torch.from_numpy(x).permute(0, 3, 1, 2) * 2 - 1, tokens, mask)
    assert torch.equal(student_forward(G, enc, x, "sepia"), ref)


def test_cuda_timing_is_synchronized(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(torch.device(device).type))
    synchronize(torch.device("cpu"))
    synchronize(torch.device("meta"))
    assert calls == []
    synchronize(torch.device("cuda"))
    assert calls == ["cuda"]

    # forward_seconds synchronizes before and after each timed forward on the input's device
    seen = []
    monkeypatch.setattr(latency_module, "synchronize", lambda device: seen.append(device.type))
    G = E2GANGenerator(ngf=4, text_dim=8, heads=2).eval()
    tokens, mask = HashedTextEncoder(dim=8, max_tokens=4).encode(["sepia"])
    times = forward_seconds(G, torch.zeros(1, 3, 16, 16), tokens, mask, repeats=3)
    assert len(times) == 3 and seen == ["cpu"] * 6


def test_a_cuda_fit_gets_warn_only_determinism(monkeypatch):
    """The generators pad with `nn.ReflectionPad2d`, whose CUDA backward has no deterministic kernel, and
    Lightning's `Trainer(deterministic=True)` turns strict mode on: a CUDA fit would raise at its first
    step. `train_gan` puts a CUDA fit in warn-only mode after building the trainer. Checked on the CPU:
    the trainer is asked for a GPU (the request recorded, then built on the CPU), and in the mode the fit
    leaves behind an op without a deterministic kernel (`put_`, which alerts on the CPU too) warns instead
    of raising; a CPU fit keeps strict mode."""
    import warnings

    import pytest

    import shared.training
    from papers.e2gan.models import PatchDiscriminator
    from papers.e2gan.train import Pairs, determinism_mode, train_gan

    real, asked = shared.training.make_trainer, []

    def trainer_on_the_cpu(*args, **kwargs):
        asked.append(kwargs.get("accelerator"))
        return real(*args, **{**kwargs, "accelerator": "cpu"})

    monkeypatch.setattr(shared.training, "make_trainer", trainer_on_the_cpu)
    torch.manual_seed(0)
    x = torch.rand(8, 3, 16, 16) * 2 - 1
    pairs = Pairs(x, -x, torch.randn(1, 2, 8), torch.ones(1, 2, dtype=torch.bool), torch.zeros(8, dtype=torch.long))
    alert = lambda: torch.zeros(3).put_(torch.tensor([0, 1]), torch.ones(2))  # noqa: E731
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        assert determinism_mode("cuda") == determinism_mode("cpu", "gpu") == "warn" and determinism_mode("cpu") is True
        train_gan(E2GANGenerator(4, 8, 2), PatchDiscriminator(8), pairs, 2, seed=0, batch_size=4,
                  options={"accelerator": "gpu"})
        assert asked == ["gpu"]
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            alert()
        assert any("deterministic" in str(w.message) for w in caught)
        train_gan(E2GANGenerator(4, 8, 2), PatchDiscriminator(8), pairs, 2, seed=0, batch_size=4)   # a CPU fit
        assert torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()
        with pytest.raises(RuntimeError, match="deterministic"):
            alert()
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
