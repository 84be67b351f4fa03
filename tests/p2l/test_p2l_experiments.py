"""Per-image records become samples that pair across methods: `_solve_batches`, `record_scores`, `cell`."""
from pathlib import Path

import numpy as np
import pytest
import torch

from papers.p2l import build_operator, solve
from papers.p2l.experiments.problems import _solve_batches, cell, record_scores
from shared.config import load_config
from shared.samples import combine, sample

from test_p2l_solver import CAPTIONS, tiny_ldm

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "p2l" / "config.yaml"


@pytest.fixture(scope="module")
def ldm():
    return tiny_ldm()


def test_solve_batches_keeps_each_image_in_its_place(ldm):
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "solve.batch_size=1"])
    g = torch.Generator().manual_seed(0)
    op = build_operator("sr", 16, factor=4)
    y = op.measure(torch.rand(2, 3, 16, 16, generator=g) * 2 - 1, 0)
    x, nfe, wall, traj, per_image, calls = _solve_batches("p2l", y, op, ldm, cfg, 5, CAPTIONS, record_every=1)
    assert calls == {"nfe": 4, "decoder": 4, "encoder": 1}   # K = 1: 2 UNet + 2 D per step; E projects once
    assert x.shape == (2, 3, 16, 16) and per_image["off_range"].shape == (2, 2)
    # batch b is image b, starting from row b of the z_T drawn for all images (seed 5) whatever the batch
    # size, its other draws seeded 5 + b: its records are those of solving that image alone
    size = ldm.unet.config.sample_size
    z_T = torch.randn(2, ldm.latent_channels, size, size, generator=torch.Generator().manual_seed(5))
    alone = solve("p2l", y[1:2], op, ldm, steps=2, seed=6, captions=CAPTIONS[1:], record_every=1, z_init=z_T[1:2])
    assert torch.equal(x[1:2], alone.x)
    for k in ("off_range", "prompt_cos", "null_cos"):
        np.testing.assert_allclose(per_image[k][:, 1], alone.per_image[k][:, 0].numpy())
    # the tuned prompt's caption rank: one 0/1 record per image, only for methods that tune the prompt
    assert per_image["caption_top1"].shape == (1, 2) and set(per_image["caption_top1"].ravel()) <= {0.0, 1.0}
    assert per_image["caption_top1"][0, 1] == 0.0          # "blue cross light" is not one of the world's captions
    *_, ldps_records, _ = _solve_batches("ldps", y, op, ldm, cfg, 5, CAPTIONS, record_every=1)
    assert "caption_top1" not in ldps_records


def test_record_scores_are_per_image():
    records = {"off_range": np.array([[0.8, 0.6, 0.4], [0.4, 0.2, 0.1]]),
               "prompt_cos": np.array([[0.1, 0.2, 0.3], [0.5, 0.6, 0.7]]),
               "null_cos": np.array([[0.1, 0.2, 0.3], [0.1, 0.2, 0.3]])}
    scores = record_scores(records)
    np.testing.assert_allclose(scores["off_range"], [0.6, 0.4, 0.25])
    np.testing.assert_allclose(scores["final_off_range"], [0.4, 0.2, 0.1])
    np.testing.assert_allclose(scores["prompt_cos"], [0.5, 0.6, 0.7])
    np.testing.assert_allclose(scores["null_cos"], [0.1, 0.2, 0.3])
    assert record_scores({}) == {}                   # no records (tuning runs): no scores
    # two methods' samples of the same images pair by index
    gap = combine([sample(scores["prompt_cos"], "image"), sample(scores["null_cos"], "image")], lambda a, b: a - b)
    assert gap["unit"] == "image" and gap["n"] == 3 and gap["values"] == pytest.approx([0.4, 0.4, 0.4])


def test_cell_shows_mean_and_std_of_a_sample():
    assert cell(sample([0.5, 0.7], "image")) == "0.600 ± 0.141"
    assert cell(sample([70.5], "seed")) == 70.5       # one run: the value, no std
    assert cell(40) == 40


def test_full_profile_images_are_centre_cropped_not_squashed(tmp_path):
    """A 60×20 image whose left third is blue: a centre crop keeps only red; a plain resize to a square
    would squash the blue third in. Files are taken in name order, the first n_val for validation."""
    from PIL import Image

    from papers.p2l.experiments.problems import load_images

    img = np.zeros((20, 60, 3), np.uint8)
    img[:, :, 0] = 255
    img[:, :20] = (0, 0, 255)
    for name in ("a.png", "b.png"):
        Image.fromarray(img).save(tmp_path / name)
    cfg = load_config(CONFIG, "smoke", ["image_size=8", f"full.images_path={tmp_path}", "data.n_val=1"])
    test = load_images(cfg, "test", 1)
    assert test["images"].shape == (1, 3, 8, 8) and test["captions"] is None
    rgb = (test["images"][0] + 1) * 127.5
    assert rgb[0].min() > 200 and rgb[2].max() < 50   # all red: the blue third was cropped away


def test_full_profile_reads_an_imagenet_style_split_list(tmp_path):
    """ImageNet's layout (class folders) with a split list (ctest10k / val-1k style, "<wnid>/<file> <label>"):
    the images are the listed ones in the list's order, the first n_val for validation and the next ones
    for the test; without the list, every image under the folder in path order; a listed file that is
    missing, or too few images, stops with one line naming it."""
    from papers.p2l.experiments.problems import image_files, load_images
    from papers.p2l.rehearsal_assets import write_imagenet_split
    from shared.assets import MissingAssetError

    listing = write_imagenet_split(tmp_path / "imagenet", 3, 16)
    root = tmp_path / "imagenet" / "val"
    sets = ["image_size=8", f"full.images_path={root}", "data.n_val=1"]
    cfg = load_config(CONFIG, "smoke", [*sets, f"full.images_list={listing}"])
    listed = [line.split()[0] for line in listing.read_text().splitlines()]
    assert [f.relative_to(root).as_posix() for f in image_files(cfg)] == listed != sorted(listed)
    val, test = load_images(cfg, "val", 1), load_images(cfg, "test", 2)
    assert val["images"].shape == (1, 3, 8, 8) and test["images"].shape == (2, 3, 8, 8)
    assert not torch.equal(val["images"][0], test["images"][0])
    unlisted = load_config(CONFIG, "smoke", sets)
    assert [f.relative_to(root).as_posix() for f in image_files(unlisted)] == sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*.JPEG")) and len(image_files(unlisted)) == 5
    with pytest.raises(MissingAssetError, match="has 3"):
        load_images(cfg, "test", 3)
    (root / listed[1]).unlink()
    with pytest.raises(MissingAssetError, match=f"1 of the 3 images .*first: {listed[1]}"):
        image_files(cfg)


def test_every_import_of_the_experiments_resolves_function_local_ones_too():
    """The experiments import some modules inside functions (Lightning only where a job trains): each such
    relative import names a module and attributes that exist at its package depth."""
    import ast
    import importlib

    import papers.p2l.experiments as pkg

    for path in Path(pkg.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:   # relative to the package, in every module
                target = importlib.import_module("." * node.level + (node.module or ""), pkg.__name__)
                for alias in node.names:
                    assert hasattr(target, alias.name) or importlib.util.find_spec(
                        f"{target.__name__}.{alias.name}"), f"{path.name}: {node.module}.{alias.name}"


def test_the_oracle_runs_only_where_its_claims_read_it():
    """`method_tasks` keeps the oracle to SR×4 and box inpainting (the tasks its claims read); without
    captions (full) no oracle runs at all."""
    from papers.p2l.experiments.task_solutions import task_methods

    cfg = load_config(CONFIG, "tiny")
    assert task_methods(cfg, "sr") == ["ldps", "psld", "p2l", "oracle_projection"]
    assert task_methods(cfg, "inpaint_box") == ["ldps", "psld", "p2l", "oracle_projection"]
    assert task_methods(cfg, "gblur") == task_methods(cfg, "sr", captions=False) == ["ldps", "psld", "p2l"]
