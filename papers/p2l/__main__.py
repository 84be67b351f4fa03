"""`python -m papers.p2l <experiment> --profile P --out DIR`."""
from pathlib import Path

from shared.experiment import cli

from .experiments import EXPERIMENTS

if __name__ == "__main__":
    cli("p2l", EXPERIMENTS, Path(__file__).with_name("config.yaml"))
