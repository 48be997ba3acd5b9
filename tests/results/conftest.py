"""The committed results, loaded once per test process: tests/results/test_results_layer.py loads
each as the layer reads it, tests/results/test_results_walk.py reopens it as ``tcpdelay report``
does — the same ``load_results``, which measures every run again from its packets. Their tests of
one result share a pytest-xdist group (``committed-NAME``), so they run in one process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tcpdelay.results import load_results

RESULTS = Path(__file__).resolve().parents[2] / "results"


@pytest.fixture(scope="session")
def committed_results():
    """``committed_results(name)``: ``load_results(results/NAME)``, once per process."""
    loaded: dict[str, object] = {}

    def get(name: str):
        if name not in loaded:
            loaded[name] = load_results(RESULTS / name)
        return loaded[name]
    return get
