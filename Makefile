# make reproduce | make test | make smoke | make rehearse | make lab | make report | make test-browser | make plan |
# make gpu-smoke | make lock. Each creates .venv and installs on first use.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROFILE ?= tiny
CORES ?= all
LAB_TOKEN ?= repro
LAB_PORT ?= 8888
LAB_ARGS ?=
SMOKE_RESULTS ?= results

export OMP_NUM_THREADS ?= 1
export HF_HUB_OFFLINE = 1
export WANDB_MODE ?= offline
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: plan gpu-smoke install lock report reproduce bench-reproduce smoke rehearse rehearse-gpu test test-rehearsal test-fast test-browser lab clean

install: $(STAMP)

# Every package from requirements.lock, each checked against its hashes (torch: the local CPU wheel,
# 2.13.0+cpu, not a CUDA build), the runtime and the test, lab, cluster and browser extras; then this
# project itself, editable, with nothing more. The installer is uv (pinned, UV_VERSION): the same packages
# and versions as pip from the same lock, in a fraction of pip's time; INSTALLER=pip uses pip. uv compiles the
# bytecode at install, as pip does: where bytecode writing is off, every import would compile it again.
INSTALLER ?= uv
UV_VERSION ?= 0.13.9
ifeq ($(INSTALLER),pip)
INSTALLER_SETUP := $(PY) -m pip install --quiet --upgrade pip
PIP_INSTALL := $(PY) -m pip install --quiet
else
INSTALLER_SETUP := $(PY) -m pip install --quiet uv==$(UV_VERSION)
PIP_INSTALL := $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY)
endif
$(STAMP): pyproject.toml requirements.lock
	python3 -m venv $(VENV)
	$(INSTALLER_SETUP)
	$(PIP_INSTALL) --require-hashes --no-deps -r requirements.lock
	$(PIP_INSTALL) --no-deps --no-build-isolation -e .
	touch $(STAMP)

# requirements.lock from pyproject.toml (uv's resolver; the versions already locked are kept unless
# pyproject.toml asks for others; LOCK_ARGS=--upgrade moves them all to the newest allowed).
lock:
	python3 -m venv .venv-lock && .venv-lock/bin/pip install --quiet uv==$(UV_VERSION)
	.venv-lock/bin/uv pip compile pyproject.toml --extra test --extra lab --extra cluster --extra browser \
		--generate-hashes --find-links /opt/wheels --python-version 3.11.7 --no-header --emit-find-links \
		--annotation-style line -o requirements.lock $(LOCK_ARGS)

reproduce: install
	$(VENV)/bin/snakemake --cores $(CORES) --config profile=$(PROFILE)

# Where the time goes: the workflow from scratch into results/bench/, then per rule and per paper CPU-s and
# wall, the start-up share, the ten largest jobs and the ratio to the last record (tools/bench_reproduce.py;
# BENCH_SAVE=1 makes this run the new record). A benchmark, not a test.
BENCH_RECORD ?= benchmarks/reproduce_$(PROFILE).json
bench-reproduce: install
	rm -rf results/bench/$(PROFILE)
	start=$$(date +%s); $(VENV)/bin/snakemake --cores $(CORES) --config profile=$(PROFILE) results=results/bench && \
	$(PY) tools/bench_reproduce.py results/bench/$(PROFILE) --wall $$(( $$(date +%s) - start )) --record $(BENCH_RECORD) \
		$(if $(BENCH_SAVE),--save,)

smoke: install
	$(VENV)/bin/snakemake --cores $(CORES) --config profile=smoke

# The full profile rehearsed on stand-in assets in the real formats (results/rehearsal/; Snakefile,
# REHEARSAL): on the CPU, and with device cuda on a GPU machine (its log: results/rehearsal-gpu.log).
rehearse: install
	$(VENV)/bin/snakemake --cores $(CORES) --config profile=full rehearsal=1

rehearse-gpu: install
	mkdir -p results; set -o pipefail; $(VENV)/bin/snakemake --cores $(CORES) --config profile=full rehearsal=1 rehearsal_device=cuda \
		results=results/gpu 2>&1 | tee results/rehearsal-gpu.log

# The full profile's cost plan (tools/plan.py; offline, no GPU, < 2 min): every job of the SLURM dry run
# with its FLOPs, GPU memory, data read and estimated hours on H100/A100 against its rule's limits, in
# benchmarks/plan_full.{csv,md}; the README's "Cost of the full profile" summary is rewritten from it.
# Exits 1 (table written) when a job does not fit.
PLAN_GPU ?= H100-SXM
plan: install
	$(PY) tools/plan.py --out benchmarks/plan_full --gpu $(PLAN_GPU) $(if $(filter H100-SXM,$(PLAN_GPU)),--readme README.md,)

# On a GPU machine (<= 10 min): the kernels' compiled tests and bench, one real-shape step per paper
# (s/step, peak memory; results/gpu_smoke/probe_steps.csv) and the rehearsal on CUDA. Without CUDA it
# prints one line and exits 2.
gpu-smoke: install
	$(PY) tools/gpu_smoke.py --out results/gpu_smoke

# Two pytest workers (one per core; tests/conftest.py runs the shared smoke run once for both), work
# stealing for the uneven tests; the slowest 25 are listed for the budget.
TEST_WORKERS ?= 2
test: install
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal --durations=25

# The full profile's rehearsal workflow alone, offline, with its checks (tests/test_rehearsal.py, part of
# make test; ~3 min on 2 cores with warm starts).
test-rehearsal: install
	$(PY) -m pytest -q tests/test_rehearsal.py --durations=0

test-fast: install
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not workflow"

# Chromium (Selenium + Debian's chromium-driver, installed here when absent, as root) on the smoke results
# in $(SMOKE_RESULTS)/smoke (made first if missing): JupyterLab runs every paper notebook and moves one
# explorer slider; the HTML report (make report) opens with every section rendered; the README's first screen
# shows the commands and the verdicts (readme.png). Screenshots under
# results/browser/.
test-browser: install
	@command -v chromedriver >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; }
	$(MAKE) report PROFILE=smoke REPORT_RESULTS=$(abspath $(SMOKE_RESULTS))
	REPRO_BROWSER=1 REPRO_SMOKE_RESULTS=$(abspath $(SMOKE_RESULTS)) $(PY) -m pytest -q tests/browser --durations=0

# The HTML report of a profile's run, $(REPORT_RESULTS)/$(PROFILE)/report.html (snakemake --report): the
# ledger and its forest plot, the overview notebook, each paper's executed notebook and headline figure,
# one section each (Snakefile, report()). Runs whatever of the workflow is missing first.
REPORT_RESULTS ?= results
report: install
	$(VENV)/bin/snakemake report_files --cores $(CORES) --config profile=$(PROFILE) results=$(REPORT_RESULTS)
	$(VENV)/bin/snakemake report_files --cores 1 --report $(REPORT_RESULTS)/$(PROFILE)/report.html \
		--config profile=$(PROFILE) results=$(REPORT_RESULTS)
	@echo "Report: $(REPORT_RESULTS)/$(PROFILE)/report.html"

lab: install
	$(VENV)/bin/jupyter lab --no-browser --allow-root --ip=127.0.0.1 --port=$(LAB_PORT) \
		--IdentityProvider.token=$(LAB_TOKEN) --ServerApp.root_dir=$(CURDIR) $(LAB_ARGS)

clean:
	rm -rf results .snakemake
