"""Which kernels ignore ``rack = false`` (tcp_recovery bit 0 = 0) for SACK connections: from
Linux 6.17, which removed the RFC 6675 loss detection the bit selected."""

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.testbed.tcp_settings import rack_always_on


@pytest.mark.parametrize("release, always", [("6.16.12", False), ("6.17.0", True), ("6.17.0-rc3", True),
                                             ("6.18.44-fc-v669", True), ("5.15.0-100-generic", False),
                                             ("7.0.1", True), ("4.19.0", False)])
def test_rack_is_always_on_from_6_17(release, always):
    assert rack_always_on(release) is always


def test_a_release_without_major_minor_is_refused():
    with pytest.raises(ParameterError, match="MAJOR.MINOR"):
        rack_always_on("unknown")
