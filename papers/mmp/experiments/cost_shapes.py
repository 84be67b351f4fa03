"""Cost at the paper's sizes from tensor shapes: FLOP and byte counts of one forward pass per patient,
checked against measurements (`cost_at_paper_dims`).

T = N + P tokens (N patches, P pathway tokens) in the full-token Transformer of width D on patches of
width d; C prototypes; MMP's fusion on T' = P + C tokens of width d_model = D + D_code, attention
width A = d_model / 2; n_max the largest pathway's gene count. FLOPs are those of the matrix products
(2 per multiply-add, as torch's FlopCounterMode counts them):

    full token   2P·n_max·D + 2P·D² (pathway SNN) + 2N·d·D (patch projection) + 6T·D² (QKV)
                 + 4T²·D (scores, A·V) + 2T·D² (output) + 8T·D² (FFN, 2D hidden) + 2D (head)
    aggregation  8N·C·d   (E-step x²·(1/Σ)ᵀ and x·(μ/Σ)ᵀ; M-step qᵀx and qᵀx²)
    fusion       2P·n_max·D + 2P·D² + 2C(2d+1)·D + 6T'·d_model·A + 4T'²·A + 4T'·A² + 4A   (no N)

Peak bytes of the tensors alive at once inside the forward (inference, fp32; the input bag is not
counted), read off the code's live set in each phase; the peak is the largest phase:

    pathway SNN           S + 4N·d + N                       the SNN's own peak S (no N: measured once)
                                                             beside the padded bag and its mask
    attention, explicit   4(N·d + P·D + 5T·D + 2T²) + T      the padded bag, the pathway tokens, x, QKV,
                                                             A·V, and the two T×T maps (scores, softmax)
    FFN, explicit         4(N·d + P·D + 9T·D + T²) + T       QKV, x, the FFN's 2D-wide activations; the
                                                             score map is still held
    FFN, fused            4(N·d + P·D + 9T·D) + T            torch's flash attention keeps no T×T map
    aggregation           max(4(2N·d + (3C + 1)N + 6C·d + 3C), 4(N·d + (4C + 2)N + 4C·d + C)) + N

The N² term of the explicit model is 8T² bytes. The experiment measures FLOPs (FlopCounterMode) and
peak bytes (`PeakMemory`) at the configured widths for N up to 10⁴ and reports the counts beside them;
the counts alone extend to N = 10⁵.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ..measure import PeakMemory


def paper_pathways(dims) -> list:
    """P pathways whose sizes are spread evenly over [genes_min, genes_max] (the Hallmark sets have 31–199
    genes), on consecutive genes: only their sizes enter the counts."""
    sizes = np.linspace(dims.genes_min, dims.genes_max, dims.n_pathways).round().astype(int)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return [np.arange(s, s + n) for s, n in zip(starts, sizes)]


def full_token_flops(n, *, d: int, dim: int, n_pathways: int, n_max: int) -> float:
    t = n + n_pathways
    return float(2 * n_pathways * n_max * dim + 2 * n_pathways * dim ** 2 + 2 * n * d * dim + 6 * t * dim ** 2
                 + 4 * t ** 2 * dim + 2 * t * dim ** 2 + 8 * t * dim ** 2 + 2 * dim)


def full_token_bytes(n, *, d: int, dim: int, n_pathways: int, pathway_bytes: int, fused: bool = False) -> float:
    """The largest of the forward's phases: the pathway SNN (its own peak, `pathway_bytes`, has no N)
    beside the padded bag; attention; the FFN (the explicit model still holds its score map there)."""
    t = n + n_pathways
    snn = pathway_bytes + 4 * n * d + n
    if fused:
        return float(max(snn, 4 * (n * d + n_pathways * dim + 9 * t * dim) + t))
    attention = 4 * (n * d + n_pathways * dim + 5 * t * dim + 2 * t ** 2) + t
    ffn = 4 * (n * d + n_pathways * dim + 9 * t * dim + t ** 2) + t
    return float(max(snn, attention, ffn))


def quadratic_bytes(n, *, n_pathways: int) -> float:
    """The explicit model's N² term: two fp32 T×T maps alive at once."""
    return float(8 * (n + n_pathways) ** 2)


def aggregation_flops(n, *, d: int, n_prototypes: int) -> float:
    return float(8 * n * n_prototypes * d)


def aggregation_bytes(n, *, d: int, n_prototypes: int) -> float:
    """The larger of the M-step (x² beside x-sized products) and the E-step's N×C log-densities."""
    c = n_prototypes
    m_step = 4 * (2 * n * d + (3 * c + 1) * n + 6 * c * d + 3 * c) + n
    e_step = 4 * (n * d + (4 * c + 2) * n + 4 * c * d + c) + n
    return float(max(m_step, e_step))


def fusion_flops(*, d: int, dim: int, code_dim: int, n_pathways: int, n_prototypes: int, n_max: int) -> float:
    t, dm = n_pathways + n_prototypes, dim + code_dim
    a = dm // 2
    return float(2 * n_pathways * n_max * dim + 2 * n_pathways * dim ** 2 + 2 * n_prototypes * (2 * d + 1) * dim
                 + 6 * t * dm * a + 4 * t ** 2 * a + 4 * t * a ** 2 + 4 * a)


def counted_flops(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        fn()
    return int(counter.get_total_flops())


def peak_bytes(fn) -> int:
    with torch.no_grad(), PeakMemory() as mem:
        fn()
    return int(mem.peak)


def cost_at_paper_dims(run) -> dict:
    """FLOP and byte counts from shapes at the widths of `cost_shapes` (the paper's d = 1024 and the
    full profile's model widths at tiny), measured at `cost_shapes.measure_n` (FlopCounterMode,
    `PeakMemory`), projected to `cost_shapes.project_n`; the explicit model's N² share of memory, and
    the full-token / MMP ratios at `cost_shapes.at_n`, where they are measured."""
    from shared.seeding import derive_seed

    from ..models import MMP, FullTokenTransformer
    from ..panther import gmm_aggregate, tokens

    cfg, seed = run.cfg, run.seed
    pd_ = cs = cfg.cost_shapes
    d, dim, c, p = pd_.dim, pd_.transformer_dim, pd_.n_prototypes, pd_.n_pathways
    pathways = paper_pathways(pd_)
    n_max, n_genes = max(len(g) for g in pathways), int(max(g.max() for g in pathways)) + 1
    torch.manual_seed(seed)
    explicit = FullTokenTransformer(d, pathways, dim=dim, snn_dropout=0.25, dropout=0.1, n_out=1).eval()
    fused = FullTokenTransformer(d, pathways, dim=dim, snn_dropout=0.25, dropout=0.1, n_out=1,
                                 fused_attention=True).eval()
    fused.load_state_dict(explicit.state_dict())
    mmp = MMP(2 * d + 1, c, pathways, dim=pd_.token_dim, code_dim=pd_.code_dim, snn_dropout=0.25, dropout=0.1,
              n_out=1).eval()
    rng = np.random.default_rng(derive_seed(seed, "cost_shapes"))
    protos = rng.normal(size=(c, d)).astype(np.float32)
    genes = torch.from_numpy(rng.normal(size=(1, n_genes)).astype(np.float32))
    pathway_bytes = peak_bytes(lambda: explicit.pathway_tokens(genes))   # the SNN's own peak: no N in its shapes
    shape = dict(d=d, dim=dim, n_pathways=p, pathway_bytes=pathway_bytes)
    fusion_count = fusion_flops(d=d, dim=pd_.token_dim, code_dim=pd_.code_dim, n_pathways=p, n_prototypes=c,
                                n_max=n_max)
    rows, errors = [], []
    for n in cs.measure_n:
        x = torch.from_numpy(rng.normal(size=(n, d)).astype(np.float32))
        batch = {"bags": [x], "genes": genes}
        with torch.no_grad():
            hist = tokens(*gmm_aggregate(x, protos))[None]
        row = {"N": n,
               "full_flops": counted_flops(lambda: explicit(batch)), "full_flops_count": full_token_flops(n, n_max=n_max, d=d, dim=dim, n_pathways=p),
               "full_bytes": peak_bytes(lambda: explicit(batch)), "full_bytes_count": full_token_bytes(n, **shape),
               "fused_bytes": peak_bytes(lambda: fused(batch)), "fused_bytes_count": full_token_bytes(n, fused=True, **shape),
               "aggregation_flops": counted_flops(lambda: gmm_aggregate(x, protos)),
               "aggregation_flops_count": aggregation_flops(n, d=d, n_prototypes=c),
               "aggregation_bytes": peak_bytes(lambda: gmm_aggregate(x, protos)),
               "aggregation_bytes_count": aggregation_bytes(n, d=d, n_prototypes=c),
               "fusion_flops": counted_flops(lambda: mmp({"hist": hist, "genes": genes})), "fusion_flops_count": fusion_count,
               "fusion_bytes": peak_bytes(lambda: mmp({"hist": hist, "genes": genes}))}
        del batch, x
        for key in ("full_flops", "full_bytes", "fused_bytes", "aggregation_flops", "aggregation_bytes", "fusion_flops"):
            errors.append({"N": n, "quantity": key, "rel_error": abs(row[f"{key}_count"] / row[key] - 1)})
        rows.append(row)
    measured = pd.DataFrame(rows)
    fusion_bytes = int(measured.fusion_bytes.max())     # no N in the fusion's shapes: the same at every N
    # least-squares a + b T + c T² on the measured explicit peaks: the N² coefficient from data
    t = measured.N.to_numpy(float) + p
    quad_fit = np.polyfit(t, measured.full_bytes.to_numpy(float), 2) if len(t) >= 4 else [np.nan] * 3
    projected = []
    for n in cs.project_n:
        full_b, fused_b = full_token_bytes(n, **shape), full_token_bytes(n, fused=True, **shape)
        agg_b = aggregation_bytes(n, d=d, n_prototypes=c)
        mmp_b = max(agg_b, fusion_bytes)               # aggregation, then fusion on its tokens: one after the other
        full_f = full_token_flops(n, n_max=n_max, d=d, dim=dim, n_pathways=p)
        mmp_f = aggregation_flops(n, d=d, n_prototypes=c) + fusion_count
        projected.append({"N": n, "full_MB": full_b / 2**20, "fused_MB": fused_b / 2**20, "mmp_MB": mmp_b / 2**20,
                          "quadratic_share": quadratic_bytes(n, n_pathways=p) / full_b,
                          "full_GFLOP": full_f / 1e9, "mmp_GFLOP": mmp_f / 1e9,
                          "memory_ratio": full_b / mmp_b, "fused_memory_ratio": fused_b / mmp_b, "flop_ratio": full_f / mmp_f})
    projected = pd.DataFrame(projected)
    at = cs.at_n
    if at not in set(measured.N):
        raise ValueError(f"cost_shapes.measure_n must include cost_shapes.at_n = {at}: the claims rest on a measurement there")
    m = measured.set_index("N").loc[at]
    mmp_bytes = max(int(m.aggregation_bytes), fusion_bytes)
    mmp_flops = int(m.aggregation_flops) + int(m.fusion_flops)
    paper_n = {"N": int(at),
               "full_token_MB": float(m.full_bytes) / 2**20, "fused_MB": float(m.fused_bytes) / 2**20,
               "mmp_MB": mmp_bytes / 2**20,
               "full_token_quadratic_share": quadratic_bytes(at, n_pathways=p) / float(m.full_bytes),
               "memory_ratio": float(m.full_bytes) / mmp_bytes, "fused_memory_ratio": float(m.fused_bytes) / mmp_bytes,
               "flop_ratio": float(m.full_flops) / mmp_flops,
               "full_token_GFLOP": float(m.full_flops) / 1e9, "mmp_GFLOP": mmp_flops / 1e9}
    err = pd.DataFrame(errors)
    table = measured.assign(**{k: measured[k] / 2**20 for k in measured.columns if k.endswith("bytes") or k.endswith("bytes_count")})
    run.save_table(table.rename(columns=lambda k: k.replace("bytes", "MB")), "cost_shapes_measured", floatfmt=".4g")
    run.save_table(projected, "cost_shapes", floatfmt=".4g")
    return {"dims": {"d": d, "dim": dim, "n_prototypes": c, "n_pathways": p, "n_max_genes": n_max,
                     "pathway_bytes": pathway_bytes,
                     "token_dim": pd_.token_dim, "code_dim": pd_.code_dim},
            "check": {"max_rel_error": float(err.rel_error.max()),
                      "worst": err.sort_values("rel_error").iloc[-1].to_dict(),
                      "measure_n": [int(v) for v in cs.measure_n]},
            "quadratic_fit_bytes": {"a": float(quad_fit[2]), "b_per_token": float(quad_fit[1]),
                                    "c_per_token_pair": float(quad_fit[0])},
            "paper_n": paper_n,
            # the counts alone (arithmetic on the configured shapes), beyond the measured range
            "projected": {"rows": projected.to_dict(orient="list"), "from_config": True}}
