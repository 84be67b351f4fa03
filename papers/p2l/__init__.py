"""P2L: prompt-tuned latent diffusion for inverse problems (Chung et al., ICML 2024), with LDPS,
GML-DPS and PSLD as baselines."""
from .experiments import load_prior
from .models import LatentDiffusion, load_stable_diffusion, save_pipeline
from .operators import TASKS, build_operator
from .solver import METHODS, Solution, solve

__all__ = ["load_prior", "LatentDiffusion", "load_stable_diffusion", "save_pipeline", "build_operator", "TASKS", "METHODS",
           "Solution", "solve"]
