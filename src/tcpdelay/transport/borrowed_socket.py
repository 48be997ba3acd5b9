"""The TCP sockets of another process, borrowed: a duplicate of its file descriptor in ours
(``pidfd_getfd(2)``, Linux 5.6), so ``getsockopt`` (``TCP_INFO``, ``TCP_CONGESTION``) and a BPF
congestion control's socket-storage lookup work on a connection we did not open — nginx's, for
papers/003's HTTP streaming. The duplicate refers to the same socket; closing it closes only our
descriptor.

Which descriptors: those of the processes ``pids`` whose ``/proc/<pid>/fd`` link is
``socket:[inode]`` with an inode that ``/proc/net/tcp`` (of the caller's network namespace: call
this inside the server's) lists as an established connection from ``local_port``. Needs the right
to ptrace the process (root).
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket

_SYS_PIDFD_GETFD = 438          # x86_64 and aarch64 (the generic syscall table)
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_ESTABLISHED = "01"


def _established_inodes(local_port: int) -> dict[int, tuple[str, int]]:
    """inode -> (remote IPv4 address, remote port) of the established TCP connections whose local
    port is ``local_port``, in this network namespace."""
    out = {}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            cols = line.split()
            local, remote, state, inode = cols[1], cols[2], cols[3], int(cols[9])
            if state != _ESTABLISHED or int(local.split(":")[1], 16) != local_port or inode == 0:
                continue
            addr_hex, port_hex = remote.split(":")
            addr = socket.inet_ntoa(int(addr_hex, 16).to_bytes(4, "little"))
            out[inode] = (addr, int(port_hex, 16))
    return out


def _socket_fds(pid: int) -> dict[int, int]:
    """inode -> fd number of every socket descriptor of ``pid`` (gone processes: none)."""
    out = {}
    d = f"/proc/{pid}/fd"
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for name in names:
        try:
            link = os.readlink(f"{d}/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out[int(link[8:-1])] = int(name)
    return out


def borrow(pid: int, fd: int) -> socket.socket:
    """A duplicate of ``pid``'s descriptor ``fd`` in this process, as a socket object."""
    pidfd = os.pidfd_open(pid)
    try:
        new = _libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0)
        if new < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"pidfd_getfd({pid}, {fd}): {os.strerror(err)}")
    finally:
        os.close(pidfd)
    return socket.socket(fileno=new)


def borrow_connections(pids: list[int], local_port: int, skip: set[int] | None = None
                       ) -> list[tuple[int, tuple[str, int], socket.socket]]:
    """(inode, (remote address, port), socket) of every established connection from
    ``local_port`` held by one of ``pids``, except the inodes in ``skip`` (already borrowed)."""
    conns = _established_inodes(local_port)
    out = []
    for pid in pids:
        for inode, fd in _socket_fds(pid).items():
            if inode in conns and (skip is None or inode not in skip):
                try:
                    out.append((inode, conns[inode], borrow(pid, fd)))
                except OSError as err:
                    if err.errno in (errno.ESRCH, errno.EBADF):
                        continue          # the process or the descriptor went meanwhile
                    raise
    return out
