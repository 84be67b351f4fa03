"""The teacher T: `edit(images, prompt, seed) → images`, the editor E²GAN distils.

Images are float arrays (N, H, W, 3) in [0, 1]. Two implementations share the interface:

- `SkimageTeacher` (smoke / tiny): about 30 deterministic, seeded scikit-image edits, each named by a
  text prompt, in four families (colour, tone, texture, geometric), plus held-out *new concepts*
  that recombine known words ("sepia with vignette", "cool blue night", ...). With `jitter` > 0 each
  edit's strength varies per (seed, prompt, image), mimicking a diffusion teacher's variability.
- `InstructPix2PixTeacher` (full): diffusers' StableDiffusionInstructPix2PixPipeline loaded from a
  local folder (`local_files_only=True`), Euler-ancestral scheduler, safety checker off.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
from skimage import color, exposure, feature, filters, restoration, transform

from shared.progress import progress
from shared.seeding import derive_seed

Edit = Callable[[np.ndarray, float, np.random.Generator], np.ndarray]  # (img, strength, rng) -> img


def _gray(img):
    return color.rgb2gray(img)


def _tint(img, rgb, amount):
    return np.clip(img * (1 - amount) + amount * _gray(img)[..., None] * np.asarray(rgb), 0, 1)


def sepia(img, s, rng):
    m = np.array([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168], [0.272, 0.534, 0.131]])
    out = img @ m.T
    return np.clip(img * (1 - s) + s * out, 0, 1)


def hue_shift(deg):
    def edit(img, s, rng):
        hsv = color.rgb2hsv(img)
        hsv[..., 0] = (hsv[..., 0] + s * deg / 360.0) % 1.0
        return color.hsv2rgb(hsv)
    return edit


def tint(rgb, amount=0.6):
    return lambda img, s, rng: _tint(img, rgb, min(1.0, amount * s))


def duotone(img, s, rng):
    g = _gray(img)[..., None]
    return (1 - g) * np.array([0.15, 0.05, 0.35]) + g * np.array([1.0, 0.85, 0.4])


def thermal(img, s, rng):
    import matplotlib

    return matplotlib.colormaps["inferno"](_gray(img))[..., :3]


def gamma(img, s, rng):
    return exposure.adjust_gamma(img, 0.5 ** s)


def night(img, s, rng):
    return np.clip(exposure.adjust_gamma(img, 1.8 * s) * np.array([0.55, 0.65, 1.0]), 0, 1)


def clahe(img, s, rng):
    return exposure.equalize_adapthist(img, clip_limit=0.03 * s)


def solarize(img, s, rng):
    t = 0.5 * s
    return np.where(img > t, 1 - img, img)


def posterize(levels):
    return lambda img, s, rng: np.round(img * (levels - 1)) / (levels - 1)


def blur(img, s, rng):
    return filters.gaussian(img, sigma=1.0 * s, channel_axis=-1)


def sharpen(img, s, rng):
    """Unsharp mask, img + a·(img − G_σ * img), written out: skimage 0.26's `unsharp_mask` returned a NaN
    pixel on its first call in a process (seen here), which poisons a training target."""
    return np.clip(img + 2.0 * s * (img - filters.gaussian(img, sigma=1.0, channel_axis=-1)), 0, 1)


def emboss(img, s, rng):
    k = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]], float) * s
    from scipy.ndimage import convolve

    g = _gray(img)
    return np.repeat(np.clip(convolve(g, k, mode="reflect") * 0.5 + 0.25, 0, 1)[..., None], 3, -1)


def _edges(img):
    g = _gray(img)
    return np.hypot(filters.sobel_h(g), filters.sobel_v(g))


def pencil(img, s, rng):
    e = np.clip(1 - 2.5 * s * _edges(img), 0, 1)
    return np.repeat(e[..., None], 3, -1)


def cartoon(img, s, rng):
    smooth = restoration.denoise_tv_chambolle(img, weight=0.15 * s, channel_axis=-1)
    return np.clip(smooth * (1 - np.clip(2 * _edges(img), 0, 1))[..., None], 0, 1)


def oil(img, s, rng):
    from scipy.ndimage import median_filter

    size = max(2, int(round(3 * s)))
    return median_filter(img, size=(size, size, 1), mode="reflect")


def pixelate(img, s, rng):
    h, w = img.shape[:2]
    f = max(2, int(round(4 * s)))
    small = transform.resize(img, (max(1, h // f), max(1, w // f)), order=0, anti_aliasing=False)
    return transform.resize(small, (h, w), order=0, anti_aliasing=False)


def vignette(img, s, rng):
    h, w = img.shape[:2]
    yy, xx = np.mgrid[-1:1:h * 1j, -1:1:w * 1j]
    return img * np.clip(1 - 0.6 * s * (xx ** 2 + yy ** 2), 0, 1)[..., None]


def grain(img, s, rng):
    return np.clip(img + rng.normal(0, 0.08 * s, img.shape[:2])[..., None], 0, 1)


def swirl(img, s, rng):
    h, w = img.shape[:2]
    return transform.swirl(img, strength=3 * s, radius=max(h, w) * 0.6, mode="reflect")


def invert(img, s, rng):
    return 1 - img


def grayscale(img, s, rng):
    return np.repeat(_gray(img)[..., None], 3, -1)


def contrast(factor):
    return lambda img, s, rng: np.clip((img - 0.5) * factor ** s + 0.5, 0, 1)


def edges_overlay(img, s, rng):
    return np.clip(img * (1 - np.clip(2.5 * s * _edges(img), 0, 1))[..., None], 0, 1)


def _then(*edits: Edit) -> Edit:
    def edit(img, s, rng):
        for e in edits:
            img = e(img, s, rng)
        return img
    return edit


# prompt -> (family, edit)
CONCEPTS: dict[str, tuple[str, Edit]] = {
    "sepia": ("colour", sepia),
    "grayscale": ("colour", grayscale),
    "invert colors": ("colour", invert),
    "hue shift 60": ("colour", hue_shift(60)),
    "hue shift 180": ("colour", hue_shift(180)),
    "warm tint": ("colour", tint([1.0, 0.75, 0.45])),
    "cool tint": ("colour", tint([0.5, 0.75, 1.0])),
    "red tint": ("colour", tint([1.0, 0.35, 0.35])),
    "green tint": ("colour", tint([0.4, 1.0, 0.5])),
    "duotone": ("colour", duotone),
    "thermal colormap": ("colour", thermal),
    "bright gamma": ("tone", gamma),
    "night": ("tone", night),
    "clahe contrast": ("tone", clahe),
    "high contrast": ("tone", contrast(2.0)),
    "low contrast": ("tone", contrast(0.4)),
    "solarize": ("tone", solarize),
    "posterize 4": ("tone", posterize(4)),
    "gaussian blur": ("texture", blur),
    "sharpen": ("texture", sharpen),
    "emboss": ("texture", emboss),
    "pencil sketch": ("texture", pencil),
    "cartoon": ("texture", cartoon),
    "oil painting": ("texture", oil),
    "pixelate": ("texture", pixelate),
    "vignette": ("texture", vignette),
    "film grain": ("texture", grain),
    "edges": ("texture", edges_overlay),
    "swirl": ("geometric", swirl),
}

# Held-out concepts: new combinations of known words.
NEW_CONCEPTS: dict[str, Edit] = {
    "sepia with vignette": _then(sepia, vignette),
    "cool blue night": _then(tint([0.5, 0.75, 1.0]), night),
    "hue shift 120": hue_shift(120),
    "posterize 3 with edges": _then(posterize(3), edges_overlay),
    "blue pencil sketch": _then(pencil, tint([0.45, 0.6, 1.0], 0.9)),
}


def families() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for prompt, (fam, _) in CONCEPTS.items():
        out.setdefault(fam, []).append(prompt)
    return out


class SkimageTeacher:
    """Seeded scikit-image edits named by prompts (the CPU stand-in for a diffusion editor)."""

    def __init__(self, jitter: float = 0.15):
        self.jitter = jitter

    @staticmethod
    def prompts() -> list[str]:
        return list(CONCEPTS) + list(NEW_CONCEPTS)

    def edit(self, images: np.ndarray, prompt: str, seed: int) -> np.ndarray:
        fn = NEW_CONCEPTS[prompt] if prompt in NEW_CONCEPTS else CONCEPTS[prompt][1]
        out = np.empty_like(images, dtype=np.float32)
        for i, img in enumerate(images):
            rng = np.random.default_rng(derive_seed(seed, prompt, i))
            strength = 1.0 + self.jitter * rng.uniform(-1, 1)
            out[i] = np.clip(fn(img.astype(np.float64), strength, rng), 0, 1)
        return out


class InstructPix2PixTeacher:
    """diffusers' InstructPix2Pix from a local folder (full profile); same `edit` interface."""

    def __init__(self, path: str | Path, steps: int = 100, guidance_scale: float = 7.5,
                 image_guidance_scale: float = 1.5, edit_resolution: int = 512, batch_size: int = 4,
                 device: str = "cpu", fp16: bool = False):
        import torch
        from diffusers import EulerAncestralDiscreteScheduler, StableDiffusionInstructPix2PixPipeline

        dtype = torch.float16 if fp16 else torch.float32
        self.pipe = StableDiffusionInstructPix2PixPipeline.from_pretrained(
            str(path), dtype=dtype, safety_checker=None, requires_safety_checker=False,
            local_files_only=True)
        self.pipe.scheduler = EulerAncestralDiscreteScheduler.from_config(self.pipe.scheduler.config)
        self.pipe.set_progress_bar_config(disable=True)
        self.pipe.to(device)
        self.device = device
        self.steps, self.guidance, self.image_guidance = steps, guidance_scale, image_guidance_scale
        self.edit_resolution, self.batch_size = edit_resolution, batch_size

    def edit(self, images: np.ndarray, prompt: str, seed: int) -> np.ndarray:
        import torch
        from PIL import Image

        h, w = images.shape[1:3]
        r = self.edit_resolution
        out = []
        for start in progress(range(0, len(images), self.batch_size), f"teacher edits ({len(images)} images)"):
            chunk = images[start:start + self.batch_size]
            pil = [Image.fromarray((transform.resize(im, (r, r)) * 255).round().astype(np.uint8)) for im in chunk]
            gen = torch.Generator(device="cpu").manual_seed(derive_seed(seed, prompt, start))
            res = self.pipe(prompt=[prompt] * len(pil), image=pil, num_inference_steps=self.steps,
                            guidance_scale=self.guidance, image_guidance_scale=self.image_guidance,
                            generator=gen, output_type="np").images
            out += [transform.resize(np.asarray(im, np.float64), (h, w), anti_aliasing=True) for im in res]
        return np.clip(np.stack(out), 0, 1).astype(np.float32)
