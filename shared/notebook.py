"""Functions the notebooks call (logic stays here; notebooks narrate and plot)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .claims import apply_floors, evaluate_claim, load_claims
from .io import read_json


class NotRunYet(RuntimeError):
    """A notebook opened before the workflow wrote what it reads. Jupyter shows only the message
    (IPython's `_render_traceback_`), one line saying what to run."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def require_results(results_dir: str | Path, paper: str, profile: str, needs: str = "metrics.json") -> Path:
    """`results_dir` when `results_dir/needs` exists; else NotRunYet naming the command that writes it.

    Every notebook calls it in the first code cell after its parameters (papermill injects its own
    parameters right after that cell, so the check reads the folder the workflow passed)."""
    results_dir = Path(results_dir)
    if not (results_dir / needs).is_file():
        shown = results_dir
        try:   # a folder inside the repository is named from its root, where snakemake runs
            shown = results_dir.resolve().relative_to(Path(__file__).resolve().parents[1])
        except ValueError:
            pass
        make = "make reproduce" + ("" if profile == "tiny" else f" PROFILE={profile}")
        raise NotRunYet(f"{paper}: no results at {shown} yet; run `{make}` (all papers) or "
                        f"`snakemake --cores 2 --config profile={profile} {shown}/{needs}` first")
    return results_dir


def claims_table(claims_path: str | Path, results_dir: str | Path, profile: str) -> pd.DataFrame:
    """One paper's claims evaluated live against `results_dir/metrics.json` (floors applied)."""
    metrics_path = Path(results_dir) / "metrics.json"
    metrics = read_json(metrics_path) if metrics_path.is_file() else None
    rows = [evaluate_claim(e, metrics, profile) for e in load_claims(claims_path)]
    apply_floors(rows)
    return pd.DataFrame(
        [{"id": r.id, "kind": r.kind, "paper value": r.paper_value, "reproduced": r.reproduced, "lo": r.lo, "hi": r.hi,
          "n": r.n, "test": r.test, "status": r.status, "note": r.note} for r in rows]
    )


def format_table(df: pd.DataFrame) -> str:
    """A fixed-width text rendering, stable across runs (nbval compares it)."""
    return df.to_string(index=False, float_format=lambda v: f"{v:.4g}")


def ledger_table(results_dir: str | Path) -> pd.DataFrame:
    """The whole claims ledger of a profile (results/<profile>/claims.json)."""
    data = read_json(Path(results_dir) / "claims.json")
    df = pd.DataFrame(data["claims"])
    if df.empty:
        return pd.DataFrame(columns=["id", "paper", "kind", "paper_value", "reproduced", "status"])
    return df[["id", "paper", "kind", "paper_value", "reproduced", "lo", "hi", "n", "unit", "test", "status", "note"]]


def figure_links(results_dir: str | Path) -> str:
    """Markdown links to every paper's figures (PNG), grouped by paper."""
    results_dir = Path(results_dir)
    lines = []
    for paper_dir in sorted(p for p in results_dir.iterdir() if (p / "figures").is_dir()):
        lines.append(f"**{paper_dir.name}**: " + ", ".join(
            f"[{f.stem}]({f.relative_to(results_dir)})" for f in sorted((paper_dir / "figures").glob("*.png"))))
    return "\n\n".join(lines) or "_no figures yet_"
