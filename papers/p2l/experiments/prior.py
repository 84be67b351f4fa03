"""The tiny world's prior (train_classifier, train_prior) and its gate (prior_gate)."""
from __future__ import annotations

import time

import torch

from shared.samples import sample

from .. import metrics as M
from ..components import assemble, sample_prior, tiny_tokenizer
from ..data import ATTRIBUTES, make_split
from ..models import save_pipeline
from .problems import _classifier_file, _prior_dir, _show, load_classifier, load_prior, n_priors, replica_training


def train_attribute_classifier(run) -> dict:
    """The attribute classifier, trained on the prior's training images: its own job, so that it runs
    beside the VAE and the LDM (the gate, the FD proxy and attribute accuracy read it)."""
    cfg = run.cfg
    if cfg.full.sd_path:
        return {"skipped": "full profile: no attribute classifier (the tiny world's attributes)"}
    from ..prior import train_classifier   # Lightning (≈ 3 s to import): only the training jobs need it

    start = time.perf_counter()
    data = make_split(run.seed, "train", cfg.data.n_train, cfg.image_size)
    clf = train_classifier(cfg.classifier, data["images"], data["labels"], run.checkpoint_dir("classifier"), run.seed)
    from safetensors.torch import save_file

    save_file(clf.state_dict(), str(_classifier_file(run.out)))
    return {"train_wall_s": time.perf_counter() - start, "steps": int(cfg.classifier.steps)}


def train_prior(run, prior: int = 0) -> dict:
    """VAE → latents → text encoder + UNet, saved as a diffusers pipeline (what the solvers load). Prior
    k of the run trains from seed + k (its own initialisation and batch order; the same training images)."""
    cfg = run.cfg
    if cfg.full.sd_path:
        return {"skipped": "full profile uses Stable Diffusion from full.sd_path"}
    from ..prior import encode_all, train_ldm, train_vae   # Lightning: only the training jobs import it

    start = time.perf_counter()
    seed, tag, data = replica_training(run, prior)
    images, captions = data["images"], data["captions"]
    vae = train_vae(cfg.vae, images, run.checkpoint_dir(f"vae{tag}"), seed)
    latents = encode_all(vae, images)
    scale = float(1.0 / latents.std())
    t_vae = time.perf_counter()
    tok = tiny_tokenizer()
    ids = tok(captions, padding="max_length", max_length=tok.model_max_length, return_tensors="pt").input_ids
    unet, text_encoder = train_ldm(cfg.ldm, latents * scale, ids, tok, run.checkpoint_dir(f"ldm{tag}"), seed)
    t_ldm = time.perf_counter()
    ldm = assemble(vae, unet, text_encoder, scale, torch.device("cpu"))
    save_pipeline(ldm, _prior_dir(run.out, prior) / "pipeline")
    test = make_split(run.seed, "test", cfg.prior_check.n, cfg.image_size)
    with torch.no_grad():
        rec = ldm.decode(ldm.encode(test["images"]))
    return {"prior": prior, "seed": seed, "vae_rec_psnr": float(M.psnr(rec, test["images"]).mean()), "latent_scale": scale,
            "train_wall_s": {"vae": t_vae - start, "ldm": t_ldm - t_vae}}


def prior_gate(run) -> dict:
    """The gate on every saved prior: the classifier reads real images; samples with the true caption
    (CFG at prior_check.guidance) carry its attributes; samples with the null caption have the data's
    attribute frequencies; both drawn with the sampler's η = prior_check.eta. Prior 0's results at the top level, prior k's under `prior_<k>`. Its
    own job, so that it runs beside the main tasks."""
    cfg = run.cfg
    if cfg.full.sd_path:
        return {"skipped": "full profile uses Stable Diffusion from full.sd_path"}
    clf = load_classifier(cfg, run.out)
    chk = cfg.prior_check
    test = make_split(run.seed, "test", chk.n, cfg.image_size)
    real = M.attribute_hits(clf, test["images"], test["labels"])
    names = list(ATTRIBUTES)
    null_n = int(chk.get("null_n") or chk.n)   # the null-caption samples (the frequency rows' power; README)
    eta = float(chk.get("eta", 0.0))           # the gate's sampler: 1 = ancestral (DDPM), 0 = DDIM (README)
    out = {"classifier_real": {a: sample(real[:, j], "image", binary=True) for j, a in enumerate(names)},
           "data_frequency": {a: 1 / len(v) for a, v in ATTRIBUTES.items()},
           "guidance": chk.guidance, "sample_steps": chk.steps, "sampler_eta": eta, "n": chk.n, "null_n": null_n,
           "priors": n_priors(cfg)}
    for prior in range(n_priors(cfg)):
        ldm = load_prior(cfg, run.out, prior)
        x_cond = sample_prior(ldm, test["captions"], chk.steps, chk.guidance, run.seed, eta=eta)
        cond = M.attribute_hits(clf, x_cond, test["labels"])
        x_null = sample_prior(ldm, [""] * null_n, chk.steps, 0.0, run.seed + 1, eta=eta)
        with torch.no_grad():
            null_out = clf(x_null)
        null_pred = torch.stack([o.argmax(1) for o in null_out], 1).numpy()
        null_freq, tv = {}, {}
        for j, attr in enumerate(names):
            values = ATTRIBUTES[attr]
            # per image, the classifier's probability of each value: its mean is the value's frequency
            # among the null-caption samples (soft counts, so that a unit can disagree even at smoke)
            probs = torch.softmax(null_out[j].double(), 1).numpy()
            null_freq[attr] = {v: sample(probs[:, k], "image") for k, v in enumerate(values)}
            tv[attr] = 0.5 * float(sum(abs((null_pred[:, j] == k).mean() - 1 / len(values)) for k in range(len(values))))
        part = {  # per-image hits (0/1): the ledger decides them by the exact binomial interval
                "conditional": {a: sample(cond[:, j], "image", binary=True) for j, a in enumerate(names)},
                "null_frequency": null_freq, "null_tv_distance": tv}
        if prior == 0:
            run.save_figure(prior_figure(test["images"], x_cond, x_null, n=16), "prior_samples")
            out.update(part)
        else:
            out[f"prior_{prior}"] = part
    return out


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
