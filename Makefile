# mmo1d: the two commands of the Quick start are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: setup demo test bench bench-models lint clean

setup:
	@bash .dev_scripts/setup_env.sh

demo: setup
	@bash tools/misc/demo.sh

test: setup
	$(PY) -m pytest tests -q

bench: setup
	$(PY) tools/analysis_tools/benchmark_op.py --out-dir benchmarks/results

bench-models: setup
	$(PY) tools/analysis_tools/benchmark_model.py --out-dir benchmarks/results

lint: setup
	$(VENV)/bin/ruff check mmo1d tools tests configs .dev_scripts setup.py

clean:
	rm -rf build *.egg-info mmo1d/_C*.so work_dirs
