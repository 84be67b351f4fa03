"""The full profile's rehearsal: stand-in assets in the real formats, and the overlay that points the
full profile at them (`snakemake --config profile=full rehearsal=1`, see the Snakefile).

Each paper keeps an overlay template, `papers/<paper>/rehearsal.yaml`: the config keys that shrink
the full profile (steps, images, patients, clips, widths) and its asset paths written as
`$ASSETS/...`. The paper's `rehearsal_assets` module writes the stand-ins into a folder and calls
`write_overlay`, which fills `$ASSETS` in with that folder; every full-profile command then reads the
stand-ins through `--overlay <folder>/overlay.yaml`, by the same loaders as the real paths.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .config import Config, load_config

PLACEHOLDER = "$ASSETS"


def template_path(config_path: str | Path) -> Path:
    """The overlay template beside a paper's config.yaml."""
    return Path(config_path).with_name("rehearsal.yaml")


def write_overlay(config_path: str | Path, folder: str | Path) -> Path:
    """`folder`/overlay.yaml: the paper's template with $ASSETS replaced by `folder` (absolute), checked
    by loading the full profile through it."""
    folder = Path(folder).resolve()
    text = template_path(config_path).read_text().replace(PLACEHOLDER, str(folder))
    out = folder / "overlay.yaml"
    out.write_text(text)
    load_config(config_path, "full", overlay=out)   # unknown keys or wrong types fail here, not in a job
    return out


def rehearsal_config(config_path: str | Path, folder: str | Path) -> Config:
    """The full profile with the template's sizes and $ASSETS = `folder`, without writing anything:
    what an asset writer reads (widths, counts) before it writes the assets."""
    folder = Path(folder).resolve()
    import tempfile

    text = template_path(config_path).read_text().replace(PLACEHOLDER, str(folder))
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    try:
        return load_config(config_path, "full", overlay=f.name)
    finally:
        Path(f.name).unlink()


def write_images(folder, n: int, size: int, draw, name="{:05d}.png", seed: int = 0) -> Path:
    """n stand-in images named `name.format(i)`, or `name(i)` when it is a function (a relative path:
    subfolders are made; the suffix sets the format, PNG or JPEG), `draw(h, w, rng)` -> (h, w, 3) floats in [0, 1]; every third one is half again as wide
    as tall, so a loader's aspect-keeping crop is exercised."""
    import numpy as np
    from PIL import Image

    folder = Path(folder)
    rng = np.random.default_rng(seed)
    for i in range(n):
        img = draw(size, size + (size // 2 if i % 3 == 2 else 0), rng)
        path = folder / (name(i) if callable(name) else name.format(i))
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray((np.clip(img, 0, 1) * 255).astype(np.uint8)).save(path)
    return folder


def tiny_clip_tokenizer():
    """CLIP's tokenizer class (byte-level BPE, `</w>` word ends, the two special tokens) with a tiny
    vocabulary: the 256 byte-level symbols, each also with the end-of-word mark, and no merges (words
    split into characters). The real one has 49,408 tokens; the class and the saved files are the same
    kind. For the stand-in diffusers pipelines (P2L's Stable Diffusion, E2GAN's InstructPix2Pix)."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import CLIPTokenizer

    symbols = sorted(ByteLevel.alphabet())
    vocab = {s: i for i, s in enumerate(symbols + [s + "</w>" for s in symbols] + ["<|startoftext|>", "<|endoftext|>"])}
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def tiny_clip_text_encoder(tokenizer, width: int = 16):
    """A one-layer CLIPTextModel for `tokenizer` (its special-token ids, 77 positions, quick_gelu as CLIP)."""
    from transformers import CLIPTextConfig, CLIPTextModel

    return CLIPTextModel(CLIPTextConfig(
        vocab_size=len(tokenizer), hidden_size=width, intermediate_size=2 * width, num_hidden_layers=1,
        num_attention_heads=2, max_position_embeddings=77, hidden_act="quick_gelu", projection_dim=width,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id))


def write_tiny_clip(folder, seed: int = 0):
    """A randomly initialised CLIP (1 layer, 32-d, 32² images) with `tiny_clip_tokenizer`, saved as the
    transformers model + processor folder that a CLIP score reads (`CLIPModel`/`CLIPProcessor`)."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    tok = tiny_clip_tokenizer()
    image = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    CLIPProcessor(image_processor=image, tokenizer=tok).save_pretrained(folder)
    cfg = CLIPConfig(projection_dim=16,
                     text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, max_position_embeddings=77, bos_token_id=tok.bos_token_id,
                                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id),
                     vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                        image_size=32, patch_size=8))
    torch.manual_seed(seed)
    CLIPModel(cfg).eval().save_pretrained(folder)
    return Path(folder)


def parser(paper: str) -> argparse.ArgumentParser:
    """The command line of `python -m papers.<paper>.rehearsal_assets --out DIR`."""
    p = argparse.ArgumentParser(prog=f"python -m papers.{paper}.rehearsal_assets",
                                description=f"write {paper}'s rehearsal assets and overlay.yaml into --out")
    p.add_argument("--out", type=Path, required=True, help="the assets folder (results/rehearsal/assets/<paper>)")
    return p
