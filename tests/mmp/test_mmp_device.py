"""Device-correct tensors: every arm's forward creates its tensors on the model's device, and moves
the bags (read on the host, as a lazy SlideBags view is) there. Checked on the meta device, where a
tensor created without device= lands on the CPU and the next op that mixes it with the model's
raises. MMP-OT is left out: its Sinkhorn stopping rule reads values (.item()), which meta tensors do
not have."""
import pytest
import torch

from papers.mmp.data import make_cohort
from papers.mmp.experiments.arms import build_model
from shared.config import load_config
from conftest import REPO

ARMS = ["abmil", "full_transformer", "pathway", "mmp_trans", "mmp_histo", "mmp_gene", "token_linear", "token_mlp"]


@pytest.fixture(scope="module")
def setup():
    cfg = load_config(REPO / "papers" / "mmp" / "config.yaml", "smoke")
    return cfg, make_cohort(cfg.data, 0)


@pytest.mark.parametrize("arm", ARMS)
def test_forward_keeps_every_tensor_on_the_models_device(setup, arm):
    cfg, cohort = setup
    d = cfg.data.dim
    model = build_model(arm, cfg, cohort, 1, 0).to("meta").eval()
    batch = {"hist": torch.zeros(3, cfg.prototypes.n, 2 * d + 1, device="meta"),
             "genes": torch.zeros(3, cohort.genes.shape[1], device="meta"),
             "bags": [torch.from_numpy(b) for b in cohort.bags[:3]]}   # host tensors, as a batch's bags are
    out = model(batch)
    assert out.device.type == "meta" and out.shape == (3, 1)
