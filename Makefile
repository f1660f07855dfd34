# Bootstraps local virtual environments from nothing (needs python3 = Python 3.11, 3.12 or 3.13, and pip's index).
# The default stack is today's TensorFlow with Keras 3, pinned in constraints.txt to Colab's runtime:
#   make test            the test suite, slow tests aside
#   make test-slow       the tests marked slow (trainings, notebooks, kill -9 and multi-process state tests)
#   make demo            the main job: `tfdpmech compare` on the embedded MNIST sample
#   make quick           `tfdpmech compare --quick`: the demo's code path on 1,200 images (a first look)
#   make bench           throughput benchmark, writes bench/results.json
#   make test-colab      the whole suite, slow tests included, on Python 3.13 (Colab's Python)
# The tensorflow-privacy stack (Python 3.11, TF 2.15, Keras 2, tensorflow-privacy 0.9.0; constraints-tfprivacy.txt):
#   make test-tfprivacy  the whole suite, slow tests included: where tfdpmech is compared with tensorflow-privacy
#   make bench-tfprivacy the benchmark there, writes bench/results-tfprivacy.json
# PYTHON=..., PYTHON_COLAB=... (3.13) and PYTHON_TFPRIVACY=... (3.11) choose the interpreters.

PYTHON ?= python3
VENV ?= .venv
VENV_COLAB ?= .venv-colab
VENV_TFPRIVACY ?= .venv-tfprivacy
EXTRAS_BOTH := dpsgd,scatter,test,notebooks,arrayrecord
EXTRAS := $(EXTRAS_BOTH),text
comma := ,
export TF_CPP_MIN_LOG_LEVEL ?= 2
# The tests run in JOBS worker processes (pytest-xdist): one per core, at most 4 (each imports TensorFlow, about
# 1-2 GB). A test process keeps about one core busy (TensorFlow's small ops), so two cores halve the suite's time.
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n)
PYTEST = -m pytest -ra --durations=10 -n $(JOBS)

# Training on a CPU: `import tfdpmech` sets glibc's malloc to keep a step's large buffers for the next step
# (tfdpmech/cpu_malloc.py; docs/results/cpu_allocator), so demo, quick and bench run as a user's own process does,
# with no environment variable of their own. TFDPMECH_MALLOC=default keeps glibc's settings.

# $(call pip_install,VENV,CONSTRAINTS,EXTRAS): pip, then tfdpmech (editable) and its extras under the pins
define pip_install
	@echo "installing TensorFlow and the rest into $(1)/ (pins: $(2)); a few minutes on a first run"
	$(1)/bin/python -m pip install --quiet --upgrade pip
	$(1)/bin/python -m pip install --quiet -c $(2) -e ".[$(3)]"
endef

.PHONY: test test-slow test-colab test-tfprivacy demo quick bench bench-tfprivacy install clean

install: $(VENV)/.installed

$(VENV)/.installed: setup.cfg setup.py constraints.txt
	@tools/check_python.sh "$(PYTHON)"
	"$(PYTHON)" -m venv $(VENV)
	$(call pip_install,$(VENV),constraints.txt,$(EXTRAS))
	touch $@

$(VENV_COLAB)/.installed: setup.cfg setup.py constraints.txt
	@py="$${PYTHON_COLAB:-$$(tools/find_python.sh 3.13 PYTHON_COLAB)}" && tools/check_python.sh "$$py" \
	  && echo "Python 3.13: $$py" && "$$py" -m venv $(VENV_COLAB)
	$(call pip_install,$(VENV_COLAB),constraints.txt,$(EXTRAS))
	touch $@

$(VENV_TFPRIVACY)/.installed: setup.cfg setup.py constraints-tfprivacy.txt
	@py="$${PYTHON_TFPRIVACY:-$$(tools/find_python.sh 3.11 PYTHON_TFPRIVACY)}" && tools/check_python.sh "$$py" \
	  && echo "tensorflow-privacy stack on $$py" && "$$py" -m venv $(VENV_TFPRIVACY)
	$(call pip_install,$(VENV_TFPRIVACY),constraints-tfprivacy.txt,tfprivacy$(comma)audit$(comma)$(EXTRAS_BOTH))
	$(VENV_TFPRIVACY)/bin/python -m tfdpmech.audit.tf_privacy_mia_addon
	touch $@

test: $(VENV)/.installed
	$(VENV)/bin/python $(PYTEST) -m "not slow"

# SLOW_MARKS: the -m expression of make test-slow; .ci/run passes "slow and not applications"
SLOW_MARKS ?= slow
test-slow: $(VENV)/.installed
	$(VENV)/bin/python $(PYTEST) -m "$(SLOW_MARKS)"

test-colab: $(VENV_COLAB)/.installed
	$(VENV_COLAB)/bin/python $(PYTEST)

# TFPRIVACY_MARKS: a pytest -m expression (default: every test); .ci/run passes "not slow or dpsgd"
TFPRIVACY_MARKS ?=
test-tfprivacy: $(VENV_TFPRIVACY)/.installed
	$(VENV_TFPRIVACY)/bin/python $(PYTEST) $(if $(TFPRIVACY_MARKS),-m "$(TFPRIVACY_MARKS)")

demo: $(VENV)/.installed
	$(VENV)/bin/tfdpmech compare

quick: $(VENV)/.installed
	$(VENV)/bin/tfdpmech compare --quick --out results-quick

bench: $(VENV)/.installed
	$(VENV)/bin/tfdpmech bench

bench-tfprivacy: $(VENV_TFPRIVACY)/.installed
	$(VENV_TFPRIVACY)/bin/tfdpmech bench --out bench/results-tfprivacy.json

clean:
	rm -rf $(VENV) $(VENV_COLAB) $(VENV_TFPRIVACY) .pytest_cache
