"""Rewrite the results block of papers/e2gan/README.md (between its RESULTS:BEGIN / RESULTS:END markers)
from one tiny run's files: the e2gan rows of claims.md, tables/*.md, metrics/*.json, their provenance
(each job's own CPU seconds) and the notebook's benchmark.
README numbers come from the workflow's files, never typed:

    python tools/e2gan_readme_results.py RESULTS_ROOT "how the run was made (one sentence)"

RESULTS_ROOT is the profile folder (e.g. results/tiny), holding claims.md and e2gan/.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

from shared.intervals import t_interval

README = Path(__file__).resolve().parents[1] / "papers" / "e2gan" / "README.md"
BEGIN, END = "<!-- RESULTS:BEGIN", "<!-- RESULTS:END -->"


def ci(s: dict) -> str:
    v = np.asarray(s["values"], float)
    lo, hi = t_interval(v)
    return f"{v.mean():.3g} [{lo:.3g}, {hi:.3g}] (n = {len(v)})"


def table(root: Path, name: str) -> str:
    return (root / "tables" / f"{name}.md").read_text().strip()


LEDGER_COLUMNS = ("id", "kind", "estimate", "90% interval", "n", "test", "status", "floors", "audit")


def ledger_rows(claims_md: str, prefix: str = "e2gan.") -> list[str]:
    """The ledger's rows for one paper, cut to LEDGER_COLUMNS (the claim's text is in claims.yaml)."""
    lines = claims_md.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| id |"))
    cells = [c.strip() for c in lines[header].strip("|").split("|")]
    keep = [cells.index(c) for c in LEDGER_COLUMNS]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines
            if line.startswith(f"| {prefix}")]
    return ["| " + " | ".join(LEDGER_COLUMNS) + " |", "|" + "---|" * len(LEDGER_COLUMNS),
            *["| " + " | ".join(r[i] for i in keep) + " |" for r in rows]]


def job_costs(paper_root: Path, profile_root: Path, paper: str = "e2gan") -> list[dict]:
    """Each job's own wall and CPU seconds. An experiment job's are its process's (`process` in its
    metrics file's provenance): a job forked from the workflow's warm server is not the process that
    snakemake's benchmark measures, so the benchmark's CPU column reads 0 for it. The notebook runs in
    a process of its own: its cost is snakemake's benchmark (`paper_notebook@<paper>.tsv`)."""
    rows = []
    for p in sorted((paper_root / "metrics").glob("*.json.provenance.json")):
        prov = json.loads(p.read_text())
        proc = prov.get("process") or {}
        if "cpu_s" not in proc:
            continue
        rows.append({"job": p.name.removesuffix(".json.provenance.json"), "rule": prov.get("rule", ""),
                     "warm": bool(proc.get("warm")), "wall_s": float(proc["wall_s"]), "cpu_s": float(proc["cpu_s"])})
    nb = profile_root / "benchmarks" / f"paper_notebook@{paper}.tsv"
    if nb.exists():
        head, row = nb.read_text().splitlines()[:2]
        cols = dict(zip(head.split("\t"), row.split("\t")))
        rows.append({"job": "notebook", "rule": "paper_notebook", "warm": False, "wall_s": float(cols["s"]),
                     "cpu_s": float(cols["cpu_time"])})
    return rows


def rank_rows(per_layer: list[dict]) -> list[str]:
    """One row per group: each layer's searched rank / its cap, and the group's adapter parameters."""
    groups: dict[str, list[dict]] = {}
    for r in per_layer:
        groups.setdefault(r["group"], []).append(r)
    out = ["| group | layer: rank / cap | params |", "|---|---|---|"]
    for g, rows in groups.items():
        layers = ", ".join(f"{r['layer']}: {r['rank']} / {r['cap']}" for r in rows)
        out.append(f"| {g} | {layers} | {sum(int(r['params']) for r in rows)} |")
    return out


def lr_line(*grids: dict) -> str:
    """Each arm's chosen lr, the number of values it tried, and whether the choice is at an edge."""
    parts = [f"{arm} {g['chosen'][arm]:.3g} ({g['evaluations'][arm]} tried{', at an edge' if g['at_edge'][arm] else ''})"
             for g in grids for arm in g["chosen"]]
    n_edge = sum(g["n_at_edge"] for g in grids)
    return "Chosen lr: " + "; ".join(parts) + f". At an edge of what they tried: {n_edge} of {len(parts)} arms."


def data_size_line(root: Path) -> str:
    """PSNR (and `fd`) by subset size m, k-means / random, from the table (the full table is in tables/)."""
    import pandas as pd

    df = pd.read_csv(root / "tables" / "e2gan_data_size.csv").set_index(["method", "m"])
    parts = [f"m = {m}: {df.loc[('kmeans', m), 'psnr']:.2f} / {df.loc[('random', m), 'psnr']:.2f} dB "
             f"(`fd` {df.loc[('kmeans', m), 'fd']:.0f} / {df.loc[('random', m), 'fd']:.0f})"
             for m in sorted({m for _, m in df.index})]
    return "PSNR, k-means / random subsets: " + "; ".join(parts) + "."


def data_size_caption(root: Path) -> str:
    """The data-size table's caption, from the table itself: every subset trains the same steps."""
    import pandas as pd

    df = pd.read_csv(root / "tables" / "e2gan_data_size.csv")
    steps = sorted({int(s) for s in df["steps"]})
    what = (f"{steps[0]} steps per subset at every m (equal steps, so equal training FLOPs)" if len(steps) == 1
            else f"{', '.join(map(str, steps))} steps by m")
    return (f"### Data size (`e2gan_data_size`: searched-rank LoRA, {what}; mean over "
            f"{df['n_seeds'].iloc[0]} seeds × the new concepts)")


def block(profile_root: Path, how: str) -> str:
    root = profile_root / "e2gan"
    m = {p.stem: json.loads(p.read_text()) for p in sorted((root / "metrics").glob("*.json"))}
    ledger = ledger_rows((profile_root / "claims.md").read_text())
    ct, ab, dc = m["concept_table"], m["base_ablation"], m["data_size_curve"]
    one_off = ct["one_off_flops"]
    rd = ct["random_draws"]
    costs = job_costs(root, profile_root)
    total = sum(c["cpu_s"] for c in costs)
    wall = sum(c["wall_s"] for c in costs)
    bench = [f"{c['job']}{'*' if c['warm'] else ''} {c['cpu_s']:.1f}" for c in costs]
    search = m["rank_search"]
    out = [
        f"{BEGIN} (generated from the workflow's tables and metrics) -->",
        f"Written by `tools/e2gan_readme_results.py` from `tables/*.md`, `metrics/*.json` and their provenance, "
        f"the notebook's benchmark and `claims.md` of one run, not typed. {how}",
        "", "### Ledger (`claims.md`, the e2gan rows)", "", *ledger, "",
        "### Per arm (`e2gan_concept_table`: means over 3 new concepts × 3 seeds; `psnr_ci90_over_seeds` is the "
        "mean [90 % interval] over seeds)", "", table(root, "e2gan_concept_table"), "",
        "### FLOPs to the target (`e2gan_flops_ratios`: scratch arm's FLOPs / searched LoRA's, mean [90 % CI] over "
        "seeds; last row: the per-seed geometric mean over concepts)", "", table(root, "e2gan_flops_ratios"), "",
        f"One-off FLOPs: base {one_off['base']:.3g}, rank search {one_off['rank_search']:.3g}, lr grid "
        f"{one_off['lr_grid']:.3g}, total {one_off['total']:.3g}. Break-even number of new concepts (one-off FLOPs / "
        f"FLOPs saved per concept): against pix2pix {ci(ct['break_even_concepts']['pix2pix_scratch'])}, against "
        f"E²GAN from scratch {ci(ct['break_even_concepts']['e2gan_scratch'])}.", "",
        "### Searched ranks per layer (`e2gan_rank_search`: each layer's rank / its cap, min(fan-out, fan-in·k²))",
        "", *rank_rows(search["per_layer"]), "",
        f"Search: {len(search['concepts'])} concepts ({', '.join(search['concepts'])}) × {len(search['seeds'])} seeds, "
        f"α = {search['alpha']}, {search['n_trained']} of {search['n_probes']} candidates trained; FLOPs per step "
        f"{search['flops_per_step'] / 1e6:.1f} M against the full fine-tune's {search['full_ft_flops_per_step'] / 1e6:.1f} M "
        f"(budget {search['flops_budget_per_step'] / 1e6:.1f} M); every candidate in `e2gan_rank_search_probes`. Random arm: {rd['n_distinct']} distinct draws, all within ±10 % of "
        f"the searched size: {rd['all_matched']}; their mean size is {rd['params_ratio_to_searched']:.3g}× the "
        "searched arm's (`e2gan_random_ranks`).", "",
        "### Learning rates (`e2gan_lr_grid`, `e2gan_lr_grid_scratch`: every value tried, on the validation concept "
        f"\"{m['lr_grid']['concept']}\")", "", lr_line(m["lr_grid"], m["lr_grid_scratch"]), "",
        "**Base ablation** (`e2gan_base_ablation`, the same searched-rank LoRA fine-tune from each base): clustered − "
        "random, per random draw (dB, over seeds): "
        + "; ".join(f"{k} {ci(v)}" for k, v in ab["clustered_minus_random_by_draw"].items())
        + f". The clustered base is best on {ab['concepts_where_clustered_best']} of {ab['n_concepts']} concepts.", "",
        data_size_caption(root), data_size_line(root),
        f"k-means − random at the smallest m: {ci(dc['kmeans_minus_random_smallest_m_db'])} dB. All "
        f"{dc['sizes'][-1]} pairs − the k-means subset: "
        + "; ".join(f"m = {k}: {ci(v)}" for k, v in dc["all_minus_kmeans_by_m_db"].items()) + " dB.", "",
        f"### Latency (`e2gan_latency`, batch 1, on {m['latency_table'].get('device', 'its device')}; no claim)",
        "", table(root, "e2gan_latency"), "",
        "**Cost per job**: CPU seconds of each job's own process (`process.cpu_s` in its metrics file's provenance; the notebook: "
        "snakemake's benchmark; * = forked from the workflow's warm server): " + "; ".join(bench)
        + f". **All E²GAN jobs: {total:,.0f} CPU-s ({total / 60:.1f} CPU-min)**; wall: {wall:,.0f} s summed.",
        END,
    ]
    return "\n".join(out)


def main(argv: list[str]) -> None:
    profile_root, how = Path(argv[1]), argv[2]
    text = README.read_text()
    new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: block(profile_root, how), text, flags=re.S)
    if new == text and BEGIN not in text:
        sys.exit(f"no {BEGIN} ... {END} block in {README}")
    README.write_text(new)


if __name__ == "__main__":
    main(sys.argv)
