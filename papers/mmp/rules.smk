# MMP (Song et al., ICML 2024): c-index per arm and the oracle ceilings, then the table; cost vs N
# (slopes, OT solver speed-up); compression;
# loss ablation; prototype recovery; the breast-cancer real-data check. Every experiment that trains
# writes the loss curves of its fits to logs/<experiment>.csv (the notebook plots them).
MMP = f"{RESULTS}/mmp"
MMP_ARMS = ["abmil", "pathway", "mmp_histo", "mmp_gene", "mmp_trans", "mmp_trans_std_pi", "mmp_ot",
            "full_transformer", "prototype_cox", "token_linear", "token_mlp"]
MMP_EXPERIMENTS = [f"cindex_{a}" for a in MMP_ARMS] + ["oracle_ceilings", "cindex", "replication", "trans_diagnostics", "cost", "cost_shapes", "compression", "loss_ablation", "recovery", "breast_cancer", "pi_share_knob", "cohort_size_knob", "trans_factorial_cohorts"]
PAPER_RECORD_TABLES["mmp"] = ["cindex", "replication", "trans_factorial_cohorts", "pi_share_knob", "cohort_size_knob"]   # the results record's tables (Snakefile)
PAPER_METRICS["mmp"] = [f"{MMP}/metrics/{e}.json" for e in MMP_EXPERIMENTS]
MMP_ARM_METRICS = [f"{MMP}/metrics/cindex_{a}.json" for a in MMP_ARMS]
PAPER_HEADLINE_FIGURE["mmp"] = f"{MMP}/figures/interpretability.png"   # the HTML report's main figure (Snakefile)
PAPER_TARGETS.extend(prov(f"{MMP}/tables/cindex.md", f"{MMP}/tables/replication.md", f"{MMP}/tables/token_spread.md", f"{MMP}/tables/trans_diagnostics.md", f"{MMP}/tables/trans_factorial.md", f"{MMP}/figures/interpretability.png",
                          f"{MMP}/figures/cost.png", f"{MMP}/tables/cost.md", f"{MMP}/tables/ot_speed.md", f"{MMP}/tables/cost_shapes.md",
                          f"{MMP}/tables/cost_shapes_measured.md", f"{MMP}/tables/compression.md",
                          f"{MMP}/tables/loss_ablation.md", f"{MMP}/figures/recovery.png",
                          f"{MMP}/tables/recovery.md", f"{MMP}/tables/breast_cancer.md",
                          f"{MMP}/tables/pi_share_knob.md", f"{MMP}/tables/cohort_size_knob.md",
                          f"{MMP}/tables/trans_factorial_cohorts.md"))


MMP_TRAINED_ARMS = [a for a in MMP_ARMS if a not in ("mmp_trans", "prototype_cox")]

if PROFILE == "full":
    rule mmp_cindex_arm:
        """One trained arm (ABMIL, pathway-only, the unimodal MMP arms, MMP-Trans with standardised π,
        MMP-OT, full-token Transformer, linear Cox and MLP on the tokens) on the folds, with its training curves: one job per arm at
        full, where each is hours (and a SLURM job of its own)."""
        input: paper_config("mmp")
        output:
            prov(f"{MMP}/metrics/cindex_{{arm,abmil|pathway|mmp_histo|mmp_gene|mmp_trans_std_pi|mmp_ot|full_transformer|token_linear|token_mlp}}.json",
                 f"{MMP}/logs/cindex_{{arm}}.csv")
        threads: 1
        benchmark: bench("mmp_cindex_arm", "arm")
        shell: experiment_cmd("mmp", "cindex_{wildcards.arm}")
else:
    rule mmp_cindex_arms:
        """The same arms at smoke and tiny, one after the other in one process: each is seconds of
        training, and a process pays about 3 CPU-s to import Lightning (torchmetrics pulls in
        transformers and scipy.signal), 6 of them saved. Each arm still writes its own metrics, log
        and provenance, as `python -m papers.mmp cindex_<arm>` alone does."""
        input: paper_config("mmp")
        output:
            prov(*[f"{MMP}/metrics/cindex_{a}.json" for a in MMP_TRAINED_ARMS],
                 *[f"{MMP}/logs/cindex_{a}.csv" for a in MMP_TRAINED_ARMS])
        threads: 1
        benchmark: bench("mmp_cindex_arms")
        shell: experiment_cmd("mmp", " ".join(f"cindex_{a}" for a in MMP_TRAINED_ARMS))


rule mmp_cindex_prototype_cox:
    """The π-only linear Cox-PH (lifelines; no training curve) on the site-disjoint folds."""
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/cindex_prototype_cox.json")
    threads: 1
    benchmark: bench("mmp_cindex_prototype_cox")
    shell: experiment_cmd("mmp", "cindex_prototype_cox")


rule mmp_interpretability_figure:
    """MMP-Trans on the folds (the main training: checkpointed, resumed after a kill), with its KM
    risk groups, attention map and pi-vs-risk figure, and its training curves."""
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/cindex_mmp_trans.json", f"{MMP}/figures/interpretability.png",
             f"{MMP}/figures/interpretability.pdf", f"{MMP}/logs/cindex_mmp_trans.csv"),
    threads: 1
    benchmark: bench("mmp_interpretability_figure")
    shell: experiment_cmd("mmp", "cindex_mmp_trans")


rule mmp_trans_factorial_cohorts_table:
    """The factorial's cells (diagnostics.cohort_factors: the 2³ of trans_diagnostics) on every replication
    cohort; cohort 0 read from trans_diagnostics."""
    input: paper_config("mmp"), f"{MMP}/metrics/trans_diagnostics.json"
    output:
        prov(f"{MMP}/metrics/trans_factorial_cohorts.json", f"{MMP}/tables/trans_factorial_cohorts.csv",
             f"{MMP}/tables/trans_factorial_cohorts.md")
    threads: 1
    benchmark: bench("mmp_trans_factorial_cohorts_table")
    shell: experiment_cmd("mmp", "trans_factorial_cohorts")


rule mmp_pi_share_knob_table:
    """The π/μ knob: MMP-Trans, ABMIL and the full-token Transformer on 5 folds at each share of the
    histology risk carried by π (knobs.pi_share); knob samples for the knob claims."""
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/pi_share_knob.json", f"{MMP}/tables/pi_share_knob.csv", f"{MMP}/tables/pi_share_knob.md")
    threads: 1
    benchmark: bench("mmp_pi_share_knob_table")
    shell: experiment_cmd("mmp", "pi_share_knob")


rule mmp_cohort_size_knob_table:
    """The cohort-size knob: MMP-Trans and ABMIL on 5 folds at each cohort size (knobs.n_patients)."""
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/cohort_size_knob.json", f"{MMP}/tables/cohort_size_knob.csv",
             f"{MMP}/tables/cohort_size_knob.md")
    threads: 1
    benchmark: bench("mmp_cohort_size_knob_table")
    shell: experiment_cmd("mmp", "cohort_size_knob")


rule mmp_oracle_ceilings:
    """Linear Cox on the generator's true proportions, grades, pathway activities, and all of them."""
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/oracle_ceilings.json")
    threads: 1
    benchmark: bench("mmp_oracle_ceilings")
    shell: experiment_cmd("mmp", "oracle_ceilings")


rule mmp_cindex_table:
    input: paper_config("mmp"), MMP_ARM_METRICS, f"{MMP}/metrics/oracle_ceilings.json"
    output:
        prov(f"{MMP}/metrics/cindex.json", f"{MMP}/tables/cindex.csv", f"{MMP}/tables/cindex.md",
             f"{MMP}/tables/token_spread.csv", f"{MMP}/tables/token_spread.md")
    threads: 1
    benchmark: bench("mmp_cindex_table")
    shell: experiment_cmd("mmp", "cindex")


rule mmp_replication_table:
    """The arms on further synthetic cohorts (the outer unit of every comparison), beside the workflow's
    own cohort read from the arms' metrics: grouped samples for the claims."""
    input: paper_config("mmp"), MMP_ARM_METRICS
    output:
        prov(f"{MMP}/metrics/replication.json", f"{MMP}/tables/replication.csv", f"{MMP}/tables/replication.md")
    threads: 1
    benchmark: bench("mmp_replication_table")
    shell: experiment_cmd("mmp", "replication")


rule mmp_trans_diagnostics_table:
    """Why MMP-Trans stays near chance: a 2^3 factorial (standardised π × value residual × schedule)
    paired by fold, with its main effects and interactions; beside it, one change at a time (genes
    zeroed, fewer pathway tokens; the histo arm at equal budget)."""
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/trans_diagnostics.json", f"{MMP}/tables/trans_diagnostics.csv",
             f"{MMP}/tables/trans_diagnostics.md", f"{MMP}/tables/trans_factorial.csv",
             f"{MMP}/tables/trans_factorial.md", f"{MMP}/logs/trans_diagnostics.csv")
    threads: 1
    benchmark: bench("mmp_trans_diagnostics_table")
    shell: experiment_cmd("mmp", "trans_diagnostics")


rule mmp_cost_figure:
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/cost.json", f"{MMP}/figures/cost.png", f"{MMP}/figures/cost.pdf",
                 f"{MMP}/tables/cost.csv", f"{MMP}/tables/cost.md", f"{MMP}/tables/ot_speed.csv",
                 f"{MMP}/tables/ot_speed.md")
    threads: 1
    benchmark: bench("mmp_cost_figure")
    shell: experiment_cmd("mmp", "cost")


rule mmp_cost_shapes_table:
    """FLOP and byte counts from tensor shapes at the paper's d = 1024, checked against FlopCounterMode
    and the peak-memory tracker up to N = 1e4 and counted to 1e5; the N² share, the end-to-end ratios."""
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/cost_shapes.json", f"{MMP}/tables/cost_shapes.csv", f"{MMP}/tables/cost_shapes.md",
             f"{MMP}/tables/cost_shapes_measured.csv", f"{MMP}/tables/cost_shapes_measured.md")
    threads: 1
    benchmark: bench("mmp_cost_shapes_table")
    shell: experiment_cmd("mmp", "cost_shapes")


rule mmp_compression_table:
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/compression.json", f"{MMP}/tables/compression.csv", f"{MMP}/tables/compression.md")
    threads: 1
    benchmark: bench("mmp_compression_table")
    shell: experiment_cmd("mmp", "compression")


rule mmp_loss_ablation_table:
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/loss_ablation.json", f"{MMP}/tables/loss_ablation.csv",
                 f"{MMP}/tables/loss_ablation.md", f"{MMP}/logs/loss_ablation.csv")
    threads: 1
    benchmark: bench("mmp_loss_ablation_table")
    shell: experiment_cmd("mmp", "loss_ablation")


rule mmp_recovery_figure:
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/recovery.json", f"{MMP}/figures/recovery.png", f"{MMP}/figures/recovery.pdf",
                 f"{MMP}/tables/recovery.csv", f"{MMP}/tables/recovery.md")
    threads: 1
    benchmark: bench("mmp_recovery_figure")
    shell: experiment_cmd("mmp", "recovery")


rule mmp_breast_cancer_table:
    input: paper_config("mmp")
    output:
        prov(f"{MMP}/metrics/breast_cancer.json", f"{MMP}/tables/breast_cancer.csv",
                 f"{MMP}/tables/breast_cancer.md", f"{MMP}/logs/breast_cancer.csv")
    threads: 1
    benchmark: bench("mmp_breast_cancer_table")
    shell: experiment_cmd("mmp", "breast_cancer")
