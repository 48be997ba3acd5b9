"""Errors the command line turns into one line on stderr and exit status 2.

Library code raises these (never ``sys.exit``); :func:`tcpdelay.cli.main` catches them.
"""


class TcpdelayError(Exception):
    """Base class: an error a user can act on. ``str(err)`` is the whole message."""


class ParameterError(TcpdelayError, ValueError):
    """A parameter is outside its domain. The message says what is wrong and what is allowed."""


class EnvironmentNotSupported(TcpdelayError):
    """The machine lacks something the command needs (root, /dev/net/tun, a kernel feature)."""


class TestbedError(TcpdelayError):
    """Building or running the testbed failed (a command, the emulator, a setting read back)."""

    __test__ = False
