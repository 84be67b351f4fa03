"""What batching seeds saves: K small models trained as one `shared.seed_stack.SeedStack` against K
separate trainings, in process CPU seconds, from one run on this machine (one thread).

    python tools/bench_seed_stack.py [--k 3] [--save benchmarks/seed_stack.json]

Two settings per model size: a plain PyTorch loop (the matmuls and the optimiser alone) and a Lightning
fit through `shared.training` (what the papers run: hooks, logging, checkpoints per fit). A benchmark,
not a test: the ratios move with the processor; the equality of the results is tested in
tests/shared/test_seed_stack.py.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from shared.seed_stack import SeedStack
from shared.training import EpochSeededSampler, fit, make_trainer

SIZES = [  # (input, width, batch): FreeBind's expert encoders, then smaller
    (384, 192, 256), (64, 32, 128), (64, 16, 8)]


def mlp(d_in: int, width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(d_in, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 8))


def cpu(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def plain_loop(models, xs, stacked: bool, steps: int, batch: int) -> None:
    if stacked:
        models = [SeedStack(models)]
        xs = [torch.stack(xs)]
    for m, x in zip(models, xs):
        opt = torch.optim.Adam(m.parameters(), lr=1e-3, foreach=True)
        for step in range(steps):
            i = (step * batch) % (x.shape[-2] - batch + 1)
            xb = x[..., i:i + batch, :]
            loss = m(xb).pow(2).mean(dim=(-1, -2)).sum() if stacked else m(xb).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


class Regress(L.LightningModule):
    def __init__(self, net: nn.Module, stacked: bool):
        super().__init__()
        self.net, self.stacked = net, stacked

    def training_step(self, batch, _):
        (x,) = batch
        if self.stacked:
            return self.net(x.transpose(0, 1)).pow(2).mean(dim=(-1, -2)).sum()
        return self.net(x).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3, foreach=True)


def lightning_fits(models, xs, stacked: bool, epochs: int, batch: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [(SeedStack(models), torch.stack(xs, 1))] if stacked else list(zip(models, xs))
        for j, (net, x) in enumerate(jobs):
            loader = DataLoader(TensorDataset(x), batch_size=batch, sampler=EpochSeededSampler(len(x), 0),
                                drop_last=True)
            trainer = make_trainer(Path(tmp) / f"fit{j}", seed=0, max_epochs=epochs, progress=False)
            fit(trainer, Regress(net, stacked), loader)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--n", type=int, default=20000, help="rows per member")
    ap.add_argument("--save", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for d_in, width, batch in SIZES:
        torch.manual_seed(0)
        xs = [torch.randn(args.n, d_in) for _ in range(args.k)]
        row = {"input": d_in, "width": width, "batch": batch, "k": args.k}
        steps = 2 * (args.n // batch)   # two epochs, as the Lightning fits
        for name, run in (("plain", lambda s: plain_loop([mlp(d_in, width) for _ in range(args.k)], xs, s, steps, batch)),
                          ("lightning", lambda s: lightning_fits([mlp(d_in, width) for _ in range(args.k)], xs, s, 2,
                                                                 batch))):
            sep, stk = cpu(lambda: run(False)), cpu(lambda: run(True))
            row[name] = {"separate_cpu_s": round(sep, 2), "stacked_cpu_s": round(stk, 2), "ratio": round(sep / stk, 2)}
        rows.append(row)
        print(f"w{width} B{batch}: plain {row['plain']['ratio']:.2f}x, Lightning {row['lightning']['ratio']:.2f}x "
              f"(separate / stacked CPU-s, K={args.k})", flush=True)
    if args.save:
        args.save.write_text(json.dumps({"what": "K separate trainings / one SeedStack training, process CPU-s, one "
                                         "run, one thread", "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
