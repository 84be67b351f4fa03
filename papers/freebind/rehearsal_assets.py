"""Stand-ins, in the real formats, for what FreeBind's full profile reads (`full.py`): the embedding
arrays of the nine datasets in the harness layout, and the released projectors' checkpoints
(`<folder>/{mix,A,T,V,AT,AV,TV}/best.pt`, Hugging Face Viglong/FreeBind), at small widths. One
dataset's arrays (ESC-50) are not drawn but made by `make_arrays.main` from a manifest of files, with
stand-in encoders that have the real ones' call signatures (ImageBind's `imagebind_huge`,
`ModalityType`, `load_and_transform_*`; laion_clap's `CLAP_Module`), so the array maker runs too.

The numbers are seeded draws: the rehearsal checks the layout and the code path, not the paper's result.
"""
from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import torch

from .bonds import MOP_POOLS
from .projector import Projector

MODALITIES = {"imagebind": ("audio", "image", "text"), "clap_g": ("audio", "text"), "clap_m": ("audio", "text"),
              "internvl": ("image", "text")}
SPECS = {"esc50": ("audio",), "audioset": ("audio",), "imagenet": ("image",), "audiocaps": ("text", "audio"),
         "clotho": ("text", "audio"), "vggss": ("audio", "image"), "flickrnet": ("audio", "image"),
         "coco": ("text", "image"), "flickr30k": ("text", "image")}
CLASSIFICATION = ("esc50", "audioset", "imagenet")
PROJECTORS = {"IB_PP_G_Proj": ("clap_g", "imagebind"), "IB_PP_M_Proj": ("clap_m", "imagebind"),
              "InternVL_IB_Proj": ("imagebind", "internvl"), "InternVL_IB_PP_G_Proj": ("clap_g", "internvl"),
              "InternVL_IB_PP_M_Proj": ("clap_m", "internvl")}
CLASSES = ("dog", "rain", "church bells", "siren")
MADE = "esc50"   # the dataset whose arrays make_arrays writes with the stand-in encoders


def write_arrays(emb_dir: Path, dims: dict, n_items: int, rng) -> None:
    """Every dataset but MADE: <space>_<modality>.npy, labels, classes.txt, prompts, caption_item (COCO
    and Clotho: two captions per item, as the real five)."""
    for ds, mods in SPECS.items():
        if ds == MADE:
            continue
        base = emb_dir / ds
        base.mkdir(parents=True, exist_ok=True)
        captions = 2 if ds in ("coco", "clotho") else 1
        for space, d in dims.items():
            for m in mods:
                if m in MODALITIES[space]:
                    n = n_items * (captions if m == "text" else 1)
                    np.save(base / f"{space}_{m}.npy", rng.standard_normal((n, d)).astype(np.float32))
            if ds in CLASSIFICATION and "text" in MODALITIES[space]:
                np.save(base / f"{space}_prompts.npy", rng.standard_normal((2 * len(CLASSES), d)).astype(np.float32))
        if ds == "audioset":
            np.save(base / "labels.npy", (rng.random((n_items, len(CLASSES))) < 0.4).astype(np.int64))
        elif ds in CLASSIFICATION:
            np.save(base / "labels.npy", rng.integers(0, len(CLASSES), n_items))
        if ds in CLASSIFICATION:
            (base / "classes.txt").write_text("\n".join(CLASSES) + "\n")
        if captions > 1:
            np.save(base / "caption_item.npy", np.repeat(np.arange(n_items), captions))


def write_projectors(proj_dir: Path, dims: dict, hidden: int, seed: int) -> None:
    """Each released folder's seven members as `best.pt` state dicts; IB_PP_M_Proj under other key
    names (the released layout's names are unverified [U]: `load_projector` maps them by order and shape)."""
    torch.manual_seed(seed)
    for folder, (a, b) in PROJECTORS.items():
        for member in MOP_POOLS:
            (proj_dir / folder / member).mkdir(parents=True, exist_ok=True)
            state = Projector(dims[a], dims[b], hidden=hidden).state_dict()
            if folder == "IB_PP_M_Proj":
                state = {f"proj.layer{i}": v for i, v in enumerate(state.values())}
            torch.save(state, proj_dir / folder / member / "best.pt")


class _StandInImageBind(torch.nn.Module):
    """ImageBind's interface: forward({modality: tensor}) -> {modality: embedding}, trainable weights."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.proj = torch.nn.Linear(d_in, d_out)

    def forward(self, inputs):
        return {k: self.proj(v) for k, v in inputs.items()}


def _load(items, device, d_in: int = 16):
    """load_and_transform_*(items, device): a tensor per item, seeded by the item's name."""
    rows = [torch.Generator().manual_seed(sum(map(ord, str(x)))) for x in items]
    return torch.stack([torch.randn(d_in, generator=g) for g in rows]).to(device)


class _StandInCLAP:
    """laion_clap.CLAP_Module's calls: load_ckpt, get_audio_embedding_from_filelist, get_text_embedding."""

    def __init__(self, enable_fusion: bool = False, amodel: str = "HTSAT-tiny", d_out: int = 8):
        self.proj = torch.nn.Linear(16, d_out)

    def load_ckpt(self, path):
        self.proj.load_state_dict(torch.load(path, weights_only=True))

    def get_audio_embedding_from_filelist(self, x, use_tensor=False):
        return self.proj(_load(x, "cpu")).numpy()

    def get_text_embedding(self, x, use_tensor=False):
        return self.proj(_load(x, "cpu")).numpy()


def install_stand_in_encoders(dims: dict) -> None:
    """Put stand-in `imagebind` and `laion_clap` packages in sys.modules (this process only)."""
    modality = types.SimpleNamespace(AUDIO="audio", VISION="vision", TEXT="text")
    model_mod = types.ModuleType("imagebind.models.imagebind_model")
    model_mod.imagebind_huge = lambda pretrained=False: _StandInImageBind(16, dims["imagebind"])
    model_mod.ModalityType = modality
    data_mod = types.ModuleType("imagebind.data")
    data_mod.load_and_transform_audio_data = data_mod.load_and_transform_vision_data = _load
    data_mod.load_and_transform_text = _load
    pkg, models = types.ModuleType("imagebind"), types.ModuleType("imagebind.models")
    pkg.data, pkg.models, models.imagebind_model = data_mod, models, model_mod
    clap = types.ModuleType("laion_clap")
    clap.CLAP_Module = lambda enable_fusion=False, amodel="HTSAT-tiny": _StandInCLAP(
        enable_fusion, amodel, dims["clap_g" if enable_fusion else "clap_m"])
    sys.modules.update({"imagebind": pkg, "imagebind.data": data_mod, "imagebind.models": models,
                        "imagebind.models.imagebind_model": model_mod, "laion_clap": clap})


def make_with_stand_ins(folder: Path, emb_dir: Path, dims: dict, n_items: int, seed: int) -> None:
    """MADE's arrays through `make_arrays.main`: a manifest of audio files with labels, classes.txt, and
    stand-in ImageBind / CLAP checkpoints (InternVL has no audio; ESC-50 has no InternVL arrays)."""
    from .make_arrays import main as make_arrays

    install_stand_in_encoders(dims)
    src = folder / "sources" / MADE
    (src / "audio").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lines = ["audio,label"]
    for i in range(n_items):
        wav = src / "audio" / f"{i:03d}.wav"
        wav.write_bytes(b"RIFF")   # the stand-ins read the name only
        lines.append(f"{wav},{rng.integers(0, len(CLASSES))}")
    (src / "manifest.csv").write_text("\n".join(lines) + "\n")
    (src / "classes.txt").write_text("\n".join(CLASSES) + "\n")
    ckpt = folder / "sources" / "checkpoints"
    ckpt.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    torch.save(_StandInImageBind(16, dims["imagebind"]).state_dict(), ckpt / "imagebind_huge.pth")
    for space in ("clap_g", "clap_m"):
        torch.save(torch.nn.Linear(16, dims[space]).state_dict(), ckpt / f"{space}.pt")
    make_arrays(["--dataset", MADE, "--manifest", str(src / "manifest.csv"), "--classes", str(src / "classes.txt"),
                 "--out", str(emb_dir), "--device", "cpu", "--imagebind", str(ckpt / "imagebind_huge.pth"),
                 "--clap_g", str(ckpt / "clap_g.pt"), "--clap_m", str(ckpt / "clap_m.pt")])


def write_assets(folder: str | Path, cfg, *, n_items: int = 24, seed: int = 0) -> dict:
    """Arrays and projectors at `cfg.full.dims` / `cfg.full.proj_hidden`; returns the `full` paths."""
    folder = Path(folder)
    dims = dict(cfg.full.dims)
    emb_dir, proj_dir = folder / "embeddings", folder / "projectors"
    write_arrays(emb_dir, dims, n_items, np.random.default_rng(seed))
    make_with_stand_ins(folder, emb_dir, dims, n_items, seed)
    write_projectors(proj_dir, dims, cfg.full.proj_hidden, seed)
    return {"embeddings_dir": str(emb_dir.resolve()), "projectors_dir": str(proj_dir.resolve())}


def main(argv=None) -> None:
    """`python -m papers.freebind.rehearsal_assets --out DIR`: the assets and DIR/overlay.yaml."""
    from shared.rehearsal import parser, rehearsal_config, write_overlay

    args = parser("freebind").parse_args(argv)
    config = Path(__file__).with_name("config.yaml")
    cfg = rehearsal_config(config, args.out)
    written = write_assets(args.out, cfg)
    if written != {k: str(cfg.full[k]) for k in written}:
        raise ValueError(f"papers/freebind/rehearsal.yaml's full paths differ from the assets written {written}")
    write_overlay(config, args.out)


if __name__ == "__main__":
    main()
