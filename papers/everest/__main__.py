"""`python -m papers.everest <experiment> --profile P --out results/P/everest`."""
from pathlib import Path

from shared.experiment import cli

from .experiments import EXPERIMENTS

if __name__ == "__main__":
    cli("everest", EXPERIMENTS, Path(__file__).with_name("config.yaml"))
