"""Functions for the notebook's live exploration (selection under ρ_pre and motion pattern; one
reconstruction from the pre-trained EVEREST checkpoint)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

from shared.config import load_config
from shared.seeding import derive_seed

from . import plots
from .data import EXTRA_PATTERNS, make_clips
from .model import build_autoencoder, reconstruct
from .selection import select_tokens

CONFIG = Path(__file__).with_name("config.yaml")
DIRECTIONS = ["→", "↗", "↑", "↖", "←", "↙", "↓", "↘"]
PATTERNS = {**{f"direction {a}": i for i, a in enumerate(DIRECTIONS)},
            **{p: 8 + i for i, p in enumerate(EXTRA_PATTERNS)}}


def config(profile: str, overlay=None):
    """The paper's config at `profile` (with the rehearsal's overlay when given, as its experiments read it)."""
    return load_config(CONFIG, profile, overlay=overlay)


def selection_view(profile: str, pattern: str = "direction →", rho_pre: float = 0.3, pan: bool = False, seed: int = 0,
                   overlay=None):
    """One clip with the chosen motion pattern and the tokens EVEREST keeps at this ρ_pre (initial encoder)."""
    cfg = config(profile, overlay)
    label = PATTERNS[pattern]
    patterns = ["directions", *EXTRA_PATTERNS] if label >= 8 else ["directions"]
    clips = make_clips(1, seed, patterns=patterns, motion=label, pan_speed=cfg.overlay.pan_speed if pan else 0.0)
    torch.manual_seed(derive_seed(cfg.seed, "init"))
    ae = build_autoencoder(cfg).eval()
    with torch.no_grad():
        from .selection import motion_scores

        scores = motion_scores(ae.embed(clips.video))
    vis, tgt = select_tokens(scores, rho_pre, cfg.selection.mask_ratio, num_visible=1)
    return plots.overlay_figure(clips.video, vis | tgt, cfg.model.patch, cfg.model.tubelet, clips.moving,
                                [f"{pattern}, ρ_pre={rho_pre:.2f}"])


def reconstruction_view(profile: str, results_dir: str | Path, seed: int = 0, overlay=None):
    """A test clip, EVEREST's visible tokens and the reconstruction of its targets (pre-trained weights):
    a procedural clip, or (real videos, full) the first clip of the test list."""
    cfg = config(profile, overlay)
    ae = build_autoencoder(cfg).eval()
    path = Path(results_dir) / "checkpoints" / "pretrain_everest" / f"seed{cfg.seeds[0]}" / "b100.pt"
    ae.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    if cfg.data.source == "procedural":
        video = make_clips(1, derive_seed(seed, "notebook"), speed=cfg.data.speed).video
    else:
        from .experiments import dataset

        video, _ = dataset(cfg, seed, "finetune").batch(torch.tensor([0]))
    clips = SimpleNamespace(video=video)
    with torch.no_grad():
        from .selection import motion_scores

        scores = motion_scores(ae.embed(clips.video))
    from .recipe import tube_visible

    enc = ae.encoder
    v = tube_visible(enc.slices, enc.positions, cfg.selection.mask_ratio) if cfg.selection.match_visible else None
    vis, tgt = select_tokens(scores, cfg.selection.rho_pre, cfg.selection.mask_ratio,
                             torch.Generator().manual_seed(seed), num_visible=v)
    recon = reconstruct(ae, clips.video, vis, tgt)
    return plots.reconstruction_figure(clips.video[0], recon[0], vis[0], tgt[0], enc.patch, enc.tubelet)
