"""EVEREST's evaluation inside a multi-process job: two CPU processes (gloo) deal the test batches
between them (each decodes only its own) and gather the correct counts; the accuracy equals the
one-process accuracy exactly, random token pruning included (each clip keeps its one-process draw)."""
import json
import os
import socket
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

REPO = Path(__file__).resolve().parents[2]
N, BATCH, VIEWS = 22, 4, 2        # 6 batches, the last one short; 2 test views per video


class Videos:
    """Seeded multi-view test videos [b, views, C, F, H, W] and labels; records which items it decoded."""

    def __init__(self, shape):
        g = torch.Generator().manual_seed(0)
        self.video = torch.rand(N, VIEWS, *shape, generator=g)
        self.labels = torch.randint(0, 4, (N,), generator=g)
        self.read: list[int] = []

    def __len__(self):
        return N

    def batch(self, idx):
        self.read += idx.tolist()
        return self.video[idx], self.labels[idx]


def model(prune: str):
    from papers.everest.model import VideoClassifier, build_encoder
    from shared.config import load_config

    cfg = load_config(REPO / "papers" / "everest" / "config.yaml", "smoke")
    torch.manual_seed(0)
    m = VideoClassifier(build_encoder(cfg), 4, prune=prune, keep_ratio=0.6)
    shape = (cfg.data.channels, cfg.data.frames, cfg.data.size, cfg.data.size)
    return m, shape


@torch.no_grad()
def one_process_predictions(m, data) -> torch.Tensor:
    """The classes one process predicts, batch by batch with its pruning draws: made the labels, so the
    accuracy is 100% exactly when every clip gets its one-process draw and any other draw can lower it."""
    from papers.everest.train import derive_seed

    gen = torch.Generator().manual_seed(derive_seed(3, "eval-prune"))
    preds = []
    for i in range(0, N, BATCH):
        video = data.video[i:i + BATCH]
        probs = m(video.flatten(0, 1), gen).softmax(-1).view(len(video), VIEWS, -1).mean(1)
        preds.append(probs.argmax(-1))
    return torch.cat(preds)


def evaluate_all(prune: str) -> tuple[float, list[int]]:
    from papers.everest.train import evaluate

    m, shape = model(prune)
    data = Videos(shape)
    data.labels = one_process_predictions(m.eval(), data)
    return evaluate(m, data, BATCH, seed=3), data.read


def rank_main(rank: int, world: int, port: int, out: str) -> None:
    sys.path.insert(0, str(REPO))
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        result = {p: evaluate_all(p) for p in ("random", "top")}
        Path(out, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        torch.distributed.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_shard_the_test_set_and_gather_the_one_process_accuracy(tmp_path):
    mp.spawn(rank_main, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for prune in ("random", "top"):
        single, read = evaluate_all(prune)
        assert read == list(range(N))
        assert single == 100.0 and [r[prune][0] for r in ranks] == [single, single], prune
        shards = [set(r[prune][1]) for r in ranks]
        assert not shards[0] & shards[1] and shards[0] | shards[1] == set(range(N)), shards   # each read once
        assert shards[0] == {i for i in range(N) if (i // BATCH) % 2 == 0}


def test_scores_give_top1_and_the_mean_nll_of_the_true_class():
    """`scores` on single-view clips: top-1 of the logits and the mean cross-entropy of the true class (the
    lr grid's tie-break), in one process; a multi-view batch scores the mean softmax over its views."""
    from papers.everest.train import scores

    m, shape = model("top")
    data = Videos(shape)
    data.video = data.video[:, 0]                     # single-view clips [N, C, F, H, W]
    out = scores(m, data, BATCH, seed=3)
    with torch.no_grad():
        logits = m.eval()(data.video)
    assert out["top1"] == 100.0 * int((logits.argmax(-1) == data.labels).sum()) / len(data)
    assert out["nll"] == pytest.approx(float(torch.nn.functional.cross_entropy(logits, data.labels)), rel=1e-5)
