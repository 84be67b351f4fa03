"""The tiny prior's parts that need no training loop: the tokenizer, the assembly into a
`LatentDiffusion`, text-to-image sampling, and the attribute classifier (the gate's and the FD proxy's
reader). The solving jobs import these without Lightning (`papers.p2l.prior` trains them).
"""
from __future__ import annotations

import torch

from .data import ATTRIBUTES, CAPTION_LENGTH, WORDS
from .models import LatentDiffusion, build_scheduler, build_tokenizer


class AttributeClassifier(torch.nn.Module):
    """A small CNN with one head per attribute; `features` feeds the Fréchet distance (FD proxy)."""

    def __init__(self, width: int = 16, feature_dim: int = 32):
        super().__init__()
        w = width
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, w, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(w, 2 * w, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(2 * w, 2 * w, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(8 * w, feature_dim), torch.nn.ReLU())
        self.heads = torch.nn.ModuleList([torch.nn.Linear(feature_dim, len(v)) for v in ATTRIBUTES.values()])

    def features(self, x):
        return self.body(x)

    def forward(self, x):
        f = self.body(x)
        return [h(f) for h in self.heads]


def tiny_tokenizer():
    return build_tokenizer(WORDS, CAPTION_LENGTH)


def assemble(vae, unet, text_encoder, scale: float, device) -> LatentDiffusion:
    return LatentDiffusion(vae=vae, unet=unet, text_encoder=text_encoder, tokenizer=tiny_tokenizer(),
                           scheduler=build_scheduler(), scale=scale, device=device).freeze()


@torch.no_grad()
def sample_prior(ldm: LatentDiffusion, captions: list[str], steps: int, guidance: float, seed: int,
                 batch: int = 256, eta: float = 0.0) -> torch.Tensor:
    """Text-to-image with the prior: DDIM with classifier-free guidance
    ε = ε(z, C_∅) + w·(ε(z, C) − ε(z, C_∅)); the empty caption "" samples the unconditional prior.
    eta = 0: the deterministic DDIM sampler; eta = 1: the ancestral (DDPM) sampler, its noise drawn from
    the batch's generator."""
    xs = []
    for b in range(0, len(captions), batch):
        caps = list(captions[b:b + batch])
        C, C_null = ldm.embed(caps), ldm.null_prompt(len(caps))
        g = torch.Generator().manual_seed(seed + b)
        size = ldm.unet.config.sample_size
        z = torch.randn(len(caps), ldm.latent_channels, size, size, generator=g).to(ldm.device)
        ldm.scheduler.set_timesteps(steps)
        for t in ldm.scheduler.timesteps:
            e_null = ldm.eps(z, t, C_null)
            e = e_null if guidance == 0 or all(c == "" for c in caps) else e_null + guidance * (ldm.eps(z, t, C) - e_null)
            z = ldm.scheduler.step(e, t, z, eta=eta, generator=g).prev_sample   # eta = 0 draws no noise
        xs.append(ldm.decode(z).clamp(-1, 1).cpu())
    return torch.cat(xs)
