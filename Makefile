# Two commands set everything up on a fresh machine (see README.md):
#   make demo   — create the virtualenv if missing, then run ./signsim demo
#   make test   — create the virtualenv if missing, then run the test suite
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.signsim-requirements

.PHONY: demo test build

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
