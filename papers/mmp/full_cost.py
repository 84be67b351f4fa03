"""The full profile's cost (tools/plan.py) and one real-shape training step (tools/gpu_smoke.py).

MMP runs on the CPU at full (trainer.accelerator cpu, OMP_NUM_THREADS=1). FLOPs per patient and epoch
are analytic from the configured widths (ABMIL: embed + gated attention over every patch; the
full-token Transformer: one attention + FFN layer over `eval.patch_cap` patch tokens and the pathway
tokens; the MMP arms: the PANTHER aggregation of every bag per fold, then small models on tokens),
×3 for forward + backward, over the official folds' training patients × `train.epochs`. CPU time =
FLOPs / the single-thread rate probed on this machine (shared.cost_plan.cpu_rate), spread over the
job's threads by the plan, + reading every bag twice per fold at READ_BPS. The cohort size and patches per slide are stated (TCGA-BRCA, UNI).
"""
from __future__ import annotations

import torch

from shared.cost_plan import Cost, autocast, cpu_rate

PATIENTS = 1000          # TCGA-BRCA cases with a slide and RNA (stated)
PATCHES = 15000          # mean UNI patches per case at 20× (stated)
TRAIN_SHARE = 0.8        # of the patients in a fold's training split
READ_BPS = 0.5e9         # feature files read from shared storage, bytes/s (stated)
PATHWAYS = 50
LIGHT_ARMS = ("pathway", "token_linear", "token_mlp", "prototype_cox")


def _folds(cfg) -> int:
    return 5 if cfg.eval.folds == "official_splits" else int(cfg.eval.n_folds)


def _per_patient_flops(cfg, arm: str) -> float:
    """Forward FLOPs of one patient through `arm`."""
    d, m = int(cfg.data.dim), cfg.model
    if arm == "abmil":
        a = int(m.abmil_dim)
        return PATCHES * (2 * d * a + 2 * 2 * a * a + 2 * a)
    if arm == "full_transformer":
        t, n = int(m.transformer_dim), int(cfg.eval.patch_cap) + PATHWAYS
        return int(cfg.eval.patch_cap) * 2 * d * t + 16 * n * t * t + 4 * n * n * t
    tokens = int(cfg.prototypes.n) + PATHWAYS
    return 24 * tokens * int(m.dim) ** 2 + 4 * tokens ** 2 * int(m.dim)


def _aggregation_flops(cfg) -> float:
    """PANTHER / GMM E-step of every bag once per fold (and the prototypes' k-means on a sample)."""
    return _folds(cfg) * PATIENTS * PATCHES * int(cfg.prototypes.n) * int(cfg.data.dim) * 10


def _arm(cfg, arm: str, name: str, folds: int | None = None, epochs_factor: float = 1.0, note: str = "") -> Cost:
    folds = _folds(cfg) if folds is None else folds
    if arm == "full_transformer":
        folds = min(folds, int(cfg.eval.transformer_folds))
    epochs = int(cfg.train.epochs) * epochs_factor
    train = PATIENTS * TRAIN_SHARE
    flops = folds * (3 * train * epochs + (PATIENTS - train)) * _per_patient_flops(cfg, arm)
    if arm.startswith("mmp") or arm in LIGHT_ARMS:
        flops += _aggregation_flops(cfg) * folds / _folds(cfg)
    bag_bytes = PATCHES * int(cfg.data.dim) * 4
    read = folds * PATIENTS * bag_bytes   # each bag read in full once per fold
    return Cost(name, "cpu", flops=flops, flops_how="analytic", bytes_read=read,
                cpu_s=flops / cpu_rate(), host_s=read / READ_BPS, cpu_how="analytic FLOPs / probed CPU rate",
                host_mem_gb=PATIENTS * bag_bytes / 1e9 if arm in ("abmil", "full_transformer") else 8.0,
                note=f"{folds} folds × {epochs:g} epochs, bags read once per fold; {note}".rstrip("; "))


def job_costs(cfg) -> list[Cost]:
    costs = [_arm(cfg, arm, f"cindex_{arm}") for arm in cfg.eval.arms]
    costs.append(_arm(cfg, "mmp_trans", "compression", note="token budgets of MMP-Trans"))
    costs.append(_arm(cfg, "mmp_trans", "recovery", note="prototype recovery"))
    costs.append(_arm(cfg, "mmp_trans", "loss_ablation", folds=int(cfg.ablation.folds), epochs_factor=2,
                      note="NLL and Cox losses"))
    cells = 2 ** len(cfg.diagnostics.factors) + len(cfg.diagnostics.variants)
    costs.append(_arm(cfg, "mmp_trans", "trans_diagnostics", epochs_factor=cells * 1.5,
                      note=f"{cells} factorial cells and variants on the same folds"))
    bc = cfg.breast_cancer
    costs.append(Cost("breast_cancer", "cpu", cpu_s=int(bc.n_folds) * int(bc.epochs) * 5, cpu_how="stated",
                      note="scikit-learn's breast-cancer table, seconds per fold-epoch"))
    costs.append(Cost("cost", "cpu", cpu_s=len(cfg.cost.n_patches) * int(cfg.cost.repeats) * int(cfg.cost.seeds) * 30,
                      cpu_how="stated", note="timed aggregation calls, ≤ 30 s each"))
    costs.append(Cost("cost_shapes", "cpu", cpu_s=600, cpu_how="stated", note="counted shapes up to 1e5 patches"))
    k = cfg.knobs
    bag_share = (int(k.data.n_patches_min) + int(k.data.n_patches_max)) / 2 / PATCHES   # the knobs' smaller bags
    # every knob point on len(k.cohort_seeds) cohorts of k.n_folds folds (training share (f-1)/f each)
    fold_share = len(k.cohort_seeds) * int(k.n_folds) * (1 - 1 / int(k.n_folds)) / (_folds(cfg) * (1 - 1 / _folds(cfg)))
    costs.append(_sum("pi_share_knob", [_arm(cfg, a, a) for a in k.pi_share_arms],
                      len(k.pi_share) * bag_share * fold_share * int(k.data.n_patients) / PATIENTS,
                      f"{len(k.pi_share)} points × {len(k.pi_share_arms)} arms × {len(k.cohort_seeds)} cohorts, "
                      f"bags {bag_share:.2f} of the main cohort's", mem_scale=bag_share))
    costs.append(_sum("cohort_size_knob", [_arm(cfg, a, a) for a in k.size_arms],
                      sum(int(n) for n in k.n_patients) / PATIENTS * bag_share * fold_share,
                      f"{len(k.n_patients)} cohort sizes × {len(k.size_arms)} arms × {len(k.cohort_seeds)} cohorts, "
                      f"bags {bag_share:.2f} of the main cohort's",
                      mem_scale=max(int(n) for n in k.n_patients) / PATIENTS * bag_share))
    cohorts = len(cfg.replication.cohort_seeds) - 1
    factors = list(cfg.diagnostics.cohort_factors)
    cells = 2 ** len(factors)
    epochs = cells * ((1 + float(cfg.diagnostics.epochs_factor)) / 2 if "epochs" in factors else 1)
    costs.append(_sum("trans_factorial_cohorts", [_arm(cfg, "mmp_trans", "mmp_trans")], cohorts * epochs,
                      f"{cells} cells on {cohorts} further cohorts"))
    for name in ("cindex", "replication", "oracle_ceilings"):
        costs.append(Cost(name, "cpu", cpu_s=60, cpu_how="stated", note="tables from the arms' metrics at full"))
    return costs


def _sum(name: str, parts: list[Cost], scale: float, note: str, mem_scale: float = 1.0) -> Cost:
    """One job that trains `parts` (arm costs on the main cohort), scaled by `scale` (points, cohorts,
    the share of patients and patches)."""
    return Cost(name, "cpu", flops=scale * sum(p.flops for p in parts), flops_how="analytic",
                bytes_read=scale * sum(p.bytes_read for p in parts), cpu_s=scale * sum(p.cpu_s for p in parts),
                host_s=scale * sum(p.host_s for p in parts), cpu_how="analytic FLOPs / probed CPU rate",
                host_mem_gb=max(8.0, mem_scale * max(p.host_mem_gb for p in parts)), note=note)


def probe_flops(cfg) -> float:
    """FLOPs of one full-shape `probe_step` (ABMIL forward + backward on one bag)."""
    return 3 * _per_patient_flops(cfg, "abmil")


def probe_step(cfg, device: str = "cpu"):
    """One ABMIL training step on one bag of PATCHES (or, at a small data.dim, 1000) patches of the
    configured feature width, Adam included, at the configured precision. Returns a callable."""
    from .models import ABMIL

    d = int(cfg.data.dim)
    n = PATCHES if d >= 512 else 1000
    model = ABMIL(d, dim=int(cfg.model.abmil_dim), dropout=0.0, n_out=int(cfg.train.n_bins)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(n, d, device=device)

    def step():
        with autocast(device, str(cfg.trainer.precision)):
            h = model.embed(x)
            a = model.att_w(torch.tanh(model.att_v(h)) * torch.sigmoid(model.att_u(h))).softmax(0)
            logits = model.head((a * h).sum(0, keepdim=True))
        loss = logits.float().logsumexp(1).sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step
