"""The `fd` proxy's feature network (an edit classifier) and its sanity numbers."""
from __future__ import annotations

import numpy as np

from shared.curves import Curves
from shared.seeding import derive_seed

from ..data import teacher_pairs, to_images
from ..fd_net import labelled_edits, read_edit_net_losses
from ..metrics import feature_fd
from .setup import Setup, concept_pool, edit_net_path

def fd_net(run) -> dict:
    """Train (or reuse) the `fd` proxy's edit classifier; its accuracy on test inputs (every pool concept
    and identity), and the proxy between half the teacher's test outputs of a new concept and the other
    half as they are, unedited, blurred or noisy."""
    from skimage.filters import gaussian

    setup = Setup(run)
    feats = setup.fd_features
    cfg = run.cfg
    pool = concept_pool(cfg)
    test_in = setup.test_inputs
    seed = derive_seed(run.seed, "teacher", "fd net test")
    images, labels = labelled_edits(test_in, pool, lambda x, p: teacher_pairs(setup.teacher, x, p, seed,
                                                                              setup.cache / "fd_test"))
    concept = cfg.concepts.new[0]
    test = setup.pairs(concept, "test")
    y, x = to_images(test.y), to_images(test.x)
    half = len(y) // 2
    ref = y[:half]
    degraded = {"same_concept": y[half:], "unedited": x[half:],
                "blurred": np.stack([gaussian(im, sigma=1.0, channel_axis=-1) for im in y[half:]]),
                "noisy": np.clip(y[half:] + np.random.default_rng(run.seed).normal(0, 0.1, y[half:].shape), 0, 1)}
    curves = Curves(["step", "loss"])   # the edit net's training curve, kept beside the cached net
    curves.add("edit_net", read_edit_net_losses(edit_net_path(setup)))
    curves.save(run)
    return {"test_accuracy": feats.accuracy(images, labels), "n_classes": len(pool) + 1,
            "chance": 1 / (len(pool) + 1), "concept": concept,
            **{f"fd_{k}": feature_fd(v, ref, cfg.fd_dims, feats) for k, v in degraded.items()}}


