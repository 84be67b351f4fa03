"""Which tokens EVEREST keeps (`token_overlay`): the selection overlaid on clips, and the recall of the
moving digit's tokens, with the initial and the pre-trained encoder, on clean and panning clips."""
from __future__ import annotations

import torch

from shared.samples import sample

from ..data import token_cover
from ..model import build_autoencoder
from ..selection import motion_scores, select_tokens
from .common import dataset, initial_autoencoder, mean_std, pretrain_dir, seeds_of, snapshot_name


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

    from .. import plots

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
