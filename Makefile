# Two commands set everything up on a fresh machine (see README.md):
#   make demo   — create the virtualenv if missing, then run ./signsim demo
#   make test   — what CI runs (.ci/run): both virtualenvs, the extension zips once
#                 (make build), the whole suite on Blender 5.0.1 (.venv), then the
#                 Blender 4.5 LTS tier (tests marked `compat`, .venv45), both against those zips
# For development:
#   make check  — the inner loop: the whole solver tier plus the Blender tests not marked `slow`
#   make test50 — the whole suite on Blender 5.0.1 only
#   make test45 — the whole suite on Blender 4.5 LTS: run it before a change to
#                 signsim_addon/compat.py lands
# The Blender tier runs in WORKERS processes (pytest-xdist, one test file per worker at a
# time: module fixtures are built once); each worker isolates its own Blender user folder
# (tests/conftest.py). Every phase prints its time (tools/timed.sh); pytest prints the
# DURATIONS slowest tests of each run (0: all).
PYTHON ?= python3.11
WORKERS ?= 2
XDIST := -n $(WORKERS) --dist loadfile
DURATIONS ?= 15
TIMED := tools/timed.sh
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.signsim-requirements

VENV45 := .venv45
PY45 := $(VENV45)/bin/python
STAMP45 := $(VENV45)/.signsim-requirements
ZIPS := SIGNSIM_BUILT_ZIPS=$(CURDIR)/dist

.PHONY: demo test check test50 test45 venv45 build

$(STAMP): requirements-dev.txt
	$(TIMED) venv sh -c '{ test -x $(PY) || $(PYTHON) -m venv $(VENV); } && \
	  $(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt'
	cp requirements-dev.txt $(STAMP)

demo: $(STAMP)
	./signsim demo --force

# Both runs even when the first fails (CI shows every failure); fails when either does.
test: build $(STAMP45)
	status=0; \
	$(ZIPS) $(TIMED) "suite on 5.0.1" $(PY) -m pytest tests $(XDIST) --durations=$(DURATIONS) || status=1; \
	$(ZIPS) $(TIMED) "4.5 LTS tier" $(PY45) -m pytest tests -m compat $(XDIST) --durations=$(DURATIONS) || status=1; \
	exit $$status

check: $(STAMP)
	$(TIMED) check $(PY) -m pytest tests -m "solver or not slow" $(XDIST) -q

test50: $(STAMP)
	$(PY) -m pytest tests $(XDIST)

build: $(STAMP)
	$(TIMED) build $(PY) tools/build.py

# .venv45: requirements-dev.txt with bpy (and its 5.0 type stubs) replaced by requirements-45.txt
$(STAMP45): requirements-dev.txt requirements-45.txt
	$(TIMED) venv45 sh -c '{ test -x $(PY45) || $(PYTHON) -m venv $(VENV45); } && \
	  grep -v -E "^(bpy|fake-bpy-module)" requirements-dev.txt > $(VENV45)/requirements-rest.txt && \
	  $(PY45) -m pip install --quiet --disable-pip-version-check -r $(VENV45)/requirements-rest.txt -r requirements-45.txt'
	cat requirements-dev.txt requirements-45.txt > $(STAMP45)

venv45: $(STAMP45)

test45: $(STAMP45)
	$(PY45) -m pytest tests $(XDIST)
