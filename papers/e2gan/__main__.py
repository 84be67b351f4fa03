import sys
from pathlib import Path

from shared.assets import MissingAssetError
from shared.experiment import cli

from .experiments import EXPERIMENTS

if __name__ == "__main__":
    try:
        cli("e2gan", EXPERIMENTS, Path(__file__).with_name("config.yaml"))
    except MissingAssetError as err:  # a full-profile input is not on disk: one line, no traceback
        print(f"e2gan: {err}", file=sys.stderr)
        sys.exit(2)
