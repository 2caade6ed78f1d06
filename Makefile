# mmo1d: the two commands of the Quick start are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
# make test runs the suite in this many processes (pytest-xdist), one compute thread each.
TEST_WORKERS ?= 2
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: setup demo test bench bench-models lint clean

setup:
	@bash .dev_scripts/setup_env.sh

demo: setup
	@bash tools/misc/demo.sh

test: setup
	OMP_NUM_THREADS=1 $(PY) -m pytest tests -q -n $(TEST_WORKERS)

bench: setup
	$(PY) tools/analysis_tools/benchmark_op.py --out-dir benchmarks/results

bench-models: setup
	$(PY) tools/analysis_tools/benchmark_model.py --out-dir benchmarks/results

lint: setup
	$(VENV)/bin/ruff check mmo1d tools tests configs .dev_scripts setup.py

clean:
	rm -rf build *.egg-info mmo1d/_C*.so work_dirs
