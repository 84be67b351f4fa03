"""The full profile's headline metrics (`full_metrics.FullMetrics`): FID through torchmetrics in the
features of a local TorchScript Inception (the rehearsal's stand-in), and a one-line stop when LPIPS
cannot run (no torchvision here) or its weights are missing."""
import pytest
import torch

from papers.p2l.full_metrics import FullMetrics
from shared.assets import MissingAssetError
from shared.config import Config, ConfigError
from shared.image_metrics import write_stand_in_inception


def _cfg(**metrics):
    base = {"lpips": False, "lpips_net": "vgg", "torch_home": None, "fid": False, "inception_path": None}
    return Config.wrap({"metrics": {**base, **metrics}})


def test_fid_against_the_ground_truth_with_a_local_inception(tmp_path):
    path = write_stand_in_inception(tmp_path / "inception-2015-12-05.pt")
    metrics = FullMetrics(_cfg(fid=True, inception_path=str(path)))
    gen = torch.Generator().manual_seed(0)
    gt = torch.rand(24, 3, 32, 32, generator=gen) * 2 - 1
    washed = gt * 0.3 + 0.5   # low contrast, brighter
    same, worse = metrics.fid(gt, gt), metrics.fid(washed, gt)
    assert abs(same) < 1e-6 and worse > 1e-2
    assert metrics.scores(gt, gt) == {}   # no LPIPS asked


def test_off_by_default_and_one_line_stops(tmp_path):
    off = FullMetrics(_cfg())
    assert off.fid(torch.zeros(2, 3, 8, 8), torch.zeros(2, 3, 8, 8)) is None and off.scores(None, None) == {}
    with pytest.raises(MissingAssetError, match="metrics.inception_path"):
        FullMetrics(_cfg(fid=True, inception_path=str(tmp_path / "nope.pt")))
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001 - this machine: torchvision does not import beside the CPU torch wheel
        with pytest.raises(ConfigError, match="metrics.lpips needs torchvision"):
            FullMetrics(_cfg(lpips=True, torch_home=str(tmp_path)))
    else:
        with pytest.raises(MissingAssetError, match="metrics.torch_home"):
            FullMetrics(_cfg(lpips=True, torch_home=str(tmp_path / "nope")))
