"""The full profile's FID/KID path (torchmetrics, a TorchScript feature network from a local file) and
the one-line stop when its weights are missing."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

from shared.image_metrics import InceptionFeatures, fid_kid

REPO = Path(__file__).resolve().parents[2]


class StandIn(nn.Module):
    """A randomly initialised stand-in with the InceptionV3 file's call signature."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 5, stride=4)

    def forward(self, x: torch.Tensor, return_features: bool = False) -> torch.Tensor:
        return self.conv(x / 255.0).mean((2, 3))


def test_fid_kid_through_torchmetrics_with_local_weights(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "inception.pt"
    torch.jit.script(StandIn()).save(str(path))
    feat = InceptionFeatures(path)
    rng = np.random.default_rng(0)
    a = rng.uniform(size=(20, 16, 16, 3)).astype(np.float32)
    b = np.clip(a * 0.3 + 0.6, 0, 1).astype(np.float32)
    same, other = fid_kid(a, a, feat), fid_kid(b, a, feat)
    assert abs(same["fid"]) < 1e-3 and abs(same["kid"]) < 1e-3
    assert other["fid"] > 10 * max(same["fid"], 1e-4) and other["kid"] > 1e-4


def test_missing_inception_weights_stop_with_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "papers.e2gan", "latency_table", "--profile", "smoke", "--out",
                        str(tmp_path / "out"), "--set", "metrics.fid=true", "--set",
                        f"metrics.inception_path={tmp_path / 'nope.pt'}"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "metrics.inception_path" in lines[0] and "Traceback" not in r.stderr
