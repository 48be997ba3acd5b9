"""Connections the receiver has accepted but not yet identified, bounded in count and time.

Every TCP connection to the receiver opens with one control message: a ``hello`` (a new run)
or a ``data`` message (a media connection of the run being served). Until that message is
complete the connection is *pending*. Pending connections are read concurrently, in the
receiver's one event loop, never one after another, so a connection that sends nothing, or
one byte a second, cannot hold up a sender behind it. Two bounds keep them from exhausting the
receiver:

- count: at most ``max_pending`` are held; accepting one more closes the oldest (a real peer
  sends its first message as soon as it is connected, so the oldest is the least likely to);
- time: each has ``timeout_s`` from its accept to complete its first message, however slowly
  it trickles bytes in.

The listening socket is drained on every readable event (nothing waits in the kernel's accept
queue while a handshake is read), and a connection that breaks a bound is closed without a
word: the receiver sends nothing to a peer that has not identified itself.
"""

from __future__ import annotations

import selectors
import socket
import time
from collections import OrderedDict

from tcpdelay.transport import control

_BLOCKED = (BlockingIOError, InterruptedError)


class Pending:
    """The pending connections of a receiver, registered in its selector as ("pending", self)."""

    def __init__(self, sel: selectors.BaseSelector, max_pending: int, timeout_s: float):
        self.sel = sel
        self.max_pending = max_pending
        self.timeout_s = timeout_s
        # socket -> (deadline, reader, peer); insertion order = accept order (oldest first)
        self._conns: OrderedDict[socket.socket, tuple[float, control.ControlReader, tuple]] = OrderedDict()
        self.evicted = 0        # closed because the table was full
        self.expired = 0        # closed because their time was up
        self.bytes_in = 0

    def __len__(self) -> int:
        return len(self._conns)

    def accept_all(self, lst: socket.socket) -> None:
        """Accept everything waiting on the (non-blocking) listening socket."""
        while True:
            try:
                sock, peer = lst.accept()
            except _BLOCKED:
                return
            except OSError:     # ECONNABORTED, EMFILE, ...: try again on the next event
                return
            if len(self._conns) >= self.max_pending:
                old = next(iter(self._conns))
                self._drop(old)
                self.evicted += 1
            sock.setblocking(False)
            self._conns[sock] = (time.monotonic() + self.timeout_s, control.ControlReader(), peer)
            self.sel.register(sock, selectors.EVENT_READ, ("pending", self))

    def read(self, sock: socket.socket):
        """Read what ``sock`` has. Returns ``(msg, msg_bytes, rest, peer, sock)`` once its first
        message is complete (the socket is then the caller's, unregistered, non-blocking;
        ``rest`` is what followed the message), else None. A closed, failed or malformed
        connection is dropped."""
        entry = self._conns.get(sock)
        if entry is None:
            return None
        _, reader, peer = entry
        try:
            data = sock.recv(4096)
        except _BLOCKED:
            return None
        except OSError:
            data = b""
        if not data:
            self._drop(sock)
            return None
        self.bytes_in += len(data)
        try:
            msgs = reader.feed(data, limit=1)
        except control.ControlError:
            self._drop(sock)
            return None
        if not msgs:
            return None
        del self._conns[sock]
        self.sel.unregister(sock)
        msg, n = msgs[0]
        return msg, n, reader.take_rest(), peer, sock

    def expire(self) -> None:
        """Close the connections whose time is up."""
        now = time.monotonic()
        while self._conns:
            sock, (deadline, _, _) = next(iter(self._conns.items()))
            if deadline > now:       # deadlines grow with accept order
                return
            self._drop(sock)
            self.expired += 1

    def next_deadline_s(self) -> float | None:
        """Seconds until the oldest connection expires (None when there is none)."""
        if not self._conns:
            return None
        deadline = next(iter(self._conns.values()))[0]
        return max(0.0, deadline - time.monotonic())

    def close_all(self) -> None:
        for sock in list(self._conns):
            self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        self._conns.pop(sock, None)
        try:
            self.sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()
