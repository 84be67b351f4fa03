"""`python -m papers.mmp <experiment> --profile P --out results/P/mmp`."""
from pathlib import Path

from shared.experiment import cli

from .experiments import EXPERIMENTS

if __name__ == "__main__":
    cli("mmp", EXPERIMENTS, Path(__file__).with_name("config.yaml"))
