"""The two audio-text experts trained in one stacked fit equal their two separate fits."""
import copy
import warnings

import torch

from papers.freebind.spaces import make_encoder, train_pair, train_pairs_stacked
from papers.freebind.world import VOCAB


def _pairs(seed: int, n: int = 96):
    g = torch.Generator().manual_seed(seed)
    audio = torch.randn(n, 384, generator=g)
    text = torch.randint(1, VOCAB, (n, 6), generator=g)
    text[:, 4:] = 0   # padding, as the world's captions have
    return audio, text


def test_stacked_experts_equal_separate_fits(tmp_path):
    torch.manual_seed(0)
    init = [{m: make_encoder(m, 24, 8) for m in ("audio", "text")} for _ in range(2)]
    data = [_pairs(1), _pairs(2)]
    kw = dict(seed=3, epochs=2, batch=32, lr=3e-3)

    separate = copy.deepcopy(init)
    scales = [train_pair(enc["audio"], enc["text"], xa, xt, out_dir=tmp_path / f"E{k}", **kw).log_scale
              for k, (enc, (xa, xt)) in enumerate(zip(separate, data))]

    stacked = copy.deepcopy(init)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*performance drop.*")   # EmbeddingBag has no vmap rule
        module = train_pairs_stacked([e["audio"] for e in stacked], [e["text"] for e in stacked],
                            [d[0] for d in data], [d[1] for d in data], out_dir=tmp_path / "E12", **kw)

    for k in range(2):   # each member's own temperature, then its encoders' weights
        assert abs(scales[k].item() - torch.log(torch.tensor(1 / 0.07)).item()) > 1e-4, "temperature did not train"
        torch.testing.assert_close(module.log_scale[k], scales[k], atol=1e-5, rtol=1e-5)
        for m in ("audio", "text"):
            ref, got, start = (x[k][m].state_dict() for x in (separate, stacked, init))
            for name in ref:
                assert not torch.equal(ref[name], start[name]), f"{m}.{name} did not train"
                torch.testing.assert_close(got[name], ref[name], atol=1e-5, rtol=1e-4,
                                           msg=lambda s: f"member {k} {m}.{name}: {s}")
