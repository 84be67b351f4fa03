"""One seed of the tiny/smoke reproduction: world → spaces → pools → bonds → table rows and λ curves.

The spaces' checkpoints and the trained bonds are cached under the seed's checkpoint folder, keyed
by the hash of what made them and the seed (`shared.run_cache`): an edited config rerun into the
same results folder retrains what it changed and logs one line saying why.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from shared import run_cache

from .bonds import (MOP_POOLS, BondTrainConfig, bond_datasets, combination_bond, displacement_bond,
                    mop_from_bank, project_experts, shuffle_targets, train_bond)
from .evaluation import evaluate
from .fusion import late_fusion
from .lambda_selection import grid, select_on_validation
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

    def __init__(self, cfg, seed: int, ckpt: Path, visibility: float | None = None, with_vt: bool = True,
                 u_ckpt: Path | None = None):
        self.cfg, self.seed, self.ckpt = cfg, seed, Path(ckpt)
        self.world = World(world_spec(cfg, visibility))
        self.timing: dict[str, float] = {}
        self.params: dict[str, int] = {}
        t0 = time.perf_counter()
        self.spaces = build_spaces(self.world, cfg, seed, self.ckpt / "spaces", with_vt=with_vt, timing=self.timing,
                                   u_ckpt=None if u_ckpt is None else Path(u_ckpt) / "spaces")
        self.timing["spaces_s"] = time.perf_counter() - t0
        self.params["U_encoders"] = self.spaces["U"].n_params()
        rng = np.random.default_rng(seed + 2000)
        pool = {m: self.world.render(self.world.sample_events(cfg.bonds.pool, rng), m, rng) for m in MODALITIES}
        self.pools = embed_all(self.spaces, pool)
        ev = self.world.sample_events(cfg.eval.n_test, rng)
        self.test_events = ev
        self.test_raw = {m: self.world.render(ev, m, rng) for m in ("audio", "image")}
        # several captions per item (item-major: item i's captions are rows i·k … i·k + k − 1)
        self.caption_item = np.repeat(np.arange(len(ev)), cfg.eval.captions)
        captions = self.world.render(ev.repeat(cfg.eval.captions), "text", rng)
        self.test_raw["text"] = torch.cat([captions, World.class_prompts()])
        self.test = embed_all(self.spaces, self.test_raw)
        self.n_test = len(ev)
        self.banks: dict[str, ProjectorBank] = {}
        self._val: tuple | None = None
        self._tuple_memos: list[tuple[dict, dict]] = []   # (pools, its pseudo-tuple memo): bonds over the same pools share it

    def made_by(self, **bond) -> dict:
        """What decides a bond: the world, the spaces and bond recipes, the displacement λ (the
        sequential bond's hub) and the bond's own settings."""
        c = self.cfg
        return {"world": vars(self.world.spec), "spaces": dict(c.spaces), "bonds": dict(c.bonds),
                "displacement": dict(c.inference.displacement), "members": list(MEMBERS), **bond}

    def bank(self, name: str, pools, hub: str, src: str, tgt: str, dense: bool, shuffled: bool = False) -> ProjectorBank:
        """The bond `name` (a 7-member bank): loaded when its cache key matches, else trained and cached."""
        path = self.ckpt / "bonds" / f"{name}.pt"
        datasets, overlap, src_only = bond_datasets(pools, hub, src, tgt, MEMBERS, self.cfg.bonds.tau_r,
                                                    memo=self._tuple_memo(pools))
        train_seed = self.seed * 1000 + sum(map(ord, name))
        if shuffled:
            datasets = shuffle_targets(datasets, train_seed + 1)
        d_in = next(iter(datasets[0][0].values())).shape[1]
        d_out = next(iter(datasets[0][1].values())).shape[1]
        key = run_cache.cache_key(self.made_by(name=name, hub=hub, src=src, tgt=tgt, dense=dense, shuffled=shuffled),
                                  train_seed)
        cached = run_cache.load(path, key, what=f"bond {name} (seed {self.seed})")
        if cached is not None:
            bank = ProjectorBank(len(MEMBERS), d_in, d_out, self.cfg.bonds.hidden)
            bank.load_state_dict(cached["state"])
            self.timing[f"bond_{name}_s"] = float(cached["train_s"])
        else:
            t0 = time.perf_counter()
            bank = train_bond(datasets, overlap, src_only, bond_cfg(self.cfg, dense), seed=train_seed)
            self.timing[f"bond_{name}_s"] = time.perf_counter() - t0
            run_cache.save(path, {"state": bank.state_dict(), "train_s": self.timing[f"bond_{name}_s"]}, key)
        self.params[f"bond_{name}"] = n_params(bank)
        self.banks[name] = bank.eval()
        return self.banks[name]

    def _tuple_memo(self, pools) -> dict:
        """The pseudo-tuple memo of this pools mapping (held beside it, so a memo never outlives its pools)."""
        for held, memo in self._tuple_memos:
            if held is pools:
                return memo
        self._tuple_memos.append((pools, {}))
        return self._tuple_memos[-1][1]

    def row(self, emb) -> dict:
        return evaluate(emb, self.caption_item, self.test_events.cls, N_CLASSES)

    def validation(self) -> dict[str, dict[str, torch.Tensor]]:
        """The validation events' embeddings (`tuning.n_val` events, captions as the test's), drawn from
        their own generator, so the test events are those of a run without them."""
        if self._val is None:
            rng = np.random.default_rng(self.seed + 3000)
            ev = self.world.sample_events(self.cfg.tuning.n_val, rng)
            raw = {m: self.world.render(ev, m, rng) for m in ("audio", "image")}
            captions = self.world.render(ev.repeat(self.cfg.eval.captions), "text", rng)
            raw["text"] = torch.cat([captions, World.class_prompts()])
            self._val = (embed_all(self.spaces, raw), np.repeat(np.arange(len(ev)), self.cfg.eval.captions), ev)
        return self._val[0]

    def val_row(self, emb) -> dict:
        self.validation()
        return evaluate(emb, self._val[1], self._val[2].cls, N_CLASSES)

    def tuned(self, arm, points) -> dict:
        """`arm(embeddings of every space, λ) -> embeddings`, each column at its λ chosen on validation."""
        val = self.validation()
        return select_on_validation(lambda lam: self.val_row(arm(val, lam)), lambda lam: self.row(arm(self.test, lam)),
                                    points)


def run_seed(cfg, seed: int, ckpt: Path) -> dict:
    """Train and evaluate every row of the main table and the λ curves for one seed."""
    r = SeedRun(cfg, seed, ckpt)
    inf = cfg.inference
    mean = inf.parallel_mean
    at_e, ver = (inf.at_expertise.lam_a, inf.at_expertise.lam_t), (inf.versatile.lam_a, inf.versatile.lam_t)
    lam_v, lam_tv = inf.displacement.lam_v, inf.displacement.lam_t
    c1 = r.bank("c_E1", r.pools, "U", "E1", "U", dense=True)
    c2 = r.bank("c_E2", r.pools, "U", "E2", "U", dense=True)
    # the shuffled-pairs floor: both experts' bonds trained on pseudo tuples whose targets are permuted
    c1_shuffled = r.bank("c_E1_shuffled", r.pools, "U", "E1", "U", dense=True, shuffled=True)
    c2_shuffled = r.bank("c_E2_shuffled", r.pools, "U", "E2", "U", dense=True, shuffled=True)
    # the main displacement bond (also the hub of the sequential bond); `bonds.dense` is the [recon] switch
    d_dense = r.bank("d_VT_dense" if cfg.bonds.dense else "d_VT_main_nodense", r.pools, "U", "U", "VT",
                     dense=cfg.bonds.dense)
    d_plain = r.bank("d_VT_nodense", r.pools, "U", "U", "VT", dense=False)
    mop1, mop2, single1 = mop_from_bank(c1), mop_from_bank(c2), mop_from_bank(c1, [0])
    P_d, P_d0 = mop_from_bank(d_dense), mop_from_bank(d_plain)
    T, U = r.test, r.test["U"]
    E1, E2 = (T["E1"], mop1), (T["E2"], mop2)
    shuffled = [(T["E1"], mop_from_bank(c1_shuffled)), (T["E2"], mop_from_bank(c2_shuffled))]
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
        "parallel_shuffled_ATE": r.row(combination_bond(U, shuffled, *at_e, mean)),
        "parallel_ATE": r.row(combination_bond(U, [E1, E2], *at_e, mean)),
        "parallel_versatile": r.row(combination_bond(U, [E1, E2], *ver, mean)),
        "d_VT_dense": r.row(D),
        "d_VT_nodense": r.row(D_nodense),
        "sequential_ATE": r.row(combination_bond(D, seq_pairs, *at_e, mean)),
        "sequential_versatile": r.row(combination_bond(D, seq_pairs, *ver, mean)),
        # references with no training (papers/freebind/fusion.py) at the bond's own λ; the shuffled
        # two-expert bond at Versatile, for the cross-space (audio-image) task
        "late_fusion_ATE": r.row(late_fusion(U, [T["E1"], T["E2"]], *at_e)),
        "late_fusion_versatile": r.row(late_fusion(U, [T["E1"], T["E2"]], *ver)),
        "late_fusion_E1_ATE": r.row(late_fusion(U, [T["E1"]], *at_e)),
        "experts_avg": r.row(late_fusion({}, [T["E1"], T["E2"]], 1.0, 1.0)),
        "late_fusion_VT": r.row(late_fusion(U, [T["VT"]], 0.0, lam_tv, lam_v)),
        "parallel_shuffled_versatile": r.row(combination_bond(U, shuffled, *ver, mean)),
    }
    # each arm again at the λ best on validation events, per column, over one grid per bond kind: the bond
    # and its late fusion get the same grid, so the same number of validation evaluations
    tn = cfg.tuning
    comb_grid, disp_grid = grid(tn.lam_a, tn.lam_t), grid(tn.lam_v, tn.lam_t)
    tuning = {
        "parallel_val": r.tuned(lambda S, lam: combination_bond(
            S["U"], [(S["E1"], mop1), (S["E2"], mop2)], *lam, mean), comb_grid),
        "late_fusion_val": r.tuned(lambda S, lam: late_fusion(S["U"], [S["E1"], S["E2"]], *lam), comb_grid),
        "d_VT_val": r.tuned(lambda S, lam: displacement_bond(S["U"], S["VT"], P_d, *lam), disp_grid),
        "late_fusion_VT_val": r.tuned(lambda S, lam: late_fusion(S["U"], [S["VT"]], 0.0, lam[1], lam[0]), disp_grid),
    }
    rows.update({name: t["row"] for name, t in tuning.items()})
    sweep = cfg.sweep
    lam_t_curve = [{"lam": lt, **r.row(combination_bond(U, [E1, E2], sweep.fixed_lam_a, lt, mean))} for lt in sweep.lam_t]
    lam_a_curve = [{"lam": la, **r.row(combination_bond(U, [E1, E2], la, sweep.fixed_lam_t, mean))} for la in sweep.lam_a]
    if cfg.eval.save_explore:
        save_explore(r, [E1, E2], mean, ckpt / "explore.npz")
    return {"seed": seed, "visibility": float(cfg.world.envelope_visibility), "rows": rows,
            "tuning": {name: {k: t[k] for k in ("chosen", "evaluations")} for name, t in tuning.items()},
            "lam_t_curve": lam_t_curve, "lam_a_curve": lam_a_curve, "params": r.params, "timing": r.timing}


def save_explore(r: SeedRun, experts, mean: str, path: Path) -> None:
    """Test embeddings for the notebook's live re-scoring: U, and both experts projected into U."""
    proj = {f"hat_{m}": project_experts(experts, m, mean).numpy() for m in ("audio", "text")}
    np.savez_compressed(
        path, **{f"U_{m}": r.test["U"][m].numpy() for m in MODALITIES}, **proj,
        labels=r.test_events.cls, colour=r.test_events.colour, envelope=r.test_events.envelope,
        caption_item=r.caption_item, tokens=r.test_raw["text"].numpy(), n_test=r.n_test)


def run_fragile(cfg, seed: int, visibility: float, ckpt: Path, reliability: float | None = None) -> dict:
    """Bonded (parallel AT-Expertise) against expert text→audio R@1 at one U-visibility and one loudness
    reliability of the experts' captions (default: the config's). The experts and bonds of each
    reliability live under their own folder; U (which no reliability changes) is shared under `ckpt`."""
    if reliability is None:
        reliability = float(cfg.spaces.at_intensity_reliability)
    cfg = type(cfg).wrap({**cfg, "spaces": {**cfg.spaces, "at_intensity_reliability": float(reliability)}})
    r = SeedRun(cfg, seed, Path(ckpt) / f"rel{round(100 * reliability)}", visibility=visibility, with_vt=False,
                u_ckpt=ckpt)
    at_e = (cfg.inference.at_expertise.lam_a, cfg.inference.at_expertise.lam_t)
    c1 = mop_from_bank(r.bank("c_E1", r.pools, "U", "E1", "U", dense=True))
    c2 = mop_from_bank(r.bank("c_E2", r.pools, "U", "E2", "U", dense=True))
    T = r.test
    rows = {"U": r.row(T["U"]), "E1": r.row(T["E1"]), "E2": r.row(T["E2"]),
            "c_E1_mop_ATE": r.row(combination_bond(T["U"], [(T["E1"], c1)], *at_e)),
            "parallel_ATE": r.row(combination_bond(T["U"], [(T["E1"], c1), (T["E2"], c2)], *at_e,
                                                   cfg.inference.parallel_mean)),
            "late_fusion_ATE": r.row(late_fusion(T["U"], [T["E1"], T["E2"]], *at_e)),
            "experts_avg": r.row(late_fusion({}, [T["E1"], T["E2"]], 1.0, 1.0))}
    return {"visibility": visibility, "reliability": float(reliability), "seed": seed, "rows": rows,
            "timing": r.timing}
