"""The bottleneck's average and peak queue over a run's window, from its queue-length trace."""

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.metrics.queue import queue_summary


def test_mean_and_peak_over_the_window_per_direction():
    t = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] * 2
    d = ["a_to_b"] * 6 + ["b_to_a"] * 6
    p = [50, 2, 4, 6, 8, 90] + [0, 0, 1, 0, 0, 0]
    b = [x * 1000 for x in p]
    got = queue_summary(d, t, p, b, 1.0, 4.0)           # the lead (t = 0) and the drain (t = 5) left out
    assert got["a_to_b"] == {"mean_packets": 5.0, "max_packets": 8, "mean_bytes": 5000.0, "max_bytes": 8000,
                             "samples": 4}
    assert got["b_to_a"]["mean_packets"] == 0.25 and got["b_to_a"]["max_packets"] == 1
    assert queue_summary(d, t, p, b, 10.0, 20.0) == {}


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        queue_summary(["a_to_b"], [0.0, 1.0], [1], [1], 0.0, 1.0)
    with pytest.raises(ParameterError):
        queue_summary([], [], [], [], -1.0, 1.0)
