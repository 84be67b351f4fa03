"""Full-profile inputs from local paths: per-slide .h5 patch features (UNI-style `features`),
a Xena-style RNA table, a Hallmark .gmt file and a survival CSV (case_id, site,
dss_survival_days, dss_censorship; censorship 1 = no event)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from shared.assets import require_path

from .data import Cohort

CASE_ID_LEN = 12   # TCGA-XX-XXXX


def read_slide_features(path: str | Path) -> np.ndarray:
    """The [N, d] features of one slide: the `features` array of an .h5 file, or the tensor of a .pt file
    (CLAM's `pt_files` layout, loaded with `weights_only=True`); a leading batch axis of 1 is dropped."""
    path = Path(path)
    if path.suffix == ".pt":
        import torch

        t = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(t, dict):
            t = t["features"]
        x = t.float().numpy()
    else:
        import h5py

        with h5py.File(path, "r") as f:
            x = np.asarray(f["features"][()], dtype=np.float32)
    return x.reshape(-1, x.shape[-1])


def load_patient_bags(features_dir: str | Path, case_ids) -> dict:
    """case id -> [N, d] features of all of that patient's slides (files named <slide id>.h5 or
    <slide id>.pt, where the slide id starts with the 12-character case id; .h5 wins when a slide has
    both), slides in name order."""
    features_dir = Path(features_dir)
    wanted = set(case_ids)
    files = {p.stem: p for p in sorted(features_dir.glob("*.pt"))}
    files.update({p.stem: p for p in sorted(features_dir.glob("*.h5"))})
    slides: dict[str, list[Path]] = {}
    for stem in sorted(files):
        case = stem[:CASE_ID_LEN]
        if case in wanted:
            slides.setdefault(case, []).append(files[stem])
    return {case: np.concatenate([read_slide_features(p) for p in paths]) for case, paths in slides.items()}


def read_gmt(path: str | Path) -> dict:
    """Gene sets of a .gmt file: name -> list of genes (the second field, a URL, is skipped)."""
    sets = {}
    for line in Path(path).read_text().splitlines():
        fields = line.rstrip("\n").split("\t")
        if len(fields) >= 3:
            sets[fields[0]] = [g for g in fields[2:] if g]
    return sets


def read_xena_rna(path: str | Path) -> pd.DataFrame:
    """A Xena table (genes x samples, first column the gene) as patients x genes: primary-tumour
    samples (type code 01) first, one row per 12-character case id."""
    table = pd.read_csv(path, sep="\t", index_col=0)
    samples = table.T
    samples = samples.loc[sorted(samples.index, key=lambda s: (s[13:15] != "01", s))]
    samples.index = [s[:CASE_ID_LEN] for s in samples.index]
    return samples[~samples.index.duplicated(keep="first")]


def read_survival(path: str | Path, site_column: str = "tissue_source_site") -> pd.DataFrame:
    """The survival table indexed by case id, with columns site, time (DSS days), event (bool).

    The official MMP split CSVs have one row per slide and name the site `tissue_source_site` (the
    TCGA tissue-source-site code); `site_column` names it in other tables. Without that column, a
    TCGA barcode's second field is the same code (TCGA-3C-AALI → 3C)."""
    df = pd.read_csv(path)
    missing = {"case_id", "dss_survival_days", "dss_censorship"} - set(df.columns)
    if missing:
        raise ValueError(f"{path}: missing columns {sorted(missing)}")
    df = df.dropna(subset=["dss_survival_days", "dss_censorship"]).drop_duplicates("case_id").set_index("case_id")
    if site_column in df.columns:
        site = df[site_column].astype(str)
    elif df.index.str.fullmatch(r"TCGA-\w\w-\w{4}").all():
        site = pd.Series(df.index.str.split("-").str[1], index=df.index)
    else:
        raise ValueError(f"{path}: no site column {site_column!r} (full.site_column), and the case ids are not "
                         "TCGA barcodes to read the tissue-source site from")
    return pd.DataFrame({"site": site, "time": df["dss_survival_days"].astype(float),
                         "event": df["dss_censorship"].astype(int) == 0})


def load_tcga_cohort(full_cfg) -> Cohort:
    """The paper's cohort from local files (patients with features, RNA and survival)."""
    fetch = "the MMP inputs (see papers/mmp/README.md, 'Full profile')"
    feats = require_path(full_cfg.features_dir, what="UNI patch features (.h5 per slide)", fetch=fetch,
                         config_key="full.features_dir")
    rna = read_xena_rna(require_path(full_cfg.rna_path, what="Xena RNA table", fetch=fetch, config_key="full.rna_path"))
    sets = read_gmt(require_path(full_cfg.gmt_path, what="Hallmark gene sets (.gmt)", fetch=fetch,
                                 config_key="full.gmt_path"))
    surv = read_survival(require_path(full_cfg.survival_csv, what="survival CSV", fetch=fetch,
                                      config_key="full.survival_csv"),
                         site_column=full_cfg.get("site_column", "tissue_source_site"))
    genes = sorted({g for s in sets.values() for g in s} & set(rna.columns))
    col = {g: i for i, g in enumerate(genes)}
    pathways = [np.array(sorted(col[g] for g in s if g in col)) for s in sets.values()]
    pathways = [p for p in pathways if len(p)]
    cases = [c for c in surv.index if c in rna.index]
    bags = load_patient_bags(feats, cases)
    cases = [c for c in cases if c in bags]
    if not cases:
        raise ValueError("no patient has patch features, RNA and survival: check the case ids of the inputs")
    surv = surv.loc[cases]
    site_codes = {s: i for i, s in enumerate(sorted(surv["site"].unique()))}
    return Cohort(bags=[bags[c] for c in cases], genes=rna.loc[cases, genes].to_numpy(np.float32),
                  pathways=pathways, time=surv["time"].to_numpy(), event=surv["event"].to_numpy(),
                  site=surv["site"].map(site_codes).to_numpy(), proportions=None, grade=None,
                  graded=None, grade_directions=None, cross_pair=None, activity=None, log_hazard=None,
                  centres=None)
