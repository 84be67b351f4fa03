from pathlib import Path

from shared.experiment import cli

from .experiments import EXPERIMENTS

if __name__ == "__main__":
    cli("e2gan", EXPERIMENTS, Path(__file__).with_name("config.yaml"))
