"""E²GAN generator, the pix2pix ResNet generator and the conditional PatchGAN discriminator.

E²GAN:  x → Down(7×7 stem, 2 stride-2 convs) → RB → RB → DS(stride 2) → TB → US → RB → Up → tanh

TB is one pre-LayerNorm transformer block on the 1/8 map, with text tokens E(c) [R]:
    h ← h + SA(LN h);   h ← h + CA(LN h, E(c));   h ← h + FFN(LN h)

Crucial layers (the ones that get LoRA per concept): Down, DS, TB, US, Up. The ResNet blocks stay
frozen. Reflection padding is a separate module (not `padding_mode`), so a LoRA branch (peft's
conv A uses zero padding) sees the same padded input and merges exactly. Attention is written with explicit matmuls (not fused SDPA) so FlopCounterMode counts it,
and its projections are nn.Linear so peft's LoRA covers them.
"""
from __future__ import annotations

import torch
from torch import nn

CRUCIAL_GROUPS = ("down", "ds", "tb", "us", "up")


def _norm(c: int) -> nn.Module:
    return nn.InstanceNorm2d(c, affine=False)


class ResnetBlock(nn.Module):
    """pix2pix ResNet block: x + conv-IN-ReLU-conv-IN (reflection padding)."""

    def __init__(self, c: int):
        super().__init__()
        self.pad = nn.ReflectionPad2d(1)
        self.conv1 = nn.Conv2d(c, c, 3)
        self.conv2 = nn.Conv2d(c, c, 3)
        self.norm1, self.norm2 = _norm(c), _norm(c)

    def forward(self, x):
        h = torch.relu(self.norm1(self.conv1(self.pad(x))))
        return x + self.norm2(self.conv2(self.pad(h)))


class Down(nn.Module):
    """7×7 stem and two stride-2 convs: 3 → ngf → 2ngf → 4ngf channels at 1/4 resolution."""

    def __init__(self, ngf: int, in_ch: int = 3):
        super().__init__()
        self.pad = nn.ReflectionPad2d(3)
        self.stem = nn.Conv2d(in_ch, ngf, 7)
        self.down1 = nn.Conv2d(ngf, 2 * ngf, 3, stride=2, padding=1)
        self.down2 = nn.Conv2d(2 * ngf, 4 * ngf, 3, stride=2, padding=1)
        self.n0, self.n1, self.n2 = _norm(ngf), _norm(2 * ngf), _norm(4 * ngf)

    def forward(self, x):
        x = torch.relu(self.n0(self.stem(self.pad(x))))
        x = torch.relu(self.n1(self.down1(x)))
        return torch.relu(self.n2(self.down2(x)))


class Up(nn.Module):
    """Two stride-2 transposed convs and a 7×7 conv to RGB, tanh."""

    def __init__(self, ngf: int, out_ch: int = 3):
        super().__init__()
        self.up1 = nn.ConvTranspose2d(4 * ngf, 2 * ngf, 3, stride=2, padding=1, output_padding=1)
        self.up2 = nn.ConvTranspose2d(2 * ngf, ngf, 3, stride=2, padding=1, output_padding=1)
        self.pad = nn.ReflectionPad2d(3)
        self.head = nn.Conv2d(ngf, out_ch, 7)
        self.n1, self.n2 = _norm(2 * ngf), _norm(ngf)

    def forward(self, x):
        x = torch.relu(self.n1(self.up1(x)))
        x = torch.relu(self.n2(self.up2(x)))
        return torch.tanh(self.head(self.pad(x)))


class Attention(nn.Module):
    """Multi-head attention with explicit matmuls; q from `x`, k/v from `context`."""

    def __init__(self, dim: int, context_dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(context_dim, dim, bias=False)
        self.to_v = nn.Linear(context_dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x, context, mask=None):
        b, n, d = x.shape
        h = self.heads
        q = self.to_q(x).view(b, n, h, d // h).transpose(1, 2)
        k = self.to_k(context).view(b, -1, h, d // h).transpose(1, 2)
        v = self.to_v(context).view(b, -1, h, d // h).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) * (d // h) ** -0.5
        if mask is not None:  # mask: (b, m) True for real tokens
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        out = scores.softmax(-1) @ v
        return self.to_out(out.transpose(1, 2).reshape(b, n, d))


class TransformerBlock(nn.Module):
    """Pre-LN block: self-attention, cross-attention to text tokens, feed-forward [R]."""

    def __init__(self, dim: int, text_dim: int, heads: int, ffn_mult: int = 2):
        super().__init__()
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.self_attn = Attention(dim, dim, heads)
        self.cross_attn = Attention(dim, text_dim, heads)
        self.ff1 = nn.Linear(dim, ffn_mult * dim)
        self.ff2 = nn.Linear(ffn_mult * dim, dim)

    def forward(self, x, text, mask=None):
        b, c, hh, ww = x.shape
        t = x.flatten(2).transpose(1, 2)
        n = self.ln1(t)
        t = t + self.self_attn(n, n)
        t = t + self.cross_attn(self.ln2(t), text, mask)
        t = t + self.ff2(torch.nn.functional.gelu(self.ff1(self.ln3(t))))
        return t.transpose(1, 2).reshape(b, c, hh, ww)


class E2GANGenerator(nn.Module):
    """Down → RB → RB → DS → TB → US → RB → Up, text-conditioned through the TB."""

    def __init__(self, ngf: int = 16, text_dim: int = 64, heads: int = 4, ffn_mult: int = 2,
                 skip_over_tb: bool = True):
        super().__init__()
        c = 4 * ngf
        self.skip_over_tb = skip_over_tb
        self.down = Down(ngf)
        self.rb1, self.rb2 = ResnetBlock(c), ResnetBlock(c)
        self.ds = nn.Conv2d(c, c, 3, stride=2, padding=1)
        self.ds_norm = _norm(c)
        self.tb = TransformerBlock(c, text_dim, heads, ffn_mult)
        self.us = nn.ConvTranspose2d(c, c, 3, stride=2, padding=1, output_padding=1)
        self.us_norm = _norm(c)
        self.rb3 = ResnetBlock(c)
        self.up = Up(ngf)

    def forward(self, x, text, mask=None):
        h = self.rb2(self.rb1(self.down(x)))
        z = torch.relu(self.ds_norm(self.ds(h)))
        z = self.tb(z, text, mask)
        u = torch.relu(self.us_norm(self.us(z)))
        if self.skip_over_tb:  # [R] additive skip around the 1/8 bottleneck
            u = u + h
        return self.up(self.rb3(u))


class Pix2PixGenerator(nn.Module):
    """pix2pix ResnetGenerator: Down → 9 RBs → Up; not text-conditioned (one model per concept)."""

    def __init__(self, ngf: int = 16, n_blocks: int = 9):
        super().__init__()
        self.down = Down(ngf)
        self.blocks = nn.Sequential(*[ResnetBlock(4 * ngf) for _ in range(n_blocks)])
        self.up = Up(ngf)

    def forward(self, x, text=None, mask=None):
        return self.up(self.blocks(self.down(x)))


class PatchDiscriminator(nn.Module):
    """Conditional PatchGAN: D(x, y) on the stacked 6-channel input.

    Five 4×4 convs at `n_layers` = 3: `n_layers - 1` with stride 2, then one with stride 1, then the
    stride-1 conv to one logit. Each logit sees a 34 × 34 px patch of the input (`receptive_field()`;
    measured by gradient in tests/e2gan/test_e2gan_models.py), not the 70 × 70 of pix2pix's 3-layer
    PatchGAN, which has one more stride-2 conv (`n_layers` of them).
    """

    def __init__(self, ndf: int = 32, n_layers: int = 3, in_ch: int = 6):
        super().__init__()
        layers = [nn.Conv2d(in_ch, ndf, 4, stride=2, padding=1), nn.LeakyReLU(0.2)]
        ch = ndf
        for i in range(1, n_layers):
            nxt = ndf * min(2 ** i, 8)
            stride = 2 if i < n_layers - 1 else 1
            layers += [nn.Conv2d(ch, nxt, 4, stride=stride, padding=1), _norm(nxt), nn.LeakyReLU(0.2)]
            ch = nxt
        layers += [nn.Conv2d(ch, 1, 4, stride=1, padding=1)]
        self.net = nn.Sequential(*layers)

    def forward(self, x, y):
        return self.net(torch.cat([x, y], 1))

    def receptive_field(self) -> int:
        """Side (px) of the input patch one output logit sees, from the convs' kernels and strides."""
        rf, jump = 1, 1
        for m in self.net:
            if isinstance(m, nn.Conv2d):
                rf += (m.kernel_size[0] - 1) * jump
                jump *= m.stride[0]
        return rf


def n_params(module: nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)
