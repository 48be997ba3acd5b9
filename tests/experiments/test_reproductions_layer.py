"""The reproductions' place among the floors (docs/architecture.md): they read results/,
metrics/, experiments/ and model/, never report/ or cli/, and no module below them imports them
(only the command line does)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tcpdelay"


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_the_reproductions_import_nothing_above_them():
    files = sorted((SRC / "reproductions").glob("*.py"))
    assert len(files) >= 7
    for f in files:
        bad = {m for m in _imports(f) if m.startswith(("tcpdelay.cli", "tcpdelay.report"))}
        assert not bad, (f.name, bad)


def test_nothing_below_the_command_line_imports_the_reproductions():
    for f in SRC.rglob("*.py"):
        rel = f.relative_to(SRC).parts
        if rel[0] in ("reproductions", "cli"):
            continue
        bad = {m for m in _imports(f) if m.startswith("tcpdelay.reproductions")}
        assert not bad, (str(f.relative_to(SRC)), bad)
