"""The `fd` proxy's feature network (a CNN trained to tell the teacher's edits apart) and the lr policy
shared by every arm (one number of evaluations; a grid extended past an edge)."""
import logging

import numpy as np
import pytest
import torch

from papers.e2gan.data import make_inputs
from papers.e2gan.experiments import tune_lr
from papers.e2gan.fd_net import (EditFeatures, EditNet, FlippedBatches, _tensor, cached_edit_net, labelled_edits,
                                  losses_file, train_edit_net)
from papers.e2gan.metrics import feature_fd
from papers.e2gan.teacher import SkimageTeacher
from shared.run_cache import cache_key

PROMPTS = ["gaussian blur", "grayscale", "sepia", "invert colors", "pixelate", "film grain"]


@pytest.fixture(scope="module")
def data():
    teacher = SkimageTeacher(jitter=0.0)
    x = make_inputs(160, 16, 0, 0.2)
    train, test = x[:100], x[100:]
    return (labelled_edits(train, PROMPTS, lambda a, p: teacher.edit(a, p, 0)),
            labelled_edits(test, PROMPTS, lambda a, p: teacher.edit(a, p, 1)), test, teacher.edit(test, "sepia", 1))


def separation(feats, test, edited) -> dict:
    """FD of half the teacher's outputs against degraded versions of the other half, over the FD
    against that other half as it is (the proxy's noise floor at this sample size)."""
    h = len(edited) // 2
    same = feature_fd(edited[h:], edited[:h], 8, feats)
    noisy = np.clip(edited[h:] + np.random.default_rng(0).normal(0, 0.1, edited[h:].shape), 0, 1)
    return {"unedited": feature_fd(test[h:], edited[:h], 8, feats) / same,
            "noisy": feature_fd(noisy, edited[:h], 8, feats) / same}


def separates(feats, test, edited) -> bool:
    r = separation(feats, test, edited)
    return r["unedited"] > 50 and r["noisy"] > 3


def test_trained_features_classify_edits_and_separate_real_from_degraded(data):
    (images, labels), (test_images, test_labels), test, edited = data
    net, losses = train_edit_net(images, labels, len(PROMPTS) + 1, steps=200, batch_size=64, lr=3e-3, width=8, seed=1)
    assert [r["step"] for r in losses] == list(range(10, 201, 10)) and losses[-1]["loss"] < losses[0]["loss"]
    feats = EditFeatures(net)
    assert feats(test[:5]).shape == (5, 32)
    chance = 1 / (len(PROMPTS) + 1)
    assert feats.accuracy(test_images, test_labels) > 2.5 * chance
    assert separates(feats, test, edited), separation(feats, test, edited)
    # the same test on untrained (random) features fails: it measures what training added
    torch.manual_seed(1)
    random = EditFeatures(EditNet(len(PROMPTS) + 1, 8))
    assert random.accuracy(test_images, test_labels) < 2.5 * chance
    assert not separates(random, test, edited), separation(random, test, edited)


def test_the_logged_loss_is_that_of_the_step_it_is_logged_at():
    """The CSV row at step 10 holds the 10th iteration's loss: the loss of the net after 9 steps on the
    10th minibatch (Lightning flushes at steps 10, 20, ..., so logging at other steps would mislabel)."""
    x = np.random.default_rng(0).uniform(size=(12, 8, 8, 3)).astype(np.float32)
    y = np.arange(12) % 3
    _, losses = train_edit_net(x, y, 3, steps=10, batch_size=4, lr=1e-2, width=4, seed=3)
    net9, _ = train_edit_net(x, y, 3, steps=9, batch_size=4, lr=1e-2, width=4, seed=3)
    xb, yb = list(FlippedBatches(_tensor(x), torch.as_tensor(y), 10, 4, 3))[-1]
    with torch.no_grad():
        tenth = float(torch.nn.functional.cross_entropy(net9(xb), yb))
    assert [r["step"] for r in losses] == [5, 10]   # a 10-step fit logs every 5th step
    assert losses[-1]["loss"] == pytest.approx(tenth, rel=1e-6)


def test_the_net_is_cached_under_its_run_cache_key(tmp_path, caplog):
    from types import SimpleNamespace

    cfg = SimpleNamespace(steps=3, batch_size=4, lr=1e-3, width=4)
    x = np.random.default_rng(0).uniform(size=(8, 8, 8, 3)).astype(np.float32)
    calls = []

    def data():
        calls.append(1)
        return x, np.arange(8) % 2

    path = tmp_path / "edit_net.pt"
    key = cache_key({"fd_net": {"steps": 3}}, 0)
    a = cached_edit_net(path, key, data, 2, cfg, seed=0)
    b = cached_edit_net(path, key, data, 2, cfg, seed=0)   # reused: not retrained
    assert len(calls) == 1 and np.allclose(a(x), b(x))
    assert losses_file(path).read_text().splitlines()[0] == "step,loss"   # the curve kept beside the net
    with caplog.at_level(logging.WARNING, logger="shared.run_cache"):
        cached_edit_net(path, cache_key({"fd_net": {"steps": 4}}, 0), data, 2, cfg, seed=0)
    assert len(calls) == 2 and "config hash" in caplog.text


def test_lr_policy_extends_the_grid_past_an_edge_with_one_budget():
    """Every arm gets exactly `evaluations` scores: beyond an edge while the best is at one, else between
    the best value and its better neighbour."""
    peak = lambda best: (lambda lr: -abs(np.log(lr / best)))  # noqa: E731
    rows = tune_lr(peak(1e-2), [1e-3, 3e-3, 1e-2], evaluations=5)
    assert [r["lr"] for r in rows] == pytest.approx([1e-3, 3e-3, 1e-2, 3.33e-2, 1.82e-2])  # up, then refined
    rows = tune_lr(peak(1e-4), [1e-3, 3e-3, 1e-2], evaluations=5)
    assert [r["lr"] for r in rows] == pytest.approx([1e-3, 3e-3, 1e-2, 3.33e-4, 1.11e-4])
    rows = tune_lr(peak(3e-3), [1e-3, 3e-3, 1e-2], evaluations=4)   # inside: one finer value, same budget
    assert [r["lr"] for r in rows] == pytest.approx([1e-3, 3e-3, 1e-2, 1.73e-3])   # toward 1e-3, the better side
    assert len(tune_lr(peak(3e-3), [1e-3, 3e-3, 1e-2], evaluations=0)) == 3   # the grid alone
