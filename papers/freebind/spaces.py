"""Small frozen encoders that play the paper's embedding spaces at the tiny/smoke profiles.

- U ("ImageBind"): image and text encoders trained CLIP-style on image-text pairs; then an audio
  encoder trained against the **frozen** image encoder on audio-image pairs, a fraction of them
  mismatched. Audio never sees text.
- Audio-text experts ("CLAP_g", "CLAP_m"): audio and text encoders trained on clean pairs (the
  second with a skewed class prior), whose captions name the intensity correctly only with
  probability `spaces.at_intensity_reliability` (else a random intensity word).
- Image-text expert ("InternVL-C"): image and text encoders trained on more pairs, wider.

Each stage is one Lightning fit (shared.training), symmetric InfoNCE with a learnable temperature.
The two audio-text experts have one architecture and as many pairs, so with `spaces.stack_experts`
(default) they train in one fit as a two-member `shared.seed_stack.SeedStack`: each expert on its own
pairs, with its own temperature and optimiser state, equal to its separate fit to float rounding
(tests/freebind/test_freebind_stacked_experts.py), with one fit's fixed cost instead of two.
Its checkpoint is keyed by the hash of everything that decides it (the world, the `spaces` section,
the stage) and the seed, so it is reused only by a run with the same key (`shared.run_cache`).
"""
from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from shared.seed_stack import SeedStack
from shared.training import EpochSeededSampler, fit, make_trainer

from .world import VOCAB, World, skewed_prior


def info_nce(a: torch.Tensor, b: torch.Tensor, tau: float | torch.Tensor) -> torch.Tensor:
    """Symmetric InfoNCE with in-batch negatives; a, b: (B, d) L2-normalised, row i ↔ row i."""
    logits = a @ b.t() / tau
    target = torch.arange(len(a), device=a.device)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.t(), target))


class MLPEncoder(nn.Module):
    def __init__(self, d_in: int, width: int, d_out: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                 nn.Linear(width, d_out))

    def forward(self, x):
        return F.normalize(self.net(x), dim=-1)


class TextEncoder(nn.Module):
    def __init__(self, width: int, d_out: int):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, width, mode="mean", padding_idx=0)
        self.net = nn.Sequential(nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, d_out))

    def forward(self, tokens):
        return F.normalize(self.net(self.emb(tokens)), dim=-1)


def make_encoder(modality: str, width: int, d_out: int) -> nn.Module:
    if modality == "text":
        return TextEncoder(width, d_out)
    return MLPEncoder({"image": 192, "audio": 384}[modality], width, d_out)


class PairModule(L.LightningModule):
    """Contrastive training of `enc_a` (and `enc_b` unless frozen) on paired batches."""

    def __init__(self, enc_a: nn.Module, enc_b: nn.Module, lr: float, freeze_b: bool = False):
        super().__init__()
        self.enc_a, self.enc_b, self.lr, self.freeze_b = enc_a, enc_b, lr, freeze_b
        self.log_scale = nn.Parameter(torch.tensor(np.log(1 / 0.07), dtype=torch.float32))
        if freeze_b:
            self.enc_b.requires_grad_(False)

    def training_step(self, batch, _):
        xa, xb = batch
        za = self.enc_a(xa)
        if self.freeze_b:
            self.enc_b.eval()
            with torch.no_grad():
                zb = self.enc_b(xb)
        else:
            zb = self.enc_b(xb)
        loss = info_nce(za, zb, 1.0 / self.log_scale.clamp(max=np.log(100)).exp())
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam([p for p in self.parameters() if p.requires_grad], lr=self.lr, foreach=True)


def train_pair(enc_a, enc_b, xa, xb, *, out_dir: Path, seed: int, epochs: int, batch: int, lr: float,
               freeze_b: bool = False, cache_config: dict | None = None) -> PairModule:
    module = PairModule(enc_a, enc_b, lr, freeze_b)
    loader = DataLoader(TensorDataset(xa, xb), batch_size=batch, sampler=EpochSeededSampler(len(xa), seed),
                        drop_last=True)
    trainer = make_trainer(out_dir, seed=seed, max_epochs=epochs, progress=False, cache_config=cache_config)
    fit(trainer, module, loader)
    enc_a.eval()
    enc_b.eval()
    return module


class StackedPairModule(L.LightningModule):
    """`PairModule` for K same-shaped pairs at once: member k trains enc_a[k], enc_b[k] and its own
    temperature on its own batch; the loss is the sum of the members' losses (so each member's gradient
    is its own; Adam is elementwise)."""

    def __init__(self, encs_a: list[nn.Module], encs_b: list[nn.Module], lr: float):
        super().__init__()
        self.k, self.lr = len(encs_a), lr
        self.enc_a, self.enc_b = SeedStack(encs_a), SeedStack(encs_b)
        self.log_scale = nn.Parameter(torch.full((self.k,), float(np.log(1 / 0.07))))

    def training_step(self, batch, _):
        xa, xb = (x.transpose(0, 1) for x in batch)   # (B, K, ...) -> (K, B, ...)
        za, zb = self.enc_a(xa), self.enc_b(xb)
        tau = 1.0 / self.log_scale.clamp(max=np.log(100)).exp()
        loss = sum(info_nce(za[k], zb[k], tau[k]) for k in range(self.k))
        self.log("loss", loss / self.k)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr, foreach=True)


def train_pairs_stacked(encs_a: list[nn.Module], encs_b: list[nn.Module], xas: list[torch.Tensor],
                        xbs: list[torch.Tensor], *, out_dir: Path, seed: int, epochs: int, batch: int, lr: float,
                        cache_config: dict | None = None) -> StackedPairModule:
    """`train_pair` for K same-shaped pairs with as many rows each, in one fit; the trained weights are
    copied back into `encs_a` / `encs_b`. Every member sees the batches a separate fit with `seed` would."""
    n = len(xas[0])
    if any(len(x) != n for x in [*xas, *xbs]):
        raise ValueError("stacked pairs need the same number of rows per member")
    module = StackedPairModule(encs_a, encs_b, lr)
    data = TensorDataset(torch.stack(xas, 1), torch.stack(xbs, 1))   # rows (n, K, ...)
    loader = DataLoader(data, batch_size=batch, sampler=EpochSeededSampler(n, seed), drop_last=True)
    trainer = make_trainer(out_dir, seed=seed, max_epochs=epochs, progress=False, cache_config=cache_config)
    fit(trainer, module, loader)
    for k, (a, b) in enumerate(zip(encs_a, encs_b)):
        a.load_state_dict(module.enc_a.member(k).state_dict())
        b.load_state_dict(module.enc_b.member(k).state_dict())
        a.eval()
        b.eval()
    return module


class Space:
    """A frozen embedding space: one encoder per modality it holds."""

    def __init__(self, name: str, encoders: dict[str, nn.Module]):
        self.name, self.encoders = name, encoders
        for e in encoders.values():
            e.eval().requires_grad_(False)

    @property
    def modalities(self):
        return tuple(self.encoders)

    @property
    def dim(self) -> int:
        enc = next(iter(self.encoders.values()))
        return enc.net[-1].out_features

    @torch.no_grad()
    def embed(self, modality: str, x: torch.Tensor) -> torch.Tensor:
        return self.encoders[modality](x)

    def n_params(self) -> int:
        return sum(p.numel() for e in self.encoders.values() for p in e.parameters())


def _data(world: World, rng, n: int, mods: tuple[str, str], prior=None, mismatch: float = 0.0, **text_kw):
    ev = world.sample_events(n, rng, prior)
    xa = world.render(ev, mods[0], rng)
    if mismatch > 0:  # a fraction of pairs whose second item comes from a different event
        ev_b = world.sample_events(n, rng, prior)
        bad = rng.random(n) < mismatch
        for f in ("cls", "colour", "envelope", "intensity"):
            getattr(ev, f)[bad] = getattr(ev_b, f)[bad]
    xb = world.render(ev, mods[1], rng, **(text_kw if mods[1] == "text" else {}))
    return xa, xb


# the `spaces` settings that only the experts read: U's cache key leaves them out, so runs that differ
# only there (the loudness-reliability knob) reuse one U (its data are drawn before the experts')
EXPERT_ONLY = ("at_dim", "at_width", "at_pairs", "e2_skew", "at_intensity_reliability", "stack_experts",
               "vt_dim", "vt_width", "vt_pairs")


def build_spaces(world: World, cfg, seed: int, ckpt: Path, with_vt: bool = True,
                 timing: dict | None = None, u_ckpt: Path | None = None) -> dict[str, Space]:
    """Train U, the two audio-text experts and the image-text expert for one seed (wall times -> `timing`).
    U's checkpoints go under `u_ckpt` (default `ckpt`), so runs that differ only in the experts share it."""
    import time

    timing = {} if timing is None else timing
    t0 = time.perf_counter()
    s = cfg.spaces
    rng = np.random.default_rng(seed + 1000)
    made_by = {"world": vars(world.spec), "spaces": dict(s)}  # every stage's data draws chain through rng

    u_made_by = {"world": vars(world.spec), "spaces": {k: v for k, v in dict(s).items() if k not in EXPERT_ONLY}}
    u_ckpt = ckpt if u_ckpt is None else u_ckpt

    def common(stage):
        return dict(batch=s.batch, lr=s.lr, cache_config={**(u_made_by if stage.startswith("U_") else made_by),
                                                          "stage": stage})

    torch.manual_seed(seed)
    u = {m: make_encoder(m, s.u_width, s.u_dim) for m in ("image", "text", "audio")}
    xi, xt = _data(world, rng, s.u_pairs, ("image", "text"))
    train_pair(u["image"], u["text"], xi, xt, out_dir=u_ckpt / "U_it", seed=seed, epochs=s.epochs, **common("U_it"))
    xa, xi = _data(world, rng, s.u_audio_pairs, ("audio", "image"), mismatch=s.u_audio_mismatch)
    train_pair(u["audio"], u["image"], xa, xi, out_dir=u_ckpt / "U_ai", seed=seed, epochs=s.u_audio_epochs,
               freeze_b=True, **common("U_ai"))
    spaces = {"U": Space("U", u)}
    timing["U_s"] = time.perf_counter() - t0
    experts = []   # (name, encoders, audio, text)
    for name, prior in (("E1", None), ("E2", skewed_prior(s.e2_skew))):
        enc = {m: make_encoder(m, s.at_width, s.at_dim) for m in ("audio", "text")}
        xa, xt = _data(world, rng, s.at_pairs, ("audio", "text"), prior=prior,
                       intensity_reliability=s.at_intensity_reliability)
        if not s.get("stack_experts", True):
            train_pair(enc["audio"], enc["text"], xa, xt, out_dir=ckpt / name, seed=seed, epochs=s.epochs,
                       **common(name))
        experts.append((name, enc, xa, xt))
        spaces[name] = Space(name, enc)
    if s.get("stack_experts", True):
        train_pairs_stacked([e[1]["audio"] for e in experts], [e[1]["text"] for e in experts],
                            [e[2] for e in experts], [e[3] for e in experts], out_dir=ckpt / "E12", seed=seed,
                            epochs=s.epochs, **common("E1+E2"))
    if not with_vt:
        return spaces
    enc = {m: make_encoder(m, s.vt_width, s.vt_dim) for m in ("image", "text")}
    xi, xt = _data(world, rng, s.vt_pairs, ("image", "text"))
    train_pair(enc["image"], enc["text"], xi, xt, out_dir=ckpt / "VT", seed=seed, epochs=s.epochs, **common("VT"))
    spaces["VT"] = Space("VT", enc)
    return spaces
