# aqmlab — the two commands of the README, and helpers.
#   make run    quick reproduction of a seed study (ckcd: Liu et al., CKCD), ending in its HTML report
#   make test   install what is needed, build the native module, run every test
SHELL := /bin/bash
PYTHON ?= python3
PIP := $(PYTHON) -m pip
# Python dependencies, at the exact versions of constraints.txt (pyproject.toml declares the
# compatible ranges a user's environment may hold).
PY_DEPS := pydantic typer rich pyarrow pandas numpy matplotlib dask distributed optuna pytest pytest-xdist hypothesis maturin ruff mypy
STAMP := .make

.PHONY: run test deps build bpf lint rust-test py-test bench bench-emu clean

$(STAMP)/deps: Makefile constraints.txt
	@mkdir -p $(STAMP)
	$(PIP) install --quiet --disable-pip-version-check -c constraints.txt $(PY_DEPS)
	@# Headless Chromium (Debian's package) for the report-in-a-browser test.
	@command -v chromium >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@# The emulator (docs/emulator.md): ethtool sets the hosts' offloads; iproute2 builds the
	@# namespaces; taskset/chrt (util-linux) pin and prioritise its processes.
	@command -v ethtool >/dev/null && command -v ip >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ethtool iproute2 >/dev/null; }
	@# Its eBPF congestion controls (bpf/): clang/llvm compile them, libbpf-dev links the
	@# loader, bpftool writes vmlinux.h from the kernel's BTF.
	@command -v clang >/dev/null && command -v llc >/dev/null && command -v bpftool >/dev/null && test -f /usr/include/bpf/libbpf.h && command -v tcpdump >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang llvm libbpf-dev bpftool tcpdump >/dev/null; }
	@# The AQM plugins (docs/plugins.md): clang's wasm32 target and lld's wasm-ld build them.
	@command -v wasm-ld >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang lld >/dev/null; }
	@touch $@

deps: $(STAMP)/deps

# Build the wheel (target/wheels/, which tests/test_wheel.py installs into a clean virtual
# environment), then the package in editable mode from the same compiled crates: maturin puts
# the extension into python/aqmlab/ and the package on sys.path.
build: deps
	rm -f target/wheels/aqmlab-*.whl
	maturin build --release --quiet -o target/wheels
	$(PIP) install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e .
	@$(PYTHON) -c "import aqmlab._native" || { echo "native module failed to build"; exit 1; }
	@# The emulator's bottleneck router (target/release/aqmlab-router).
	cargo build --release -q -p router
	@$(MAKE) --no-print-directory bpf

# The emulator's eBPF congestion controls and their loader (docs/emulator.md), into target/bpf,
# with the test CE marker (bpf/aqmlab_cemark.bpf.c, a tc classifier for tests/test_prague_bpf.py).
# vmlinux.h is the running kernel's BTF as C (generated, never committed); the objects use
# CO-RE relocations against it. A kernel without BTF cannot run them: say so, build the rest.
BPF_OUT := target/bpf
KERNEL_BTF := /sys/kernel/btf/vmlinux
BPF_OBJS := $(BPF_OUT)/aqmlab_dctcp.bpf.o $(BPF_OUT)/aqmlab_prague.bpf.o $(BPF_OUT)/aqmlab_cemark.bpf.o
bpf:
	@if test -r $(KERNEL_BTF); then $(MAKE) --no-print-directory $(BPF_OBJS) $(BPF_OUT)/aqmlab-bpfcc; \
	else echo "no $(KERNEL_BTF): the eBPF congestion controls are not built (the emulator refuses them)"; fi

$(BPF_OUT)/vmlinux.h: $(KERNEL_BTF)
	@mkdir -p $(BPF_OUT)
	bpftool btf dump file $(KERNEL_BTF) format c > $@.tmp && mv $@.tmp $@

$(BPF_OUT)/%.bpf.o: bpf/%.bpf.c $(BPF_OUT)/vmlinux.h
	clang -target bpf -O2 -g -Wall -I$(BPF_OUT) -c $< -o $@

$(BPF_OUT)/aqmlab-bpfcc: bpf/loader.c
	@mkdir -p $(BPF_OUT)
	cc -O2 -Wall -o $@ $< -lbpf

run: build
	$(PYTHON) -m aqmlab reproduce ckcd --quick -o out/ckcd-quick

# The PyO3 crate links against libpython only when loaded by Python: test the others. The
# test profile (Cargo.toml: opt-level 2) keeps debug assertions on, so the engine's invariants
# (e.g. Scheduler::advance_to never skips a pending event) are checked by every test run.
rust-test:
	cargo test --workspace --exclude aqmlab-py --quiet

# The suite on both cores (pytest-xdist; a file per worker, so a module's fixtures are built
# once), then the emulator's real-time tests alone, one at a time (tests/conftest.py), holding
# the machine's emulator lock (the one `aqmlab fidelity --lock` takes): one testbed at a time.
EMU_LOCK := /tmp/aqmlab-emu.lock
py-test: build
	$(PYTHON) -m pytest -q --durations=15 -n 2 --dist loadfile -m "not emulator" tests
	flock $(EMU_LOCK) $(PYTHON) -m pytest -q --durations=15 -m emulator tests

# The habits the code keeps (README §Tests): Rust formatted and clippy-clean at the workspace's
# rust-version, Python linted and formatted by ruff and type-checked by mypy (pyproject.toml).
lint: deps
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --quiet -- -D warnings
	$(PYTHON) -m ruff check python tests bench
	$(PYTHON) -m ruff format --check python tests bench
	$(PYTHON) -m mypy

test: deps lint rust-test py-test

bench:
	cargo build --release -q -p sim --example bench
	./target/release/examples/bench a
	./target/release/examples/bench b

# The emulator's rate / CPU benchmark (root; several minutes): bench/README.md §Emulator.
bench-emu: build
	$(PYTHON) bench/emulator.py --rates 400,600,1000,1200 --offloads on,off --rounds 2

clean:
	rm -rf target $(STAMP) out python/aqmlab/*.so
