"""`python -m papers.freebind <experiment> --profile P --out DIR`."""
from pathlib import Path

from shared.experiment import cli

from .experiments import EXPERIMENTS

if __name__ == "__main__":
    cli("freebind", EXPERIMENTS, Path(__file__).with_name("config.yaml"))
