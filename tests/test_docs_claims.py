"""The docs claim only what the code has: packages named in the package docstring exist, every
command has its section in docs/cli.md, every `tcpdelay CMD ... --option` written in the README
or docs/ (a synopsis continued on the next lines included, and every option in a command's
docs/cli.md section) is in that command's --help; what the docs say about backends (which exist,
which need root) matches the code; and what the docs and .gitignore say stays out of git is not
tracked."""

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import click
import pytest

import tcpdelay
from tcpdelay.cli import COMMAND_MODULES, cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: Every Markdown page that makes claims about the code or the repository.
PAGES = [*DOCS, ROOT / "results" / "README.md", ROOT / "experiments" / "README.md"]
PAGES = [p for p in PAGES if p.is_file()]


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
    """The options a user sees in ``tcpdelay CMD --help`` (a hidden one is not there)."""
    ctx = click.Context(cmd, info_name=cmd.name)
    return {"--help", "-h"} | set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", cmd.get_help(ctx)))


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
    lines = doc.read_text().splitlines()
    fenced = [False] * (len(lines) + 1)        # whether line i (0-based) is inside a ``` block
    inside = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            inside = not inside
        fenced[i] = inside
    for ln, line in enumerate(lines, 1):
        for m in re.finditer(r"tcpdelay ([a-z]+(?: [a-z]+)?)([^`|\n]*)", line):
            words = m.group(1)
            key = words if words in commands else words.split()[0]
            if key not in commands:
                continue
            shown = m.group(2)
            # a synopsis in a code block goes on in the indented lines below it
            for i in range(ln, len(lines) if fenced[ln - 1] else ln):
                more = lines[i]
                if not fenced[i] or not more.startswith(" ") or not more.strip() or "tcpdelay " in more:
                    break
                shown += " " + more.split("#")[0]
            for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", shown):
                if opt not in _options(commands[key]):
                    wrong.append(f"{doc.name}:{ln}: tcpdelay {key} has no {opt}")
    assert not wrong, "\n".join(wrong)


def _cli_md_sections() -> list[tuple[list[str], list[tuple[int, str]]]]:
    """docs/cli.md's command sections: the commands each heading names and its numbered lines."""
    out: list = []
    for ln, line in enumerate((ROOT / "docs" / "cli.md").read_text().splitlines(), 1):
        if line.startswith("## "):
            out.append((re.findall(r"`tcpdelay ([a-z]+)", line), []))
        elif out:
            out[-1][1].append((ln, line))
    return [s for s in out if s[0]]


def test_every_option_in_a_commands_cli_md_section_is_in_its_help():
    """An option written in a command's section of docs/cli.md is an option of that command (or
    of a command the same line names)."""
    commands = _commands()
    wrong = []
    for names, lines in _cli_md_sections():
        for ln, line in lines:
            here = names + [n for n in re.findall(r"tcpdelay ([a-z]+)", line) if n in commands]
            # a group's section documents its subcommands' options
            allowed = set().union(*(_options(c) for key, c in commands.items() if key.split()[0] in here))
            for opt in re.findall(r"`[^`]*?(?<![\w-])(--[a-z][a-z0-9-]*)", line):
                if opt not in allowed:
                    wrong.append(f"cli.md:{ln}: no {opt} in tcpdelay {'/'.join(here)} --help")
    assert not wrong, "\n".join(wrong)


def _units(text: str):
    """A page's claims: each table row, and each sentence of a paragraph or list item (lines
    joined), with the paragraph, row or item it is in."""
    for para in re.split(r"\n\s*\n|\n(?=\s*[-*] )", text):
        if para.lstrip().startswith("|"):
            yield from ((row, row) for row in para.splitlines())
        else:
            flat = " ".join(para.split())
            yield from ((sentence, flat) for sentence in re.split(r"(?<=[.])\s+(?=[A-Z`*(])", flat))


def _backend_names() -> dict[str, str]:
    """Each backend of the code, by name, and how the docs write it."""
    from tcpdelay.experiments.backends import BACKENDS

    spelled = {"ns3": r"ns-?3|simulation backend|simulat", "testbed": r"testbed"}
    return {name: spelled.get(name, re.escape(name)) for name in BACKENDS}


@pytest.mark.parametrize("doc", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_backend_that_exists_is_called_planned(doc):
    """A backend the code has (experiments.backends.BACKENDS) is not "planned", "not yet" there,
    and no backend is "the only one" while there are several."""
    wrong = []
    for sentence, _ in _units(doc.read_text()):
        if "backend" not in sentence.lower():
            continue
        future = re.search(r"\(planned\)|\bplanned (simulation )?backend|\bbackend is planned|\bnot yet (exist|there|"
                           r"available)|\bthe only one today\b|\bis the only (one|backend)\b", sentence, re.I)
        named = [b for b, pattern in _backend_names().items() if re.search(pattern, sentence, re.I)]
        if future and named:
            wrong.append(f"{doc.name}: {sentence[:160]}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("doc", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_what_needs_root_is_the_testbed(doc):
    """Only the testbed needs root (the ns-3 backend, --dry-run and report do not): a sentence
    saying `run` or `sweep` need root names the testbed, and, where it names ns-3 too, says that
    ns-3 does not."""
    from tcpdelay.cli.experiments import BACKEND_CHOICES

    assert "ns3" in BACKEND_CHOICES           # run and sweep have a backend that needs no root
    wrong = []
    for sentence, _ in _units(doc.read_text()):
        if re.search(r"\bneeds? root\b", sentence) and re.search(r"`(run|sweep)`|tcpdelay (run|sweep)", sentence):
            if "testbed" not in sentence or not re.search(r"ns-?3", sentence):
                wrong.append(f"{doc.name}: {sentence[:160]}")
    assert not wrong, "\n".join(wrong)


def _tracked(under: str) -> list[str]:
    return subprocess.run(["git", "-C", str(ROOT), "ls-files", under], capture_output=True, text=True,
                          check=True).stdout.split()


needs_git = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                               reason="what is tracked is known only in a git checkout")


@needs_git
def test_no_tracked_file_is_one_gitignore_leaves_out():
    """.gitignore says what stays out of git: no tracked file matches it (a file committed on
    purpose is let back in by a `!` line, so the ignore files say the truth)."""
    both = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--ignored", "--exclude-standard"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert not both, "tracked, yet .gitignore leaves it out: " + ", ".join(both[:20])


@needs_git
@pytest.mark.parametrize("doc", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_files_the_docs_say_stay_out_are_not_tracked(doc):
    """A file or directory a page says stays out of git ("stays out", "not committed") is not
    tracked under results/ — except in the result directories the same paragraph names."""
    tracked = _tracked("results")
    wrong = []
    for sentence, paragraph in _units(doc.read_text()):
        for clause in sentence.split(";"):
            said = re.search(r"\bstays? out\b|\bnot committed\b", clause, re.I)
            if not said:
                continue
            opened = clause.rfind("(", 0, said.start())
            if opened > clause.rfind(")", 0, said.start()):      # said inside parentheses: of what they hold
                closed = clause.find(")", said.end())
                clause = clause[opened:closed if closed > 0 else None]
            named_dirs = set(re.findall(r"`([\w.-]+)/`", paragraph))
            for name in re.findall(r"`([\w.-]+(?:/|\.[a-z]+))`", clause):
                part = name.rstrip("/")
                hits = [t for t in tracked if part in t.split("/")[2:] or t.split("/")[-1] == part]
                hits = [t for t in hits if t.split("/")[1] not in named_dirs]
                if hits:
                    wrong.append(f"{doc.name}: says {name} stays out, but git tracks {', '.join(hits[:3])}"
                                 + (f" and {len(hits) - 3} more" if len(hits) > 3 else ""))
    assert not wrong, "\n".join(wrong)
