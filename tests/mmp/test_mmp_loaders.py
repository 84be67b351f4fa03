"""Full-profile loaders on the official MMP layout (`rehearsal_assets.write_official_layout`): the folds
are the split files' folds, the RNA and pathway tables parse into the model's inputs, and bags stay on
disk until a computation reads them; the single readers on small hand-written tables."""
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
import torch

from conftest import REPO
from papers.mmp import bags as bags_module
from papers.mmp.loaders import (load_tcga_cohort, read_hallmark_signatures, read_rna_clean, split_folders,
                                survival_table)
from papers.mmp.rehearsal_assets import SPLIT_COLUMNS, write_official_layout
from shared.assets import MissingAssetError
from shared.config import Config, load_config

CFG = REPO / "papers" / "mmp" / "config.yaml"
N_FOLDS = 3


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    return write_official_layout(tmp_path_factory.mktemp("official"), n_patients=30, dim=6, n_folds=N_FOLDS,
                                 n_patches=(10, 90), seed=3)


def split_rows(full, k, split):
    return pd.read_csv(split_folders(full["split_dir"], N_FOLDS)[k] / f"{split}.csv")


def count_reads(monkeypatch):
    """Count the slide files read (every bag read goes through `bags.read_slide_features`)."""
    reads = []
    real = bags_module.read_slide_features

    def counted(path):
        reads.append(path)
        return real(path)

    monkeypatch.setattr(bags_module, "read_slide_features", counted)
    return reads


def test_official_layout_has_the_official_columns_and_formats(layout):
    rows = split_rows(layout, 0, "train")
    assert list(rows.columns) == SPLIT_COLUMNS and "Unnamed: 0" not in rows.columns
    assert rows["case_id"].duplicated().any()                           # one row per slide
    assert rows["dss_survival_days"].isna().any()                        # cases without DSS
    suffixes = {p.suffix for d in layout["features_dir"] for p in Path(d).iterdir()}
    assert suffixes == {".h5", ".pt"}
    assert pd.read_csv(layout["rna_csv"]).columns[0] == "Unnamed: 0"     # the case id: the unnamed first column
    assert pd.read_csv(layout["signatures_csv"]).isna().any().any()      # NaN-padded pathway columns


def test_cohort_folds_are_the_split_files(layout):
    cohort = load_tcga_cohort(Config.wrap(layout), N_FOLDS)
    rna_cases = set(pd.read_csv(layout["rna_csv"], index_col=0).index)
    assert cohort.case_ids == sorted(cohort.case_ids)
    everyone = set()
    for k, (tr, te) in enumerate(cohort.folds):
        for split, idx in (("train", tr), ("test", te)):
            rows = split_rows(layout, k, split).dropna(subset=["dss_survival_days"])
            expected = sorted(set(rows["case_id"]) & rna_cases)
            assert [cohort.case_ids[i] for i in idx] == expected, (k, split)
            everyone |= set(expected)
        assert not set(tr) & set(te)
    assert set(cohort.case_ids) == everyone
    # every case in exactly one test fold, as the official splits have it
    assert sorted(np.concatenate([te for _, te in cohort.folds])) == list(range(len(cohort)))
    # DSS survival, censorship 1 = no event
    rows = pd.concat([split_rows(layout, 0, s) for s in ("train", "test")])
    rows = rows.drop_duplicates("case_id").set_index("case_id")
    np.testing.assert_array_equal(cohort.time, rows.loc[cohort.case_ids, "dss_survival_days"].to_numpy())
    np.testing.assert_array_equal(cohort.event, rows.loc[cohort.case_ids, "dss_censorship"].to_numpy() == 0)


def test_rna_and_pathways_parse_into_the_models_inputs(layout):
    from papers.mmp.experiments.arms import build_model, cohort_folds, prepare_fold
    from papers.mmp.batches import make_batch

    cohort = load_tcga_cohort(Config.wrap(layout), N_FOLDS)
    rna = pd.read_csv(layout["rna_csv"], index_col=0)
    signatures = pd.read_csv(layout["signatures_csv"])
    names = sorted({g for c in signatures.columns for g in signatures[c].dropna()} & set(rna.columns))
    np.testing.assert_array_equal(cohort.genes, rna.loc[cohort.case_ids, names].to_numpy(np.float32))
    for pathway, column in zip(cohort.pathways, signatures.columns):   # no pathway is empty here
        assert [names[i] for i in pathway] == sorted(set(signatures[column].dropna()) & set(rna.columns))
    cfg = load_config(CFG, "smoke", ["data.source=tcga", "eval.folds=official_splits", f"eval.n_folds={N_FOLDS}"])
    folds = cohort_folds(cohort, cfg)
    assert folds is cohort.folds
    tr, te = folds[0]
    fold = prepare_fold(cohort, tr, cfg, 0, 0)
    assert fold["data"]["hist"].shape == (len(cohort), cfg.prototypes.n, 2 * 6 + 1)
    np.testing.assert_allclose(fold["data"]["genes"][tr].mean(0), 0, atol=1e-5)   # z-scored on the training fold
    for arm in ("mmp_trans", "abmil"):
        out = build_model(arm, cfg, cohort, 1, 0).eval()(make_batch(fold["data"], te))
        assert out.shape == (len(te), 1) and torch.isfinite(out).all()
    data = dict(fold["data"], bags=fold["capped"])
    out = build_model("full_transformer", cfg, cohort, 1, 0).eval()(make_batch(data, te))
    assert out.shape == (len(te), 1)
    assert max(len(b) for b in fold["capped"]) == cfg.eval.patch_cap   # the layout has bags above the cap


def test_cohort_reads_bags_only_when_a_computation_needs_them(layout, monkeypatch):
    from papers.mmp.experiments.arms import prepare_fold
    from papers.mmp.batches import make_batch

    reads = count_reads(monkeypatch)
    cohort = load_tcga_cohort(Config.wrap(layout), N_FOLDS)
    assert reads == []                                                    # loading reads no features
    assert all(isinstance(p, Path) for paths in cohort.bags.slides for p in paths)
    n_slides = [len(paths) for paths in cohort.bags.slides]
    cohort.bags[4]
    assert len(reads) == n_slides[4]                                      # one patient: its slides, once
    reads.clear()
    tr, te = cohort.folds[0]
    cfg = load_config(CFG, "smoke", ["data.source=tcga", "eval.folds=official_splits", f"eval.n_folds={N_FOLDS}"])
    fold = prepare_fold(cohort, tr, cfg, 0, 0)
    # each bag is read in full once per fold (PANTHER, one patient at a time); K-means reads only the
    # training bags' first rows (`bags.heads`), never a whole file; the model bags stay lazy
    assert sorted(map(str, reads)) == sorted(str(p) for paths in cohort.bags.slides for p in paths)
    reads.clear()
    batch = make_batch(fold["data"], te[:3])
    assert reads == []
    from papers.mmp.experiments.arms import build_model

    build_model("abmil", cfg, cohort, 1, 0)(batch)
    assert len(reads) == sum(n_slides[i] for i in te[:3])


def test_an_arm_trains_and_scores_on_the_official_folds(tmp_path, layout, monkeypatch):
    """`cindex_abmil` at smoke sizes on the layout: one c-index per official fold, tested on each split
    file's test cases, with every bag read through Lightning's batches, never all at once."""
    from papers.mmp.experiments import cindex_arm
    from shared.experiment import Run

    cfg = load_config(CFG, "smoke", ["data.source=tcga", "eval.folds=official_splits", f"eval.n_folds={N_FOLDS}"])
    cfg["full"] = Config.wrap(layout)
    cohort = load_tcga_cohort(cfg.full, N_FOLDS)
    reads = count_reads(monkeypatch)
    metrics = cindex_arm("abmil")(Run("mmp", "cindex_abmil", cfg, tmp_path))
    assert metrics["n_folds"] == N_FOLDS and len(metrics["cindex"]["values"]) == N_FOLDS
    assert metrics["test_sites"] == [np.unique(cohort.site[te]).tolist() for _, te in cohort.folds]
    assert reads and all(0 <= v <= 1 for v in metrics["cindex"]["values"])


def test_missing_input_says_which_key(tmp_path, layout):
    empty = Config.wrap({"split_dir": None, "features_dir": None, "rna_csv": None, "signatures_csv": None})
    with pytest.raises(MissingAssetError, match="full.split_dir"):
        load_tcga_cohort(empty, N_FOLDS)
    with pytest.raises(MissingAssetError, match="full.features_dir"):
        load_tcga_cohort(Config.wrap({**layout, "features_dir": str(tmp_path / "nowhere")}), N_FOLDS)
    with pytest.raises(MissingAssetError, match="full.split_dir"):   # asks for more folds than there are
        load_tcga_cohort(Config.wrap(layout), N_FOLDS + 1)
    with pytest.raises(ValueError, match="fold"):
        split_folders("/data/TCGA_BRCA_overall_survival_k=0", 5)


def test_a_slide_without_features_is_refused(tmp_path, layout):
    """As the official loader: every slide of a kept case needs its feature file."""
    import shutil

    features = [tmp_path / "h5", tmp_path / "pt"]
    for src, dst in zip(layout["features_dir"], features):
        shutil.copytree(src, dst)
    kept_slide = load_tcga_cohort(Config.wrap(layout), N_FOLDS).bags.slides[0][0].name
    next(p for d in features for p in d.iterdir() if p.name == kept_slide).unlink()
    with pytest.raises(ValueError, match="no feature file"):
        load_tcga_cohort(Config.wrap({**layout, "features_dir": [str(p) for p in features]}), N_FOLDS)


def test_official_folds_need_the_official_files():
    from papers.mmp.data import make_cohort
    from papers.mmp.experiments.arms import cohort_folds

    cfg = load_config(CFG, "smoke", ["eval.folds=official_splits"])
    with pytest.raises(ValueError, match="data.source: tcga"):
        cohort_folds(make_cohort(cfg.data, 0), cfg)


def test_survival_table_reads_the_official_split_rows():
    """One row per slide, the site as `tissue_source_site`, os_* and dss_* side by side, some cases
    without DSS: one row per case comes back, DSS only; rows that disagree on DSS are refused."""
    rows = pd.DataFrame({
        "case_id": ["TCGA-3C-AALI", "TCGA-3C-AALI", "TCGA-A1-A0SD", "TCGA-5L-AAT0"],
        "slide_id": ["TCGA-3C-AALI-01Z-00-DX2.X", "TCGA-3C-AALI-01Z-00-DX1.Y", "TCGA-A1-A0SD-01Z-00-DX1.Z",
                     "TCGA-5L-AAT0-01Z-00-DX1.W"],
        "tissue_source_site": ["3C", "3C", "A1", "5L"],
        "os_censorship": [1.0, 1.0, 0.0, 1.0], "os_survival_days": [4005.0, 4005.0, 437.0, 1477.0],
        "dss_censorship": [1.0, 1.0, 0.0, None], "dss_survival_days": [4005.0, 4005.0, 430.0, None]})
    surv = survival_table(rows)
    assert list(surv.index) == ["TCGA-3C-AALI", "TCGA-A1-A0SD"]          # no DSS for TCGA-5L-AAT0
    assert list(surv["site"]) == ["3C", "A1"] and list(surv["time"]) == [4005.0, 430.0]
    assert list(surv["event"]) == [False, True]                          # dss_censorship 0 = an event
    # without the site column, the barcode's tissue-source-site field gives the same codes
    assert list(survival_table(rows.drop(columns="tissue_source_site"))["site"]) == ["3C", "A1"]
    with pytest.raises(ValueError, match="site column"):
        survival_table(rows.drop(columns="tissue_source_site").assign(case_id=["a", "a", "b", "c"]))
    with pytest.raises(ValueError, match="more than one DSS value"):
        survival_table(rows.assign(dss_survival_days=[4005.0, 4000.0, 430.0, None]))


def test_rna_clean_is_cases_by_genes(tmp_path):
    """The official layout (case ids in the unnamed first column) and the preprocessing notebook's
    output (a `sample` column of sample barcodes, normal tissue 11 beside the tumour 01) read alike."""
    genes = {"TP53": [1.0, 2.0], "MYC": [3.0, 4.0]}
    pd.DataFrame(genes, index=["TCGA-AA-0001", "TCGA-BB-0002"]).to_csv(tmp_path / "official.csv")
    notebook = pd.DataFrame({"sample": ["TCGA-AA-0001-11", "TCGA-AA-0001-01", "TCGA-BB-0002-01"],
                             "TP53": [9.0, 1.0, 2.0], "MYC": [9.0, 3.0, 4.0]})
    notebook.to_csv(tmp_path / "notebook.csv")                           # with the notebook's integer index
    for name in ("official.csv", "notebook.csv"):
        rna = read_rna_clean(tmp_path / name)
        assert list(rna.index) == ["TCGA-AA-0001", "TCGA-BB-0002"], name
        np.testing.assert_array_equal(rna[["TP53", "MYC"]].to_numpy(), [[1.0, 3.0], [2.0, 4.0]])


def test_hallmark_signatures_are_columns_of_member_genes(tmp_path):
    (tmp_path / "sig.csv").write_text("HALLMARK_A,HALLMARK_B\nTP53,MYC\nMYC,EGFR\nTP53,\n,\n")
    assert read_hallmark_signatures(tmp_path / "sig.csv") == {"HALLMARK_A": ["TP53", "MYC"],
                                                              "HALLMARK_B": ["MYC", "EGFR"]}


def test_slide_bags_read_h5_and_pt_alike_and_views_read_nothing(tmp_path, monkeypatch):
    """CLAM-style .pt tensors and .h5 `features` give the same bags (a leading batch axis of 1
    dropped; the .h5 wins when a slide has both); selecting, keeping rows and counting patches read no
    features."""
    from papers.mmp.bags import SlideBags
    from papers.mmp.loaders import find_slide_files

    a, b = np.arange(6, dtype=np.float32).reshape(3, 2), np.ones((2, 2), np.float32)
    torch.save(torch.from_numpy(a), tmp_path / "TCGA-AA-0001-01Z-00-DX1.x.pt")
    torch.save(torch.from_numpy(b)[None], tmp_path / "TCGA-AA-0001-01Z-00-DX2.y.pt")
    with h5py.File(tmp_path / "TCGA-AA-0001-01Z-00-DX2.y.h5", "w") as f:
        f["features"] = 2 * b[None]
    files = find_slide_files([tmp_path], ["TCGA-AA-0001-01Z-00-DX1.x", "TCGA-AA-0001-01Z-00-DX2.y"])
    assert files["TCGA-AA-0001-01Z-00-DX2.y"].suffix == ".h5"
    bags = SlideBags([list(files.values()), [files["TCGA-AA-0001-01Z-00-DX1.x"]]])
    reads = count_reads(monkeypatch)
    view = bags[np.array([1, 0])].keep_rows([None, np.array([0, 4])]).tensors()
    assert bags.patch_counts() == [5, 3] and view.patch_counts() == [3, 2] and bags.dim == 2
    assert reads == []
    np.testing.assert_array_equal(bags[0], np.concatenate([a, 2 * b]))
    assert torch.equal(view[1], torch.from_numpy(np.concatenate([a, 2 * b])[[0, 4]]))
    np.testing.assert_array_equal(bags[1:][0], a)
    assert len(reads) == 2 + 2 + 1


def test_a_bags_head_reads_only_its_first_rows_and_equals_the_full_read(layout, monkeypatch):
    """`SlideBags.head(i, n)` (what K-means reads) equals the first n rows of the full read, across a
    patient's slides in order, for .h5 and .pt files, without a full read."""
    cohort = load_tcga_cohort(Config.wrap(layout), N_FOLDS)
    full = [cohort.bags[i] for i in range(len(cohort))]
    reads = count_reads(monkeypatch)
    for n in (1, 7, 50, 10_000):
        for i, bag in enumerate(full):
            np.testing.assert_array_equal(cohort.bags.head(i, n), bag[:n])
    assert reads == []
    assert any(len(paths) > 1 and bags_module.slide_shape(paths[0])[0] < 50 for paths in cohort.bags.slides)
