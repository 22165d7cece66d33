# Two entry points that work on a fresh machine with only Python:
#   make demo   create .venv, install graphshard, run the main job on a built-in default
#   make test   create/update .venv with the test extras, run the test suite
#   make docs   install the docs extras into .venv, build the documentation site into site/ (warnings are errors)
#   make lint   install the lint extras into .venv; ruff (lint and format check) and mypy, as CI runs them
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch is pinned so that nothing pulls a CUDA build with gigabytes of packages.
TORCH_PIN ?= torch==2.13.0

.PHONY: demo test docs lint venv clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_PIN)"
	$(PY) -m pip install --quiet -e ".[test,serve,prepare]" "$(TORCH_PIN)"
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(VENV)/bin/graphshard demo

# The suite waits on its processes more than it computes (2 cores: 1,048 s on one worker, 700 s on two, one run each), so it runs
# on TEST_WORKERS workers; each test file stays on one worker, in order, with its module fixtures made once.
TEST_WORKERS ?= 2

test: venv
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The site's API pages import graphshard, so the docs extras go into the same .venv.
$(VENV)/.docs-installed: pyproject.toml $(VENV)/.installed
	$(PY) -m pip install --quiet -e ".[docs]" "$(TORCH_PIN)"
	touch $@

docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	$(PY) docs/_hooks/check_site.py site
	$(PY) docs/_hooks/browser_check.py site

$(VENV)/.lint-installed: pyproject.toml $(VENV)/.installed
	$(PY) -m pip install --quiet -e ".[lint]" "$(TORCH_PIN)"
	touch $@

# What ruff and mypy check (mypy's files are set in pyproject.toml: src/graphshard)
LINTED := src tests benchmarks docs/_hooks

lint: $(VENV)/.lint-installed
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build src/*.egg-info site
