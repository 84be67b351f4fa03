"""Video MAE (VideoMAE/EVEREST) built from torch + einops: tubelet embedding, fixed sinusoidal
positions, a ViT encoder with explicit attention (as in the official code, so FLOPs and saved
activations are what the paper's code does), a narrow decoder and the normalised-pixel loss.

    encoder in   E[vis] + pos[vis]                       -> ViT -> LayerNorm -> Linear (no bias)
    decoder in   [x_vis + pos_d[vis] ; mask_token + pos_d[tgt]] -> blocks -> LayerNorm -> head
    loss         MSE(head(targets), normalise(patches[tgt]))   (visible/discarded tokens: no loss)

`normalise` is per token and per channel: mean and unbiased std (+1e-6) over the tubelet's pixels of
the un-normalised [0, 1] video. VideoMAE's decoder sees every token (tgt = all masked); EVEREST's
sees only the K kept tokens.
"""
from __future__ import annotations


import torch
from einops import rearrange
from torch import nn

from .selection import keep_top_mask, motion_scores, random_keep_mask


def sinusoid_table(n: int, dim: int) -> torch.Tensor:
    """The fixed 1-D sinusoidal table of VideoMAE (`get_sinusoid_encoding_table`), [1, n, dim]."""
    pos = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    j = torch.arange(dim, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, 2 * torch.div(j, 2, rounding_mode="floor") / dim)
    table = torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle))
    return table.float().unsqueeze(0)


class TubeletEmbed(nn.Module):
    """Conv3d with kernel = stride = (tubelet, patch, patch): [B, C, F, H, W] -> [B, T', L, D]."""

    def __init__(self, channels: int, dim: int, patch: int, tubelet: int):
        super().__init__()
        self.proj = nn.Conv3d(channels, dim, kernel_size=(tubelet, patch, patch), stride=(tubelet, patch, patch))

    def forward(self, video: torch.Tensor) -> torch.Tensor:
        return rearrange(self.proj(video), "b d t h w -> b t (h w) d")


class Attention(nn.Module):
    """Multi-head self-attention written out (q kᵀ, softmax, · v), with q/v bias and no k bias.
    `fused = True` runs torch's `scaled_dot_product_attention` instead (same result; it saves far
    less for backward, and FlopCounterMode does not count it on CPU)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.scale, self.fused = heads, (dim // heads) ** -0.5, False
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(dim))
        self.v_bias = nn.Parameter(torch.zeros(dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = torch.cat([self.q_bias, torch.zeros_like(self.v_bias), self.v_bias])
        qkv = nn.functional.linear(x, self.qkv.weight, bias)
        q, k, v = rearrange(qkv, "b n (three h d) -> three b h n d", three=3, h=self.heads)
        if self.fused:
            out = nn.functional.scaled_dot_product_attention(q, k, v, scale=self.scale)
        else:
            attn = (q * self.scale) @ k.transpose(-2, -1)
            out = attn.softmax(dim=-1) @ v
        return self.proj(rearrange(out, "b h n d -> b n (h d)"))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def _init(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def set_fused_attention(module: nn.Module, fused: bool) -> nn.Module:
    """Switch every attention layer of `module` between explicit and fused attention."""
    for m in module.modules():
        if isinstance(m, Attention):
            m.fused = fused
    return module


def gather(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Tokens [B, N, D] where mask [B, N] (same count per clip) -> [B, n, D], raster order kept."""
    return x[mask].reshape(x.shape[0], -1, x.shape[-1])


class VideoEncoder(nn.Module):
    """Tubelet embedding + fixed positions + ViT blocks, shared by pre-training and fine-tuning."""

    def __init__(self, channels: int, frames: int, size: int, patch: int, tubelet: int,
                 dim: int, depth: int, heads: int, mean=(0.5,), std=(0.5,)):
        super().__init__()
        self.slices, self.positions = frames // tubelet, (size // patch) ** 2
        self.patch, self.tubelet, self.channels, self.dim = patch, tubelet, channels, dim
        self.embed = TubeletEmbed(channels, dim, patch, tubelet)
        self.register_buffer("pos", sinusoid_table(self.slices * self.positions, dim), persistent=False)
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1, 1), persistent=False)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        _init(self.blocks)

    @property
    def num_tokens(self) -> int:
        return self.slices * self.positions

    def embed_video(self, video: torch.Tensor) -> torch.Tensor:
        """[B, C, F, H, W] in [0, 1] -> patch embeddings e [B, T', L, D] (before positions)."""
        return self.embed((video - self.mean) / self.std)

    def scores(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Motion scores [B, N] of patch embeddings [B, T', L, D] (detached)."""
        return motion_scores(embeddings).flatten(1)

    def encode(self, tokens: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """tokens [B, N, D] (embeddings, flattened) -> encoded kept tokens [B, n, D]."""
        x = tokens + self.pos.to(tokens.dtype)
        if mask is not None:
            x = gather(x, mask)
        for block in self.blocks:
            x = block(x)
        return x


def patchify(video: torch.Tensor, patch: int, tubelet: int) -> torch.Tensor:
    """[B, C, F, H, W] -> [B, N, tubelet·patch²·C] in the token order of `TubeletEmbed`."""
    return rearrange(video, "b c (t p0) (h p1) (w p2) -> b (t h w) (p0 p1 p2) c", p0=tubelet, p1=patch, p2=patch)


def normalised_targets(video: torch.Tensor, mask: torch.Tensor, patch: int, tubelet: int) -> torch.Tensor:
    """Per-token, per-channel normalised pixels of the target tokens only: [B, n_tgt, tubelet·patch²·C],
    (x - mean) / (std + 1e-6) over each token's pixels (unbiased std), as the official loss target.
    Computed by `kernels.motion_select.normalized_targets` (fused gather + normalisation on CUDA, its
    torch reference elsewhere) on the target tokens in index order, the order of `patches[mask]`."""
    from kernels.motion_select import normalized_targets

    target_idx = mask.nonzero()[:, 1].view(video.shape[0], -1)
    return normalized_targets(patchify(video, patch, tubelet), target_idx)


class MaskedVideoAutoencoder(nn.Module):
    """Pre-training model. `forward(video, visible, target)` returns the MSE on the target tokens.

    The decoder runs over visible ∪ target tokens: every token for VideoMAE (target = ~visible),
    only the K kept tokens for EVEREST."""

    def __init__(self, encoder: VideoEncoder, decoder_dim: int, decoder_depth: int, decoder_heads: int):
        super().__init__()
        self.encoder = encoder
        self.norm = nn.LayerNorm(encoder.dim, eps=1e-6)
        self.to_decoder = nn.Linear(encoder.dim, decoder_dim, bias=False)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, decoder_dim))
        self.register_buffer("pos_d", sinusoid_table(encoder.num_tokens, decoder_dim), persistent=False)
        self.decoder = nn.ModuleList(Block(decoder_dim, decoder_heads) for _ in range(decoder_depth))
        self.decoder_norm = nn.LayerNorm(decoder_dim, eps=1e-6)
        self.head = nn.Linear(decoder_dim, encoder.tubelet * encoder.patch ** 2 * encoder.channels)
        _init(self)
        nn.init.trunc_normal_(self.mask_token, std=0.02)

    def embed(self, video: torch.Tensor) -> torch.Tensor:
        return self.encoder.embed_video(video)

    def predict(self, embeddings: torch.Tensor, visible: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """embeddings [B, T', L, D] -> predicted normalised pixels of the target tokens [B, n_tgt, P]."""
        b = embeddings.shape[0]
        x = self.encoder.encode(embeddings.flatten(1, 2), visible)
        x = self.to_decoder(self.norm(x))
        pos = self.pos_d.expand(b, -1, -1).to(x.dtype)
        x = torch.cat([x + gather(pos, visible), self.mask_token + gather(pos, target)], dim=1)
        n_tgt = int(target[0].sum())
        for block in self.decoder:
            x = block(x)
        return self.head(self.decoder_norm(x[:, -n_tgt:]))

    def forward(self, video: torch.Tensor, visible: torch.Tensor, target: torch.Tensor,
                embeddings: torch.Tensor | None = None) -> torch.Tensor:
        e = self.embed(video) if embeddings is None else embeddings
        pred = self.predict(e, visible, target)
        goal = normalised_targets(video, target, self.encoder.patch, self.encoder.tubelet)
        return nn.functional.mse_loss(pred, goal)


class VideoClassifier(nn.Module):
    """Fine-tuning model: (pruned) tokens -> encoder -> mean pool -> fc_norm -> head.

    prune: "none" (VideoMAE: every token), "top" (EVEREST: the top ⌊keep_ratio·N⌋ by motion score,
    at train and test time), "bottom" (ascending control), "random" (random-pruning control)."""

    PRUNE = ("none", "top", "bottom", "random")

    def __init__(self, encoder: VideoEncoder, num_classes: int, prune: str = "none", keep_ratio: float = 0.6):
        super().__init__()
        if prune not in self.PRUNE:
            raise ValueError(f"prune={prune!r}; choose one of {self.PRUNE}")
        self.encoder, self.prune, self.keep_ratio = encoder, prune, keep_ratio
        self.fc_norm = nn.LayerNorm(encoder.dim, eps=1e-6)
        self.head = nn.Linear(encoder.dim, num_classes)
        nn.init.trunc_normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    def keep_mask(self, embeddings: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor | None:
        if self.prune == "none":
            return None
        if self.prune == "random":
            b, t, l, _ = embeddings.shape
            return random_keep_mask(b, t * l, self.keep_ratio, generator).to(embeddings.device)
        return keep_top_mask(motion_scores(embeddings), self.keep_ratio, descending=self.prune == "top")

    def forward(self, video: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        e = self.encoder.embed_video(video)
        x = self.encoder.encode(e.flatten(1, 2), self.keep_mask(e, generator))
        return self.head(self.fc_norm(x.mean(dim=1)))


def build_encoder(cfg) -> VideoEncoder:
    """The encoder described by config sections `data` and `model`."""
    d, m = cfg.data, cfg.model
    return VideoEncoder(d.channels, d.frames, d.size, m.patch, m.tubelet, m.dim, m.depth, m.heads,
                        mean=tuple(d.mean), std=tuple(d.std))


def build_autoencoder(cfg) -> MaskedVideoAutoencoder:
    m = cfg.model
    return MaskedVideoAutoencoder(build_encoder(cfg), m.decoder_dim, m.decoder_depth, m.decoder_heads)


def num_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


__all__ = ["set_fused_attention", "VideoEncoder", "MaskedVideoAutoencoder", "VideoClassifier", "patchify", "normalised_targets",
           "sinusoid_table", "build_encoder", "build_autoencoder"]


@torch.no_grad()
def reconstruct(model: MaskedVideoAutoencoder, video: torch.Tensor, visible: torch.Tensor,
                target: torch.Tensor) -> torch.Tensor:
    """Video [B, C, F, H, W] with target tokens replaced by the (de-normalised) prediction, visible
    tokens from the input and discarded tokens black."""
    enc = model.encoder
    b, c, f, h, w = video.shape
    pred = model.predict(model.embed(video), visible, target)
    patches = patchify(video, enc.patch, enc.tubelet)                      # [B, N, p, C]
    tgt = patches[target].reshape(b, -1, *patches.shape[2:])
    mean, std = tgt.mean(-2, keepdim=True), tgt.var(-2, unbiased=True, keepdim=True).sqrt()
    pred = rearrange(pred, "b n (p c) -> b n p c", c=c) * (std + 1e-6) + mean
    out = torch.zeros_like(patches)
    out[visible] = patches[visible]
    out[target] = pred.reshape(-1, *patches.shape[2:]).clamp(0, 1)
    return rearrange(out, "b (t h w) (p0 p1 p2) c -> b c (t p0) (h p1) (w p2)", t=f // enc.tubelet,
                     h=h // enc.patch, w=w // enc.patch, p0=enc.tubelet, p1=enc.patch, p2=enc.patch)
