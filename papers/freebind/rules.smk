# FreeBind: five seed jobs (spaces + bonds) and three visibility-sweep jobs, then the tables and
# figures read their metrics. Jobs beyond a profile's `seeds` / `fragile.visibility` write a
# "skipped" record.
FB = f"{RESULTS}/freebind"
FB_SEEDS = [f"{FB}/metrics/bonds_s{i}.json" for i in range(5)]
FB_FRAGILE = [f"{FB}/metrics/fragile_p{i}.json" for i in range(3)]
FB_EXPERIMENTS = [*(f"bonds_s{i}" for i in range(5)), *(f"fragile_p{i}" for i in range(3)),
                  "main_table", "lambda_tradeoff", "fragile", "cost"]
PAPER_RECORD_TABLES["freebind"] = ["main_table", "main_table_gaps", "fragile_claim", "bond_cost"]   # the results record's tables (Snakefile)
PAPER_METRICS["freebind"] = [f"{FB}/metrics/{e}.json" for e in FB_EXPERIMENTS]
PAPER_HEADLINE_FIGURE["freebind"] = f"{FB}/figures/fragile_claim.png"   # the HTML report's main figure (Snakefile)
PAPER_TARGETS.extend(prov(
    f"{FB}/tables/main_table.md", f"{FB}/tables/main_table_gaps.md", f"{FB}/figures/lambda_tradeoff.png",
    f"{FB}/tables/lambda_t_sweep.md", f"{FB}/tables/lambda_a_sweep.md", f"{FB}/figures/fragile_claim.png",
    f"{FB}/tables/fragile_claim.md", f"{FB}/tables/bond_cost.md"))

# five explicit rules (named as profiles/slurm names them; a rule inside a loop would see the loop
# variable's last value in `shell:`)
rule freebind_bonds_seed0:
    input: paper_config("freebind")
    output: prov(f"{FB}/metrics/bonds_s0.json")
    threads: 1
    benchmark: bench("freebind_bonds_seed0")
    shell: experiment_cmd("freebind", "bonds_s0")

rule freebind_bonds_seed1:
    input: paper_config("freebind")
    output: prov(f"{FB}/metrics/bonds_s1.json")
    threads: 1
    benchmark: bench("freebind_bonds_seed1")
    shell: experiment_cmd("freebind", "bonds_s1")

rule freebind_bonds_seed2:
    input: paper_config("freebind")
    output: prov(f"{FB}/metrics/bonds_s2.json")
    threads: 1
    benchmark: bench("freebind_bonds_seed2")
    shell: experiment_cmd("freebind", "bonds_s2")

rule freebind_bonds_seed3:
    input: paper_config("freebind")
    output: prov(f"{FB}/metrics/bonds_s3.json")
    threads: 1
    benchmark: bench("freebind_bonds_seed3")
    shell: experiment_cmd("freebind", "bonds_s3")

rule freebind_bonds_seed4:
    input: paper_config("freebind")
    output: prov(f"{FB}/metrics/bonds_s4.json")
    threads: 1
    benchmark: bench("freebind_bonds_seed4")
    shell: experiment_cmd("freebind", "bonds_s4")

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
             f"{FB}/tables/main_table_gaps.csv", f"{FB}/tables/main_table_gaps.md"),
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
