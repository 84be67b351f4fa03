"""DDP on CPU: EVEREST pre-training at smoke with `trainer.accelerator=cpu, devices=2, strategy=ddp`
(gloo), as subprocesses with a timeout. Each rank records the indices it drew (a `sitecustomize` on
PYTHONPATH wraps `RandomBatchSampler` in every process Lightning launches); the two ranks must split
every global batch (positions r::2, together the single-process batch), and two runs must give the
same metrics and weights.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from shared.sampling import RandomBatchSampler
from shared.seeding import derive_seed

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 300
STEPS, BATCH, N = 6, 8, 64          # EVEREST's smoke pre-training: 64 clips, batch 8 (6 steps here)

SITECUSTOMIZE = '''
import os
if os.environ.get("DDP_TEST_TRACE"):
    import json
    from pathlib import Path

    import shared.sampling as S

    draw = S.RandomBatchSampler.__iter__

    def traced(self):
        world, rank = S.world(self.num_replicas, self.rank)
        out = Path(os.environ["DDP_TEST_TRACE"]) / f"rank{rank}_of_{world}.jsonl"
        for batch in draw(self):
            with out.open("a") as f:
                f.write(json.dumps(batch) + "\\n")
            yield batch

    S.RandomBatchSampler.__iter__ = traced
'''


def ddp_run(out: Path, site: Path) -> subprocess.Popen:
    trace = out / "trace"
    trace.mkdir(parents=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "CI": "true",
           "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "DDP_TEST_TRACE": str(trace)}
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS"):
        env.pop(key, None)
    cmd = [sys.executable, "-m", "papers.everest", "pretrain_everest", "--profile", "smoke", "--out", str(out / "run"),
           *[a for o in ("trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp",
                         f"pretrain.steps={STEPS}") for a in ("--set", o)]]
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_ddp_two_cpu_ranks_split_every_batch_and_are_deterministic(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    procs = {name: ddp_run(tmp_path / name, site) for name in ("a", "b")}     # side by side
    try:
        for name, proc in procs.items():
            _, err = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 0, f"run {name}: {err[-3000:]}"
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    single = list(RandomBatchSampler(N, BATCH, STEPS, derive_seed(0, "batches")))
    for name in procs:
        trace = tmp_path / name / "trace"
        assert sorted(p.name for p in trace.iterdir()) == ["rank0_of_2.jsonl", "rank1_of_2.jsonl"]
        ranks = [[json.loads(line) for line in (trace / f"rank{r}_of_2.jsonl").read_text().splitlines()]
                 for r in range(2)]
        assert all(len(r) == STEPS and all(len(b) == BATCH // 2 for b in r) for r in ranks)
        for step, (b0, b1, whole) in enumerate(zip(*ranks, single)):
            assert b0 == whole[0::2] and b1 == whole[1::2], step       # disjoint positions, the whole batch
    metrics = [json.loads((tmp_path / n / "run" / "metrics" / "pretrain_everest.json").read_text()) for n in procs]
    assert metrics[0] == metrics[1] and metrics[0]["steps"] == STEPS
    weights = [torch.load(tmp_path / n / "run" / "checkpoints" / "pretrain_everest" / "seed0" / "b100.pt",
                          weights_only=True) for n in procs]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(v, weights[1][k]) for k, v in weights[0].items())
