"""MMP-Trans, MMP-OT and the baselines (ABMIL, pathway-only, full-token Transformer, linear Cox and a
small MLP on the tokens).

Every model maps a batch {"hist": [B, C, 2d+1] PANTHER tokens, "genes": [B, G] z-scored genes,
"bags": [N_i, d] patch features, a list or a lazily read `bags.SlideBags`} to `n_out` outputs per
patient (1: Cox log-risk η; n_bins: NLL hazard logits).

MMP-Trans. Pathway tokens from one SNN per pathway, histology tokens Linear(2d+1 → D);
each of the T = P + C tokens gets a learnable code (N(0,1)) appended, d_model = D + D_code. One layer:
    LN → Q, K, V = Linear(d_model → 3·A, no bias), scale A^-½
    A_P = softmax([Q_P K_Pᵀ, Q_P K_Hᵀ]),  A_H = softmax([softmax(Q_H K_Pᵀ), Q_H K_Hᵀ])   (double softmax [code])
    out = A V (no residual [code]) → per-token FFN (LN → Linear → GELU → Dropout → Linear) → LN
    η = Linear([mean_P out ‖ mean_H out], no bias)
MMP-OT replaces the cross-modal blocks by an unbalanced entropic OT plan between the two token sets
(reg_type='entropy', K = e^{-M/reg}): Z_P' = Pᵀ Z_H, Z_H' = P Z_P, then self-attention within
each group only. The plans of a whole batch are solved at once by `kernels.sinkhorn_unbalanced`
(POT's iteration and per-problem stopping rule, gradients by unrolled autograd as POT's torch
backend gives them); `ot_solver="pot"` runs POT one patient at a time, as the official code does.
The official unimodal arms (`modality="histo"` / `"gene"`) keep only self-attention within each
group and put the head on that group's mean.
"""
from __future__ import annotations

import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F


class PathwayTokens(nn.Module):
    """One SNN per pathway over that pathway's genes: [B, G] → [B, P, hidden].

    The P networks run as one batched computation: each pathway's genes are gathered into a
    zero-padded [B, P, n_max] block, so pathway c's first layer only sees its own n_c genes
    (padded inputs are 0); the weights are initialised with each pathway's own fan-in.
    """

    def __init__(self, pathways: list, hidden: int, dropout: float):
        super().__init__()
        sizes = [len(g) for g in pathways]
        n_max, n_genes = max(sizes), max(int(max(g)) for g in pathways) + 1
        index = torch.full((len(pathways), n_max), n_genes, dtype=torch.long)   # n_genes: the zero column
        for c, genes in enumerate(pathways):
            index[c, :len(genes)] = torch.as_tensor(genes, dtype=torch.long)
        self.register_buffer("index", index, persistent=False)
        self.register_buffer("valid", (index < n_genes).float(), persistent=False)
        fan_in = torch.tensor(sizes, dtype=torch.float32)[:, None, None]
        self.w1 = nn.Parameter(torch.randn(len(pathways), n_max, hidden) / fan_in.sqrt() * self.valid[..., None])
        self.b1 = nn.Parameter(torch.zeros(len(pathways), hidden))
        self.w2 = nn.Parameter(torch.randn(len(pathways), hidden, hidden) / math.sqrt(hidden))
        self.b2 = nn.Parameter(torch.zeros(len(pathways), hidden))
        self.drop = nn.AlphaDropout(dropout)
        self.n = len(pathways)

    def forward(self, genes: torch.Tensor) -> torch.Tensor:
        padded = torch.cat([genes, torch.zeros_like(genes[:, :1])], dim=1)[:, self.index]   # [B, P, n_max]
        h = self.drop(F.elu(torch.einsum("bpn,pnh->bph", padded, self.w1) + self.b1))
        return self.drop(F.elu(torch.einsum("bph,phk->bpk", h, self.w2) + self.b2))


class PerTokenFFN(nn.Module):
    """A separate LN → Linear → GELU → Dropout → Linear for every token position."""

    def __init__(self, n_tokens: int, dim: int, dropout: float):
        super().__init__()
        self.ln_w = nn.Parameter(torch.ones(n_tokens, dim))
        self.ln_b = nn.Parameter(torch.zeros(n_tokens, dim))
        bound = 1.0 / math.sqrt(dim)
        self.w1 = nn.Parameter(torch.empty(n_tokens, dim, dim).uniform_(-bound, bound))
        self.b1 = nn.Parameter(torch.empty(n_tokens, dim).uniform_(-bound, bound))
        self.w2 = nn.Parameter(torch.empty(n_tokens, dim, dim).uniform_(-bound, bound))
        self.b2 = nn.Parameter(torch.empty(n_tokens, dim).uniform_(-bound, bound))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # [B, T, dim]
        x = F.layer_norm(x, x.shape[-1:]) * self.ln_w + self.ln_b
        x = self.drop(F.gelu(torch.einsum("btd,tde->bte", x, self.w1) + self.b1))
        return torch.einsum("btd,tde->bte", x, self.w2) + self.b2


def ot_cost(z_h: torch.Tensor, z_p: torch.Tensor) -> torch.Tensor:
    """[.., C, P] cost (float64): each token shifted by its own minimum, squared Euclidean
    distance, divided by each patient's maximum."""
    zh = z_h.double() - z_h.double().min(-1, keepdim=True).values
    zp = z_p.double() - z_p.double().min(-1, keepdim=True).values
    cost = torch.cdist(zh, zp) ** 2
    return cost / cost.amax((-2, -1), keepdim=True)


def batched_ot_plans(z_h: torch.Tensor, z_p: torch.Tensor, reg: float, reg_m: float, num_iter_max: int,
                     stop_thr: float) -> torch.Tensor:
    """Plans [B, C, P] of a batch of patients in one batched unbalanced Sinkhorn (float64,
    uniform marginals): `kernels.sinkhorn_unbalanced`. In training, its torch reference, differentiable
    by unrolled autograd; without gradients (prediction, evaluation) on a machine with CUDA, the
    problems go to the GPU and its Triton forward solves them (the models themselves stay on the CPU)."""
    from kernels.sinkhorn_unbalanced import sinkhorn_unbalanced

    cost = ot_cost(z_h, z_p)
    if torch.cuda.is_available() and not (torch.is_grad_enabled() and cost.requires_grad):
        cost = cost.cuda()
    b, c, p = cost.shape
    a = torch.full((b, c), 1.0 / c, dtype=torch.float64, device=cost.device)
    w = torch.full((b, p), 1.0 / p, dtype=torch.float64, device=cost.device)
    return sinkhorn_unbalanced(a, w, cost, reg, reg_m, num_iter_max, stop_thr).to(z_h.device, z_h.dtype)


def unbalanced_ot_plan(z_h: torch.Tensor, z_p: torch.Tensor, reg: float, reg_m: float,
                       num_iter_max: int, stop_thr: float) -> torch.Tensor:
    """Transport plan [C, P] between histology and pathway tokens of one patient (float64,
    differentiable through POT's unrolled Sinkhorn iterations, torch backend).

    Cost: each token shifted by its own minimum, squared Euclidean distance, divided by its max.
    """
    import ot

    cost = ot_cost(z_h, z_p)
    a = torch.full((cost.shape[0],), 1.0 / cost.shape[0], dtype=torch.float64, device=cost.device)
    b = torch.full((cost.shape[1],), 1.0 / cost.shape[1], dtype=torch.float64, device=cost.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # POT warns that reg_type='entropy' overwrites c
        plan = ot.unbalanced.sinkhorn_unbalanced(a, b, cost, reg, reg_m, method="sinkhorn", reg_type="entropy",
                                                 numItermax=num_iter_max, stopThr=stop_thr)
    return plan.to(z_h.dtype)


class MMP(nn.Module):
    """MMP-Trans (fusion='trans') or MMP-OT (fusion='ot') over PANTHER and pathway tokens;
    modality 'histo' or 'gene' gives the official unimodal arms (self-attention within each group,
    the head on one group's mean)."""

    def __init__(self, hist_dim: int, n_prototypes: int, pathways: list, *, dim: int, code_dim: int,
                 snn_dropout: float, dropout: float, n_out: int, fusion: str = "trans", modality: str = "both",
                 double_softmax: bool = True, value_residual: bool = False, ot_reg: float = 0.1, ot_reg_m: float = 0.5,
                 ot_iter: int = 1000, ot_stop: float = 1e-6, ot_solver: str = "batched"):
        super().__init__()
        if fusion not in ("trans", "ot"):
            raise ValueError(f"fusion must be 'trans' or 'ot', got {fusion!r}")
        if modality not in ("both", "histo", "gene"):
            raise ValueError(f"modality must be 'both', 'histo' or 'gene', got {modality!r}")
        if ot_solver not in ("batched", "pot"):
            raise ValueError(f"ot_solver must be 'batched' (kernels.sinkhorn_unbalanced) or 'pot', got {ot_solver!r}")
        self.fusion, self.modality = fusion, modality
        self.double_softmax, self.value_residual = double_softmax, value_residual
        self.ot = dict(reg=ot_reg, reg_m=ot_reg_m, num_iter_max=ot_iter, stop_thr=ot_stop)
        self.ot_solver = ot_solver
        self.n_p, self.n_h = len(pathways), n_prototypes
        self.pathway_tokens = PathwayTokens(pathways, dim, snn_dropout)
        self.hist_proj = nn.Linear(hist_dim, dim)
        self.codes = nn.Parameter(torch.randn(self.n_p + self.n_h, code_dim))
        d_model = dim + code_dim
        self.attn_dim = d_model // 2
        self.norm = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * self.attn_dim, bias=False)
        self.ffn = PerTokenFFN(self.n_p + self.n_h, self.attn_dim, dropout)
        self.out_norm = nn.LayerNorm(self.attn_dim)
        self.head = nn.Linear((2 if modality == "both" else 1) * self.attn_dim, n_out, bias=False)

    def tokens(self, batch) -> torch.Tensor:
        """[B, P + C, d_model]: pathway tokens first, then histology tokens, each with its code."""
        z = torch.cat([self.pathway_tokens(batch["genes"]), self.hist_proj(batch["hist"])], dim=1)
        return torch.cat([z, self.codes.expand(z.shape[0], -1, -1)], dim=-1)

    def attention(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """MMP-Trans attention map [B, T, T] and output A V."""
        q, k, v = self.qkv(self.norm(z)).chunk(3, dim=-1)
        s = q @ k.transpose(1, 2) / math.sqrt(self.attn_dim)
        p = self.n_p
        if self.modality != "both":      # unimodal arms: self-attention within each group only
            block = torch.zeros_like(s, dtype=torch.bool)
            block[:, :p, :p] = block[:, p:, p:] = True
            attn = torch.softmax(s.masked_fill(~block, -torch.inf), dim=-1)
            return attn, attn @ v + v if self.value_residual else attn @ v
        a_p = torch.softmax(s[:, :p], dim=-1)
        cross = torch.softmax(s[:, p:, :p], dim=-1) if self.double_softmax else s[:, p:, :p]
        a_h = torch.softmax(torch.cat([cross, s[:, p:, p:]], dim=-1), dim=-1)
        attn = torch.cat([a_p, a_h], dim=1)
        return attn, attn @ v + v if self.value_residual else attn @ v

    def transport(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """MMP-OT: plans [B, C, P], then self-attention within each group on the transported tokens."""
        p = self.n_p
        if self.ot_solver == "batched":
            plans = batched_ot_plans(z[:, p:], z[:, :p], **self.ot)
        else:
            plans = torch.stack([unbalanced_ot_plan(zi[p:], zi[:p], **self.ot) for zi in z])
        z_p = plans.transpose(1, 2) @ z[:, p:]     # histology content on pathway slots
        z_h = plans @ z[:, :p]                     # pathway content on histology slots
        out = []
        for group in (z_p, z_h):
            q, k, v = self.qkv(self.norm(group)).chunk(3, dim=-1)
            h = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(self.attn_dim), dim=-1) @ v
            out.append(h + v if self.value_residual else h)
        return plans, torch.cat(out, dim=1)

    def forward(self, batch, return_map: bool = False):
        z = self.tokens(batch)
        fmap, h = self.attention(z) if self.fusion == "trans" else self.transport(z)
        h = self.out_norm(self.ffn(h))
        pooled = {"gene": h[:, :self.n_p].mean(1), "histo": h[:, self.n_p:].mean(1)}
        out = self.head(torch.cat([pooled["gene"], pooled["histo"]], dim=-1) if self.modality == "both"
                        else pooled[self.modality])
        return (out, fmap) if return_map else out


class PathwayOnly(nn.Module):
    """The SNN pathway tokens, mean-pooled, then a linear head."""

    def __init__(self, pathways: list, *, dim: int, snn_dropout: float, n_out: int):
        super().__init__()
        self.pathway_tokens = PathwayTokens(pathways, dim, snn_dropout)
        self.head = nn.Linear(dim, n_out, bias=False)

    def forward(self, batch):
        return self.head(self.pathway_tokens(batch["genes"]).mean(1))


class TokenMLP(nn.Module):
    """A referee's simple model on MMP's own inputs: the PANTHER histology tokens flattened beside the
    z-scored genes, standardised per feature (BatchNorm without affine: batch statistics in training,
    running ones at test), then a linear Cox model (`hidden=0`) or one hidden ReLU layer."""

    def __init__(self, in_dim: int, *, hidden: int, dropout: float, n_out: int):
        super().__init__()
        self.norm = nn.BatchNorm1d(in_dim, affine=False)
        self.net = (nn.Linear(in_dim, n_out, bias=False) if hidden == 0 else
                    nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, n_out)))

    def forward(self, batch):
        x = torch.cat([batch["hist"].flatten(1), batch["genes"]], dim=1)
        return self.net(self.norm(x))


class ABMIL(nn.Module):
    """Gated-attention MIL (Ilse et al. 2018) over every patch of a bag."""

    def __init__(self, in_dim: int, *, dim: int, dropout: float, n_out: int):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(in_dim, dim), nn.ReLU(), nn.Dropout(dropout))
        self.att_v = nn.Linear(dim, dim)
        self.att_u = nn.Linear(dim, dim)
        self.att_w = nn.Linear(dim, 1)
        self.head = nn.Linear(dim, n_out)

    def forward(self, batch, return_map: bool = False):
        dev = self.head.weight.device   # every tensor on the model's device (bags are read on the host)
        bags = [torch.as_tensor(b).to(dev) for b in batch["bags"]]   # a lazy `bags.SlideBags` view is read here, once
        seg = torch.cat([torch.full((len(b),), i, dtype=torch.long, device=dev) for i, b in enumerate(bags)])
        h = self.embed(torch.cat(bags))
        logit = self.att_w(torch.tanh(self.att_v(h)) * torch.sigmoid(self.att_u(h))).squeeze(-1)
        peak = torch.full((len(bags),), -torch.inf, dtype=h.dtype, device=dev).scatter_reduce(0, seg, logit, "amax")
        w = torch.exp(logit - peak[seg])
        w = w / torch.zeros(len(bags), dtype=h.dtype, device=dev).index_add(0, seg, w)[seg]
        pooled = torch.zeros(len(bags), h.shape[1], dtype=h.dtype, device=dev).index_add(0, seg, w[:, None] * h)
        out = self.head(pooled)
        return (out, w) if return_map else out


class FullTokenTransformer(nn.Module):
    """One pre-LN Transformer layer over every patch token plus the pathway tokens (the cost
    reference): self-attention is O((N + P)²) in time, and in memory with the explicit N×N maps
    (default). `fused_attention` computes the same attention with torch's fused
    `scaled_dot_product_attention` (a flash kernel on the CPU and on CUDA), which never holds the map:
    its memory is linear in N."""

    def __init__(self, in_dim: int, pathways: list, *, dim: int, snn_dropout: float, dropout: float, n_out: int,
                 fused_attention: bool = False):
        super().__init__()
        self.fused_attention = fused_attention
        self.pathway_tokens = PathwayTokens(pathways, dim, snn_dropout)
        self.patch_proj = nn.Linear(in_dim, dim)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, n_out)
        self.dim = dim

    def forward(self, batch):
        dev = self.head.weight.device   # every tensor on the model's device (bags are read on the host)
        bags = [torch.as_tensor(b).to(dev) for b in batch["bags"]]   # a lazy `bags.SlideBags` view is read here, once
        n_max = max(len(b) for b in bags)
        patches = torch.zeros(len(bags), n_max, bags[0].shape[1], dtype=bags[0].dtype, device=dev)
        valid = torch.zeros(len(bags), n_max, dtype=torch.bool, device=dev)
        for i, b in enumerate(bags):
            patches[i, :len(b)], valid[i, :len(b)] = b, True
        pw = self.pathway_tokens(batch["genes"])
        x = torch.cat([pw, self.patch_proj(patches)], dim=1)
        valid = torch.cat([torch.ones(len(bags), pw.shape[1], dtype=torch.bool, device=dev), valid], dim=1)
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        if self.fused_attention:       # [B, 1 head, T, dim] with a key mask: the flash path, no T×T map
            x = x + self.proj(F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None],
                                                             attn_mask=valid[:, None, None, :])[:, 0])
        else:
            s = (q @ k.transpose(1, 2) / math.sqrt(self.dim)).masked_fill(~valid[:, None, :], -torch.inf)
            x = x + self.proj(torch.softmax(s, dim=-1) @ v)
        x = self.norm3(x + self.ffn(self.norm2(x)))
        pooled = (x * valid[..., None]).sum(1) / valid.sum(1, keepdim=True)
        return self.head(pooled)
