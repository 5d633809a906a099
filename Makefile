# The course's front door. Every target sets itself up on first use.
#   make setup                    the .venv for this machine (SETUP.md; PLATFORM=cpu|nvidia|amd,
#                                 CUDA_MAJOR=, ROCM_VERSION=, TORCH_INDEX=<url>|pypi override;
#                                 SETUP_PYTHON=python3.12: the Python that makes it, python3 by default)
#   make lab                      run the ladder lab with the backend this machine supports
#   make run-lab LAB=03 BACKEND=cuda SIZE=4096
#   make check EX=01              check your answers to an exercise (SOLUTION=1: the solution twin;
#                                 BACKEND=cpu|cuda|hip: where C kernels run; SANITIZE=1: and under
#                                 compute-sanitizer's memcheck and racecheck, on an NVIDIA GPU)
#   make grade SUBMISSIONS=dir/   grade a folder of submissions, one sub-folder per student
#                                 ([EX=NN] [JOBS=n] [OUT=dir]; GRADING.md): grades.csv, results.json
#   make autograder EX=NN         build/autograder-NN.zip, the autograder Gradescope runs
#   make test                     the CPU suite and the notebooks (what CI runs), on every core;
#                                 LAB=03, EX=01 or PART=grader narrows it (the parts: pyproject.toml's
#                                 markers), MARK='<pytest -m expression>' too; WORKERS=0: one process
#   make test-fast                the same without the slowest tests and the notebooks (under a minute)
#   make hip-python-versions      the hip-python releases the contract tests call (make test does it;
#                                 none on AArch64: hip-python installs on x86-64 only)
#   make test-gpu                 the GPU suite and the notebooks, on a machine with a GPU (LAB= ...,
#                                 GPU_WORKERS=4: four pytest workers sharing the GPU)
#   make doctor                   what works here and how to fix what does not
#   make notebooks                open the labs' and exercises' notebooks in JupyterLab
#                                 (NOTEBOOK_ARGS='--no-browser --port=8890': more of its options)
#   make notebook-wheels          build/notebook-wheels/: the Jupyter kernel, for scripts/gpu_checks.sh's
#                                 step notebooks on a GPU machine with no index (GPU_PYTHON=3.12)
#   make sync-notebooks           regenerate every lab.ipynb from its lab.py (after editing it),
#                                 each with the first cell that finds or fetches the course
#   make figures                  redraw the module's figures and the ladder plots in results/ (CPU only)
#   make site                     the course as a static site in build/site/ (needs npm; website/build.py)
#   make site-check               read every page of build/site in Chromium (SCREENSHOTS=results/site:
#                                 and photograph the home page, module A06, lab 04 and exercise 01)
# PYTHON=python3 uses an existing interpreter instead of the course's .venv (no set-up).

LAB ?= 04
BACKEND ?= auto
SIZE ?=
VENV := .venv
SETUP_PYTHON ?= python3
STAMP := $(VENV)/.installed
PYTHON ?= $(VENV)/bin/python
SETUP := $(if $(filter $(VENV)/bin/python,$(PYTHON)),$(STAMP),)
HIP_PYTHON_VERSIONS := build/hip-python/.installed

.PHONY: setup lab run-lab check grade autograder doctor test test-fast test-gpu hip-python-versions notebooks notebook-wheels sync-notebooks figures site site-check clean

setup: $(STAMP)

# scripts/setup_env.py decides what this machine needs (setup_plan.py), says why, and installs it.
$(STAMP): pyproject.toml scripts/setup_env.py scripts/setup_plan.py
	$(SETUP_PYTHON) scripts/setup_env.py $(VENV)
	touch $@

lab: run-lab

run-lab: $(SETUP)
	$(PYTHON) -m kernelcourse run-lab $(LAB) --backend $(BACKEND) $(if $(SIZE),--size $(SIZE))

check: $(SETUP)
	$(PYTHON) -m kernelcourse.check $(EX) --backend $(BACKEND) $(if $(filter 1,$(SOLUTION)),--solution) \
	  $(if $(filter 1,$(SANITIZE)),--sanitize)

# The seed of a regrade comes from the environment, GRADE_SEED=<seed> make grade ..., never
# from make's command line, which every user of the machine can read. CLUSTER=slurm (or
# local) grades the class as an array of tasks: PARTITION, GPUS_PER_TASK, TASKS, RESUME=1
# (GRADING.md, "On a cluster").
grade: $(SETUP)
	$(PYTHON) -m kernelcourse.grade $(SUBMISSIONS) $(if $(EX),--exercise $(EX)) --jobs $(or $(JOBS),1) \
	  $(if $(OUT),--out $(OUT)) $(if $(CLUSTER),--cluster $(CLUSTER)) $(if $(PARTITION),--partition $(PARTITION)) \
	  $(if $(GPUS_PER_TASK),--gpus-per-task $(GPUS_PER_TASK)) $(if $(TASKS),--tasks $(TASKS)) \
	  $(if $(filter 1,$(RESUME)),--resume)

autograder: $(SETUP)
	$(PYTHON) -m kernelcourse.grade.autograder $(EX)

doctor: $(SETUP)
	$(PYTHON) -m kernelcourse doctor

# What LAB, EX, PART and MARK select, as the rest of a pytest -m expression (LAB only where
# given: its default above is run-lab's).
GIVEN_LAB = $(if $(filter-out default file,$(origin LAB)),$(LAB))
# LAB=3 means lab03, as run-lab takes it (and EX=1 ex01)
two_digits = $(if $(filter 1 2 3 4 5 6 7 8 9,$(1)),0$(1),$(1))
SELECT = $(if $(GIVEN_LAB), and lab$(call two_digits,$(GIVEN_LAB)))$(if $(EX), and ex$(call two_digits,$(EX)))$(if $(PART), and $(PART))$(if $(MARK), and ($(MARK)))
# pytest-xdist's workers (-n): one per core. Each file goes to one worker, whole (--dist
# loadfile), so that its module fixtures (a graded folder, say) run once, in the order
# tests/conftest.py gives the files (--no-loadscope-reorder). Without pytest-xdist
# (PYTHON=python3 may lack it), or with WORKERS=0, the tests run in one process.
WORKERS ?= auto
PARALLEL = $$($(PYTHON) -c 'import xdist' 2>/dev/null && echo '-n $(WORKERS) --dist loadfile --no-loadscope-reorder')
NOTEBOOK_FILES := $(wildcard labs/*/lab.ipynb)

# One pytest run for the tests and the notebooks, so that its last lines are the verdict
# (and, where a compiler is missing, the line saying which compile paths were not exercised).
test: $(SETUP) $(HIP_PYTHON_VERSIONS)
	$(PYTHON) -m pytest $(PARALLEL) -m "not gpu$(SELECT)" tests --nbmake $(NOTEBOOK_FILES)

# The edit loop: the tests marked slow (measured on 2 cores) and the notebooks left out.
test-fast: $(SETUP) $(HIP_PYTHON_VERSIONS)
	$(PYTHON) -m pytest $(PARALLEL) -m "not gpu and not slow$(SELECT)" tests

# Each hip-python release of tests/hip_contract/versions.txt in build/hip-python/<version>,
# beside the venv's own: the contract tests run the course's HIP calls against each one.
# hip-python installs on x86-64 only: elsewhere none is, and the contract tests skip (or fail
# where the compilers are required: tests/conftest.py).
hip-python-versions: $(HIP_PYTHON_VERSIONS)

$(HIP_PYTHON_VERSIONS): tests/hip_contract/versions.txt $(SETUP)
	if [ "$$(uname -m)" != x86_64 ]; then \
	  echo "hip-python-versions: none on $$(uname -m) (hip-python installs on x86-64 only)"; \
	else grep -Ev '^[[:space:]]*(#|$$)' $< | while read -r requirement; do \
	  echo "$$requirement" | grep -Eq '^[^=]+==[0-9][0-9A-Za-z.+]*$$' \
	    || { echo "$<: '$$requirement' is not <name>==<version>" >&2; exit 1; }; \
	  target=build/hip-python/$${requirement#*==}; rm -rf "$$target"; \
	  $(PYTHON) -m pip install -q --disable-pip-version-check --target "$$target" "$$requirement" \
	    || exit 1; \
	done; fi
	mkdir -p $(@D) && touch $@

# On a GPU the notebooks run at full size with real timings. NOTEBOOKS=0 leaves them out on a
# machine without a Jupyter kernel (scripts/gpu_checks.sh then runs each lab.py, their twin).
# One process by default: some GPU tests time kernels (none asserts a speed), and workers
# share the GPU: the grader's performance-points test compares two gradings' points, which
# other workers' kernels on the same GPU can move (with 8 workers it failed once so).
# GPU_WORKERS=4 runs four (the H200's suite: 543 s with four). With LAB= (or EX=, PART=),
# tests/test_notebooks.py goes with the notebooks, for the conftest that marks them.
GPU_WORKERS ?= 0
test-gpu: $(SETUP)
	$(PYTHON) -m pytest $(if $(filter-out 0,$(GPU_WORKERS)),-n $(GPU_WORKERS) --dist loadfile --no-loadscope-reorder) -m "gpu$(SELECT)" tests
	$(if $(filter 0,$(NOTEBOOKS)),,$(PYTHON) -m pytest $(if $(SELECT),-m "notebooks$(SELECT)" tests/test_notebooks.py) \
	  --nbmake $(wildcard labs/*/lab.ipynb))

# JupyterLab at the top of the course, so that labs/ and exercises/ are both in its file
# browser; as root (a container, say) it needs --allow-root, which it refuses to guess.
# NOTEBOOK_ARGS: more of JupyterLab's options (--no-browser --port=8890, say).
NOTEBOOK_ARGS ?=
notebooks: $(SETUP)
	$(PYTHON) -c "import jupyterlab" 2>/dev/null || $(PYTHON) -m pip install -q jupyterlab
	$(PYTHON) -m jupyterlab --ServerApp.root_dir=. $(if $(filter 0,$(shell id -u)),--allow-root) \
	  $(NOTEBOOK_ARGS)

# The Jupyter kernel scripts/gpu_checks.sh's step `notebooks` needs, as wheels for a GPU
# machine whose Python has none and no index to fetch them from: GPU_PYTHON's version, x86-64.
GPU_PYTHON ?= 3.12
notebook-wheels: $(SETUP)
	rm -rf build/notebook-wheels
	$(PYTHON) -m pip download -q -d build/notebook-wheels --only-binary=:all: --implementation cp \
	  --python-version $(GPU_PYTHON) $(foreach tag,manylinux_2_28 manylinux_2_17 manylinux2014 manylinux_2_5 \
	  manylinux1,--platform $(tag)_x86_64) "nbclient>=0.10" "nbformat>=5" "ipykernel>=6"

sync-notebooks: $(SETUP)
	$(PYTHON) -m kernelcourse.hosted
	for f in labs/*/lab.py; do $(PYTHON) -m jupytext --quiet --update --to ipynb $$f; done

figures: $(SETUP)
	$(PYTHON) -m kernelcourse.figures

# The site's generator and browser driver (pyproject.toml's site extra), installed on first use.
SITE_TOOLS = $(PYTHON) -c "import material, mkdocs_jupyter, playwright" 2>/dev/null \
	  || $(PYTHON) -m pip install -q --disable-pip-version-check -e ".[site]"

site: $(SETUP)
	$(SITE_TOOLS)
	$(PYTHON) website/build.py --out build/site

site-check: $(SETUP)
	$(SITE_TOOLS)
	$(PYTHON) website/check.py build/site $(if $(SCREENSHOTS),--screenshots $(SCREENSHOTS))

clean:
	rm -rf build .pytest_cache $${KERNELCOURSE_CACHE:-$$HOME/.cache/kernelcourse}
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
