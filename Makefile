# cselab: the two entry points of a fresh machine.
#   make demo  installs, fetches the data and the checkpoint, trains SimCSE on the CPU protocol (150 steps), prints the table
#   make test  installs and runs the test suite
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
DEMO_DIR ?= runs/demo-simcse
DEMO_STEPS ?= 150

.PHONY: install install-dev demo test lint

install:
	$(PIP) install torch==2.13.0
	$(PIP) install -e .

install-dev:
	$(PIP) install torch==2.13.0
	$(PIP) install -e ".[dev,bench]"

demo: install
	$(PYTHON) -m cselab.cli data fetch sts
	$(PYTHON) -m cselab.cli data fetch models
	$(PYTHON) -m cselab.cli data fetch corpus
	$(PYTHON) -m cselab.cli eval all-MiniLM-L6-v2 --pooler cls --tasks all --splits test
	rm -rf $(DEMO_DIR)
	$(PYTHON) -m cselab.cli train --config configs/simcse/cpu-minilm.yaml train.output_dir=$(DEMO_DIR) train.max_steps=$(DEMO_STEPS)

test: install-dev
	$(PYTHON) -m ruff check src tests benchmarks
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check src tests benchmarks
