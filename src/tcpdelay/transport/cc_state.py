"""A tcpdelay BPF congestion control's own state, read from user space with bpf(2).

Every variant under bpf/cc/ publishes four 64-bit numbers per connection into the
socket-storage map ``tdcc_state`` (bpf/cc/tdcc.h, ``tdcc_publish``). A ``BPF_MAP_TYPE_SK_STORAGE``
map is looked up with a socket's file descriptor as the key. :class:`CcStateMap` opens the map
from its id (``BPF_MAP_GET_FD_BY_ID``) and reads a socket's entry (``BPF_MAP_LOOKUP_ELEM``),
with the raw syscall through :mod:`ctypes` (no libbpf needed). Opening a map by id needs
CAP_SYS_ADMIN (or CAP_BPF); the lookup itself is one syscall, a few microseconds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform

from tcpdelay.errors import ParameterError

#: bpf(2)'s syscall number per machine (include/uapi/asm-generic/unistd.h and arch tables).
_SYS_BPF = {"x86_64": 321, "aarch64": 280, "i686": 357, "armv7l": 386}

BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_GET_FD_BY_ID = 14
_ATTR_BYTES = 128   # more than the two commands' part of union bpf_attr; the rest stays zero

#: The values of one entry (struct tdcc_state: __u64 value[4]).
CC_STATE_VALUES = 4


class _MapGetFdById(ctypes.Structure):
    """union bpf_attr for BPF_*_GET_FD_BY_ID: map_id, next_id, open_flags."""
    _fields_ = [("map_id", ctypes.c_uint32), ("next_id", ctypes.c_uint32), ("open_flags", ctypes.c_uint32)]


class _MapElem(ctypes.Structure):
    """union bpf_attr for BPF_MAP_*_ELEM: map_fd, (pad), key, value, flags."""
    _fields_ = [("map_fd", ctypes.c_uint32), ("_pad", ctypes.c_uint32), ("key", ctypes.c_uint64),
                ("value", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.syscall.restype = ctypes.c_long
_NR_BPF = _SYS_BPF.get(platform.machine())


def _bpf_buf(cmd: int, buf) -> int:
    """bpf(cmd, buf, 128) on a ready ``union bpf_attr`` buffer; OSError on failure."""
    if _NR_BPF is None:
        raise OSError(errno.ENOSYS, f"bpf(2) syscall number unknown on {platform.machine()}")
    ret = _libc.syscall(_NR_BPF, cmd, buf, _ATTR_BYTES)
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(ret)


def _bpf(cmd: int, attr: ctypes.Structure) -> int:
    buf = ctypes.create_string_buffer(_ATTR_BYTES)
    ctypes.memmove(buf, ctypes.addressof(attr), ctypes.sizeof(attr))
    return _bpf_buf(cmd, buf)


class CcStateMap:
    """The ``tdcc_state`` map of a loaded congestion control, open by its id.

    ``read(fd)`` returns the four published values of the socket ``fd``, or ``None`` while the
    variant has published nothing for it. Close with :meth:`close` (or use ``with``).
    """

    def __init__(self, map_id: int):
        if not isinstance(map_id, int) or map_id <= 0:
            raise ParameterError(f"cc_state_map_id: {map_id!r} must be a positive map id")
        try:
            self.fd = _bpf(BPF_MAP_GET_FD_BY_ID, _MapGetFdById(map_id=map_id))
        except OSError as err:
            raise ParameterError(f"cc_state_map_id: BPF map {map_id} cannot be opened: {err.strerror}"
                                 " (it needs CAP_BPF/CAP_SYS_ADMIN and a loaded congestion control)") from None
        self.map_id = map_id
        self._key = ctypes.c_int(0)
        self._value = (ctypes.c_uint64 * CC_STATE_VALUES)()
        # the lookup's union bpf_attr, built once: each read sets the key and makes one syscall
        attr = _MapElem(map_fd=self.fd, key=ctypes.addressof(self._key), value=ctypes.addressof(self._value))
        self._buf = ctypes.create_string_buffer(_ATTR_BYTES)
        ctypes.memmove(self._buf, ctypes.addressof(attr), ctypes.sizeof(attr))

    def read(self, sock_fd: int) -> tuple[int, int, int, int] | None:
        """The socket's four values (unsigned 64-bit), ``None`` if it has no entry."""
        self._key.value = sock_fd
        if _libc.syscall(_NR_BPF, BPF_MAP_LOOKUP_ELEM, self._buf, _ATTR_BYTES) < 0:
            err = ctypes.get_errno()
            if err == errno.ENOENT:
                return None
            raise OSError(err, os.strerror(err))
        return tuple(self._value)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "CcStateMap":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["CcStateMap", "CC_STATE_VALUES"]
