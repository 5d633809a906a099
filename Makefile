# The course's front door. Every target sets itself up on first use.
#   make lab                      run the ladder lab with the backend this machine supports
#   make run-lab LAB=03 BACKEND=cuda SIZE=4096
#   make test                     the CPU suite (what CI runs)
#   make test-gpu                 the GPU suite and the notebooks, on a machine with a GPU
#   make doctor                   what works here and how to fix what does not
#   make notebooks                open the lab notebooks in JupyterLab
#   make sync-notebooks           regenerate every lab.ipynb from its lab.py (after editing it)
# PYTHON=python3 uses an existing interpreter instead of the course's .venv (no set-up).

LAB ?= 04
BACKEND ?= auto
SIZE ?=
VENV := .venv
STAMP := $(VENV)/.installed
PYTHON ?= $(VENV)/bin/python
SETUP := $(if $(filter $(VENV)/bin/python,$(PYTHON)),$(STAMP),)

# What this machine is: decides which extra and which torch build to install.
PLATFORM := $(shell if nvidia-smi -L >/dev/null 2>&1; then echo nvidia; \
                    elif [ -e /dev/kfd ]; then echo amd; else echo cpu; fi)
CUDA_MAJOR := $(shell nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p')
ROCM_VERSION := $(shell cat /opt/rocm/.info/version 2>/dev/null | cut -d. -f1,2)
# Where pip looks for torch on a CPU machine; e.g. TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=

.PHONY: setup lab run-lab doctor test test-gpu notebooks sync-notebooks clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
ifeq ($(PLATFORM),nvidia)
	$(VENV)/bin/pip install -q -e '.[nvidia-cu$(CUDA_MAJOR),dev]'
else ifeq ($(PLATFORM),amd)
	$(VENV)/bin/pip install -q torch --index-url https://download.pytorch.org/whl/rocm$(ROCM_VERSION)
	$(VENV)/bin/pip install -q -e '.[dev]' 'hip-python~=$(ROCM_VERSION).0'
else
	# Pinned: 2.13.0 is the CPU build CI's machines carry (SETUP.md says how to get it elsewhere).
	$(VENV)/bin/pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(VENV)/bin/pip install -q -e '.[cpu,dev]'
endif
	touch $(STAMP)

lab: run-lab

run-lab: $(SETUP)
	$(PYTHON) -m kernelcourse run-lab $(LAB) --backend $(BACKEND) $(if $(SIZE),--size $(SIZE))

doctor: $(SETUP)
	$(PYTHON) -m kernelcourse doctor

test: $(SETUP)
	$(PYTHON) -m pytest -m "not gpu" tests
	$(if $(wildcard labs/*/lab.ipynb),$(PYTHON) -m pytest --nbmake $(wildcard labs/*/lab.ipynb))

# On a GPU the notebooks run at full size with real timings. NOTEBOOKS=0 leaves them out on a
# machine without a Jupyter kernel (scripts/gpu_checks.sh then runs each lab.py, their twin).
test-gpu: $(SETUP)
	$(PYTHON) -m pytest -m gpu tests
	$(if $(filter 0,$(NOTEBOOKS)),,$(PYTHON) -m pytest --nbmake $(wildcard labs/*/lab.ipynb))

notebooks: $(SETUP)
	$(PYTHON) -c "import jupyterlab" 2>/dev/null || $(PYTHON) -m pip install -q jupyterlab
	$(PYTHON) -m jupyterlab labs

sync-notebooks: $(SETUP)
	for f in labs/*/lab.py; do $(PYTHON) -m jupytext --quiet --to ipynb $$f; done

clean:
	rm -rf build .pytest_cache $${KERNELCOURSE_CACHE:-$$HOME/.cache/kernelcourse}
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
