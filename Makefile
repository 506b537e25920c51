# amari_gpu developer commands. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
# One target dir outside the clone, so fresh clones (and CI runs) reuse earlier builds.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/amari-gpu-target
export VIRTUAL_ENV := $(abspath $(VENV))

.PHONY: help system venv dev demo test test-rust test-python wheel-test lint fmt surface api-docs clean bench

help: ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

system: ## install Mesa's software adapters when the machine has no Vulkan/EGL driver
	bash scripts/ensure-adapter.sh

$(VENV)/.installed: requirements-dev.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed ## create the virtual environment with the dev tools

dev: system venv ## build the extension (release) and install it in place
	$(VENV)/bin/maturin develop --release -q

demo: dev ## the main job: list adapters, run and check a kernel on every device
	$(PY) -m amari_gpu demo

test-rust: system ## core unit tests, shader validation and GPU tests of the Rust crate
	XDG_RUNTIME_DIR=$$(mktemp -d) AMARI_GPU_CACHE_DIR=$$(mktemp -d) cargo test --release -p amari-gpu --features bench-support

test-python: dev ## pytest suites (GPU tests run on whatever adapters exist)
	$(PY) -m pytest

test: test-rust test-python ## every test

wheel-test: system venv ## build the wheel and the sdist, install each in a fresh venv, run the CLI
	bash scripts/wheel-test.sh

lint: venv ## rustfmt, import and folder circles, clippy, ruff, mypy, stub check, the generated surface and API reference
	cargo fmt --all --check
	$(PY) scripts/gen-surface.py --check
	$(PY) scripts/gen-api-docs.py --check
	python3 scripts/import-cycles.py rust/amari-gpu/src
	cargo clippy --release --workspace --all-targets --features amari-gpu/bench-support -- -D warnings
	# The library as the wheel builds it (no bench-support): code only the benches use must
	# not leave it warning.
	cargo clippy --release --workspace --lib -- -D warnings
	$(VENV)/bin/ruff check python tests benches scripts/gen-surface.py scripts/gen-api-docs.py
	$(VENV)/bin/ruff format --check python tests benches scripts/gen-surface.py scripts/gen-api-docs.py
	$(VENV)/bin/mypy
	$(PY) -m mypy.stubtest amari_gpu._native

fmt: venv ## format Rust and Python sources
	cargo fmt --all
	$(VENV)/bin/ruff format python tests benches
	$(VENV)/bin/ruff check --fix python tests benches

surface: venv ## regenerate the stubs, overloads, Kernels Protocol and api.md list from _surface.py
	$(PY) scripts/gen-surface.py

api-docs: ## regenerate docs/api.md's per-name reference from the docstrings (needs the built extension: make dev)
	$(PY) scripts/gen-api-docs.py

clean: ## remove the virtual environment and build outputs
	rm -rf $(VENV) dist
	cargo clean

# Every figure in README.md and docs/benchmarks.md is printed by one of these. host.py runs
# without the OpenBLAS variables that pin a kernel (it prints the one numpy's BLAS chose).
bench: dev ## every figure of README and docs/benchmarks.md: host vs CPU peers, strategies, grids, resident arrays, profiler, Ray, roofline, criterion benches
	$(PY) -m pip install -q -r requirements-bench.txt
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(PY) benches/host.py
	$(PY) benches/strategies.py
	$(PY) benches/profiler.py
	$(PY) benches/model.py
	$(PY) benches/stencil.py
	$(PY) benches/stencil.py --size 256 --steps 64
	$(PY) benches/chain.py
	$(PY) benches/resident_tropical.py
	$(PY) benches/resident_fisher.py
	$(PY) benches/cluster.py
	$(PY) benches/roofline.py
	$(PY) -m pytest benches/ --benchmark-only
	$(PY) -m amari_gpu bench --quick
	cargo bench -p amari-gpu --features bench-support --bench partition --bench families --bench wgpucall --bench ga --bench tropical --bench fisher
