"""Full-profile loaders: a round trip on tiny fixture files in the paper's formats."""
import h5py
import numpy as np
import pandas as pd
import pytest

from papers.mmp.loaders import load_tcga_cohort, read_gmt, read_xena_rna
from shared.assets import MissingAssetError
from shared.config import Config


def write_fixtures(root):
    rng = np.random.default_rng(0)
    feats = root / "feats"
    feats.mkdir()
    slides = {"TCGA-AA-0001-01Z-00-DX1.abc": rng.normal(size=(7, 4)),
              "TCGA-AA-0001-01Z-00-DX2.def": rng.normal(size=(1, 5, 4)),   # with a leading batch axis
              "TCGA-BB-0002-01Z-00-DX1.ghi": rng.normal(size=(3, 4)),
              "TCGA-CC-0003-01Z-00-DX1.jkl": rng.normal(size=(2, 4))}       # no survival row
    for name, x in slides.items():
        with h5py.File(feats / f"{name}.h5", "w") as f:
            f["features"] = x.astype(np.float32)
            f["coords"] = np.zeros((x.shape[-2], 2))
    rna = pd.DataFrame({"TCGA-AA-0001-11": [9.0, 9.0, 9.0, 9.0], "TCGA-AA-0001-01": [1.0, 2.0, 3.0, 4.0],
                        "TCGA-BB-0002-01": [5.0, 6.0, 7.0, 8.0], "TCGA-CC-0003-01": [0.0, 0.0, 0.0, 0.0]},
                       index=pd.Index(["TP53", "MYC", "EGFR", "NOTAGENE"], name="sample"))
    rna.to_csv(root / "HiSeqV2_PANCAN", sep="\t")
    (root / "h.all.gmt").write_text("HALLMARK_A\thttp://x\tTP53\tMYC\tABSENT\n"
                                    "HALLMARK_B\thttp://y\tMYC\tEGFR\n")
    pd.DataFrame({"case_id": ["TCGA-AA-0001", "TCGA-BB-0002"], "site": ["AA", "BB"],
                  "dss_survival_days": [100.0, 250.0], "dss_censorship": [0, 1]}).to_csv(root / "surv.csv", index=False)
    return slides


def test_loader_round_trip(tmp_path):
    slides = write_fixtures(tmp_path)
    assert read_gmt(tmp_path / "h.all.gmt")["HALLMARK_B"] == ["MYC", "EGFR"]
    rna = read_xena_rna(tmp_path / "HiSeqV2_PANCAN")
    assert rna.loc["TCGA-AA-0001", "TP53"] == 1.0          # the primary tumour (01), not normal (11)
    cfg = Config.wrap({"features_dir": str(tmp_path / "feats"), "rna_path": str(tmp_path / "HiSeqV2_PANCAN"),
                       "gmt_path": str(tmp_path / "h.all.gmt"), "survival_csv": str(tmp_path / "surv.csv")})
    cohort = load_tcga_cohort(cfg)
    assert len(cohort) == 2
    expected = np.concatenate([slides["TCGA-AA-0001-01Z-00-DX1.abc"], slides["TCGA-AA-0001-01Z-00-DX2.def"][0]])
    np.testing.assert_allclose(cohort.bags[0], expected.astype(np.float32))
    np.testing.assert_allclose(cohort.bags[1], slides["TCGA-BB-0002-01Z-00-DX1.ghi"].astype(np.float32))
    # genes: the Hallmark genes present in the table, sorted: EGFR, MYC, TP53
    np.testing.assert_allclose(cohort.genes, [[3.0, 2.0, 1.0], [7.0, 6.0, 5.0]])
    assert [list(p) for p in cohort.pathways] == [[1, 2], [0, 1]]
    np.testing.assert_array_equal(cohort.event, [True, False])
    np.testing.assert_array_equal(cohort.time, [100.0, 250.0])
    assert list(cohort.site) == [0, 1]


def test_missing_input_says_which_key(tmp_path):
    write_fixtures(tmp_path)
    cfg = Config.wrap({"features_dir": str(tmp_path / "nowhere"), "rna_path": None, "gmt_path": None,
                       "survival_csv": None})
    with pytest.raises(MissingAssetError, match="full.features_dir"):
        load_tcga_cohort(cfg)


def test_survival_reads_the_official_split_layout(tmp_path):
    """The official MMP split CSVs: one row per slide, the site as `tissue_source_site`, os_* and dss_*
    columns side by side, some cases without DSS. One row per case comes back, DSS only."""
    from papers.mmp.loaders import read_survival

    rows = pd.DataFrame({
        "case_id": ["TCGA-3C-AALI", "TCGA-3C-AALI", "TCGA-A1-A0SD", "TCGA-5L-AAT0"],
        "slide_id": ["TCGA-3C-AALI-01Z-00-DX2.X", "TCGA-3C-AALI-01Z-00-DX1.Y", "TCGA-A1-A0SD-01Z-00-DX1.Z",
                     "TCGA-5L-AAT0-01Z-00-DX1.W"],
        "tissue_source_site": ["3C", "3C", "A1", "5L"],
        "os_censorship": [1.0, 1.0, 0.0, 1.0], "os_survival_days": [4005.0, 4005.0, 437.0, 1477.0],
        "dss_censorship": [1.0, 1.0, 0.0, None], "dss_survival_days": [4005.0, 4005.0, 430.0, None]})
    rows.to_csv(tmp_path / "train.csv", index=False)
    surv = read_survival(tmp_path / "train.csv")
    assert list(surv.index) == ["TCGA-3C-AALI", "TCGA-A1-A0SD"]          # no DSS for TCGA-5L-AAT0
    assert list(surv["site"]) == ["3C", "A1"] and list(surv["time"]) == [4005.0, 430.0]
    assert list(surv["event"]) == [False, True]                          # dss_censorship 0 = an event
    # without the site column, the barcode's tissue-source-site field gives the same codes
    rows.drop(columns="tissue_source_site").to_csv(tmp_path / "no_site.csv", index=False)
    assert list(read_survival(tmp_path / "no_site.csv")["site"]) == ["3C", "A1"]
    rows.drop(columns="tissue_source_site").assign(case_id=["a", "a", "b", "c"]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="site column"):
        read_survival(tmp_path / "bad.csv")


def test_pt_features_load_like_h5(tmp_path):
    """CLAM-style .pt feature files (a [N, d] tensor) give the same bags as .h5 files; a slide with both
    is read once, from its .h5."""
    import torch

    from papers.mmp.loaders import load_patient_bags

    a, b = np.arange(6, dtype=np.float32).reshape(3, 2), np.ones((2, 2), np.float32)
    torch.save(torch.from_numpy(a), tmp_path / "TCGA-AA-0001-01Z-00-DX1.x.pt")
    torch.save(torch.from_numpy(b)[None], tmp_path / "TCGA-AA-0001-01Z-00-DX2.y.pt")   # a leading batch axis
    with h5py.File(tmp_path / "TCGA-AA-0001-01Z-00-DX2.y.h5", "w") as f:
        f["features"] = 2 * b
    bags = load_patient_bags(tmp_path, ["TCGA-AA-0001"])
    np.testing.assert_array_equal(bags["TCGA-AA-0001"], np.concatenate([a, 2 * b]))
