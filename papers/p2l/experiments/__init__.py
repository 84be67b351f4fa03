"""The experiments, one module per product (`python -m papers.p2l <experiment> --profile P --out DIR`).

train_classifier  the attribute classifier on the training images (tiny profile; the prior's gate reads it)
train_prior   VAE → latents → text encoder + UNet, saved as a diffusers pipeline (tiny profile); train_prior_<k>
              the k-th replica, from seed + k (the priors are the outer unit of the paper claims)
prior_gate    the prior follows its captions: classifier accuracy on CFG samples, null-caption frequencies
main_<task>   per task: equal-budget tuning of ρ on the validation split, then every method on
              the held-out split (PSNR, SSIM, off-range, prompt cosine per image; FD proxy; trajectories)
main_table    the task × method table, the grid and trajectory figures, runtime/NFE, the prompt's cosine
floors        per task, two prior-free arms on the main table's test images and noise: the measurement
              itself on the image grid, and P2L's proximal data-consistency solve started from zero
ablation      prompt tuning / projection on and off, proximal vs gluing, K and τ
severity_knob the SR factor 2 → 4 → 8: LDPS and P2L, each tuned at every factor
train_pixel_prior  the pixel-space prior of the DPS comparison (UNet2DModel, the LDM's steps and batch
              size); train_pixel_prior_<k> from seed + k
pixel_dps     DPS with the pixel prior on the main table's test problems, ζ tuned with the equal budget

Per-image metrics are written as `shared.samples.sample(values, "image")`: every method sees the same
test images in the same order, the same measurement noise and the same initial latents (batch b is
seeded run.seed + b), so samples of two methods pair by image. With `data.noise_seeds` = k > 1 each
image is solved under k noise draws (in one batch) and its value is the mean over the draws: the
images are the independent units (n = n_test), the draws are repeated measurements of one unit.
The FD proxy is one number per run (`sample([fd], "seed")`), wall times too; NFE counts are exact.
"""
from __future__ import annotations

from functools import partial

from ..solve_cache import resumable
from .ablation import ablation
from .knob import severity_knob
from .pixel_dps import pixel_dps as pixel_comparison, train_pixel_prior_job   # the module keeps its name
from .main_table import main_table
from .prior import prior_gate, train_attribute_classifier, train_prior
from .problems import TASKS, load_classifier, load_images, load_prior
from .references import floors
from .steps_check import steps_check
from .task_solutions import main_task

MAX_PRIORS = 8   # train_prior_1 ... train_prior_7: the replicas a profile's `priors` may ask for

# the experiments that solve with the latent solvers resume per solver batch after a kill (`solve_cache`)
EXPERIMENTS = {"train_classifier": train_attribute_classifier, "train_prior": train_prior, "prior_gate": prior_gate,
               **{f"train_prior_{k}": partial(train_prior, prior=k) for k in range(1, MAX_PRIORS)},
               **{f"main_{t}": resumable(partial(main_task, task=t)) for t in TASKS}, "main_table": main_table,
               "floors": floors, "ablation": resumable(ablation), "steps_check": resumable(steps_check),
               "severity_knob": resumable(severity_knob), "train_pixel_prior": train_pixel_prior_job,
               **{f"train_pixel_prior_{k}": partial(train_pixel_prior_job, prior=k) for k in range(1, MAX_PRIORS)},
               "pixel_dps": pixel_comparison}

__all__ = ["EXPERIMENTS", "load_classifier", "load_images", "load_prior"]
