# Two commands set everything up on a fresh machine (see README.md):
#   make demo   — create the virtualenv if missing, then run ./signsim demo
#   make test   — create both virtualenvs if missing, build the extension zips once
#                 (make build), then run the whole suite on Blender 5.0.1 (.venv) and on
#                 Blender 4.5 LTS (.venv45), both against those zips; CI (.ci/run) runs this
#   make test50 / make test45 — the suite on one Blender version only (each builds its own zips)
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.signsim-requirements

VENV45 := .venv45
PY45 := $(VENV45)/bin/python
STAMP45 := $(VENV45)/.signsim-requirements

.PHONY: demo test test50 test45 venv45 build

$(STAMP): requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	cp requirements-dev.txt $(STAMP)

demo: $(STAMP)
	./signsim demo --force

# Both runs even when the first fails (CI shows every failure); fails when either does.
test: build $(STAMP45)
	status=0; \
	SIGNSIM_BUILT_ZIPS=$(CURDIR)/dist $(PY) -m pytest tests || status=1; \
	SIGNSIM_BUILT_ZIPS=$(CURDIR)/dist $(PY45) -m pytest tests || status=1; \
	exit $$status

test50: $(STAMP)
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
