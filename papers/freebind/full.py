"""Full profile: the real spaces' embeddings, precomputed per dataset as arrays at local paths.

Layout under `full.embeddings_dir` (written by `python -m papers.freebind.make_arrays`, see there):

    <dataset>/<space>_<modality>.npy   float32 (N, d), one row per item; spaces: imagebind, clap_g,
                                       clap_m, internvl; modalities: audio, image, text
    <dataset>/labels.npy               classification: int (N,) (or multi-hot (N, C) for AudioSet)
    <dataset>/classes.txt              classification: one class name per line (the class count C)
    <dataset>/<space>_prompts.npy      classification: (C·P, d) class-prompt text embeddings, rows grouped by class
    <dataset>/caption_item.npy         retrieval, optional: int (N_captions,), the item of each text row
                                       (AudioCaps, Clotho, COCO, Flickr30K have 5 captions per item);
                                       without it, row i of the query modality matches row i of the gallery

Released projectors (Hugging Face `Viglong/FreeBind`) under `full.projectors_dir`:
`<folder>/{mix,A,T,V,AT,AV,TV}/best.pt`, folders IB_PP_{G,M}_Proj, InternVL_IB_Proj, InternVL_IB_PP_{G,M}_Proj.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from shared.assets import require_path

from .bonds import MOP_POOLS, combination_bond, displacement_bond
from .evaluation import class_embeddings, recall_at_k, zero_shot_accuracy
from .projector import MoP, Projector

DIMS = {"imagebind": 1024, "clap_g": 512, "clap_m": 512, "internvl": 768}
# dataset -> (task, query modality, gallery modality)
DATASETS = {
    "esc50": ("cls", "audio", None), "audioset": ("mlcls", "audio", None), "imagenet": ("cls", "image", None),
    "audiocaps": ("ret", "text", "audio"), "clotho": ("ret", "text", "audio"),
    "vggss": ("ret", "audio", "image"), "flickrnet": ("ret", "audio", "image"),
    "coco": ("ret", "text", "image"), "flickr30k": ("ret", "text", "image"),
}
ALIASES = {"at_r1": "audiocaps_r1", "at_r5": "audiocaps_r5", "av_r1": "vggss_r1", "av_r5": "vggss_r5",
           "vt_r1": "coco_r1", "vt_r5": "coco_r5", "audio_acc": "esc50_acc", "image_acc": "imagenet_acc"}
FETCH = ("the embedding arrays made by `python -m papers.freebind.make_arrays` from ImageBind-Huge, "
         "CLAP (630k-fusion-best, music_speech_audioset_epoch_15_esc_89.98) and InternVL-14B-224px")


def load_array(path: Path) -> torch.Tensor:
    return torch.from_numpy(np.load(path, allow_pickle=False)).float()


def load_dataset(root: str | Path, name: str, spaces=tuple(DIMS)) -> dict:
    """{space: {modality|'prompts': tensor}, 'labels': array} for one dataset (L2-normalised)."""
    base = require_path(Path(require_path(root, what="FreeBind embedding arrays", fetch=FETCH,
                                          config_key="full.embeddings_dir")) / name,
                        what=f"FreeBind embeddings of {name}", fetch=FETCH, config_key="full.embeddings_dir")
    out: dict = {}
    for space in spaces:
        emb = {}
        for f in sorted(base.glob(f"{space}_*.npy")):
            key = f.stem[len(space) + 1:]
            emb[key] = F.normalize(load_array(f), dim=-1)
        if emb:
            out[space] = emb
    labels = base / "labels.npy"
    if labels.exists():
        out["labels"] = np.load(labels, allow_pickle=False)
        classes = require_path(base / "classes.txt", what=f"the class names of {name}", config_key="full.embeddings_dir",
                               fetch="`python -m papers.freebind.make_arrays --classes` (it writes classes.txt)")
        out["n_classes"] = len([c for c in classes.read_text().splitlines() if c.strip()])
    items = base / "caption_item.npy"
    if items.exists():
        out["caption_item"] = np.load(items, allow_pickle=False)
    return out


def load_projector(path: str | Path, d_in: int, d_out: int, hidden: int = 2048) -> Projector:
    """A `best.pt` into a `Projector` (weights_only). Keys of another layout are matched in order,
    by shape (Linear, BN, Linear, BN), since the released checkpoints' key names are unverified [U]."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    state = state.get("state_dict", state.get("model", state)) if isinstance(state, dict) else state
    proj = Projector(d_in, d_out, hidden)
    mine = proj.state_dict()
    if set(state) == set(mine):
        proj.load_state_dict(state)
    else:
        theirs = [v for v in state.values() if torch.is_tensor(v)]
        if len(theirs) != len(mine) or any(a.shape != b.shape for a, b in zip(theirs, mine.values())):
            raise ValueError(f"{path}: cannot map {len(theirs)} tensors onto the projector's {len(mine)}")
        proj.load_state_dict(dict(zip(mine, theirs)))
    return proj.eval()


def load_mop(root: str | Path, folder: str, d_in: int, d_out: int, hidden: int = 2048,
             members=tuple(MOP_POOLS)) -> MoP:
    base = require_path(Path(require_path(root, what="FreeBind projectors", fetch="huggingface.co/Viglong/FreeBind",
                                          config_key="full.projectors_dir")) / folder,
                        what=f"FreeBind projectors {folder}", fetch="huggingface.co/Viglong/FreeBind",
                        config_key="full.projectors_dir")
    return MoP([load_projector(base / m / "best.pt", d_in, d_out, hidden) for m in members]).eval()


def mean_average_precision(scores: np.ndarray, targets: np.ndarray) -> float:
    from sklearn.metrics import average_precision_score

    keep = targets.sum(0) > 0
    return 100.0 * float(average_precision_score(targets[:, keep], scores[:, keep], average="macro"))


def score_dataset(name: str, emb: dict, prompts: torch.Tensor | None, labels, n_classes: int | None = None,
                  caption_item=None) -> dict:
    """Metrics of one dataset for one (possibly bonded) embedding dict {modality: tensor}.

    n_classes: from the dataset's metadata (classes.txt), never from the labels seen. caption_item:
    the item of each text row, when items have several captions (each caption is a text→X query).
    """
    task, q, g = DATASETS[name]
    if task == "ret":
        if q not in emb or g not in emb:
            return {}
        r = recall_at_k(emb[q], emb[g], query_item=caption_item if q == "text" else None,
                        gallery_item=caption_item if g == "text" else None)
        return {f"{name}_r1": r[1], f"{name}_r5": r[5]}
    if q not in emb or prompts is None:
        return {}
    if n_classes is None:
        raise ValueError(f"{name}: the class count comes from classes.txt, which is missing")
    cls = class_embeddings(prompts, n_classes)
    if task == "mlcls":
        return {f"{name}_map": mean_average_precision((emb[q] @ cls.t()).numpy(), labels)}
    return {f"{name}_acc": zero_shot_accuracy(emb[q], cls, labels)}


def evaluate_full(cfg) -> dict:
    """Every row of the main table on the real embeddings, with the released projectors."""
    f, inf = cfg.full, cfg.inference
    d = f.dims
    P = {k: load_mop(f.projectors_dir, k, d[a], d[b], f.proj_hidden) for k, (a, b) in {
        "IB_PP_G_Proj": ("clap_g", "imagebind"), "IB_PP_M_Proj": ("clap_m", "imagebind"),
        "InternVL_IB_Proj": ("imagebind", "internvl"), "InternVL_IB_PP_G_Proj": ("clap_g", "internvl"),
        "InternVL_IB_PP_M_Proj": ("clap_m", "internvl")}.items()}
    single_g = MoP([P["IB_PP_G_Proj"].members[0]]).eval()
    mean = inf.parallel_mean
    at_e, ver = (inf.at_expertise.lam_a, inf.at_expertise.lam_t), (inf.versatile.lam_a, inf.versatile.lam_t)
    lam_v, lam_tv = inf.displacement.lam_v, inf.displacement.lam_t
    rows: dict = {}
    curves = {"lam_t_curve": [{"lam": x} for x in cfg.sweep.lam_t], "lam_a_curve": [{"lam": x} for x in cfg.sweep.lam_a]}
    for ds in f.datasets:
        data = load_dataset(f.embeddings_dir, ds)
        labels = data.get("labels")
        meta = (data.get("n_classes"), data.get("caption_item"))

        def both(space):  # test items followed by the class prompts as extra text rows
            e = dict(data.get(space, {}))
            n = len(e["text"]) if "text" in e else 0
            if "prompts" in e:
                e["text"] = torch.cat([e["text"], e.pop("prompts")]) if "text" in e else e.pop("prompts")
            return e, n

        (U, nU), (G, _), (M, _), (V, _) = both("imagebind"), both("clap_g"), both("clap_m"), both("internvl")
        eg, em = (G, P["IB_PP_G_Proj"]), (M, P["IB_PP_M_Proj"])
        D = displacement_bond(U, V, P["InternVL_IB_Proj"], lam_v, lam_tv) if U and V else {}
        seq = [(G, P["InternVL_IB_PP_G_Proj"]), (M, P["InternVL_IB_PP_M_Proj"])]
        variants = {"U": U, "E1": G, "E2": M, "VT": V}
        if U and G and M:
            variants.update({
                "c_E1_single_ATE": combination_bond(U, [(G, single_g)], *at_e),
                "c_E1_mop_ATE": combination_bond(U, [eg], *at_e),
                "parallel_ATE": combination_bond(U, [eg, em], *at_e, mean),
                "parallel_versatile": combination_bond(U, [eg, em], *ver, mean)})
        if D:
            variants["d_VT_dense"] = D
            if G and M:
                variants["sequential_ATE"] = combination_bond(D, seq, *at_e, mean)
                variants["sequential_versatile"] = combination_bond(D, seq, *ver, mean)
        for row, emb in variants.items():
            if not emb:
                continue
            rows.setdefault(row, {}).update(score_dataset(ds, _split(emb, nU), _prompts(emb, nU), labels, *meta))
        if U and G and M:
            for key, fixed in (("lam_t_curve", "lam_t"), ("lam_a_curve", "lam_a")):
                for point in curves[key]:
                    la, lt = (cfg.sweep.fixed_lam_a, point["lam"]) if fixed == "lam_t" else (point["lam"], cfg.sweep.fixed_lam_t)
                    emb = combination_bond(U, [eg, em], la, lt, mean)
                    point.update(score_dataset(ds, _split(emb, nU), _prompts(emb, nU), labels, *meta))
    for row in [*rows.values(), *curves["lam_t_curve"], *curves["lam_a_curve"]]:
        for alias, key in ALIASES.items():
            row.setdefault(alias, row.get(key))
    return {"rows": rows, **curves}


def _split(emb: dict, n_text: int) -> dict:
    return {m: (x[:n_text] if m == "text" else x) for m, x in emb.items()}


def _prompts(emb: dict, n_text: int):
    t = emb.get("text")
    return None if t is None or len(t) == n_text else t[n_text:]
