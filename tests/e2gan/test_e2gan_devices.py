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
