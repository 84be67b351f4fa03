"""Stand-ins, in the real formats, for what E2GAN's full profile reads: an InstructPix2Pix pipeline
folder with random weights at tiny widths (what `StableDiffusionInstructPix2PixPipeline.save_pretrained`
writes for timbrooks/instruct-pix2pix: model_index.json, unet/ with 8 input channels, vae/,
text_encoder/ and tokenizer/ (CLIP's classes; the CLIP text encoder of `text.clip_path` is read from
the same folder), scheduler/ (Euler ancestral)), a folder of scenery-style PNGs (some not square), and
the concept pool file: real instruction prompts, one a line (`concepts.pool_file`); and stand-ins for the
metrics' weights: a TorchScript InceptionV3 (FID/KID) and a tiny CLIP model folder (CLIP score).
"""
from __future__ import annotations

from pathlib import Path

import torch

# the full profile's pool (config.yaml, profiles.full.concepts.pool), as the file a user would keep
POOL = ("make it snowy", "make it rainy", "make it foggy", "make it night", "make it sunset", "make it autumn",
        "make it a watercolor painting", "make it a Van Gogh painting", "make it an oil painting",
        "make it a pencil sketch", "make it sepia", "make it black and white")


def write_instruct_pix2pix(folder: str | Path, seed: int = 0) -> Path:
    """The pipeline folder (latents at 1/2 of the edit resolution: one VAE down block)."""
    from diffusers import (AutoencoderKL, EulerAncestralDiscreteScheduler, StableDiffusionInstructPix2PixPipeline,
                           UNet2DConditionModel)

    from shared.rehearsal import tiny_clip_text_encoder, tiny_clip_tokenizer

    torch.manual_seed(seed)
    tokenizer = tiny_clip_tokenizer()
    text_encoder = tiny_clip_text_encoder(tokenizer)
    unet = UNet2DConditionModel(sample_size=8, in_channels=8, out_channels=4, block_out_channels=(8, 16),
                                layers_per_block=1, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=16,
                                attention_head_dim=2, norm_num_groups=4)
    vae = AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(8, 8), latent_channels=4, norm_num_groups=4,
                        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                        sample_size=16, scaling_factor=0.18215)
    scheduler = EulerAncestralDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                                num_train_timesteps=1000, steps_offset=1)
    pipe = StableDiffusionInstructPix2PixPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                                  scheduler=scheduler, safety_checker=None, feature_extractor=None,
                                                  requires_safety_checker=False)
    path = Path(folder) / "instruct-pix2pix"
    pipe.save_pretrained(str(path))
    return path


def scenery(h: int, w: int, rng):
    """A sky gradient over a noisy ground band, random colours, in [0, 1]."""
    import numpy as np

    sky, ground = rng.uniform(0, 1, 3), rng.uniform(0, 1, 3)
    t = np.linspace(0, 1, h)[:, None, None]
    img = np.broadcast_to(sky * (1 - 0.5 * t), (h, w, 3)).copy()
    horizon = int(h * rng.uniform(0.5, 0.8))
    img[horizon:] = ground + rng.normal(0, 0.05, (h - horizon, w, 3))
    return img


def main(argv=None) -> None:
    """`python -m papers.e2gan.rehearsal_assets --out DIR`: pipeline, images, pool file, DIR/overlay.yaml."""
    from shared.rehearsal import parser, rehearsal_config, write_images, write_overlay

    args = parser("e2gan").parse_args(argv)
    config = Path(__file__).with_name("config.yaml")
    cfg = rehearsal_config(config, args.out)
    out = Path(args.out)
    pipe = write_instruct_pix2pix(out)
    images = write_images(out / "scenery", cfg.data.n_inputs, 2 * cfg.data.resolution, scenery, "scenery_{:04d}.png")
    from shared.image_metrics import write_stand_in_inception
    from shared.rehearsal import write_tiny_clip

    write_stand_in_inception(out / "inception-2015-12-05.pt")
    write_tiny_clip(out / "clip-vit-large-patch14")
    pool = out / "concepts.txt"
    pool.write_text("# instruction prompts of the known-concept pool, one a line\n" + "\n".join(POOL) + "\n")
    written = (str(pipe.resolve()), str(images.resolve()), str(pool.resolve()))
    if written != (cfg.teacher.path, cfg.data.images_dir, cfg.concepts.pool_file):
        raise ValueError(f"papers/e2gan/rehearsal.yaml's paths differ from the assets written {written}")
    write_overlay(config, args.out)


if __name__ == "__main__":
    main()
