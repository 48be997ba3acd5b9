"""Files written whole or not at all: every result file is written under a hidden temporary name
in its own directory and renamed into place (``os.replace``, atomic on POSIX), so a reader — or
a run killed mid-write — sees the old file or the new one, never half of one.

A write that fails (a full disk, a read-only directory) removes its temporary file and raises
:class:`OSError` whose ``filename`` is the file meant (the CLI prints it on one line), whatever
library did the writing (pyarrow's errors carry no file name).
"""

from __future__ import annotations

import contextlib
import errno as _errno
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Callable

__all__ = ["temporary_name", "write_atomic", "write_bytes_atomic", "write_text_atomic", "copy_atomic"]

_ERRNO = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)


def temporary_name(path: str | os.PathLike) -> Path:
    """The hidden temporary name ``path`` is written under before the rename: the writer's own
    (process and thread id in it), so two writers of one file — two test workers filling the same
    cache, say — never write into, rename or remove each other's temporary file; the last rename
    wins, and either file is whole."""
    p = Path(path)
    return p.with_name(f".{p.name}.{os.getpid()}-{threading.get_ident()}.tmp")


def _errno_of(err: BaseException) -> int | None:
    if isinstance(err, OSError) and err.errno is not None:
        return err.errno
    m = _ERRNO.search(str(err))   # pyarrow: "Error writing bytes to file. Detail: [errno 28] ..."
    return int(m.group(1)) if m else None


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` to write the file's content to a temporary path beside ``path``, then
    rename it to ``path``. On failure the temporary file is removed; an OS error (also one
    pyarrow wraps) is raised as :class:`OSError` naming ``path``. Returns ``path``."""
    path = Path(path)
    tmp = temporary_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        code = _errno_of(err)
        if isinstance(err, OSError) or code is not None:
            code = code if code is not None else _errno.EIO
            raise OSError(code, os.strerror(code), str(path)) from err
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """``path`` with ``text`` (UTF-8), whole or not at all."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """``path`` with ``data``, whole or not at all."""
    return write_atomic(path, lambda tmp: tmp.write_bytes(data))


def copy_atomic(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Copy ``src`` to ``dst`` (content and times), whole or not at all."""
    return write_atomic(dst, lambda tmp: shutil.copy2(src, tmp))
