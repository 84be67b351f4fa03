"""Base models: the clustered base (k concepts nearest the k-means centroids of edit residuals) and the
ablation's bases (random draws, one family, one concept). Trained weights go under
`checkpoints/bases/`, named by a hash of the config parts they depend on."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from shared.config import ConfigError, config_hash
from shared.samples import sample
from shared.seeding import derive_seed

from ..data import teacher_pairs
from ..metrics import image_features
from ..selection import nearest_to_centroids, random_subset
from ..teacher import families
from ..train import Pairs, eval_psnr, read_losses, train_gan
from .setup import Setup, concept_pool

# ----------------------------------------------------------------------------- base models
def base_kinds(cfg) -> tuple[str, ...]:
    """clustered, random0 … random{n−1} (independent random draws), then `base.extra_kinds` (family,
    single)."""
    return ("clustered", *[f"random{j}" for j in range(cfg.base.random_draws)], *cfg.base.extra_kinds)


def edit_features(setup: Setup, prompts: list[str]) -> np.ndarray:
    """(P, F): per prompt, the mean edit residual f(T(x, c)) − f(x) over the first `base.feature_images`
    training inputs, in the image-feature space of `metrics.image_features`. What the edit does, not
    what its prompt says."""
    cfg = setup.cfg
    inputs = setup.train_inputs[: cfg.base.feature_images]
    f_in = image_features(inputs)
    out = []
    for p in prompts:
        edited = teacher_pairs(setup.teacher, inputs, p, derive_seed(setup.seed, "teacher", "features"),
                               setup.cache / "features")
        out.append((image_features(edited) - f_in).mean(0))
    return np.asarray(out)


def base_concepts(setup: Setup, kind: str) -> list[str]:
    cfg = setup.cfg
    pool = concept_pool(cfg)
    k = min(cfg.base.k, len(pool))
    if kind == "clustered":
        return [pool[i] for i in nearest_to_centroids(edit_features(setup, pool), k, setup.seed)]
    if kind.startswith("random"):
        j = int(kind[len("random"):] or 0)
        return [pool[i] for i in random_subset(len(pool), k, derive_seed(setup.seed, "random concepts", j))]
    if kind == "family":
        if not cfg.base.family_prompts and cfg.teacher.kind != "skimage":
            raise ConfigError(f"base.family_prompts is empty, and teacher.kind={cfg.teacher.kind!r} has no "
                              "built-in families: set base.family_prompts (the one-family base's prompts)")
        return (list(cfg.base.family_prompts) or families()[cfg.base.family])[:k]
    if kind == "single":  # the concept whose standardised edit residual is nearest the pool's mean
        f = edit_features(setup, pool)
        z = (f - f.mean(0)) / np.where(f.std(0) > 0, f.std(0), 1.0)
        return [pool[int(np.argmin(np.linalg.norm(z, axis=1)))]]
    raise ValueError(f"unknown base kind {kind!r}; valid: {base_kinds(cfg)}")


def base_replicates(cfg) -> int:
    """How many clustered bases are trained: one per fine-tuning seed (`base.one_per_seed`), else one."""
    return len(cfg.concepts.seeds) if cfg.base.one_per_seed else 1


def base_replicate(cfg, seed) -> int:
    """The clustered base a fine-tune at `seed` adapts: replicate i for the i-th seed of `concepts.seeds`
    (`base.one_per_seed`), else replicate 0. Replicates share the concepts and the data; they differ in
    their init and minibatch order, so a seed's sample value holds the base's training noise too."""
    return list(cfg.concepts.seeds).index(seed) if cfg.base.one_per_seed else 0


def base_clustered(run) -> dict:
    """The E²GAN base model: trained on the k concepts nearest the k-means centroids of the teacher's
    standardised edit residuals; `base_replicates` of them (replicate 0 is what the rank search, the lr
    grid, the base ablation and the data curve adapt)."""
    setup = Setup(run)
    first = train_base(run, "clustered", setup)
    others = {f"replicate{r}": train_base(run, "clustered", setup, r) for r in range(1, base_replicates(run.cfg))}
    return {**first, "replicates": others}


def base_variants(run) -> dict:
    """The ablation's other bases: `base.random_draws` draws of k random concepts, and `base.extra_kinds`
    (one family, one concept)."""
    setup = Setup(run)
    return {kind: train_base(run, kind, setup) for kind in base_kinds(run.cfg)[1:]}


def base_key(run, kind: str, replicate: int = 0) -> dict:
    """What a base's training reads: its cache key. Not train.lora_lr (only the adapters use it), and of
    `concepts` only the pool it picks from (the new, search and seed lists do not touch its weights)."""
    cfg = run.cfg
    train = {k: v for k, v in dict(cfg.train).items() if k != "lora_lr"}
    base = {k: v for k, v in dict(cfg.base).items() if k != "one_per_seed"}
    return ({k: cfg[k] for k in ("data", "teacher", "text", "model")}
            | {"base": base, "pool": concept_pool(cfg), "train": train, "seed": run.seed, "kind": kind}
            | ({"replicate": replicate} if replicate else {}))


def base_path(run, kind: str, replicate: int = 0) -> Path:
    return run.out / "checkpoints" / "bases" / f"base_{kind}_{config_hash(base_key(run, kind, replicate))}.pt"


def load_base(run, setup: Setup, kind: str, replicate: int = 0):
    path = base_path(run, kind, replicate)
    if not path.is_file():
        which = "base_clustered" if kind == "clustered" else "base_variants"
        raise FileNotFoundError(f"no base model at {path}: run the `{which}` experiment first "
                                f"(python -m papers.e2gan {which} --profile {run.profile} --out {run.out})")
    state = torch.load(path, map_location=setup.device, weights_only=True)
    return state


def train_base(run, kind: str, setup: Setup | None = None, replicate: int = 0) -> dict:
    """One text-conditioned E²GAN on a mix of concepts (chosen by `kind`), trained from scratch;
    `replicate` > 0: the same concepts and data, another init and minibatch order."""
    setup = setup or Setup(run)
    cfg = run.cfg
    concepts = base_concepts(setup, kind)
    train = Pairs.concat([setup.pairs(c, "train") for c in concepts])
    extra = (replicate,) if replicate else ()
    torch.manual_seed(derive_seed(run.seed, "base init", *extra))
    G, D = setup.e2gan(), setup.discriminator()
    path = base_path(run, kind, replicate)
    fit_dir = run.out / "checkpoints" / run.experiment / (f"{kind}_r{replicate}" if replicate else kind)
    if path.is_file():  # trained already under this exact config: reuse
        state = torch.load(path, map_location=setup.device, weights_only=True)
        G.load_state_dict(state["G"])
        steps, flops = int(state["steps"]), int(state["flops_per_step"])
    else:
        # checkpointed (last.ckpt every trainer.every_n_train_steps steps, keyed): a killed run resumes
        hist = train_gan(G, D, train, cfg.base.steps, seed=derive_seed(run.seed, "base train", kind, *extra),
                         out_dir=fit_dir,
                         cache_config=base_key(run, kind, replicate), **setup.train_kwargs(lora=False))
        steps, flops = hist["steps"], hist["flops_per_step"]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save({"G": G.state_dict(), "D": D.state_dict(), "concepts": concepts, "steps": steps,
                    "flops_per_step": flops}, tmp)
        tmp.replace(path)
    setup.log_fit(f"base/{kind}" + (f"_r{replicate}" if replicate else ""), {"losses": read_losses(fit_dir / "logs" / "metrics.csv")})   # kept with the fit
    G.eval()
    seen = {c: eval_psnr(G, setup.pairs(c, "test")) for c in concepts}
    zero_shot = {c: eval_psnr(G, setup.pairs(c, "test")) for c in cfg.concepts.new}
    return {"kind": kind, "concepts": concepts, "n_pairs": len(train), "steps": steps, "flops_per_step": flops,
            "train_flops": steps * flops, "psnr_seen": sample([np.mean(list(seen.values()))], "seed"),
            "psnr_new_zero_shot": sample([np.mean(list(zero_shot.values()))], "seed"),
            "psnr_new_zero_shot_by_concept": zero_shot}


