"""Execution backends of a run, looked up by name (:func:`get_backend`); the interface is
:mod:`tcpdelay.experiments.backends.base`. A backend's module is imported only when asked for,
so planning and recording need none of them."""

from __future__ import annotations

import importlib
from typing import Callable

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.backends.base import (
    Backend, BackendJob, BackendOutcome, RunFailed, Unsupported, part_name, refusal,
)

#: Backend name -> "module:class" of its implementation (imported when asked for), or a factory.
BACKENDS: dict[str, str | Callable[[], Backend]] = {
    "testbed": "tcpdelay.experiments.backends.testbed:TestbedBackend",
    "ns3": "tcpdelay.experiments.backends.ns3:Ns3Backend",
}


def register_backend(name: str, target: str | Callable[[], Backend]) -> None:
    """Make ``get_backend(name)`` build ``target`` (``"package.module:Class"``, or a factory)."""
    BACKENDS[name] = target


def get_backend(name: str) -> Backend:
    """A new backend of the given name; an unknown name is a :class:`ParameterError` naming
    the known ones."""
    try:
        target = BACKENDS[name]
    except KeyError:
        raise ParameterError(f"backend: {name!r} is not one of {', '.join(sorted(BACKENDS))}") from None
    if callable(target):
        return target()
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)()


__all__ = ["BACKENDS", "Backend", "BackendJob", "BackendOutcome", "RunFailed", "Unsupported", "get_backend",
           "part_name", "refusal", "register_backend"]
