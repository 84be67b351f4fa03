# P2L: train the tiny prior, solve every task with every method, then the table, figures and ablation.
# Priorities follow each job's longest path to the end (prior → main_sr → ablation is the longest).
from shared.config import load_config as _p2l_load_config

P2L = f"{RESULTS}/p2l"
P2L_CFG = _p2l_load_config("papers/p2l/config.yaml", PROFILE, overlay=rehearsal_template("p2l"))
P2L_TASKS = list(P2L_CFG["main_tasks"])
_P2L_TINY_PRIOR = not P2L_CFG["full"]["sd_path"]   # the tiny world: a trained prior, its classifier, its gate
P2L_PRIORS = int(P2L_CFG.get("priors", 1)) if _P2L_TINY_PRIOR else 1   # each from its own seed: the outer unit
P2L_PRIOR = ([f"{P2L}/metrics/{e}.json" for e in ("train_classifier", "train_prior")]
             + [f"{P2L}/metrics/train_prior_{k}.json" for k in range(1, P2L_PRIORS)]) if _P2L_TINY_PRIOR else []
P2L_GATE = [f"{P2L}/metrics/prior_gate.json"] if _P2L_TINY_PRIOR else []
P2L_PARTS = [f"{P2L}/metrics/main_{t}.json" for t in P2L_TASKS]



P2L_KNOB = [f"{P2L}/metrics/severity_knob.json"] if _P2L_TINY_PRIOR else []   # the tiny world's SR-factor knob
PAPER_RECORD_TABLES["p2l"] = ["main_table", "floors", "ablation"]   # the results record's tables (Snakefile)
PAPER_HEADLINE_FIGURE["p2l"] = f"{P2L}/figures/main_comparison.png"   # the HTML report's main figure (Snakefile)
PAPER_METRICS["p2l"] = P2L_PRIOR + P2L_GATE + P2L_PARTS + [f"{P2L}/metrics/main_table.json", f"{P2L}/metrics/floors.json",
                                                 f"{P2L}/metrics/ablation.json", f"{P2L}/metrics/steps_check.json"] + P2L_KNOB
PAPER_TARGETS.extend(prov(
    *([f"{P2L}/figures/prior_samples.png"] if P2L_GATE else []),
    *([f"{P2L}/tables/{k}.md" for k in ("severity_knob", "severity_knob_tuning")] if P2L_KNOB else []),
    *[f"{P2L}/figures/{k}_{t}.png" for t in P2L_TASKS for k in ("grid", "tuning")],
    *[f"{P2L}/tables/{k}_{t}.md" for t in P2L_TASKS for k in ("tuning", "per_image")],
    *[f"{P2L}/tables/{k}.md" for k in ("main_table", "main_table_wide", "runtime_nfe", "artifacts_range", "floors",
                                       "floors_standing", "floors_tuning", "ablation", "ablation_tuning", "steps_check")],
    f"{P2L}/figures/prompt_trajectory.png", f"{P2L}/figures/off_range.png",
))


rule p2l_classifier:
    """The attribute classifier, beside the VAE and the LDM (the gate, the FD proxy and attribute accuracy read it).
    Every main task needs it, so its priority is the priors' less its own short run: snakemake does not raise
    a job's priority to its dependents' (tests/test_priorities.py)."""
    input: paper_config("p2l")
    output: prov(f"{P2L}/metrics/train_classifier.json")
    benchmark: bench("p2l_classifier")
    priority: 550
    threads: 1
    shell: experiment_cmd("p2l", "train_classifier")


rule p2l_prior:
    input: paper_config("p2l")
    output: prov(f"{P2L}/metrics/train_prior.json")
    benchmark: bench("p2l_prior")
    priority: 600
    threads: 1
    shell: experiment_cmd("p2l", "train_prior")


rule p2l_prior_replica:
    """Prior k > 0 (from seed + k), beside the first."""
    input: paper_config("p2l")
    output: prov(f"{P2L}/metrics/train_prior_{{k}}.json")
    wildcard_constraints: k=r"[1-9]"
    benchmark: bench("p2l_prior_replica", "k")
    priority: 600
    threads: 1
    shell: experiment_cmd("p2l", "train_prior_{wildcards.k}")


rule p2l_prior_gate:
    """The prior follows its captions (the claims' gate): beside the main tasks, which need only the prior."""
    input: paper_config("p2l"), P2L_PRIOR
    output: prov(f"{P2L}/metrics/prior_gate.json", f"{P2L}/figures/prior_samples.png", f"{P2L}/figures/prior_samples.pdf")
    benchmark: bench("p2l_prior_gate")
    priority: 90
    threads: 1
    shell: experiment_cmd("p2l", "prior_gate")


rule p2l_task_solutions:
    input: paper_config("p2l"), P2L_PRIOR
    output:
        prov(f"{P2L}/metrics/main_{{task}}.json",
             *[f"{P2L}/figures/{k}_{{task}}.{e}" for k in ("grid", "tuning") for e in ("png", "pdf")],
             *[f"{P2L}/tables/{k}_{{task}}.{e}" for k in ("tuning", "per_image") for e in ("csv", "md")])
    wildcard_constraints: task="|".join(P2L_TASKS)
    benchmark: bench("p2l_task_solutions", "task")
    priority: lambda wildcards: 400 if wildcards.task == P2L_CFG["ablation"]["task"] else 200
    threads: 1
    shell: experiment_cmd("p2l", "main_{wildcards.task}")


rule p2l_main_table:
    input: paper_config("p2l"), P2L_PARTS, [f"{P2L}/tables/tuning_{t}.csv" for t in P2L_TASKS]
    output:
        prov(f"{P2L}/metrics/main_table.json",
             *[f"{P2L}/tables/{k}.{e}" for k in ("main_table", "main_table_wide", "runtime_nfe", "artifacts_range")
               for e in ("csv", "md")],
             *[f"{P2L}/figures/{k}.{e}" for k in ("prompt_trajectory", "off_range") for e in ("png", "pdf")])
    benchmark: bench("p2l_main_table")
    priority: 20
    threads: 1
    shell: experiment_cmd("p2l", "main_table")


rule p2l_floors_table:
    """The floors (measurement, least squares, the classical solver chosen on validation images) and the
    ceilings (VAE round trip, the generator's fit) on the main table's test images and noise (seconds),
    beside the main table's SSIM and PSNR, which is why the task parts are inputs."""
    input: paper_config("p2l"), P2L_PRIOR, P2L_PARTS
    output:
        prov(f"{P2L}/metrics/floors.json",
             *[f"{P2L}/tables/{k}.{e}" for k in ("floors", "floors_standing", "floors_tuning") for e in ("csv", "md")],
             f"{P2L}/figures/main_comparison.png", f"{P2L}/figures/main_comparison.pdf")
    benchmark: bench("p2l_floors_table")
    priority: 20
    threads: 1
    shell: experiment_cmd("p2l", "floors")


rule p2l_ablation_table:
    input: paper_config("p2l"), f"{P2L}/metrics/main_{P2L_CFG['ablation']['task']}.json"
    output:
        prov(f"{P2L}/metrics/ablation.json",
             *[f"{P2L}/tables/{k}.{e}" for k in ("ablation", "ablation_tuning") for e in ("csv", "md")])
    benchmark: bench("p2l_ablation_table")
    priority: 300
    threads: 1
    shell: experiment_cmd("p2l", "ablation")


rule p2l_steps_check:
    """The main table's ranking again at steps_check.steps DDIM steps on one task (tuned values reused)."""
    input: paper_config("p2l"), f"{P2L}/metrics/main_{P2L_CFG['steps_check']['task']}.json"
    output: prov(f"{P2L}/metrics/steps_check.json", f"{P2L}/tables/steps_check.csv", f"{P2L}/tables/steps_check.md")
    benchmark: bench("p2l_steps_check")
    priority: 100
    threads: 1
    shell: experiment_cmd("p2l", "steps_check")


rule p2l_severity_knob:
    """The SR factor 2 → 4 → 8 (the tiny world only), on every prior: LDPS and P2L, each tuned again at every
    factor but the main table's own (main_<task>'s tuning on that prior)."""
    input: paper_config("p2l"), P2L_PRIOR, f"{P2L}/metrics/main_{P2L_CFG['knob']['task']}.json"
    output:
        prov(f"{P2L}/metrics/severity_knob.json",
             *[f"{P2L}/tables/{k}.{e}" for k in ("severity_knob", "severity_knob_tuning") for e in ("csv", "md")])
    benchmark: bench("p2l_severity_knob")
    priority: 350
    threads: 1
    shell: experiment_cmd("p2l", "severity_knob")


# The pixel-space comparison (the tiny world only): DPS with a pixel prior per latent prior's seed.
P2L_PIXEL_PRIOR = ([f"{P2L}/metrics/train_pixel_prior.json"]
                   + [f"{P2L}/metrics/train_pixel_prior_{k}.json" for k in range(1, P2L_PRIORS)]) if _P2L_TINY_PRIOR else []
P2L_PIXEL = [f"{P2L}/metrics/pixel_dps.json"] if _P2L_TINY_PRIOR else []
PAPER_METRICS["p2l"] += P2L_PIXEL_PRIOR + P2L_PIXEL
PAPER_TARGETS.extend(prov(*[f"{P2L}/tables/{k}.md" for k in ("pixel_dps", "pixel_dps_tuning") if P2L_PIXEL]))
PAPER_RECORD_TABLES["p2l"] += (["severity_knob"] if P2L_KNOB else []) + (["pixel_dps"] if P2L_PIXEL else [])


rule p2l_pixel_prior:
    """Pixel prior k (seed + k): an unconditional UNet2DModel at the LDM's steps and batch size."""
    input: paper_config("p2l")
    output: prov(f"{P2L}/metrics/train_pixel_prior.json")
    benchmark: bench("p2l_pixel_prior")
    priority: 500
    threads: 1
    shell: experiment_cmd("p2l", "train_pixel_prior")


rule p2l_pixel_prior_replica:
    input: paper_config("p2l")
    output: prov(f"{P2L}/metrics/train_pixel_prior_{{k}}.json")
    wildcard_constraints: k=r"[1-9]"
    benchmark: bench("p2l_pixel_prior_replica", "k")
    priority: 500
    threads: 1
    shell: experiment_cmd("p2l", "train_pixel_prior_{wildcards.k}")


rule p2l_pixel_dps:
    """DPS in pixel space on the main table's test problems (ζ tuned with the equal budget), beside the
    latent solvers' per-image SSIM and PSNR (hence the task parts and the latent prior as inputs)."""
    input: paper_config("p2l"), P2L_PIXEL_PRIOR, P2L_PRIOR, P2L_PARTS
    output:
        prov(f"{P2L}/metrics/pixel_dps.json",
             *[f"{P2L}/tables/{k}.{e}" for k in ("pixel_dps", "pixel_dps_tuning", "pixel_dps_per_image")
               for e in ("csv", "md")])
    benchmark: bench("p2l_pixel_dps")
    priority: 20
    threads: 1
    shell: experiment_cmd("p2l", "pixel_dps")
