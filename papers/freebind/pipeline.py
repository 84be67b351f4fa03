"""One seed of the tiny/smoke reproduction: world → spaces → pools → bonds → table rows and λ curves."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from .bonds import (MOP_POOLS, BondTrainConfig, bond_datasets, combination_bond, displacement_bond,
                    mop_from_bank, train_bond)
from .evaluation import evaluate
from .projector import ProjectorBank, l2norm, n_params
from .spaces import build_spaces
from .world import MODALITIES, N_CLASSES, World, WorldSpec

MEMBERS = tuple(MOP_POOLS)  # mix, A, T, V, AT, AV, TV; member 0 ("mix") doubles as the single projector


def world_spec(cfg, visibility: float | None = None) -> WorldSpec:
    w = cfg.world
    return WorldSpec(envelope_visibility=w.envelope_visibility if visibility is None else visibility,
                     image_noise=w.image_noise, audio_noise=w.audio_noise, distractor=w.distractor,
                     p_attr=w.p_attr, p_intensity=w.p_intensity, structure_seed=w.structure_seed)


def bond_cfg(cfg, dense: bool) -> BondTrainConfig:
    b = cfg.bonds
    return BondTrainConfig(hidden=b.hidden, steps=b.steps, batch=b.batch, lr=b.lr, tau=b.tau, dense=dense,
                           val_frac=b.val_frac, eval_every=b.eval_every, keep_best=b.keep_best)


def embed_all(spaces, raw: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    return {name: {m: sp.embed(m, raw[m]) for m in sp.modalities if m in raw} for name, sp in spaces.items()}


class SeedRun:
    """Everything one seed trains, with the bonds cached under `ckpt` (weights_only loads)."""

    def __init__(self, cfg, seed: int, ckpt: Path, visibility: float | None = None, with_vt: bool = True):
        self.cfg, self.seed, self.ckpt = cfg, seed, Path(ckpt)
        self.world = World(world_spec(cfg, visibility))
        self.timing: dict[str, float] = {}
        self.params: dict[str, int] = {}
        t0 = time.perf_counter()
        self.spaces = build_spaces(self.world, cfg, seed, self.ckpt / "spaces", with_vt=with_vt, timing=self.timing)
        self.timing["spaces_s"] = time.perf_counter() - t0
        self.params["U_encoders"] = self.spaces["U"].n_params()
        rng = np.random.default_rng(seed + 2000)
        pool = {m: self.world.render(self.world.sample_events(cfg.bonds.pool, rng), m, rng) for m in MODALITIES}
        self.pools = embed_all(self.spaces, pool)
        ev = self.world.sample_events(cfg.eval.n_test, rng)
        self.test_events = ev
        self.test_raw = {m: self.world.render(ev, m, rng) for m in MODALITIES}
        self.test_raw["text"] = torch.cat([self.test_raw["text"], World.class_prompts()])
        self.test = embed_all(self.spaces, self.test_raw)
        self.n_test = len(ev)
        self.banks: dict[str, ProjectorBank] = {}

    def bank(self, name: str, pools, hub: str, src: str, tgt: str, dense: bool) -> ProjectorBank:
        path = self.ckpt / "bonds" / f"{name}.pt"
        datasets, overlap, src_only = bond_datasets(pools, hub, src, tgt, MEMBERS, self.cfg.bonds.tau_r)
        d_in = next(iter(datasets[0][0].values())).shape[1]
        d_out = next(iter(datasets[0][1].values())).shape[1]
        if path.is_file():
            bank = ProjectorBank(len(MEMBERS), d_in, d_out, self.cfg.bonds.hidden)
            bank.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
            self.timing[f"bond_{name}_s"] = float(torch.load(path.with_suffix(".time.pt"), weights_only=True))
        else:
            t0 = time.perf_counter()
            bank = train_bond(datasets, overlap, src_only, bond_cfg(self.cfg, dense),
                              seed=self.seed * 1000 + sum(map(ord, name)))
            self.timing[f"bond_{name}_s"] = time.perf_counter() - t0
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(bank.state_dict(), path)
            torch.save(torch.tensor(self.timing[f"bond_{name}_s"]), path.with_suffix(".time.pt"))
        self.params[f"bond_{name}"] = n_params(bank)
        self.banks[name] = bank.eval()
        return self.banks[name]

    def row(self, emb) -> dict:
        return evaluate(emb, self.n_test, self.test_events.cls, N_CLASSES)


def run_seed(cfg, seed: int, ckpt: Path) -> dict:
    """Train and evaluate every row of the main table and the λ curves for one seed."""
    r = SeedRun(cfg, seed, ckpt)
    inf = cfg.inference
    at_e, ver = (inf.at_expertise.lam_a, inf.at_expertise.lam_t), (inf.versatile.lam_a, inf.versatile.lam_t)
    lam_v, lam_tv = inf.displacement.lam_v, inf.displacement.lam_t
    c1 = r.bank("c_E1", r.pools, "U", "E1", "U", dense=True)
    c2 = r.bank("c_E2", r.pools, "U", "E2", "U", dense=True)
    # the main displacement bond (also the hub of the sequential bond); `bonds.dense` is the [recon] switch
    d_dense = r.bank("d_VT_dense" if cfg.bonds.dense else "d_VT_main_nodense", r.pools, "U", "U", "VT",
                     dense=cfg.bonds.dense)
    d_plain = r.bank("d_VT_nodense", r.pools, "U", "U", "VT", dense=False)
    mop1, mop2, single1 = mop_from_bank(c1), mop_from_bank(c2), mop_from_bank(c1, [0])
    P_d, P_d0 = mop_from_bank(d_dense), mop_from_bank(d_plain)
    T, U = r.test, r.test["U"]
    E1, E2 = (T["E1"], mop1), (T["E2"], mop2)
    # sequential: the displaced space D = U + d(VT) is the hub; the CLAP projectors map into it
    D_pools = {**r.pools, "D": displacement_bond(r.pools["U"], r.pools["VT"], P_d, lam_v, lam_tv)}
    s1 = mop_from_bank(r.bank("seq_E1", D_pools, "D", "E1", "D", dense=True))
    s2 = mop_from_bank(r.bank("seq_E2", D_pools, "D", "E2", "D", dense=True))
    D = displacement_bond(U, T["VT"], P_d, lam_v, lam_tv)
    D_nodense = displacement_bond(U, T["VT"], P_d0, lam_v, lam_tv)
    seq_pairs = [(T["E1"], s1), (T["E2"], s2)]
    rows = {
        "U": r.row(U),
        "E1": r.row(T["E1"]), "E2": r.row(T["E2"]), "VT": r.row(T["VT"]),
        "c_E1_single_ATE": r.row(combination_bond(U, [(T["E1"], single1)], *at_e)),
        "c_E1_mop_ATE": r.row(combination_bond(U, [E1], *at_e)),
        "parallel_ATE": r.row(combination_bond(U, [E1, E2], *at_e)),
        "parallel_versatile": r.row(combination_bond(U, [E1, E2], *ver)),
        "d_VT_dense": r.row(D),
        "d_VT_nodense": r.row(D_nodense),
        "sequential_ATE": r.row(combination_bond(D, seq_pairs, *at_e)),
        "sequential_versatile": r.row(combination_bond(D, seq_pairs, *ver)),
    }
    sweep = cfg.sweep
    lam_t_curve = [{"lam": lt, **r.row(combination_bond(U, [E1, E2], sweep.fixed_lam_a, lt))} for lt in sweep.lam_t]
    lam_a_curve = [{"lam": la, **r.row(combination_bond(U, [E1, E2], la, sweep.fixed_lam_t))} for la in sweep.lam_a]
    if cfg.eval.save_explore:
        save_explore(r, E1, E2, ckpt / "explore.npz")
    return {"seed": seed, "rows": rows, "lam_t_curve": lam_t_curve, "lam_a_curve": lam_a_curve,
            "params": r.params, "timing": r.timing}


def save_explore(r: SeedRun, E1, E2, path: Path) -> None:
    """Test embeddings for the notebook's live re-scoring: U, and both experts projected into U."""
    with torch.no_grad():
        proj = {f"hat_{m}": l2norm(torch.stack([p(e[m]) for e, p in (E1, E2)]).mean(0)).numpy()
                for m in ("audio", "text")}
    np.savez_compressed(
        path, **{f"U_{m}": r.test["U"][m].numpy() for m in MODALITIES}, **proj,
        E1_audio=r.test["E1"]["audio"].numpy(), E1_text=r.test["E1"]["text"].numpy(),
        labels=r.test_events.cls, colour=r.test_events.colour, envelope=r.test_events.envelope,
        images=r.test_raw["image"].numpy(), tokens=r.test_raw["text"].numpy(), n_test=r.n_test)


def run_fragile(cfg, seed: int, visibility: float, ckpt: Path) -> dict:
    """Bonded (parallel AT-Expertise) against expert text→audio R@1 at one U-visibility."""
    r = SeedRun(cfg, seed, ckpt, visibility=visibility, with_vt=False)
    at_e = (cfg.inference.at_expertise.lam_a, cfg.inference.at_expertise.lam_t)
    c1 = mop_from_bank(r.bank("c_E1", r.pools, "U", "E1", "U", dense=True))
    c2 = mop_from_bank(r.bank("c_E2", r.pools, "U", "E2", "U", dense=True))
    T = r.test
    rows = {"U": r.row(T["U"]), "E1": r.row(T["E1"]), "E2": r.row(T["E2"]),
            "c_E1_mop_ATE": r.row(combination_bond(T["U"], [(T["E1"], c1)], *at_e)),
            "parallel_ATE": r.row(combination_bond(T["U"], [(T["E1"], c1), (T["E2"], c2)], *at_e))}
    return {"visibility": visibility, "seed": seed, "rows": rows}
