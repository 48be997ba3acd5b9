"""``run_sender``: the one entry of every media sender, by the run's transport.

TCP and UDP go over the kernel's sockets (:func:`tcpdelay.transport.sender.run_socket_sender`),
the QUIC mappings over aioquic (:func:`tcpdelay.transport.quic_sender.run_quic_sender`); both
take the same configuration and return the same :class:`~tcpdelay.transport.sender.SenderResult`
(docs/transport.md, docs/transports-quic.md).
"""

from __future__ import annotations

import threading
from typing import Callable

from tcpdelay.transport.config import SenderConfig
from tcpdelay.transport.quic_config import is_quic
from tcpdelay.transport.quic_sender import run_quic_sender
from tcpdelay.start_gate import Instant
from tcpdelay.transport.sender import SenderResult, run_socket_sender, wait_until


def run_sender(config: SenderConfig, source, *, stop: threading.Event | None = None,
               on_progress: Callable[[dict], None] | None = None,
               start_at: Instant = None) -> SenderResult:
    """Send ``source`` (a :class:`tcpdelay.traffic.Source`) for ``config.run.duration_s`` over
    ``config.run.transport``.

    Raises :class:`~tcpdelay.transport.sender.SenderError` (or ParameterError) if the run cannot
    start; once it has started, every ending is reported in the result's ``status`` and the
    records are kept. ``stop`` (a threading.Event) ends the run early, as does KeyboardInterrupt.
    ``start_at`` (a ``time.monotonic()`` instant): the first packet's time. Over TCP and UDP the
    run is offered and its connections opened before it, so the control exchange does not cross
    a path the other flows already load; a QUIC run is set up after it.
    """
    if is_quic(config.run.transport):
        wait_until(start_at, stop)
        return run_quic_sender(config, source, stop=stop, on_progress=on_progress)
    return run_socket_sender(config, source, stop=stop, on_progress=on_progress, start_at=start_at)
