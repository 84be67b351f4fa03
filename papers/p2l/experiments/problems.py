"""What every product reads: the prior and classifier a run trained (or Stable Diffusion), the images,
the test problems (operator, images, noisy measurements), batched solving and table cells."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from shared.assets import MissingAssetError, require_path
from shared.config import ConfigError
from shared.samples import is_sample, sample

from .. import metrics as M
from .. import solve_cache
from ..components import AttributeClassifier
from ..data import ATTRIBUTES, make_split
from ..models import LatentDiffusion, load_stable_diffusion, resolve_device
from ..operators import build_operator
from ..solver import METHODS, solve


TASKS = ("sr", "gblur", "motion", "inpaint_box", "inpaint_random")
TASK_NAMES = {"sr": "SR×4", "gblur": "Gaussian deblur", "motion": "Motion deblur", "inpaint_box": "Box inpainting",
              "inpaint_random": "Random inpainting"}


def replica_dir(out: Path, name: str, prior: int = 0) -> Path:
    """Where replica `prior` of a trained prior lives: `<name>` (the first), `<name>_<k>` (the others)."""
    return Path(out) / "checkpoints" / (name if prior == 0 else f"{name}_{prior}")


def _prior_dir(out: Path, prior: int = 0) -> Path:
    """Where prior `prior` of the run lives: `train_prior` (the first), `train_prior_<k>` (the replicas)."""
    return replica_dir(out, "train_prior", prior)


def replica_training(run, prior: int = 0) -> tuple[int, str, dict]:
    """What replica `prior` of a prior trains from: its seed (seed + k), its checkpoint tag ("" or "_k") and
    the run's training split (the same images for every replica)."""
    cfg = run.cfg
    return (run.seed + prior, "" if prior == 0 else f"_{prior}",
            make_split(run.seed, "train", cfg.data.n_train, cfg.image_size))


def n_priors(cfg) -> int:
    """The priors the tiny world trains, each from its own seed (the outer unit of the paper claims);
    one at the full profile (Stable Diffusion)."""
    return 1 if cfg.full.sd_path else int(cfg.get("priors", 1))


def _classifier_file(out: Path) -> Path:
    return Path(out) / "checkpoints" / "train_classifier" / "classifier.safetensors"


def load_prior(cfg, out: Path, prior: int = 0) -> LatentDiffusion:
    """The prior the solvers use: the trained tiny pipeline under `out` (tiny/smoke), or Stable
    Diffusion from `full.sd_path` (full)."""
    device = resolve_device(cfg.device)
    if cfg.full.sd_path:
        path = require_path(cfg.full.sd_path, what="Stable Diffusion v1.5 weights (a diffusers folder)",
                            fetch="stable-diffusion-v1-5 (huggingface.co/stable-diffusion-v1-5/stable-diffusion-v1-5)",
                            config_key="full.sd_path")
        return load_stable_diffusion(path, device, prior_dtype(cfg, device))
    return load_stable_diffusion(_prior_dir(out, prior) / "pipeline", device, prior_dtype(cfg, device))


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def prior_dtype(cfg, device) -> torch.dtype:
    """The prior's weight dtype, `solve.dtype` (full: float16, as Stable Diffusion is loaded for these
    solvers), on CUDA; a CPU run keeps float32 (the rehearsal's stand-ins, the tiny prior). The solver's
    losses, norms and updates stay in float32 whatever the weights' dtype (LatentDiffusion casts)."""
    name = str(cfg.solve.dtype)
    if name not in DTYPES:
        raise ConfigError(f"solve.dtype={name!r}; choose one of {sorted(DTYPES)}")
    return DTYPES[name] if torch.device(device).type == "cuda" else torch.float32


def load_classifier(cfg, out: Path) -> AttributeClassifier | None:
    """The attribute classifier (the FD proxy's features); None at the full profile."""
    if cfg.full.sd_path:
        return None
    from safetensors.torch import load_file

    path = _classifier_file(out)
    if not path.exists():
        raise MissingAssetError(f"No attribute classifier at {path}: train it first with "
                                f"`python -m papers.p2l train_classifier --out {out}` (same profile).")
    clf = AttributeClassifier(cfg.classifier.width, cfg.classifier.feature_dim)
    clf.load_state_dict(load_file(str(path)))
    return clf.eval().requires_grad_(False)


IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}


def image_files(cfg) -> list[Path]:
    """The full profile's evaluation images in order: those `full.images_list` names (an ImageNet-style
    split file: one path per line relative to images_path, a label after it allowed; '#' comments), or
    else every image under `full.images_path`, class folders included, sorted by relative path."""
    folder = require_path(cfg.full.images_path, what="the evaluation images (FFHQ-style folder, or ImageNet val "
                          "with class folders)", fetch="FFHQ 512×512 images (github.com/NVlabs/ffhq-dataset) or "
                          "ImageNet's validation set", config_key="full.images_path")
    listing = cfg.full.images_list
    if not listing:
        return sorted((p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES),
                      key=lambda p: p.relative_to(folder).as_posix())
    listing = require_path(listing, what="the split list (e.g. ImageNet ctest10k / val-1k)",
                           fetch="the split's list file", config_key="full.images_list")
    names = [line.split()[0] for line in listing.read_text().splitlines() if line.strip() and not line.startswith("#")]
    files = [folder / name for name in names]
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise MissingAssetError(f"{len(missing)} of the {len(files)} images that {listing} names are not under "
                                f"{folder} (first: {missing[0].relative_to(folder)}): point `full.images_path` at "
                                "the folder the list is relative to.")
    return files


def load_images(cfg, split: str, n: int) -> dict:
    """The tiny profile's captioned shapes, or (full) n images of `image_files`: the first n_val for
    validation (tuning), the next ones for the test."""
    if not cfg.full.images_path:
        return make_split(cfg.seed, split, n, cfg.image_size)
    from PIL import Image, ImageOps

    files = image_files(cfg)
    offset = 0 if split == "val" else cfg.data.n_val
    if len(files) < offset + n:
        raise MissingAssetError(f"The {split} split needs images {offset + 1}–{offset + n} of the evaluation set, "
                                f"but {cfg.full.images_list or cfg.full.images_path} has {len(files)}: lower "
                                "`data.n_val`/`data.n_test` or add images.")
    files = files[offset:offset + n]
    # centre crop to a square, then resize (PIL's ImageOps.fit): a non-square image is not squashed
    size = (cfg.image_size, cfg.image_size)
    imgs = [np.asarray(ImageOps.fit(Image.open(f).convert("RGB"), size, Image.Resampling.BICUBIC)) for f in files]
    x = torch.from_numpy(np.stack(imgs)).permute(0, 3, 1, 2).float() / 127.5 - 1
    return {"images": x, "captions": None, "labels": None}


def method_hparams(cfg, method: str) -> dict:
    hp = dict(cfg.hparams.get(method, {}) or {})
    return hp


VECTOR_HPARAMS = ("rho", "gamma_gml", "gamma_glue", "prompt_lr", "tau", "lam")   # may be per-image: a tuning grid as one batch


def _solve_batches(method, y, op, ldm, cfg, seed, captions, repeats: int = 1, **hp):
    """Solve in batches of cfg.solve.batch_size; concatenate reconstructions and per-image records
    (`Solution.per_image`, [n_records, N]) and average trajectories. Returns (x, nfe, wall, traj,
    per_image, calls) with calls = {"nfe", "decoder", "encoder"} per image (exact counts).
    repeats > 1: y is `repeats` copies of the same problems (a tuning grid), which then all start
    from the same initial latents (seeded `seed`)."""
    if "z_init" not in hp:   # every image's z_T drawn up front: the batch size changes no image's start
        g = torch.Generator().manual_seed(seed)   # (one batch of all images: the solver's own draw)
        size = ldm.unet.config.sample_size
        z_T = torch.randn(y.shape[0] // repeats, ldm.latent_channels, size, size, generator=g)
        hp["z_init"] = z_T.repeat(repeats, 1, 1, 1)
    xs, wall, trajs, records = [], 0.0, [], []
    bs = cfg.solve.batch_size
    for b in range(0, y.shape[0], bs):
        hb = {k: (v[b:b + bs] if (k in VECTOR_HPARAMS or k == "z_init") and torch.is_tensor(v) else v)
              for k, v in hp.items()}
        caps = None if captions is None else captions[b:b + bs]
        key = solve_cache.batch_key(method, y[b:b + bs], ldm, steps=cfg.solve.steps, seed=seed + b, captions=caps,
                                    hparams=hb) if solve_cache.active() else None
        sol = solve_cache.load(key)   # a batch this job solved before it was killed (`solve_cache`)
        if sol is None:
            sol = solve(method, y[b:b + bs], op, ldm, steps=cfg.solve.steps, seed=seed + b, captions=caps, **hb)
            solve_cache.save(key, sol)
        xs.append(sol.x)
        wall += sol.wall_s
        trajs.append(sol.trajectory)
        if captions is not None and METHODS[method].get("prompt_lr"):   # a tuned prompt: does it find its caption?
            sol.per_image["caption_top1"] = caption_top1(ldm, sol.prompt, captions[b:b + bs])[None]
        records.append(sol.per_image)
    traj = {k: (np.mean([t[k] for t in trajs], 0).tolist() if trajs[0][k] else []) for k in trajs[0]}
    traj["step"] = trajs[0]["step"]
    per_image = {k: torch.cat([r[k] for r in records], 1).numpy() for k in records[0]}
    calls = {"nfe": sol.nfe, "decoder": sol.decoder_calls, "encoder": sol.encoder_calls}
    return torch.cat(xs), sol.nfe, wall, traj, per_image, calls


ALL_CAPTIONS = [f"{c} {s} {b}" for s in ATTRIBUTES["shape"] for c in ATTRIBUTES["colour"] for b in ATTRIBUTES["background"]]


def caption_top1(ldm, prompt: torch.Tensor, captions: list[str]) -> torch.Tensor:
    """[B] 1 where the true caption has the largest cosine gain cos(C*, C_c) − cos(C_∅, C_c) of the world's
    18 captions (`metrics.caption_gains`); chance is 1/18."""
    gains = M.caption_gains(prompt.cpu(), ldm.null_prompt(1).cpu(), ldm.embed(ALL_CAPTIONS).cpu())
    truth = np.array([ALL_CAPTIONS.index(c) if c in ALL_CAPTIONS else -1 for c in captions])   # -1: not the world's
    return torch.from_numpy((gains.argmax(1) == truth).astype(np.float64))


def record_scores(per_image: dict) -> dict:
    """Per-image scores from the solver's records: the off-range ratio averaged over the recorded
    steps and at the last one, and the final prompt's (and the null prompt's) cosine to the true caption."""
    scores = {}
    if "off_range" in per_image:
        scores["off_range"] = per_image["off_range"].mean(0)
        scores["final_off_range"] = per_image["off_range"][-1]
    for k in ("prompt_cos", "null_cos", "caption_top1"):
        if k in per_image:
            scores[k] = per_image[k][-1]
    return scores


def grouped_by_prior(per_prior: list, n_priors: int) -> dict:
    """Per-image values of every prior as one sample: grouped by prior (the outer unit) when the run
    trained more than one, so that the ledger's n is the number of priors."""
    values = np.concatenate([np.asarray(v, dtype=float) for v in per_prior])
    if n_priors == 1:
        return sample(values, "image")
    groups = [k for k, v in enumerate(per_prior) for _ in range(len(v))]
    return sample(values, "image", groups=groups, group_unit="prior")


def main_solves(cfg, main: dict, method: str, prior: int, n: int, keys) -> dict | None:
    """What a test solve of `method` on `prior` (first n test images, first noise draw, the main table's
    tuned values) would give, read from main_<task>'s metrics (`main`, its "methods"): per key of `keys`
    that main recorded, the per-image values on that prior, plus its FD, NFE and wall time. None where the
    main table's samples are not those solves (more than one noise draw, another image count)."""
    rec = main.get(method)
    if rec is None or int(cfg.data.noise_seeds) != 1 or n != int(cfg.data.n_test):
        return None

    def on_prior(s):
        v = np.asarray(s["values"], dtype=float)
        return v if "groups" not in s else v[np.asarray(s["groups"]) == prior]

    scores = {k: on_prior(rec[k]) for k in keys if is_sample(rec.get(k)) and rec[k]["unit"] == "image"}
    if not {"psnr", "ssim"} <= set(scores) or any(len(v) != n for v in scores.values()):
        return None
    return {"scores": scores, "fd": rec["fd"]["values"][prior] if "fd" in rec else None,
            "nfe": rec.get("nfe"), "wall": rec["wall_s"]["values"][prior] if "wall_s" in rec else None}


def cell(value) -> str | float:
    """A table cell: "mean ± std" for a sample with n > 1 (n in its own column), the mean for n = 1,
    else the number itself."""
    if is_sample(value):
        return value["mean"] if value["n"] == 1 else f"{value['mean']:.3f} ± {value['std']:.3f}"
    return value

def operator_of(cfg, task):
    return build_operator(task, cfg.image_size, sigma_y=cfg.solve.sigma_y, seed=cfg.seed, **dict(cfg.tasks[task]))


def held_out_problem(cfg, task: str, seed: int) -> tuple:
    """(operator, test problems, y): the n_test test images, each measured under `data.noise_seeds`
    noise draws (seeded seed, seed + 7919, ...), stacked seed-major, so unit i is (image i mod n_test,
    noise draw i // n_test). What every method of the main table, the ablation and the floors solve."""
    op = operator_of(cfg, task)
    base = load_images(cfg, "test", cfg.data.n_test)
    k = int(cfg.data.noise_seeds)
    test = {"images": base["images"].repeat(k, 1, 1, 1),
            "captions": None if base["captions"] is None else list(base["captions"]) * k,
            "labels": None if base["labels"] is None else base["labels"].repeat(k, 1)}
    y = torch.cat([op.measure(base["images"], seed + 7919 * j) for j in range(k)])
    return op, test, y


def per_image_mean(values, k: int) -> np.ndarray:
    """Values of k stacked noise draws (seed-major, as `held_out_problem` stacks them) averaged per
    image: one value per independent unit."""
    v = np.asarray(values, dtype=float)
    return v.reshape(k, len(v) // k).mean(0)


def _show(ax, img):
    ax.imshow(((img.permute(1, 2, 0) + 1) / 2).clamp(0, 1).numpy(), interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
