# EVEREST vs VideoMAE: pre-training arms, fine-tuning arms (the 2×2 and controls), the label-leak
# probe, then tables/figures.
from shared.config import load_config as _ev_load_config

EV = f"{RESULTS}/everest"
EV_CFG = "papers/everest/config.yaml"
# The trainings' Lightning settings: the config's `trainer:` at this profile, read here as
# `python -m papers.everest` reads it, so the SLURM resources (slurm_training) match the trainer that
# Lightning builds. `--config everest_trainer="{devices: 4, num_nodes: 2, strategy: ddp}"` overrides
# it for both: the same `trainer.K=V` strings become the training commands' `--set` (the trainer
# section is not in the weights' cache key, so the other experiments still find the weights).
EV_TRAINER_SET = [f"trainer.{k}={v}" for k, v in config.get("everest_trainer", {}).items()]
_EV_CONFIG = _ev_load_config(EV_CFG, PROFILE, EV_TRAINER_SET, overlay=rehearsal_template("everest"))
EV_TRAINING_RESOURCES, EV_LAUNCHER = slurm_training(_EV_CONFIG.trainer)
# At full every seed of a training is a job of its own (rules everest_*_seed: `<experiment>_seed --seed S`,
# each with the training's resources), and the arm's rule (everest_*_merge) merges their seed records into
# the arm's metrics on a CPU, training nothing; at smoke and tiny one job trains every seed in series.
EV_SEED_JOBS = PROFILE == "full"
EV_SEEDS = [int(s) for s in _EV_CONFIG.seeds]


def _ev_arms(arms, on=True):
    """The wildcard constraint of a rule that runs these arms when `on`, else of one that never matches."""
    return "|".join(arms) if on else "(?!)"


def _ev_seed_outputs(experiment):
    return [f"{EV}/metrics/{experiment}_seed{s}.json" for s in EV_SEEDS]
EV_PRETRAIN = ["videomae", "everest", "ascending", "everest_uniform_frames", "everest_selected_frames"]
# fine-tune arm -> the pre-training arm whose weights it starts from (None: scratch)
EV_FINETUNE = {"videomae": "videomae", "videomae_pruned": "videomae", "everest_full": "everest",
               "everest": "everest", "random": "everest", "ascending": "ascending", "scratch": None,
               "everest_uniform_frames": "everest_uniform_frames",
               "everest_selected_frames": "everest_selected_frames"}
# the static-context knob: the arms trained at its other points (the first point is the main world)
EV_KNOB_PRETRAIN = ["videomae", "everest"]
EV_KNOB_FINETUNE = {"videomae": "videomae", "everest_full": "everest", "everest": "everest"}
# the budget curve: VideoMAE and EVEREST pre-trained again at its shorter lengths and fine-tuned from them
EV_BUDGET = ["videomae", "everest"]

PAPER_RECORD_TABLES["everest"] = ["accuracy_2x2", "accuracy", "finetune_lr", "static_knob", "budget_curve", "camera_pan"]   # the results record's tables (Snakefile)
PAPER_HEADLINE_FIGURE["everest"] = f"{EV}/figures/static_knob.png"   # the HTML report's main figure (Snakefile)
PAPER_METRICS["everest"] = (
    [f"{EV}/metrics/pretrain_{a}.json" for a in EV_PRETRAIN]
    + [f"{EV}/metrics/finetune_{a}.json" for a in EV_FINETUNE]
    + [f"{EV}/metrics/knob_pretrain_{a}.json" for a in EV_KNOB_PRETRAIN]
    + [f"{EV}/metrics/knob_finetune_{a}.json" for a in EV_KNOB_FINETUNE]
    + [f"{EV}/metrics/budget_{phase}_{a}.json" for phase in ("pretrain", "finetune") for a in EV_BUDGET]
    + [f"{EV}/metrics/{e}.json" for e in ("label_leak", "accuracy", "static_knob", "camera_pan", "efficiency",
                                         "efficiency_vit_b", "token_overlay")]
)
PAPER_TARGETS.extend(prov(
    f"{EV}/figures/token_overlay.png",
    f"{EV}/tables/accuracy_2x2.md", f"{EV}/tables/accuracy.md", f"{EV}/tables/accuracy_gaps.md",
    f"{EV}/tables/frame_selection.md", f"{EV}/tables/label_leak.md",
    f"{EV}/tables/efficiency.md", f"{EV}/tables/efficiency_vit_b.md", f"{EV}/tables/token_selection.md",
    f"{EV}/tables/static_knob.md", f"{EV}/figures/static_knob.png", f"{EV}/tables/camera_pan.md",
    f"{EV}/tables/finetune_lr.md", f"{EV}/tables/budget_curve.md",
))


def _ev_pretrain_input(wc):
    src = EV_FINETUNE[wc.arm]
    return paper_config("everest") + ([f"{EV}/metrics/pretrain_{src}.json"] if src else [])


rule everest_pretrain_checkpoints:
    """Pre-training of one arm, once per seed (weights under checkpoints/)."""
    input: paper_config("everest")
    output: prov(f"{EV}/metrics/pretrain_{{arm}}.json")
    wildcard_constraints: arm=_ev_arms(EV_PRETRAIN, not EV_SEED_JOBS)
    threads: 1
    resources: **EV_TRAINING_RESOURCES
    benchmark: bench("everest_pretrain_checkpoints", "arm")
    shell: experiment_cmd("everest", "pretrain_{wildcards.arm}", EV_LAUNCHER, EV_TRAINER_SET)


rule everest_finetune_top1:
    """Fine-tuning + test top-1 of one arm, once per seed."""
    input: _ev_pretrain_input
    output: prov(f"{EV}/metrics/finetune_{{arm}}.json")
    wildcard_constraints: arm=_ev_arms(EV_FINETUNE, not EV_SEED_JOBS)
    threads: 1
    resources: **EV_TRAINING_RESOURCES
    benchmark: bench("everest_finetune_top1", "arm")
    shell: experiment_cmd("everest", "finetune_{wildcards.arm}", EV_LAUNCHER, EV_TRAINER_SET)


rule everest_knob_pretrain_checkpoints:
    """Pre-training of one arm at every other point of the static-context knob, once per seed."""
    input: paper_config("everest")
    output: prov(f"{EV}/metrics/knob_pretrain_{{arm}}.json")
    wildcard_constraints: arm="|".join(EV_KNOB_PRETRAIN)
    threads: 1
    resources: **EV_TRAINING_RESOURCES
    benchmark: bench("everest_knob_pretrain_checkpoints", "arm")
    shell: experiment_cmd("everest", "knob_pretrain_{wildcards.arm}", EV_LAUNCHER, EV_TRAINER_SET)


rule everest_knob_finetune_top1:
    """Fine-tuning + test top-1 of one arm at every other point of the static-context knob, once per seed."""
    input:
        paper_config("everest"), lambda wc: f"{EV}/metrics/knob_pretrain_{EV_KNOB_FINETUNE[wc.arm]}.json",
        f"{EV}/metrics/finetune_{{arm}}.json",   # the lr the main world's fine-tune chose
    output: prov(f"{EV}/metrics/knob_finetune_{{arm}}.json")
    wildcard_constraints: arm="|".join(EV_KNOB_FINETUNE)
    threads: 1
    resources: **EV_TRAINING_RESOURCES
    benchmark: bench("everest_knob_finetune_top1", "arm")
    shell: experiment_cmd("everest", "knob_finetune_{wildcards.arm}", EV_LAUNCHER, EV_TRAINER_SET)


rule everest_budget_pretrain_checkpoints:
    """Pre-training of VideoMAE or EVEREST at every shorter length of the budget curve, once per seed."""
    input: paper_config("everest")
    output: prov(f"{EV}/metrics/budget_pretrain_{{arm}}.json")
    wildcard_constraints: arm=_ev_arms(EV_BUDGET, not EV_SEED_JOBS)
    threads: 1
    resources: **EV_TRAINING_RESOURCES
    benchmark: bench("everest_budget_pretrain_checkpoints", "arm")
    shell: experiment_cmd("everest", "budget_pretrain_{wildcards.arm}", EV_LAUNCHER, EV_TRAINER_SET)


rule everest_budget_finetune_top1:
    """Fine-tuning + test top-1 from every shorter pre-training of the budget curve, at the main world's lr."""
    input:
        paper_config("everest"), f"{EV}/metrics/budget_pretrain_{{arm}}.json",
        f"{EV}/metrics/finetune_{{arm}}.json",   # the lr the main world's fine-tune chose
    output: prov(f"{EV}/metrics/budget_finetune_{{arm}}.json")
    wildcard_constraints: arm=_ev_arms(EV_BUDGET, not EV_SEED_JOBS)
    threads: 1
    resources: **EV_TRAINING_RESOURCES
    benchmark: bench("everest_budget_finetune_top1", "arm")
    shell: experiment_cmd("everest", "budget_finetune_{wildcards.arm}", EV_LAUNCHER, EV_TRAINER_SET)


def _ev_finetune_seed_input(wc):
    src = EV_FINETUNE[wc.arm]
    return paper_config("everest") + ([f"{EV}/metrics/pretrain_{src}_seed{wc.seed}.json"] if src else [])


rule everest_pretrain_seed:
    """Full profile: pre-training of one arm at one seed (weights and its seed record under checkpoints/)."""
    input: paper_config("everest")
    output: prov(f"{EV}/metrics/pretrain_{{arm}}_seed{{seed}}.json")
    wildcard_constraints: arm=_ev_arms(EV_PRETRAIN, EV_SEED_JOBS), seed=r"\d+"
    threads: 1
    resources: **EV_TRAINING_RESOURCES
    benchmark: bench("everest_pretrain_seed", "arm", "seed")
    shell: experiment_cmd("everest", "pretrain_{wildcards.arm}_seed", EV_LAUNCHER, EV_TRAINER_SET) + " --seed {wildcards.seed}"


rule everest_finetune_seed:
    """Full profile: fine-tuning + test top-1 of one arm at one seed, from that seed's pre-training."""
    input: _ev_finetune_seed_input
    output: prov(f"{EV}/metrics/finetune_{{arm}}_seed{{seed}}.json")
    wildcard_constraints: arm=_ev_arms(EV_FINETUNE, EV_SEED_JOBS), seed=r"\d+"
    threads: 1
    resources: **EV_TRAINING_RESOURCES
    benchmark: bench("everest_finetune_seed", "arm", "seed")
    shell: experiment_cmd("everest", "finetune_{wildcards.arm}_seed", EV_LAUNCHER, EV_TRAINER_SET) + " --seed {wildcards.seed}"


rule everest_budget_pretrain_seed:
    """Full profile: the budget curve's shorter pre-trainings of one arm at one seed."""
    input: paper_config("everest")
    output: prov(f"{EV}/metrics/budget_pretrain_{{arm}}_seed{{seed}}.json")
    wildcard_constraints: arm=_ev_arms(EV_BUDGET, EV_SEED_JOBS), seed=r"\d+"
    threads: 1
    resources: **EV_TRAINING_RESOURCES
    benchmark: bench("everest_budget_pretrain_seed", "arm", "seed")
    shell: experiment_cmd("everest", "budget_pretrain_{wildcards.arm}_seed", EV_LAUNCHER, EV_TRAINER_SET) + " --seed {wildcards.seed}"


rule everest_budget_finetune_seed:
    """Full profile: the budget curve's fine-tunes of one arm at one seed, at the main world's lr."""
    input:
        paper_config("everest"), f"{EV}/metrics/budget_pretrain_{{arm}}_seed{{seed}}.json",
        f"{EV}/metrics/finetune_{{arm}}.json",
    output: prov(f"{EV}/metrics/budget_finetune_{{arm}}_seed{{seed}}.json")
    wildcard_constraints: arm=_ev_arms(EV_BUDGET, EV_SEED_JOBS), seed=r"\d+"
    threads: 1
    resources: **EV_TRAINING_RESOURCES
    benchmark: bench("everest_budget_finetune_seed", "arm", "seed")
    shell: experiment_cmd("everest", "budget_finetune_{wildcards.arm}_seed", EV_LAUNCHER, EV_TRAINER_SET) + " --seed {wildcards.seed}"


rule everest_pretrain_merge:
    """Full profile: the arm's pre-training record over seeds, from its seed jobs' records (no training)."""
    input: paper_config("everest"), lambda wc: _ev_seed_outputs(f"pretrain_{wc.arm}")
    output: prov(f"{EV}/metrics/pretrain_{{arm}}.json")
    wildcard_constraints: arm=_ev_arms(EV_PRETRAIN, EV_SEED_JOBS)
    threads: 1
    benchmark: bench("everest_pretrain_merge", "arm")
    shell: experiment_cmd("everest", "pretrain_{wildcards.arm}")


rule everest_finetune_merge:
    """Full profile: the arm's top-1 over seeds, from its seed jobs' records (no training, no evaluation)."""
    input: paper_config("everest"), lambda wc: _ev_seed_outputs(f"finetune_{wc.arm}")
    output: prov(f"{EV}/metrics/finetune_{{arm}}.json")
    wildcard_constraints: arm=_ev_arms(EV_FINETUNE, EV_SEED_JOBS)
    threads: 1
    benchmark: bench("everest_finetune_merge", "arm")
    shell: experiment_cmd("everest", "finetune_{wildcards.arm}")


rule everest_budget_pretrain_merge:
    input: paper_config("everest"), lambda wc: _ev_seed_outputs(f"budget_pretrain_{wc.arm}")
    output: prov(f"{EV}/metrics/budget_pretrain_{{arm}}.json")
    wildcard_constraints: arm=_ev_arms(EV_BUDGET, EV_SEED_JOBS)
    threads: 1
    benchmark: bench("everest_budget_pretrain_merge", "arm")
    shell: experiment_cmd("everest", "budget_pretrain_{wildcards.arm}")


rule everest_budget_finetune_merge:
    input: paper_config("everest"), lambda wc: _ev_seed_outputs(f"budget_finetune_{wc.arm}")
    output: prov(f"{EV}/metrics/budget_finetune_{{arm}}.json")
    wildcard_constraints: arm=_ev_arms(EV_BUDGET, EV_SEED_JOBS)
    threads: 1
    benchmark: bench("everest_budget_finetune_merge", "arm")
    shell: experiment_cmd("everest", "budget_finetune_{wildcards.arm}")


rule everest_static_knob_table:
    """EVEREST − VideoMAE, the pruning cost and the two readers along the static-context knob."""
    input:
        paper_config("everest"),
        [f"{EV}/metrics/finetune_{a}.json" for a in EV_KNOB_FINETUNE],
        [f"{EV}/metrics/knob_finetune_{a}.json" for a in EV_KNOB_FINETUNE],
    output:
        prov(f"{EV}/metrics/static_knob.json", f"{EV}/tables/static_knob.csv", f"{EV}/tables/static_knob.md",
             f"{EV}/figures/static_knob.png", f"{EV}/figures/static_knob.pdf"),
    threads: 1
    benchmark: bench("everest_static_knob_table")
    shell: experiment_cmd("everest", "static_knob")


rule everest_camera_pan:
    """VideoMAE and EVEREST pre-trained, fine-tuned and tested with the camera panning, beside pan off."""
    input:
        paper_config("everest"), [f"{EV}/metrics/finetune_{a}.json" for a in ("videomae", "everest")],
    output: prov(f"{EV}/metrics/camera_pan.json", f"{EV}/tables/camera_pan.csv", f"{EV}/tables/camera_pan.md")
    threads: 1
    benchmark: bench("everest_camera_pan")
    # procedural clips only (a table saying so on video, at full): a one-process CPU job, no training launcher
    shell: experiment_cmd("everest", "camera_pan", "", EV_TRAINER_SET)


rule everest_label_leak_probe:
    """Linear probes on the keep mask alone: the class (chance) and the motion direction (control)."""
    input: paper_config("everest")
    output: prov(f"{EV}/metrics/label_leak.json", f"{EV}/tables/label_leak.csv", f"{EV}/tables/label_leak.md")
    threads: 1
    benchmark: bench("everest_label_leak_probe")
    shell: experiment_cmd("everest", "label_leak")


rule everest_accuracy_table:
    input:
        paper_config("everest"),
        [f"{EV}/metrics/finetune_{a}.json" for a in EV_FINETUNE],
        [f"{EV}/metrics/pretrain_{a}.json" for a in ("everest_uniform_frames", "everest_selected_frames")],
        [f"{EV}/metrics/budget_finetune_{a}.json" for a in EV_BUDGET],
    output:
        prov(f"{EV}/metrics/accuracy.json",
             *[f"{EV}/tables/{t}.{ext}" for t in ("accuracy_2x2", "accuracy", "accuracy_gaps", "frame_selection",
                                                  "finetune_lr", "budget_curve")
               for ext in ("csv", "md")]),
    threads: 1
    benchmark: bench("everest_accuracy_table")
    shell: experiment_cmd("everest", "accuracy")


rule everest_efficiency_table:
    input: paper_config("everest")
    output: prov(f"{EV}/metrics/efficiency.json", f"{EV}/tables/efficiency.csv", f"{EV}/tables/efficiency.md")
    threads: 1
    benchmark: bench("everest_efficiency_table")
    shell: experiment_cmd("everest", "efficiency")


rule everest_efficiency_vit_b_table:
    input: paper_config("everest")
    output:
        prov(f"{EV}/metrics/efficiency_vit_b.json", f"{EV}/tables/efficiency_vit_b.csv",
             f"{EV}/tables/efficiency_vit_b.md"),
    threads: 1
    benchmark: bench("everest_efficiency_vit_b_table")
    shell: experiment_cmd("everest", "efficiency_vit_b")


rule everest_token_overlay:
    input: paper_config("everest"), f"{EV}/metrics/pretrain_everest.json"
    output:
        prov(f"{EV}/metrics/token_overlay.json", f"{EV}/figures/token_overlay.png", f"{EV}/figures/token_overlay.pdf",
             f"{EV}/tables/token_selection.csv", f"{EV}/tables/token_selection.md"),
    threads: 1
    benchmark: bench("everest_token_overlay")
    shell: experiment_cmd("everest", "token_overlay")
