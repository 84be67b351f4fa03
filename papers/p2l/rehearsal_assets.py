"""Stand-ins, in the real formats, for what P2L's full profile reads: a Stable Diffusion v1.5-layout
diffusers folder with random weights, and an FFHQ-style image folder.

The diffusers folder is what `StableDiffusionPipeline.save_pretrained` writes for SD 1.5
(model_index.json; unet/, vae/, text_encoder/, tokenizer/, scheduler/), with SD 1.5's configs' keys
and classes (UNet2DConditionModel with 3 CrossAttnDownBlock2D + DownBlock2D, AutoencoderKL with 4
blocks (8x down), CLIPTextModel, CLIPTokenizer, PNDMScheduler with SD's
betas) at tiny widths. It has no safety checker or feature extractor (the loader passes
safety_checker=None for the real folder too). The images are PNGs named as FFHQ's (00000.png, ...),
some not square, so the loader's aspect-keeping crop is exercised; and a TorchScript stand-in for the
InceptionV3 file that the full profile's FID reads. Beside them, an ImageNet-style set (class folders,
a split list; `full.images_list`), which the tests read; the rehearsal itself runs on the FFHQ folder.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

# stable-diffusion-v1-5's scheduler/scheduler_config.json values
SD15_SCHEDULER = dict(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", num_train_timesteps=1000,
                      set_alpha_to_one=False, skip_prk_steps=True, steps_offset=1)


def write_stable_diffusion(folder: str | Path, image_size: int, seed: int = 0) -> Path:
    """The SD 1.5-layout pipeline folder at tiny widths, for images of `image_size` (latents / 8)."""
    from diffusers import AutoencoderKL, PNDMScheduler, StableDiffusionPipeline, UNet2DConditionModel

    from shared.rehearsal import tiny_clip_text_encoder, tiny_clip_tokenizer

    folder = Path(folder)
    torch.manual_seed(seed)
    tokenizer = tiny_clip_tokenizer()
    text_encoder = tiny_clip_text_encoder(tokenizer)
    unet = UNet2DConditionModel(
        sample_size=image_size // 8, in_channels=4, out_channels=4, layers_per_block=2,
        down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
        block_out_channels=(8, 8, 16, 16), cross_attention_dim=16, attention_head_dim=8, norm_num_groups=4)
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, layers_per_block=2, sample_size=image_size,
        down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(8, 8, 16, 16), norm_num_groups=4, scaling_factor=0.18215)
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                   scheduler=PNDMScheduler(**SD15_SCHEDULER), safety_checker=None,
                                   feature_extractor=None, requires_safety_checker=False)
    pipe.save_pretrained(str(folder / "stable-diffusion-v1-5"))
    return folder / "stable-diffusion-v1-5"


def smooth_image(h: int, w: int, rng) -> np.ndarray:
    """Three random plane waves, one per channel, in [0, 1]."""
    yy, xx = np.mgrid[0:h, 0:w] / h
    img = np.stack([np.sin(2 * np.pi * (rng.uniform(0.5, 2) * xx + rng.uniform(0.5, 2) * yy) + rng.uniform(0, 6))
                    for _ in range(3)], -1)
    return (img + 1) / 2


WNIDS = ("n01440764", "n01443537", "n01484850")


def write_imagenet_split(folder: str | Path, n: int, size: int, seed: int = 1) -> Path:
    """An ImageNet-style evaluation set: `val/<wnid>/ILSVRC2012_val_<8 digits>.JPEG` in class folders and
    a split list `val_1k.txt` naming n of them, "<wnid>/<file> <label>" per line, in an order that is not
    the path order (as ctest10k's), plus files the list leaves out. Returns the list file."""
    from shared.rehearsal import write_images

    folder = Path(folder)
    names = [f"{WNIDS[i % len(WNIDS)]}/ILSVRC2012_val_{(i * 7919) % 50000 + 1:08d}.JPEG" for i in range(n + 2)]
    write_images(folder / "val", len(names), size, smooth_image, name=names.__getitem__, seed=seed)
    listing = folder / "val_1k.txt"
    listing.write_text("".join(f"{path} {WNIDS.index(path.split('/')[0])}\n" for path in names[:n][::-1]))
    return listing


def main(argv=None) -> None:
    """`python -m papers.p2l.rehearsal_assets --out DIR`: the pipeline folder, the images, DIR/overlay.yaml."""
    from shared.rehearsal import parser, rehearsal_config, write_images, write_overlay

    args = parser("p2l").parse_args(argv)
    config = Path(__file__).with_name("config.yaml")
    cfg = rehearsal_config(config, args.out)
    sd = write_stable_diffusion(args.out, cfg.image_size)
    images = write_images(Path(args.out) / "ffhq", cfg.data.n_val + cfg.data.n_test, cfg.image_size, smooth_image)
    from shared.image_metrics import write_stand_in_inception

    write_stand_in_inception(Path(args.out) / "inception-2015-12-05.pt")
    write_imagenet_split(Path(args.out) / "imagenet", cfg.data.n_val + cfg.data.n_test, cfg.image_size)
    if (str(sd.resolve()), str(images.resolve())) != (cfg.full.sd_path, cfg.full.images_path):
        raise ValueError(f"papers/p2l/rehearsal.yaml's full paths differ from the assets written ({sd}, {images})")
    write_overlay(config, args.out)


if __name__ == "__main__":
    main()
