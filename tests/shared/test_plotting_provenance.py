import json

import matplotlib.pyplot as plt
import pytest

from shared.plotting import save_figure
from shared.provenance import main as provenance_main
from shared.provenance import sidecar_path, write_sidecar

FIELDS = {"git", "profile", "config_hash", "seed", "packages", "device", "wall_time_s", "rule", "command"}


def test_figure_saved_as_png_and_pdf_reproducibly(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    png, pdf = save_figure(fig, tmp_path / "fig")
    assert png.read_bytes()[:4] == b"\x89PNG" and pdf.read_bytes()[:4] == b"%PDF"
    first = pdf.read_bytes()
    save_figure(fig, tmp_path / "fig")
    assert pdf.read_bytes() == first


def test_sidecar_has_every_field(tmp_path):
    art = tmp_path / "metrics.json"
    art.write_text("{}")
    side = write_sidecar(art, profile="tiny", config_hash="abc", seed=3, rule="r", wall_time_s=1.23456)
    assert side == sidecar_path(art) and side.name == "metrics.json.provenance.json"
    rec = json.loads(side.read_text())
    assert FIELDS <= set(rec)
    assert rec["profile"] == "tiny" and rec["seed"] == 3 and rec["wall_time_s"] == 1.235
    assert {"torch", "triton", "diffusers", "lightning"} <= set(rec["packages"])
    assert rec["packages"]["torch"].startswith("2.13.0")
    assert set(rec["git"]) == {"commit", "dirty"}


def test_sidecar_refuses_missing_artifact(tmp_path):
    with pytest.raises(FileNotFoundError, match="no artifact"):
        write_sidecar(tmp_path / "nope.png", profile="tiny")


def test_cli_stamps_files(tmp_path):
    art = tmp_path / "nb.ipynb"
    art.write_text("{}")
    provenance_main([str(art), "--profile", "smoke", "--rule", "paper_notebook"])
    assert json.loads(sidecar_path(art).read_text())["rule"] == "paper_notebook"
