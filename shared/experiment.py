"""One experiment run and the per-paper command line.

`python -m papers.<name> <experiment> [<experiment> ...] --profile P --out results/P/<name> [--seed S] [--set k=v]`
(several experiments run one after the other in one process, each as if alone: one import of the
stack, about 3 CPU-s with Lightning, for many short experiments)

Each experiment is a function `fn(run: Run) -> dict` that returns its metrics. `Run` holds the
validated config and writes every artifact under the paper's output folder with its provenance
sidecar::

    out/metrics/<experiment>.json   figures/<name>.{png,pdf}   tables/<name>.{csv,md}   checkpoints/
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from . import cpu_isa
from .assets import MissingAssetError
from .config import PROFILES, Config, ConfigError, config_hash, load_config
from .io import write_json, write_text
from .provenance import process_usage, write_sidecar
from .seeding import seed_everything, set_threads

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")


class Run:
    """Config, output folders, seed and clock of one experiment; artifacts get provenance."""

    def __init__(self, paper: str, experiment: str, cfg: Config, out: str | Path, rule: str | None = None):
        self.paper, self.experiment, self.cfg = paper, experiment, cfg
        self.metrics_name = experiment   # metrics/<metrics_name>.json (a per-seed job: <experiment><seed>)
        self.out = Path(out)
        self.profile = cfg["profile"]
        self.seed = int(cfg.get("seed", 0))
        self.rule = rule
        self.hash = config_hash(cfg)
        self.start = time.perf_counter()

    def dir(self, kind: str) -> Path:
        path = self.out / kind
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _stamp(self, path: Path, extra: Mapping[str, Any] | None = None) -> Path:
        write_sidecar(path, profile=self.profile, config_hash=self.hash, seed=self.seed, rule=self.rule,
                      wall_time_s=time.perf_counter() - self.start,
                      extra={"paper": self.paper, "experiment": self.experiment, "process": process_usage(),
                             **(extra or {})})
        return path

    def save_metrics(self, metrics: Mapping[str, Any]) -> Path:
        path = write_json(self.dir("metrics") / f"{self.metrics_name}.json", metrics)
        return self._stamp(path)

    def save_figure(self, fig, name: str) -> list[Path]:
        from .plotting import save_figure

        paths = save_figure(fig, self.dir("figures") / name)
        for p in paths:
            self._stamp(p)
        import matplotlib.pyplot as plt

        plt.close(fig)
        return paths

    def save_table(self, df, name: str, floatfmt: str = ".3f") -> list[Path]:
        """Write a pandas DataFrame as CSV (for machines) and Markdown (for people)."""
        tables = self.dir("tables")
        csv_path = write_text(tables / f"{name}.csv", df.to_csv(index=False))
        md_path = write_text(tables / f"{name}.md", df.to_markdown(index=False, floatfmt=floatfmt) + "\n")
        return [self._stamp(csv_path), self._stamp(md_path)]

    def checkpoint_dir(self, *parts: str) -> Path:
        path = self.out / "checkpoints" / self.experiment / "/".join(parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def wall_time(self) -> float:
        return time.perf_counter() - self.start


Experiment = Callable[[Run], Mapping[str, Any]]


class MissingInputError(FileNotFoundError):
    """An experiment's input that another experiment writes is not there yet."""


def needs(*experiments: str) -> Callable[[Experiment], Experiment]:
    """Declare the experiments whose metrics an experiment reads: the CLI checks their
    `metrics/<name>.json` before it starts (one line naming what to run, exit 2), not hours later."""
    def mark(fn: Experiment) -> Experiment:
        fn.needs = tuple(experiments)   # type: ignore[attr-defined]
        return fn
    return mark


def per_seed(fn: Experiment) -> Experiment:
    """Mark an experiment as one seed's job (`--seed S`): it writes metrics/<name><S>.json, so the jobs
    of several seeds run side by side and an experiment over all seeds merges what they recorded."""
    fn.per_seed = True   # type: ignore[attr-defined]
    return fn


def missing_inputs(paper: str, names: list[str], experiments: Mapping[str, Experiment], out: Path,
                   profile: str) -> None:
    """Raise MissingInputError for the first declared input (`needs`) that neither exists under `out`
    nor is written earlier in this invocation."""
    for i, name in enumerate(names):
        for need in getattr(experiments[name], "needs", ()):
            if need not in names[:i] and not (out / "metrics" / f"{need}.json").is_file():
                raise MissingInputError(
                    f"{name} reads {out / 'metrics' / f'{need}.json'}, which is not there: run "
                    f"`python -m papers.{paper} {need} --profile {profile} --out {out}` first")


def _unwritten_output(err: FileNotFoundError, out: Path) -> Path | None:
    """The file under the experiment's output folder whose absence raised `err` (None: elsewhere)."""
    if not err.filename:
        return None
    missing = Path(err.filename).resolve()
    return missing if missing.is_relative_to(out.resolve()) else None


def global_rank() -> int:
    """This process's rank in a multi-process (DDP) run, from the environment Lightning and SLURM set
    (0 when alone); only rank 0 writes the experiment's metrics, tables and figures."""
    for key in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"):   # lightning's rank_zero_only order
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    return 0


def run_experiment(paper: str, experiment: Experiment, name: str, config_path: Path, profile: str,
                   out: Path, seed: int | None = None, overrides: list[str] | None = None,
                   rule: str | None = None, threads: int = 1, overlay: Path | None = None) -> dict:
    """Load the config, seed, run one experiment and write its metrics. Returns the metrics."""
    cfg = load_config(config_path, profile, overrides, overlay=overlay)
    if seed is not None:
        cfg["seed"] = seed
    set_threads(threads)
    seed_everything(int(cfg.get("seed", 0)))
    from .training import set_run_options, trainer_options

    set_run_options(trainer_options(cfg))   # the config's trainer: / logging: sections, for every make_trainer
    from .loggers import set_run_context

    set_run_context(paper, name, out, cfg.to_dict())   # wandb's run names and config
    run = Run(paper, name, cfg, out, rule=rule)
    if getattr(experiment, "per_seed", False):
        if seed is None:
            raise ConfigError(f"{name} runs one seed's job: give it --seed S")
        run.metrics_name = f"{name}{seed}"
    metrics = dict(experiment(run))
    if global_rank() == 0:
        run.save_metrics(metrics)
    return metrics


def cli(paper: str, experiments: Mapping[str, Experiment], config_path: Path, argv: list[str] | None = None,
        preflight: Callable[[Config, list[str]], None] | None = None) -> None:
    """The `python -m papers.<paper>` entry point. `preflight(cfg, names)`, when given, checks what the
    experiments will need late (an optional dependency, an asset) before any of them starts, raising
    one of `user_errors()`."""
    parser = argparse.ArgumentParser(prog=f"python -m papers.{paper}", description=f"{paper} experiments")
    parser.add_argument("experiment", nargs="+", choices=sorted(experiments),
                        help="one or more experiments, run in this order in one process (sharing its imports)")
    parser.add_argument("--profile", default="tiny", help=f"one of {list(PROFILES)} (default tiny)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default results/<profile>/<paper>)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set train.epochs=3")
    parser.add_argument("--overlay", type=Path, default=None, metavar="YAML",
                        help="config keys merged after the profile (the full profile's rehearsal assets)")
    parser.add_argument("--rule", default=None, help="the Snakemake rule that runs this (for provenance)")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    parser.add_argument("--debug", action="store_true", help="show the traceback of a config, input or checkpoint error")
    args = parser.parse_args(argv)
    if argv is None and args.profile in cpu_isa.PINNED_PROFILES and cpu_isa.needs_pin():
        # run by hand, not by the workflow: start again with the CPU kernels pinned as the workflow's jobs
        # are (shared/cpu_isa.py); the switches are read once per process, so only a fresh one obeys them
        env = dict(os.environ)
        cpu_isa.pin(env)
        os.execve(sys.executable, sys.orig_argv, env)
    out = args.out or Path("results") / args.profile / paper
    name = args.experiment[0]
    try:
        missing_inputs(paper, args.experiment, experiments, out, args.profile)
        if preflight is not None:
            preflight(load_config(config_path, args.profile, args.overrides, overlay=args.overlay), args.experiment)
        for i, name in enumerate(args.experiment, 1):   # each as if alone: its config, seeds, options and outputs
            if len(args.experiment) > 1:   # a progress line per experiment of a multi-experiment command
                print(f"{paper}: experiment {i}/{len(args.experiment)}: {name}", file=sys.stderr, flush=True)
            run_experiment(paper, experiments[name], name, config_path, args.profile, out,
                           seed=args.seed, overrides=args.overrides, rule=args.rule, threads=args.threads,
                           overlay=args.overlay)
    except user_errors() as err:   # the user can act on it: one line, no traceback, exit status 2
        if args.debug:
            raise
        kind = {ConfigError: "config error: ", MissingAssetError: "", MissingInputError: ""}.get(
            type(err), f"{type(err).__name__}: ")
        print(f"{paper}: {kind}{err}", file=sys.stderr)
        sys.exit(2)
    except FileNotFoundError as err:   # an undeclared read of another experiment's output
        missing = _unwritten_output(err, out)
        if args.debug or missing is None:
            raise
        hint = (f"run `python -m papers.{paper} {missing.stem} --profile {args.profile} --out {out}` first"
                if missing.parent.name == "metrics" and missing.stem in experiments
                else "run the experiment (or the snakemake target) that writes it first")
        print(f"{paper}: {name} reads {missing}, which is not there: {hint}", file=sys.stderr)
        sys.exit(2)


def user_errors() -> tuple[type[Exception], ...]:
    """The errors a user fixes (a bad config, a missing input, an unreadable checkpoint), which the CLI
    reports in one line. CheckpointError lives with Lightning in shared.training; it can only have been
    raised once that module is loaded, so it is caught only then (the CLI does not import Lightning)."""
    errors: tuple[type[Exception], ...] = (ConfigError, MissingAssetError, MissingInputError)
    training = sys.modules.get(f"{__package__}.training")
    return errors + ((training.CheckpointError,) if training is not None else ())
