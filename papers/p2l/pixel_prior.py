"""The pixel-space diffusion prior of the DPS comparison: an unconditional diffusers `UNet2DModel` on
the tiny world's training images (the latent prior's), ε-prediction at uniform t with a `DDPMScheduler`
(DDPM's linear betas 1e-4–0.02 over 1000 steps), EMA weights, trained through Lightning with the
latent LDM's number of steps and batch size (`ldm.steps`, `ldm.batch_size`)."""
from __future__ import annotations

import copy
from pathlib import Path

import torch
import torch.nn.functional as F


def build_pixel_unet(channels: list[int], image_size: int, norm_groups: int = 4, layers_per_block: int = 1):
    """A small UNet2DModel on [B, 3, H, W] images in [-1, 1]: no attention (the world's images are 16 px)."""
    from diffusers import UNet2DModel

    n = len(channels)
    return UNet2DModel(sample_size=image_size, in_channels=3, out_channels=3, block_out_channels=tuple(channels),
                       layers_per_block=layers_per_block, down_block_types=("DownBlock2D",) * n,
                       up_block_types=("UpBlock2D",) * n, norm_num_groups=norm_groups)


def build_pixel_scheduler(num_train_timesteps: int = 1000):
    """DDPM's schedule (linear betas 1e-4–0.02); x̂₀ clipped to [-1, 1] in the ancestral step, as DPS does."""
    from diffusers import DDPMScheduler

    return DDPMScheduler(num_train_timesteps=num_train_timesteps, beta_start=1e-4, beta_end=0.02,
                         beta_schedule="linear", clip_sample=True, clip_sample_range=1.0,
                         variance_type="fixed_small", prediction_type="epsilon")


def n_parameters(*modules) -> int:
    return int(sum(p.numel() for m in modules for p in m.parameters()))


def _module_class():
    import lightning as L

    class PixelDDPMModule(L.LightningModule):
        """ε-prediction MSE at uniform t; the EMA copy is what sampling uses."""

        def __init__(self, unet, scheduler, lr: float, ema_decay: float):
            super().__init__()
            self.unet, self.scheduler, self.lr, self.ema_decay = unet, scheduler, lr, ema_decay
            self.ema_unet = copy.deepcopy(unet).requires_grad_(False)

        def training_step(self, batch, _):
            (x,) = batch
            t = torch.randint(0, self.scheduler.config.num_train_timesteps, (x.shape[0],), device=x.device)
            noise = torch.randn_like(x)
            loss = F.mse_loss(self.unet(self.scheduler.add_noise(x, noise, t), t).sample, noise)
            self.log("loss", loss, prog_bar=True)
            return loss

        def on_train_batch_end(self, *_):
            with torch.no_grad():
                for pe, p in zip(self.ema_unet.parameters(), self.unet.parameters()):
                    pe.lerp_(p, 1 - self.ema_decay)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.unet.parameters(), lr=self.lr, weight_decay=0.0, foreach=True)

    return PixelDDPMModule


def train_pixel_prior(pixel_cfg, ldm_cfg, images, out_dir: Path, seed: int, progress: bool = False):
    """The pixel prior at the latent LDM's steps, batch size, learning rate and EMA decay."""
    from shared.training import fit, make_trainer

    from .prior import _cache_config, _loader, _log_every, _steps_to_epochs

    unet = build_pixel_unet(list(pixel_cfg.unet_channels), images.shape[-1], int(pixel_cfg.norm_groups),
                            int(pixel_cfg.get("layers_per_block", 1)))
    module = _module_class()(unet, build_pixel_scheduler(), float(ldm_cfg.lr), float(ldm_cfg.ema_decay))
    steps, batch = int(ldm_cfg.steps), int(ldm_cfg.batch_size)
    trainer = make_trainer(out_dir, seed=seed, max_steps=steps, progress=progress,
                           cache_config={"pixel": dict(pixel_cfg), **_cache_config(ldm_cfg, images)},
                           log_every_n_steps=_log_every(steps),
                           max_epochs=_steps_to_epochs(steps, len(images), batch))
    fit(trainer, module, _loader([images], batch, seed))
    return module.ema_unet.eval().requires_grad_(False)


def save_pixel_prior(unet, path: str | Path) -> Path:
    unet.save_pretrained(str(path))
    return Path(path)


def load_pixel_prior(path: str | Path):
    from diffusers import UNet2DModel

    return UNet2DModel.from_pretrained(str(path), local_files_only=True).eval().requires_grad_(False)
