"""The full profile's inputs, in the official MMP layout (mahmoodlab/MMP `src/`), from local paths:

- fold folders `splits/survival/TCGA_<study>_overall_survival_k=<k>/{train,test}.csv`, one row per
  slide (`case_id`, `slide_id`, `tissue_source_site`, the `os_*`/`dss_*` survival columns, ...). They
  fix the folds and carry the survival: DSS, `dss_survival_days` and `dss_censorship` (1 = no event);
- per-slide UNI patch features `<slide_id>.h5` (a `features` array) or `<slide_id>.pt` (a tensor), in
  one or more folders (the official `feats_h5` and `feats_pt`);
- `data_csvs/rna/hallmarks/<study>/rna_clean.csv`: cases x genes, the first column the case id (the
  official loader reads it with `index_col=0`), the Hallmark genes of Xena's HiSeqV2_PANCAN;
- `data_csvs/rna/metadata/hallmarks_signatures.csv`: one column per pathway, its member genes down the
  rows (NaN-padded).

`load_tcga_cohort` joins them into a `Cohort` whose bags stay on disk until read (`bags.SlideBags`),
with the official folds beside it.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from shared.assets import require_path

from .bags import SlideBags
from .data import Cohort

CASE_ID_LEN = 12   # TCGA-XX-XXXX
SPLITS = ("train", "test")   # the official survival splits have no validation set
FETCH = "the official MMP inputs (see papers/mmp/README.md, 'Full profile')"


def split_folders(split_dir: str, n_folds: int) -> list[Path]:
    """The fold folders named by `split_dir`, a path with `{fold}` where the fold number goes
    (e.g. .../splits/survival/TCGA_BRCA_overall_survival_k={fold})."""
    if "{fold}" not in str(split_dir):
        raise ValueError(f"full.split_dir must mark the fold number with {{fold}} (e.g. "
                         f".../TCGA_BRCA_overall_survival_k={{fold}}), got {split_dir!r}")
    return [Path(os.path.expanduser(str(split_dir).format(fold=k))) for k in range(n_folds)]


def read_official_splits(split_dir: str, n_folds: int) -> tuple[pd.DataFrame, list[dict]]:
    """Every row of the folds' train.csv and test.csv (fold 0 train first), and each fold's case ids
    {"train": [...], "test": [...]} in file order."""
    rows, folds = [], []
    for k, folder in enumerate(split_folders(split_dir, n_folds)):
        fold = {}
        for split in SPLITS:
            path = require_path(folder / f"{split}.csv", what=f"official {split} split of fold {k}", fetch=FETCH,
                                config_key="full.split_dir")
            df = pd.read_csv(path)
            missing = {"case_id", "slide_id"} - set(df.columns)
            if missing:
                raise ValueError(f"{path}: missing columns {sorted(missing)}")
            fold[split] = list(dict.fromkeys(df["case_id"].astype(str)))
            rows.append(df)
        overlap = set(fold["train"]) & set(fold["test"])
        if overlap:
            raise ValueError(f"{folder}: {len(overlap)} cases are in both train.csv and test.csv, "
                             f"e.g. {sorted(overlap)[:3]}")
        folds.append(fold)
    return pd.concat(rows, ignore_index=True), folds


def survival_table(rows: pd.DataFrame, site_column: str = "tissue_source_site") -> pd.DataFrame:
    """One row per case (indexed by case id): site, time (DSS days), event (bool), from split rows
    (one per slide). Cases without DSS are dropped, as the official loader drops NaN rows; a case whose
    rows disagree on DSS is refused (the official loader requires one survival value per case).

    The site is `site_column` (the TCGA tissue-source-site code in the official CSVs); without that
    column, a TCGA barcode's second field is the same code (TCGA-3C-AALI → 3C)."""
    missing = {"case_id", "dss_survival_days", "dss_censorship"} - set(rows.columns)
    if missing:
        raise ValueError(f"split CSVs: missing columns {sorted(missing)}")
    df = rows.dropna(subset=["dss_survival_days", "dss_censorship"]).astype({"case_id": str})
    if not set(df["dss_censorship"].unique()) <= {0, 1}:
        raise ValueError(f"dss_censorship must be 0 or 1, found {sorted(df['dss_censorship'].unique())}")
    values = df.groupby("case_id")[["dss_survival_days", "dss_censorship"]].nunique()
    conflicting = values.index[(values > 1).any(axis=1)]
    if len(conflicting):
        raise ValueError(f"{len(conflicting)} cases have more than one DSS value across the split CSVs, "
                         f"e.g. {list(conflicting[:3])}")
    df = df.drop_duplicates("case_id").set_index("case_id")
    if site_column in df.columns:
        site = df[site_column].astype(str)
    elif df.index.str.fullmatch(r"TCGA-\w\w-\w{4}").all():
        site = pd.Series(df.index.str.split("-").str[1], index=df.index)
    else:
        raise ValueError(f"split CSVs: no site column {site_column!r} (full.site_column), and the case ids are "
                         "not TCGA barcodes to read the tissue-source site from")
    return pd.DataFrame({"site": site, "time": df["dss_survival_days"].astype(float),
                         "event": df["dss_censorship"].astype(int) == 0})


def find_slide_files(features_dirs: list, slide_ids) -> dict:
    """slide id -> its feature file, `<slide_id>.h5` or `<slide_id>.pt` in any of `features_dirs`
    (the .h5 wins when a slide has both). Every slide must have one, as the official loader requires."""
    found = {}
    for suffix in (".pt", ".h5"):   # .h5 last, so it wins
        for folder in features_dirs:
            found.update({p.stem: p for p in sorted(Path(folder).glob(f"*{suffix}"))})
    missing = [s for s in slide_ids if s not in found]
    if missing:
        raise ValueError(f"{len(missing)} slides of the split CSVs have no feature file (<slide_id>.h5 or .pt) "
                         f"in full.features_dir {[str(d) for d in features_dirs]}, e.g. {missing[:3]}: extract "
                         "their UNI features or point full.features_dir at them")
    return {s: found[s] for s in slide_ids}


def read_rna_clean(path: str | Path) -> pd.DataFrame:
    """The official `rna_clean.csv` as cases x genes, indexed by the 12-character case id.

    The case id is the first column (a `case_id` or `sample` column when there is one, as in the
    official preprocessing notebook's output); every other column is a gene. Sample barcodes
    (TCGA-XX-XXXX-01) are cut to the case id with the primary tumour (type 01) first, and the first row
    of a case is kept, as the official loader keeps it."""
    table = pd.read_csv(path)
    id_column = next((c for c in ("case_id", "sample") if c in table.columns), table.columns[0])
    ids = table.pop(id_column).astype(str)
    secondary = [len(s) > CASE_ID_LEN and s[13:15] != "01" for s in ids]
    order = np.argsort(secondary, kind="stable")
    table = table.iloc[order]
    table.index = [s[:CASE_ID_LEN] for s in ids.iloc[order]]
    return table[~table.index.duplicated(keep="first")]


def read_hallmark_signatures(path: str | Path) -> dict:
    """The official `hallmarks_signatures.csv`: pathway (a column) -> its member genes (the column's
    non-empty cells, each gene once, in file order)."""
    table = pd.read_csv(path)
    return {name: list(pd.unique(table[name].dropna().astype(str))) for name in table.columns}


def pathway_inputs(gene_columns, signatures: dict) -> tuple[list, list]:
    """The genes the model reads (every pathway gene present in the RNA table, sorted) and each
    pathway's indices into them (its member genes present in the table, sorted, as the official
    loader selects them). A pathway with none of its genes in the table is dropped."""
    present = set(gene_columns)
    genes = sorted({g for members in signatures.values() for g in members} & present)
    col = {g: i for i, g in enumerate(genes)}
    pathways = [np.array(sorted(col[g] for g in members if g in col), dtype=int) for members in signatures.values()]
    return genes, [p for p in pathways if len(p)]


def load_tcga_cohort(full_cfg, n_folds: int) -> Cohort:
    """The paper's cohort from the official files: the cases of the split CSVs that have DSS and RNA
    (sorted, as the official loader intersects them), their slides' feature files (read lazily), the
    pathway genes, and the `n_folds` official folds as (train, test) index pairs into the cohort."""
    if not full_cfg.split_dir:   # stops with the message that names what to fetch and the key to set
        require_path(None, what="official split folders (.../TCGA_<study>_overall_survival_k={fold})", fetch=FETCH,
                     config_key="full.split_dir")
    rows, fold_cases = read_official_splits(full_cfg.split_dir, n_folds)
    dirs = full_cfg.features_dir if isinstance(full_cfg.features_dir, list) else [full_cfg.features_dir]
    features_dirs = [require_path(d, what="UNI patch features (<slide_id>.h5 / .pt)", fetch=FETCH,
                                  config_key="full.features_dir") for d in dirs]
    rna = read_rna_clean(require_path(full_cfg.rna_csv, what="official rna_clean.csv", fetch=FETCH,
                                      config_key="full.rna_csv"))
    signatures = read_hallmark_signatures(require_path(full_cfg.signatures_csv,
                                                       what="official hallmarks_signatures.csv",
                                                       fetch=FETCH, config_key="full.signatures_csv"))
    surv = survival_table(rows, site_column=full_cfg.get("site_column", "tissue_source_site"))
    cases = sorted(set(surv.index) & set(rna.index))
    if not cases:
        raise ValueError("no case of the split CSVs has DSS survival and a row in rna_clean.csv: check the case ids")
    slides = rows.astype({"case_id": str, "slide_id": str}).drop_duplicates("slide_id")
    slides = slides[slides["case_id"].isin(cases)].groupby("case_id", sort=False)["slide_id"].apply(list)
    files = find_slide_files(features_dirs, [s for c in cases for s in slides[c]])
    genes, pathways = pathway_inputs(rna.columns, signatures)
    surv = surv.loc[cases]
    position = {c: i for i, c in enumerate(cases)}
    folds = [tuple(np.array(sorted(position[c] for c in fold[split] if c in position), dtype=int) for split in SPLITS)
             for fold in fold_cases]
    site_codes = {s: i for i, s in enumerate(sorted(surv["site"].unique()))}
    return Cohort(bags=SlideBags([[files[s] for s in slides[c]] for c in cases]),
                  genes=rna.loc[cases, genes].to_numpy(np.float32), pathways=pathways,
                  time=surv["time"].to_numpy(), event=surv["event"].to_numpy(),
                  site=surv["site"].map(site_codes).to_numpy(), proportions=None, grade=None,
                  graded=None, grade_directions=None, cross_pair=None, activity=None, log_hazard=None,
                  centres=None, folds=folds, case_ids=cases)
