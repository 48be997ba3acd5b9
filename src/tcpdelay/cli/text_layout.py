"""Text that fits the terminal: titles and notes wrapped between phrases, never inside one, and
tables narrow enough for 80 columns (rich draws 80 when the output is not a terminal).

A title such as ``Latency: 100000 B (69 segments), RTT 100 ms, loss 0.02, T0 0.3 s, w1 10`` used
to be a rich table title, wrapped at the table's width wherever a space fell (``w1`` / ``10``);
:func:`print_title` breaks it only after a phrase's ``,`` or ``;``.
"""

from __future__ import annotations

import re
import textwrap

from rich import box
from rich.console import Console
from rich.table import Table

from tcpdelay.cli.common import key_value_table

__all__ = ["compact_table", "needs_wrapping", "phrase_lines", "print_key_values", "print_title",
           "print_wrapped", "print_written"]

#: Where a line may break, best first: after a phrase's semicolon, comma, colon.
_PHRASE_ENDS = ";,:"
#: A number and the unit after it ("11 %", "20 ms"): never broken apart (held together by
#: :data:`_GLUE` while the text is cut, a character neither textwrap nor a phrase end splits at).
_UNIT = re.compile(r"(\d) (%|[kMG]?b/s|[kMG]?B|ms|µs|ns|s|min|h|packets?|segments?)(?![\w/])")
_GLUE = "\x00"


def _split_after(text: str, mark: str) -> list[str]:
    """``text`` cut after each ``mark`` followed by a space, outside parentheses."""
    pieces, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "([") - (ch in ")]")
        if ch == mark and depth <= 0 and text[i + 1:i + 2] == " ":
            pieces.append(text[start:i + 1])
            start = i + 2
    pieces.append(text[start:])
    return [p for p in pieces if p]


def phrase_lines(text: str, width: int, level: int = 0) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken between phrases: after a ``;``
    where that is enough, else also after a ``,``, then a ``:``; a phrase longer than a line is
    broken between words."""
    width = max(width, 20)
    text = " ".join(text.split())
    if level == 0 and _UNIT.search(text):   # a number and its unit stay on one line ("11 %")
        return [line.replace(_GLUE, " ") for line in phrase_lines(_UNIT.sub(rf"\1{_GLUE}\2", text), width)]
    if len(text) <= width:
        return [text] if text else []
    if level == len(_PHRASE_ENDS):
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
    lines: list[str] = []
    line = ""
    for phrase in _split_after(text, _PHRASE_ENDS[level]):
        candidate = f"{line} {phrase}" if line else phrase
        if len(candidate) <= width:
            line = candidate
            continue
        if line:
            lines.append(line)
        *full, line = phrase_lines(phrase, width, level + 1) or [""]
        lines.extend(full)
    if line:
        lines.append(line)
    return lines


def print_wrapped(console: Console, text: str, style: str | None = None) -> None:
    """``text`` (no markup) in lines broken between phrases at the console's width."""
    for line in phrase_lines(text, console.width):
        console.print(line, style=style, markup=False, highlight=False, soft_wrap=True)


def print_written(console: Console, what: str, path) -> None:
    """``<what> written to <path>`` on one line, never broken (a path is copied whole)."""
    console.print(f"{what} written to {path}", markup=False, highlight=False, soft_wrap=True)


def print_title(console: Console, text: str) -> None:
    """A table's title, above it, broken between phrases."""
    print_wrapped(console, text, style="italic")


def print_key_values(console: Console, title: str, rows: list[tuple[str, str]]) -> None:
    """A title and a two-column table of names and values."""
    print_title(console, title)
    console.print(key_value_table(None, rows))


def compact_table() -> Table:
    """A table without borders (a rule under the header only) and two spaces between columns;
    ``end_section=True`` on a row leaves a blank line after it."""
    return Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)


def needs_wrapping(headers: list[str], rows: list[list[str]], width: int) -> bool:
    """Whether a :func:`compact_table` of these cells is wider than ``width`` on one line each."""
    widths = [max([len(h)] + [len(str(r[i])) for r in rows]) for i, h in enumerate(headers)]
    return sum(widths) + 2 * (len(widths) - 1) > width
