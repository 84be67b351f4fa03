"""Efficiency tables: `efficiency` (the tiny model: tokens, FLOPs, saved activations with explicit and
fused attention, step times; reported, not claimed) and `efficiency_vit_b` (the paper's ViT-B at
16×224²: analytic and FlopCounter FLOPs, saved activations, peak CUDA memory on a GPU)."""
from __future__ import annotations

import torch

from shared.seeding import derive_seed

from ..efficiency import (VitDims, finetune_macs, flops_and_saved_bytes, interleaved_median_times, peak_cuda_bytes,
                          pretrain_macs, saved_activation_bytes, vit_b_dims, vit_b_table)
from ..model import MaskedVideoAutoencoder, VideoClassifier, VideoEncoder, build_autoencoder, set_fused_attention
from ..recipe import make_masks, tube_visible
from ..selection import count
from .common import classes, dataset, device_of


def _pretrain_and_finetune_losses(ae: MaskedVideoAutoencoder, video: torch.Tensor, sel, n_classes: int,
                                  keep_ratio: float, gen: torch.Generator):
    """{phase: (loss(arm), VideoMAE arm, EVEREST arm, parameters)} for one batch `video`."""
    classifiers = {p: VideoClassifier(ae.encoder, n_classes, prune=p, keep_ratio=keep_ratio).to(video.device)
                   for p in ("none", "top")}
    labels = torch.zeros(video.shape[0], dtype=torch.long, device=video.device)

    def pre_loss(method):
        e, vis, tgt = make_masks(ae, video, method, sel, gen)
        return ae(video, vis, tgt, embeddings=e)

    def ft_loss(prune):
        return torch.nn.functional.cross_entropy(classifiers[prune](video, gen), labels)

    ft_params = list(dict.fromkeys(p for c in classifiers.values() for p in c.parameters()))
    return {"pretrain": (pre_loss, "tube", "everest", list(ae.parameters())),
            "finetune": (ft_loss, "none", "top", ft_params)}


def measure_phases(ae: MaskedVideoAutoencoder, video: torch.Tensor, sel, n_classes: int, keep_ratio: float,
                   gen: torch.Generator) -> dict:
    """Per phase and arm, per clip: counted forward FLOPs (explicit attention), bytes saved for backward
    with explicit and with fused attention, and peak CUDA memory of forward + backward (GPU only)."""
    b = video.shape[0]
    out = {}
    for phase, (fn, base, ours, params) in _pretrain_and_finetune_losses(ae, video, sel, n_classes, keep_ratio,
                                                                          gen).items():
        arms = {}
        for name, arm in (("videomae", base), ("everest", ours)):
            r = {}
            for attention in ("explicit", "fused"):
                set_fused_attention(ae, attention == "fused")
                if attention == "explicit":
                    flops, saved = flops_and_saved_bytes(lambda: fn(arm), params)
                    r["flops"] = flops / b
                else:
                    saved = saved_activation_bytes(lambda: fn(arm), params)
                r[f"saved_bytes_{attention}"] = saved / b
                peak = peak_cuda_bytes(lambda: fn(arm).backward(), video.device)
                r[f"peak_cuda_bytes_{attention}"] = None if peak is None else peak / b
            arms[name] = r
        set_fused_attention(ae, False)
        out[phase] = {**arms, "flops_ratio": arms["everest"]["flops"] / arms["videomae"]["flops"],
                      **{f"activation_ratio_{a}": arms["everest"][f"saved_bytes_{a}"] / arms["videomae"][f"saved_bytes_{a}"]
                         for a in ("explicit", "fused")}}
        if arms["videomae"]["peak_cuda_bytes_explicit"] is not None:
            for a in ("explicit", "fused"):
                out[phase][f"peak_cuda_ratio_{a}"] = (arms["everest"][f"peak_cuda_bytes_{a}"]
                                                      / arms["videomae"][f"peak_cuda_bytes_{a}"])
    return out


def _token_counts(enc: VideoEncoder, sel, match_visible: bool) -> dict:
    n = enc.num_tokens
    v = tube_visible(enc.slices, enc.positions, sel.mask_ratio)
    v_ev = v if match_visible else count(1 - sel.mask_ratio, n)
    k, kept = count(sel.rho_pre, n), count(sel.keep_ratio, n)
    return {"pretrain": {"encoder": (v, v_ev), "decoder": (n, k), "targets": (n - v, k - v_ev)},
            "finetune": {"encoder": (n, kept), "decoder": (0, 0)}}


def _memory_rows(phase: str, r: dict, unit: float, unit_name: str) -> list[tuple]:
    rows = [(f"saved activations {unit_name} / clip, {a} attention", r["videomae"][f"saved_bytes_{a}"] / unit,
             r["everest"][f"saved_bytes_{a}"] / unit) for a in ("explicit", "fused")]
    if r["videomae"]["peak_cuda_bytes_explicit"] is not None:
        rows += [(f"peak CUDA {unit_name} / clip, {a} attention", r["videomae"][f"peak_cuda_bytes_{a}"] / unit,
                  r["everest"][f"peak_cuda_bytes_{a}"] / unit) for a in ("explicit", "fused")]
    return rows


def efficiency(run) -> dict:
    """The tiny model: EVEREST / VideoMAE ratios of tokens, FLOPs, saved activations and step time
    (reported, not claimed: the claims are at ViT-B, `efficiency_vit_b`)."""
    import pandas as pd

    cfg = run.cfg
    torch.manual_seed(derive_seed(run.seed, "init"))
    ae = build_autoencoder(cfg)
    enc = ae.encoder
    clips = dataset(cfg, run.seed, "test")
    video = clips.batch(torch.arange(min(cfg.efficiency.batch, len(clips))))[0]
    video = video[:, 0] if video.dim() == 6 else video     # multi-view test clips: the first view
    b = video.shape[0]
    gen = torch.Generator().manual_seed(derive_seed(run.seed, "efficiency"))
    measured = measure_phases(ae, video, cfg.selection, classes(cfg), cfg.selection.keep_ratio, gen)
    losses = _pretrain_and_finetune_losses(ae, video, cfg.selection, classes(cfg), cfg.selection.keep_ratio, gen)

    def step(loss_fn, arg, params):
        opt = torch.optim.AdamW(params, lr=1e-8)
        return lambda: (opt.zero_grad(), loss_fn(arg).backward(), opt.step())

    tokens = _token_counts(enc, cfg.selection, cfg.selection.match_visible)
    dims = VitDims(enc.num_tokens, enc.tubelet * enc.patch ** 2 * enc.channels, enc.dim, len(enc.blocks),
                   cfg.model.decoder_dim, cfg.model.decoder_depth, classes(cfg))
    t = tokens["pretrain"]
    analytic = {"pretrain": [pretrain_macs(dims, t["encoder"][i], t["decoder"][i], t["targets"][i]) for i in (0, 1)],
                "finetune": [finetune_macs(dims, tokens["finetune"]["encoder"][i]) for i in (0, 1)]}
    decoder_share = analytic["pretrain"][0]["decoder"] / analytic["pretrain"][0]["total"]
    out, rows = {"decoder_share_of_videomae_pretrain_macs": decoder_share}, []
    for phase, (fn, base, ours, params) in losses.items():
        r, t = measured[phase], tokens[phase]
        times = interleaved_median_times({a: step(fn, a, params) for a in (base, ours)}, cfg.efficiency.repeats)
        a_macs = [x["total"] for x in analytic[phase]]
        out[phase] = {"encoder_tokens": dict(zip(("videomae", "everest"), t["encoder"])),
                      "decoder_tokens": dict(zip(("videomae", "everest"), t["decoder"])),
                      "analytic_macs_ratio": a_macs[1] / a_macs[0], **r}
        out.setdefault("timing", {})[f"{phase}_step_ratio"] = times[ours] / times[base]  # noisy: read by no claim
        rows += [{"phase": phase, "quantity": q, "VideoMAE": a, "EVEREST": e, "ratio": e / a if a else float("nan")}
                 for q, a, e in [("encoder tokens", *t["encoder"]), ("decoder tokens", *t["decoder"]),
                                 ("forward MFLOPs / clip", r["videomae"]["flops"] / 1e6, r["everest"]["flops"] / 1e6),
                                 ("analytic MMACs / clip", a_macs[0] / 1e6, a_macs[1] / 1e6),
                                 *_memory_rows(phase, r, 1024, "KiB"),
                                 (f"median step ms (batch {b}, interleaved)", 1e3 * times[base], 1e3 * times[ours])]]
    run.save_table(pd.DataFrame(rows), "efficiency", floatfmt=".3g")
    return out


def efficiency_vit_b(run) -> dict:
    """The paper's ViT-B (768/12/12, decoder 384/4/6) on one 16×3×224² clip: analytic MACs against
    FlopCounterMode FLOPs, bytes saved for backward (explicit and fused attention) and, on a GPU, peak
    CUDA memory. V = ⌊0.1·N⌋ = 156 for EVEREST, as in the paper (tube masking: 160)."""
    import pandas as pd

    from shared.config import Config

    device = device_of(run.cfg)
    torch.manual_seed(derive_seed(run.seed, "vit-b"))
    enc = VideoEncoder(3, 16, 224, 16, 2, 768, 12, 12, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    ae = MaskedVideoAutoencoder(enc, 384, 4, 6).to(device)
    sel = Config.wrap({**run.cfg.selection, "match_visible": False})
    video = torch.rand(1, 3, 16, 224, 224, generator=torch.Generator().manual_seed(0)).to(device)
    gen = torch.Generator().manual_seed(derive_seed(run.seed, "efficiency"))
    d = vit_b_dims()
    measured = measure_phases(ae, video, sel, d.num_classes, sel.keep_ratio, gen)
    analytic = {r["phase"].replace("-", ""): r for r in vit_b_table()}
    out, rows = {}, []
    for phase, r in measured.items():
        a = analytic[phase]
        counted = [r["videomae"]["flops"] / 2e9, r["everest"]["flops"] / 2e9]   # GFLOPs / 2 = GMACs
        out[phase] = {**r, "analytic_gmacs": {"videomae": a["videomae_gmacs"], "everest": a["everest_gmacs"]},
                      "analytic_ratio": a["ratio"], "counted_ratio": counted[1] / counted[0],
                      "paper_ratio": a["paper_ratio"]}
        rows += [{"phase": phase, "quantity": q, "VideoMAE": x, "EVEREST": y, "ratio": y / x, "paper ratio": pr}
                 for q, x, y, pr in [("analytic GMACs", a["videomae_gmacs"], a["everest_gmacs"], a["paper_ratio"]),
                                     ("FlopCounter GFLOPs / 2", *counted, a["paper_ratio"]),
                                     *[(*m, float("nan")) for m in _memory_rows(phase, r, 2 ** 20, "MiB")]]]
    run.save_table(pd.DataFrame(rows), "efficiency_vit_b", floatfmt=".3g")
    out["from_config"] = True   # FLOPs and saved activations of configured ViT-B shapes: no training, no data
    return out
