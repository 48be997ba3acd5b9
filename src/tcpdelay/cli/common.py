"""Shared pieces of the command line: the --json flag, output, parameter types, and the one
line every error becomes (:func:`guard`, :func:`error_line`)."""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any, Callable

import click
from rich.console import Console
from rich.table import Table

from tcpdelay.errors import EnvironmentNotSupported, TcpdelayError
from tcpdelay.jsonio import jsonable  # noqa: F401  (the commands print through it)

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object (documented keys) instead of text."
)

class FiniteFloatRange(click.FloatRange):
    """A FloatRange that refuses NaN and inf (click's lets them through) and says so plainly."""

    def convert(self, value, param, ctx):
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                self.fail(f"{value!r} is not a number", param, ctx)
        else:
            number = value
        if isinstance(number, float) and math.isnan(number):
            self.fail("NaN is not allowed", param, ctx)
        if isinstance(number, float) and math.isinf(number):
            self.fail(f"{number:g} is not allowed; give a finite number", param, ctx)
        return super().convert(value, param, ctx)


PROBABILITY = FiniteFloatRange(min=0.0, max=1.0, max_open=True)
POSITIVE = FiniteFloatRange(min=0.0, min_open=True)
NON_NEGATIVE = FiniteFloatRange(min=0.0)

class DirPath(click.Path):
    """A directory to read (a run or results directory): empty, an existing file, or (with
    ``must_exist``) a missing path is refused here with one line; what it holds is the
    command's to say."""

    def __init__(self, must_exist: bool = False) -> None:
        super().__init__(file_okay=False)
        self.name = "DIR"
        self.must_exist = must_exist

    def convert(self, value, param, ctx):
        import os

        text = os.fspath(value)
        if not text.strip():
            self.fail("empty path; give a directory", param, ctx)
        if self.must_exist and not os.path.exists(text):
            self.fail(f"{text} does not exist", param, ctx)
        if os.path.exists(text) and not os.path.isdir(text):
            self.fail(f"{text} is not a directory", param, ctx)
        return text


class WholeNumber(click.IntRange):
    """An integer option in ``[min, max]`` that says plainly what is wrong: ``two`` is not a
    whole number, ``1448.5`` is not whole, ``1e9`` is outside the range (a whole number written
    with an exponent, ``1e3``, is one)."""

    name = "integer"

    def _allowed(self) -> str:
        if self.max is None:
            return f"a whole number >= {self.min}"
        return f"a whole number from {self.min} to {self.max}"

    def convert(self, value, param, ctx):
        typed = value
        if isinstance(value, str):
            text = value.strip()
            try:
                number = int(text)
            except ValueError:
                try:
                    real = float(text)
                except ValueError:
                    self.fail(f"{value!r} is not a number; give {self._allowed()}", param, ctx)
                if math.isnan(real):
                    self.fail("NaN is not allowed", param, ctx)
                if math.isinf(real):
                    self.fail(f"{real:g} is not allowed; give {self._allowed()}", param, ctx)
                if real != int(real):
                    self.fail(f"{value} is not a whole number; give {self._allowed()}", param, ctx)
                number = int(real)
            value = number
        lo, hi = self.min, self.max
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.fail(f"{typed} is outside the range; give {self._allowed()}", param, ctx)
        return super().convert(value, param, ctx)


#: A TCP maximum segment size: Linux's smallest (TCP_MIN_MSS) to the largest in an IPv4 packet.
MSS_BYTES = WholeNumber(88, 65495)
#: A round-trip time or timeout the models take: above zero, at most an hour.
MAX_TIME_S = 3600.0
TIME_S = FiniteFloatRange(min=0.0, min_open=True, max=MAX_TIME_S)

PLOT_FORMATS = (".png", ".svg", ".pdf")
HTML_FORMATS = (".html", ".htm")


class OutFile(click.ParamType):
    """A file to write (``--plot``, ``--out``), checked before any work is done: its suffix names
    a format the writer writes, it is not a directory, and its folder exists: no folder is
    created, so a mistyped ``/nonexistent/dir/x.png`` is refused rather than made."""

    def __init__(self, formats: tuple[str, ...]) -> None:
        self.formats = formats
        self.name = "FILE" + "|".join(formats)

    def convert(self, value, param, ctx):
        import os

        text = os.fspath(value)
        allowed = ", ".join(self.formats)
        if not text:
            self.fail("empty path; give a file name ending in " + allowed, param, ctx)
        if os.path.isdir(text):
            self.fail(f"{text} is a directory; give a file name ending in {allowed}", param, ctx)
        if os.path.splitext(text)[1].lower() not in self.formats:
            self.fail(f"{text} must end in one of {allowed}", param, ctx)
        folder = os.path.dirname(os.path.abspath(text))
        if os.path.exists(folder) and not os.path.isdir(folder):
            self.fail(f"cannot write {text}: {folder} is not a directory", param, ctx)
        if not os.path.isdir(folder):
            self.fail(f"cannot write {text}: folder {folder} does not exist (create it first)", param, ctx)
        return text


class PlotPath(OutFile):
    """A figure file to write: .png, .svg or .pdf (see :class:`OutFile`)."""

    def __init__(self) -> None:
        super().__init__(PLOT_FORMATS)


def emit(result: dict, as_json: bool, human: Callable[[Console], None]) -> None:
    """Print ``result`` as JSON, or call ``human`` with a rich console."""
    if as_json:
        click.echo(json.dumps(jsonable(result), indent=2))
    else:
        human(Console())


def key_value_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for k, v in rows:
        table.add_row(k, v)
    return table


def fmt_s(seconds: float | None) -> str:
    """Seconds for people: s from 1 s, ms (one decimal) from 1 ms, µs and ns (three
    significant digits) below, so a sub-millisecond value never reads as "0.0 ms"; zero is
    "0.0 ms"."""
    if seconds is None or not math.isfinite(seconds):
        return "—" if seconds is None else ("∞" if seconds > 0 else str(seconds))
    if abs(seconds) >= 1:
        return f"{seconds:.3f} s"
    if seconds == 0 or abs(round(seconds * 1e3, 1)) >= 1:
        return f"{seconds * 1e3:.1f} ms"
    if abs(float(f"{seconds * 1e6:.3g}")) >= 1:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e9:.3g} ns"


def fmt_bps(bps: float | None) -> str:
    if bps is None or not math.isfinite(bps):
        return "—" if bps is None else "∞"
    for unit, scale in (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if abs(bps) >= scale:
            return f"{bps / scale:.3g} {unit}"
    return f"{bps:.3g} b/s"


# ---------------------------------------------------------------------------------------------
# Errors: one line, naming the command and the flag as typed.
#
#   tcpdelay: error: tcpdelay throughput: --rtt-s: NaN is not allowed
#
# Every command the group hands out is wrapped by :func:`guard`: before its body runs, every
# float it was given must be finite (click's FloatRange lets NaN and inf through) and no path
# empty; a
# TcpdelayError or a file error raised inside becomes a CommandError that knows the command,
# and a leading ``name:`` in the message (the library's parameter name, e.g. ``rtt_s:``) is
# rewritten to the flag the user typed (``--rtt-s:``).


class CommandError(TcpdelayError):
    """An error of one command, already worded for the user: ``str(err)`` is the whole line
    after ``tcpdelay: error: ``."""


def _param_label(param: click.Parameter) -> str:
    """How the user typed it: the long flag of an option, the metavar of an argument."""
    if isinstance(param, click.Option):
        longs = [o for o in param.opts if o.startswith("--")]
        return (longs or param.opts)[0]
    return param.human_readable_name


def _find_param(ctx: click.Context, name: str) -> click.Parameter | None:
    flag = "--" + name.replace("_", "-")
    for p in ctx.command.params:
        if p.name == name or flag in getattr(p, "opts", ()):
            return p
    return None


_LEADING_NAME = re.compile(r"^([A-Za-z][A-Za-z0-9_]*):\s")


def name_the_flag(ctx: click.Context, message: str) -> str:
    """Rewrite a leading ``name:`` that is one of the command's parameters to the flag as typed."""
    m = _LEADING_NAME.match(message)
    if m:
        param = _find_param(ctx, m.group(1))
        if param is not None:
            return _param_label(param) + message[len(m.group(1)):]
    return message


def command_error(ctx: click.Context, message: str) -> CommandError:
    return CommandError(f"{ctx.command_path}: {name_the_flag(ctx, ' '.join(str(message).split()))}")


def _non_finite(value) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN is not allowed" if math.isnan(value) else f"{value:g} is not allowed; give a finite number"
    if isinstance(value, (tuple, list)):
        for v in value:
            bad = _non_finite(v)
            if bad:
                return bad
    return None


def _empty_path(param: click.Parameter, value) -> str | None:
    if isinstance(param.type, (click.Path, OutFile)) and isinstance(value, str) and not value.strip():
        return "empty path; give a file or directory name"
    return None


def check_values(ctx: click.Context) -> None:
    """Every float parameter of the command is finite (NaN and inf are no one's input) and no
    path is empty (an empty string would quietly mean the current directory)."""
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        bad = _non_finite(value) or _empty_path(param, value)
        if bad:
            raise CommandError(f"{ctx.command_path}: {_param_label(param)}: {bad}")


def _file_error(ctx: click.Context, err: OSError) -> CommandError:
    """A file the command could not read or write: the path, and the flag it came from if any."""
    path = str(err.filename)
    what = err.strerror or str(err)
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if isinstance(value, str) and value and (path == value or path.startswith(value.rstrip("/") + "/")):
            return CommandError(f"{ctx.command_path}: {_param_label(param)}: {path}: {what}")
    return CommandError(f"{ctx.command_path}: {path}: {what}")


def _guarded(callback: Callable) -> Callable:
    @functools.wraps(callback)
    def run(*args, **kwargs):
        ctx = click.get_current_context()
        check_values(ctx)
        try:
            return callback(*args, **kwargs)
        except (CommandError, EnvironmentNotSupported):
            raise
        except TcpdelayError as err:
            raise command_error(ctx, str(err)) from err
        except OSError as err:
            if err.filename is None:
                raise
            raise _file_error(ctx, err) from err
    run._tcpdelay_guarded = True  # type: ignore[attr-defined]
    return run


def guard(command: click.Command) -> click.Command:
    """Wrap ``command`` (and a group's subcommands) so that its errors name it and the flag."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            guard(sub)
    if command.callback is not None and not getattr(command.callback, "_tcpdelay_guarded", False):
        command.callback = _guarded(command.callback)
    return command


def usage_error_line(err: click.UsageError) -> str:
    """click's own errors (a bad value, a missing option, no such command) in the same form."""
    message = " ".join(err.format_message().split())
    ctx = err.ctx
    if isinstance(err, click.BadParameter) and not isinstance(err, click.MissingParameter) \
            and err.param is not None:
        message = f"{_param_label(err.param)}: {' '.join(err.message.split())}"
    return f"{ctx.command_path}: {message}" if ctx is not None else message
