"""Space bonds: combination (expert → unified coordinates), displacement (unified → expert
coordinates), their complex forms, and bond training from pseudo tuples [recon].

Embeddings are passed around as `{modality: (N, d) tensor}` dicts, one per space.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F

from shared.progress import progress

from .projector import MoP, ProjectorBank, l2norm, mix
from .spaces import info_nce

Emb = Mapping[str, torch.Tensor]
# the 7 MoP members: which unimodal pools seed each pseudo dataset
MOP_POOLS = {"mix": ("audio", "text", "image"), "A": ("audio",), "T": ("text",), "V": ("image",),
             "AT": ("audio", "text"), "AV": ("audio", "image"), "TV": ("text", "image")}


# ---------------------------------------------------------------- inference

def _project(proj: Callable, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return proj(x)


PARALLEL_MEANS = ("flat", "per_expert")


def _member_outputs(proj: Callable, x: torch.Tensor) -> torch.Tensor:
    """(K, N, d): each MoP member's output f_k(x), or the projector's output as one member."""
    with torch.no_grad():
        if isinstance(proj, MoP):
            return torch.stack([f(x) for f in proj.members])
        return proj(x).unsqueeze(0)


def project_experts(experts: Sequence[tuple[Emb, Callable]], mod: str, mean: str = "flat") -> torch.Tensor:
    """Â: the experts' embeddings of `mod` projected into the unified space and averaged.

    mean="flat" (the official code): one uniform mean over all the experts' projectors (14 for two
    7-projector MoPs), then l2norm. mean="per_expert": each expert's MoP output l2norm(mean_k f_k)
    first, then a uniform mean over experts and l2norm. With one expert both are P(x).
    """
    if mean not in PARALLEL_MEANS:
        raise ValueError(f"parallel mean {mean!r}; valid: {list(PARALLEL_MEANS)}")
    outs = [_member_outputs(p, e[mod]) for e, p in experts]
    if mean == "flat":
        return l2norm(torch.cat(outs).mean(0))
    return l2norm(torch.stack([l2norm(o.mean(0)) for o in outs]).mean(0))


def combination_bond(unified: Emb, experts: Sequence[tuple[Emb, Callable]], lam_a: float, lam_t: float,
                     mean: str = "flat") -> dict:
    """`AᵘVᵘTᵘ + c(AᵉTᵉ...)`: (Aᵘ)^{1-λa}(Â)^{λa} · Vᵘ · (Tᵘ)^{1-λt}(T̂)^{λt}, in U's coordinates.

    `experts` is a list of (expert embeddings {audio, text}, projector expert→unified). With
    several experts (parallel bond) the projections are averaged uniformly (`project_experts`:
    `mean` "flat" = one mean over every projector, as the official code; "per_expert" = each
    expert's MoP first), then L2-normalised, before mixing. Images are returned untouched.
    """
    out = {}
    for mod, lam in (("audio", lam_a), ("text", lam_t)):
        if mod not in unified:
            continue
        if not all(mod in e for e, _ in experts):  # an expert without this modality: U's own embedding
            out[mod] = unified[mod]
            continue
        out[mod] = mix(unified[mod], project_experts(experts, mod, mean), lam)
    if "image" in unified:
        out["image"] = unified["image"]
    return out


def displacement_bond(unified: Emb, expert: Emb, projector: Callable, lam_v: float, lam_t: float) -> dict:
    """`AᵘVᵘTᵘ + d(VᵉTᵉ)`: Âᵘ · (V̂ᵘ)^{1-λv}(Vᵉ)^{λv} · (T̂ᵘ)^{1-λt}(Tᵉ)^{λt}, in the expert's coordinates.

    Audio enters only through the projector (X̂ᵘ = P_{u→e}(Xᵘ)).
    """
    out = {}
    if "audio" in unified:
        out["audio"] = _project(projector, unified["audio"])
    for mod, lam in (("image", lam_v), ("text", lam_t)):
        if mod in unified:
            hat = _project(projector, unified[mod])
            out[mod] = mix(hat, expert[mod], lam) if mod in expert else hat
    return out


def sequential_bond(unified: Emb, vt_expert: Emb, disp_projector: Callable, lam_v: float, lam_tv: float,
                    at_experts: Sequence[tuple[Emb, Callable]], lam_a: float, lam_t: float, mean: str = "flat") -> dict:
    """(U + d(VT)) + c(AT experts): displacement, then combination into the displaced space."""
    displaced = displacement_bond(unified, vt_expert, disp_projector, lam_v, lam_tv)
    return combination_bond(displaced, at_experts, lam_a, lam_t, mean)


# ---------------------------------------------------------------- pseudo tuples

def retrieval_weights(query: torch.Tensor, memory: torch.Tensor, tau_r: float) -> torch.Tensor:
    """w = softmax(⟨x_q, M⟩ / τr) over the memory pool; (n_query, n_memory)."""
    return torch.softmax(query @ memory.t() / tau_r, dim=-1)


def pseudo_tuples(pools: Mapping[str, Emb], hub: str, seed_mods: Sequence[str], mods: Sequence[str],
                  tau_r: float = 0.01, memo: dict | None = None) -> dict[str, dict[str, torch.Tensor]]:
    """Pseudo tuples from unpaired pools.

    pools[space][m]: the pool of modality m embedded in `space` (rows are the same data in every
    space). `hub` holds every modality and is where retrieval weights are computed. For each seed
    modality q and each wanted modality m ≠ q, w = softmax(⟨x_q, M_m⟩/τr) in the hub, and the
    pseudo-embedding is l2norm(w · M_m) in **every** space, with the same w; m = q keeps the datum.
    Returns {space: {m: (n, d)}} concatenated over the seed modalities.

    `memo` (a dict kept for one `pools` mapping, never shared between two) holds each (hub, q, m,
    space, τr) pseudo-embedding once computed: the MoP members seeded by the same modality, and the
    bonds over the same pools, read it instead of computing it again (the same tensors, bitwise).
    """
    memo = {} if memo is None else memo
    out: dict[str, dict[str, list]] = {s: {m: [] for m in mods if m in pools[s]} for s in pools}
    for q in seed_mods:
        for m in mods:
            w = None
            for s in pools:
                if m not in pools[s]:
                    continue
                if m == q:
                    out[s][m].append(pools[s][q])
                    continue
                key = (hub, q, m, s, float(tau_r))
                if key not in memo:
                    if w is None:
                        w = retrieval_weights(pools[hub][q], pools[hub][m], tau_r)
                    memo[key] = l2norm(w @ pools[s][m])
                out[s][m].append(memo[key])
    return {s: {m: torch.cat(v) for m, v in d.items()} for s, d in out.items()}


# ---------------------------------------------------------------- training

@dataclass
class BondTrainConfig:
    hidden: int = 2048
    steps: int = 1500
    batch: int = 512
    lr: float = 1e-3
    tau: float = 0.05
    dense: bool = True
    val_frac: float = 0.1
    eval_every: int = 50
    keep_best: bool = True


def batched_info_nce(a: torch.Tensor, b: torch.Tensor, tau: float) -> torch.Tensor:
    """Per-member symmetric InfoNCE: a, b (K, B, d) -> (K,) losses (== `info_nce` on each member)."""
    k, n, _ = a.shape
    logits = torch.bmm(a, b.transpose(1, 2)) / tau
    target = torch.arange(n, device=a.device).repeat(k)
    l1 = F.cross_entropy(logits.reshape(k * n, n), target, reduction="none").reshape(k, n).mean(1)
    l2 = F.cross_entropy(logits.transpose(1, 2).reshape(k * n, n), target, reduction="none").reshape(k, n).mean(1)
    return 0.5 * (l1 + l2)


def bond_loss(out: dict[str, torch.Tensor], tgt: dict[str, torch.Tensor], overlap: Sequence[str],
              src_only: Sequence[str], tau: float, dense: bool) -> torch.Tensor:
    """Per-member loss (K,): Σ_{m∈overlap} NCE(f(x_m^src), x_m^tgt) [+ Σ_{a∈src_only, n∈overlap} NCE(f(x_a^src), x_n^tgt)].

    out[m]: (K, B, d) projected source embeddings; tgt[m]: (K, B, d). Training sums over the K bank
    members, so each member's gradient is that of its own loss.
    """
    pairs = [(m, m) for m in overlap] + ([(a, n) for a in src_only for n in overlap] if dense else [])
    return sum(batched_info_nce(out[s], tgt[t], tau) for s, t in pairs)


def _copy_member(dst: ProjectorBank, src: ProjectorBank, k: int) -> None:
    with torch.no_grad():
        for name in ("w1", "b1", "w2", "b2"):
            getattr(dst, name)[k].copy_(getattr(src, name)[k])
        for bn_name, width in (("bn1", src.hidden), ("bn2", src.d_out)):
            sl = slice(k * width, (k + 1) * width)
            d, s = getattr(dst, bn_name), getattr(src, bn_name)
            for t in ("weight", "bias", "running_mean", "running_var"):
                getattr(d, t)[sl].copy_(getattr(s, t)[sl])
            d.num_batches_tracked.copy_(s.num_batches_tracked)


def train_bond(datasets: Sequence[tuple[dict, dict]], overlap: Sequence[str], src_only: Sequence[str],
               cfg: BondTrainConfig, seed: int, log: list | None = None) -> ProjectorBank:
    """Train one projector per pseudo dataset (as a bank). datasets[k] = (src {m: (n_k, d_s)}, tgt {m: (n_k, d_t)}).

    Each member samples its own batches; every `eval_every` steps the members' held-out losses are
    measured and, with keep_best, each member's best weights are kept (the `best.pt` of the paper's code).
    """
    import copy

    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    d_in = next(iter(datasets[0][0].values())).shape[1]
    d_out = next(iter(datasets[0][1].values())).shape[1]
    k = len(datasets)
    bank = ProjectorBank(k, d_in, d_out, cfg.hidden)
    opt = torch.optim.Adam(bank.parameters(), lr=cfg.lr, foreach=True)
    splits = []
    for src, tgt in datasets:
        n = next(iter(src.values())).shape[0]
        perm = torch.randperm(n, generator=g)
        n_val = max(int(cfg.val_frac * n), min(n, 64)) if cfg.keep_best else 0
        splits.append((perm[n_val:], perm[:n_val]))
    mods_src = list(overlap) + (list(src_only) if cfg.dense else [])
    mods_tgt = list(overlap)

    def gather(idx_per_member):
        s = {m: torch.stack([datasets[j][0][m][idx] for j, idx in enumerate(idx_per_member)]) for m in mods_src}
        t = {m: torch.stack([datasets[j][1][m][idx] for j, idx in enumerate(idx_per_member)]) for m in mods_tgt}
        return s, t

    def val_losses():
        bank.eval()
        n_val = min(len(v) for _, v in splits)
        s, t = gather([v[:n_val] for _, v in splits])
        with torch.no_grad():
            out = {m: bank(x) for m, x in s.items()}
            per = bond_loss(out, t, overlap, src_only, cfg.tau, cfg.dense).tolist()
        bank.train()
        return per

    best = copy.deepcopy(bank) if cfg.keep_best else None
    best_loss = [float("inf")] * k
    bank.train()
    for step in progress(range(1, cfg.steps + 1), "bond training (steps)"):
        idx = [tr[torch.randint(len(tr), (cfg.batch,), generator=g)] for tr, _ in splits]
        s, t = gather(idx)
        out = {m: bank(x) for m, x in s.items()}
        loss = bond_loss(out, t, overlap, src_only, cfg.tau, cfg.dense).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if cfg.keep_best and (step % cfg.eval_every == 0 or step == cfg.steps):
            for j, v in enumerate(val_losses()):
                if v < best_loss[j]:
                    best_loss[j] = v
                    _copy_member(best, bank, j)
            if log is not None:
                log.append({"step": step, "train_loss": float(loss) / k, "val_loss": sum(best_loss) / k})
    final = best if cfg.keep_best else bank
    return final.eval()


def shuffle_targets(datasets: Sequence[tuple[dict, dict]], seed: int) -> list[tuple[dict, dict]]:
    """The shuffled-pairs floor: each pseudo dataset's target rows permuted (one permutation for all
    its modalities), so a source tuple is paired with another tuple's target: no cross-space
    correspondence is left for a projector to learn."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for src, tgt in datasets:
        perm = torch.randperm(next(iter(tgt.values())).shape[0], generator=g)
        out.append((src, {m: x[perm] for m, x in tgt.items()}))
    return out


def bond_datasets(pools: Mapping[str, Emb], hub: str, src: str, tgt: str, members: Sequence[str],
                  tau_r: float, memo: dict | None = None) -> tuple[list, tuple[str, ...], tuple[str, ...]]:
    """The pseudo datasets of a bond src→tgt (one per MoP member), its overlap and source-only modalities.
    `memo`: `pseudo_tuples`' store for these pools (the members, and other bonds over the same pools, share it)."""
    overlap = tuple(m for m in ("audio", "image", "text") if m in pools[src] and m in pools[tgt])
    src_only = tuple(m for m in ("audio", "image", "text") if m in pools[src] and m not in pools[tgt])
    mods = overlap + src_only
    sub = {s: pools[s] for s in dict.fromkeys((hub, src, tgt))}
    memo = {} if memo is None else memo
    datasets = []
    for name in members:
        tup = pseudo_tuples(sub, hub, MOP_POOLS[name], mods, tau_r, memo)
        datasets.append((tup[src], tup[tgt]))
    return datasets, overlap, src_only


def mop_from_bank(bank: ProjectorBank, which: Sequence[int] | None = None) -> MoP:
    return MoP(bank.members(which)).eval()


def normalised_mean(outputs: Sequence[torch.Tensor]) -> torch.Tensor:
    return F.normalize(torch.stack(list(outputs)).mean(0), dim=-1)
