"""CI runs as root on a machine with /dev/net/tun: there the testbed tests must run, not skip.

The testbed tests skip (with the reason) where the testbed cannot run, e.g. on a laptop without
root. In CI that would silently hide them, so this test fails instead.
"""

import os

import pytest


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="only CI promises root and /dev/net/tun")
def test_testbed_can_run_in_ci():
    from tcpdelay.experiments.measured_check import testbed_unavailable

    assert testbed_unavailable() is None
