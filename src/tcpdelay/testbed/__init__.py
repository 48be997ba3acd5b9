"""Emulation testbed: real Linux TCP in network namespaces across the ``tcpdelay-link`` emulator.

Start here: :class:`Testbed` (context manager) built from a :class:`TestbedSpec`; usage in
docs/testbed.md. Its link is a :class:`tcpdelay.link.LinkSpec` (handed on here, with the loss
models and outages, for the testbed's users). Leftovers of killed runs: :func:`clean` (``tcpdelay testbed clean``).
"""

from tcpdelay.testbed.netns import require_testbed_environment
from tcpdelay.testbed.runs import clean, find_runs
from tcpdelay.link import BernoulliLoss, DirectionSpec, GilbertElliottLoss, LinkSpec, NoLoss, Outage
from tcpdelay.testbed.spec import LINUX_DEFAULT, NEWRENO_2008, PRESETS, HostSpec, TcpSettings, TestbedSpec, preset
from tcpdelay.testbed.testbed import CallHandle, Host, RemoteError, Testbed, TestbedError

__all__ = [
    "Testbed", "TestbedSpec", "HostSpec", "LinkSpec", "DirectionSpec", "TcpSettings",
    "NoLoss", "BernoulliLoss", "GilbertElliottLoss", "Outage", "PRESETS", "NEWRENO_2008",
    "LINUX_DEFAULT", "preset", "Host", "CallHandle", "RemoteError", "TestbedError", "clean",
    "find_runs", "require_testbed_environment",
]
