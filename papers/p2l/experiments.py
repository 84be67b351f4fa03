"""The experiments (`python -m papers.p2l <experiment> --profile P --out DIR`).

train_classifier  the attribute classifier on the training images (tiny profile; the prior's gate reads it)
train_prior   VAE → latents → text encoder + UNet, saved as a diffusers pipeline (tiny profile)
prior_gate    the prior follows its captions: classifier accuracy on CFG samples, null-caption frequencies
main_<task>   per task: equal-budget tuning of ρ on the validation split, then every method on
              the held-out split (PSNR, SSIM, off-range, prompt cosine per image; FD proxy; trajectories)
main_table    the task × method table, the grid and trajectory figures, runtime/NFE, the prompt's cosine
floors        per task, two prior-free arms on the main table's test images and noise: the measurement
              itself on the image grid, and P2L's proximal data-consistency solve started from zero
ablation      prompt tuning / projection on and off, proximal vs gluing, K and τ

Per-image metrics are written as `shared.samples.sample(values, "image")`: every method sees the same
test images in the same order, the same measurement noise and the same initial latents (batch b is
seeded run.seed + b), so samples of two methods pair by image. With `data.noise_seeds` = k > 1 each
image is solved under k noise draws (in one batch) and its value is the mean over the draws: the
images are the independent units (n = n_test), the draws are repeated measurements of one unit.
The FD proxy is one number per run (`sample([fd], "seed")`), wall times too; NFE counts are exact.
"""
from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from shared.assets import MissingAssetError, require_path
from shared.io import read_json
from shared.samples import combine, gap, is_sample, sample

from . import metrics as M
from .data import ATTRIBUTES, make_split
from .full_metrics import FullMetrics
from .models import LatentDiffusion, load_stable_diffusion, resolve_device, save_pipeline
from .operators import Inpainting, build_operator
from .components import AttributeClassifier, assemble, sample_prior, tiny_tokenizer
from .solver import hparams_of, proximal, solve

TASKS = ("sr", "gblur", "motion", "inpaint_box", "inpaint_random")
TASK_NAMES = {"sr": "SR×4", "gblur": "Gaussian deblur", "motion": "Motion deblur", "inpaint_box": "Box inpainting",
              "inpaint_random": "Random inpainting"}


# ----------------------------------------------------------------------------------------- prior
def _prior_dir(out: Path) -> Path:
    return Path(out) / "checkpoints" / "train_prior"


def _classifier_file(out: Path) -> Path:
    return Path(out) / "checkpoints" / "train_classifier" / "classifier.safetensors"


def train_attribute_classifier(run) -> dict:
    """The attribute classifier, trained on the prior's training images: its own job, so that it runs
    beside the VAE and the LDM (the gate, the FD proxy and attribute accuracy read it)."""
    cfg = run.cfg
    if cfg.full.sd_path:
        return {"skipped": "full profile: no attribute classifier (the tiny world's attributes)"}
    from .prior import train_classifier   # Lightning (≈ 3 s to import): only the training jobs need it

    start = time.perf_counter()
    data = make_split(run.seed, "train", cfg.data.n_train, cfg.image_size)
    clf = train_classifier(cfg.classifier, data["images"], data["labels"], run.checkpoint_dir("classifier"), run.seed)
    from safetensors.torch import save_file

    save_file(clf.state_dict(), str(_classifier_file(run.out)))
    return {"train_wall_s": time.perf_counter() - start, "steps": int(cfg.classifier.steps)}


def train_prior(run) -> dict:
    """VAE → latents → text encoder + UNet, saved as a diffusers pipeline (what the solvers load)."""
    cfg = run.cfg
    if cfg.full.sd_path:
        return {"skipped": "full profile uses Stable Diffusion from full.sd_path"}
    from .prior import encode_all, train_ldm, train_vae   # Lightning: only the training jobs import it

    start = time.perf_counter()
    data = make_split(run.seed, "train", cfg.data.n_train, cfg.image_size)
    images, captions = data["images"], data["captions"]
    vae = train_vae(cfg.vae, images, run.checkpoint_dir("vae"), run.seed)
    latents = encode_all(vae, images)
    scale = float(1.0 / latents.std())
    t_vae = time.perf_counter()
    tok = tiny_tokenizer()
    ids = tok(captions, padding="max_length", max_length=tok.model_max_length, return_tensors="pt").input_ids
    unet, text_encoder = train_ldm(cfg.ldm, latents * scale, ids, tok, run.checkpoint_dir("ldm"), run.seed)
    t_ldm = time.perf_counter()
    ldm = assemble(vae, unet, text_encoder, scale, torch.device("cpu"))
    save_pipeline(ldm, _prior_dir(run.out) / "pipeline")
    test = make_split(run.seed, "test", cfg.prior_check.n, cfg.image_size)
    with torch.no_grad():
        rec = ldm.decode(ldm.encode(test["images"]))
    return {"vae_rec_psnr": float(M.psnr(rec, test["images"]).mean()), "latent_scale": scale,
            "train_wall_s": {"vae": t_vae - start, "ldm": t_ldm - t_vae}}


def prior_gate(run) -> dict:
    """The gate on the saved prior: the classifier reads real images; samples with the true caption
    (DDIM, CFG at prior_check.guidance) carry its attributes; samples with the null caption have the
    data's attribute frequencies. Its own job, so that it runs beside the main tasks."""
    cfg = run.cfg
    if cfg.full.sd_path:
        return {"skipped": "full profile uses Stable Diffusion from full.sd_path"}
    ldm, clf = load_prior(cfg, run.out), load_classifier(cfg, run.out)
    chk = cfg.prior_check
    test = make_split(run.seed, "test", chk.n, cfg.image_size)
    real = M.attribute_hits(clf, test["images"], test["labels"])
    x_cond = sample_prior(ldm, test["captions"], chk.steps, chk.guidance, run.seed)
    cond = M.attribute_hits(clf, x_cond, test["labels"])
    x_null = sample_prior(ldm, [""] * chk.n, chk.steps, 0.0, run.seed + 1)
    with torch.no_grad():
        null_out = clf(x_null)
    null_pred = torch.stack([o.argmax(1) for o in null_out], 1).numpy()
    names = list(ATTRIBUTES)
    null_freq, tv = {}, {}
    for j, attr in enumerate(names):
        values = ATTRIBUTES[attr]
        # per image, the classifier's probability of each value: its mean is the value's frequency
        # among the null-caption samples (soft counts, so that a unit can disagree even at smoke)
        probs = torch.softmax(null_out[j].double(), 1).numpy()
        null_freq[attr] = {v: sample(probs[:, k], "image") for k, v in enumerate(values)}
        tv[attr] = 0.5 * float(sum(abs((null_pred[:, j] == k).mean() - 1 / len(values)) for k in range(len(values))))
    run.save_figure(prior_figure(test["images"], x_cond, x_null, n=16), "prior_samples")
    return {  # per-image hits (0/1): the ledger decides them by the exact binomial interval
            "classifier_real": {a: sample(real[:, j], "image", binary=True) for j, a in enumerate(names)},
            "conditional": {a: sample(cond[:, j], "image", binary=True) for j, a in enumerate(names)},
            "null_frequency": null_freq, "data_frequency": {a: 1 / len(v) for a, v in ATTRIBUTES.items()},
            "null_tv_distance": tv, "guidance": chk.guidance, "sample_steps": chk.steps, "n": chk.n}


def prior_figure(data, x_cond, x_null, n: int = 16):
    import matplotlib.pyplot as plt

    n = min(n, len(data))
    fig, axes = plt.subplots(3, n, figsize=(n * 0.8, 2.6), squeeze=False)
    for i in range(n):
        for r, img in enumerate((data[i], x_cond[i], x_null[i])):
            _show(axes[r, i], img)
    for r, title in enumerate(("data", "samples with its caption (CFG)", "samples with the null caption")):
        axes[r, 0].set_title(title, fontsize=6, loc="left")
    fig.tight_layout()
    return fig


def load_prior(cfg, out: Path) -> LatentDiffusion:
    """The prior the solvers use: the trained tiny pipeline under `out` (tiny/smoke), or Stable
    Diffusion from `full.sd_path` (full)."""
    device = resolve_device(cfg.device)
    if cfg.full.sd_path:
        path = require_path(cfg.full.sd_path, what="Stable Diffusion v1.5 weights (a diffusers folder)",
                            fetch="stable-diffusion-v1-5 (huggingface.co/stable-diffusion-v1-5/stable-diffusion-v1-5)",
                            config_key="full.sd_path")
        return load_stable_diffusion(path, device)
    return load_stable_diffusion(_prior_dir(out) / "pipeline", device)


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


# ------------------------------------------------------------------------------------ per task
def method_hparams(cfg, method: str) -> dict:
    hp = dict(cfg.hparams.get(method, {}) or {})
    return hp


VECTOR_HPARAMS = ("rho", "gamma_gml", "gamma_glue", "prompt_lr")   # may be per-image: a tuning grid as one batch


def _solve_batches(method, y, op, ldm, cfg, seed, captions, repeats: int = 1, **hp):
    """Solve in batches of cfg.solve.batch_size; concatenate reconstructions and per-image records
    (`Solution.per_image`, [n_records, N]) and average trajectories. Returns (x, nfe, wall, traj,
    per_image, calls) with calls = {"nfe", "decoder", "encoder"} per image (exact counts).
    repeats > 1: y is `repeats` copies of the same problems (a tuning grid), which then all start
    from the same initial latents (seeded `seed`)."""
    if repeats > 1:
        g = torch.Generator().manual_seed(seed)
        size = ldm.unet.config.sample_size
        z_T = torch.randn(y.shape[0] // repeats, ldm.latent_channels, size, size, generator=g)
        hp["z_init"] = z_T.repeat(repeats, 1, 1, 1)
    xs, wall, trajs, records = [], 0.0, [], []
    bs = cfg.solve.batch_size
    for b in range(0, y.shape[0], bs):
        hb = {k: (v[b:b + bs] if (k in VECTOR_HPARAMS or k == "z_init") and torch.is_tensor(v) else v)
              for k, v in hp.items()}
        sol = solve(method, y[b:b + bs], op, ldm, steps=cfg.solve.steps, seed=seed + b,
                    captions=None if captions is None else captions[b:b + bs], **hb)
        xs.append(sol.x)
        wall += sol.wall_s
        trajs.append(sol.trajectory)
        records.append(sol.per_image)
    traj = {k: (np.mean([t[k] for t in trajs], 0).tolist() if trajs[0][k] else []) for k in trajs[0]}
    traj["step"] = trajs[0]["step"]
    per_image = {k: torch.cat([r[k] for r in records], 1).numpy() for k in records[0]}
    calls = {"nfe": sol.nfe, "decoder": sol.decoder_calls, "encoder": sol.encoder_calls}
    return torch.cat(xs), sol.nfe, wall, traj, per_image, calls


def record_scores(per_image: dict) -> dict:
    """Per-image scores from the solver's records: the off-range ratio averaged over the recorded
    steps and at the last one, and the final prompt's (and the null prompt's) cosine to the true caption."""
    scores = {}
    if "off_range" in per_image:
        scores["off_range"] = per_image["off_range"].mean(0)
        scores["final_off_range"] = per_image["off_range"][-1]
    for k in ("prompt_cos", "null_cos"):
        if k in per_image:
            scores[k] = per_image[k][-1]
    return scores


def cell(value) -> str | float:
    """A table cell: "mean ± std" for a sample with n > 1 (n in its own column), the mean for n = 1,
    else the number itself."""
    if is_sample(value):
        return value["mean"] if value["n"] == 1 else f"{value['mean']:.3f} ± {value['std']:.3f}"
    return value


def tuning_grid(cfg, method: str) -> list[dict]:
    """The equal-budget grid of `method`: every method tries every ρ of `tuning.rho`, crossed with its
    own extra axes (`tuning.extra.<method>`, e.g. PSLD's γ, P2L's prompt_lr)."""
    import itertools

    extra = dict((cfg.tuning.get("extra", {}) or {}).get(method, {}) or {}) if method else {}
    keys = ["rho", *extra]
    axes = [list(cfg.tuning.rho), *(list(v) for v in extra.values())]
    return [dict(zip(keys, map(float, combo))) for combo in itertools.product(*axes)]


def tune(cfg, method, task, op, ldm, val, seed, base: dict | None = None,
         extra_axes: bool = True) -> tuple[dict, list[dict]]:
    """Equal budget: each method tries its grid (`tuning_grid`) on the validation split and keeps the
    point of best mean SSIM. Grid points that differ only in ρ, γ or prompt_lr are solved as one batch
    (per-image values, the same z_T per image), which gives the same reconstructions as solving them
    one by one; any other axis splits the grid into one batch per value."""
    y = op.measure(val["images"], seed)
    n = len(val["images"])
    grid = tuning_grid(cfg, method if extra_axes else None)
    groups = {}
    for point in grid:
        key = tuple((k, v) for k, v in point.items() if k not in VECTOR_HPARAMS)
        groups.setdefault(key, []).append(point)
    rows = []
    for key, points in groups.items():
        hp = {**method_hparams(cfg, method), **(base or {}), **dict(key)}
        for k in VECTOR_HPARAMS:
            if k in points[0]:
                hp[k] = torch.tensor([p[k] for p in points for _ in range(n)], dtype=torch.float32)
        caps = None if val["captions"] is None else list(val["captions"]) * len(points)
        x, *_ = _solve_batches(method, y.repeat(len(points), *[1] * (y.dim() - 1)), op, ldm, cfg, seed, caps,
                               repeats=len(points), **hp)
        ssim = M.ssim(x, val["images"].repeat(len(points), 1, 1, 1))
        for j, p in enumerate(points):
            rows.append({"task": task, "method": method, **p, "val_ssim": float(ssim[j * n:(j + 1) * n].mean())})
    best = max(rows, key=lambda r: r["val_ssim"])
    return {k: best[k] for k in grid[0]}, rows


def tuning_figure(task, rows):
    """Validation SSIM against ρ per method (other axes at their best value): where each curve turns over."""
    import matplotlib.pyplot as plt

    df = pd.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(4.8, 3))
    for i, (m, d) in enumerate(df.groupby("method", sort=False)):
        curve = d.groupby("rho")["val_ssim"].max()
        ax.plot(curve.index, curve.values, marker="o", ms=3, color=f"C{i}", label=m)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ρ")
    ax.set_ylabel("validation SSIM")
    ax.set_title(f"Tuning, {TASK_NAMES.get(task, task)}", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


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


def main_task(run, task: str) -> dict:
    cfg = run.cfg
    ldm, clf = load_prior(cfg, run.out), load_classifier(cfg, run.out)
    op, test, y = held_out_problem(cfg, task, run.seed)
    val = load_images(cfg, "val", cfg.data.n_val)
    methods = [m for m in cfg.methods if not m.startswith("oracle") or test["captions"] is not None]
    tuned, tuning_rows = {}, []
    for m in methods:
        tuned[m], rows = tune(cfg, m, task, op, ldm, val, run.seed + 1)
        tuning_rows += rows
    run.save_table(pd.DataFrame(tuning_rows), f"tuning_{task}")
    run.save_figure(tuning_figure(task, tuning_rows), f"tuning_{task}")

    gt = test["images"]
    ref = make_split(cfg.seed, "ref", cfg.data.n_ref, cfg.image_size)["images"] if clf is not None else None
    ref_feat = M.features(clf, ref) if clf is not None else None
    k = int(cfg.data.noise_seeds)   # rows: image i under draw d at d·n_test + i
    idx = M.bootstrap_indices(len(gt) // k, cfg.bootstrap.n, run.seed, draws=k)
    per_image, out, recon, fd_boots = [], {}, {}, {}
    full_metrics = FullMetrics(cfg)   # full: LPIPS per image, FID per method (metrics.lpips / metrics.fid)
    for m in methods:
        hp = {**method_hparams(cfg, m), **tuned[m], "record_every": cfg.solve.record_every}
        x, nfe, wall, traj, records, calls = _solve_batches(m, y, op, ldm, cfg, run.seed, test["captions"], **hp)
        recon[m] = x
        scores = {"psnr": M.psnr(x, gt), "ssim": M.ssim(x, gt), "hf_energy": M.high_frequency_energy(x),
                  "residual": M.per_image_residual(op, x, y), **record_scores(records),
                  **full_metrics.scores(x, gt)}
        if clf is not None:
            scores["attr_acc"] = M.attribute_accuracy(clf, x, test["labels"])
        out[m] = {key: sample(per_image_mean(v, k), "image") for key, v in scores.items()}
        # the first noise draw alone (what the ablation and the 250-step check solve)
        out[m]["first_draw"] = {key: sample(np.asarray(scores[key])[:len(gt) // k], "image") for key in ("psnr", "ssim")}
        if clf is not None:
            feat = M.features(clf, x)
            fd_boots[m] = np.array([M.frechet_distance(feat[i], ref_feat) for i in idx])
            out[m]["fd"] = sample([M.frechet_distance(feat, ref_feat)], "seed")
            out[m]["fd_bootstrap_ci"] = M.percentile_interval(fd_boots[m])
        if (fid := full_metrics.fid(x, gt)) is not None:
            out[m]["fid"] = sample([fid], "seed")   # one set: the per-image LPIPS carries the interval
        out[m].update({"rho": tuned[m]["rho"], "tuned": tuned[m], "nfe": nfe, "decoder_calls": calls["decoder"],
                       "encoder_calls": calls["encoder"], "wall_s": sample([wall], "seed"), "trajectory": traj})
        for i in range(len(gt)):
            per_image.append({"task": task, "method": m, "image": i % cfg.data.n_test,
                              "noise_seed": i // cfg.data.n_test, **{k: float(v[i]) for k, v in scores.items()}})
    for m in methods:
        out[m]["runtime_ratio_to_ldps"] = combine([out[m]["wall_s"], out["ldps"]["wall_s"]], lambda a, b: a / b)
        out[m]["nfe_ratio_to_ldps"] = out[m]["nfe"] / out["ldps"]["nfe"]
        for other in ("psld", "ldps"):
            if other in out:
                out[m][f"calls_over_{other}"] = {k: out[m][c] / max(out[other][c], 1) if out[other][c] else None
                                                  for k, c in (("nfe", "nfe"), ("decoder", "decoder_calls"),
                                                               ("encoder", "encoder_calls"))}
    diffs = {}   # paired per-image gaps (and the FD gap with its paired bootstrap interval)
    for a, b in (("p2l", "psld"), ("psld", "ldps"), ("p2l", "ldps"), ("oracle_projection", "p2l")):
        if a in out and b in out:
            diffs[f"{a}_minus_{b}"] = {k: combine([v, out[b][k]], lambda u, w: u - w)
                                       for k, v in out[a].items() if is_sample(v) and v["unit"] == "image"}
            diffs[f"{a}_minus_{b}"]["first_draw"] = {k: combine([v, out[b]["first_draw"][k]], lambda u, w: u - w)
                                                     for k, v in out[a]["first_draw"].items()}
            if a in fd_boots:
                diffs[f"{a}_minus_{b}"]["fd"] = combine([out[a]["fd"], out[b]["fd"]], lambda u, v: u - v)
                diffs[f"{a}_minus_{b}"]["fd_bootstrap_ci"] = M.percentile_interval(fd_boots[a] - fd_boots[b])
    run.save_table(pd.DataFrame(per_image), f"per_image_{task}")
    fig = grid_figure(task, op, y, gt, recon, n=cfg.figure.grid_images)
    run.save_figure(fig, f"grid_{task}")
    gt_hf = M.high_frequency_energy(gt).mean()
    return {"task": task, "methods": out, "paired": diffs, "gt_hf_energy": float(gt_hf), "sigma_y": cfg.solve.sigma_y,
            "steps": cfg.solve.steps, "n_test": len(gt) // int(cfg.data.noise_seeds),
            "noise_seeds": int(cfg.data.noise_seeds)}


def _show(ax, img):
    ax.imshow(((img.permute(1, 2, 0) + 1) / 2).clamp(0, 1).numpy(), interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])


def grid_figure(task, op, y, gt, recon, n=4):
    import matplotlib.pyplot as plt

    cols = ["measurement", *recon, "ground truth"]
    fig, axes = plt.subplots(n, len(cols), figsize=(1.1 * len(cols), 1.15 * n), squeeze=False)
    meas = op.pseudo_adjoint(y)
    for i in range(n):
        imgs = [meas[i], *(recon[m][i] for m in recon), gt[i]]
        for j, img in enumerate(imgs):
            _show(axes[i, j], img)
            if i == 0:
                axes[i, j].set_title(cols[j].replace("_", "-"), fontsize=7)
    fig.suptitle(TASK_NAMES.get(task, task), fontsize=9)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------ main table
def _metrics_parts(out: Path, names) -> dict:
    return {n: read_json(Path(out) / "metrics" / f"main_{n}.json") for n in names}


def main_table(run) -> dict:
    cfg = run.cfg
    parts = _metrics_parts(run.out, cfg.main_tasks)
    methods = list(next(iter(parts.values()))["methods"])
    rows, wide_rows, runtime_rows, hf_rows = [], [], [], []
    for task, res in parts.items():
        for m in methods:
            r = res["methods"][m]
            row = {"task": TASK_NAMES.get(task, task), "method": m, "n": r["ssim"]["n"],
                   "noise draws": res.get("noise_seeds", 1)}
            for k in ("psnr", "ssim", "lpips", "fid", "attr_acc", "fd"):
                if k in r:
                    row[k] = cell(r[k])
                    if k != "attr_acc":
                        wide_rows.append({"task": row["task"], "method": m, "metric": k, "mean": r[k]["mean"]})
            if "fd_bootstrap_ci" in r:
                row["fd_ci"] = "[{:.3f}, {:.3f}]".format(*r["fd_bootstrap_ci"])
            row["rho"] = r["rho"]
            rows.append(row)
            runtime_rows.append({"task": task, "method": m, "nfe_per_image": r["nfe"],
                                 "decoder_calls": r["decoder_calls"], "encoder_calls": r["encoder_calls"],
                                 "wall_s": r["wall_s"]["mean"],
                                 "runtime_ratio_to_ldps": r["runtime_ratio_to_ldps"]["mean"],
                                 "nfe_ratio_to_ldps": r["nfe_ratio_to_ldps"]})
            hf_rows.append({"task": task, "method": m, "n": r["hf_energy"]["n"], "hf_energy": cell(r["hf_energy"]),
                            "gt_hf_energy": res["gt_hf_energy"],
                            "final_off_range": cell(r["final_off_range"]) if "final_off_range" in r else None})
    run.save_table(pd.DataFrame(rows), "main_table")
    wide = pd.DataFrame(wide_rows).pivot_table(index="task", columns=["metric", "method"], values="mean", sort=False)
    wide.columns = [f"{m} {k}" for k, m in wide.columns]
    run.save_table(wide.reset_index(), "main_table_wide")
    run.save_table(pd.DataFrame(runtime_rows), "runtime_nfe")
    run.save_table(pd.DataFrame(hf_rows), "artifacts_range")

    result = {}
    p2l = [parts[t]["methods"]["p2l"] for t in parts]
    if "prompt_cos" in p2l[0]:
        # per image, averaged over the tasks (the same test images in the same order in every task)
        result["prompt"] = {k: sample(np.mean([r[k]["values"] for r in p2l], 0), "image")
                            for k in ("prompt_cos", "null_cos")}
        result["prompt"]["gain"] = gap(result["prompt"]["prompt_cos"], result["prompt"]["null_cos"])
    psld = [parts[t]["methods"]["psld"] for t in parts]
    result["runtime"] = {
        "p2l_over_psld": sample([np.mean([a["wall_s"]["mean"] / b["wall_s"]["mean"] for a, b in zip(p2l, psld)])],
                                "seed"),
        "nfe_p2l_over_psld": float(np.mean([a["nfe"] / b["nfe"] for a, b in zip(p2l, psld)])),
        "decoder_p2l_over_psld": float(np.mean([a["decoder_calls"] / b["decoder_calls"] for a, b in zip(p2l, psld)])),
        "encoder_p2l_over_psld": float(np.mean([a["encoder_calls"] / b["encoder_calls"] for a, b in zip(p2l, psld)])),
        # call counts follow from the configured algorithms (K, steps): accounting, not a measurement
        "from_config": ["nfe_p2l_over_psld", "decoder_p2l_over_psld", "encoder_p2l_over_psld"],
        "calls_per_image": {m: {k: parts[next(iter(parts))]["methods"][m][c] for k, c in
                                (("nfe", "nfe"), ("decoder", "decoder_calls"), ("encoder", "encoder_calls"))}
                            for m in methods},
        "ratio_to_ldps": {m: sample([np.mean([parts[t]["methods"][m]["runtime_ratio_to_ldps"]["mean"]
                                              for t in parts])], "seed") for m in methods}}
    run.save_figure(trajectory_figure(parts), "prompt_trajectory")
    run.save_figure(off_range_figure(parts), "off_range")
    return result


def trajectory_figure(parts):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3))
    for i, (task, res) in enumerate(parts.items()):
        tr = res["methods"]["p2l"]["trajectory"]
        if not tr["prompt_cos"]:
            continue
        ax.plot(tr["step"], tr["prompt_cos"], color=f"C{i}", label=f"tuned C* ({TASK_NAMES.get(task, task)})")
        ax.plot(tr["step"], tr["null_cos"], color=f"C{i}", ls=":", lw=1)
    ax.set_xlabel("sampling step")
    ax.set_ylabel("cos(C, C_true)")
    ax.set_title("Prompt trajectory (dotted: null prompt C_∅)", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def off_range_figure(parts):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(parts), figsize=(2.6 * len(parts), 2.6), squeeze=False)
    for ax, (task, res) in zip(axes[0], parts.items()):
        for m in ("ldps", "psld", "p2l"):
            tr = res["methods"][m]["trajectory"]
            if tr["off_range"]:
                ax.plot(tr["step"], tr["off_range"], label=m)
        ax.set_title(TASK_NAMES.get(task, task), fontsize=8)
        ax.set_xlabel("step")
    axes[0, 0].set_ylabel("‖ẑ₀ − E(D(ẑ₀))‖ / ‖ẑ₀‖")
    axes[0, 0].legend(fontsize=6)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------- floors
FLOOR_ARMS = ("measurement", "least_squares")
FLOOR_COMPARED = ("p2l", "psld", "ldps")     # the methods whose SSIM the floors table shows beside the floors


def measurement_image(op, y: torch.Tensor) -> torch.Tensor:
    """The measurement itself on the image grid, no prior: Aᵖy, the "measurement" column of the grid
    figures. A⁺y for SR (nearest upsampling, the exact pseudo-inverse of average pooling) and inpainting
    (m ⊙ y: the mask is its own pseudo-inverse); Aᵀy for deblurring, where A⁺y is an unregularised
    deconvolution. Aᵀy scores higher SSIM than y itself here (AᵀA's kernel is symmetric, so it undoes
    the motion kernel's shift), which makes it the sterner floor."""
    return op.pseudo_adjoint(y)


def least_squares_image(op, y: torch.Tensor, lam: float, cg_iters: int) -> torch.Tensor:
    """P2L's proximal data-consistency solve (`solver.proximal`: CG on (AᵀA + λI)x = Aᵀy + λx̄, or the
    inpainting closed form) with x̄ = 0 and started from zero: least squares with no prior."""
    return proximal(y, op, torch.zeros_like(op.adjoint(y)), lam, cg_iters)


def floor_images(cfg, task: str, seed: int) -> tuple:
    """(operator, ground truth, y, {arm: reconstruction}) on the main table's test images and noise, with
    P2L's λ and CG iterations (`hparams.p2l`). The arms are clamped to [-1, 1], as every solver's output is."""
    op, test, y = held_out_problem(cfg, task, seed)
    hp = hparams_of("p2l", **method_hparams(cfg, "p2l"))
    arms = {"measurement": measurement_image(op, y),
            "least_squares": least_squares_image(op, y, hp["lam"], hp["cg_iters"])}
    return op, test["images"], y, {k: v.clamp(-1, 1) for k, v in arms.items()}


def least_squares_solve(op, lam: float, cg_iters: int) -> str:
    """How `least_squares_image` solves for this operator, in words (as `solver.proximal` decides)."""
    if isinstance(op, Inpainting):
        return f"closed form, λ = {lam:g}"
    return f"CG, {cg_iters} iterations, λ = {lam:g}"


def _gap(a: dict, b: dict) -> str:
    """The paired per-image gap a − b: its mean and 90 % interval (the ledger's)."""
    from shared.intervals import mean_interval

    d = np.asarray(a["values"]) - np.asarray(b["values"])
    lo, hi, _ = mean_interval(d)
    return f"{d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]"


def floors(run) -> dict:
    """Both floors per task, with the SSIM of P2L, PSLD and LDPS from the main table beside them, and
    every method's paired gap to each floor (`tables/floors_standing`: reported, not claimed)."""
    cfg = run.cfg
    parts = {t: read_json(p) for t in cfg.main_tasks
             if (p := Path(run.out) / "metrics" / f"main_{t}.json").is_file()}
    hp = hparams_of("p2l", **method_hparams(cfg, "p2l"))
    out, rows, standing = {}, [], []
    for task in cfg.main_tasks:
        op, gt, y, arms = floor_images(cfg, task, run.seed)
        k = int(cfg.data.noise_seeds)   # per image, the mean over its noise draws (as in main_task)
        out[task] = {arm: {key: sample(per_image_mean(v, k), "image") for key, v in
                           (("ssim", M.ssim(x, gt)), ("psnr", M.psnr(x, gt)),
                            ("residual", M.per_image_residual(op, x, y)))} for arm, x in arms.items()}
        out[task]["least_squares_solve"] = least_squares_solve(op, hp["lam"], hp["cg_iters"])
        row = {"task": TASK_NAMES.get(task, task), "n": len(gt) // k, "noise draws": k}
        for arm in FLOOR_ARMS:
            row.update({f"{arm} ssim": cell(out[task][arm]["ssim"]), f"{arm} psnr": cell(out[task][arm]["psnr"])})
        row["least_squares solve"] = out[task]["least_squares_solve"]
        methods = parts[task]["methods"] if task in parts else {}
        row.update({f"{m} ssim": cell(methods[m]["ssim"]) for m in FLOOR_COMPARED if m in methods})
        rows.append(row)
        for m, r in methods.items():
            standing.append({"task": TASK_NAMES.get(task, task), "method": m, "ssim": cell(r["ssim"]),
                             **{f"ssim − {arm}": _gap(r["ssim"], out[task][arm]["ssim"]) for arm in FLOOR_ARMS}})
    run.save_table(pd.DataFrame(rows), "floors")
    run.save_table(pd.DataFrame(standing, columns=["task", "method", "ssim",
                                                   *[f"ssim − {arm}" for arm in FLOOR_ARMS]]), "floors_standing")
    beats = {task: beats_both_floors(parts[task]["methods"]["p2l"]["ssim"], out[task])
             for task in cfg.main_tasks if task in parts and "p2l" in parts[task]["methods"]}
    return {"tasks": out, "lam": hp["lam"], "cg_iters": hp["cg_iters"], "n_test": cfg.data.n_test,
            "p2l_beats_both_floors": beats, "p2l_tasks_beating_both_floors": int(sum(beats.values()))}


def beats_both_floors(method_ssim: dict, floors_of_task: dict) -> bool:
    """Whether the paired per-image SSIM gap to each floor has its whole 90 % interval above 0 (the
    ledger's PASS for `>` against that floor)."""
    from shared.intervals import mean_interval

    for arm in FLOOR_ARMS:
        d = np.asarray(method_ssim["values"]) - np.asarray(floors_of_task[arm]["ssim"]["values"])
        if len(d) < 3 or not mean_interval(d)[0] > 0:
            return False
    return True


# -------------------------------------------------------------------------------------- ablation
def ablation(run) -> dict:
    cfg = run.cfg
    task = cfg.ablation.task
    tuned = read_json(Path(run.out) / "metrics" / f"main_{task}.json")["methods"]
    ldm, clf = load_prior(cfg, run.out), load_classifier(cfg, run.out)
    op, test, y = held_out_problem(cfg, task, run.seed)
    n = min(int(cfg.ablation.n), cfg.data.n_test)   # the first n images, first noise draw (cost)
    test = {k: (v if v is None else v[:n]) for k, v in test.items()}   # full: no captions or labels
    y = y[:n]
    val = load_images(cfg, "val", cfg.data.n_val)
    gt = test["images"]
    ref_feat = M.features(clf, make_split(cfg.seed, "ref", cfg.data.n_ref, cfg.image_size)["images"]) if clf else None
    variants = {
        "ldps": ("ldps", {}),
        "prompt_only": ("p2l_prompt_only", {}),
        "projection_only": ("p2l_projection_only", {}),
        "p2l": ("p2l", {}),
        "p2l_gluing": ("p2l_glue", {}),
        **{f"p2l_K{k}": ("p2l", {"prompt_steps": k}) for k in cfg.ablation.K},
        **{f"p2l_tau{t}": ("p2l", {"tau": t}) for t in cfg.ablation.tau},
    }
    # every variant at its own ρ, tuned on the validation split like the main table's methods; LDPS and
    # P2L keep the main table's tuned values; the prompt variants use P2L's tuned prompt_lr
    lr = {"prompt_lr": tuned["p2l"]["tuned"]["prompt_lr"]} if "prompt_lr" in tuned["p2l"]["tuned"] else {}
    rows, out, tuning_rows = [], {}, []
    for name, (method, extra) in variants.items():
        if name in ("ldps", "p2l"):
            own = tuned[name]["tuned"]
        else:
            base = {**(lr if method != "p2l_projection_only" else {}), **extra}
            own, trows = tune(cfg, method, task, op, ldm, val, run.seed + 1, base=base, extra_axes=False)
            own = {**base, **own}
            tuning_rows += [{**r, "variant": name} for r in trows]
        hp = {**method_hparams(cfg, method), **own, "record_every": cfg.solve.record_every, **extra}
        x, nfe, wall, traj, records, _ = _solve_batches(method, y, op, ldm, cfg, run.seed, test["captions"], **hp)
        scores = {"psnr": M.psnr(x, gt), "ssim": M.ssim(x, gt), **record_scores(records),
                  "hf_energy": M.high_frequency_energy(x)}
        r = {k: sample(v, "image") for k, v in scores.items()}
        r["nfe"] = nfe
        r["rho"] = own["rho"]
        if clf is not None:
            r["fd"] = sample([M.frechet_distance(M.features(clf, x), ref_feat)], "seed")
        out[name] = r
        rows.append({"variant": name, "n": len(gt), **{k: cell(v) for k, v in r.items()}, "wall_s": wall})
    run.save_table(pd.DataFrame(rows), "ablation")
    run.save_table(pd.DataFrame(tuning_rows), "ablation_tuning")
    # the better single component by its mean SSIM; P2L is then compared with it image by image
    best = max(("prompt_only", "projection_only"), key=lambda k: out[k]["ssim"]["mean"])
    return {"task": task, "variants": out, "best_single": {"variant": best, "ssim": out[best]["ssim"]}}


# ----------------------------------------------------------------------------------- steps check
def steps_check(run) -> dict:
    """The main table's ranking again at `steps_check.steps` DDIM steps on one task: the methods at their
    tuned hyper-parameters (from the main table, tuned at solve.steps) on the first noise draw of the
    same test images. Per-image SSIM, paired by image."""
    cfg = run.cfg
    chk = cfg.steps_check
    task = chk.task
    tuned = read_json(Path(run.out) / "metrics" / f"main_{task}.json")["methods"]
    ldm = load_prior(cfg, run.out)
    op, test, y = held_out_problem(cfg, task, run.seed)
    n = min(int(chk.n), cfg.data.n_test)   # the first n images, first noise draw (cost)
    gt, y, caps = test["images"][:n], y[:n], None if test["captions"] is None else test["captions"][:n]
    out, rows = {}, []
    for m in chk.methods:
        hp = {**method_hparams(cfg, m), **tuned[m]["tuned"]}
        x, nfe, wall, *_ = _solve_batches(m, y, op, ldm, _with_steps(cfg, int(chk.steps)), run.seed, caps, **hp)
        out[m] = {"ssim": sample(M.ssim(x, gt), "image"), "psnr": sample(M.psnr(x, gt), "image"), "nfe": nfe}
        short = np.asarray(tuned[m]["first_draw"]["ssim"]["values"][:n])   # the same images and noise draw
        rows.append({"task": TASK_NAMES.get(task, task), "method": m, "n": n,
                     f"ssim at {cfg.solve.steps} steps": f"{short.mean():.3f}",
                     f"ssim at {chk.steps} steps": cell(out[m]["ssim"]), "nfe": nfe})
    run.save_table(pd.DataFrame(rows), "steps_check")
    return {"task": task, "steps": int(chk.steps), "methods": out}


def _with_steps(cfg, steps: int):
    """A view of cfg with solve.steps replaced (what `_solve_batches` reads)."""
    from types import SimpleNamespace

    return SimpleNamespace(solve=SimpleNamespace(steps=steps, batch_size=cfg.solve.batch_size))


EXPERIMENTS = {"train_classifier": train_attribute_classifier, "train_prior": train_prior, "prior_gate": prior_gate, "steps_check": steps_check, **{f"main_{t}": partial(main_task, task=t) for t in TASKS},
               "main_table": main_table, "floors": floors, "ablation": ablation}
