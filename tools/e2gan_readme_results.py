"""Rewrite the results block of papers/e2gan/README.md (between its RESULTS:BEGIN / RESULTS:END markers)
from one tiny run's files: the e2gan rows of claims.md, tables/*.md, metrics/*.json and benchmarks/*.tsv.
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


def block(profile_root: Path, how: str) -> str:
    root = profile_root / "e2gan"
    m = {p.stem: json.loads(p.read_text()) for p in sorted((root / "metrics").glob("*.json"))}
    claims = (profile_root / "claims.md").read_text().splitlines()
    header = next(i for i, line in enumerate(claims) if line.startswith("| id |"))
    ledger = [claims[header], claims[header + 1], *[line for line in claims if line.startswith("| e2gan.")]]
    ct, ab, dc, fd = m["concept_table"], m["base_ablation"], m["data_size_curve"], m["fd_net"]
    runs = {k: v for i in range(3) for k, v in m[f"scratch_s{i}"]["runs"].items()}
    targets = "; ".join(f"{k.split('|')[0]} s{k.split('|')[1]} {r['target_psnr']:.2f} dB (best at step "
                        f"{r['plateau_step']}, stopped at {r['stopped_at']})" for k, r in sorted(runs.items()))
    one_off = ct["one_off_flops"]
    rd = ct["random_draws"]
    base_concepts = {"clustered": m["base_clustered"]["concepts"],
                     **{k: v["concepts"] for k, v in m["base_variants"].items()}}
    bench = []
    total = 0.0
    for p in sorted((root / "benchmarks").glob("*.tsv")):
        head, row = p.read_text().splitlines()[:2]
        cols = dict(zip(head.split("\t"), row.split("\t")))
        total += float(cols["cpu_time"])
        bench.append(f"| {p.stem} | {float(cols['s']):.0f} | {float(cols['cpu_time']):.0f} |")
    out = [
        f"{BEGIN} (generated from the workflow's tables and metrics) -->",
        f"Written by `tools/e2gan_readme_results.py` from `tables/*.md`, `metrics/*.json`, `benchmarks/*.tsv` and "
        f"`claims.md` of one run, not typed. {how}",
        "", "### Ledger (`claims.md`, the e2gan rows)", "", *ledger, "",
        "### Per arm (`e2gan_concept_table`: means over 3 new concepts × 3 seeds; `psnr_ci90_over_seeds` is the "
        "mean [90 % interval] over seeds)", "", table(root, "e2gan_concept_table"), "",
        "### FLOPs to the target (`e2gan_flops_ratios`: scratch arm's FLOPs / searched LoRA's, mean [90 % CI] over "
        "seeds; last row: the per-seed geometric mean over concepts)", "", table(root, "e2gan_flops_ratios"), "",
        f"Targets (pix2pix plateau − 0.5 dB): {targets}.", "",
        f"One-off FLOPs: base {one_off['base']:.3g}, rank search {one_off['rank_search']:.3g}, lr grid "
        f"{one_off['lr_grid']:.3g}, total {one_off['total']:.3g}. Break-even number of new concepts (one-off FLOPs / "
        f"FLOPs saved per concept): against pix2pix {ci(ct['break_even_concepts']['pix2pix_scratch'])}, against "
        f"E²GAN from scratch {ci(ct['break_even_concepts']['e2gan_scratch'])}.", "",
        f"Searched ranks: {ct['searched_ranks']}. Random arm: {rd['n_distinct']} distinct draws, all within ±10 % of "
        f"the searched size: {rd['all_matched']}; their mean size is {rd['params_ratio_to_searched']:.3g}× the "
        "searched arm's (`e2gan_random_ranks`).", "",
        "### Learning rates (`e2gan_lr_grid`, `e2gan_lr_grid_scratch`: test PSNR on the validation concept at each "
        "lr; – = not tried)", "", table(root, "e2gan_lr_grid"), "", table(root, "e2gan_lr_grid_scratch"), "",
        f"Arms whose chosen lr is still at the edge of what they tried: "
        f"{m['lr_grid']['n_at_edge'] + m['lr_grid_scratch']['n_at_edge']} of "
        f"{len(m['lr_grid']['at_edge']) + len(m['lr_grid_scratch']['at_edge'])}.", "",
        "### Which layers a full fine-tune moves (`e2gan_layer_change`: ‖ΔW‖/‖W‖, mean [90 % CI] over seeds)", "",
        table(root, "e2gan_layer_change"), "",
        "### Base ablation (`e2gan_base_ablation`: PSNR after the same searched-rank LoRA fine-tune, mean over 3 "
        "seeds per concept)", "", table(root, "e2gan_base_ablation"), "",
        "Clustered − random, per random draw (dB, over seeds): "
        + "; ".join(f"{k} {ci(v)}" for k, v in ab["clustered_minus_random_by_draw"].items())
        + f". The clustered base is best on {ab['concepts_where_clustered_best']} of {ab['n_concepts']} concepts.", "",
        "Bases: " + "; ".join(f"{k} = {', '.join(v)}" for k, v in base_concepts.items()) + ".", "",
        "### Data size (`e2gan_data_size`: searched-rank LoRA at 3.33 epochs, so FLOPs ∝ m; mean over 3 concepts × "
        "3 seeds)", "", table(root, "e2gan_data_size"), "",
        f"k-means − random at the smallest m: {ci(dc['kmeans_minus_random_smallest_m_db'])} dB. All "
        f"{dc['sizes'][-1]} pairs − the k-means subset: "
        + "; ".join(f"m = {k}: {ci(v)}" for k, v in dc["all_minus_kmeans_by_m_db"].items()) + " dB.", "",
        "### The `fd` proxy's feature net (`metrics/fd_net.json`)", "",
        f"Held-out accuracy over {fd['n_classes']} classes (identity + pool concepts): {fd['test_accuracy']:.3f} "
        f"(chance {fd['chance']:.3f}). `fd` of half the teacher's test outputs for \"{fd['concept']}\" against the "
        f"other half: {fd['fd_same_concept']:.1f}; against it blurred (σ = 1) {fd['fd_blurred']:.1f}, noisy "
        f"(σ = 0.1) {fd['fd_noisy']:.1f}, unedited {fd['fd_unedited']:.1f}.", "",
        "### Latency on this CPU (`e2gan_latency`, batch 1, one thread; no claim)", "", table(root, "e2gan_latency"),
        "", "### Cost per job (`benchmarks/*.tsv`: snakemake's wall and CPU seconds)", "",
        "| job | wall s | CPU s |", "|---|---|---|", *bench, f"| **all experiment jobs** | | **{total:.0f}** |",
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
