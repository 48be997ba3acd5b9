"""The validation's prose, kept in ``texts.md`` beside this module (package data): one named
section per text block of the page and of the interpretation, filled in with ``str.format``."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

#: The file of the texts, in this package.
TEXTS_FILE = "texts.md"

_HEADING = re.compile(r"^## (\S+)\s*$")


def parse_texts(markdown: str) -> dict[str, str]:
    """``{name: paragraph}`` of a texts file: each ``## name`` line opens a section that runs to
    the next; its non-empty lines joined with single spaces are the paragraph. What comes before
    the first section (the file's own explanation) is not a text."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in markdown.splitlines():
        m = _HEADING.match(line)
        if m:
            if m.group(1) in sections:
                raise ValueError(f"{TEXTS_FILE}: section {m.group(1)!r} appears twice")
            current = sections[m.group(1)] = []
        elif current is not None and line.strip():
            current.append(line.strip())
    return {name: " ".join(lines) for name, lines in sections.items()}


@cache
def _texts() -> dict[str, str]:
    return parse_texts(resources.files(__package__).joinpath(TEXTS_FILE).read_text(encoding="utf-8"))


def text(name: str, **fields) -> str:
    """The paragraph ``name`` of :data:`TEXTS_FILE` with its ``{field}`` places filled in
    (KeyError for an unknown section or a field not given)."""
    return _texts()[name].format(**fields)


def names() -> list[str]:
    """The names of the sections, in the file's order."""
    return list(_texts())
