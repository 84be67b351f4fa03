"""E²GAN experiments: base models, scratch baselines, rank search, the per-concept table, the
base-model ablation, the data-size curve, and latency.

Dependencies (see rules.smk): base_clustered → rank_search → lr_grid → concept_table / base_ablation /
data_size_curve; base_variants → base_ablation; scratch_s0 … scratch_s2 (one job per seed) → concept_table (the PSNR
target and scratch rows); lr_grid → finetune_s0 … finetune_s2 (the fine-tuning arms, one job per seed, beside the
scratch jobs) → concept_table. Trained weights go under
`checkpoints/<experiment>/`, named by a hash of the config parts they depend on.

Stochastic metrics are written as samples over training seeds (`shared.samples.sample`, unit "seed"):
an arm's value for seed i is its mean over new concepts and test images, so two arms pair by seed. All
fine-tuning arms of one (concept, seed) share the minibatch order and the initialisation seed (common
random numbers), so their differences are paired. The bases are trained once each, at the run's seed;
the random-base ablation has `base.random_draws` draws. Parameter, byte and FLOP-per-step counts stay
plain numbers.
"""
from __future__ import annotations

import json
import os
from functools import partial, wraps
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from shared.assets import require_path
from shared.config import ConfigError, config_hash
from shared.curves import Curves
from shared.run_cache import cache_key
from shared.samples import combine, count, gap, sample
from shared.seeding import derive_seed

from .data import load_image_folder, make_inputs, slug, split, teacher_pairs, to_images, to_tensor
from .lora import GROUP_PREFIXES, adapter_state, add_lora, layer_groups, lora_param_count, state_bytes
from .fd_net import EditFeatures, cached_edit_net, labelled_edits, read_edit_net_losses
from .metrics import feature_fd, image_features, quality
from .ranks import group_costs, matched_random_ranks
from .models import CRUCIAL_GROUPS, E2GANGenerator, PatchDiscriminator, Pix2PixGenerator
from .selection import nearest_to_centroids, random_subset
from .teacher import CONCEPTS, InstructPix2PixTeacher, SkimageTeacher, families
from .text import CLIPTextEncoder, HashedTextEncoder, pooled
from .train import Pairs, eval_psnr, predict, read_losses, to_target, train_gan

FT_ARMS = ("full_ft", "lora_all", "lora_1x", "lora_4x", "lora_random", "lora_searched")
SCRATCH_ARMS = ("pix2pix_scratch", "e2gan_scratch")
SAMPLED = ("psnr", "ssim", "fd", "reached_to_target", "steps_to_target", "flops_to_target")  # vary with the seed
PAPER_METRICS = ("fid", "kid", "clip_score")  # full profile only (metrics.fid)
COUNTED = ("trainable_params", "stored_bytes", "flops_per_step")  # counts: plain means over runs
LOSS_COLUMNS = ["step", "loss_g", "loss_d"]   # logs/<experiment>.csv: every GAN fit's losses (train.read_losses)


def fit_curves(run) -> Curves:
    """The running experiment's loss curves, one collection per run (every `Setup` of it adds to it)."""
    if not hasattr(run, "curves"):
        run.curves = Curves(LOSS_COLUMNS)
    return run.curves


def with_curves(experiment):
    """`experiment`, then the losses of every GAN fit it ran written to `logs/<experiment>.csv`."""
    @wraps(experiment)
    def run_and_save_curves(run):
        metrics = experiment(run)
        fit_curves(run).save(run)
        return metrics
    return run_and_save_curves


# ----------------------------------------------------------------------------- set-up
def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def concept_pool(cfg) -> list[str]:
    """The known concepts the base is chosen from: `concepts.pool_file` (one instruction prompt a line),
    else `concepts.pool`, else, for the scikit-image teacher, its ~30 operations. Any other teacher needs
    its own pool (instruction prompts): prompting InstructPix2Pix with scikit-image operation names
    would be silently wrong."""
    if cfg.concepts.pool_file:
        path = require_path(cfg.concepts.pool_file, what="the concept pool (one instruction prompt a line)",
                            fetch="a list of the teacher's instruction prompts", config_key="concepts.pool_file")
        pool = [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
        if not pool:
            raise ConfigError(f"concepts.pool_file {path} holds no prompts")
        return pool
    if cfg.concepts.pool:
        return list(cfg.concepts.pool)
    if cfg.teacher.kind != "skimage":
        raise ConfigError(f"concepts.pool is empty, and teacher.kind={cfg.teacher.kind!r} has no built-in "
                          "concepts: set concepts.pool to its instruction prompts")
    return list(CONCEPTS)


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
        self.curves, self._fit_counts = fit_curves(run), {}
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
        m = cfg.metrics
        self.inception = self.clip_path = None
        if m.fid:  # full: FID/KID in InceptionV3 features, CLIP score; the weights must be local
            from shared.image_metrics import InceptionFeatures

            self.inception = InceptionFeatures(require_path(
                m.inception_path, what="TorchScript InceptionV3 feature network (inception-2015-12-05.pt)",
                fetch="the StyleGAN2-ADA metrics file inception-2015-12-05.pt", config_key="metrics.inception_path"))
            self.clip_path = require_path(m.clip_path, what="CLIP model (config.json, weights, processor files)",
                                          fetch="openai/clip-vit-large-patch14", config_key="metrics.clip_path")

    def log_fit(self, name: str, hist: dict) -> None:
        """Keep a fit's losses for the experiment's curves, as `<name>/<k>` (the k-th fit of that name:
        rank-search probes and lr grids repeat one), so `name` = `<arm>/<concept>/...` groups by arm."""
        k = self._fit_counts[name] = self._fit_counts.get(name, 0) + 1
        self.curves.add(f"{name}/{k}", hist["losses"])

    def paper_metrics(self, G, test: Pairs, prompt: str) -> dict:
        """FID, KID (against the teacher's test outputs) and CLIP score; {} unless `metrics.fid`."""
        if self.inception is None:
            return {}
        from shared.image_metrics import fid_kid

        from .metrics import clip_score

        pred = predict(G, test)
        return {**fid_kid(pred, to_images(test.y), self.inception), "clip_score": clip_score(pred, prompt, self.clip_path)}

    @property
    def fd_features(self):
        """The `fd` proxy's feature map: the cached edit classifier's penultimate layer (trained on first
        use, see `fd_net`)."""
        if not hasattr(self, "_fd_features"):
            self._fd_features = edit_net(self)
        return self._fd_features

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

    def train_kwargs(self, lora: bool, lr: float | None = None) -> dict:
        t = self.cfg.train
        lr = lr if lr is not None else t.lora_lr if lora else t.lr
        return dict(lr=lr, lr_d=t.lr, beta1=t.beta1, batch_size=t.batch_size, lambda_l1=t.lambda_l1)


def evaluate(G, test: Pairs, setup: "Setup") -> dict:
    """PSNR, SSIM and the `fd` proxy (in the edit classifier's features) against the teacher's outputs."""
    return quality(predict(G, test), to_images(test.y), setup.cfg.fd_dims, setup.fd_features)


# ----------------------------------------------------------------------------- the fd proxy's features
def edit_net_data(setup: "Setup") -> tuple[np.ndarray, np.ndarray]:
    """The classifier's data: the first `fd_net.images` training inputs, unedited (class 0, "identity")
    and as the teacher edits them for each pool concept (the new concepts are not among them)."""
    cfg = setup.cfg
    pool = concept_pool(cfg)
    inputs = setup.train_inputs[: cfg.fd_net.images]
    seed = derive_seed(setup.seed, "teacher", "features")  # the clustering's edits (`edit_features`)
    return labelled_edits(inputs, pool, lambda x, p: teacher_pairs(setup.teacher, x, p, seed,
                                                                   setup.cache / "features"))


def edit_net_key(setup: "Setup") -> dict:
    cfg = setup.cfg
    return cache_key({k: cfg[k] for k in ("data", "teacher", "fd_net")} | {"pool": concept_pool(cfg)},
                     setup.seed)


def edit_net_path(setup: "Setup") -> Path:
    return setup.out / "checkpoints" / "fd_net" / "edit_net.pt"


def edit_net(setup: "Setup") -> EditFeatures:
    n_classes = 1 + len(concept_pool(setup.cfg))
    return cached_edit_net(edit_net_path(setup), edit_net_key(setup),
                           partial(edit_net_data, setup), n_classes, setup.cfg.fd_net,
                           derive_seed(setup.seed, "fd net"))


def fd_net(run) -> dict:
    """Train (or reuse) the `fd` proxy's edit classifier; its accuracy on test inputs (every pool concept
    and identity), and the proxy between half the teacher's test outputs of a new concept and the other
    half as they are, unedited, blurred or noisy."""
    from skimage.filters import gaussian

    setup = Setup(run)
    feats = setup.fd_features
    cfg = run.cfg
    pool = concept_pool(cfg)
    test_in = setup.test_inputs
    seed = derive_seed(run.seed, "teacher", "fd net test")
    images, labels = labelled_edits(test_in, pool, lambda x, p: teacher_pairs(setup.teacher, x, p, seed,
                                                                              setup.cache / "fd_test"))
    concept = cfg.concepts.new[0]
    test = setup.pairs(concept, "test")
    y, x = to_images(test.y), to_images(test.x)
    half = len(y) // 2
    ref = y[:half]
    degraded = {"same_concept": y[half:], "unedited": x[half:],
                "blurred": np.stack([gaussian(im, sigma=1.0, channel_axis=-1) for im in y[half:]]),
                "noisy": np.clip(y[half:] + np.random.default_rng(run.seed).normal(0, 0.1, y[half:].shape), 0, 1)}
    curves = Curves(["step", "loss"])   # the edit net's training curve, kept beside the cached net
    curves.add("edit_net", read_edit_net_losses(edit_net_path(setup)))
    curves.save(run)
    return {"test_accuracy": feats.accuracy(images, labels), "n_classes": len(pool) + 1,
            "chance": 1 / (len(pool) + 1), "concept": concept,
            **{f"fd_{k}": feature_fd(v, ref, cfg.fd_dims, feats) for k, v in degraded.items()}}


def seed_samples(df: pd.DataFrame, by: str, seeds, columns) -> dict:
    """{group: {column: sample over `seeds`}}: value i is seed i's mean over the group's rows (concepts)."""
    per_seed = df.groupby([by, "seed"], sort=False)[list(columns)].mean()
    return {group: {c: sample([per_seed.loc[(group, s), c] for s in seeds], "seed") for c in columns}
            for group in df[by].unique()}


def difference(a: dict, b: dict) -> dict:
    """The seed-wise gap a − b of two paired samples."""
    return gap(a, b)


def ratio(a: dict, b: dict) -> dict:
    """The seed-wise ratio a / b of two paired samples."""
    return combine([a, b], lambda x, y: x / y)


def full_bytes(G) -> int:
    """Bytes of a full fp32 state_dict: what a full fine-tune (or a scratch model) stores per concept."""
    return sum(t.numel() * t.element_size() for t in G.state_dict().values())


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


def base_clustered(run) -> dict:
    """The E²GAN base model: trained on the k concepts nearest the k-means centroids of the teacher's
    standardised edit residuals."""
    return train_base(run, "clustered")


def base_variants(run) -> dict:
    """The ablation's other bases: `base.random_draws` draws of k random concepts, and `base.extra_kinds`
    (one family, one concept)."""
    setup = Setup(run)
    return {kind: train_base(run, kind, setup) for kind in base_kinds(run.cfg)[1:]}


def base_key(run, kind: str) -> dict:
    """What a base's training reads (not train.lora_lr, which only the adapters use): its cache key."""
    cfg = run.cfg
    train = {k: v for k, v in dict(cfg.train).items() if k != "lora_lr"}
    return ({k: cfg[k] for k in ("data", "teacher", "text", "model", "base", "concepts")}
            | {"train": train, "seed": run.seed, "kind": kind})


def base_path(run, kind: str) -> Path:
    return run.out / "checkpoints" / "bases" / f"base_{kind}_{config_hash(base_key(run, kind))}.pt"


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
    fit_dir = run.out / "checkpoints" / run.experiment / kind
    if path.is_file():  # trained already under this exact config: reuse
        state = torch.load(path, map_location=setup.device, weights_only=True)
        G.load_state_dict(state["G"])
        steps, flops = int(state["steps"]), int(state["flops_per_step"])
    else:
        # checkpointed (last.ckpt every trainer.every_n_train_steps steps, keyed): a killed run resumes
        hist = train_gan(G, D, train, cfg.base.steps, seed=derive_seed(run.seed, "base train", kind),
                         out_dir=fit_dir,
                         cache_config=base_key(run, kind), **setup.train_kwargs(lora=False))
        steps, flops = hist["steps"], hist["flops_per_step"]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save({"G": G.state_dict(), "D": D.state_dict(), "concepts": concepts, "steps": steps,
                    "flops_per_step": flops}, tmp)
        tmp.replace(path)
    setup.log_fit(f"base/{kind}", {"losses": read_losses(fit_dir / "logs" / "metrics.csv")})   # kept with the fit
    G.eval()
    seen = {c: eval_psnr(G, setup.pairs(c, "test")) for c in concepts}
    zero_shot = {c: eval_psnr(G, setup.pairs(c, "test")) for c in cfg.concepts.new}
    return {"kind": kind, "concepts": concepts, "n_pairs": len(train), "steps": steps, "flops_per_step": flops,
            "train_flops": steps * flops, "psnr_seen": sample([np.mean(list(seen.values()))], "seed"),
            "psnr_new_zero_shot": sample([np.mean(list(zero_shot.values()))], "seed"),
            "psnr_new_zero_shot_by_concept": zero_shot}


# ----------------------------------------------------------------------------- fine-tuning arms
def random_ranks(setup: Setup, searched: dict, seed: int, concept: str) -> tuple[dict, bool]:
    """One random rank draw for (seed, concept), matched to the searched arm's parameter count."""
    lo = setup.cfg.lora
    if not hasattr(setup, "_lora_costs"):
        setup._lora_costs = group_costs(lambda r: count_lora_params(setup, r), CRUCIAL_GROUPS)
    costs = setup._lora_costs
    rng = np.random.default_rng(derive_seed(seed, "random ranks", concept))
    return matched_random_ranks(costs, searched, lo.base_rank, lo.random_mults, lo.random_tolerance, rng)


def arm_ranks(setup: Setup, arm: str, seed: int, concept: str, searched: dict | None = None) -> dict | None:
    cfg = setup.cfg
    r0 = cfg.lora.base_rank
    if arm == "full_ft":
        return None
    if arm == "lora_all":
        return {g: cfg.lora.all_layers_rank for g in (*CRUCIAL_GROUPS, "rb")}
    if arm == "lora_1x":
        return {g: r0 for g in CRUCIAL_GROUPS}
    if arm == "lora_4x":
        return {g: r0 * cfg.lora.uniform_high_mult for g in CRUCIAL_GROUPS}
    if arm == "lora_random":
        return random_ranks(setup, searched, seed, concept)[0]
    if arm == "lora_searched":
        return dict(searched)
    raise ValueError(arm)


def finetune(setup: Setup, base: dict, arm: str, ranks: dict | None, train: Pairs, test: Pairs, steps: int,
             seed: int, eval_every: int = 0, lr: float | None = None, concept: str = ""):
    """Adapt the base to one concept: full fine-tune or LoRA with `ranks` ({group: rank}).

    The init and minibatch seeds depend on (seed, concept) only, never on the arm: every arm of one
    (concept, seed) sees the same minibatches in the same order (common random numbers)."""
    torch.manual_seed(derive_seed(seed, "adapter init", concept))
    G, D = setup.e2gan(), setup.discriminator()
    G.load_state_dict(base["G"])
    D.load_state_dict(base["D"])
    stored = full_bytes(G)
    if arm != "full_ft":
        add_lora(G, ranks, setup.cfg.lora.alpha_per_rank)
        stored = state_bytes(adapter_state(G))
    hist = train_gan(G, D, train, steps, seed=derive_seed(seed, "finetune", concept), test=test,
                     eval_every=eval_every, **setup.train_kwargs(lora=arm != "full_ft", lr=lr))
    hist["stored_bytes"] = stored
    setup.log_fit(f"{arm}/{concept}/s{seed}", hist)
    return G, hist


def count_lora_params(setup: Setup, ranks: dict) -> int:
    return lora_param_count(add_lora(setup.e2gan(), ranks))


def relative_change(before: dict, G, groups=tuple(GROUP_PREFIXES)) -> dict:
    """{group: ‖ΔW‖_F / ‖W‖_F} over the conv/linear weights and biases of each layer group."""
    after = G.state_dict()
    names = layer_groups(G, groups)
    num, den = {g: 0.0 for g in groups}, {g: 0.0 for g in groups}
    for module, g in names.items():
        for leaf in ("weight", "bias"):
            key = f"{module}.{leaf}"
            if key in before:
                num[g] += float((after[key] - before[key]).pow(2).sum())
                den[g] += float(before[key].pow(2).sum())
    return {g: (num[g] / den[g]) ** 0.5 for g in groups if den[g] > 0}


# ----------------------------------------------------------------------------- experiments
N_SCRATCH_JOBS = 3  # scratch baselines run as one job per seed index (rules.smk); extra jobs skip


def scratch_seed(index: int, run) -> dict:
    """pix2pix (9 RBs) trained from scratch on each new concept, at seed `concepts.seeds[index]`, until its
    validation PSNR plateaus (`scratch.patience` evaluations without a `scratch.min_delta` dB gain); the
    target is that plateau (its best PSNR) − `finetune.target_margin_db`. E²GAN from scratch then trains
    on the same minibatches until it reaches the target or plateaus. The last job also takes any seeds
    beyond `N_SCRATCH_JOBS`."""
    mine = job_seeds(run.cfg, index, N_SCRATCH_JOBS)
    return {"runs": scratch_runs(run, mine) if mine else {}, "seeds": mine}


def job_seeds(cfg, index: int, n_jobs: int) -> list:
    """The seeds of per-seed job `index` of `n_jobs`: one each, the last job also any beyond."""
    seeds = list(cfg.concepts.seeds)
    return seeds[index:index + 1] if index < n_jobs - 1 else seeds[index:]


def lr_grid_scratch(run) -> dict:
    """The lr policy of the fine-tuning arms (`tune_lr`), for the two scratch arms: each trains from
    scratch for `lr_grid.scratch_steps` steps per lr on the validation concept `concepts.search[0]` and
    keeps the lr with the best test PSNR there."""
    setup, cfg = Setup(run), run.cfg
    concept = cfg.concepts.search[0]
    train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
    rows, flops = [], [0]

    def score(arm, lr):
        torch.manual_seed(derive_seed(run.seed, "scratch init", arm, concept))
        G = setup.pix2pix() if arm == "pix2pix_scratch" else setup.e2gan()
        h = train_gan(G, setup.discriminator(), train, cfg.lr_grid.scratch_steps,
                      seed=derive_seed(run.seed, "scratch", concept), **setup.train_kwargs(lora=False, lr=lr))
        flops[0] += h["steps"] * h["flops_per_step"]
        setup.log_fit(f"{arm}/{concept}/lr{lr:g}", h)
        return eval_psnr(G, test)

    for arm in SCRATCH_ARMS:
        rows += [{"arm": arm, **r} for r in tune_lr(partial(score, arm), cfg.lr_grid.lrs, cfg.lr_grid.extend)]
    return _lr_grid_result(run, rows, SCRATCH_ARMS, "e2gan_lr_grid_scratch", concept, flops[0])


def scratch_runs(run, seeds) -> dict:
    setup, cfg = Setup(run), run.cfg
    sc = cfg.scratch
    lrs = _read_metrics(run, "lr_grid_scratch")["chosen"]
    ckpt = run.out / "checkpoints" / "scratch_baselines"
    ckpt.mkdir(parents=True, exist_ok=True)
    out = {}
    for concept in cfg.concepts.new:
        train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
        for seed in seeds:
            row, target = {}, None
            for arm in SCRATCH_ARMS:
                torch.manual_seed(derive_seed(seed, "scratch init", arm, concept))
                G = setup.pix2pix() if arm == "pix2pix_scratch" else setup.e2gan()
                hist = train_gan(G, setup.discriminator(), train, sc.max_steps,
                                 seed=derive_seed(seed, "scratch", concept), test=test, eval_every=sc.eval_every,
                                 patience=sc.patience, min_delta=sc.min_delta, stop_at=target,
                                 **setup.train_kwargs(lora=False, lr=lrs[arm]))
                torch.save(G.state_dict(), ckpt / f"{slug(concept)}_{arm}_s{seed}.pt")
                setup.log_fit(f"{arm}/{concept}/s{seed}", hist)
                row[arm] = {**evaluate(G, test, setup), **setup.paper_metrics(G, test, concept),
                            "curve": hist["curve"],
                            "seconds": hist["seconds"], "flops_per_step": hist["flops_per_step"],
                            "steps": hist["steps"], "trainable_params": hist["trainable_params"],
                            "stored_bytes": full_bytes(G), "lr": lrs[arm]}
                if arm == "pix2pix_scratch":
                    best = max(hist["curve"][1:], key=lambda c: c[1])
                    row["plateau_psnr"], row["plateau_step"] = best[1], best[0]
                    row["stopped_at"] = hist["steps"]
                    target = row["target_psnr"] = best[1] - cfg.finetune.target_margin_db
            out[f"{concept}|{seed}"] = row
    return out


def read_scratch(run) -> dict:
    """The scratch runs of every seed job, keyed "concept|seed"."""
    out = {}
    for i in range(N_SCRATCH_JOBS):
        out.update(_read_metrics(run, f"scratch_s{i}")["runs"])
    return out


def rank_search(run) -> dict:
    """Greedy rank search on held-out concepts: start every crucial layer group at r₀ ("1×"), try ×2 / ×4
    on one group at a time (short fine-tunes), keep the best PSNR gain per added parameter; stop when the
    best gain is below `search.min_gain_db`, after `search.rounds` rounds."""
    setup, cfg = Setup(run), run.cfg
    base = load_base(run, setup, "clustered")
    sets = [(setup.pairs(c, "train"), setup.pairs(c, "test"), c) for c in cfg.concepts.search]
    return search_ranks(setup, base, sets, cfg.search, cfg.lora.base_rank, run.seed, cfg.fd_dims)


def search_ranks(setup: Setup, base: dict, sets, search_cfg, base_rank: int, seed: int, fd_dims: int = 16) -> dict:
    flops = [0]

    def score(ranks):
        vals = []
        for train, test, *concept in sets:
            G, h = finetune(setup, base, "lora_searched", ranks, train, test, search_cfg.steps, seed,
                            concept=concept[0] if concept else "")
            flops[0] += h["steps"] * h["flops_per_step"]
            vals.append(eval_psnr(G, test))
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
    return {"ranks": ranks, "params": params, "psnr": current, "n_probes": len(history), "history": history,
            "train_flops": flops[0]}


def _read_metrics(run, experiment: str) -> dict:
    path = run.out / "metrics" / f"{experiment}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing: run the `{experiment}` experiment first")
    return json.loads(path.read_text())


def tune_lr(score, lrs, extend: int = 0) -> list[dict]:
    """The lr policy of every arm: `score(lr)` (validation PSNR after the arm's fixed budget) at each lr
    of the grid; while the best lr is the grid's lowest or highest, one more lr beyond it (the edge's
    ratio to its neighbour again), at most `extend` times, so the value kept is inside what was tried
    unless the extensions ran out. Rows {lr, psnr}, in the order tried."""
    lrs = sorted(float(v) for v in lrs)
    rows = [{"lr": lr, "psnr": float(score(lr))} for lr in lrs]
    for _ in range(extend if len(lrs) > 1 else 0):
        tried = sorted(r["lr"] for r in rows)
        best = max(rows, key=lambda r: r["psnr"])["lr"]
        if best == tried[-1]:
            lr = tried[-1] * tried[-1] / tried[-2]
        elif best == tried[0]:
            lr = tried[0] * tried[0] / tried[1]
        else:
            break
        rows.append({"lr": float(f"{lr:.3g}"), "psnr": float(score(float(f"{lr:.3g}")))})
    return rows


def lr_grid(run) -> dict:
    """The same lr policy (`tune_lr`) for every fine-tuning arm: each arm is scored at each lr with the
    same budget (`finetune.steps`) on the validation concept `concepts.search[0]` (not an evaluated
    one) and keeps the lr with the best test PSNR there."""
    setup, cfg = Setup(run), run.cfg
    base = load_base(run, setup, "clustered")
    searched = _read_metrics(run, "rank_search")["ranks"]
    concept = cfg.concepts.search[0]
    train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
    rows, flops = [], [0]

    def score(arm, ranks, lr):
        G, h = finetune(setup, base, arm, ranks, train, test, cfg.finetune.steps, run.seed, lr=lr, concept=concept)
        flops[0] += h["steps"] * h["flops_per_step"]
        return eval_psnr(G, test)

    for arm in FT_ARMS:
        ranks = arm_ranks(setup, arm, run.seed, concept, searched)
        rows += [{"arm": arm, **r} for r in tune_lr(partial(score, arm, ranks), cfg.lr_grid.lrs, cfg.lr_grid.extend)]
    return _lr_grid_result(run, rows, FT_ARMS, "e2gan_lr_grid", concept, flops[0])


def _lr_grid_result(run, rows, arms, table, concept, flops) -> dict:
    """Each arm's lr = the value with the best validation PSNR; `at_edge`: it is the lowest or highest
    value the arm tried (not bracketed). The grid is saved as one row per arm ("–": not tried)."""
    df = pd.DataFrame(rows)
    chosen = {arm: float(g.loc[g["psnr"].idxmax(), "lr"]) for arm, g in df.groupby("arm", sort=False)}
    at_edge = {arm: bool(chosen[arm] in (g["lr"].min(), g["lr"].max())) for arm, g in df.groupby("arm", sort=False)}
    wide = df.pivot(index="arm", columns="lr", values="psnr").loc[list(arms)]
    wide.columns = [f"psnr@lr={c:g}" for c in wide.columns]
    wide = wide.apply(lambda col: [f"{v:.4g}" if np.isfinite(v) else "–" for v in col])
    wide["chosen_lr"] = [f"{chosen[a]:g}" for a in wide.index]
    wide["at_edge"] = [at_edge[a] for a in wide.index]
    run.save_table(wide.reset_index(), table)
    return {"chosen": chosen, "at_edge": at_edge, "n_at_edge": int(sum(at_edge.values())), "concept": concept,
            "train_flops": flops, "grid": rows}


def _ci(values) -> str:
    """'mean [lo, hi]' (90 % t-interval over the values) or the bare mean for one value."""
    from shared.intervals import t_interval

    v = np.asarray(values, float)
    if len(v) < 2:
        return f"{v.mean():.3g}"
    lo, hi = t_interval(v)
    return f"{v.mean():.3g} [{lo:.3g}, {hi:.3g}]"


def geomean(x) -> float:
    return float(np.exp(np.mean(np.log(np.asarray(x, float)))))


N_FT_JOBS = 3   # the fine-tuning arms run as one job per seed index (rules.smk), beside the scratch jobs
GRID_DIR = ("concept_table", "grid")   # the first seed's fine-tuned outputs on the image grid's test images
ADAPTER_DIR = ("concept_table", "adapters")   # the first seed's searched adapters (the explorer loads them)


def finetune_seed(index: int, run) -> dict:
    """Every fine-tuning arm (`FT_ARMS`) on every new concept at seed `concepts.seeds[index]` (the last
    job also takes any seeds beyond `N_FT_JOBS`), `finetune.steps` steps each at the arm's tuned lr.
    The fine-tunes do not need the scratch targets (steps to target are read off their PSNR curves in
    `concept_table`), so these jobs run beside the scratch jobs. Returns per run its row, its curve,
    the random arm's rank draw and the full fine-tune's layer changes; the first seed also saves its
    searched adapters and its outputs on the image grid's test images."""
    setup, cfg = Setup(run), run.cfg
    seeds = list(cfg.concepts.seeds)
    mine = job_seeds(cfg, index, N_FT_JOBS)
    base = load_base(run, setup, "clustered")
    searched = _read_metrics(run, "rank_search")["ranks"]
    lrs = _read_metrics(run, "lr_grid")["chosen"]
    adapters = run.out.joinpath("checkpoints", *ADAPTER_DIR)
    grid = run.out.joinpath("checkpoints", *GRID_DIR)
    runs, draws, changes = {}, [], []
    for concept in cfg.concepts.new:
        train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
        for seed in mine:
            for arm in FT_ARMS:
                ranks = arm_ranks(setup, arm, seed, concept, searched)
                if arm == "lora_random":
                    draws.append({"concept": concept, "seed": seed, **ranks,
                                  "matched": random_ranks(setup, searched, seed, concept)[1]})
                G, hist = finetune(setup, base, arm, ranks, train, test, cfg.finetune.steps, seed,
                                   cfg.finetune.eval_every, lr=lrs[arm], concept=concept)
                runs[f"{concept}|{seed}|{arm}"] = {
                    "row": {"concept": concept, "seed": seed, "arm": arm, **evaluate(G, test, setup),
                            **setup.paper_metrics(G, test, concept),
                            "trainable_params": hist["trainable_params"], "stored_bytes": hist["stored_bytes"],
                            "flops_per_step": hist["flops_per_step"], "lr": lrs[arm],
                            "steps_run": hist["steps"], "batch_digest": hist["batch_digest"]},
                    "history": {k: hist[k] for k in ("curve", "seconds", "steps", "flops_per_step")}}
                if arm == "full_ft":
                    changes.append({"concept": concept, "seed": seed, **relative_change(base["G"], G)})
                if seed == seeds[0]:
                    grid.mkdir(parents=True, exist_ok=True)
                    np.save(grid / f"{slug(concept)}_{arm}.npy", predict(G, test.subset(range(cfg.grid.n_images))))
                    if arm == "lora_searched":
                        from safetensors.torch import save_file

                        adapters.mkdir(parents=True, exist_ok=True)
                        save_file(adapter_state(G), str(adapters / f"{slug(concept)}.safetensors"))
                        (adapters / "ranks.json").write_text(json.dumps(searched))
    return {"runs": runs, "draws": draws, "layer_changes": changes, "seeds": mine}


def concept_table(run) -> dict:
    """Per new concept: every arm's quality, parameters, bytes stored, FLOPs and steps to the target;
    per-concept FLOP ratios with their geometric mean; one-off costs and break-even; layer changes.
    Assembles the scratch jobs (targets, scratch rows) and the fine-tuning jobs (`finetune_s*`)."""
    setup, cfg = Setup(run), run.cfg
    base = load_base(run, setup, "clustered")
    search = _read_metrics(run, "rank_search")
    searched = search["ranks"]
    lrs = _read_metrics(run, "lr_grid")
    scratch = read_scratch(run)
    ft, draws, changes = {}, [], []
    for i in range(N_FT_JOBS):
        part = _read_metrics(run, f"finetune_s{i}")
        ft.update(part["runs"])
        draws += part["draws"]
        changes += part["layer_changes"]
    order = {c: i for i, c in enumerate(cfg.concepts.new)}   # the jobs are per seed: back to concept-major

    def concept_major(d):
        return order[d["concept"]], list(cfg.concepts.seeds).index(d["seed"])

    draws.sort(key=concept_major)
    changes.sort(key=concept_major)
    rows = []
    for concept in cfg.concepts.new:
        test = setup.pairs(concept, "test")
        floors = {"floor_zero_shot": zero_shot_quality(setup, base, test, concept)}
        for seed in cfg.concepts.seeds:
            sc = scratch[f"{concept}|{seed}"]
            target = sc["target_psnr"]
            for arm, q in floors.items():  # untrained arms: the same value at every seed
                rows.append({"concept": concept, "seed": seed, "arm": arm, **q, "trainable_params": 0,
                             "stored_bytes": 0, "flops_per_step": 0, "steps_run": 0,
                             "reached_to_target": q["psnr"] >= target, "steps_to_target": 0.0,
                             "seconds_to_target": 0.0, "flops_to_target": 0.0})
            for arm in SCRATCH_ARMS:
                r = sc[arm]
                hist = {"curve": r["curve"], "seconds": r["seconds"], "steps": r["steps"],
                        "flops_per_step": r["flops_per_step"]}
                rows.append({"concept": concept, "seed": seed, "arm": arm, "psnr": r["psnr"], "ssim": r["ssim"],
                             "fd": r["fd"], **{k: r[k] for k in PAPER_METRICS if k in r},
                             "trainable_params": r["trainable_params"],
                             "stored_bytes": r["stored_bytes"], "flops_per_step": r["flops_per_step"],
                             "lr": r["lr"], "steps_run": r["steps"],
                             **{f"{k}_to_target": v for k, v in to_target(hist, target).items()}})
            for arm in FT_ARMS:
                r = ft[f"{concept}|{seed}|{arm}"]
                rows.append({**r["row"], **{f"{k}_to_target": v for k, v in to_target(r["history"], target).items()}})
    df = pd.DataFrame(rows)
    seeds = list(cfg.concepts.seeds)
    summary = df.drop(columns=["concept", "seed", "batch_digest"]).groupby("arm", sort=False).mean(
        numeric_only=True).reset_index()
    # wall time (seconds_to_target) stays in the tables, not in checked metrics
    arms = seed_samples(df, "arm", seeds, SAMPLED + tuple(k for k in PAPER_METRICS if k in df.columns))
    for r in summary.to_dict("records"):
        arms[r["arm"]].update({c: float(r[c]) for c in COUNTED})
    summary["psnr_ci90_over_seeds"] = [_ci(arms[a]["psnr"]["values"]) for a in summary["arm"]]
    summary["n_seeds"] = len(seeds)
    run.save_table(df, "e2gan_concept_runs")
    run.save_table(summary, "e2gan_concept_table")
    run.save_table(pd.DataFrame(draws), "e2gan_random_ranks")
    image_grid(run, setup)

    ratios = flops_ratios(run, df, seeds)
    layers = layer_change(run, pd.DataFrame(changes), seeds)
    s, full = arms["lora_searched"], arms["full_ft"]
    # one-off costs, paid once for all concepts: the base, the rank search and the lr grid
    base_flops = int(base["steps"]) * int(base["flops_per_step"])
    one_off = base_flops + int(search["train_flops"]) + int(lrs["train_flops"])
    per = df.groupby(["arm", "seed"])["flops_to_target"].mean()
    saving = {ref: [per[(ref, sd)] - per[("lora_searched", sd)] for sd in seeds] for ref in SCRATCH_ARMS}
    break_even = {ref: sample([one_off / v if v > 0 else np.inf for v in saving[ref]], "seed")
                  for ref in SCRATCH_ARMS}
    return {
        "arms": arms,
        "searched_ranks": searched,
        "chosen_lr": lrs["chosen"],
        "full_minus_searched_psnr_db": difference(full["psnr"], s["psnr"]),
        "searched_minus_1x_psnr_db": difference(s["psnr"], arms["lora_1x"]["psnr"]),
        "searched_minus_random_psnr_db": difference(s["psnr"], arms["lora_random"]["psnr"]),
        "searched_minus_4x_psnr_db": difference(s["psnr"], arms["lora_4x"]["psnr"]),
        "searched_minus_zero_shot_psnr_db": difference(s["psnr"], arms["floor_zero_shot"]["psnr"]),
        **ratios,
        "layer_change": layers,
        "bytes_ratio_full_to_searched": full["stored_bytes"] / s["stored_bytes"],
        "from_config": ["bytes_ratio_full_to_searched"],   # bytes of configured shapes and dtypes
        "random_draws": {"n_distinct": len({tuple(d[g] for g in CRUCIAL_GROUPS) for d in draws}),
                         "all_matched": bool(all(d["matched"] for d in draws)),
                         "params_ratio_to_searched": arms["lora_random"]["trainable_params"] / s["trainable_params"]},
        "one_off_flops": {"base": base_flops, "rank_search": int(search["train_flops"]),
                          "lr_grid": int(lrs["train_flops"]), "total": one_off},
        "break_even_concepts": break_even,
        "searched_reached_target": s["reached_to_target"],
        # every (concept, seed) run of searched LoRA: reached the target or not, an exact count
        "searched_runs_reaching_target": count(int(df[df.arm == "lora_searched"]["reached_to_target"].sum()),
                                               int((df.arm == "lora_searched").sum())),
        "e2gan_scratch_reached_target": arms["e2gan_scratch"]["reached_to_target"],
    }


def zero_shot_quality(setup: Setup, base: dict, test: Pairs, concept: str) -> dict:
    """The un-adapted base on a new concept: the floor every fine-tune must beat (with FID/KID/CLIP
    score at full, as the trained arms; a floor without them read NaN there, found by the rehearsal)."""
    G = setup.e2gan()
    G.load_state_dict(base["G"])
    G.eval()
    return {**evaluate(G, test, setup), **setup.paper_metrics(G, test, concept)}


def flops_ratios(run, df: pd.DataFrame, seeds) -> dict:
    """Per (concept, seed): a scratch arm's FLOPs to the target over searched LoRA's. Per seed the
    geometric mean over concepts (one slow concept cannot dominate it); per concept a sample over seeds."""
    f = df.set_index(["arm", "concept", "seed"])["flops_to_target"]
    reached = df.set_index(["arm", "concept", "seed"])["reached_to_target"]
    concepts = list(dict.fromkeys(df["concept"]))
    out, rows = {}, []
    for ref, name in (("pix2pix_scratch", "pix2pix"), ("e2gan_scratch", "scratch")):
        r = {(c, sd): f[(ref, c, sd)] / f[("lora_searched", c, sd)] for c in concepts for sd in seeds}
        out[f"flops_ratio_{name}_to_searched"] = sample([geomean([r[(c, sd)] for c in concepts]) for sd in seeds],
                                                        "seed")
        out[f"flops_ratio_{name}_to_searched_by_concept"] = {c: sample([r[(c, sd)] for sd in seeds], "seed")
                                                             for c in concepts}
    for c in concepts:
        rows.append({"concept": c,
                     **{f"vs_{n}": _ci(out[f"flops_ratio_{n}_to_searched_by_concept"][c]["values"])
                        for n in ("pix2pix", "scratch")},
                     "searched_reached": float(np.mean([reached[("lora_searched", c, sd)] for sd in seeds])),
                     "scratch_reached": float(np.mean([reached[("e2gan_scratch", c, sd)] for sd in seeds]))})
    rows.append({"concept": "geometric mean", **{f"vs_{n}": _ci(out[f"flops_ratio_{n}_to_searched"]["values"])
                                                 for n in ("pix2pix", "scratch")},
                 "searched_reached": float(df[df.arm == "lora_searched"]["reached_to_target"].mean()),
                 "scratch_reached": float(df[df.arm == "e2gan_scratch"]["reached_to_target"].mean())})
    run.save_table(pd.DataFrame(rows), "e2gan_flops_ratios")
    return out


def layer_change(run, changes: pd.DataFrame, seeds) -> dict:
    """‖ΔW‖/‖W‖ per layer group under the full fine-tune (samples over seeds, means over concepts), and
    the mean over LoRA's crucial groups minus the frozen ResNet blocks'."""
    groups = [g for g in GROUP_PREFIXES if g in changes.columns]
    per = changes.groupby("seed")[groups].mean()
    out = {g: sample([per.loc[sd, g] for sd in seeds], "seed") for g in groups}
    crucial = [g for g in groups if g in CRUCIAL_GROUPS]
    gap = sample([per.loc[sd, crucial].mean() - per.loc[sd, "rb"] for sd in seeds], "seed")
    rows = [{"group": g, "lora_target": g in CRUCIAL_GROUPS, "rel_change": _ci(out[g]["values"])} for g in groups]
    run.save_table(pd.DataFrame(rows), "e2gan_layer_change")
    return {"groups": out, "crucial_minus_rb": gap}


def image_grid(run, setup: Setup) -> None:
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
        for arm in FT_ARMS:   # saved by the first seed's fine-tuning job
            imgs[arm] = np.load(run.out.joinpath("checkpoints", *GRID_DIR) / f"{slug(concept)}_{arm}.npy")
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
    """Which base to adapt from: clustered concepts vs `base.random_draws` random draws (and
    `base.extra_kinds`): the same searched-rank LoRA at its tuned lr, from every base, on every new
    concept and seed (common random numbers: one seed gives every base the same minibatches).

    The claim's sample is over seeds, paired: value i = clustered − the mean of the random draws, at
    seed i, each the mean over new concepts. The bases are trained once each (at the run's seed), so
    the per-draw gaps (`clustered_minus_random_by_draw`) show how much the choice of random concepts
    moves it."""
    setup, cfg = Setup(run), run.cfg
    searched = _read_metrics(run, "rank_search")["ranks"]
    lr = _read_metrics(run, "lr_grid")["chosen"]["lora_searched"]
    seeds = list(cfg.concepts.seeds)
    kinds = base_kinds(cfg)
    rows = []
    for kind in kinds:
        base = load_base(run, setup, kind)
        for concept in cfg.concepts.new:
            train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
            for seed in seeds:
                G, _ = finetune(setup, base, "lora_searched", searched, train, test, cfg.finetune.steps, seed,
                                lr=lr, concept=concept)
                rows.append({"concept": concept, "seed": seed, "base": kind, **evaluate(G, test, setup)})
    df = pd.DataFrame(rows)
    per = seed_samples(df, "base", seeds, ("psnr", "ssim", "fd"))
    wide = df.groupby(["concept", "base"], sort=False)["psnr"].mean().unstack("base")[list(kinds)]
    wide = wide.loc[list(cfg.concepts.new)].reset_index()
    wide.loc[len(wide)] = ["mean over concepts", *[per[k]["psnr"]["mean"] for k in kinds]]
    wide.loc[len(wide)] = ["90 % CI over seeds", *[_ci(per[k]["psnr"]["values"]) for k in kinds]]
    run.save_table(wide, "e2gan_base_ablation")
    run.save_table(df, "e2gan_base_ablation_runs")
    randoms = [k for k in kinds if k.startswith("random")]
    clustered = per["clustered"]["psnr"]
    mean_random = combine([per[k]["psnr"] for k in randoms], lambda *v: float(np.mean(v)))
    others = [k for k in kinds if k != "clustered"]
    n_concepts = len(cfg.concepts.new)
    clustered_wins = int(sum(wide.iloc[i]["clustered"] >= wide.iloc[i][others].max() for i in range(n_concepts)))
    return {"bases": {k: per[k] for k in kinds},
            "random_draws_psnr": mean_random,
            "clustered_minus_random_psnr_db": difference(clustered, mean_random),
            "clustered_minus_random_by_draw": {k: difference(clustered, per[k]["psnr"]) for k in randoms},
            "concepts_where_clustered_best": clustered_wins, "n_concepts": n_concepts}


def subset_steps(epochs: float, m: int, batch_size: int) -> int:
    """Steps for `epochs` passes over m pairs: training FLOPs proportional to the subset size."""
    return max(1, int(round(epochs * m / batch_size)))


def data_size_curve(run) -> dict:
    """Searched-rank LoRA on the m samples nearest k-means centroids of standardised image features, vs m
    random ones (a fresh random subset per seed), on every new concept and seed. Every subset trains
    for the same number of epochs (`data_curve.epochs`), so its FLOPs are proportional to m: a smaller
    subset is cheaper, not merely resampled more often."""
    import matplotlib.pyplot as plt

    setup, cfg = Setup(run), run.cfg
    base = load_base(run, setup, "clustered")
    searched = _read_metrics(run, "rank_search")["ranks"]
    lr = _read_metrics(run, "lr_grid")["chosen"]["lora_searched"]
    seeds = list(cfg.concepts.seeds)
    feats = image_features(setup.train_inputs)
    n = len(setup.train_inputs)
    sizes = [m for m in cfg.data_curve.sizes if m < n] + [n]
    kmeans = {m: nearest_to_centroids(feats, m, run.seed) for m in sizes if m < n}
    rows = []
    for concept in cfg.data_curve.concepts or cfg.concepts.new:
        train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
        for seed in seeds:
            for m in sizes:
                steps = subset_steps(cfg.data_curve.epochs, m, cfg.train.batch_size)
                for method in ("kmeans", "random"):
                    if m == n and method == "random":
                        continue
                    idx = (list(range(n)) if m == n else kmeans[m] if method == "kmeans"
                           else random_subset(n, m, derive_seed(seed, "data subset", m)))
                    G, h = finetune(setup, base, "lora_searched", searched, train.subset(idx), test, steps, seed,
                                    lr=lr, concept=concept)
                    q = evaluate(G, test, setup)
                    rows += [{"concept": concept, "seed": seed, "m": m, "method": meth, "steps": steps,
                              "train_flops": steps * h["flops_per_step"], **q}
                             for meth in (["kmeans", "random"] if m == n else [method])]
    df = pd.DataFrame(rows)
    mean = df.drop(columns=["concept", "seed"]).groupby(["method", "m"]).mean(numeric_only=True).reset_index()
    per = {(meth, m): sample(g.groupby("seed")["psnr"].mean().loc[seeds], "seed")
           for (meth, m), g in df.groupby(["method", "m"])}
    mean["psnr_ci90_over_seeds"] = [_ci(per[(r.method, r.m)]["values"]) for r in mean.itertuples()]
    mean["n_seeds"] = len(seeds)
    run.save_table(mean, "e2gan_data_size")
    fig, ax = plt.subplots(figsize=(4, 3))
    for method, g in mean.groupby("method"):
        ax.plot(g["train_flops"], g["psnr"], marker="o", label=method)
    ax.set_xscale("log")
    ax.set_xlabel("training FLOPs (∝ pairs m)")
    ax.set_ylabel("PSNR vs teacher (dB)")
    ax.legend()
    run.save_figure(fig, "e2gan_data_size")
    curve = {meth: {str(int(m)): per[(meth, m)] for (mm, m) in per if mm == meth} for meth in ("kmeans", "random")}
    small = str(sizes[0])
    return {"psnr": curve, "sizes": sizes, "kmeans_minus_random_smallest_m_db":
            difference(curve["kmeans"][small], curve["random"][small]),
            "all_minus_kmeans_by_m_db": {str(m): difference(curve["kmeans"][str(n)], curve["kmeans"][str(m)])
                                         for m in sizes[:-1]}}


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
    "fd_net": fd_net,
    "base_clustered": with_curves(base_clustered),
    "base_variants": with_curves(base_variants),
    **{f"scratch_s{i}": with_curves(partial(scratch_seed, i)) for i in range(N_SCRATCH_JOBS)},
    **{f"finetune_s{i}": with_curves(partial(finetune_seed, i)) for i in range(N_FT_JOBS)},
    "rank_search": with_curves(rank_search),
    "lr_grid": with_curves(lr_grid),
    "lr_grid_scratch": with_curves(lr_grid_scratch),
    "concept_table": concept_table,
    "base_ablation": with_curves(base_ablation),
    "data_size_curve": with_curves(data_size_curve),
    "latency_table": latency_table,
}
