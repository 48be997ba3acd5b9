# The two set-up commands (see README):
#   make run   — install, then run the main job `tcpdelay evaluate` with its defaults
#   make test  — install with the dev, sim (ns-3) and cluster (Ray) extras, then run every test
# Everything else here is a helper of those two.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EMU    := emulator
# cargo from PATH, else rustup's default location (a non-login shell may lack ~/.cargo/bin).
CARGO  ?= $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)

.PHONY: run test test-setup emulator-test warm-imports alone-files install install-dev native bpf bpf-tools media-tools guest-tools clean

run: install native
	$(BIN)/tcpdelay evaluate

# pytest in two passes (docs/testing.md): the tests not marked `alone`, on PYTEST_WORKERS processes
# side by side with pytest-xdist (the tests of one xdist_group share a process; 0: all in this
# process, serially), then the `alone` ones one after another with the machine to themselves.
# Both passes run even if the first fails; each prints its 15 slowest tests.
# Python's bytecode caches are written even where PYTHONDONTWRITEBYTECODE is set (they are
# git-ignored): without pytest's cache of the rewritten test modules, every pytest process
# compiled all of them again (the second pass collected in 13 s instead of 5).
PYTEST_WORKERS ?= 4

# make's start (read once, when this file is parsed): the set-up's time is from here to the first pass.
MAKE_T0 := $(shell date +%s)

test: test-setup
	@status=0; t1=$$(date +%s); \
	echo "pytest, pass 1 of 2: every test not marked alone ($(PYTEST_WORKERS) workers; 0: in this process)"; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup -m "not alone" || status=$$?; \
	t2=$$(date +%s); \
	echo "pytest, pass 2 of 2: the tests marked alone, one at a time"; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -m alone $(ALONE_FILES) || status=$$?; \
	t3=$$(date +%s); \
	mmss() { printf '%d:%02d' $$(($$1 / 60)) $$(($$1 % 60)); }; \
	echo "make test: set-up $$(mmss $$((t1 - $(MAKE_T0)))), pass 1 $$(mmss $$((t2 - t1))), pass 2 $$(mmss $$((t3 - t2))), whole $$(mmss $$((t3 - $(MAKE_T0)))) ($$([ $$status = 0 ] && echo green || echo red))"; \
	exit $$status

# The test files that mark a test `alone`: the second pass collects only these (1 s instead of the
# whole suite's 6, one after another with nothing beside it). tests/test_suite_grouping.py checks
# that every test marked alone is in one of them.
ALONE_FILES = $(shell grep -rlE --include='*.py' 'mark\.alone\b' tests | sort)

alone-files:
	@echo $(ALONE_FILES)

# make test's set-up: the system packages first, one after another (apt holds one lock), then the
# venv's install and one collection of the suite (warm-imports) beside the native builds and the
# emulator's own tests (compiling, then 4 s of its end-to-end runs, which bound their delays by
# how late this machine wakes a sleeping thread meanwhile), two at a time.
test-setup: media-tools guest-tools bpf-tools
	@$(MAKE) --no-print-directory -j2 warm-imports native emulator-test

# The emulator's cargo tests (unit, command line, end to end through namespaces), after the
# native build: its test build reuses the release build's dependencies, and in make test's
# set-up the BPF programs are not left waiting for a job slot behind it.
emulator-test: native
	@if [ -f $(EMU)/Cargo.toml ]; then cd $(EMU) && $(CARGO) test --release --quiet; fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall only when the package metadata changes (the install is editable).
$(VENV)/.stamp-install: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

# --no-compile: pip compiles every module it installs (7 000 files, 26 s of its 42 here), where
# the tests import about 1 400 of them; those are compiled once, by warm-imports below.
$(VENV)/.stamp-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev,sim,cluster]'
	@touch $@ $(VENV)/.stamp-install

# One collection of the whole suite, so that the modules it imports are compiled once (and the
# test modules' rewritten bytecode written once) before pytest's workers start, instead of by
# each of them at once. Its status is not make test's: the passes collect again and report.
warm-imports: install-dev
	@PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1 || true

install: $(VENV)/.stamp-install
install-dev: $(VENV)/.stamp-dev

# Native parts: the Rust link emulator (binary tcpdelay-link), built when present, and the BPF
# congestion controls with their loader (docs/congestion-control.md).
native: bpf
	@if [ -f $(EMU)/Cargo.toml ]; then cd $(EMU) && $(CARGO) build --release --quiet; fi

BPF_SRC := $(wildcard bpf/cc/*.bpf.c)
BPF_OBJ := $(patsubst bpf/cc/%.bpf.c,bpf/build/%.bpf.o,$(BPF_SRC))
BPF_HDR := $(wildcard bpf/cc/*.h)

bpf: bpf-tools bpf/build/tcpdelay-cc-load $(BPF_OBJ)

# The real server and players of the HTTP video experiment (docs/video-over-http.md): nginx,
# ffmpeg/ffprobe with libx264, VLC; installed when missing on a Debian-like system as root,
# otherwise named.
media-tools:
	@missing=""; \
	for t in nginx ffmpeg ffprobe cvlc; do command -v $$t >/dev/null 2>&1 || [ -x /usr/sbin/$$t ] || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing the HTTP video tools (missing:$$missing)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nginx ffmpeg vlc-bin vlc-plugin-base >/dev/null || exit 1; \
	  else \
	    echo "missing for the HTTP video experiment:$$missing (Debian/Ubuntu: apt-get install nginx ffmpeg vlc-bin vlc-plugin-base)"; exit 1; \
	  fi; \
	fi

# QEMU and iperf3 for the reference-kernel hosts (docs/testbed.md; the kernel and busybox-static
# packages are fetched by tcpdelay itself into ~/.cache/tcpdelay/kernels); installed when missing
# on a Debian-like system as root, otherwise named (their tests then skip with that line).
guest-tools:
	@missing=""; \
	for t in qemu-system-x86_64 iperf3; do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing the reference-kernel guest tools (missing:$$missing)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends qemu-system-x86 iperf3 >/dev/null || exit 1; \
	  else \
	    echo "missing for the reference-kernel hosts:$$missing (Debian/Ubuntu: apt-get install qemu-system-x86 iperf3)"; \
	  fi; \
	fi

# clang, llvm-strip, bpftool and libbpf's headers; installed when missing on a Debian-like
# system as root, otherwise named.
bpf-tools:
	@missing=""; \
	for t in clang llvm-strip bpftool; do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	[ -f /usr/include/bpf/libbpf.h ] || missing="$$missing libbpf-headers"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing the BPF toolchain (missing:$$missing)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends clang llvm libbpf-dev bpftool >/dev/null || exit 1; \
	  else \
	    echo "missing for the BPF congestion controls:$$missing (Debian/Ubuntu: apt-get install clang llvm libbpf-dev bpftool)"; exit 1; \
	  fi; \
	fi

bpf/build/vmlinux.h:
	@mkdir -p bpf/build
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

bpf/build/%.bpf.o: bpf/cc/%.bpf.c $(BPF_HDR) bpf/build/vmlinux.h
	clang -target bpf -O2 -g -Wall -Ibpf/build -Ibpf/cc -c $< -o $@.tmp && llvm-strip -g $@.tmp && mv $@.tmp $@

bpf/build/tcpdelay-cc-load: bpf/loader/tcpdelay-cc-load.c
	@mkdir -p bpf/build
	cc -O2 -Wall -o $@ $< -lbpf -lelf -lz

clean:
	rm -rf $(VENV) out build dist $(EMU)/target bpf/build
