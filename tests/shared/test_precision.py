"""Precision at the full profile follows each paper's official code, and reaches what runs: EVEREST's
Lightning Trainer (fp16 AMP on CUDA, fp32 on a CPU), P2L's Stable Diffusion weights (fp16 on CUDA),
E2GAN's InstructPix2Pix teacher (fp16), and the cost plan's precision column. No GPU needed: the Trainer
and the pipelines are replaced by recorders at the point they would be built."""
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from shared.config import load_config
from shared.training import make_trainer, resolve_precision

REPO = Path(__file__).resolve().parents[2]


def full(paper: str):
    return load_config(REPO / "papers" / paper / "config.yaml", "full")


class Built(Exception):
    """Raised by a recorder where the real object would be built."""


def recorder(store: dict):
    def build(*args, **kwargs):
        store.update(kwargs)
        raise Built
    return build


def test_fp16_amp_on_cuda_fp32_on_a_cpu():
    assert resolve_precision("16-mixed", "gpu") == "16-mixed"
    assert resolve_precision("16-mixed", "cuda") == "16-mixed"
    assert resolve_precision("16-mixed", "cpu") == "32-true"
    assert resolve_precision("bf16-mixed", "cpu") == "bf16-mixed"
    assert resolve_precision("32-true", "gpu") == "32-true"
    if not torch.cuda.is_available():
        assert resolve_precision("16-mixed", "auto") == "32-true"


def test_a_cpu_trainer_of_an_fp16_config_runs_fp32(tmp_path):
    trainer = make_trainer(tmp_path, seed=0, max_steps=1, accelerator="cpu", precision="16-mixed", loggers=False,
                           checkpoint=False)
    assert trainer.precision == "32-true"


def test_everest_full_precision_reaches_the_trainer(tmp_path, monkeypatch):
    import lightning

    from papers.everest.modules import train

    cfg = full("everest")
    assert cfg.trainer.precision == "16-mixed"
    module = SimpleNamespace(phase=SimpleNamespace(steps=10), losses=[])
    for device, expected in (("cuda", "16-mixed"), ("cpu", "32-true")):
        seen: dict = {}
        monkeypatch.setattr(lightning, "Trainer", recorder(seen))
        with pytest.raises(Built):
            train(module, None, cfg, 0, tmp_path / device, device)
        assert seen["precision"] == expected, device


def test_p2l_full_prior_loads_in_fp16_on_cuda(monkeypatch):
    from papers.p2l.experiments import problems as P

    cfg = full("p2l")
    assert cfg.solve.dtype == "float16"
    assert P.prior_dtype(cfg, "cuda") == torch.float16
    assert P.prior_dtype(cfg, "cpu") == torch.float32
    seen: dict = {}
    monkeypatch.setattr(P, "resolve_device", lambda _: torch.device("cuda"))
    monkeypatch.setattr(P, "require_path", lambda path, **_: path)
    monkeypatch.setattr(P, "load_stable_diffusion", lambda path, device, dtype: seen.update(dtype=dtype))
    P.load_prior(cfg, Path("unused"))
    assert seen["dtype"] == torch.float16


def test_e2gan_full_teacher_pipeline_in_fp16(monkeypatch):
    import diffusers

    from papers.e2gan.experiments import setup

    cfg = full("e2gan")
    assert cfg.trainer.precision == "32-true" and cfg.teacher.fp16
    seen: dict = {}
    monkeypatch.setattr(setup, "require_path", lambda path, **_: path)
    monkeypatch.setattr(diffusers.StableDiffusionInstructPix2PixPipeline, "from_pretrained", recorder(seen))
    with pytest.raises(Built):
        setup.make_teacher(cfg)
    assert seen["dtype"] == torch.float16


def test_the_plan_uses_each_papers_precision():
    from papers.everest.full_cost import job_costs as everest_costs
    from papers.p2l.full_cost import job_costs as p2l_costs

    ev = {c.experiment: c for c in everest_costs(full("everest"))}
    assert ev["pretrain_everest_seed"].precision == "16-mixed" and ev["finetune_videomae_seed"].precision == "16-mixed"
    p2l = {c.experiment: c for c in p2l_costs(full("p2l"))}
    assert p2l["main_sr"].precision == "16-true"
    assert p2l["floors"].precision == "32-true"
