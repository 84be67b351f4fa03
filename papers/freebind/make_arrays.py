"""How the full profile's embedding arrays are made from the real checkpoints (GPU machine).

    # in a separate environment: ImageBind (from its repository), laion_clap (its text branch needs
    # transformers <= 4.30.2, older than this repo's pin) and InternVL's remote-code dependencies
    python -m papers.freebind.make_arrays --dataset esc50 --manifest esc50.csv --out /data/freebind/embeddings

`--manifest` is a CSV with columns `audio` / `image` / `text` (paths or caption strings; one row per
item; retrieval rows are the ground-truth pairs; several captions per item go in `text`, `text_2`,
… `text_5`) and, for classification, `label` plus a `--classes classes.txt` file (one class name per
line; prompts use CLIP-style templates of the classified modality [recon]: "a sound of {}" for
audio, "a photo of {}" for images). Writes `<out>/<dataset>/<space>_<modality>.npy`,
`<space>_prompts.npy`, `labels.npy`, `classes.txt` and (with several captions) `caption_item.npy`
in the layout `papers.freebind.full` reads. Encoders (not installed by default):

- ImageBind-Huge: `imagebind.models.imagebind_model.imagebind_huge(pretrained=True)` with
  `imagebind.data.load_and_transform_{audio_data,vision_data,text}`, checkpoint imagebind_huge.pth;
- CLAP_g: `laion_clap.CLAP_Module(enable_fusion=True).load_ckpt(630k-fusion-best.pt)`; CLAP_m:
  `CLAP_Module(enable_fusion=False, amodel='HTSAT-base')` with music_speech_audioset_epoch_15_esc_89.98.pt;
  `get_audio_embedding_from_filelist` / `get_text_embedding` (transformers <= 4.30.2 for CLAP's text branch);
- InternVL-14B-224px: `AutoModel.from_pretrained(path, torch_dtype=bfloat16, low_cpu_mem_usage=True,
  trust_remote_code=True)`, `CLIPImageProcessor`, `AutoTokenizer(use_fast=False, add_eos_token=True)`,
  texts prefixed "summarize:" padded to 80 tokens, `encode_image(px, mode='InternVL-C')` / `encode_text(ids)`.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

# [recon] class-prompt templates per classified modality (rows grouped by class, one per template)
TEMPLATES = {"audio": ["a sound of {}.", "this is the sound of {}.", "the sound of a {}.", "{}"],
             "image": ["a photo of {}.", "a photo of a {}.", "an image of {}.", "{}"]}


def class_prompts(names: list[str], modality: str) -> list[str]:
    """The class prompts of a dataset that classifies `modality`: every template of that modality per class."""
    if modality not in TEMPLATES:
        raise ValueError(f"no prompt templates for {modality!r}; valid: {list(TEMPLATES)}")
    return [t.format(n) for n in names for t in TEMPLATES[modality]]


def caption_columns(header: list[str]) -> list[str]:
    """`text`, `text_2`, … in order: the caption columns of a manifest."""
    return sorted((c for c in header if c == "text" or c.startswith("text_")),
                  key=lambda c: 1 if c == "text" else int(c.split("_")[1]))


def encoders(paths: dict, device: str) -> dict:
    """{space: {modality: fn(list) -> np.ndarray}}, every fn under `torch.no_grad`; imports the encoders'
    own packages lazily (the real ones need their checkpoints and a GPU; the tests pass stand-ins)."""
    import torch

    from shared.assets import require_path

    out = {}
    if paths.get("imagebind"):
        from imagebind import data as ib_data
        from imagebind.models import imagebind_model
        from imagebind.models.imagebind_model import ModalityType as MT

        model = imagebind_model.imagebind_huge(pretrained=False)
        model.load_state_dict(torch.load(require_path(paths["imagebind"], what="ImageBind-Huge", config_key="imagebind",
                                                      fetch="dl.fbaipublicfiles.com/imagebind/imagebind_huge.pth"),
                                         map_location="cpu", weights_only=True))
        model.eval().to(device)
        loaders = {"audio": (MT.AUDIO, ib_data.load_and_transform_audio_data),
                   "image": (MT.VISION, ib_data.load_and_transform_vision_data),
                   "text": (MT.TEXT, ib_data.load_and_transform_text)}

        def ib(mod):
            key, load = loaders[mod]
            return lambda items: model({key: load(items, device)})[key].float().cpu().numpy()

        out["imagebind"] = {m: ib(m) for m in loaders}
    for space, fusion, amodel in (("clap_g", True, "HTSAT-tiny"), ("clap_m", False, "HTSAT-base")):
        if paths.get(space):
            import laion_clap

            clap = laion_clap.CLAP_Module(enable_fusion=fusion, amodel=amodel)
            clap.load_ckpt(str(require_path(paths[space], what=space, config_key=space, fetch="huggingface.co/lukewys/laion_clap")))
            out[space] = {"audio": lambda items, c=clap: c.get_audio_embedding_from_filelist(x=items, use_tensor=False),
                          "text": lambda items, c=clap: c.get_text_embedding(items, use_tensor=False)}
    if paths.get("internvl"):
        from PIL import Image
        from transformers import AutoModel, AutoTokenizer, CLIPImageProcessor

        path = require_path(paths["internvl"], what="InternVL-14B-224px", config_key="internvl",
                            fetch="huggingface.co/OpenGVLab/InternVL-14B-224px")
        model = AutoModel.from_pretrained(path, torch_dtype=torch.bfloat16, low_cpu_mem_usage=True,
                                          trust_remote_code=True).eval().to(device)
        proc = CLIPImageProcessor.from_pretrained(path)
        tok = AutoTokenizer.from_pretrained(path, use_fast=False, add_eos_token=True)
        tok.pad_token_id = 0

        def image(items):
            px = proc(images=[Image.open(p).convert("RGB") for p in items], return_tensors="pt").pixel_values
            return model.encode_image(px.to(device, torch.bfloat16), mode="InternVL-C").float().cpu().numpy()

        def text(items):
            ids = tok(["summarize:" + t for t in items], return_tensors="pt", max_length=80, truncation=True,
                      padding="max_length").input_ids.to(device)
            return model.encode_text(ids).float().cpu().numpy()

        out["internvl"] = {"image": image, "text": text}
    # no encoder call builds a graph: `.numpy()` on an output that requires grad raises
    return {space: {m: torch.no_grad()(fn) for m, fn in fns.items()} for space, fns in out.items()}


def batched(fn, items, batch=64):
    return np.concatenate([fn(items[i:i + batch]) for i in range(0, len(items), batch)]).astype(np.float32)


def main(argv=None):  # pragma: no cover - the documented GPU path
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--manifest", type=Path, required=True)
    ap.add_argument("--classes", type=Path, default=None)
    ap.add_argument("--out", type=Path, required=True)
    for space in ("imagebind", "clap_g", "clap_m", "internvl"):
        ap.add_argument(f"--{space}", default=None, help=f"local checkpoint of {space}")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args(argv)
    from .full import DATASETS

    rows = list(csv.DictReader(args.manifest.open()))
    enc = encoders({s: getattr(args, s) for s in ("imagebind", "clap_g", "clap_m", "internvl")}, args.device)
    out = args.out / args.dataset
    out.mkdir(parents=True, exist_ok=True)
    caps = caption_columns(list(rows[0]))
    captions = [(i, r[c]) for i, r in enumerate(rows) for c in caps if r.get(c)]  # item-major
    if len(caps) > 1:
        np.save(out / "caption_item.npy", np.array([i for i, _ in captions], dtype=np.int64))
    names = [n for n in args.classes.read_text().splitlines() if n.strip()] if args.classes else None
    if names:
        (out / "classes.txt").write_text("\n".join(names) + "\n")
    for space, fns in enc.items():
        for mod, fn in fns.items():
            if mod == "text" and captions:
                np.save(out / f"{space}_text.npy", batched(fn, [t for _, t in captions]))
            elif mod != "text" and mod in rows[0] and rows[0][mod]:
                np.save(out / f"{space}_{mod}.npy", batched(fn, [r[mod] for r in rows]))
        if names and "text" in fns:
            np.save(out / f"{space}_prompts.npy", batched(fns["text"], class_prompts(names, DATASETS[args.dataset][1])))
    if "label" in rows[0]:
        labels = [r["label"] for r in rows]
        if any(";" in lab for lab in labels):  # multi-label (AudioSet): 'i;j;k'
            n = len(names)
            multi = np.zeros((len(rows), n), dtype=np.int64)
            for i, lab in enumerate(labels):
                multi[i, [int(x) for x in lab.split(";") if x]] = 1
            np.save(out / "labels.npy", multi)
        else:
            np.save(out / "labels.npy", np.array([int(x) for x in labels]))


if __name__ == "__main__":
    main()
