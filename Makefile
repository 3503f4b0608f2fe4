# Everything a user or CI runs. `make test` and `make demo` work from a fresh clone: they create .venv.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SAM_VENV := .venv-sam
SAM := $(SAM_VENV)/bin/sam
SAM_CLI_VERSION := 1.170.0
# sam build needs the python3.13 runtime's interpreter: take it from PATH or from pyenv.
PY313 := $(shell command -v python3.13 2>/dev/null || ls -d $$(pyenv root 2>/dev/null)/versions/3.13*/bin 2>/dev/null | tail -1 | sed 's|$$|/python3.13|')

.PHONY: venv test lint build validate demo invoke clean

$(VENV)/.installed: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

$(SAM_VENV)/.installed:
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet aws-sam-cli==$(SAM_CLI_VERSION)
	touch $@

test: venv
	$(PY) -m pytest -q

lint: venv
	$(VENV)/bin/cfn-lint template.yaml

validate: $(SAM_VENV)/.installed
	SAM_CLI_TELEMETRY=0 $(SAM) validate --lint

build: $(SAM_VENV)/.installed
	@test -x "$(PY313)" || { echo "python3.13 not found on PATH or in pyenv: sam build needs it for the python3.13 runtime"; exit 1; }
	PATH="$(dir $(PY313)):$$PATH" SAM_CLI_TELEMETRY=0 $(SAM) build

clean:
	rm -rf $(VENV) $(SAM_VENV) .aws-sam .pytest_cache reports
