"""E²GAN experiments: base models, scratch baselines, rank search, the per-concept table, the
base-model ablation, the data-size curve, and latency.

Dependencies (see rules.smk): base_* → rank_search → concept_table / base_ablation / data_size_curve;
scratch_baselines → concept_table (its PSNR target and scratch rows). Trained weights go under
`checkpoints/<experiment>/`, named by a hash of the config parts they depend on.

Stochastic metrics are written as samples over training seeds (`shared.samples.sample`, unit "seed"):
an arm's value for seed i is its mean over new concepts and test images, so two arms pair by seed. The
fine-tuning arms vary with `concepts.seeds`; the bases are trained once, at the run's seed, so base-level
metrics are one-seed samples. Parameter, byte and FLOP-per-step counts stay plain numbers.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from shared.assets import require_path
from shared.config import config_hash
from shared.samples import combine, sample
from shared.seeding import derive_seed

from .data import load_image_folder, make_inputs, slug, split, teacher_pairs, to_images, to_tensor
from .lora import adapter_state, add_lora, lora_param_count, state_bytes
from .metrics import image_features, quality
from .models import CRUCIAL_GROUPS, E2GANGenerator, PatchDiscriminator, Pix2PixGenerator
from .selection import nearest_to_centroids, random_subset
from .teacher import CONCEPTS, InstructPix2PixTeacher, SkimageTeacher, families
from .text import CLIPTextEncoder, HashedTextEncoder, pooled
from .train import Pairs, predict, to_target, train_gan

BASE_KINDS = ("clustered", "random", "family", "single")
FT_ARMS = ("full_ft", "lora_all", "lora_1x", "lora_4x", "lora_random", "lora_searched")
SCRATCH_ARMS = ("pix2pix_scratch", "e2gan_scratch")
SAMPLED = ("psnr", "ssim", "fd", "reached_to_target", "steps_to_target", "flops_to_target")  # vary with the seed
COUNTED = ("trainable_params", "stored_bytes", "flops_per_step")  # counts: plain means over runs


# ----------------------------------------------------------------------------- set-up
def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def make_teacher(cfg):
    t = cfg.teacher
    if t.kind == "skimage":
        return SkimageTeacher(jitter=t.jitter)
    path = require_path(t.path, what="InstructPix2Pix pipeline (model_index.json, unet/, vae/, text_encoder/, "
                        "tokenizer/, scheduler/)", fetch="a snapshot of timbrooks/instruct-pix2pix",
                        config_key="teacher.path")
    return InstructPix2PixTeacher(path, steps=t.steps, guidance_scale=t.guidance_scale,
                                  image_guidance_scale=t.image_guidance_scale, edit_resolution=t.edit_resolution,
                                  batch_size=t.batch_size, device=str(resolve_device(cfg.device)), fp16=t.fp16)


def make_encoder(cfg):
    if cfg.text.encoder == "hashed":
        return HashedTextEncoder(cfg.text.dim, cfg.text.max_tokens)
    path = require_path(cfg.text.clip_path, what="CLIP text encoder (text_encoder/ and tokenizer/)",
                        fetch="the teacher's snapshot (timbrooks/instruct-pix2pix)", config_key="text.clip_path")
    return CLIPTextEncoder(path, cfg.text.max_tokens)


class Setup:
    """Teacher, text encoder and the train/test inputs of one run; pairs are cached on disk."""

    def __init__(self, run):
        cfg = self.cfg = run.cfg
        self.seed = run.seed
        self.device = resolve_device(cfg.device)
        self.teacher = make_teacher(cfg)
        self.encoder = make_encoder(cfg)
        d = cfg.data
        self.cache = run.out / "checkpoints" / "pairs" / config_hash({"data": d, "teacher": cfg.teacher,
                                                                     "seed": run.seed})
        self.out = run.out
        cached = self.cache / "inputs.npy"
        if cached.is_file():
            inputs = np.load(cached)
        else:
            if d.images_dir:
                folder = require_path(d.images_dir, what="input images (FFHQ or Flickr-Scenery crops)",
                                      fetch="FFHQ / LHQ images", config_key="data.images_dir")
                inputs = load_image_folder(folder, d.n_inputs, d.resolution, run.seed)
            else:
                inputs = make_inputs(d.n_inputs, d.resolution, run.seed, d.face_fraction)
            self.cache.mkdir(parents=True, exist_ok=True)
            tmp = self.cache / f"inputs.{os.getpid()}.tmp.npy"
            np.save(tmp, inputs)
            tmp.replace(cached)
        self.train_inputs, self.test_inputs = split(inputs, d.test_fraction)

    @property
    def text_dim(self) -> int:
        return self.encoder.dim

    def pairs(self, prompt: str, split_name: str) -> Pairs:
        inputs = self.train_inputs if split_name == "train" else self.test_inputs
        outputs = teacher_pairs(self.teacher, inputs, prompt, derive_seed(self.seed, "teacher", split_name),
                                self.cache / split_name)
        tokens, mask = self.encoder.encode([prompt])
        return Pairs(to_tensor(inputs).to(self.device), to_tensor(outputs).to(self.device), tokens.to(self.device),
                     mask.to(self.device), torch.zeros(len(inputs), dtype=torch.long, device=self.device))

    def e2gan(self) -> E2GANGenerator:
        m = self.cfg.model
        return E2GANGenerator(m.ngf, self.text_dim, m.heads, m.ffn_mult, m.skip_over_tb).to(self.device)

    def pix2pix(self) -> Pix2PixGenerator:
        return Pix2PixGenerator(self.cfg.model.ngf, self.cfg.model.pix2pix_blocks).to(self.device)

    def discriminator(self) -> PatchDiscriminator:
        return PatchDiscriminator(self.cfg.model.ndf, self.cfg.model.d_layers).to(self.device)

    def train_kwargs(self, lora: bool) -> dict:
        t = self.cfg.train
        return dict(lr=t.lora_lr if lora else t.lr, lr_d=t.lr, beta1=t.beta1, batch_size=t.batch_size,
                    lambda_l1=t.lambda_l1)


def evaluate(G, test: Pairs, fd_dims: int) -> dict:
    return quality(predict(G, test), to_images(test.y), fd_dims)


def seed_samples(df: pd.DataFrame, by: str, seeds, columns) -> dict:
    """{group: {column: sample over `seeds`}}: value i is seed i's mean over the group's rows (concepts)."""
    per_seed = df.groupby([by, "seed"], sort=False)[list(columns)].mean()
    return {group: {c: sample([per_seed.loc[(group, s), c] for s in seeds], "seed") for c in columns}
            for group in df[by].unique()}


def difference(a: dict, b: dict) -> dict:
    """The seed-wise gap a − b of two paired samples."""
    return combine([a, b], lambda x, y: x - y)


def ratio(a: dict, b: dict) -> dict:
    """The seed-wise ratio a / b of two paired samples."""
    return combine([a, b], lambda x, y: x / y)


def full_bytes(G) -> int:
    """Bytes of a full fp32 state_dict: what a full fine-tune (or a scratch model) stores per concept."""
    return sum(t.numel() * t.element_size() for t in G.state_dict().values())


# ----------------------------------------------------------------------------- base models
def base_concepts(setup: Setup, kind: str) -> list[str]:
    cfg = setup.cfg
    pool = list(cfg.concepts.pool) or list(CONCEPTS)
    k = min(cfg.base.k, len(pool))
    emb = pooled(setup.encoder, pool)
    if kind == "clustered":
        return [pool[i] for i in nearest_to_centroids(emb, k, setup.seed)]
    if kind == "random":
        return [pool[i] for i in random_subset(len(pool), k, derive_seed(setup.seed, "random concepts"))]
    if kind == "family":
        return (list(cfg.base.family_prompts) or families()[cfg.base.family])[:k]
    if kind == "single":
        return [pool[int(np.argmin(np.linalg.norm(emb - emb.mean(0), axis=1)))]]
    raise ValueError(f"unknown base kind {kind!r}; valid: {BASE_KINDS}")


def base_clustered(run) -> dict:
    """The E²GAN base model: trained on the k concepts nearest k-means centroids of prompt embeddings."""
    return train_base(run, "clustered")


def base_variants(run) -> dict:
    """The ablation's other bases: k random concepts, one concept family, a single concept."""
    setup = Setup(run)
    return {kind: train_base(run, kind, setup) for kind in BASE_KINDS[1:]}


def base_path(run, kind: str) -> Path:
    cfg = run.cfg
    key = config_hash({k: cfg[k] for k in ("data", "teacher", "text", "model", "train", "base", "concepts")}
                      | {"seed": run.seed, "kind": kind})
    return run.out / "checkpoints" / "bases" / f"base_{kind}_{key}.pt"


def load_base(run, setup: Setup, kind: str):
    path = base_path(run, kind)
    if not path.is_file():
        which = "base_clustered" if kind == "clustered" else "base_variants"
        raise FileNotFoundError(f"no base model at {path}: run the `{which}` experiment first "
                                f"(python -m papers.e2gan {which} --profile {run.profile} --out {run.out})")
    state = torch.load(path, map_location=setup.device, weights_only=True)
    return state


def train_base(run, kind: str, setup: Setup | None = None) -> dict:
    """One text-conditioned E²GAN on a mix of concepts (chosen by `kind`), trained from scratch."""
    setup = setup or Setup(run)
    cfg = run.cfg
    concepts = base_concepts(setup, kind)
    train = Pairs.concat([setup.pairs(c, "train") for c in concepts])
    torch.manual_seed(derive_seed(run.seed, "base init"))
    G, D = setup.e2gan(), setup.discriminator()
    path = base_path(run, kind)
    if path.is_file():  # trained already under this exact config: reuse
        state = torch.load(path, map_location=setup.device, weights_only=True)
        G.load_state_dict(state["G"])
        steps, flops = int(state["steps"]), int(state["flops_per_step"])
    else:
        hist = train_gan(G, D, train, cfg.base.steps, seed=derive_seed(run.seed, "base train", kind),
                         **setup.train_kwargs(lora=False))
        steps, flops = hist["steps"], hist["flops_per_step"]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save({"G": G.state_dict(), "D": D.state_dict(), "concepts": concepts, "steps": steps,
                    "flops_per_step": flops}, tmp)
        tmp.replace(path)
    G.eval()
    seen = {c: evaluate(G, setup.pairs(c, "test"), cfg.fd_dims)["psnr"] for c in concepts}
    zero_shot = {c: evaluate(G, setup.pairs(c, "test"), cfg.fd_dims)["psnr"] for c in cfg.concepts.new}
    return {"kind": kind, "concepts": concepts, "n_pairs": len(train), "steps": steps, "flops_per_step": flops,
            "train_flops": steps * flops, "psnr_seen": sample([np.mean(list(seen.values()))], "seed"),
            "psnr_new_zero_shot": sample([np.mean(list(zero_shot.values()))], "seed"),
            "psnr_new_zero_shot_by_concept": zero_shot}


# ----------------------------------------------------------------------------- fine-tuning arms
def arm_ranks(cfg, arm: str, seed: int, searched: dict | None = None) -> dict:
    r0 = cfg.lora.base_rank
    if arm == "lora_all":
        return {g: cfg.lora.all_layers_rank for g in (*CRUCIAL_GROUPS, "rb")}
    if arm == "lora_1x":
        return {g: r0 for g in CRUCIAL_GROUPS}
    if arm == "lora_4x":
        return {g: r0 * cfg.lora.uniform_high_mult for g in CRUCIAL_GROUPS}
    if arm == "lora_random":
        rng = np.random.default_rng(derive_seed(seed, "random ranks"))
        return {g: int(r0 * rng.choice(cfg.lora.random_mults)) for g in CRUCIAL_GROUPS}
    if arm == "lora_searched":
        return dict(searched)
    raise ValueError(arm)


def finetune(setup: Setup, base: dict, arm: str, ranks: dict | None, train: Pairs, test: Pairs, steps: int,
             seed: int, eval_every: int = 0):
    """Adapt the base to one concept: full fine-tune or LoRA with `ranks` ({group: rank})."""
    torch.manual_seed(derive_seed(seed, "adapter init", arm))
    G, D = setup.e2gan(), setup.discriminator()
    G.load_state_dict(base["G"])
    D.load_state_dict(base["D"])
    stored = full_bytes(G)
    if arm != "full_ft":
        add_lora(G, ranks, setup.cfg.lora.alpha_per_rank)
        stored = state_bytes(adapter_state(G))
    hist = train_gan(G, D, train, steps, seed=derive_seed(seed, "finetune", arm), test=test, eval_every=eval_every,
                     **setup.train_kwargs(lora=arm != "full_ft"))
    hist["stored_bytes"] = stored
    return G, hist


def count_lora_params(setup: Setup, ranks: dict) -> int:
    return lora_param_count(add_lora(setup.e2gan(), ranks))


# ----------------------------------------------------------------------------- experiments
def scratch_baselines(run) -> dict:
    """pix2pix (9 RBs) and E²GAN trained from scratch on each new concept; sets the PSNR target."""
    setup, cfg = Setup(run), run.cfg
    ckpt = run.checkpoint_dir()
    out = {}
    for concept in cfg.concepts.new:
        train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
        for seed in cfg.concepts.seeds:
            row = {}
            for arm in SCRATCH_ARMS:
                torch.manual_seed(derive_seed(seed, "scratch init", arm, concept))
                G = setup.pix2pix() if arm == "pix2pix_scratch" else setup.e2gan()
                hist = train_gan(G, setup.discriminator(), train, cfg.scratch.steps,
                                 seed=derive_seed(seed, "scratch", arm, concept), test=test,
                                 eval_every=cfg.scratch.eval_every, **setup.train_kwargs(lora=False))
                torch.save(G.state_dict(), ckpt / f"{slug(concept)}_{arm}_s{seed}.pt")
                row[arm] = {**evaluate(G, test, cfg.fd_dims), "curve": hist["curve"],
                            "seconds": hist["seconds"], "flops_per_step": hist["flops_per_step"],
                            "steps": hist["steps"], "trainable_params": hist["trainable_params"],
                            "stored_bytes": full_bytes(G)}
            row["target_psnr"] = row["pix2pix_scratch"]["curve"][-1][1] - cfg.finetune.target_margin_db
            out[f"{concept}|{seed}"] = row
    return {"runs": out}


def rank_search(run) -> dict:
    """Greedy rank search on held-out concepts: start every crucial layer group at r₀ ("1×"), try ×2 / ×4
    on one group at a time (short fine-tunes), keep the best PSNR gain per added parameter; stop when the
    best gain is below `search.min_gain_db`, after `search.rounds` rounds."""
    setup, cfg = Setup(run), run.cfg
    base = load_base(run, setup, "clustered")
    sets = [(setup.pairs(c, "train"), setup.pairs(c, "test")) for c in cfg.concepts.search]
    return search_ranks(setup, base, sets, cfg.search, cfg.lora.base_rank, run.seed, cfg.fd_dims)


def search_ranks(setup: Setup, base: dict, sets, search_cfg, base_rank: int, seed: int, fd_dims: int = 16) -> dict:
    def score(ranks):
        vals = []
        for train, test in sets:
            G, _ = finetune(setup, base, "lora_searched", ranks, train, test, search_cfg.steps, seed)
            vals.append(evaluate(G, test, fd_dims)["psnr"])
        return float(np.mean(vals))

    ranks = {g: base_rank for g in CRUCIAL_GROUPS}
    current, params = score(ranks), count_lora_params(setup, ranks)
    history = [{"round": 0, "group": None, "rank": None, "psnr": current, "params": params, "gain_per_kparam": None}]
    for rnd in range(1, search_cfg.rounds + 1):
        best = None
        for g in CRUCIAL_GROUPS:
            for mult in search_cfg.multipliers:
                cand = {**ranks, g: ranks[g] * mult}
                if cand[g] > search_cfg.max_rank:
                    continue
                s, p = score(cand), count_lora_params(setup, cand)
                eff = (s - current) / max(p - params, 1) * 1000
                history.append({"round": rnd, "group": g, "rank": cand[g], "psnr": s, "params": p,
                                "gain_per_kparam": eff})
                if best is None or eff > best[0]:
                    best = (eff, cand, s, p)
        if best is None or best[2] - current < search_cfg.min_gain_db:
            break
        _, ranks, current, params = best
    return {"ranks": ranks, "params": params, "psnr": current, "n_probes": len(history), "history": history}


def _read_metrics(run, experiment: str) -> dict:
    path = run.out / "metrics" / f"{experiment}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing: run the `{experiment}` experiment first")
    return json.loads(path.read_text())


def concept_table(run) -> dict:
    """Per new concept: every arm's quality, parameters, bytes stored, FLOPs and steps to the target."""
    setup, cfg = Setup(run), run.cfg
    base = load_base(run, setup, "clustered")
    searched = _read_metrics(run, "rank_search")["ranks"]
    scratch = _read_metrics(run, "scratch_baselines")["runs"]
    adapters = run.checkpoint_dir("adapters")
    rows, grid_models = [], {}
    for concept in cfg.concepts.new:
        train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
        for seed in cfg.concepts.seeds:
            sc = scratch[f"{concept}|{seed}"]
            target = sc["target_psnr"]
            for arm in SCRATCH_ARMS:
                r = sc[arm]
                hist = {"curve": r["curve"], "seconds": r["seconds"], "steps": r["steps"],
                        "flops_per_step": r["flops_per_step"]}
                rows.append({"concept": concept, "seed": seed, "arm": arm, "psnr": r["psnr"], "ssim": r["ssim"],
                             "fd": r["fd"], "trainable_params": r["trainable_params"],
                             "stored_bytes": r["stored_bytes"], "flops_per_step": r["flops_per_step"],
                             **{f"{k}_to_target": v for k, v in to_target(hist, target).items()}})
            for arm in FT_ARMS:
                ranks = None if arm == "full_ft" else arm_ranks(cfg, arm, seed, searched)
                G, hist = finetune(setup, base, arm, ranks, train, test, cfg.finetune.steps, seed,
                                   cfg.finetune.eval_every)
                rows.append({"concept": concept, "seed": seed, "arm": arm, **evaluate(G, test, cfg.fd_dims),
                             "trainable_params": hist["trainable_params"], "stored_bytes": hist["stored_bytes"],
                             "flops_per_step": hist["flops_per_step"],
                             **{f"{k}_to_target": v for k, v in to_target(hist, target).items()}})
                if seed == cfg.concepts.seeds[0]:
                    grid_models[(concept, arm)] = G
                    if arm == "lora_searched":
                        from safetensors.torch import save_file

                        save_file(adapter_state(G), str(adapters / f"{slug(concept)}.safetensors"))
    (adapters / "ranks.json").write_text(json.dumps(searched))
    df = pd.DataFrame(rows)
    seeds = list(cfg.concepts.seeds)
    summary = df.drop(columns=["concept", "seed"]).groupby("arm", sort=False).mean(numeric_only=True).reset_index()
    # wall time (seconds_to_target) stays in the tables, not in checked metrics
    arms = seed_samples(df, "arm", seeds, SAMPLED)
    for r in summary.to_dict("records"):
        arms[r["arm"]].update({c: float(r[c]) for c in COUNTED})
    summary["psnr_std_over_seeds"] = [np.nan if arms[a]["psnr"]["std"] is None else arms[a]["psnr"]["std"]
                                      for a in summary["arm"]]
    summary["n_seeds"] = len(seeds)
    run.save_table(df, "e2gan_concept_runs")
    run.save_table(summary, "e2gan_concept_table")
    image_grid(run, setup, grid_models)

    s, full = arms["lora_searched"], arms["full_ft"]
    return {
        "arms": arms,
        "searched_ranks": searched,
        "full_minus_searched_psnr_db": difference(full["psnr"], s["psnr"]),
        "flops_ratio_scratch_to_searched": ratio(arms["e2gan_scratch"]["flops_to_target"], s["flops_to_target"]),
        "flops_ratio_pix2pix_to_searched": ratio(arms["pix2pix_scratch"]["flops_to_target"], s["flops_to_target"]),
        "bytes_ratio_full_to_searched": full["stored_bytes"] / s["stored_bytes"],
        "searched_reached_target": s["reached_to_target"],
        "e2gan_scratch_reached_target": arms["e2gan_scratch"]["reached_to_target"],
    }


def image_grid(run, setup: Setup, models: dict) -> None:
    """Input, teacher and each arm on held-out test images of each new concept."""
    import matplotlib.pyplot as plt

    cfg = run.cfg
    ckpt = run.out / "checkpoints" / "scratch_baselines"
    seed = cfg.concepts.seeds[0]
    cols = ["input", "teacher", *SCRATCH_ARMS, *FT_ARMS]
    n = cfg.grid.n_images
    rows = []
    for concept in cfg.concepts.new:
        test = setup.pairs(concept, "test").subset(range(n))
        imgs = {"input": to_images(test.x), "teacher": to_images(test.y)}
        for arm in SCRATCH_ARMS:
            G = setup.pix2pix() if arm == "pix2pix_scratch" else setup.e2gan()
            G.load_state_dict(torch.load(ckpt / f"{slug(concept)}_{arm}_s{seed}.pt", map_location=setup.device,
                                         weights_only=True))
            imgs[arm] = predict(G, test)
        for arm in FT_ARMS:
            imgs[arm] = predict(models[(concept, arm)], test)
        rows += [(concept, i, imgs) for i in range(n)]
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(1.1 * len(cols), 1.1 * len(rows)), squeeze=False)
    for r, (concept, i, imgs) in enumerate(rows):
        for c, col in enumerate(cols):
            ax = axes[r, c]
            ax.imshow(np.clip(imgs[col][i], 0, 1))
            ax.set_xticks([]), ax.set_yticks([])
            if r == 0:
                ax.set_title(col.replace("_", "\n"), fontsize=6)
            if c == 0:
                ax.set_ylabel(concept, fontsize=5)
    fig.tight_layout()
    run.save_figure(fig, "e2gan_image_grid")


def base_ablation(run) -> dict:
    """Which base to adapt from: clustered concepts vs random, one family, one concept (searched LoRA).

    Each kind has one base, trained at the run's seed, and is fine-tuned at the first seed: the samples
    have one seed (fine-tuning at more seeds would not vary the bases, the main source of randomness)."""
    setup, cfg = Setup(run), run.cfg
    searched = _read_metrics(run, "rank_search")["ranks"]
    seed = cfg.concepts.seeds[0]
    rows = []
    for kind in BASE_KINDS:
        base = load_base(run, setup, kind)
        for concept in cfg.concepts.new:
            train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
            G, _ = finetune(setup, base, "lora_searched", searched, train, test, cfg.finetune.steps, seed)
            rows.append({"concept": concept, "seed": seed, "base": kind, **evaluate(G, test, cfg.fd_dims)})
    df = pd.DataFrame(rows)
    wide = df.pivot(index="concept", columns="base", values="psnr")[list(BASE_KINDS)].reset_index()
    per = seed_samples(df, "base", [seed], ("psnr", "ssim", "fd"))
    wide.loc[len(wide)] = ["mean", *[per[k]["psnr"]["mean"] for k in BASE_KINDS]]
    run.save_table(wide, "e2gan_base_ablation")
    run.save_table(df, "e2gan_base_ablation_runs")
    clustered_wins = int(sum(wide.iloc[i]["clustered"] >= wide.iloc[i][list(BASE_KINDS[1:])].max()
                             for i in range(len(wide) - 1)))
    return {"bases": {k: per[k] for k in BASE_KINDS},
            "clustered_minus_random_psnr_db": difference(per["clustered"]["psnr"], per["random"]["psnr"]),
            "concepts_where_clustered_best": sample([clustered_wins], "seed"), "n_concepts": len(cfg.concepts.new)}


def data_size_curve(run) -> dict:
    """Searched-rank LoRA on the m samples nearest k-means centroids of image features, vs m random ones."""
    import matplotlib.pyplot as plt

    setup, cfg = Setup(run), run.cfg
    base = load_base(run, setup, "clustered")
    searched = _read_metrics(run, "rank_search")["ranks"]
    seed = cfg.concepts.seeds[0]
    feats = image_features(setup.train_inputs)
    n = len(setup.train_inputs)
    sizes = [m for m in cfg.data_curve.sizes if m < n] + [n]
    rows = []
    for concept in cfg.data_curve.concepts or cfg.concepts.new:
        train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
        for m in sizes:
            for method in ("kmeans", "random"):
                if m == n and method == "random":
                    continue
                idx = (list(range(n)) if m == n else nearest_to_centroids(feats, m, seed) if method == "kmeans"
                       else random_subset(n, m, derive_seed(seed, "data subset", m)))
                G, _ = finetune(setup, base, "lora_searched", searched, train.subset(idx), test,
                                cfg.data_curve.steps, seed)
                q = evaluate(G, test, cfg.fd_dims)
                rows += [{"concept": concept, "m": m, "method": meth, **q}
                         for meth in (["kmeans", "random"] if m == n else [method])]
    df = pd.DataFrame(rows)
    mean = df.groupby(["method", "m"]).mean(numeric_only=True).reset_index()
    run.save_table(mean, "e2gan_data_size")
    fig, ax = plt.subplots(figsize=(4, 3))
    for method, g in mean.groupby("method"):
        ax.plot(g["m"], g["psnr"], marker="o", label=method)
    ax.set_xscale("log")
    ax.set_xlabel("fine-tuning pairs m")
    ax.set_ylabel("PSNR vs teacher (dB)")
    ax.legend()
    run.save_figure(fig, "e2gan_data_size")
    # one fine-tune per (concept, m, method) at the first seed: one-seed samples
    curve = {method: {str(int(r.m)): sample([r.psnr], "seed") for r in g.itertuples()}
             for method, g in mean.groupby("method")}
    small = str(sizes[0])
    return {"psnr": curve, "sizes": sizes, "kmeans_minus_random_smallest_m_db":
            difference(curve["kmeans"][small], curve["random"][small])}


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels on a CUDA device (a no-op elsewhere), so a clock read after it is honest."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def forward_seconds(G, x, tokens, mask, repeats: int) -> list[float]:
    """Wall seconds of `repeats` forwards of G, each bracketed by a device synchronize."""
    import time

    device = x.device
    times = []
    with torch.no_grad():
        for _ in range(repeats):
            synchronize(device)
            t0 = time.perf_counter()
            G(x, tokens, mask)
            synchronize(device)
            times.append(time.perf_counter() - t0)
    return times


def latency_table(run) -> dict:
    """Parameters, forward FLOPs and latency (batch 1, on `cfg.device`) of the E²GAN generator vs pix2pix.

    Every tensor the generators see (input, text tokens, mask) is on the model's device, and on CUDA
    the clock is read only after `torch.cuda.synchronize()`."""
    from torch.utils.flop_counter import FlopCounterMode

    setup, cfg = Setup(run), run.cfg
    tokens, mask = setup.encoder.encode(["sepia"])
    tokens, mask = tokens.to(setup.device), mask.to(setup.device)
    rows, metrics = [], {}
    for res in cfg.latency.resolutions:
        x = torch.zeros(1, 3, res, res, device=setup.device)
        for name, G in (("e2gan", setup.e2gan()), ("pix2pix", setup.pix2pix())):
            G.eval()
            with torch.no_grad(), FlopCounterMode(display=False) as fc:
                G(x, tokens, mask)
            times = forward_seconds(G, x, tokens, mask, cfg.latency.repeats)
            params = sum(p.numel() for p in G.parameters())
            rows.append({"model": name, "resolution": res, "params": params, "gflops": fc.get_total_flops() / 1e9,
                         "latency_ms_median": 1000 * float(np.median(times))})
            metrics[f"{name}_{res}"] = {"params": params, "flops": int(fc.get_total_flops())}
    run.save_table(pd.DataFrame(rows), "e2gan_latency")
    return metrics


EXPERIMENTS = {
    "base_clustered": base_clustered,
    "base_variants": base_variants,
    "scratch_baselines": scratch_baselines,
    "rank_search": rank_search,
    "concept_table": concept_table,
    "base_ablation": base_ablation,
    "data_size_curve": data_size_curve,
    "latency_table": latency_table,
}
