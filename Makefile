# Bootstraps local virtual environments from nothing (needs python3.11 + pip; test-colab also Python 3.13).
#   make test          the test suite on the TF 2.15 stack (Python 3.11, Keras 2, tensorflow-privacy 0.9.0), slow tests aside
#   make test-slow     the tests marked slow (trainings, notebooks, kill -9 and multi-process state tests)
#   make test-colab    the whole suite, slow tests included, on Colab's stack (Python 3.13, TF 2.20, Keras 3)
#   make demo          the main job: `tfdpmech compare` on the embedded MNIST sample
#   make bench         throughput benchmark, writes bench/results.json
#   make bench-colab   the same benchmark on Colab's stack

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
VENV_COLAB ?= .venv-colab
PY := $(VENV)/bin/python
PY_COLAB := $(VENV_COLAB)/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: test test-slow test-colab test-keras3 demo bench bench-colab install clean

install: $(VENV)/.installed

$(VENV)/.installed: setup.cfg setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dpsgd,audit,scatter,test,notebooks]"
	$(PY) -m tfdpmech.audit.tf_privacy_mia_addon
	touch $@

# Colab's stack: Python 3.13 (tools/find_python.sh looks on PATH and in pyenv; PYTHON_COLAB=... overrides)
$(VENV_COLAB)/.installed: setup.cfg setup.py constraints-colab.txt
	@PYTHON_COLAB="$${PYTHON_COLAB:-$$(tools/find_python.sh 3.13)}" || exit 1; \
	  echo "Colab stack on $$PYTHON_COLAB"; \
	  "$$PYTHON_COLAB" -m venv $(VENV_COLAB)
	$(PY_COLAB) -m pip install --quiet --upgrade pip
	$(PY_COLAB) -m pip install --quiet -c constraints-colab.txt -e ".[dpsgd,audit,scatter,test,notebooks]"
	touch $@

test: $(VENV)/.installed
	$(PY) -m pytest -ra --durations=10 -m "not slow"

test-slow: $(VENV)/.installed
	$(PY) -m pytest -ra --durations=10 -m slow

test-colab: $(VENV_COLAB)/.installed
	$(PY_COLAB) -m pytest -ra --durations=10

test-keras3: test-colab

demo: $(VENV)/.installed
	$(VENV)/bin/tfdpmech compare

bench: $(VENV)/.installed
	$(VENV)/bin/tfdpmech bench

bench-colab: $(VENV_COLAB)/.installed
	$(VENV_COLAB)/bin/tfdpmech bench --out bench/results-colab.json

clean:
	rm -rf $(VENV) $(VENV_COLAB) .pytest_cache
