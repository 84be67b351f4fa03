"""The experiments (`python -m papers.everest <experiment>`), one per Snakemake rule.

pretrain_<arm>   tube (VideoMAE) / EVEREST / ascending pre-training, clean and camera-pan data;
                 weight snapshots at 25/50/100% of the steps (reused by the budget figure)
finetune_<arm>   VideoMAE (all tokens), EVEREST (top 60%), random 60%, ascending, scratch, pan arms
budget_<method>  fine-tunes of the 25% and 50% snapshots
accuracy         the accuracy table (clean and pan) and the budget figure, from the fine-tune metrics
efficiency       tokens, FLOPs, activation bytes and interleaved step times, EVEREST / VideoMAE
token_overlay    selected tokens overlaid on clips, and the moving-digit recall of the selection

Every trained arm runs once per entry of `seeds` (seed i of every arm shares its data, initial
encoder and batch order), and writes each stochastic metric as a `shared.samples.sample` over seeds,
so two arms pair by seed. Token counts, FLOPs and activation bytes are deterministic plain numbers.
"""
from __future__ import annotations

from functools import lru_cache, partial
from pathlib import Path

import torch

from shared.assets import require_path
from shared.io import read_json
from shared.samples import combine, sample
from shared.seeding import derive_seed

from .data import make_clips, num_classes, token_cover
from .efficiency import (VitDims, counted_flops, finetune_macs, interleaved_median_times, pretrain_macs,
                         saved_activation_bytes, vit_b_table)
from .model import VideoClassifier, build_autoencoder, num_params
from .selection import count, motion_scores, select_tokens
from .train import evaluate, finetune, make_masks, pretrain, tube_visible

# arm -> (selection method, camera-pan data)
PRETRAIN_ARMS = {"videomae": ("tube", False), "everest": ("everest", False), "ascending": ("ascending", False),
                 "videomae_pan": ("tube", True), "everest_pan": ("everest", True)}
# arm -> (pre-trained arm or None, fine-tune pruning, camera-pan data)
FINETUNE_ARMS = {"videomae": ("videomae", "none", False), "everest": ("everest", "top", False),
                 "random": ("everest", "random", False), "ascending": ("ascending", "top", False),
                 "scratch": (None, "top", False), "videomae_pan": ("videomae_pan", "none", True),
                 "everest_pan": ("everest_pan", "top", True)}
LABELS = {"videomae": "VideoMAE (tube, all tokens)", "everest": "EVEREST (motion top-K, top-60% FT)",
          "random": "EVEREST pre-train + random 60% FT", "ascending": "ascending selection (ablation)",
          "scratch": "no pre-training (scratch)"}


def device_of(cfg) -> str:
    return ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device


def snapshot_name(fraction: float) -> str:
    return f"b{round(100 * fraction)}"


def classes(cfg) -> int:
    return num_classes(cfg.data.patterns) if cfg.data.source == "procedural" else cfg.data.num_classes


@lru_cache(maxsize=4)
def _procedural(cfg_key: tuple, seed: int, n: int, pan: bool, frames: int | None = None):
    d = dict(cfg_key)
    frames = frames or d["frames"]
    return make_clips(n, seed, frames=frames, size=d["size"], speed=d["speed"] * (d["frames"] - 1) / (frames - 1),
                      noise=d["noise"], patterns=tuple(d["patterns"]), pan_speed=d["pan_speed"] if pan else 0.0,
                      flicker=d["flicker"])


def candidate_frames(cfg) -> int:
    """2·α·τ candidate frames for information-intensive frame selection (τ = frames / 2 pairs)."""
    return 2 * int(round(cfg.frame_selection.alpha * cfg.data.frames / 2))


def _key(cfg) -> tuple:
    d = cfg.data
    return tuple(sorted({"frames": d.frames, "size": d.size, "speed": d.speed, "noise": d.noise,
                         "patterns": tuple(d.patterns), "pan_speed": d.pan_speed, "flicker": d.flicker}.items()))


def dataset(cfg, seed: int, split: str, pan: bool = False):
    """split: pretrain | finetune | test. Procedural clips, or "path label" video lists (full)."""
    d = cfg.data
    if d.source == "procedural":
        if split == "test":
            return _procedural(_key(cfg), derive_seed(seed, "test-clips"), d.n_test, pan)
        if split == "pretrain" and cfg.frame_selection.enabled:
            return _procedural(_key(cfg), derive_seed(seed, "train-clips"), d.n_pretrain, pan, candidate_frames(cfg))
        train = _procedural(_key(cfg), derive_seed(seed, "train-clips"), d.n_pretrain, pan)
        return train if split == "pretrain" else train.subset(d.n_finetune)
    if d.source != "video":
        raise ValueError(f"data.source={d.source!r}; choose procedural or video")
    from .video import VideoListDataset

    key = {"pretrain": "pretrain_list", "finetune": "train_list", "test": "test_list"}[split]
    path = require_path(d[key], what=f"the {split} video list (lines 'path label')",
                        fetch="UCF101/HMDB51/K400 videos and the official split lists", config_key=f"data.{key}")
    mode = {"pretrain": "pretrain", "finetune": "train", "test": "test"}[split]
    return VideoListDataset(path, d.root, mode=mode, clip_len=d.frames, stride=d.stride, size=d.size,
                            segments=d.test_segments, seed=seed)


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


# ---------------------------------------------------------------- pre-training
def run_pretrain(run, arm: str) -> dict:
    cfg = run.cfg
    method, pan = PRETRAIN_ARMS[arm]
    if cfg.frame_selection.enabled and cfg.data.source == "video":
        raise ValueError("frame_selection.enabled is implemented for procedural clips only: set "
                         "frame_selection.enabled=false, or extend VideoListDataset to return 2·alpha·tau frames")
    snaps = {max(1, round(b * cfg.pretrain.steps)): snapshot_name(b) for b in cfg.pretrain.budgets}
    first, final = [], []
    for seed in seeds_of(cfg):
        torch.manual_seed(derive_seed(seed, "init"))
        model = build_autoencoder(cfg)
        data = dataset(cfg, seed, "pretrain", pan)
        losses = pretrain(model, data, method, cfg, seed, run.checkpoint_dir(seed_dir(seed)), snaps, device_of(cfg))
        tail = max(1, len(losses) // 10)
        first.append(sum(losses[:tail]) / tail)
        final.append(sum(losses[-tail:]) / tail)
    enc = model.encoder
    n = enc.num_tokens
    v = tube_visible(enc.slices, enc.positions, cfg.selection.mask_ratio)
    if method == "tube":
        enc_tokens, dec_tokens = v, n
    else:
        enc_tokens = v if cfg.selection.match_visible else count(1 - cfg.selection.mask_ratio, n)
        dec_tokens = count(cfg.selection.rho_pre, n)
    return {"method": method, "pan": pan, "seeds": seeds_of(cfg), "steps": len(losses), "params": num_params(model),
            "loss_first": sample(first, "seed"), "loss_final": sample(final, "seed"),
            "encoder_tokens": enc_tokens, "decoder_tokens": dec_tokens, "targets": dec_tokens - enc_tokens,
            "snapshots": sorted(snaps.values())}


# ---------------------------------------------------------------- fine-tuning
def finetune_seed(run, arm: str, snapshot: str | None, prune: str, seed: int, subdir: str) -> tuple[float, float, int]:
    """(test top-1, final train loss, token count) of one fine-tune of `arm` at `seed`."""
    cfg = run.cfg
    source, _, pan = FINETUNE_ARMS[arm]
    torch.manual_seed(derive_seed(seed, "init"))
    ae = build_autoencoder(cfg)  # same initial encoder as the pre-training arms
    if source is not None:
        path = pretrain_dir(run, source, seed) / f"{snapshot}.pt"
        if not path.is_file():
            raise FileNotFoundError(f"no pre-trained weights at {path}: run the pretrain_{source} experiment first "
                                    f"(with the same `seeds`)")
        ae.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    torch.manual_seed(derive_seed(seed, "head"))
    model = VideoClassifier(ae.encoder, classes(cfg), prune=prune, keep_ratio=cfg.selection.keep_ratio)
    device = device_of(cfg)
    losses = finetune(model, dataset(cfg, seed, "finetune", pan), cfg, seed,
                      run.checkpoint_dir(*[p for p in (subdir, seed_dir(seed)) if p]), device)
    top1 = evaluate(model, dataset(cfg, seed, "test", pan), cfg.finetune.eval_batch, seed, device)
    tail = max(1, len(losses) // 10)
    return top1, sum(losses[-tail:]) / tail, model.encoder.num_tokens


def finetune_arm(run, arm: str, snapshot: str | None, subdir: str = "") -> dict:
    """Fine-tune `arm` from `snapshot` once per seed; top-1 and train loss as samples over seeds."""
    cfg = run.cfg
    source, prune, pan = FINETUNE_ARMS[arm]
    if arm == "ascending" and cfg.selection.ascending_finetune:
        prune = "bottom"
    if arm == "scratch":
        prune = cfg.selection.scratch_prune
    top1, loss = [], []
    for seed in seeds_of(cfg):
        acc, final_loss, n = finetune_seed(run, arm, snapshot, prune, seed, subdir)
        top1.append(acc)
        loss.append(final_loss)
    return {"top1": sample(top1, "seed"), "pretrained": source, "snapshot": snapshot, "prune": prune, "pan": pan,
            "seeds": seeds_of(cfg), "tokens": n if prune == "none" else count(cfg.selection.keep_ratio, n),
            "train_loss_final": sample(loss, "seed")}


def run_finetune(run, arm: str) -> dict:
    return finetune_arm(run, arm, snapshot_name(run.cfg.pretrain.budgets[-1]))


def run_budget(run, arm: str) -> dict:
    """Fine-tunes of the earlier pre-training snapshots (the last one is `finetune_<arm>`)."""
    out = {}
    for b in run.cfg.pretrain.budgets[:-1]:
        name = snapshot_name(b)
        out[name] = finetune_arm(run, arm, name, subdir=name)
    return out


# ---------------------------------------------------------------- tables and figures
def accuracy(run) -> dict:
    import pandas as pd

    from . import plots

    cfg = run.cfg
    m = {arm: read_json(run.out / "metrics" / f"finetune_{arm}.json") for arm in FINETUNE_ARMS}
    gap = {sfx: combine([m[f"everest{sfx}"]["top1"], m[f"videomae{sfx}"]["top1"]], lambda e, v: e - v)
           for sfx in ("", "_pan")}  # paired by seed
    rows = [{"arm": LABELS[a], "pre-train": PRETRAIN_ARMS[m[a]["pretrained"]][0] if m[a]["pretrained"] else "none",
             "fine-tune tokens": m[a]["tokens"], "fine-tune pruning": m[a]["prune"],
             "top-1 (%), mean ± std over seeds": mean_std(m[a]["top1"])}
            for a in LABELS]
    run.save_table(pd.DataFrame(rows), "accuracy", floatfmt=".1f")
    pan_rows = [{"data": data, "VideoMAE top-1 (%)": mean_std(m[f"videomae{sfx}"]["top1"]),
                 "EVEREST top-1 (%)": mean_std(m[f"everest{sfx}"]["top1"]),
                 "EVEREST − VideoMAE (paired by seed)": mean_std(gap[sfx])}
                for data, sfx in [("clean", ""), ("camera pan", "_pan")]]
    run.save_table(pd.DataFrame(pan_rows), "accuracy_pan", floatfmt=".1f")
    budgets = list(cfg.pretrain.budgets)
    curves = {}
    for arm, label in [("videomae", "VideoMAE"), ("everest", "EVEREST")]:
        early = read_json(run.out / "metrics" / f"budget_{arm}.json")
        curves[label] = [early[snapshot_name(b)]["top1"] for b in budgets[:-1]] + [m[arm]["top1"]]
    run.save_figure(plots.budget_figure(budgets, {k: [s["mean"] for s in c] for k, c in curves.items()},
                                        cfg.pretrain.steps, {k: [s["std"] or 0.0 for s in c] for k, c in curves.items()}),
                    "accuracy_vs_budget")
    run.save_table(pd.DataFrame({"budget (%)": [100 * b for b in budgets],
                                 **{k: [mean_std(s) for s in c] for k, c in curves.items()}}),
                   "accuracy_vs_budget", floatfmt=".1f")
    out = {arm: {"top1": m[arm]["top1"]} for arm in FINETUNE_ARMS}
    out["everest_minus_videomae"] = gap[""]
    out["pan_everest_minus_videomae"] = gap["_pan"]
    for arm in ("ascending", "random"):   # the gaps the claims test, paired by seed
        out[f"everest_minus_{arm}"] = combine([m["everest"]["top1"], m[arm]["top1"]], lambda e, a: e - a)
    out["budget"] = {label: dict(zip([snapshot_name(b) for b in budgets], acc)) for label, acc in curves.items()}
    return out


def efficiency(run) -> dict:
    """EVEREST / VideoMAE ratios of tokens, FLOPs, saved activations and step time, same run."""
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

    def pre_loss(method):
        e, vis, tgt = make_masks(ae, video, method, cfg.selection, gen)
        return ae(video, vis, tgt, embeddings=e)

    classifiers = {p: VideoClassifier(enc, classes(cfg), prune=p, keep_ratio=cfg.selection.keep_ratio)
                   for p in ("none", "top")}
    labels = torch.zeros(b, dtype=torch.long)

    def ft_loss(prune):
        return torch.nn.functional.cross_entropy(classifiers[prune](video, gen), labels)

    def step(loss_fn, arg, params):
        opt = torch.optim.AdamW(params, lr=1e-8)
        return lambda: (opt.zero_grad(), loss_fn(arg).backward(), opt.step())

    arms = {"pretrain": (pre_loss, "tube", "everest", list(ae.parameters())),
            "finetune": (ft_loss, "none", "top", list(dict.fromkeys(p for c in classifiers.values() for p in c.parameters())))}
    n = enc.num_tokens
    v = tube_visible(enc.slices, enc.positions, cfg.selection.mask_ratio)
    v_ev = v if cfg.selection.match_visible else count(1 - cfg.selection.mask_ratio, n)
    k = count(cfg.selection.rho_pre, n)
    kept = count(cfg.selection.keep_ratio, n)
    tokens = {"pretrain": {"encoder": (v, v_ev), "decoder": (n, k)}, "finetune": {"encoder": (n, kept), "decoder": (0, 0)}}
    dims = VitDims(n, enc.tubelet * enc.patch ** 2 * enc.channels, enc.dim, len(enc.blocks),
                   cfg.model.decoder_dim, cfg.model.decoder_depth, classes(cfg))
    analytic = {"pretrain": (pretrain_macs(dims, v, n, n - v)["total"], pretrain_macs(dims, v_ev, k, k - v_ev)["total"]),
                "finetune": (finetune_macs(dims, n)["total"], finetune_macs(dims, kept)["total"])}
    out, rows = {}, []
    for phase, (fn, base, ours, params) in arms.items():
        flops = [counted_flops(lambda a=a: fn(a)) / b for a in (base, ours)]
        mem = [saved_activation_bytes(lambda a=a: fn(a), params) / b for a in (base, ours)]
        times = interleaved_median_times({a: step(fn, a, params) for a in (base, ours)}, cfg.efficiency.repeats)
        t = tokens[phase]
        out[phase] = {"encoder_tokens": {"videomae": t["encoder"][0], "everest": t["encoder"][1]},
                      "decoder_tokens": {"videomae": t["decoder"][0], "everest": t["decoder"][1]},
                      "flops_per_clip": {"videomae": flops[0], "everest": flops[1]},
                      "flops_ratio": flops[1] / flops[0],
                      "analytic_macs_ratio": analytic[phase][1] / analytic[phase][0],
                      "activation_bytes_per_clip": {"videomae": mem[0], "everest": mem[1]},
                      "activation_ratio": mem[1] / mem[0]}
        ratio = times[ours] / times[base]
        rows += [{"phase": phase, "quantity": q, "VideoMAE": a, "EVEREST": e, "ratio": e / a if a else float("nan")}
                 for q, a, e in [("encoder tokens", *t["encoder"]), ("decoder tokens", *t["decoder"]),
                                 ("forward MFLOPs / clip", flops[0] / 1e6, flops[1] / 1e6),
                                 ("analytic MMACs / clip", analytic[phase][0] / 1e6, analytic[phase][1] / 1e6),
                                 ("saved activations KiB / clip", mem[0] / 1024, mem[1] / 1024),
                                 (f"median step ms (batch {b}, interleaved)", 1e3 * times[base], 1e3 * times[ours])]]
        out.setdefault("timing", {})[f"{phase}_step_ratio"] = ratio  # noisy: no claim or checked cell reads it
    run.save_table(pd.DataFrame(rows), "efficiency", floatfmt=".3g")
    vitb = vit_b_table()
    run.save_table(pd.DataFrame(vitb), "efficiency_vit_b", floatfmt=".3g")
    out["vit_b"] = {r["phase"].replace("-", ""): {"videomae_gmacs": r["videomae_gmacs"], "everest_gmacs": r["everest_gmacs"],
                                                   "ratio": r["ratio"]} for r in vitb}
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
        torch.manual_seed(derive_seed(seed, "init"))
        init = build_autoencoder(cfg).eval()
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
    **{f"budget_{arm}": partial(run_budget, arm=arm) for arm in ("videomae", "everest")},
    "accuracy": accuracy,
    "efficiency": efficiency,
    "token_overlay": token_overlay,
}
