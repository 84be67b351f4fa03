# E2GAN: the fd proxy's feature net, base models, scratch baselines, rank search, lr grid, per-concept table, base ablation, data-size curve, latency.
# Every experiment that trains writes its fits' loss curves to logs/<experiment>.csv (the notebook plots them).
X = f"{RESULTS}/e2gan"
E2GAN_SCRATCH = [f"{X}/metrics/scratch_s{i}.json" for i in range(3)]  # one job per seed (experiments.N_SCRATCH_JOBS)
E2GAN_FT = [f"{X}/metrics/finetune_s{i}.json" for i in range(3)]  # one job per seed (experiments.N_FT_JOBS)
E2GAN_FD = f"{X}/metrics/fd_net.json"  # the fd proxy's feature net: every job that reports `fd` waits for it
E2GAN_EXPERIMENTS = ["fd_net", "base_clustered", "base_variants", "lr_grid_scratch", "scratch_s0", "scratch_s1", "scratch_s2",
                     "finetune_s0", "finetune_s1", "finetune_s2", "rank_search", "lr_grid", "concept_table",
                     "base_ablation", "data_size_curve", "latency_table"]
# the results record's tables (Snakefile)
PAPER_RECORD_TABLES["e2gan"] = ["e2gan_concept_table", "e2gan_flops_ratios", "e2gan_rank_search", "e2gan_lr_grid",
                                "e2gan_lr_grid_scratch", "e2gan_base_ablation", "e2gan_data_size", "e2gan_latency"]
PAPER_METRICS["e2gan"] = [f"{X}/metrics/{e}.json" for e in E2GAN_EXPERIMENTS]
PAPER_HEADLINE_FIGURE["e2gan"] = f"{X}/figures/e2gan_image_grid.png"   # the HTML report's main figure (Snakefile)
PAPER_TARGETS.extend(prov(
    f"{X}/tables/e2gan_concept_table.md", f"{X}/tables/e2gan_concept_runs.md", f"{X}/figures/e2gan_image_grid.png",
    f"{X}/tables/e2gan_flops_ratios.md", f"{X}/tables/e2gan_layer_change.md", f"{X}/tables/e2gan_random_ranks.md",
    f"{X}/tables/e2gan_lr_grid.md", f"{X}/tables/e2gan_lr_grid_scratch.md",
    f"{X}/tables/e2gan_rank_search.md", f"{X}/tables/e2gan_rank_search_probes.md",
    f"{X}/tables/e2gan_base_ablation.md", f"{X}/tables/e2gan_base_ablation_runs.md",
    f"{X}/figures/e2gan_data_size.png", f"{X}/tables/e2gan_data_size.md", f"{X}/tables/e2gan_latency.md"))



# Priorities: each job's longest path to the end of the E2GAN jobs, in CPU seconds measured on idle cores
# (2026-12-02: base 44, lr grid scratch 132, rank search 103, base variants 133, lr grid 74, fd net 16,
# scratch 163/193/134, base ablation 135, data curve 103, fine-tunes 74 each, concept table 8, latency 9),
# so that snakemake's greedy choice follows the critical path (an earlier run that started base_variants
# late ended with base_ablation alone on one core).




rule e2gan_fd_net:
    input: paper_config("e2gan")
    output: prov(E2GAN_FD, f"{X}/logs/fd_net.csv")
    benchmark: bench("e2gan_fd_net")
    priority: 229
    threads: 1
    shell: experiment_cmd("e2gan", "fd_net")


rule e2gan_base_model:
    input: paper_config("e2gan")
    output: prov(f"{X}/metrics/base_clustered.json", f"{X}/logs/base_clustered.csv")
    priority: 384
    benchmark: bench("e2gan_base_model")
    threads: 1
    shell: experiment_cmd("e2gan", "base_clustered")


rule e2gan_base_variants:
    input: paper_config("e2gan")
    output: prov(f"{X}/metrics/base_variants.json", f"{X}/logs/base_variants.csv")
    benchmark: bench("e2gan_base_variants")
    priority: 269
    threads: 1
    shell: experiment_cmd("e2gan", "base_variants")


rule e2gan_lr_grid_scratch:
    input: paper_config("e2gan")
    output: prov(f"{X}/metrics/lr_grid_scratch.json", f"{X}/logs/lr_grid_scratch.csv", f"{X}/tables/e2gan_lr_grid_scratch.csv", f"{X}/tables/e2gan_lr_grid_scratch.md")
    priority: 346
    benchmark: bench("e2gan_lr_grid_scratch")
    threads: 1
    shell: experiment_cmd("e2gan", "lr_grid_scratch")


rule e2gan_scratch_s0:
    input: paper_config("e2gan"), f"{X}/metrics/lr_grid_scratch.json", E2GAN_FD
    output: prov(f"{X}/metrics/scratch_s0.json", f"{X}/logs/scratch_s0.csv")
    priority: 186
    benchmark: bench("e2gan_scratch_s0")
    threads: 1
    shell: experiment_cmd("e2gan", "scratch_s0")


rule e2gan_scratch_s1:
    input: paper_config("e2gan"), f"{X}/metrics/lr_grid_scratch.json", E2GAN_FD
    output: prov(f"{X}/metrics/scratch_s1.json", f"{X}/logs/scratch_s1.csv")
    priority: 214
    benchmark: bench("e2gan_scratch_s1")
    threads: 1
    shell: experiment_cmd("e2gan", "scratch_s1")


rule e2gan_scratch_s2:
    input: paper_config("e2gan"), f"{X}/metrics/lr_grid_scratch.json", E2GAN_FD
    output: prov(f"{X}/metrics/scratch_s2.json", f"{X}/logs/scratch_s2.csv")
    priority: 157
    benchmark: bench("e2gan_scratch_s2")
    threads: 1
    shell: experiment_cmd("e2gan", "scratch_s2")


rule e2gan_finetune:
    """The fine-tuning arms at one seed index: they need the base, the searched ranks and the tuned lrs,
    not the scratch targets, so they run beside the scratch jobs."""
    input: paper_config("e2gan"), f"{X}/metrics/base_clustered.json", f"{X}/metrics/rank_search.json", f"{X}/metrics/lr_grid.json", E2GAN_FD
    output: prov(f"{X}/metrics/finetune_s{{i}}.json", f"{X}/logs/finetune_s{{i}}.csv")
    wildcard_constraints: i="[0-2]"
    priority: 95
    benchmark: bench("e2gan_finetune", "i")
    threads: 1
    shell: experiment_cmd("e2gan", "finetune_s{wildcards.i}")


rule e2gan_rank_search:
    input: paper_config("e2gan"), f"{X}/metrics/base_clustered.json"
    output:
        prov(f"{X}/metrics/rank_search.json", f"{X}/logs/rank_search.csv", f"{X}/tables/e2gan_rank_search.csv",
             f"{X}/tables/e2gan_rank_search.md", f"{X}/tables/e2gan_rank_search_probes.csv",
             f"{X}/tables/e2gan_rank_search_probes.md")
    priority: 339
    benchmark: bench("e2gan_rank_search")
    threads: 1
    shell: experiment_cmd("e2gan", "rank_search")


rule e2gan_lr_grid:
    input: paper_config("e2gan"), f"{X}/metrics/base_clustered.json", f"{X}/metrics/rank_search.json"
    output: prov(f"{X}/metrics/lr_grid.json", f"{X}/logs/lr_grid.csv", f"{X}/tables/e2gan_lr_grid.csv", f"{X}/tables/e2gan_lr_grid.md")
    priority: 236
    benchmark: bench("e2gan_lr_grid")
    threads: 1
    shell: experiment_cmd("e2gan", "lr_grid")


rule e2gan_concept_table:
    input: paper_config("e2gan"), f"{X}/metrics/base_clustered.json", f"{X}/metrics/rank_search.json", *E2GAN_SCRATCH, *E2GAN_FT, f"{X}/metrics/lr_grid.json", E2GAN_FD
    output:
        prov(f"{X}/metrics/concept_table.json", f"{X}/tables/e2gan_concept_table.csv", f"{X}/tables/e2gan_concept_table.md",
             f"{X}/tables/e2gan_concept_runs.csv", f"{X}/tables/e2gan_concept_runs.md",
             f"{X}/tables/e2gan_flops_ratios.csv", f"{X}/tables/e2gan_flops_ratios.md",
             f"{X}/tables/e2gan_layer_change.csv", f"{X}/tables/e2gan_layer_change.md",
             f"{X}/tables/e2gan_random_ranks.csv", f"{X}/tables/e2gan_random_ranks.md",
             f"{X}/figures/e2gan_image_grid.png", f"{X}/figures/e2gan_image_grid.pdf")
    priority: 25
    benchmark: bench("e2gan_concept_table")
    threads: 1
    shell: experiment_cmd("e2gan", "concept_table")


rule e2gan_base_ablation_table:
    input: paper_config("e2gan"), f"{X}/metrics/base_clustered.json", f"{X}/metrics/base_variants.json", f"{X}/metrics/rank_search.json", f"{X}/metrics/lr_grid.json", E2GAN_FD
    output:
        prov(f"{X}/metrics/base_ablation.json", f"{X}/logs/base_ablation.csv", f"{X}/tables/e2gan_base_ablation.csv", f"{X}/tables/e2gan_base_ablation.md",
             f"{X}/tables/e2gan_base_ablation_runs.csv", f"{X}/tables/e2gan_base_ablation_runs.md")
    priority: 135
    benchmark: bench("e2gan_base_ablation_table")
    threads: 1
    shell: experiment_cmd("e2gan", "base_ablation")


rule e2gan_data_size_figure:
    input: paper_config("e2gan"), f"{X}/metrics/base_clustered.json", f"{X}/metrics/rank_search.json", f"{X}/metrics/lr_grid.json", E2GAN_FD
    output:
        prov(f"{X}/metrics/data_size_curve.json", f"{X}/logs/data_size_curve.csv", f"{X}/figures/e2gan_data_size.png", f"{X}/figures/e2gan_data_size.pdf",
             f"{X}/tables/e2gan_data_size.csv", f"{X}/tables/e2gan_data_size.md")
    priority: 104
    benchmark: bench("e2gan_data_size_figure")
    threads: 1
    shell: experiment_cmd("e2gan", "data_size_curve")


rule e2gan_latency_table:
    input: paper_config("e2gan")
    output: prov(f"{X}/metrics/latency_table.json", f"{X}/tables/e2gan_latency.csv", f"{X}/tables/e2gan_latency.md")
    priority: 8
    benchmark: bench("e2gan_latency_table")
    threads: 1
    shell: experiment_cmd("e2gan", "latency_table")
