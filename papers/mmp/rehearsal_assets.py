"""A small data layout in the official MMP format (mahmoodlab/MMP `src/`), written to a folder, so the
full profile's loaders and experiments can be rehearsed end to end without TCGA.

It writes what the official repository and its feature extraction hold, with the same names and
columns: per-fold split CSVs (one row per slide, the official 61 columns, DSS and OS survival), UNI-style
slide features as `.h5` (a `features` array, some with CLAM's leading batch axis, and `coords`) and
`.pt` (a tensor) in the official `feats_h5` / `feats_pt` folders, `rna_clean.csv` (cases x genes) and
`hallmarks_signatures.csv` (a column of member genes per pathway, NaN-padded). The traps of the real
files are in it too: several slides per case, cases without DSS, a case without RNA and one with RNA
only, signature genes missing from the RNA table and a repeated member gene.

The numbers are seeded draws with a weak planted signal (the risk shifts one feature direction and the
genes of the first pathway): the rehearsal checks the layout and the code path, not the paper's result.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

# the header of the official TCGA-BRCA split CSVs (src/splits/survival/TCGA_BRCA_overall_survival_k=0/train.csv)
SPLIT_COLUMNS = (
    "case_id,slide_id,submitter_id,tumor_type,project_id,site_of_resection_or_biopsy,sex,OncotreeCode,"
    "cancer_type_detailed,tissue_source_site,is_code_valid,mpp,op,level0_mag,OncoTreeSiteCode,"
    "age_at_initial_pathologic_diagnosis,race,ajcc_pathologic_tumor_stage,clinical_stage,histological_type,"
    "histological_grade,initial_pathologic_dx_year,menopause_status,birth_days_to,vital_status,tumor_status,"
    "last_contact_days_to,death_days_to,cause_of_death,new_tumor_event_type,new_tumor_event_site,"
    "new_tumor_event_site_other,new_tumor_event_dx_days_to,treatment_outcome_first_course,margin_status,"
    "residual_tumor,os_censorship,os_survival_days,dss_censorship,dss_survival_days,dfi_censorship,"
    "dfi_survival_days,pfi_censorship,pfi_survival_days,redaction,pfi_v1_censorship,pfi_v1_survival_days,"
    "pfi_v2_censorship,pfi_v2_survival_days,pfs_censorship,pfs_survival_days,dss_cr_censorship,"
    "dss_cr_survival_days,dfi_cr_censorship,dfi_cr_survival_days,pfi_cr_censorship,pfi_cr_survival_days,"
    "pfi_v1_cr_censorship,pfi_v1_cr_survival_days,pfi_v2_cr_censorship,pfi_v2_cr_survival_days").split(",")
# the official feature folder under a cohort's data root (scripts/survival/mmp.sh)
FEATURES_DIR = "extracted_mag20x_patch256_fp/extracted-vit_large_patch16_224.dinov2.uni_mass100k"
ALPHANUMERIC = np.array(list("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"))


def write_official_layout(folder: str | Path, *, n_patients: int = 40, dim: int = 16, n_folds: int = 5,
                          n_pathways: int = 8, n_genes: int = 60, n_patches: tuple = (20, 120),
                          study: str = "BRCA", seed: int = 0) -> dict:
    """Write the layout under `folder` and return the `full` config section that reads it
    (split_dir, features_dir, rna_csv, signatures_csv, site_column).

    Folds deal the tissue-source sites round-robin (test sites never in training, as in the official
    splits); every case is in exactly one test fold. Every third case has two slides; half the slides
    are `.h5`, half `.pt`; one case in ten has no DSS; the last case has no RNA."""
    if n_patients < 2 * n_folds:
        raise ValueError(f"n_patients must be at least 2 x n_folds = {2 * n_folds} (two sites per test fold)")
    folder = Path(folder)
    rng = np.random.default_rng(seed)
    sites = _unique_codes(rng, 2 * n_folds, 2)
    cases = [f"TCGA-{sites[i % len(sites)]}-{code}" for i, code in enumerate(_unique_codes(rng, n_patients, 4))]
    risk = rng.normal(size=n_patients)   # the planted signal
    features_dirs, slides = _write_features(folder, cases, risk, dim, n_patches, rng)
    split_dir = _write_splits(folder, cases, slides, risk, sites, n_folds, study, rng)
    rna_csv, signatures_csv = _write_rna_tables(folder, cases, risk, n_genes, n_pathways, study, rng)
    return {"split_dir": str(split_dir), "features_dir": [str(d) for d in features_dirs], "rna_csv": str(rna_csv),
            "signatures_csv": str(signatures_csv), "site_column": "tissue_source_site"}


def _write_features(folder: Path, cases: list, risk, dim: int, n_patches: tuple, rng) -> tuple[list, list]:
    """The slides' UNI-style features in the official `feats_h5` and `feats_pt` folders, alternating
    formats; the patches of a riskier case shift along one direction. Returns the two folders and
    the (case, slide id) pairs."""
    h5_dir, pt_dir = folder / FEATURES_DIR / "feats_h5", folder / FEATURES_DIR / "feats_pt"
    h5_dir.mkdir(parents=True, exist_ok=True)
    pt_dir.mkdir(parents=True, exist_ok=True)
    direction = rng.normal(size=dim) / np.sqrt(dim)
    slides = []
    for i, case in enumerate(cases):
        for j in range(1 + int(i % 3 == 1)):                               # every third case: two slides
            slide = f"{case}-01Z-00-DX{j + 1}.{_uuid(rng)}"
            n = int(rng.integers(n_patches[0], n_patches[1] + 1))
            x = (rng.normal(size=(n, dim)) + 0.5 * risk[i] * direction).astype(np.float32)
            _write_slide(h5_dir, pt_dir, slide, x, as_pt=len(slides) % 2 == 1, batch_axis=len(slides) % 4 == 2)
            slides.append((case, slide))
    return [h5_dir, pt_dir], slides


def _write_splits(folder: Path, cases: list, slides: list, risk, sites: list, n_folds: int, study: str, rng) -> Path:
    """The fold folders' train.csv and test.csv (one row per slide, the official columns): OS for
    every case, DSS missing for one case in ten. Returns the split_dir pattern with `{fold}`."""
    time = np.round(rng.exponential(1500.0 * np.exp(-0.7 * risk)) + 1.0)
    censorship = (rng.uniform(size=len(cases)) < 0.7).astype(float)      # 1 = no event, as in TCGA
    no_dss = np.arange(len(cases)) % 10 == 7
    rows = pd.DataFrame([_split_row(case, slide, case.split("-")[1], study) for case, slide in slides],
                        columns=SPLIT_COLUMNS)
    i = rows["case_id"].map({c: k for k, c in enumerate(cases)}).to_numpy()   # the case of each row
    rows["os_survival_days"], rows["os_censorship"] = time[i], censorship[i]
    rows["dss_survival_days"] = np.where(no_dss[i], np.nan, time[i])
    rows["dss_censorship"] = np.where(no_dss[i], np.nan, censorship[i])
    rows = rows.sort_values(["case_id", "slide_id"], ignore_index=True)
    fold_of_site = {s: k % n_folds for k, s in enumerate(sorted(sites))}   # sites dealt to the test folds
    test_fold = rows["tissue_source_site"].map(fold_of_site)
    split_dir = folder / "splits" / "survival" / f"TCGA_{study}_overall_survival_k={{fold}}"
    for k in range(n_folds):
        out = Path(str(split_dir).format(fold=k))
        out.mkdir(parents=True, exist_ok=True)
        rows[test_fold != k].to_csv(out / "train.csv", index=False)
        rows[test_fold == k].to_csv(out / "test.csv", index=False)
    return split_dir


def _write_rna_tables(folder: Path, cases: list, risk, n_genes: int, n_pathways: int, study: str, rng) -> tuple:
    """`hallmarks_signatures.csv` (NaN-padded member-gene columns; the first pathway repeats a gene and
    names one the RNA lacks) and `rna_clean.csv` (cases x genes, the case id in the unnamed first
    column; the last case missing, one case in no split added; the first pathway's genes carry the
    risk). Returns their paths."""
    genes = [f"GENE{g:04d}" for g in range(n_genes)]
    members = {f"HALLMARK_PATHWAY_{c:02d}": sorted(rng.choice(genes, size=int(rng.integers(3, 13)), replace=False))
               for c in range(n_pathways)}
    first = next(iter(members))
    members[first] = members[first] + [members[first][0], "NOT_IN_RNA"]
    signatures_csv = folder / "data_csvs" / "rna" / "metadata" / "hallmarks_signatures.csv"
    signatures_csv.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({name: pd.Series(g) for name, g in members.items()}).to_csv(signatures_csv, index=False)
    expression = rng.normal(size=(len(cases), n_genes))
    expression[:, [genes.index(g) for g in members[first] if g in genes]] += 0.8 * risk[:, None]
    rna = pd.DataFrame(expression, index=cases, columns=genes).drop(index=cases[-1])
    rna.loc[f"TCGA-{cases[0].split('-')[1]}-ZZZZ"] = rng.normal(size=n_genes)
    rna_csv = folder / "data_csvs" / "rna" / "hallmarks" / study / "rna_clean.csv"
    rna_csv.parent.mkdir(parents=True, exist_ok=True)
    rna.sort_index().to_csv(rna_csv)
    return rna_csv, signatures_csv


def _unique_codes(rng, n: int, length: int) -> list[str]:
    """n distinct upper-case alphanumeric codes of `length` characters (TCGA site and patient codes)."""
    codes: dict[str, None] = {}
    while len(codes) < n:
        codes["".join(rng.choice(ALPHANUMERIC, size=length))] = None
    return list(codes)


def _uuid(rng) -> str:
    """An upper-case UUID as TCGA slide names carry (8-4-4-4-12 hex digits)."""
    digits = "".join(rng.choice(list("0123456789ABCDEF"), size=32))
    return "-".join(digits[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))


def _write_slide(h5_dir: Path, pt_dir: Path, slide: str, x: np.ndarray, *, as_pt: bool, batch_axis: bool) -> None:
    """One slide's features: `<slide>.pt` (a tensor) or `<slide>.h5` (`features`, [N, d] or [1, N, d],
    and `coords`)."""
    if as_pt:
        import torch

        torch.save(torch.from_numpy(x), pt_dir / f"{slide}.pt")
        return
    import h5py

    with h5py.File(h5_dir / f"{slide}.h5", "w") as f:
        f["features"] = x[None] if batch_axis else x
        f["coords"] = np.stack([np.arange(len(x)) * 256, np.zeros(len(x), int)], axis=1)


def _split_row(case: str, slide: str, site: str, study: str) -> dict:
    """The descriptive columns of one official split row (survival columns are filled after)."""
    return {"case_id": case, "slide_id": slide, "submitter_id": case, "tumor_type": "Primary",
            "project_id": f"TCGA-{study}", "tissue_source_site": site, "is_code_valid": True, "mpp": 0.25,
            "op": -1, "level0_mag": 40.0}


def main(argv=None) -> None:
    """`python -m papers.mmp.rehearsal_assets --out DIR`: the official layout at the rehearsal's feature
    width, and DIR/overlay.yaml (rehearsal.yaml with $ASSETS = DIR), whose `full` paths must be the
    ones written."""
    from shared.rehearsal import parser, rehearsal_config, write_overlay

    args = parser("mmp").parse_args(argv)
    config = Path(__file__).with_name("config.yaml")
    cfg = rehearsal_config(config, args.out)
    written = write_official_layout(args.out, n_patients=100, dim=cfg.data.dim, n_folds=cfg.eval.n_folds)
    expected = {k: cfg.full[k] for k in written}
    if {k: (list(map(str, v)) if isinstance(v, list) else str(v)) for k, v in expected.items()} != written:
        raise ValueError(f"papers/mmp/rehearsal.yaml's full paths {expected} differ from the layout written {written}")
    write_overlay(config, args.out)


if __name__ == "__main__":
    main()
