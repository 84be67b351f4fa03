"""What every E²GAN experiment shares: the run's set-up (teacher, text encoder, inputs, models), the
`fd` proxy's feature network, evaluation, and the arithmetic on seed samples.

Stochastic metrics are written as samples over training seeds (`shared.samples.sample`, unit "seed"):
an arm's value for seed i is its mean over new concepts and test images, so two arms pair by seed.
Parameter, byte and FLOP-per-step counts stay plain numbers.
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
from shared.samples import combine, gap, sample
from shared.seeding import derive_seed

from ..data import load_image_folder, make_inputs, split, teacher_pairs, to_images, to_tensor
from ..fd_net import EditFeatures, cached_edit_net, labelled_edits
from ..metrics import quality
from ..models import E2GANGenerator, PatchDiscriminator, Pix2PixGenerator
from ..teacher import CONCEPTS, InstructPix2PixTeacher, SkimageTeacher
from ..text import CLIPTextEncoder, HashedTextEncoder
from ..train import Pairs, predict

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

        from ..metrics import clip_score

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


def seed_samples(df: pd.DataFrame, by: str, seeds, columns, bases=None) -> dict:
    """{group: {column: sample over `seeds`}}: value i is seed i's mean over the group's rows (concepts).
    bases: the base each seed's value rests on (a grouped sample, group unit "base"), or None."""
    per_seed = df.groupby([by, "seed"], sort=False)[list(columns)].mean()
    grouping = {} if bases is None else {"groups": list(bases), "group_unit": "base"}
    return {group: {c: sample([per_seed.loc[(group, s), c] for s in seeds], "seed", **grouping) for c in columns}
            for group in df[by].unique()}


def difference(a: dict, b: dict) -> dict:
    """The seed-wise gap a − b of two paired samples."""
    return gap(a, b)


def ratio(a: dict, b: dict) -> dict:
    """The seed-wise ratio a / b of two paired samples."""
    return combine([a, b], lambda x, y: x / y)


STORED_BYTES_PER_VALUE = 2   # every arm stores its trained weights in fp16, as the adapters (`lora.adapter_state`)


def full_bytes(G) -> int:
    """Bytes of a full state_dict in fp16: what a full fine-tune (or a scratch model) stores per concept,
    at the adapters' precision. The paper compares parameter counts (0.092M vs 11.4M), i.e. equal
    precision; an fp32 state_dict against fp16 adapters would double the ratio."""
    return sum(t.numel() for t in G.state_dict().values()) * STORED_BYTES_PER_VALUE


def job_seeds(cfg, index: int, n_jobs: int) -> list:
    """The seeds of per-seed job `index` of `n_jobs`: one each, the last job also any beyond."""
    seeds = list(cfg.concepts.seeds)
    return seeds[index:index + 1] if index < n_jobs - 1 else seeds[index:]


def read_metrics(run, experiment: str) -> dict:
    path = run.out / "metrics" / f"{experiment}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing: run the `{experiment}` experiment first")
    return json.loads(path.read_text())


def ci_text(values) -> str:
    """'mean [lo, hi]' (90 % t-interval over the values) or the bare mean for one value."""
    from shared.intervals import t_interval

    v = np.asarray(values, float)
    if len(v) < 2:
        return f"{v.mean():.3g}"
    lo, hi = t_interval(v)
    return f"{v.mean():.3g} [{lo:.3g}, {hi:.3g}]"


def geomean(x) -> float:
    return float(np.exp(np.mean(np.log(np.asarray(x, float)))))


