# cselab: the entry points of a fresh machine.
#   make demo    installs, fetches the models and the domain suite, adapts all-MiniLM-L6-v2 to one domain's text
#                with `cselab adapt` (see the README for its time) and prints the domain's score before and after, the
#                teacher's, what each costs to serve, and the model handed back (runs/demo-adapt/model)
#   make test    installs (with the dev extras) and runs the linter and the test suite (what CI runs: .ci/run)
#   make report  renders every table of the docs and the lab books again from lab/results/*.jsonl (python -m lab.render)
#
# Python: the active virtual environment (or conda environment) when there is one; otherwise .venv, created
# with $(BOOTSTRAP_PYTHON): a distribution's own Python refuses `pip install` outside a virtual environment
# (PEP 668), so nothing is ever installed into it.
# torch: the package accepts torch >=2.6,<3, so a torch already in the environment (e.g. a GPU user's CUDA
# build) is kept. Otherwise $(TORCH_SPEC) is installed before the package, so no dependency picks the build;
# where pip would find a CUDA build on a CPU machine, name the CPU index:
#   make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
BOOTSTRAP_PYTHON ?= python3
ifneq ($(strip $(VIRTUAL_ENV)$(CONDA_PREFIX)),)
PYTHON ?= python
VENV_PYTHON :=
else
VENV ?= .venv
PYTHON ?= $(VENV)/bin/python
VENV_PYTHON := $(VENV)/bin/python
endif
PIP ?= $(PYTHON) -m pip
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
DEMO_DIR ?= runs/demo-adapt
DEMO_DOMAIN ?= linux-man
DEMO_SENTENCES ?= 2000
DEMO_STEPS ?= 80

.PHONY: install install-dev install-torch demo-setup demo demo-timed test lint report
.DEFAULT_GOAL := install

ifneq ($(VENV_PYTHON),)
# a venv that failed half-way (e.g. no ensurepip on the distribution) is removed, not reused
$(VENV_PYTHON):
	$(BOOTSTRAP_PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }
endif

install-torch: $(VENV_PYTHON)
	@if $(PYTHON) -c "import torch" 2>/dev/null; then \
	  echo "keeping the installed torch $$($(PYTHON) -c 'import torch; print(torch.__version__)')"; \
	else \
	  $(PIP) install "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)); \
	fi

install: install-torch
	$(PIP) install -e .

install-dev: install-torch
	$(PIP) install -e ".[dev,bench,mteb,export]"

# the domain scoring before/after is mteb's, and the teacher's pass and the serving cost try ONNX Runtime and
# OpenVINO: the demo installs both extras (`cselab adapt` fetches the general sentences itself when missing)
demo-setup: install-torch
	$(PIP) install -e ".[mteb,export]"
	$(PYTHON) -m cselab.cli data fetch models
	$(PYTHON) -m cselab.cli data fetch models-mpnet
	$(PYTHON) -m cselab.cli data fetch domains

demo: demo-setup
	rm -rf $(DEMO_DIR)
	$(PYTHON) -m cselab.cli adapt "$$($(PYTHON) -c 'from cselab.paths import cselab_home; print(cselab_home())')/domains/$(DEMO_DOMAIN)/train.txt" \
	  --domain $(DEMO_DOMAIN) --max-sentences $(DEMO_SENTENCES) --steps $(DEMO_STEPS) --output $(DEMO_DIR)

# the demo's run timed as one command and appended to lab/results/adapt_time.jsonl (the same variables)
demo-timed: demo-setup
	$(PYTHON) -m lab.domain_study.time_adapt --domain $(DEMO_DOMAIN) --max-sentences $(DEMO_SENTENCES) \
	  --steps $(DEMO_STEPS) --output $(DEMO_DIR)

test: install-dev
	$(PYTHON) -m ruff check src tests lab conftest.py
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check src tests lab conftest.py

report: install
	$(PYTHON) -m lab.render
