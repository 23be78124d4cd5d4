# aqmlab — the two commands of the README, and helpers.
#   make run    quick reproduction of a seed study (ckcd: Liu et al., CKCD), ending in its HTML report
#   make test   install what is needed, build the native module, run every test
SHELL := /bin/bash
PYTHON ?= python3
PIP := $(PYTHON) -m pip
# Pinned Python dependencies (pyproject.toml lists the same runtime pins).
PY_DEPS := pydantic==2.13.4 typer==0.29.1 rich==15.0.0 pyarrow==26.0.1 pandas==3.1.1 numpy==2.4.6 \
           matplotlib==3.11.2 dask==2026.8.0 distributed==2026.8.0 optuna==5.0.0 \
           pytest==9.2.0 hypothesis==6.170.15 maturin==1.16.0
STAMP := .make

.PHONY: run test deps build rust-test py-test bench bench-emu clean

$(STAMP)/deps: Makefile
	@mkdir -p $(STAMP)
	$(PIP) install --quiet --disable-pip-version-check $(PY_DEPS)
	@# Headless Chromium (Debian's package) for the report-in-a-browser test.
	@command -v chromium >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@# The emulator (docs/emulator.md): ethtool turns veth offloads off; iproute2 builds the
	@# namespaces; taskset/chrt (util-linux) pin and prioritise its processes.
	@command -v ethtool >/dev/null && command -v ip >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ethtool iproute2 >/dev/null; }
	@touch $@

deps: $(STAMP)/deps

# Build the native module (release) and install the package in editable mode: maturin puts
# the extension into python/aqmlab/ and the package on sys.path.
build: deps
	$(PIP) install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e .
	@$(PYTHON) -c "import aqmlab._native" || { echo "native module failed to build"; exit 1; }
	@# The emulator's bottleneck router (target/release/aqmlab-router).
	cargo build --release -q -p router

run: build
	$(PYTHON) -m aqmlab reproduce ckcd --quick -o out/ckcd-quick

# The PyO3 crate links against libpython only when loaded by Python: test the others. The
# test profile (Cargo.toml: opt-level 2) keeps debug assertions on, so the engine's invariants
# (e.g. Scheduler::advance_to never skips a pending event) are checked by every test run.
rust-test:
	cargo test --workspace --exclude aqmlab-py --quiet

py-test: build
	$(PYTHON) -m pytest -q tests

test: deps rust-test py-test

bench:
	cargo build --release -q -p sim --example bench
	./target/release/examples/bench a
	./target/release/examples/bench b

# The emulator's rate / CPU benchmark (root; several minutes): bench/README.md §Emulator.
bench-emu: build
	$(PYTHON) bench/emulator.py --rates 50,200,400,600,800 --rounds 2

clean:
	rm -rf target $(STAMP) out python/aqmlab/*.so
