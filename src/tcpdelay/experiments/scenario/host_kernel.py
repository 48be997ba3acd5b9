"""``[host_kernel]``: the hosts of one side (or both) as QEMU guests booting a reference kernel
(:mod:`tcpdelay.testbed.guest`; docs/testbed.md, "Reference-kernel hosts"), testbed only::

    [host_kernel]
    kernel = "debian-6.1"   # tcpdelay.testbed.reference_kernel.KERNELS
    side = "left"           # left (the forward flows' senders), right, or both
    accel = "tcg"           # tcg (an emulated CPU: works everywhere) or kvm

The media flows' senders and receivers on those hosts run on the guest's kernel (its own TCP,
e.g. Linux 6.1's RFC 6675 recovery with RACK off); the times they record are moved onto this
machine's clock by the guest-host offset measured at the run's start and end, and one-way delays
are reported only when that offset's error is within ``MAX_ERROR_S``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from tcpdelay.experiments.scenario.base import StrictTable


class HostKernel(StrictTable):
    kernel: str
    side: Literal["left", "right", "both"] = "left"
    accel: Literal["tcg", "kvm"] = "tcg"

    @field_validator("kernel")
    @classmethod
    def _kernel(cls, v: str) -> str:
        from tcpdelay.testbed.reference_kernel import KERNELS

        if v not in KERNELS:
            raise ValueError(f"{v!r} is not one of {', '.join(KERNELS)}")
        return v
