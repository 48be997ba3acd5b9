"""The one warning line of a command whose runs' testbed was itself late
(:mod:`tcpdelay.results.testbed_error`; docs/testbed.md, "When the testbed itself was late"),
on stderr so that ``--json`` stays one document; the JSON carries each run's section."""

from __future__ import annotations

import os

import click

from tcpdelay.results.testbed_error import Verdict, run_section, verdict, warning_line


def describe(run_dir: str | os.PathLike) -> dict:
    """A run's ``testbed_error`` for a command's JSON: its verdict's fields and the section
    (``section`` None and ``recorded`` false: not recorded)."""
    sec = run_section(run_dir)
    return {**verdict(sec, run_dir).to_dict(), "section": sec}


def warn(command: str, verdicts: list[Verdict]) -> None:
    """Print the warning line when any of ``verdicts`` is late; nothing otherwise."""
    line = warning_line(command, verdicts)
    if line:
        click.echo(line, err=True)


def as_verdict(described: dict) -> Verdict:
    """:func:`describe`'s dict back as a :class:`Verdict`."""
    return Verdict(**{k: v for k, v in described.items() if k != "section"})
