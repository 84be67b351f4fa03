"""Small stand-ins, in the real formats, for what the full profile reads: a rehearsal of the full code
path (checkpoint key map, UCF101 split files, seek decoding) without the real downloads.

`write_assets(folder, cfg)` writes

    videomae_pretrain.pth        {'model': ..., 'epoch', 'args'}: the official pre-training layout
                                 (keys encoder.* / decoder.*), random weights at the config's widths
    videomae_finetune.pth        {'module': ...}: the official fine-tuning layout (patch_embed, blocks,
                                 fc_norm, head), as DeepSpeed saves it
    UCF-101/<Class>/v_<Class>_gGG_cCC.mp4     short clips written with PyAV, several keyframes each
    ucfTrainTestlist/classInd.txt, trainlist01.txt, testlist01.txt   the official split-file formats
                                 (CRLF lines; 1-based labels; test lines without labels; split 1 tests
                                 groups 1-7 and trains on 8-25)

The key names and shapes are written out below from the official model code (MCG-NJU/VideoMAE
modeling_pretrain.py / modeling_finetune.py with qkv_bias=True, fixed sinusoidal positions, no layer
scale), independently of the key map in `official_checkpoint.py`, which the tests check against them.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .video import write_test_video

CLASSES = ("ApplyEyeMakeup", "Archery", "HandstandPushups")
# as in the real UCF101, where the videos of folder HandstandPushups are named v_HandStandPushups_*
FILE_STEMS = {"HandstandPushups": "HandStandPushups"}


def _block_shapes(prefix: str, depth: int, dim: int, mlp_ratio: int = 4) -> dict[str, tuple[int, ...]]:
    """The official `Block`: norm1, attn (qkv without bias, q_bias, v_bias, proj), norm2, mlp (fc1, fc2)."""
    hidden = dim * mlp_ratio
    shapes = {}
    for i in range(depth):
        p = f"{prefix}.{i}."
        shapes |= {p + "norm1.weight": (dim,), p + "norm1.bias": (dim,),
                   p + "attn.q_bias": (dim,), p + "attn.v_bias": (dim,), p + "attn.qkv.weight": (3 * dim, dim),
                   p + "attn.proj.weight": (dim, dim), p + "attn.proj.bias": (dim,),
                   p + "norm2.weight": (dim,), p + "norm2.bias": (dim,),
                   p + "mlp.fc1.weight": (hidden, dim), p + "mlp.fc1.bias": (hidden,),
                   p + "mlp.fc2.weight": (dim, hidden), p + "mlp.fc2.bias": (dim,)}
    return shapes


def pretrain_checkpoint_shapes(channels: int, patch: int, tubelet: int, dim: int, depth: int,
                               decoder_dim: int, decoder_depth: int) -> dict[str, tuple[int, ...]]:
    """Every key of the official PretrainVisionTransformer's state dict, with its shape."""
    pixels = channels * tubelet * patch ** 2
    return {"mask_token": (1, 1, decoder_dim),
            "encoder.patch_embed.proj.weight": (dim, channels, tubelet, patch, patch),
            "encoder.patch_embed.proj.bias": (dim,),
            **_block_shapes("encoder.blocks", depth, dim),
            "encoder.norm.weight": (dim,), "encoder.norm.bias": (dim,),
            **_block_shapes("decoder.blocks", decoder_depth, decoder_dim),
            "decoder.norm.weight": (decoder_dim,), "decoder.norm.bias": (decoder_dim,),
            "decoder.head.weight": (pixels, decoder_dim), "decoder.head.bias": (pixels,),
            "encoder_to_decoder.weight": (decoder_dim, dim)}


def finetune_checkpoint_shapes(channels: int, patch: int, tubelet: int, dim: int, depth: int,
                               num_classes: int) -> dict[str, tuple[int, ...]]:
    """Every key of the official VisionTransformer's state dict (mean pooling: fc_norm, no norm)."""
    return {"patch_embed.proj.weight": (dim, channels, tubelet, patch, patch), "patch_embed.proj.bias": (dim,),
            **_block_shapes("blocks", depth, dim),
            "fc_norm.weight": (dim,), "fc_norm.bias": (dim,),
            "head.weight": (num_classes, dim), "head.bias": (num_classes,)}


def random_state(shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, torch.Tensor]:
    """Seeded random tensors of the given shapes (normal, std 0.02; norm weights around 1)."""
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for key, shape in shapes.items():
        value = 0.02 * torch.randn(shape, generator=gen)
        state[key] = value + 1.0 if "norm" in key and key.endswith("weight") else value
    return state


def clip_frames(label: int, index: int, frames: int, height: int, width: int, seed: int) -> np.ndarray:
    """uint8 [frames, height, width, 3]: a class-coloured square moving over seeded noise."""
    rng = np.random.default_rng([seed, label, index])
    background = rng.integers(0, 96, size=(height, width, 3), dtype=np.uint8)   # still, so GOPs stay long
    video = np.repeat(background[None], frames, axis=0)
    colour = np.roll(np.array([230, 60, 60], np.uint8), label)
    side = min(height, width) // 3
    for f in range(frames):
        y = (2 * f + 3 * index) % (height - side)
        x = (3 * f + 5 * label) % (width - side)
        video[f, y:y + side, x:x + side] = colour
    return video


@dataclass
class RehearsalAssets:
    pretrain_checkpoint: Path
    finetune_checkpoint: Path
    root: Path
    class_index: Path
    train_list: Path
    test_list: Path

    def overrides(self) -> list[str]:
        """`--set` overrides that point a config at these files."""
        return [f"model.init_checkpoint={self.pretrain_checkpoint}", f"data.root={self.root}",
                f"data.class_index={self.class_index}", f"data.pretrain_list={self.train_list}",
                f"data.train_list={self.train_list}", f"data.test_list={self.test_list}",
                f"data.num_classes={len(CLASSES)}"]


def write_assets(folder: str | Path, cfg, *, train_groups: int = 2, test_groups: int = 1, frames: int = 40,
                 height: int = 48, width: int = 64, gop_size: int = 8, seed: int = 0) -> RehearsalAssets:
    """Write the checkpoints (at the widths of `cfg.model`, `cfg.data.channels`) and a UCF101-layout
    folder of len(CLASSES) × (train_groups + test_groups) clips into `folder`."""
    folder = Path(folder)
    m, channels = cfg.model, cfg.data.channels
    folder.mkdir(parents=True, exist_ok=True)
    pretrain = folder / "videomae_pretrain.pth"
    shapes = pretrain_checkpoint_shapes(channels, m.patch, m.tubelet, m.dim, m.depth, m.decoder_dim, m.decoder_depth)
    args = argparse.Namespace(model="pretrain_videomae_rehearsal", input_size=cfg.data.size, num_frames=cfg.data.frames,
                              tubelet_size=m.tubelet, mask_ratio=cfg.selection.mask_ratio)
    torch.save({"model": random_state(shapes, seed), "epoch": 0, "args": args}, pretrain)
    finetune = folder / "videomae_finetune.pth"
    shapes = finetune_checkpoint_shapes(channels, m.patch, m.tubelet, m.dim, m.depth, len(CLASSES))
    torch.save({"module": random_state(shapes, seed + 1)}, finetune)

    root, lists = folder / "UCF-101", folder / "ucfTrainTestlist"
    lists.mkdir(exist_ok=True)
    train_lines, test_lines = [], []
    for label, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True, exist_ok=True)
        for group in [*range(1, test_groups + 1), *range(8, 8 + train_groups)]:
            relative = f"{name}/v_{FILE_STEMS.get(name, name)}_g{group:02d}_c01.mp4"
            write_test_video(root / relative, clip_frames(label, group, frames, height, width, seed), gop_size=gop_size)
            if group < 8:
                test_lines.append(relative)
            else:
                train_lines.append(f"{relative} {label + 1}")
    _write_crlf(lists / "classInd.txt", [f"{i + 1} {name}" for i, name in enumerate(CLASSES)])
    _write_crlf(lists / "trainlist01.txt", train_lines)
    _write_crlf(lists / "testlist01.txt", test_lines)
    return RehearsalAssets(pretrain, finetune, root, lists / "classInd.txt", lists / "trainlist01.txt",
                           lists / "testlist01.txt")


def _write_crlf(path: Path, lines: list[str]) -> None:
    """Lines ended by CRLF, as in the official UCF101 split files."""
    path.write_bytes("".join(line + "\r\n" for line in lines).encode())


def main(argv=None) -> None:
    """`python -m papers.everest.rehearsal_assets --out DIR`: the assets at the rehearsal's widths, and
    DIR/overlay.yaml (rehearsal.yaml with $ASSETS = DIR)."""
    from shared.rehearsal import parser, rehearsal_config, write_overlay

    args = parser("everest").parse_args(argv)
    config = Path(__file__).with_name("config.yaml")
    write_assets(args.out, rehearsal_config(config, args.out))
    write_overlay(config, args.out)


if __name__ == "__main__":
    main()
