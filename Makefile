# Bootstraps local virtual environments from nothing (needs only python3.11 + pip).
#   make test          the test suite on the supported stack (TF 2.15.1 + tensorflow-privacy 0.9.0), slow tests aside
#   make test-slow     the tests marked slow (trainings, notebooks, kill -9 and multi-process state tests)
#   make demo          the main job: `tfdpmech compare` on the embedded MNIST sample
#   make bench         throughput benchmark, writes bench/results.json
#   make test-keras3   the core tests on TensorFlow >= 2.16 with Keras 3 (DP-SGD parts skipped)

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
VENV_K3 ?= .venv-keras3
PY := $(VENV)/bin/python
PY_K3 := $(VENV_K3)/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: test test-slow demo bench test-keras3 install clean

install: $(VENV)/.installed

$(VENV)/.installed: setup.cfg setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dpsgd,audit,scatter,test,notebooks]"
	$(PY) -m tfdpmech.audit.tf_privacy_mia_addon
	touch $@

$(VENV_K3)/.installed: setup.cfg setup.py constraints-keras3.txt
	$(PYTHON) -m venv $(VENV_K3)
	$(PY_K3) -m pip install --quiet --upgrade pip
	$(PY_K3) -m pip install --quiet -c constraints-keras3.txt -e ".[test,notebooks]"
	touch $@

test: $(VENV)/.installed
	$(PY) -m pytest -ra --durations=10 -m "not slow"

test-slow: $(VENV)/.installed
	$(PY) -m pytest -ra --durations=10 -m slow

test-keras3: $(VENV_K3)/.installed
	$(PY_K3) -m pytest -ra -m "not slow"

demo: $(VENV)/.installed
	$(VENV)/bin/tfdpmech compare

bench: $(VENV)/.installed
	$(VENV)/bin/tfdpmech bench

clean:
	rm -rf $(VENV) $(VENV_K3) .pytest_cache
