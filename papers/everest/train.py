"""Pre-training (tube / EVEREST / ascending selection) and fine-tuning (full, top-60%, random-60%,
ascending, scratch): the training drivers and evaluation here;
masks, frame pairs, parameter groups and the lr schedule in `recipe.py`; the LightningModules in
`modules.py` (imported only by a training, so the other experiments do not pay for Lightning's
import), trained through `shared.training`. Imports run one way: recipe <- modules <- train.

Batches are drawn with replacement, `batch` indices per step from a generator seeded from
(seed, purpose) (`shared.sampling.RandomBatchSampler`), the same for every arm; masks, frame pairs
and random pruning come from their own seeded generators, whose states go into every checkpoint
with the loss curve. `last.ckpt` is written every `trainer.every_n_train_steps` steps and at the
end, so a killed run resumes exactly (`shared.training.fit`, keyed by the config hash and seed).
Each training writes its loss curve to `<ckpt_dir>/logs/metrics.csv`.
"""
from __future__ import annotations

from pathlib import Path

import torch

from shared.progress import progress
from shared.seeding import derive_seed

from .model import MaskedVideoAutoencoder, VideoClassifier


def pretrain(model: MaskedVideoAutoencoder, data, method: str, cfg, seed: int,
             ckpt_dir: Path, snapshots: dict[int, str] | None = None, device: str = "cpu",
             frames: str | None = None) -> list[float]:
    """Pre-train on `data` (len() and batch(idx) -> (video [b, C, F, H, W], labels)); writes
    ckpt_dir/<name>.pt weights at each snapshot step. Returns the loss of every step.

    The batch order (seed, "batches") is the same for every method; masks come from (seed, "masks").
    With `frames` ("information" or "uniform"), `data` holds candidate clips of 2·α·τ frames and each
    clip's τ frame pairs are drawn by `choose_pairs` (generator (seed, "frames"))."""
    from .modules import PretrainModule, Snapshots, batches, train

    p = cfg.pretrain
    module = PretrainModule(model, method, cfg, seed, frames)
    snap = Snapshots(ckpt_dir, snapshots or {})
    return train(module, batches(data, p.batch, p.steps, derive_seed(seed, "batches"), cfg.data.workers), cfg, seed, ckpt_dir,
                 device, [snap])


def finetune(model: VideoClassifier, data, cfg, seed: int,
             ckpt_dir: Path, device: str = "cpu") -> list[float]:
    """Supervised fine-tuning with label smoothing and layer-wise lr decay; same batches every arm."""
    from .modules import FinetuneModule, batches, train

    f = cfg.finetune
    module = FinetuneModule(model, cfg, seed)
    return train(module, batches(data, f.batch, f.steps, derive_seed(seed, "ft-batches"), cfg.data.workers), cfg, seed, ckpt_dir,
                 device)


def evaluate(model: VideoClassifier, data, batch: int, seed: int, device: str = "cpu") -> float:
    """Top-1 accuracy (%) of `scores`."""
    return scores(model, data, batch, seed, device)["top1"]


@torch.no_grad()
def scores(model: VideoClassifier, data, batch: int, seed: int, device: str = "cpu") -> dict[str, float]:
    """Top-1 accuracy (%) with the arm's own token pruning at test time, and the mean negative log
    likelihood of the true class (`nll`, nats). A batch of multi-view clips [b, views, C, F, H, W] is
    scored by the mean softmax over its views.

    Inside a multi-process (DDP) job the batches are dealt to the ranks (batch k to rank k mod world),
    each rank decodes and scores only its own, and the correct counts are summed over ranks: the same
    accuracy as one process, since the batches are the same and a rank still draws the random pruning
    of the batches it skips (one draw per clip, in batch order), so every clip gets its one-process draw."""
    from shared.sampling import world

    size, rank = world()
    model.to(device).eval()
    gen = torch.Generator().manual_seed(derive_seed(seed, "eval-prune"))
    correct, nll, skipped = 0, 0.0, []
    for k, i in enumerate(progress(range(0, len(data), batch), "evaluation (batches)")):
        n = min(i + batch, len(data)) - i
        if k % size != rank:
            skipped.append(n)
            continue
        video, labels = data.batch(torch.arange(i, i + n))
        views = video.shape[1] if video.dim() == 6 else 1
        if model.prune == "random":   # the draws of the batches other ranks score, as one process makes them
            for m in skipped:
                torch.rand(m * views, model.encoder.num_tokens, generator=gen)
        skipped = []
        if video.dim() == 6:
            b, v = video.shape[:2]
            probs = model(video.flatten(0, 1).to(device), gen).softmax(-1).view(b, v, -1).mean(1)
            log_probs = probs.clamp_min(1e-12).log()
        else:
            probs = model(video.to(device), gen)   # logits: the argmax is the softmax's
            log_probs = probs.log_softmax(-1)
        correct += int((probs.argmax(-1).cpu() == labels).sum())
        nll -= float(log_probs.cpu().gather(1, labels[:, None]).sum())
    if size > 1:
        dist = torch.distributed
        total = torch.tensor([correct, nll], dtype=torch.float64,
                             device=device if dist.get_backend() == "nccl" else "cpu")
        dist.all_reduce(total)
        correct, nll = int(round(total[0].item())), float(total[1].item())
    return {"top1": 100.0 * correct / len(data), "nll": nll / len(data)}
