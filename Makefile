# Two commands set everything up on a fresh machine (see README.md):
#   make demo   — create the virtualenv if missing, then run ./signsim demo
#   make test   — create the virtualenv if missing, then run the test suite
#   make test45 — the same suite on Blender 4.5 LTS, in the virtualenv .venv45 (not yet in CI: README, Blender versions)
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.signsim-requirements

VENV45 := .venv45
PY45 := $(VENV45)/bin/python
STAMP45 := $(VENV45)/.signsim-requirements

.PHONY: demo test test45 venv45 build

$(STAMP): requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	cp requirements-dev.txt $(STAMP)

demo: $(STAMP)
	./signsim demo

test: $(STAMP)
	$(PY) -m pytest tests

build: $(STAMP)
	$(PY) tools/build.py

# .venv45: requirements-dev.txt with bpy (and its 5.0 type stubs) replaced by requirements-45.txt
$(STAMP45): requirements-dev.txt requirements-45.txt
	test -x $(PY45) || $(PYTHON) -m venv $(VENV45)
	grep -v -E '^(bpy|fake-bpy-module)' requirements-dev.txt > $(VENV45)/requirements-rest.txt
	$(PY45) -m pip install --quiet --disable-pip-version-check -r $(VENV45)/requirements-rest.txt -r requirements-45.txt
	cat requirements-dev.txt requirements-45.txt > $(STAMP45)

venv45: $(STAMP45)

test45: $(STAMP45)
	$(PY45) -m pytest tests
