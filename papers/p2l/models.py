"""The latent diffusion prior: a text encoder, a VAE, a conditional UNet and a DDIM scheduler.

`LatentDiffusion` bundles the frozen components the solvers use:

    C = TextEnc(tokenize(caption))             (the prompt, the text encoder's output sequence)
    z = s·E(x),  x = D(z/s)                    (s = the VAE's scaling factor)
    ε_θ(z_t, t, C)                             (the UNet)

At the tiny profile every component is built from a small config with random init (no weights
exist offline) and trained by `papers.p2l.prior`; at the full profile Stable Diffusion v1.5 is
loaded from a local folder with `load_stable_diffusion`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EMPTY = "[EMPTY]"


def build_tokenizer(words: list[str], max_length: int):
    """A word-level tokenizer; the empty caption pads to `max_length` × [EMPTY] (the null prompt)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    vocab = {EMPTY: 0, "[UNK]": 1}
    for w in words:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token=EMPTY,
                                   model_max_length=max_length)
    return fast


def build_text_encoder(vocab_size: int, dim: int, layers: int, max_length: int):
    from transformers import CLIPTextConfig, CLIPTextModel

    cfg = CLIPTextConfig(vocab_size=vocab_size, hidden_size=dim, intermediate_size=2 * dim,
                         num_hidden_layers=layers, num_attention_heads=4, max_position_embeddings=max_length,
                         pad_token_id=0, bos_token_id=0, eos_token_id=1, projection_dim=dim)
    return CLIPTextModel(cfg)


def build_vae(channels: list[int], latent_channels: int, image_size: int, mid_attention: bool = True):
    """SD's AutoencoderKL, small. mid_attention: the self-attention of the encoder's and decoder's middle
    blocks (SD has it; at 4×4 latents it costs a third of a decoder call and the tiny world does not need it)."""
    from diffusers import AutoencoderKL

    n = len(channels)
    return AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * n,
                         up_block_types=("UpDecoderBlock2D",) * n, block_out_channels=tuple(channels),
                         layers_per_block=1, latent_channels=latent_channels, norm_num_groups=min(32, channels[0]),
                         sample_size=image_size, mid_block_add_attention=mid_attention)


def build_unet(channels: list[int], latent_channels: int, latent_size: int, cross_attention_dim: int,
               head_dim: int = 8, text_time_embedding: bool = False):
    """SD's UNet, small. text_time_embedding: also add an attention-pooled C to the time embedding
    (diffusers' `addition_embed_type="text"`), a global path for global attributes besides cross-attention;
    C still enters only as the text encoder's output sequence, so prompt tuning acts on both paths."""
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        addition_embed_type="text" if text_time_embedding else None,
        sample_size=latent_size, in_channels=latent_channels, out_channels=latent_channels,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        block_out_channels=tuple(channels), layers_per_block=1, cross_attention_dim=cross_attention_dim,
        attention_head_dim=head_dim, norm_num_groups=min(32, channels[0]))


def build_scheduler(num_train_timesteps: int = 1000):
    """SD's scheduler: scaled_linear betas 0.00085–0.012, ε-prediction, steps_offset 1."""
    from diffusers import DDIMScheduler

    return DDIMScheduler(num_train_timesteps=num_train_timesteps, beta_start=0.00085, beta_end=0.012,
                         beta_schedule="scaled_linear", clip_sample=False, set_alpha_to_one=False,
                         steps_offset=1, prediction_type="epsilon")


@dataclass
class LatentDiffusion:
    """Frozen LDM components plus the handful of maps the solvers need."""

    vae: torch.nn.Module
    unet: torch.nn.Module
    text_encoder: torch.nn.Module
    tokenizer: object
    scheduler: object
    scale: float
    device: torch.device = torch.device("cpu")
    dtype: torch.dtype = torch.float32
    source: str = ""                      # the folder it was loaded from ("" when built in memory)

    def freeze(self) -> "LatentDiffusion":
        for m in (self.vae, self.unet, self.text_encoder):
            m.requires_grad_(False).eval().to(self.device, self.dtype)
        return self

    @property
    def latent_channels(self) -> int:
        return self.unet.config.in_channels

    def tokenize(self, captions: list[str]) -> torch.Tensor:
        tok = self.tokenizer
        return tok(list(captions), padding="max_length", max_length=tok.model_max_length, truncation=True,
                   return_tensors="pt").input_ids.to(self.device)

    @torch.no_grad()
    def embed(self, captions: list[str]) -> torch.Tensor:
        """C = TextEnc(tokenize(caption)): [B, L, d]. The empty caption gives the null prompt C_∅."""
        return self.text_encoder(self.tokenize(captions))[0].float()

    def null_prompt(self, batch: int) -> torch.Tensor:
        return self.embed([""] * batch)

    def eps(self, z: torch.Tensor, t: int | torch.Tensor, C: torch.Tensor) -> torch.Tensor:
        return self.unet(z.to(self.dtype), t, encoder_hidden_states=C.to(self.dtype)).sample.float()

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """x = D(z/s)."""
        return self.vae.decode(z.to(self.dtype) / self.scale).sample.float()

    def encode(self, x: torch.Tensor, sample: bool = False, generator: torch.Generator | None = None) -> torch.Tensor:
        """z = s·E(x): the posterior mean, or a draw from the posterior (PSLD's encoder samples)."""
        dist = self.vae.encode(x.to(self.dtype)).latent_dist
        z = dist.sample(generator) if sample else dist.mean
        return z.float() * self.scale


def load_stable_diffusion(path: str | Path, device: str | torch.device = "cpu",
                          dtype: torch.dtype = torch.float32) -> LatentDiffusion:
    """The full profile's prior: a Stable Diffusion pipeline from a local folder (nothing downloaded)."""
    from diffusers import DDIMScheduler, StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(str(path), dtype=dtype, safety_checker=None,
                                                   requires_safety_checker=False, local_files_only=True)
    scheduler = DDIMScheduler.from_config(pipe.scheduler.config)
    ldm = LatentDiffusion(vae=pipe.vae, unet=pipe.unet, text_encoder=pipe.text_encoder, tokenizer=pipe.tokenizer,
                          scheduler=scheduler, scale=float(pipe.vae.config.scaling_factor),
                          device=torch.device(device), dtype=dtype, source=str(path))
    return ldm.freeze()


def save_pipeline(ldm: LatentDiffusion, path: str | Path) -> Path:
    """Save the components as a StableDiffusionPipeline folder (what `load_stable_diffusion` reads)."""
    from diffusers import StableDiffusionPipeline

    ldm.vae.register_to_config(scaling_factor=float(ldm.scale))
    pipe = StableDiffusionPipeline(vae=ldm.vae, text_encoder=ldm.text_encoder, tokenizer=ldm.tokenizer,
                                   unet=ldm.unet, scheduler=ldm.scheduler, safety_checker=None,
                                   feature_extractor=None, requires_safety_checker=False)
    pipe.save_pretrained(str(path))
    return Path(path)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)
