"""The docs claim only what the code has: packages named in the package docstring exist, every
command has its section in docs/cli.md, and every `tcpdelay CMD ... --option` written in the
README or docs/ is an option of that command."""

import importlib
import re
from pathlib import Path

import click
import pytest

import tcpdelay
from tcpdelay.cli import COMMAND_MODULES, cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    out = {}
    for name in COMMAND_MODULES:
        cmd = cli.get_command(ctx, name)
        out[name] = cmd
        if isinstance(cmd, click.Group):
            out.update({f"{name} {sub}": c for sub, c in cmd.commands.items()})
    return out


def _options(cmd: click.Command) -> set[str]:
    opts = {"--help", "-h"}
    for p in cmd.params:
        opts |= set(p.opts) | set(p.secondary_opts)
    return opts


def test_every_subpackage_in_the_package_docstring_exists():
    named = re.findall(r"``(tcpdelay\.[a-z_]+)``", tcpdelay.__doc__)
    assert len(named) >= 8
    for mod in named:
        importlib.import_module(mod)


def test_every_command_has_its_section_in_cli_md():
    headings = [h for h in (ROOT / "docs" / "cli.md").read_text().splitlines() if h.startswith("## ")]
    for name in COMMAND_MODULES:
        assert any(f"`tcpdelay {name}" in h for h in headings), f"docs/cli.md has no section for tcpdelay {name}"


def test_no_command_claims_to_simulate():
    assert "simulat" not in (cli.help or "").lower()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_options_written_in_docs_exist(doc):
    commands = _commands()
    wrong = []
    for ln, line in enumerate(doc.read_text().splitlines(), 1):
        for m in re.finditer(r"tcpdelay ([a-z]+(?: [a-z]+)?)([^`|\n]*)", line):
            words = m.group(1)
            key = words if words in commands else words.split()[0]
            if key not in commands:
                continue
            for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", m.group(2)):
                if opt not in _options(commands[key]):
                    wrong.append(f"{doc.name}:{ln}: tcpdelay {key} has no {opt}")
    assert not wrong, "\n".join(wrong)
