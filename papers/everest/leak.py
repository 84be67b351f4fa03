"""Label-leak control: can a linear probe read the class from the keep mask alone?

The mask is what token pruning hands the classifier besides the tokens themselves: the top
⌊keep·N⌋ tokens by the pixel-difference score s_{t,l} = ‖P_{t,l} − P_{t−1,l}‖₂ (P: a tubelet's
pixels, s_{0,l} := s_{1,l}; the Conv3d score at initialisation is a random projection of the same
difference). A multinomial logistic regression on the binary mask [N] is fitted on one set of clips
and scored on another. The class (digit identity) should stay near chance; the motion direction,
which the mask follows, should not (a positive control: the probe has the power to find a leak).
"""
from __future__ import annotations

import numpy as np
import torch

from .model import patchify
from .selection import keep_top_mask, motion_scores


def pixel_scores(video: torch.Tensor, patch: int, tubelet: int) -> torch.Tensor:
    """[n, C, F, H, W] -> [n, T', L] pixel-difference scores of the tubelet tokens."""
    n, _, f, h, w = video.shape
    pixels = patchify(video, patch, tubelet).flatten(2)                 # [n, N, tubelet·patch²·C]
    return motion_scores(pixels.view(n, f // tubelet, (h // patch) * (w // patch), -1))


def keep_masks(video: torch.Tensor, keep_ratio: float, patch: int, tubelet: int) -> np.ndarray:
    """Binary keep masks [n, N] (float) of the top ⌊keep_ratio·N⌋ pixel-difference scores."""
    return keep_top_mask(pixel_scores(video, patch, tubelet), keep_ratio).float().numpy()


def probe_accuracy(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray) -> float:
    """Test accuracy (%) of a multinomial logistic regression fitted on (train_x, train_y)."""
    from sklearn.linear_model import LogisticRegression

    probe = LogisticRegression(max_iter=2000, C=1.0).fit(train_x, train_y)
    return 100.0 * float((probe.predict(test_x) == test_y).mean())
