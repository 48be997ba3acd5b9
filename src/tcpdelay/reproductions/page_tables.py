"""Rewrite the tables of a reproduction's page: each table follows a marker line (an HTML comment
such as ``<!-- table 4.4 ns-3 full -->``) and runs to the next blank line (a marker followed by a
blank line has no table yet: one is put in); :func:`rewrite_tables`
puts the given text there and leaves every other byte of the page as it was."""

from __future__ import annotations

from pathlib import Path

from tcpdelay.errors import ParameterError


def replace_tables(text: str, tables: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with the table after each marker replaced; the markers whose table changed.
    A marker missing from the page is a :class:`ParameterError` naming it."""
    changed = []
    for marker, table in tables.items():
        key = marker + "\n"
        if key not in text:
            raise ParameterError(f"the page has no marker {marker!r} for a table it should show")
        head, rest = text.split(key, 1)
        if rest.startswith("\n") or not rest:
            # a marker with no table yet (a blank line or the end of the page after it): the
            # table goes in before that blank line; running to the next blank line would
            # swallow the paragraph after it
            old, sep, tail = "", "\n", rest
        else:
            old, sep, tail = rest.partition("\n\n")
        if old != table:
            changed.append(marker)
        text = head + key + table + sep + tail
    return text, changed


def rewrite_tables(page: Path, tables: dict[str, str]) -> list[str]:
    """Rewrite ``page``'s tables (only when one changed); the markers whose table changed."""
    text = page.read_text()
    new, changed = replace_tables(text, tables)
    if new != text:
        page.write_text(new)
    return changed


def write_or_print(page: Path, tables: dict[str, str], *, write: bool, root: Path) -> None:
    """What a page's table script does with its tables: with ``write``, rewrite them in ``page``
    and say how many changed (``page`` named relative to ``root``); else print each under its
    marker."""
    if write:
        changed = rewrite_tables(page, tables)
        print(f"{page.relative_to(root)}: {len(changed)} table(s) rewritten")
    else:
        for marker, text in tables.items():
            print(marker, text, "", sep="\n")

