# FreeBind: one job per seed (spaces + bonds) and three visibility-sweep jobs, then the tables and
# figures read their metrics. Jobs beyond a profile's `seeds` / `fragile.visibility` write a
# "skipped" record.
from papers.freebind.knob_sweeps import N_FRAGILE_JOBS as _FB_FRAGILE_JOBS
from papers.freebind.summaries import N_SEED_JOBS as _FB_SEED_JOBS

FB = f"{RESULTS}/freebind"
FB_SEEDS = [f"{FB}/metrics/bonds_s{i}.json" for i in range(_FB_SEED_JOBS)]
FB_FRAGILE = [f"{FB}/metrics/fragile_p{i}.json" for i in range(_FB_FRAGILE_JOBS)]
FB_EXPERIMENTS = [*(f"bonds_s{i}" for i in range(_FB_SEED_JOBS)), *(f"fragile_p{i}" for i in range(_FB_FRAGILE_JOBS)),
                  "main_table", "lambda_tradeoff", "fragile", "cost"]
PAPER_RECORD_TABLES["freebind"] = ["main_table", "main_table_gaps", "lambda_selection", "fragile_claim", "bond_cost"]   # the results record's tables (Snakefile)
PAPER_METRICS["freebind"] = [f"{FB}/metrics/{e}.json" for e in FB_EXPERIMENTS]
PAPER_HEADLINE_FIGURE["freebind"] = f"{FB}/figures/fragile_claim.png"   # the HTML report's main figure (Snakefile)
PAPER_TARGETS.extend(prov(
    f"{FB}/tables/main_table.md", f"{FB}/tables/main_table_gaps.md", f"{FB}/tables/lambda_selection.md",
    f"{FB}/figures/lambda_tradeoff.png",
    f"{FB}/tables/lambda_t_sweep.md", f"{FB}/tables/lambda_a_sweep.md", f"{FB}/figures/fragile_claim.png",
    f"{FB}/tables/fragile_claim.md", f"{FB}/tables/bond_cost.md"))

rule freebind_bonds_seed:
    """One entry of `seeds`: its spaces, bonds and every table row."""
    input: paper_config("freebind")
    output: prov(f"{FB}/metrics/bonds_s{{i}}.json")
    wildcard_constraints: i=r"\d+"
    threads: 1
    benchmark: bench("freebind_bonds_seed", "i")
    shell: experiment_cmd("freebind", "bonds_s{wildcards.i}")

rule freebind_fragile_point:
    """One visibility of the fragile sweep over `fragile.seeds`."""
    input: paper_config("freebind")
    output: prov(f"{FB}/metrics/fragile_p{{i}}.json")
    wildcard_constraints: i=r"\d+"
    threads: 1
    benchmark: bench("freebind_fragile_point", "i")
    shell: experiment_cmd("freebind", "fragile_p{wildcards.i}")

rule freebind_main_table:
    input: paper_config("freebind"), FB_SEEDS
    output:
        prov(f"{FB}/metrics/main_table.json", f"{FB}/tables/main_table.csv", f"{FB}/tables/main_table.md",
             f"{FB}/tables/main_table_gaps.csv", f"{FB}/tables/main_table_gaps.md",
             f"{FB}/tables/lambda_selection.csv", f"{FB}/tables/lambda_selection.md"),
    threads: 1
    benchmark: bench("freebind_main_table")
    shell: experiment_cmd("freebind", "main_table")

rule freebind_lambda_figure:
    input: paper_config("freebind"), FB_SEEDS
    output:
        prov(f"{FB}/metrics/lambda_tradeoff.json", f"{FB}/figures/lambda_tradeoff.png",
             f"{FB}/figures/lambda_tradeoff.pdf", f"{FB}/tables/lambda_t_sweep.csv",
             f"{FB}/tables/lambda_t_sweep.md", f"{FB}/tables/lambda_a_sweep.csv", f"{FB}/tables/lambda_a_sweep.md"),
    threads: 1
    benchmark: bench("freebind_lambda_figure")
    shell: experiment_cmd("freebind", "lambda_tradeoff")

rule freebind_fragile_figure:
    input: paper_config("freebind"), FB_SEEDS, FB_FRAGILE
    output:
        prov(f"{FB}/metrics/fragile.json", f"{FB}/figures/fragile_claim.png", f"{FB}/figures/fragile_claim.pdf",
             f"{FB}/tables/fragile_claim.csv", f"{FB}/tables/fragile_claim.md"),
    threads: 1
    benchmark: bench("freebind_fragile_figure")
    shell: experiment_cmd("freebind", "fragile")

rule freebind_cost_table:
    input: paper_config("freebind"), FB_SEEDS
    output: prov(f"{FB}/metrics/cost.json", f"{FB}/tables/bond_cost.csv", f"{FB}/tables/bond_cost.md")
    threads: 1
    benchmark: bench("freebind_cost_table")
    shell: experiment_cmd("freebind", "cost")
