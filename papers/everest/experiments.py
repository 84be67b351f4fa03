"""The experiments (`python -m papers.everest <experiment>`), one per Snakemake rule.

pretrain_<arm>     VideoMAE tube masking / EVEREST / ascending pre-training; and EVEREST on candidate
                   clips with static stretches, frame pairs by information-intensive frame selection
                   or uniformly (the frame-selection ablation)
finetune_<arm>     the 2×2 of pre-training {VideoMAE, EVEREST} × fine-tuning {all tokens, top 60%},
                   plus the random-60%, ascending, scratch and frame-selection arms
label_leak         a linear probe on the keep mask alone: the class (should be chance) and the motion
                   direction (the probe's positive control)
accuracy           the 2×2 table, the gaps the claims test, the control and frame-selection tables
efficiency         tiny model: tokens, FLOPs, saved activations (explicit and fused attention), step times
efficiency_vit_b   ViT-B at 16×224²: analytic and FlopCounter FLOPs, saved activations (and peak CUDA
                   memory on a GPU), explicit and fused attention
token_overlay      selected tokens overlaid on clips, and the moving-digit recall of the selection

Every trained arm runs once per entry of `seeds` (seed i of every arm shares its data, initial
encoder and batch order), and writes each stochastic metric as a `shared.samples.sample` over seeds,
so two arms pair by seed. Token counts, FLOPs and activation bytes are deterministic plain numbers.
"""
from __future__ import annotations

from functools import lru_cache, partial
from pathlib import Path

import torch

from shared.assets import require_path
from shared.config import ConfigError
from shared.intervals import LEVEL, mean_interval
from shared.io import read_json
from shared.samples import combine, gap, sample
from shared.seeding import derive_seed

from .data import make_clips, num_classes, num_motions, token_cover
from .efficiency import (VitDims, finetune_macs, flops_and_saved_bytes, interleaved_median_times, peak_cuda_bytes,
                         pretrain_macs, saved_activation_bytes, vit_b_dims, vit_b_table)
from .leak import keep_masks, probe_accuracy
from .model import (MaskedVideoAutoencoder, VideoClassifier, VideoEncoder, build_autoencoder, num_params,
                    set_fused_attention)
from .official_checkpoint import load_official_checkpoint
from .selection import count, motion_scores, select_tokens
from .train import choose_pairs, evaluate, finetune, make_masks, pretrain, tube_visible

# arm -> (token selection of pre-training, frame pairs from candidate clips: None | information | uniform)
PRETRAIN_ARMS = {"videomae": ("tube", None), "everest": ("everest", None), "ascending": ("ascending", None),
                 "everest_uniform_frames": ("everest", "uniform"), "everest_selected_frames": ("everest", "information")}
# arm -> (pre-trained arm or None, fine-tune pruning)
FINETUNE_ARMS = {"videomae": ("videomae", "none"), "videomae_pruned": ("videomae", "top"),
                 "everest_full": ("everest", "none"), "everest": ("everest", "top"),
                 "random": ("everest", "random"), "ascending": ("ascending", "top"), "scratch": (None, "top"),
                 "everest_uniform_frames": ("everest_uniform_frames", "top"),
                 "everest_selected_frames": ("everest_selected_frames", "top")}
LABELS = {"videomae": "VideoMAE pre-train, all tokens (VideoMAE)",
          "videomae_pruned": "VideoMAE pre-train, top-60% FT",
          "everest_full": "EVEREST pre-train, all tokens",
          "everest": "EVEREST pre-train, top-60% FT (EVEREST)",
          "random": "EVEREST pre-train, random-60% FT",
          "ascending": "ascending pre-train, top-60% FT",
          "scratch": "no pre-training, top-60% FT",
          "everest_uniform_frames": "EVEREST, uniform frame pairs",
          "everest_selected_frames": "EVEREST, information-intensive frame pairs"}
# the paired gaps (a − b, per seed) that the claims and tables read
GAPS = {"everest_full_minus_videomae": ("everest_full", "videomae"),          # pre-training, all-token FT
        "everest_minus_videomae_pruned": ("everest", "videomae_pruned"),      # pre-training, top-60% FT
        "everest_minus_everest_full": ("everest", "everest_full"),            # pruning, EVEREST pre-training
        "videomae_pruned_minus_videomae": ("videomae_pruned", "videomae"),    # pruning, VideoMAE pre-training
        "everest_minus_videomae": ("everest", "videomae"),                    # the two full recipes
        "everest_minus_random": ("everest", "random"),
        "everest_minus_ascending": ("everest", "ascending"),
        "everest_minus_scratch": ("everest", "scratch"),
        "selected_minus_uniform_frames": ("everest_selected_frames", "everest_uniform_frames")}


def device_of(cfg) -> str:
    return ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device


def snapshot_name(fraction: float) -> str:
    return f"b{round(100 * fraction)}"


def classes(cfg) -> int:
    return num_classes(cfg.data.appearance) if cfg.data.source == "procedural" else cfg.data.num_classes


@lru_cache(maxsize=4)
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
                         "flicker": d.flicker,
                         "rest": d.rest}.items()))


def dataset(cfg, seed: int, split: str, pan: bool = False, candidates: bool = False):
    """split: pretrain | finetune | test. Procedural clips, or "path label" video lists (full).
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
        n = d.n_pretrain if split == "pretrain" else d.n_finetune   # clip i depends on (seed, i) only
        return _procedural(key, derive_seed(seed, "train-clips"), n, pan_speed=pan_speed)
    if d.source != "video":
        raise ValueError(f"data.source={d.source!r}; choose procedural or video")
    if candidates:
        raise ValueError("the frame-selection arms need candidate clips of 2·alpha·tau frames, implemented for "
                         "procedural clips only: drop the everest_*_frames arms, or extend VideoListDataset")
    from .video import VideoListDataset

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
    pre-training checkpoint at `model.init_checkpoint` (loaded by `official_checkpoint`'s key map)."""
    torch.manual_seed(derive_seed(seed, "init"))
    ae = build_autoencoder(cfg)
    if cfg.model.init_checkpoint is not None:
        path = require_path(cfg.model.init_checkpoint, what="VideoMAE/EVEREST pre-training checkpoint",
                            fetch="a pre-training checkpoint of the official code (checkpoint-*.pth, keys encoder.* / "
                                  "decoder.*) with the config's model widths", config_key="model.init_checkpoint")
        load_official_checkpoint(ae, path)
    return ae


def seeds_of(cfg) -> list[int]:
    return [int(s) for s in cfg.seeds]


def seed_dir(seed: int) -> str:
    return f"seed{seed}"


def pretrain_dir(run, arm: str, seed: int) -> Path:
    return run.out / "checkpoints" / f"pretrain_{arm}" / seed_dir(seed)


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


# ---------------------------------------------------------------- pre-training
def pair_has_motion(moving: torch.Tensor, tubelet: int = 2) -> torch.Tensor:
    """[n, F, H, W] moving-digit pixels -> [n, F/tubelet] bool: the digit's pixels in slice t differ
    from slice t−1 (slice 0 as slice 1, as the scores)."""
    n, f = moving.shape[:2]
    slices = moving.reshape(n, f // tubelet, -1)
    diff = (slices[:, 1:] != slices[:, :-1]).any(-1)
    return torch.cat([diff[:, :1], diff], dim=1)


def motion_pair_fraction(model: MaskedVideoAutoencoder, clips, frames: str, rho_pre: float, seed: int,
                         n_clips: int) -> float:
    """Mean fraction of the chosen τ frame pairs in which the moving digit moves, over `n_clips`
    held-out candidate clips (the selector with `model`'s embedding)."""
    gen = torch.Generator().manual_seed(derive_seed(seed, "frame-eval"))
    video = clips.video[:n_clips]
    with torch.no_grad():
        chosen = choose_pairs(model.eval(), video, frames, rho_pre, gen)            # [n, τ]
    motion = pair_has_motion(clips.moving[:n_clips], model.encoder.tubelet)       # [n, α·τ]
    return float(motion.gather(1, chosen).float().mean())


FRAME_ARMS = ("everest_uniform_frames", "everest_selected_frames")
PROCEDURAL_ONLY = ("the frame-selection arms choose among 2·α·τ candidate frames with ground-truth motion, "
                   "made for procedural clips only (VideoListDataset has no candidate clips)")


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


def run_pretrain(run, arm: str) -> dict:
    cfg = run.cfg
    if (skip := skipped_on_video(cfg, arm)) is not None:
        return skip
    method, frames = PRETRAIN_ARMS[arm]
    snaps = {max(1, round(b * cfg.pretrain.steps)): snapshot_name(b) for b in cfg.pretrain.budgets}
    first, final, motion_frac, motion_base = [], [], [], []
    for seed in seeds_of(cfg):
        model = initial_autoencoder(cfg, seed)
        data = dataset(cfg, seed, "pretrain", candidates=frames is not None)
        plan = schedule(cfg, "pretrain", data, who=f"{arm} (seed {seed})")
        losses = pretrain(model, data, method, cfg, seed, run.checkpoint_dir(seed_dir(seed)), snaps, device_of(cfg),
                          frames=frames)
        tail = max(1, len(losses) // 10)
        first.append(sum(losses[:tail]) / tail)
        final.append(sum(losses[-tail:]) / tail)
        if frames is not None:   # held-out candidate clips (the test seed): how often the chosen pairs move
            held_out = _procedural(_key(cfg), derive_seed(seed, "candidate-test-clips"), cfg.frame_selection.n_eval,
                                   candidate_frames(cfg), cfg.frame_selection.rest)
            motion_frac.append(motion_pair_fraction(model.cpu(), held_out, frames, cfg.selection.rho_pre, seed,
                                                    cfg.frame_selection.n_eval))
            motion_base.append(float(pair_has_motion(held_out.moving, model.encoder.tubelet).float().mean()))
    enc = model.encoder
    n = enc.num_tokens
    v = tube_visible(enc.slices, enc.positions, cfg.selection.mask_ratio)
    if method == "tube":
        enc_tokens, dec_tokens = v, n
    else:
        enc_tokens = v if cfg.selection.match_visible else count(1 - cfg.selection.mask_ratio, n)
        dec_tokens = count(cfg.selection.rho_pre, n)
    out = {"method": method, "frames": frames, "seeds": seeds_of(cfg), "steps": len(losses),
           "params": num_params(model), "loss_first": sample(first, "seed"), "loss_final": sample(final, "seed"),
           "encoder_tokens": enc_tokens, "decoder_tokens": dec_tokens, "targets": dec_tokens - enc_tokens,
           "snapshots": sorted(snaps.values()), "schedule": plan}
    if frames is not None:
        out["motion_pair_fraction"] = sample(motion_frac, "seed")
        out["candidate_motion_fraction"] = sample(motion_base, "seed")
    return out


# ---------------------------------------------------------------- fine-tuning
def finetune_seed(run, arm: str, snapshot: str | None, prune: str, seed: int,
                  subdir: str) -> tuple[float, float, int, dict]:
    """(test top-1, final train loss, token count, schedule) of one fine-tune of `arm` at `seed`."""
    cfg = run.cfg
    source, _ = FINETUNE_ARMS[arm]
    ae = initial_autoencoder(cfg, seed)  # same initial encoder as the pre-training arms
    if source is not None:
        path = pretrain_dir(run, source, seed) / f"{snapshot}.pt"
        if not path.is_file():
            raise FileNotFoundError(f"no pre-trained weights at {path}: run the pretrain_{source} experiment first "
                                    f"(with the same `seeds`)")
        ae.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    torch.manual_seed(derive_seed(seed, "head"))
    model = VideoClassifier(ae.encoder, classes(cfg), prune=prune, keep_ratio=cfg.selection.keep_ratio)
    device = device_of(cfg)
    data = dataset(cfg, seed, "finetune")
    plan = schedule(cfg, "finetune", data, who=f"{arm} (seed {seed})")
    losses = finetune(model, data, cfg, seed, run.checkpoint_dir(*[p for p in (subdir, seed_dir(seed)) if p]), device)
    top1 = evaluate(model, dataset(cfg, seed, "test"), cfg.finetune.eval_batch, seed, device)
    tail = max(1, len(losses) // 10)
    return top1, sum(losses[-tail:]) / tail, model.encoder.num_tokens, plan


def finetune_arm(run, arm: str, snapshot: str | None, subdir: str = "") -> dict:
    """Fine-tune `arm` from `snapshot` once per seed; top-1 and train loss as samples over seeds."""
    cfg = run.cfg
    source, prune = FINETUNE_ARMS[arm]
    if arm == "ascending" and cfg.selection.ascending_finetune:
        prune = "bottom"
    if arm == "scratch":
        prune = cfg.selection.scratch_prune
    top1, loss = [], []
    for seed in seeds_of(cfg):
        acc, final_loss, n, plan = finetune_seed(run, arm, snapshot, prune, seed, subdir)
        top1.append(acc)
        loss.append(final_loss)
    return {"top1": sample(top1, "seed"), "pretrained": source, "snapshot": snapshot, "prune": prune,
            "seeds": seeds_of(cfg), "tokens": n if prune == "none" else count(cfg.selection.keep_ratio, n),
            "train_loss_final": sample(loss, "seed"), "schedule": plan}


def run_finetune(run, arm: str) -> dict:
    if (skip := skipped_on_video(run.cfg, arm)) is not None:
        return skip
    return finetune_arm(run, arm, snapshot_name(run.cfg.pretrain.budgets[-1]))


# ---------------------------------------------------------------- the label-leak control
def label_leak(run) -> dict:
    """Linear probes on the binary keep mask of pixel-difference scores, per seed and keep ratio:
    the class (the moving digit's appearance; chance 1/classes) and the motion direction (positive control)."""
    import pandas as pd

    cfg = run.cfg
    if cfg.data.source != "procedural":   # real videos (full): no motion labels to probe for
        reason = "the probe needs the procedural clips' class and motion labels of every clip (smoke, tiny)"
        run.save_table(pd.DataFrame([{"label_leak": "not run", "reason": reason}]), "label_leak")
        return {"skipped": True, "reason": reason}
    lk, m = cfg.leak, cfg.model
    chance = {"class": 100.0 / classes(cfg), "motion": 100.0 / num_motions(cfg.data.patterns)}
    acc = {}   # (keep, target) -> one accuracy per seed
    for seed in seeds_of(cfg):
        train = make_clips(lk.n_train, derive_seed(seed, "probe-train"), **cfg.data)
        test = make_clips(lk.n_test, derive_seed(seed, "probe-test"), **cfg.data)
        for keep in lk.keep_ratios:
            x_train, x_test = (keep_masks(c.video, keep, m.patch, m.tubelet) for c in (train, test))
            for target in ("class", "motion"):
                y_train, y_test = ((c.labels if target == "class" else c.motion).numpy() for c in (train, test))
                acc.setdefault((keep, target), []).append(probe_accuracy(x_train, y_train, x_test, y_test))
    out, rows = {}, []
    for (keep, target), values in acc.items():
        name = f"keep{round(100 * keep)}"
        out.setdefault(name, {})[f"{target}_accuracy"] = sample(values, "seed")
        out[name][f"{target}_above_chance"] = sample([v - chance[target] for v in values], "seed")
        rows.append({"keep": keep, "probe target": target, "chance (%)": chance[target],
                     "probe accuracy (%), mean [90% CI]": mean_ci(out[name][f"{target}_accuracy"])})
    keeps = [f"keep{round(100 * k)}" for k in lk.keep_ratios]
    # the claims: the class probe's largest distance from chance, and the motion probe's smallest lead
    out["class_max_distance_to_chance"] = combine([out[k]["class_above_chance"] for k in keeps],
                                                  lambda *g: max(abs(x) for x in g))
    out["motion_min_above_chance"] = combine([out[k]["motion_above_chance"] for k in keeps], lambda *g: min(g))
    out["chance"] = chance
    run.save_table(pd.DataFrame(rows), "label_leak", floatfmt=".1f")
    return out


# ---------------------------------------------------------------- tables
def accuracy(run) -> dict:
    import pandas as pd

    m = {arm: read_json(run.out / "metrics" / f"finetune_{arm}.json") for arm in FINETUNE_ARMS}
    m = {arm: v for arm, v in m.items() if not v.get("skipped")}   # procedural-only arms, on real videos
    top1 = {arm: m[arm]["top1"] for arm in m}
    gaps = {name: gap(top1[a], top1[b])   # paired by seed
            for name, (a, b) in GAPS.items() if a in top1 and b in top1}
    grid = [{"pre-training": pre, **{ft: mean_ci(top1[arm]) for ft, arm in cols}}
            for pre, cols in [("VideoMAE (tube)", [("all tokens", "videomae"), ("top-60% pruned", "videomae_pruned")]),
                              ("EVEREST", [("all tokens", "everest_full"), ("top-60% pruned", "everest")])]]
    run.save_table(pd.DataFrame(grid), "accuracy_2x2")
    rows = [{"arm": LABELS[a], "pre-train": PRETRAIN_ARMS[m[a]["pretrained"]][0] if m[a]["pretrained"] else "none",
             "fine-tune tokens": m[a]["tokens"], "fine-tune pruning": m[a]["prune"],
             "top-1 (%), mean [90% CI]": mean_ci(top1[a])} for a in LABELS if a in top1]
    run.save_table(pd.DataFrame(rows), "accuracy")
    run.save_table(pd.DataFrame([{"gap (paired by seed)": f"{a} − {b}", "top-1 points, mean [90% CI]": mean_ci(g)}
                                 for (a, b), g in zip(GAPS.values(), gaps.values())]), "accuracy_gaps")
    frame_rows = []
    for arm in FRAME_ARMS:
        pre = read_json(run.out / "metrics" / f"pretrain_{arm}.json")
        if pre.get("skipped") or arm not in top1:
            frame_rows.append({"pre-training frame pairs": PRETRAIN_ARMS[arm][1], "not run": pre.get("reason", "")})
            continue
        frame_rows.append({"pre-training frame pairs": PRETRAIN_ARMS[arm][1],
                           "chosen pairs with motion": mean_ci(pre["motion_pair_fraction"], 3),
                           "candidate pairs with motion": mean_ci(pre["candidate_motion_fraction"], 3),
                           "top-1 (%), top-60% FT": mean_ci(top1[arm])})
        gaps[f"{arm}_motion_pair_fraction"] = pre["motion_pair_fraction"]
    run.save_table(pd.DataFrame(frame_rows), "frame_selection")
    out = {arm: {"top1": top1[arm]} for arm in top1}
    out.update(gaps)
    if all(f"{a}_motion_pair_fraction" in gaps for a in FRAME_ARMS):
        out["selected_minus_uniform_motion_pairs"] = gap(
            gaps["everest_selected_frames_motion_pair_fraction"], gaps["everest_uniform_frames_motion_pair_fraction"])
    return out


# ---------------------------------------------------------------- efficiency
def _pretrain_and_finetune_losses(ae: MaskedVideoAutoencoder, video: torch.Tensor, sel, n_classes: int,
                                  keep_ratio: float, gen: torch.Generator):
    """{phase: (loss(arm), VideoMAE arm, EVEREST arm, parameters)} for one batch `video`."""
    classifiers = {p: VideoClassifier(ae.encoder, n_classes, prune=p, keep_ratio=keep_ratio).to(video.device)
                   for p in ("none", "top")}
    labels = torch.zeros(video.shape[0], dtype=torch.long, device=video.device)

    def pre_loss(method):
        e, vis, tgt = make_masks(ae, video, method, sel, gen)
        return ae(video, vis, tgt, embeddings=e)

    def ft_loss(prune):
        return torch.nn.functional.cross_entropy(classifiers[prune](video, gen), labels)

    ft_params = list(dict.fromkeys(p for c in classifiers.values() for p in c.parameters()))
    return {"pretrain": (pre_loss, "tube", "everest", list(ae.parameters())),
            "finetune": (ft_loss, "none", "top", ft_params)}


def measure_phases(ae: MaskedVideoAutoencoder, video: torch.Tensor, sel, n_classes: int, keep_ratio: float,
                   gen: torch.Generator) -> dict:
    """Per phase and arm, per clip: counted forward FLOPs (explicit attention), bytes saved for backward
    with explicit and with fused attention, and peak CUDA memory of forward + backward (GPU only)."""
    b = video.shape[0]
    out = {}
    for phase, (fn, base, ours, params) in _pretrain_and_finetune_losses(ae, video, sel, n_classes, keep_ratio,
                                                                          gen).items():
        arms = {}
        for name, arm in (("videomae", base), ("everest", ours)):
            r = {}
            for attention in ("explicit", "fused"):
                set_fused_attention(ae, attention == "fused")
                if attention == "explicit":
                    flops, saved = flops_and_saved_bytes(lambda: fn(arm), params)
                    r["flops"] = flops / b
                else:
                    saved = saved_activation_bytes(lambda: fn(arm), params)
                r[f"saved_bytes_{attention}"] = saved / b
                peak = peak_cuda_bytes(lambda: fn(arm).backward(), video.device)
                r[f"peak_cuda_bytes_{attention}"] = None if peak is None else peak / b
            arms[name] = r
        set_fused_attention(ae, False)
        out[phase] = {**arms, "flops_ratio": arms["everest"]["flops"] / arms["videomae"]["flops"],
                      **{f"activation_ratio_{a}": arms["everest"][f"saved_bytes_{a}"] / arms["videomae"][f"saved_bytes_{a}"]
                         for a in ("explicit", "fused")}}
        if arms["videomae"]["peak_cuda_bytes_explicit"] is not None:
            for a in ("explicit", "fused"):
                out[phase][f"peak_cuda_ratio_{a}"] = (arms["everest"][f"peak_cuda_bytes_{a}"]
                                                      / arms["videomae"][f"peak_cuda_bytes_{a}"])
    return out


def _token_counts(enc: VideoEncoder, sel, match_visible: bool) -> dict:
    n = enc.num_tokens
    v = tube_visible(enc.slices, enc.positions, sel.mask_ratio)
    v_ev = v if match_visible else count(1 - sel.mask_ratio, n)
    k, kept = count(sel.rho_pre, n), count(sel.keep_ratio, n)
    return {"pretrain": {"encoder": (v, v_ev), "decoder": (n, k), "targets": (n - v, k - v_ev)},
            "finetune": {"encoder": (n, kept), "decoder": (0, 0)}}


def _memory_rows(phase: str, r: dict, unit: float, unit_name: str) -> list[tuple]:
    rows = [(f"saved activations {unit_name} / clip, {a} attention", r["videomae"][f"saved_bytes_{a}"] / unit,
             r["everest"][f"saved_bytes_{a}"] / unit) for a in ("explicit", "fused")]
    if r["videomae"]["peak_cuda_bytes_explicit"] is not None:
        rows += [(f"peak CUDA {unit_name} / clip, {a} attention", r["videomae"][f"peak_cuda_bytes_{a}"] / unit,
                  r["everest"][f"peak_cuda_bytes_{a}"] / unit) for a in ("explicit", "fused")]
    return rows


def efficiency(run) -> dict:
    """The tiny model: EVEREST / VideoMAE ratios of tokens, FLOPs, saved activations and step time
    (reported, not claimed: the claims are at ViT-B, `efficiency_vit_b`)."""
    import pandas as pd

    cfg = run.cfg
    torch.manual_seed(derive_seed(run.seed, "init"))
    ae = build_autoencoder(cfg)
    enc = ae.encoder
    clips = dataset(cfg, run.seed, "test")
    video = clips.batch(torch.arange(min(cfg.efficiency.batch, len(clips))))[0]
    video = video[:, 0] if video.dim() == 6 else video     # multi-view test clips: the first view
    b = video.shape[0]
    gen = torch.Generator().manual_seed(derive_seed(run.seed, "efficiency"))
    measured = measure_phases(ae, video, cfg.selection, classes(cfg), cfg.selection.keep_ratio, gen)
    losses = _pretrain_and_finetune_losses(ae, video, cfg.selection, classes(cfg), cfg.selection.keep_ratio, gen)

    def step(loss_fn, arg, params):
        opt = torch.optim.AdamW(params, lr=1e-8)
        return lambda: (opt.zero_grad(), loss_fn(arg).backward(), opt.step())

    tokens = _token_counts(enc, cfg.selection, cfg.selection.match_visible)
    dims = VitDims(enc.num_tokens, enc.tubelet * enc.patch ** 2 * enc.channels, enc.dim, len(enc.blocks),
                   cfg.model.decoder_dim, cfg.model.decoder_depth, classes(cfg))
    t = tokens["pretrain"]
    analytic = {"pretrain": [pretrain_macs(dims, t["encoder"][i], t["decoder"][i], t["targets"][i]) for i in (0, 1)],
                "finetune": [finetune_macs(dims, tokens["finetune"]["encoder"][i]) for i in (0, 1)]}
    decoder_share = analytic["pretrain"][0]["decoder"] / analytic["pretrain"][0]["total"]
    out, rows = {"decoder_share_of_videomae_pretrain_macs": decoder_share}, []
    for phase, (fn, base, ours, params) in losses.items():
        r, t = measured[phase], tokens[phase]
        times = interleaved_median_times({a: step(fn, a, params) for a in (base, ours)}, cfg.efficiency.repeats)
        a_macs = [x["total"] for x in analytic[phase]]
        out[phase] = {"encoder_tokens": dict(zip(("videomae", "everest"), t["encoder"])),
                      "decoder_tokens": dict(zip(("videomae", "everest"), t["decoder"])),
                      "analytic_macs_ratio": a_macs[1] / a_macs[0], **r}
        out.setdefault("timing", {})[f"{phase}_step_ratio"] = times[ours] / times[base]  # noisy: read by no claim
        rows += [{"phase": phase, "quantity": q, "VideoMAE": a, "EVEREST": e, "ratio": e / a if a else float("nan")}
                 for q, a, e in [("encoder tokens", *t["encoder"]), ("decoder tokens", *t["decoder"]),
                                 ("forward MFLOPs / clip", r["videomae"]["flops"] / 1e6, r["everest"]["flops"] / 1e6),
                                 ("analytic MMACs / clip", a_macs[0] / 1e6, a_macs[1] / 1e6),
                                 *_memory_rows(phase, r, 1024, "KiB"),
                                 (f"median step ms (batch {b}, interleaved)", 1e3 * times[base], 1e3 * times[ours])]]
    run.save_table(pd.DataFrame(rows), "efficiency", floatfmt=".3g")
    return out


def efficiency_vit_b(run) -> dict:
    """The paper's ViT-B (768/12/12, decoder 384/4/6) on one 16×3×224² clip: analytic MACs against
    FlopCounterMode FLOPs, bytes saved for backward (explicit and fused attention) and, on a GPU, peak
    CUDA memory. V = ⌊0.1·N⌋ = 156 for EVEREST, as in the paper (tube masking: 160)."""
    import pandas as pd

    from shared.config import Config

    device = device_of(run.cfg)
    torch.manual_seed(derive_seed(run.seed, "vit-b"))
    enc = VideoEncoder(3, 16, 224, 16, 2, 768, 12, 12, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    ae = MaskedVideoAutoencoder(enc, 384, 4, 6).to(device)
    sel = Config.wrap({**run.cfg.selection, "match_visible": False})
    video = torch.rand(1, 3, 16, 224, 224, generator=torch.Generator().manual_seed(0)).to(device)
    gen = torch.Generator().manual_seed(derive_seed(run.seed, "efficiency"))
    d = vit_b_dims()
    measured = measure_phases(ae, video, sel, d.num_classes, sel.keep_ratio, gen)
    analytic = {r["phase"].replace("-", ""): r for r in vit_b_table()}
    out, rows = {}, []
    for phase, r in measured.items():
        a = analytic[phase]
        counted = [r["videomae"]["flops"] / 2e9, r["everest"]["flops"] / 2e9]   # GFLOPs / 2 = GMACs
        out[phase] = {**r, "analytic_gmacs": {"videomae": a["videomae_gmacs"], "everest": a["everest_gmacs"]},
                      "analytic_ratio": a["ratio"], "counted_ratio": counted[1] / counted[0],
                      "paper_ratio": a["paper_ratio"]}
        rows += [{"phase": phase, "quantity": q, "VideoMAE": x, "EVEREST": y, "ratio": y / x, "paper ratio": pr}
                 for q, x, y, pr in [("analytic GMACs", a["videomae_gmacs"], a["everest_gmacs"], a["paper_ratio"]),
                                     ("FlopCounter GFLOPs / 2", *counted, a["paper_ratio"]),
                                     *[(*m, float("nan")) for m in _memory_rows(phase, r, 2 ** 20, "MiB")]]]
    run.save_table(pd.DataFrame(rows), "efficiency_vit_b", floatfmt=".3g")
    out["from_config"] = True   # FLOPs and saved activations of configured ViT-B shapes: no training, no data
    return out


def selected_mask(ae, video: torch.Tensor, cfg) -> torch.Tensor:
    """The K kept tokens (visible ∪ target) of EVEREST's pre-training selection [B, N]."""
    with torch.no_grad():
        scores = motion_scores(ae.embed(video))
    vis, tgt = select_tokens(scores, cfg.selection.rho_pre, cfg.selection.mask_ratio,
                             num_visible=1, per_slice=cfg.selection.per_slice)
    return vis | tgt


def token_overlay(run) -> dict:
    """Which tokens EVEREST keeps: recall of the moving digit's tokens, before and after pre-training."""
    import pandas as pd

    from . import plots

    cfg = run.cfg
    seeds = seeds_of(cfg)
    models = {}
    for seed in seeds:   # the initial encoder of each seed and the EVEREST encoder pre-trained from it
        init = initial_autoencoder(cfg, seed).eval()
        trained = build_autoencoder(cfg).eval()
        path = pretrain_dir(run, "everest", seed) / f"{snapshot_name(cfg.pretrain.budgets[-1])}.pt"
        trained.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        models[seed] = {"init": init, "pretrained": trained}
    if cfg.data.source != "procedural":   # real videos: the figure only (no ground-truth object masks)
        test = dataset(cfg, seeds[0], "test")
        video = test.batch(torch.arange(min(cfg.overlay.n_show, len(test))))[0][:, 0]
        kept = selected_mask(models[seeds[0]]["pretrained"], video, cfg)
        run.save_figure(plots.overlay_figure(video, kept, cfg.model.patch, cfg.model.tubelet), "token_overlay")
        run.save_table(pd.DataFrame([{"data": "video", "kept_tokens": int(kept[0].sum())}]), "token_selection")
        return {"kept_tokens": int(kept[0].sum())}
    per_seed, show = {}, {}   # (data, encoder, quantity) -> one value per seed
    for seed in seeds:
        for data_name, pan in [("clean", False), ("pan", True)]:
            clips = dataset(cfg, seed, "test", pan)
            n = min(cfg.overlay.n_clips, len(clips))
            video = clips.video[:n]
            cover = token_cover(clips.moving[:n], cfg.model.patch, cfg.model.tubelet)
            digit = cover >= cfg.overlay.min_cover
            static = cover == 0
            for model_name, model in models[seed].items():
                kept = selected_mask(model, video, cfg)
                for q, v in [("moving_digit_recall", (kept & digit).sum() / digit.sum()),
                             ("kept_precision", (kept & (cover > 0)).sum() / kept.sum()),
                             ("static_dropped", (~kept & static).sum() / static.sum())]:
                    per_seed.setdefault((data_name, model_name, q), []).append(float(v))
                if model_name == "pretrained" and seed == seeds[0]:
                    show[data_name] = (video[:cfg.overlay.n_show], kept[:cfg.overlay.n_show], clips.moving[:cfg.overlay.n_show])
    out = {}
    for (data_name, model_name, q), values in per_seed.items():
        out.setdefault(data_name, {}).setdefault(model_name, {})[q] = sample(values, "seed")
    vid = torch.cat([show["clean"][0], show["pan"][0]])
    kept = torch.cat([show["clean"][1], show["pan"][1]])
    moving = torch.cat([show["clean"][2], show["pan"][2]])
    titles = [f"clean {i}" for i in range(len(show["clean"][0]))] + [f"pan {i}" for i in range(len(show["pan"][0]))]
    run.save_figure(plots.overlay_figure(vid, kept, cfg.model.patch, cfg.model.tubelet, moving, titles), "token_overlay")
    rows = [{"data": d, "encoder": mname, **{q: mean_std(s, 3) for q, s in vals.items()}}
            for d, ms in out.items() for mname, vals in ms.items()]
    run.save_table(pd.DataFrame(rows), "token_selection", floatfmt=".3f")
    return out


EXPERIMENTS = {
    **{f"pretrain_{arm}": partial(run_pretrain, arm=arm) for arm in PRETRAIN_ARMS},
    **{f"finetune_{arm}": partial(run_finetune, arm=arm) for arm in FINETUNE_ARMS},
    "label_leak": label_leak,
    "accuracy": accuracy,
    "efficiency": efficiency,
    "efficiency_vit_b": efficiency_vit_b,
    "token_overlay": token_overlay,
}
