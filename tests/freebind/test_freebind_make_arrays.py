"""`make_arrays.encoders` with a stand-in ImageBind package that has the real one's call signatures
(`imagebind_huge`, `ModalityType`, `load_and_transform_*`): its outputs come back as arrays, so no
encoder call keeps a graph (`.numpy()` on a tensor that requires grad raises)."""
import sys
import types

import numpy as np
import torch

from papers.freebind.make_arrays import encoders


class StandIn(torch.nn.Module):
    """ImageBind's interface: forward({modality: tensor}) -> {modality: embedding}, trainable weights."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, inputs):
        return {k: self.proj(v) for k, v in inputs.items()}


def install_stand_in_imagebind(monkeypatch):
    modality = types.SimpleNamespace(AUDIO="audio", VISION="vision", TEXT="text")
    model_mod = types.ModuleType("imagebind.models.imagebind_model")
    model_mod.imagebind_huge = lambda pretrained=False: StandIn()
    model_mod.ModalityType = modality
    data_mod = types.ModuleType("imagebind.data")
    load = lambda items, device: torch.ones(len(items), 4, device=device)   # noqa: E731
    data_mod.load_and_transform_audio_data = data_mod.load_and_transform_vision_data = load
    data_mod.load_and_transform_text = load
    pkg, models = types.ModuleType("imagebind"), types.ModuleType("imagebind.models")
    pkg.data, pkg.models, models.imagebind_model = data_mod, models, model_mod
    for name, mod in {"imagebind": pkg, "imagebind.data": data_mod, "imagebind.models": models,
                      "imagebind.models.imagebind_model": model_mod}.items():
        monkeypatch.setitem(sys.modules, name, mod)


def test_imagebind_encoders_return_arrays_without_a_graph(tmp_path, monkeypatch):
    install_stand_in_imagebind(monkeypatch)
    ckpt = tmp_path / "imagebind_huge.pth"
    torch.save(StandIn().state_dict(), ckpt)
    fns = encoders({"imagebind": str(ckpt)}, "cpu")["imagebind"]
    assert set(fns) == {"audio", "image", "text"}
    for fn in fns.values():
        out = fn(["a", "b"])
        assert isinstance(out, np.ndarray) and out.shape == (2, 3)
    assert torch.is_grad_enabled()   # the no-grad region ends with the call
