# EVEREST vs VideoMAE: pre-training arms, fine-tuning arms, budget fine-tunes, then tables/figures.
EV = f"{RESULTS}/everest"
EV_CFG = "papers/everest/config.yaml"
EV_PRETRAIN = ["videomae", "everest", "ascending", "videomae_pan", "everest_pan"]
# fine-tune arm -> the pre-training arm whose weights it starts from (None: scratch)
EV_FINETUNE = {"videomae": "videomae", "everest": "everest", "random": "everest", "ascending": "ascending",
               "scratch": None, "videomae_pan": "videomae_pan", "everest_pan": "everest_pan"}
EV_BUDGET = ["videomae", "everest"]

PAPER_METRICS["everest"] = (
    [f"{EV}/metrics/pretrain_{a}.json" for a in EV_PRETRAIN]
    + [f"{EV}/metrics/finetune_{a}.json" for a in EV_FINETUNE]
    + [f"{EV}/metrics/budget_{a}.json" for a in EV_BUDGET]
    + [f"{EV}/metrics/{e}.json" for e in ("accuracy", "efficiency", "token_overlay")]
)
PAPER_TARGETS.extend(prov(
    f"{EV}/figures/accuracy_vs_budget.png", f"{EV}/figures/token_overlay.png",
    f"{EV}/tables/accuracy.md", f"{EV}/tables/accuracy_pan.md", f"{EV}/tables/accuracy_vs_budget.md",
    f"{EV}/tables/efficiency.md", f"{EV}/tables/efficiency_vit_b.md", f"{EV}/tables/token_selection.md",
))


def _ev_pretrain_input(wc):
    src = EV_FINETUNE[wc.arm]
    return [EV_CFG] + ([f"{EV}/metrics/pretrain_{src}.json"] if src else [])


rule everest_pretrain_checkpoints:
    """Pre-training of one arm (weights at 25/50/100% of the steps under checkpoints/)."""
    input: EV_CFG
    output: prov(f"{EV}/metrics/pretrain_{{arm}}.json")
    wildcard_constraints: arm="|".join(EV_PRETRAIN)
    threads: 1
    shell: experiment_cmd("everest", "pretrain_{wildcards.arm}")


rule everest_finetune_top1:
    """Fine-tuning + test top-1 of one arm."""
    input: _ev_pretrain_input
    output: prov(f"{EV}/metrics/finetune_{{arm}}.json")
    wildcard_constraints: arm="|".join(EV_FINETUNE)
    threads: 1
    shell: experiment_cmd("everest", "finetune_{wildcards.arm}")


rule everest_budget_top1:
    """Fine-tunes of the 25% and 50% pre-training snapshots."""
    input: EV_CFG, f"{EV}/metrics/pretrain_{{arm}}.json"
    output: prov(f"{EV}/metrics/budget_{{arm}}.json")
    wildcard_constraints: arm="|".join(EV_BUDGET)
    threads: 1
    shell: experiment_cmd("everest", "budget_{wildcards.arm}")


rule everest_accuracy_table:
    input:
        EV_CFG,
        [f"{EV}/metrics/finetune_{a}.json" for a in EV_FINETUNE],
        [f"{EV}/metrics/budget_{a}.json" for a in EV_BUDGET],
    output:
        prov(f"{EV}/metrics/accuracy.json", f"{EV}/tables/accuracy.csv", f"{EV}/tables/accuracy.md",
             f"{EV}/tables/accuracy_pan.csv", f"{EV}/tables/accuracy_pan.md",
             f"{EV}/tables/accuracy_vs_budget.csv", f"{EV}/tables/accuracy_vs_budget.md",
             f"{EV}/figures/accuracy_vs_budget.png", f"{EV}/figures/accuracy_vs_budget.pdf"),
    threads: 1
    shell: experiment_cmd("everest", "accuracy")


rule everest_efficiency_table:
    input: EV_CFG
    output:
        prov(f"{EV}/metrics/efficiency.json", f"{EV}/tables/efficiency.csv", f"{EV}/tables/efficiency.md",
             f"{EV}/tables/efficiency_vit_b.csv", f"{EV}/tables/efficiency_vit_b.md"),
    threads: 1
    shell: experiment_cmd("everest", "efficiency")


rule everest_token_overlay:
    input: EV_CFG, f"{EV}/metrics/pretrain_everest.json"
    output:
        prov(f"{EV}/metrics/token_overlay.json", f"{EV}/figures/token_overlay.png", f"{EV}/figures/token_overlay.pdf",
             f"{EV}/tables/token_selection.csv", f"{EV}/tables/token_selection.md"),
    threads: 1
    shell: experiment_cmd("everest", "token_overlay")
