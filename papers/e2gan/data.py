"""Input images and teacher-made pairs.

Inputs are random scaled, flipped colour crops of scikit-image's and scikit-learn's bundled sample
images plus `skimage.data.lfw_subset` faces (grayscale, replicated to 3 channels), all resized to
`resolution`² and split train/test. The same inputs serve every concept; pairs (x, T(x, c)) are
written to disk once per (concept, seed) with the prompt and seed, and reused.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from skimage import data as skdata
from skimage import transform

from shared.seeding import derive_seed

COLOUR_SOURCES = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry",
                  "retina", "colorwheel")


def source_images() -> list[np.ndarray]:
    """Colour sample images as float [0, 1] (H, W, 3), all bundled (offline)."""
    from sklearn.datasets import load_sample_images

    imgs = [getattr(skdata, name)() for name in COLOUR_SOURCES]
    imgs.append(skdata.stereo_motorcycle()[0])
    imgs += list(load_sample_images().images)
    return [np.asarray(im[..., :3], np.float64) / 255.0 for im in imgs]


def make_inputs(n: int, resolution: int, seed: int, face_fraction: float = 0.2) -> np.ndarray:
    """n crops (n, R, R, 3) float32 in [0, 1]: scaled and flipped crops of the sources, plus faces."""
    rng = np.random.default_rng(derive_seed(seed, "inputs"))
    sources = source_images()
    faces = skdata.lfw_subset()
    out = np.empty((n, resolution, resolution, 3), np.float32)
    for i in range(n):
        if rng.uniform() < face_fraction:
            face = faces[rng.integers(len(faces))]
            crop = np.repeat(face[..., None], 3, -1).astype(np.float64)
        else:
            img = sources[rng.integers(len(sources))]
            h, w = img.shape[:2]
            size = int(min(h, w) * rng.uniform(0.12, 0.5))
            y, x = rng.integers(0, h - size + 1), rng.integers(0, w - size + 1)
            crop = img[y:y + size, x:x + size]
        if rng.uniform() < 0.5:
            crop = crop[:, ::-1]
        out[i] = transform.resize(crop, (resolution, resolution), anti_aliasing=True)
    return np.clip(out, 0, 1)


def split(inputs: np.ndarray, test_fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    n_test = int(round(len(inputs) * test_fraction))
    return inputs[n_test:], inputs[:n_test]


def slug(prompt: str) -> str:
    return prompt.replace(" ", "_")


def teacher_pairs(teacher, inputs: np.ndarray, prompt: str, seed: int, cache_dir: Path | None = None) -> np.ndarray:
    """T(inputs, prompt, seed), stored as `<cache_dir>/<prompt>_s<seed>.npz` with prompt and seed."""
    path = Path(cache_dir) / f"{slug(prompt)}_s{seed}_n{len(inputs)}.npz" if cache_dir else None
    if path is not None and path.is_file():
        with np.load(path) as z:
            if str(z["prompt"]) == prompt and int(z["seed"]) == seed and np.array_equal(z["inputs"], inputs):
                return z["outputs"]
    outputs = teacher.edit(inputs, prompt, seed)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
        np.savez_compressed(tmp, inputs=inputs, outputs=outputs, prompt=np.array(prompt), seed=np.array(seed))
        tmp.replace(path)
    return outputs


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """(N, H, W, 3) in [0, 1] → (N, 3, H, W) in [-1, 1]."""
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float() * 2 - 1


def to_images(t: torch.Tensor) -> np.ndarray:
    return ((t.detach().clamp(-1, 1) + 1) / 2).permute(0, 2, 3, 1).cpu().numpy()


def load_image_folder(path: Path, n: int, resolution: int, seed: int) -> np.ndarray:
    """Full profile: up to n images (png/jpg) from a local folder, centre-cropped and resized."""
    from skimage import io

    files = sorted(p for p in Path(path).iterdir() if p.suffix.lower() in {".png", ".jpg", ".jpeg"})
    if not files:
        raise FileNotFoundError(f"no .png/.jpg images in {path}")
    order = np.random.default_rng(derive_seed(seed, "folder")).permutation(len(files))[:n]
    out = []
    for i in order:
        img = np.asarray(io.imread(files[i]), np.float64)
        img = np.repeat(img[..., None], 3, -1) if img.ndim == 2 else img[..., :3]
        img = img / 255.0
        s = min(img.shape[:2])
        y, x = (img.shape[0] - s) // 2, (img.shape[1] - s) // 2
        out.append(transform.resize(img[y:y + s, x:x + s], (resolution, resolution), anti_aliasing=True))
    return np.clip(np.stack(out), 0, 1).astype(np.float32)
