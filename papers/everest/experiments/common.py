"""What every experiment shares: the arms, the data of a seed (procedural clips or video lists), the
initial autoencoder of a seed, checkpoint folders, the world knob's points, and sample formatting.

Every trained arm runs once per entry of `seeds` (seed i of every arm shares its data, initial
encoder and batch order), and writes each stochastic metric as a `shared.samples.sample` over seeds,
so two arms pair by seed. Token counts, FLOPs and activation bytes are deterministic plain numbers.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

from shared.assets import require_path
from shared.config import Config, ConfigError, config_hash
from shared.experiment import global_rank
from shared.io import read_json, write_json
from shared.intervals import LEVEL, mean_interval
from shared.seeding import derive_seed

from ..data import make_clips, num_classes
from ..model import MaskedVideoAutoencoder, build_autoencoder, set_fused_attention
from ..official_checkpoint import load_official_checkpoint

# arm -> (token selection of pre-training, frame pairs from candidate clips: None | information | uniform)
PRETRAIN_ARMS = {"videomae": ("tube", None), "everest": ("everest", None), "ascending": ("ascending", None),
                 "everest_uniform_frames": ("everest", "uniform"), "everest_selected_frames": ("everest", "information")}
# arm -> (pre-trained arm or None, fine-tune pruning)
FINETUNE_ARMS = {"videomae": ("videomae", "none"), "videomae_pruned": ("videomae", "top"),
                 "everest_full": ("everest", "none"), "everest": ("everest", "top"),
                 "random": ("everest", "random"), "ascending": ("ascending", "top"), "scratch": (None, "top"),
                 "everest_uniform_frames": ("everest_uniform_frames", "top"),
                 "everest_selected_frames": ("everest_selected_frames", "top")}
# the arms trained at every other point of the static-context knob (`knob.static_share`)
KNOB_PRETRAIN_ARMS = ("videomae", "everest")
KNOB_FINETUNE_ARMS = ("videomae", "everest_full", "everest")
# the budget curve: pre-training arm = fine-tune arm (videomae: all tokens; everest: top 60%), each
# pre-trained again for every shorter length of `budget_curve.fractions`
BUDGET_ARMS = ("videomae", "everest")
KNOB_PROCEDURAL_ONLY = "the static-context knob is a parameter of the procedural world (smoke, tiny)"
FRAME_ARMS = ("everest_uniform_frames", "everest_selected_frames")
PROCEDURAL_ONLY = ("the frame-selection arms choose among 2·α·τ candidate frames with ground-truth motion, "
                   "made for procedural clips only (VideoListDataset has no candidate clips)")


def device_of(cfg) -> str:
    return ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device


def snapshot_name(fraction: float) -> str:
    return f"b{round(100 * fraction)}"


def classes(cfg) -> int:
    return num_classes(cfg.data.appearance) if cfg.data.source == "procedural" else cfg.data.num_classes


@lru_cache(maxsize=8)   # every split of 1–2 seeds: a budget curve or knob job revisits them
def _procedural(cfg_key: tuple, seed: int, n: int, frames: int | None = None, rest: float | None = None,
                pan_speed: float | None = None):
    """make_clips with the data config `cfg_key`, optionally overriding frames (same total motion),
    rest and pan_speed."""
    d = dict(cfg_key)
    frames = frames or d["frames"]
    return make_clips(n, seed, **{**d, "frames": frames, "speed": d["speed"] * (d["frames"] - 1) / (frames - 1),
                                  "rest": d["rest"] if rest is None else rest,
                                  "pan_speed": d["pan_speed"] if pan_speed is None else pan_speed})


def candidate_frames(cfg) -> int:
    """2·α·τ candidate frames for information-intensive frame selection (τ = frames / 2 pairs)."""
    return 2 * int(round(cfg.frame_selection.alpha * cfg.data.frames / 2))


def _key(cfg) -> tuple:
    d = cfg.data
    return tuple(sorted({"frames": d.frames, "size": d.size, "speed": d.speed, "noise": d.noise,
                         "patterns": tuple(d.patterns), "appearance": d.appearance, "pan_speed": d.pan_speed,
                         "flicker": d.flicker, "rest": d.rest, "static_share": d.static_share}.items()))


def dataset(cfg, seed: int, split: str, pan: bool = False, candidates: bool = False):
    """split: pretrain | finetune | val | test. Procedural clips, or "path label" video lists (full).
    `pan`: the camera-pan control (`overlay.pan_speed`); `candidates`: pre-training clips of 2·α·τ
    frames with static stretches (`frame_selection.rest`; the frame-selection arms)."""
    d = cfg.data
    if d.source == "procedural":
        key = _key(cfg)
        pan_speed = cfg.overlay.pan_speed if pan else None
        if candidates:
            return _procedural(key, derive_seed(seed, "candidate-clips"), d.n_pretrain, candidate_frames(cfg),
                               cfg.frame_selection.rest)
        if split == "test":
            return _procedural(key, derive_seed(seed, "test-clips"), d.n_test, pan_speed=pan_speed)
        if split == "val":   # the lr grid's validation clips: a stream of their own
            return _procedural(key, derive_seed(seed, "val-clips"), d.n_val, pan_speed=pan_speed)
        n = d.n_pretrain if split == "pretrain" else d.n_finetune   # clip i depends on (seed, i) only
        return _procedural(key, derive_seed(seed, "train-clips"), n, pan_speed=pan_speed)
    if d.source != "video":
        raise ValueError(f"data.source={d.source!r}; choose procedural or video")
    if candidates:
        raise ValueError("the frame-selection arms need candidate clips of 2·alpha·tau frames, implemented for "
                         "procedural clips only: drop the everest_*_frames arms, or extend VideoListDataset")
    from ..video import VideoListDataset

    if split == "val":
        raise ConfigError("the fine-tuning lr grid needs validation clips, procedural only: set finetune.lr_grid: [] "
                          "for video lists (every arm then fine-tunes at finetune.lr)")
    key = {"pretrain": "pretrain_list", "finetune": "train_list", "test": "test_list"}[split]
    fetch = "UCF101/HMDB51/K400 videos and the official split lists"
    path = require_path(d[key], what=f"{split} video list", fetch=fetch, config_key=f"data.{key}")
    class_index = None if d.class_index is None else require_path(
        d.class_index, what="UCF101 class index (classInd.txt)", config_key="data.class_index",
        fetch="UCF101's split files (UCF101TrainTestSplits-RecognitionTask.zip, folder ucfTrainTestlist)")
    root = None if d.root is None else require_path(d.root, what="video folder", fetch=fetch, config_key="data.root")
    mode = {"pretrain": "pretrain", "finetune": "train", "test": "test"}[split]
    data = VideoListDataset(path, root, mode=mode, clip_len=d.frames, stride=d.stride, size=d.size,
                            segments=d.test_segments, seed=seed, flip=bool(d.flip), class_index=class_index)
    labels = {label for _, label in data.items}
    if labels and (min(labels) < 0 or max(labels) >= d.num_classes):
        raise ConfigError(f"{path} has labels {min(labels)}..{max(labels)}, outside data.num_classes={d.num_classes}")
    return data


def initial_autoencoder(cfg, seed: int) -> MaskedVideoAutoencoder:
    """The autoencoder every arm of `seed` starts from: the seeded random initialisation, or the official
    pre-training checkpoint at `model.init_checkpoint` (loaded by `official_checkpoint`'s key map); its
    attention fused or explicit as `model.fused_attention` says."""
    torch.manual_seed(derive_seed(seed, "init"))
    ae = set_fused_attention(build_autoencoder(cfg), bool(cfg.model.fused_attention))
    if cfg.model.init_checkpoint is not None:
        path = require_path(cfg.model.init_checkpoint, what="VideoMAE/EVEREST pre-training checkpoint",
                            fetch="a pre-training checkpoint of the official code (checkpoint-*.pth, keys encoder.* / "
                                  "decoder.*) with the config's model widths", config_key="model.init_checkpoint")
        load_official_checkpoint(ae, path)
    return ae


def record_key(cfg) -> str:
    """What decides one seed's record: the config without the seed lists, the trainer, logging and the
    loader's workers (a seed job runs `seeds: [s]`; the experiment over all seeds merges)."""
    out = {k: v for k, v in cfg.to_dict().items() if k not in ("trainer", "logging", "seed", "seeds")}
    out["data"] = {k: v for k, v in out["data"].items() if k != "workers"}
    return config_hash(out)


def seed_record(run, ckpt_dir: Path, cfg, compute, tag: str = "") -> dict:
    """One seed's record (a pre-training's losses, a fine-tune's top-1): the one a seed job (`<experiment>_seed
    --seed S`, the full profile's SLURM job per seed) wrote under `ckpt_dir` for this config, else
    `compute()`, written there when this run is a seed job. Only seed jobs write records, so a run over
    all seeds without them (smoke, tiny) trains and evaluates as before."""
    path = Path(ckpt_dir) / f"seed_record{tag}.json"
    key = record_key(cfg)
    if path.is_file():
        stored = read_json(path)
        if stored.get("key") == key:
            return stored["record"]
    record = compute()
    if getattr(run, "seed_job", False) and global_rank() == 0:
        write_json(path, {"key": key, "record": record})
    return record


def seeds_of(cfg) -> list[int]:
    return [int(s) for s in cfg.seeds]


def seed_dir(seed: int) -> str:
    return f"seed{seed}"


# ---------------------------------------------------------------- the static-context knob
def knob_points(cfg) -> list[float]:
    """The points of `knob.static_share`; the first is the main world (`data.static_share`), whose
    arms are the main experiments', so only the others are trained by the knob_* experiments."""
    points = [float(p) for p in cfg.knob.static_share]
    if not points or points[0] != float(cfg.data.static_share) or sorted(set(points)) != points:
        raise ConfigError(f"knob.static_share={points}: increasing points starting at the main world's "
                          f"data.static_share={cfg.data.static_share}")
    return points


def point_dir(point: float) -> str:
    return f"static{round(100 * point)}"


def at_point(cfg, point: float):
    """The config of the world at knob point `point` (`data.static_share` set, nothing else)."""
    return Config.wrap({**cfg.to_dict(), "data": {**cfg.data.to_dict(), "static_share": float(point)}})


def with_lr(cfg, lr: float):
    """The config with fine-tuning lr `lr` (nothing else changed)."""
    return Config.wrap({**cfg.to_dict(), "finetune": {**cfg.finetune.to_dict(), "lr": float(lr)}})


def with_data(cfg, **data):
    """The config with the `data` keys `data` set (nothing else changed): `rest` of the frame-selection
    arms' fine-tuning clips, `pan_speed` of the camera-pan world."""
    return Config.wrap({**cfg.to_dict(), "data": {**cfg.data.to_dict(), **data}})


def budget_steps(cfg) -> list[int]:
    """The pre-training lengths of the budget curve (steps), increasing; the last is `pretrain.steps`,
    the main pre-training, so only the shorter ones are trained by the budget_* experiments."""
    fractions = [float(f) for f in cfg.budget_curve.fractions]
    if not fractions or fractions[-1] != 1.0 or sorted(set(fractions)) != fractions or fractions[0] <= 0:
        raise ConfigError(f"budget_curve.fractions={fractions}: increasing fractions in (0, 1] ending at 1.0")
    return [max(1, round(f * cfg.pretrain.steps)) for f in fractions]


def with_steps(cfg, steps: int):
    """The config of a pre-training of `steps` steps (its own warm-up and cosine schedule)."""
    return Config.wrap({**cfg.to_dict(), "pretrain": {**cfg.pretrain.to_dict(), "steps": int(steps)}})


def pretrain_dir(run, arm: str, seed: int, point: float | None = None, steps: int | None = None,
                 world: str | None = None) -> Path:
    """Weights of pre-training `arm` at `seed`: the main world's, those at knob point `point`, those of
    the budget curve's `steps`-step pre-training, or those the experiment `world` (camera_pan) made."""
    if world is not None:
        return run.out / "checkpoints" / world / f"pretrain_{arm}" / seed_dir(seed)
    if steps is not None:
        return run.out / "checkpoints" / f"budget_pretrain_{arm}" / f"steps{steps}" / seed_dir(seed)
    if point is None:
        return run.out / "checkpoints" / f"pretrain_{arm}" / seed_dir(seed)
    return run.out / "checkpoints" / f"knob_pretrain_{arm}" / point_dir(point) / seed_dir(seed)


def mean_std(s: dict, digits: int = 1) -> str:
    """A sample as "mean ± std (n=k)" for a table (std "–" at one unit)."""
    std = "–" if s["std"] is None else f"{s['std']:.{digits}f}"
    return f"{s['mean']:.{digits}f} ± {std} (n={s['n']})"


def mean_ci(s: dict, digits: int = 1) -> str:
    """A sample as "mean [lo, hi] (n=k)" with the ledger's 90% interval of the mean (none at one unit)."""
    if s["n"] < 2:
        return f"{s['mean']:.{digits}f} (n=1)"
    lo, hi, _ = mean_interval(s["values"], LEVEL)
    return f"{s['mean']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}] (n={s['n']})"


def skipped_on_video(cfg, arm: str) -> dict | None:
    """The record of a procedural-only arm on real videos (the full profile), else None: the job still
    writes its metrics file, the tables leave the arm out and its claims are NOT RUN."""
    if arm in FRAME_ARMS and cfg.data.source != "procedural":
        return {"skipped": True, "reason": PROCEDURAL_ONLY}
    return None


def schedule(cfg, phase: str, data, who: str | None = None) -> dict:
    """A phase's schedule in epochs (`phase`.steps × `phase`.batch clips over the training set), the unit
    the paper states: the full profile's pre-training, 100k × 24 over UCF101 split 1's 9,537 videos, is
    ≈ 252 epochs against the paper's 3200, and its fine-tuning ≈ 50 against 100 (README). Printed for
    `who` (the arm and seed) when given."""
    steps, batch, n = int(cfg[phase].steps), int(cfg[phase].batch), len(data)
    plan = {"steps": steps, "batch": batch, "train_clips": n, "epochs": steps * batch / n}
    if who is not None:
        print(f"everest: {phase} {who}: {steps} steps × {batch} clips over {n} = {plan['epochs']:.1f} epochs",
              flush=True)
    return plan
