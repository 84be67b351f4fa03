"""The full profile's cost (tools/plan.py) and one real-shape GAN step (tools/gpu_smoke.py).

One GAN iteration's FLOPs and saved bytes are counted on the meta device with the paper's own
`gan_module.count_step_flops` (G and D forward + backward, D's step first) for the E²GAN generator and
pix2pix at the configured resolution, batch and text length. Fits per job follow the experiments'
loops (bases per seed and per ablation kind; every scratch arm to `scratch.max_steps`, the plateau
bound; fine-tuning arms × new concepts × `finetune.steps`; the rank search's probes; the lr grids),
an upper bound where early stopping may cut it. Teacher (InstructPix2Pix) edits are charged to the
first job in the DAG that needs each concept's pairs (they are cached under the run's checkpoints):
3 guidance branches × `teacher.steps` UNet passes + the VAE each, counted on SD-1.5's shapes with
the 8-channel input UNet. Every experiment uses CUDA when its job has a GPU (device: auto): the plan
costs it on the GPU when the rule asks one, else on the CPU at the stated rate.
"""
from __future__ import annotations

import functools

import torch

from shared.cost_plan import CPU_FLOPS, GPUS, PRECISION_PEAK, Cost, autocast, count_step, param_bytes, sd15_part_costs

PIX_BYTES = 0.2e6          # one 256² scenery image read (stated)
FD_NET_EDITS = 8700        # InstructPix2Pix edits the fd network trains on at full (stated, from its run log)


@functools.lru_cache(maxsize=8)
def gan_step(ngf: int, ndf: int, d_layers: int, heads: int, ffn_mult: int, text_dim: int, tokens: int,
             res: int, batch: int, pix2pix: bool, blocks: int) -> tuple[int, int, int]:
    """(FLOPs, saved bytes, parameter bytes with Adam state) of one GAN iteration, counted on meta."""
    from .gan_module import d_loss, g_loss
    from .models import E2GANGenerator, Pix2PixGenerator, PatchDiscriminator

    with torch.device("meta"):
        G = Pix2PixGenerator(ngf, blocks) if pix2pix else E2GANGenerator(ngf, text_dim, heads, ffn_mult)
        D = PatchDiscriminator(ndf, d_layers)
        x = torch.empty(batch, 3, res, res)
        t, m = torch.empty(batch, tokens, text_dim), torch.ones(batch, tokens, dtype=torch.bool)

        def step():
            fake = G(x, t, m)
            d_loss(D, x, x, fake).backward()
            g_loss(D, x, x, fake, 100.0).backward()

        flops, saved = count_step(step)
    return flops, saved, param_bytes(G) + param_bytes(D)


def _step(cfg, pix2pix: bool = False) -> tuple[int, int, int]:
    m = cfg.model
    return gan_step(int(m.ngf), int(m.ndf), int(m.d_layers), int(m.heads), int(m.ffn_mult), int(cfg.text.dim) if
                    cfg.text.encoder == "hashed" else 768, int(cfg.text.max_tokens), int(cfg.data.resolution),
                    int(cfg.train.batch_size), pix2pix, int(m.pix2pix_blocks))


@functools.lru_cache(maxsize=2)
def edit_flops(resolution: int, steps: int) -> float:
    parts = sd15_part_costs(resolution, unet_in_channels=8)   # InstructPix2Pix: SD-1.5 with 8 input channels
    return 3 * steps * parts["unet"][0] + parts["enc"][0] + parts["dec"][0]


def job_costs(cfg) -> list[Cost]:
    prec, c, t = str(cfg.trainer.precision), cfg.concepts, cfg.teacher
    n_in = int(cfg.data.n_inputs)
    n_train = round(n_in * (1 - float(cfg.data.test_fraction)))
    pool = len(c.pool) or 30
    seeds, new, search = len(c.seeds), len(c.new), len(c.search)
    edit = edit_flops(int(t.edit_resolution), int(t.steps)) if t.kind == "instruct_pix2pix" else 0.0
    t_prec = "16-mixed" if t.get("fp16") else "32-true"
    e2, p2 = _step(cfg), _step(cfg, pix2pix=True)
    mem_gb = (max(e2[1], p2[1]) + max(e2[2], p2[2])) / 1e9 + (3.5 if edit else 0)   # + the fp16 teacher

    def job(name, e2_steps=0, p2p_steps=0, edits=0, note=""):
        """Every E²GAN experiment runs on CUDA when its job has a GPU (device: auto), else on the CPU."""
        flops = e2_steps * e2[0] + p2p_steps * p2[0]
        # teacher edits run at their own precision: express them as FLOPs at the job's peak
        scale = GPUS["H100-SXM"][PRECISION_PEAK[prec]] / GPUS["H100-SXM"][PRECISION_PEAK[t_prec]]
        total = flops + edits * edit * scale
        images = (e2_steps + p2p_steps) * int(cfg.train.batch_size) + edits
        hbm = 3 * (e2[1] + e2[2]) * e2_steps + 3 * (p2[1] + p2[2]) * p2p_steps   # ≈ 3 × saved + weights (stated)
        return Cost(name, "auto", flops=total, flops_how="counted", precision=prec, hbm_bytes=hbm,
                    steps=e2_steps + p2p_steps + edits * int(t.steps), gpu_mem_gb=mem_gb, mem_how="counted",
                    bytes_read=images * PIX_BYTES, cpu_s=(flops + edits * edit) / CPU_FLOPS,
                    cpu_how="counted FLOPs at the stated CPU rate",
                    note=f"{e2_steps:,} E2GAN + {p2p_steps:,} pix2pix steps, {edits:,} teacher edits; {note}")

    base_steps, ft = int(cfg.base.steps), int(cfg.finetune.steps)
    n_variants = int(cfg.base.random_draws) + len(cfg.base.extra_kinds)
    n_arms = 6   # setup.FT_ARMS
    grid = int(cfg.lr_grid.evaluations)   # every arm tries exactly this many lrs
    s = cfg.search
    probes = int(s.rounds) * 5 * len(s.multipliers) * search * len(s.seeds)   # 5 crucial groups per round
    costs = [
        job("fd_net", edits=FD_NET_EDITS, note="the edit classifier's training set"),
        job("base_clustered", e2_steps=seeds * base_steps,
            edits=int(cfg.base.feature_images) * pool + int(cfg.base.k) * n_train + new * (n_in - n_train),
            note="one clustered base per seed"),
        job("base_variants", e2_steps=n_variants * base_steps, edits=pool * n_train,
            note=f"{n_variants} ablation bases; pool pairs if base_clustered has not cached them"),
        job("rank_search", e2_steps=probes * int(s.steps), edits=search * n_in,
            note=f"≤ {probes} probes (rounds × groups × multipliers × concepts × seeds)"),
        job("lr_grid", e2_steps=n_arms * grid * ft, note=f"{n_arms} arms × ≤ {grid} lrs on one concept"),
        job("lr_grid_scratch", e2_steps=grid * int(cfg.lr_grid.scratch_steps),
            p2p_steps=grid * int(cfg.lr_grid.scratch_steps), note="two scratch arms × the lr grid"),
        job("concept_table", e2_steps=0, note="evaluation (FID/KID/CLIP) of the finished arms"),
    ]
    costs[-1].host_s, costs[-1].cpu_s, costs[-1].flops_how = 3600, 3600, "stated"
    for i in range(seeds):
        costs.append(job(f"scratch_s{i}", e2_steps=new * int(cfg.scratch.max_steps),
                         p2p_steps=new * int(cfg.scratch.max_steps), edits=new * n_in if i == 0 else 0,
                         note="both scratch arms per new concept to the plateau bound"))
        costs.append(job(f"finetune_s{i}", e2_steps=n_arms * new * ft, note=f"{n_arms} arms × {new} concepts"))
    curve_steps = len(cfg.data_curve.sizes) * ft   # every subset size at the fine-tunes' own steps
    n_curve = len(cfg.data_curve.concepts or c.new)
    costs.append(job("data_size_curve", e2_steps=2 * seeds * n_curve * curve_steps, note="k-means and random subsets"))
    costs.append(job("base_ablation", e2_steps=(1 + n_variants) * seeds * new * ft, note="LoRA from every base"))
    lat = job("latency_table", note="forward timings")
    lat.flops = int(cfg.latency.repeats) * 4 * e2[0] / 3
    lat.cpu_s, lat.host_s = lat.flops / CPU_FLOPS, 120
    costs.append(lat)
    return costs


def probe_flops(cfg) -> float:
    """FLOPs of one `probe_step` (the plan's estimate of it, for the smoke's measured s/step)."""
    return float(_step(cfg)[0])


def probe_step(cfg, device: str = "cpu"):
    """One E²GAN base-training GAN iteration (G and D, Adam) at the configured resolution, batch, text
    length and precision. Returns a callable."""
    from .gan_module import d_loss, g_loss
    from .models import E2GANGenerator, PatchDiscriminator

    m, b, res = cfg.model, int(cfg.train.batch_size), int(cfg.data.resolution)
    text_dim = int(cfg.text.dim) if cfg.text.encoder == "hashed" else 768
    G = E2GANGenerator(int(m.ngf), text_dim, int(m.heads), int(m.ffn_mult)).to(device)
    D = PatchDiscriminator(int(m.ndf), int(m.d_layers)).to(device)
    og, od = (torch.optim.Adam(x.parameters(), lr=2e-4, betas=(0.5, 0.999)) for x in (G, D))
    x, y = torch.rand(b, 3, res, res, device=device), torch.rand(b, 3, res, res, device=device)
    t = torch.randn(b, int(cfg.text.max_tokens), text_dim, device=device)
    mask = torch.ones(b, int(cfg.text.max_tokens), dtype=torch.bool, device=device)

    def step():
        with autocast(device, str(cfg.trainer.precision)):
            fake = G(x, t, mask)
            loss_d = d_loss(D, x, y, fake.detach())
        loss_d.backward()
        od.step()
        od.zero_grad(set_to_none=True)
        with autocast(device, str(cfg.trainer.precision)):
            loss_g = g_loss(D, x, y, fake, 100.0)
        loss_g.backward()
        og.step()
        og.zero_grad(set_to_none=True)
        return loss_g.detach()

    return step
