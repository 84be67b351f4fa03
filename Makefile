# make reproduce | make test | make smoke | make lab. Each creates .venv and installs on first use.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROFILE ?= tiny
CORES ?= all
LAB_TOKEN ?= repro
LAB_PORT ?= 8888

export OMP_NUM_THREADS ?= 1
export HF_HUB_OFFLINE = 1
export WANDB_MODE ?= offline
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: install reproduce smoke test test-fast lab clean

install: $(STAMP)

# torch is installed first and pinned so pip takes the local CPU wheel, not a CUDA build.
$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e . torch==2.13.0
	touch $(STAMP)

reproduce: install
	$(VENV)/bin/snakemake --cores $(CORES) --config profile=$(PROFILE)

smoke: install
	$(VENV)/bin/snakemake --cores $(CORES) --config profile=smoke

test: install
	$(PY) -m pytest

test-fast: install
	$(PY) -m pytest -m "not workflow"

lab: install
	$(VENV)/bin/jupyter lab --no-browser --allow-root --ip=127.0.0.1 --port=$(LAB_PORT) \
		--IdentityProvider.token=$(LAB_TOKEN) --ServerApp.root_dir=$(CURDIR)

clean:
	rm -rf results .snakemake
