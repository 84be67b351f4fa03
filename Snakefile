# Regenerates every figure, table, executed notebook and the claims report.
#
#   snakemake --cores all                          # tiny profile (the default)
#   snakemake --cores all --config profile=smoke   # seconds per paper (CI)
#   snakemake --profile profiles/slurm --config profile=full
#
# Outputs go to results/<profile>/<paper>/. Each paper adds its rules in papers/<paper>/rules.smk,
# registers its metric parts in PAPER_METRICS and its figures/tables in PAPER_TARGETS.
# Config keys: profile (smoke|tiny|full), results (root folder), papers_dir (where papers live);
# everest_trainer (papers/everest/rules.smk); rehearsal, rehearsal_device (the full profile's rehearsal).
import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shared import cpu_isa

PROFILES = ["smoke", "tiny", "full"]
PROFILE = config.get("profile", "tiny")
if PROFILE not in PROFILES:
    raise ValueError(f"unknown profile {PROFILE!r}; valid profiles: {PROFILES}")
# One instruction set for every CPU kernel at smoke and tiny (shared/cpu_isa.py): set here, in this
# process's environment, so every job, notebook and the warm-start server inherit it; a full run is free.
if PROFILE in cpu_isa.PINNED_PROFILES:
    cpu_isa.pin()
PAPERS_DIR = Path(config.get("papers_dir", "papers"))
# The full profile's rehearsal (`--config profile=full rehearsal=1`): every full-profile rule and
# notebook runs on the CPU, on stand-in assets in the real formats that rule rehearsal_assets writes
# under results/rehearsal/assets/<paper>/, with the paper's overlay (papers/<paper>/rehearsal.yaml,
# its {assets} filled in): the paths point at the stand-ins, the sizes are shrunk. Outputs go to
# results/rehearsal/<paper>/, apart from a real full run's.
REHEARSAL = str(config.get("rehearsal", "0")).lower() in ("1", "true", "yes")
if REHEARSAL and PROFILE != "full":
    raise ValueError("rehearsal=1 rehearses the full profile: run it with --config profile=full rehearsal=1")
RESULTS = f"{config.get('results', 'results')}/{'rehearsal' if REHEARSAL else PROFILE}"
REHEARSAL_DEVICE = config.get("rehearsal_device")   # `make rehearse-gpu`: cuda (the overlays' own: cpu)
ASSETS = f"{RESULTS}/assets"
PY = sys.executable
# Every papermill run has a per-cell timeout: a hung cell fails, its source in the error, instead of
# waiting forever (the slowest cell at tiny takes ~14 s). Config key nb_timeout (seconds) overrides.
NB_TIMEOUT = int(config.get("nb_timeout", 3600 if PROFILE == "full" else 300))
PAPERMILL = f"OMP_NUM_THREADS=1 {PY} -m papermill --execution-timeout {NB_TIMEOUT} -k python3"
PAPERS = sorted(p.parent.name for p in PAPERS_DIR.glob("*/rules.smk"))
CLAIM_FILES = sorted(str(p) for p in [*PAPERS_DIR.glob("*/claims.yaml"), Path("kernels/claims.yaml")] if p.exists())

PAPER_METRICS = {}   # paper -> its metric part files (results/<profile>/<paper>/metrics/<experiment>.json)
PAPER_TARGETS = []   # figures and tables each paper declares
# paper -> names of its headline tables (<results>/<profile>/<paper>/tables/<name>.md, made by its rules
# from its metrics), which the results record carries; a paper that declares none is recorded by its
# claims from the ledger (shared/record.py).
PAPER_RECORD_TABLES = {}
PAPER_HEADLINE_FIGURE = {}   # paper -> its main figure (a PNG its rules write), shown in the HTML report
# The results record of this profile's run (rule record, shared/record.py): the tracked record/<profile>/
# for a run into the default results folder; beside the results for any other (a test's or benchmark's
# run leaves the tracked record alone). tools/readme_tables.py fills the READMEs' tables from it.
RECORD = (f"record/{PROFILE}" if str(config.get("results", "results")).rstrip("/") == "results"
          else f"{config['results']}/record/{PROFILE}")


def bench(rule_name, *wildcards):
    """A job's cost, snakemake's benchmark: file (wall, CPU seconds and peak memory of the job's process
    tree): <results>/<paper>/benchmarks/<rule>[@<wildcard value>...].tsv, or <results>/benchmarks/ for
    the workflow's own rules. A warm-started experiment job's benchmark measures its client; its own
    cost is in its provenance (`process`). tools/bench_reproduce.py reads both."""
    owner = next((p for p in [*PAPERS, "kernels"] if rule_name.startswith(f"{p}_")), None)
    values = "".join(f"@{{{w}}}" for w in wildcards)
    return f"{RESULTS}/{owner + '/' if owner else ''}benchmarks/{rule_name}{values}.tsv"


def prov(*paths):
    """An artifact and its provenance sidecar, both declared as outputs."""
    return [q for p in paths for q in (p, f"{p}.provenance.json")]


def rehearsal_overlay(paper):
    """The overlay that rule rehearsal_assets writes for `paper` (its template with the paths filled in)."""
    return f"{ASSETS}/{paper}/overlay.yaml"


def rehearsal_template(paper):
    """The paper's overlay template in a rehearsal (its sizes; the paths still read $ASSETS), for the
    rules that read the config when the workflow is parsed; None otherwise."""
    return PAPERS_DIR / paper / "rehearsal.yaml" if REHEARSAL else None


def paper_config(paper):
    """A rule's config input: the paper's config.yaml, and in a rehearsal its overlay (so the rule
    waits for the stand-in assets)."""
    return [str(PAPERS_DIR / paper / "config.yaml")] + ([rehearsal_overlay(paper)] if REHEARSAL else [])


def experiment_cmd(paper, experiment, launcher="", overrides=()):
    """The shell command of one experiment at this profile (threads: `job_threads`). `launcher` (srun
    and its task geometry, see slurm_training) goes before python, after the environment; `overrides`
    are the experiment's `--set key.path=value` config overrides. A rehearsal adds the paper's overlay."""
    sets = "".join(f" --set {shlex.quote(o)}" for o in overrides)
    overlay = f" --overlay {rehearsal_overlay(paper)}" if REHEARSAL else ""
    if REHEARSAL and REHEARSAL_DEVICE:
        sets += f" --set device={shlex.quote(str(REHEARSAL_DEVICE))}"
    return (f"OMP_NUM_THREADS={job_threads()} {launcher}{PYM} papers.{paper} {experiment} --profile {PROFILE} "
            f"--out {RESULTS}/{paper} --rule {{rule}}{overlay}{sets}")


def job_threads():
    """Threads of an experiment job (OMP_NUM_THREADS, which the CLI passes to torch): 1 at smoke and tiny,
    where small models on 2 shared cores run fastest single-threaded; at a real full run the CPUs its
    job asks (SLURM: cpus_per_task from the profile; locally: the rule's threads)."""
    if PROFILE != "full" or REHEARSAL:
        return "1"
    return "{resources.cpus_per_task}" if ON_SLURM else "{threads}"


# A run submits to SLURM when it names a partition: profiles/slurm sets slurm_partition in its
# default-resources, and the plugin passes them on to the job's own snakemake, so the rules read the
# same answer on both sides. A local run (`--cores N`) has none. Only the srun launch depends on it.
ON_SLURM = "slurm_partition" in (workflow.resource_settings.default_resources or {})
# Warm starts (shared/warm.py): a local run's experiment jobs fork from one server that has imported
# torch and Lightning once, instead of ~3-6 CPU-s of imports each; same commands, same results, a cold
# start whenever the server is not up. On by default in a local run at smoke and tiny (make reproduce,
# the test suite's smoke run) and in the rehearsal; off at a real full run, whose jobs run for hours and
# whose local multi-GPU trainings Lightning starts as processes of their own; --config warm=0|1 decides.
# A warm job's benchmark: file measures its client, so each experiment job records its own wall, CPU and
# peak memory in its provenance (`process`), which the budgets quote (tools/bench_reproduce.py).
WARM = (str(config.get("warm", "1" if REHEARSAL or PROFILE != "full" else "0")).lower() in ("1", "true", "yes")
        and not ON_SLURM)
_WARM_ID = hashlib.sha1(str(Path(RESULTS).resolve()).encode()).hexdigest()[:12]   # one per results folder
WARM_SOCKET = Path(tempfile.gettempdir()) / f"repro-warm-{_WARM_ID}.sock"
PYM = f"{PY} -m shared.warm {WARM_SOCKET} -m" if WARM else f"{PY} -m"
# srun with the task geometry Lightning checks, read from the job's own resources so that a
# --set-resources change (a GPU type in gres, more CPUs) reaches the sbatch request and the step alike.
SRUN_TASKS = ("{resources.mpi} --nodes={resources.nodes} --ntasks-per-node={resources.tasks_per_node} "
              "--gres={resources.gres} --cpus-per-task={resources.cpus_per_task} ")


def slurm_training(trainer):
    """(resources, launcher) of a rule that runs one Lightning training with this `trainer:` config.

    Lightning under SLURM wants one task per GPU, all started by srun, with --nodes = num_nodes and
    --ntasks-per-node = GPUs per node = devices; it refuses to start when the tasks it sees differ from
    its trainer's. So the rule asks for exactly that: `nodes`, `tasks_per_node` and `gres: gpu:<devices>`
    (a per-node count), which only the SLURM plugin reads (a local run ignores them, so the GPU request
    does not depend on ON_SLURM). Above one GPU on SLURM the job is an MPI-style job of the plugin (`mpi`
    resource: its job step runs the command as it stands) and the command starts the tasks with srun.
    One GPU stays one task with no srun in the command; locally Lightning starts the processes of
    `devices` > 1 itself."""
    devices, num_nodes = trainer["devices"], trainer["num_nodes"]
    resources = {"nodes": num_nodes, "tasks_per_node": devices, "gres": f"gpu:{devices}"}
    if devices * num_nodes == 1 or not ON_SLURM:
        return resources, ""
    if devices == 1:   # the plugin takes an MPI job's tasks per node only above 1
        raise ValueError(f"trainer.devices=1 on {num_nodes} nodes cannot be submitted through the SLURM "
                         "plugin (an MPI job needs tasks_per_node > 1): use devices > 1 per node")
    return {**resources, "mpi": "srun"}, SRUN_TASKS


# The HTML report (`make report`: `snakemake --report <results>/<profile>/report.html report_files`):
# every output marked with report() appears in it, under its category (one section each): the ledger
# and its forest plot (Ledger), the overview notebook (Overview), and in each paper's section its executed
# notebook as HTML, its headline (rule paper_headline_claims: its paper claims and floors, each interval
# against its test, from the ledger) and its main figure, which the paper names in its rules.smk:
#     PAPER_HEADLINE_FIGURE["<paper>"] = f"{RESULTS}/<paper>/figures/<name>.png"   # a figure its rules write
# (rule paper_headline_figure puts a copy of it on the paper's page). report/ holds the captions.
report: "report/workflow.rst"


def report_page(path, category, page, caption):
    """An output marked for the HTML report: in section `category`, listed as `page` (caption: an RST file)."""
    return report(path, category=category, labels={"page": page}, caption=caption)


for _paper in PAPERS:
    include: PAPERS_DIR / _paper / "rules.smk"
include: "kernels/rules.smk"

wildcard_constraints:
    paper="|".join([*PAPERS, "kernels"]),


rule all:
    input:
        PAPER_TARGETS,
        expand(f"{RESULTS}/{{paper}}/{{paper}}.ipynb", paper=PAPERS),
        f"{RESULTS}/claims.md",
        f"{RESULTS}/claims.png",
        f"{RESULTS}/overview.ipynb",
        [] if REHEARSAL else f"{RECORD}/record.json",   # a rehearsal's numbers come from stand-ins


REHEARSAL_ASSETS_CMD = " && ".join(f"OMP_NUM_THREADS=1 {PYM} papers.{p}.rehearsal_assets --out {ASSETS}/{p}"
                                   for p in PAPERS)
if REHEARSAL:
    rule rehearsal_assets:
        """Every paper's stand-in assets in the real formats, and its overlay (see REHEARSAL above)."""
        output: [rehearsal_overlay(p) for p in PAPERS]
        benchmark: bench("rehearsal_assets")
        shell: REHEARSAL_ASSETS_CMD


rule paper_metrics:
    """One metrics.json per paper: every experiment's metrics, keyed by experiment."""
    input: lambda wc: PAPER_METRICS[wc.paper]
    output: prov(f"{RESULTS}/{{paper}}/metrics.json")
    benchmark: bench("paper_metrics", "paper")
    shell: "{PY} -m shared.metrics {output[0]} {input} --profile {PROFILE} --rule {rule}"


rule paper_notebook:
    """The paper's notebook, executed by papermill with the profile and results folder injected, and
    interactive=False: no widgets, each explorer renders its default view once."""
    input:
        nb=str(PAPERS_DIR / "{paper}" / "{paper}.ipynb"),
        metrics=f"{RESULTS}/{{paper}}/metrics.json",
    output: prov(f"{RESULTS}/{{paper}}/{{paper}}.ipynb")
    log: f"{RESULTS}/logs/{{paper}}_notebook.log"
    params:   # a rehearsal's notebook reads the config through the overlay its experiments read
        overlay=lambda wc: f"-p overlay {Path(rehearsal_overlay(wc.paper)).resolve()} " if REHEARSAL else "",
    benchmark: bench("paper_notebook", "paper")
    shell:
        "{PAPERMILL} {input.nb} {output[0]} --cwd {RESULTS}/{wildcards.paper} -p interactive False {params.overlay}"
        "-p profile {PROFILE} -p results_dir $(realpath {RESULTS}/{wildcards.paper}) -p claims_path $(realpath {PAPERS_DIR}/{wildcards.paper}/claims.yaml) > {log} 2>&1 && "
        "{PY} -m shared.provenance {output[0]} --profile {PROFILE} --rule {rule}"


FOREST_PLOT = report_page(f"{RESULTS}/claims.png", "Ledger", "forest plot", "report/forest_plot.rst")


rule claims_ledger:
    """results/<profile>/claims.{json,md,png}: every claim decided by its interval (PASS / FAIL /
    INCONCLUSIVE / NOT RUN), with the audit's findings, and the forest plot of all of them."""
    input:
        claims=CLAIM_FILES,
        metrics=expand(f"{RESULTS}/{{paper}}/metrics.json", paper=[*PAPERS, "kernels"]),
    output: prov(f"{RESULTS}/claims.json", f"{RESULTS}/claims.md", FOREST_PLOT, f"{RESULTS}/claims.pdf")
    params:   # a rehearsal decides nothing: its numbers come from stand-ins (every claim NOT RUN, values shown)
        profile="rehearsal" if REHEARSAL else PROFILE,
    benchmark: bench("claims_ledger")
    shell: "{PY} -m shared.claims --profile {params.profile} --results {RESULTS} --rule {rule} --plot {input.claims}"


rule record:
    """The record of this profile's run (RECORD/record.json and one <name>.md per table): the ledger's
    verdicts and claims, each paper's headline tables (PAPER_RECORD_TABLES) and CPU per job, the commits,
    the machine."""
    input:
        claims=f"{RESULTS}/claims.json",
        tables=[f"{RESULTS}/{p}/tables/{t}.md" for p, names in PAPER_RECORD_TABLES.items() for t in names],
    output: f"{RECORD}/record.json"
    params:
        tables=" ".join(f"--table {p}:{t}" for p, names in PAPER_RECORD_TABLES.items() for t in names),
    benchmark: bench("record")
    shell: "{PY} -m shared.record {RESULTS} --out {RECORD} {params.tables}"


rule overview_notebook:
    """notebooks/overview.ipynb executed after every paper: all claims tables and figure links."""
    input:
        nb="notebooks/overview.ipynb",
        claims=f"{RESULTS}/claims.json",
        papers=expand(f"{RESULTS}/{{paper}}/{{paper}}.ipynb", paper=[*PAPERS, "kernels"]),
    output: prov(f"{RESULTS}/overview.ipynb")
    log: f"{RESULTS}/logs/overview_notebook.log"
    benchmark: bench("overview_notebook")
    shell:
        "{PAPERMILL} {input.nb} {output[0]} --cwd {RESULTS} "
        "-p profile {PROFILE} -p results_dir $(realpath {RESULTS}) > {log} 2>&1 && "
        "{PY} -m shared.provenance {output[0]} --profile {PROFILE} --rule {rule}"


NBCONVERT = "{PY} -m shared.report_html {input} {output}"   # nbconvert's HTML, large figures as JPEG


rule ledger_html:
    """The ledger (claims.md) as a page of the HTML report."""
    input: f"{RESULTS}/claims.md"
    output: report_page(f"{RESULTS}/claims.html", "Ledger", "claims ledger", "report/ledger.rst")
    shell: "{PY} -m shared.report_html {input} {output}"


rule paper_notebook_html:
    """A paper's (or kernels') executed notebook as a page of the HTML report, in the paper's section."""
    input: f"{RESULTS}/{{paper}}/{{paper}}.ipynb"
    output: report_page(f"{RESULTS}/{{paper}}/{{paper}}.html", "{paper}", "executed notebook", "report/notebook.rst")
    shell: NBCONVERT


rule overview_html:
    """The executed overview notebook as a page of the HTML report."""
    input: f"{RESULTS}/overview.ipynb"
    output: report_page(f"{RESULTS}/overview.html", "Overview", "executed notebook", "report/notebook.rst")
    shell: NBCONVERT


rule paper_headline_claims:
    """A paper's headline in the HTML report: its paper claims and floors from the ledger, each 90%
    interval against its test's region (shared/claims_plot.py)."""
    input: f"{RESULTS}/claims.json"
    output:
        report_page(f"{RESULTS}/{{paper}}/headline_claims.png", "{paper}", "headline: claims and floors",
                    "report/headline_claims.rst"),
        f"{RESULTS}/{{paper}}/headline_claims.pdf",
    shell: "{PY} -m shared.claims_plot {input} --paper {wildcards.paper} --out {output[0]}"


rule paper_headline_figure:
    """A paper's main figure (PAPER_HEADLINE_FIGURE) on its page of the HTML report."""
    input: lambda wc: PAPER_HEADLINE_FIGURE[wc.paper]
    output: report_page(f"{RESULTS}/{{paper}}/headline_figure.png", "{paper}", "main figure", "report/headline_figure.rst")
    shell: "cp {input} {output}"


rule report_files:
    """Every output of rule all and the report's HTML pages (`make report` builds this, then the report)."""
    input:
        rules.all.input,
        f"{RESULTS}/claims.html",
        f"{RESULTS}/overview.html",
        expand(f"{RESULTS}/{{paper}}/{{paper}}.html", paper=[*PAPERS, "kernels"]),
        expand(f"{RESULTS}/{{paper}}/headline_claims.png", paper=[*PAPERS, "kernels"]),
        [f"{RESULTS}/{p}/headline_figure.png" for p in PAPER_HEADLINE_FIGURE],


# The warm-start server's life is this run's (see WARM): up before the first job, down after the last;
# it also exits by itself once this process is gone (a killed run). Its log: <results>/logs/warm.log.
_WARM_SERVER = []
# a one-thread job's environment as snakemake's shell() makes it (thread counts, the tmpdir resource):
# the server imports under it, and serves only jobs whose environment is the same
WARM_ENV = {**os.environ, **dict.fromkeys(("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                           "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"), "1"),
            **dict.fromkeys(("TMPDIR", "TMP", "TEMPDIR", "TEMP"), tempfile.gettempdir())}

onstart:
    if WARM:
        Path(f"{RESULTS}/logs").mkdir(parents=True, exist_ok=True)
        WARM_SOCKET.unlink(missing_ok=True)   # a killed run's socket, so the wait below sees this server's
        with open(f"{RESULTS}/logs/warm.log", "w") as _log:
            _WARM_SERVER.append(subprocess.Popen(
                [PY, "-m", "shared.warm", "serve", str(WARM_SOCKET), "--parent", str(os.getpid())],
                env=WARM_ENV, stdout=_log, stderr=_log, start_new_session=True))
        # the first jobs start cold unless the server is listening; it appears once the imports are done
        # (a few seconds); a server that fails or is slow leaves the jobs cold, never stuck
        _deadline = time.monotonic() + 60
        while not WARM_SOCKET.exists() and _WARM_SERVER[0].poll() is None and time.monotonic() < _deadline:
            time.sleep(0.2)

onsuccess:
    for _server in _WARM_SERVER:
        _server.terminate()
    from shared.run_ending import ending

    _ending = ending(RESULTS, record=RECORD)   # the verdicts and where to read them (None for a partial target)
    if _ending:
        print(_ending)

onerror:
    for _server in _WARM_SERVER:
        _server.terminate()
