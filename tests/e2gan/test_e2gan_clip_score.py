"""The full profile's CLIP-score path (torchmetrics CLIPScore on a CLIP loaded from a local folder),
run offline on a tiny random CLIP saved here, and the one-line stop when that folder is missing."""
from pathlib import Path

import numpy as np
import pytest
import torch

from papers.e2gan.metrics import clip_score

REPO = Path(__file__).resolve().parents[2]


def tiny_clip(folder: Path) -> Path:
    """A randomly initialised CLIP (1 layer, 32-d, 32² images) with a byte-level tokenizer, saved as a
    transformers model + processor folder, as `metrics.clip_path` expects (the rehearsal's stand-in)."""
    from shared.rehearsal import write_tiny_clip

    return write_tiny_clip(folder)


def reference_scores(folder: Path, images: np.ndarray, prompts: list[str]) -> np.ndarray:
    """100 · cos(image, text) for every (image, prompt), straight from the model."""
    from transformers import CLIPModel, CLIPProcessor

    model, proc = CLIPModel.from_pretrained(folder), CLIPProcessor.from_pretrained(folder)
    u8 = (np.clip(images, 0, 1) * 255).astype(np.uint8)
    with torch.no_grad():
        img = model.get_image_features(**proc(images=list(u8), return_tensors="pt"))
        txt = model.get_text_features(**proc(text=prompts, return_tensors="pt", padding=True))
    img, txt = [t if torch.is_tensor(t) else t.pooler_output for t in (img, txt)]
    cos = torch.nn.functional.normalize(img, dim=-1) @ torch.nn.functional.normalize(txt, dim=-1).T
    return (100 * cos).numpy()


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    return tiny_clip(tmp_path_factory.mktemp("clip"))


def test_clip_score_matches_the_models_own_image_text_similarity(clip_dir):
    rng = np.random.default_rng(0)
    images = rng.uniform(size=(6, 24, 24, 3)).astype(np.float32)
    prompts = ["sepia", "cool blue night"]
    ref = reference_scores(clip_dir, images, prompts)
    for j, p in enumerate(prompts):
        # CLIPScore of a prompt: max(the mean over images of 100·cos, 0)
        assert clip_score(images, p, clip_dir) == pytest.approx(max(ref[:, j].mean(), 0), rel=1e-4, abs=1e-3)
    # it responds to the match: of one prompt's best- and worst-matching images, the best score higher
    j = int(np.argmax(ref.max(0)))
    order = np.argsort(ref[:, j])
    lo, hi = clip_score(images[order[:3]], prompts[j], clip_dir), clip_score(images[order[3:]], prompts[j], clip_dir)
    assert hi > lo and hi == pytest.approx(max(ref[order[3:], j].mean(), 0), rel=1e-4, abs=1e-3)


def test_missing_clip_weights_stop_with_one_line(tmp_path, capsys):
    """In process (the CLI's exit-2 path is the one the InceptionV3 test runs in a subprocess)."""
    from test_e2gan_paper_metrics import StandIn

    from papers.e2gan.experiments import EXPERIMENTS
    from shared.experiment import cli

    inception = tmp_path / "inception.pt"
    torch.jit.script(StandIn()).save(str(inception))
    with pytest.raises(SystemExit) as stop:
        cli("e2gan", EXPERIMENTS, REPO / "papers/e2gan/config.yaml",
            ["latency_table", "--profile", "smoke", "--out", str(tmp_path / "out"), "--set", "metrics.fid=true",
             "--set", f"metrics.inception_path={inception}", "--set", f"metrics.clip_path={tmp_path / 'no_clip'}"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "metrics.clip_path" in err[0] and "Traceback" not in err[0]
