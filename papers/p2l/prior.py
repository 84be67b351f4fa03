"""Training the tiny prior with Lightning: the VAE, then the text encoder + UNet on pre-encoded
latents (caption dropout gives a true null prompt), and the attribute classifier (the FD proxy).

VAE: MSE + β·KL. LDM: ε-prediction MSE at uniform t with SD's scaled_linear betas, EMA weights.
"""
from __future__ import annotations

import copy
from pathlib import Path

import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from shared.training import EpochSeededSampler, fit, make_trainer

from .components import AttributeClassifier
from .data import CAPTION_LENGTH
from .models import build_scheduler, build_text_encoder, build_unet, build_vae


class VAEModule(L.LightningModule):
    def __init__(self, vae, lr: float, kl_weight: float):
        super().__init__()
        self.vae, self.lr, self.kl_weight = vae, lr, kl_weight

    def training_step(self, batch, _):
        (x,) = batch
        dist = self.vae.encode(x).latent_dist
        rec = self.vae.decode(dist.sample()).sample
        loss = F.mse_loss(rec, x) + self.kl_weight * dist.kl().mean()
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.vae.parameters(), lr=self.lr, foreach=True)


class LDMModule(L.LightningModule):
    """Text encoder + UNet, trained jointly on ε-prediction; EMA copies are what sampling uses."""

    def __init__(self, unet, text_encoder, scheduler, lr: float, ema_decay: float, caption_dropout: float):
        super().__init__()
        self.unet, self.text_encoder, self.scheduler = unet, text_encoder, scheduler
        self.lr, self.ema_decay, self.caption_dropout = lr, ema_decay, caption_dropout
        self.ema_unet = copy.deepcopy(unet).requires_grad_(False)
        self.ema_text = copy.deepcopy(text_encoder).requires_grad_(False)

    def training_step(self, batch, _):
        z, ids = batch
        drop = torch.rand(ids.shape[0], device=ids.device) < self.caption_dropout
        ids = torch.where(drop[:, None], torch.zeros_like(ids), ids)   # id 0 = [EMPTY]: the null caption
        t = torch.randint(0, self.scheduler.config.num_train_timesteps, (z.shape[0],), device=z.device)
        noise = torch.randn_like(z)
        z_t = self.scheduler.add_noise(z, noise, t)
        C = self.text_encoder(ids)[0]
        loss = F.mse_loss(self.unet(z_t, t, encoder_hidden_states=C).sample, noise)
        self.log("loss", loss, prog_bar=True)
        return loss

    def on_train_batch_end(self, *_):
        with torch.no_grad():
            for ema, live in ((self.ema_unet, self.unet), (self.ema_text, self.text_encoder)):
                for pe, p in zip(ema.parameters(), live.parameters()):
                    pe.lerp_(p, 1 - self.ema_decay)

    def configure_optimizers(self):
        params = list(self.unet.parameters()) + list(self.text_encoder.parameters())
        return torch.optim.AdamW(params, lr=self.lr, weight_decay=0.0, foreach=True)


class ClassifierModule(L.LightningModule):
    def __init__(self, net, lr: float):
        super().__init__()
        self.net, self.lr = net, lr

    def training_step(self, batch, _):
        x, labels = batch
        x = x + 0.1 * torch.randn_like(x)     # robustness to reconstruction noise
        loss = sum(F.cross_entropy(o, labels[:, i]) for i, o in enumerate(self.net(x)))
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.net.parameters(), lr=self.lr, foreach=True)


def _loader(tensors, batch_size, seed):
    ds = TensorDataset(*tensors)
    return DataLoader(ds, batch_size=batch_size, sampler=EpochSeededSampler(len(ds), seed), drop_last=True)


def _steps_to_epochs(steps: int, n: int, batch: int) -> int:
    return max(1, -(-steps // max(1, n // batch)))


def _cache_config(cfg, images) -> dict:
    """What decides the trained weights: the section's config and the training set's size and shape."""
    return {"section": dict(cfg), "data": list(images.shape)}


def _log_every(steps: int) -> int:
    """Lightning's CSV log interval: every 10 steps, or often enough that a short (smoke) run logs too."""
    return max(1, min(10, int(steps) // 2))


def train_vae(cfg, images, out_dir: Path, seed: int, progress: bool = False):
    vae = build_vae(list(cfg.channels), cfg.latent_channels, images.shape[-1],
                    mid_attention=bool(cfg.get("mid_attention", True)))
    module = VAEModule(vae, cfg.lr, cfg.kl_weight)
    trainer = make_trainer(out_dir, seed=seed, max_steps=cfg.steps, progress=progress,
                           cache_config=_cache_config(cfg, images),
                           log_every_n_steps=_log_every(cfg.steps),
                           max_epochs=_steps_to_epochs(cfg.steps, len(images), cfg.batch_size))
    fit(trainer, module, _loader([images], cfg.batch_size, seed))
    return vae.eval().requires_grad_(False)


@torch.no_grad()
def encode_all(vae, images, batch: int = 256):
    return torch.cat([vae.encode(images[i:i + batch]).latent_dist.mean for i in range(0, len(images), batch)])


def train_ldm(cfg, latents, ids, tokenizer, out_dir: Path, seed: int, progress: bool = False):
    text_encoder = build_text_encoder(len(tokenizer), cfg.text_dim, cfg.text_layers, CAPTION_LENGTH)
    unet = build_unet(list(cfg.unet_channels), latents.shape[1], latents.shape[-1], cfg.text_dim,
                      text_time_embedding=bool(cfg.get("text_time_embedding", False)))
    module = LDMModule(unet, text_encoder, build_scheduler(), cfg.lr, cfg.ema_decay, cfg.caption_dropout)
    trainer = make_trainer(out_dir, seed=seed, max_steps=cfg.steps, progress=progress,
                           cache_config={**_cache_config(cfg, latents), "latents_sum": float(latents.sum())},
                           log_every_n_steps=_log_every(cfg.steps),
                           max_epochs=_steps_to_epochs(cfg.steps, len(latents), cfg.batch_size))
    fit(trainer, module, _loader([latents, ids], cfg.batch_size, seed))
    return module.ema_unet.eval(), module.ema_text.eval()


def train_classifier(cfg, images, labels, out_dir: Path, seed: int, progress: bool = False):
    net = AttributeClassifier(cfg.width, cfg.feature_dim)
    trainer = make_trainer(out_dir, seed=seed, max_steps=cfg.steps, progress=progress,
                           cache_config=_cache_config(cfg, images),
                           log_every_n_steps=_log_every(cfg.steps),
                           max_epochs=_steps_to_epochs(cfg.steps, len(images), cfg.batch_size))
    fit(trainer, ClassifierModule(net, cfg.lr), _loader([images, labels], cfg.batch_size, seed))
    return net.eval().requires_grad_(False)
