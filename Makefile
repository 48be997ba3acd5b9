# The two set-up commands (see README):
#   make run   — install, then run the main job `tcpdelay evaluate` with its defaults
#   make test  — install with dev extras, then run every test
# Everything else here is a helper of those two.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EMU    := emulator
# cargo from PATH, else rustup's default location (a non-login shell may lack ~/.cargo/bin).
CARGO  ?= $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)

.PHONY: run test install install-dev native clean

run: install native
	$(BIN)/tcpdelay evaluate

test: install-dev native
	@if [ -f $(EMU)/Cargo.toml ]; then cd $(EMU) && $(CARGO) test --release --quiet; fi
	$(BIN)/python -m pytest

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall only when the package metadata changes (the install is editable).
$(VENV)/.stamp-install: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

$(VENV)/.stamp-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@ $(VENV)/.stamp-install

install: $(VENV)/.stamp-install
install-dev: $(VENV)/.stamp-dev

# Native parts: the Rust link emulator (binary tcpdelay-link), built when present.
native:
	@if [ -f $(EMU)/Cargo.toml ]; then cd $(EMU) && $(CARGO) build --release --quiet; fi

clean:
	rm -rf $(VENV) out build dist $(EMU)/target
