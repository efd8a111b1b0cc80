"""Imports flow one way (parse → segment → execute → derive → present): no module below the
presentation imports it, not even inside a function, and no renderer imports ``Run`` (the
session) at run time; only ``tracing/present/__init__.py`` wires views to answer types."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BELOW = ("segmenter", "reasoning_udfs", "materialization", "models", "tracing")
PRESENT = ROOT / "tracing" / "present"


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports at run time (``if TYPE_CHECKING:`` blocks left out)."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING")
        for n in ast.walk(block)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def _modules(*folders: Path) -> list[Path]:
    return sorted(p for folder in folders for p in folder.rglob("*.py"))


@pytest.mark.parametrize("folder", BELOW)
def test_nothing_below_the_presentation_imports_it(folder: str) -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in _modules(ROOT / folder)
        if PRESENT not in path.parents and path != ROOT / "tracing" / "__init__.py"
        for line, name in _imports(path)
        if name.startswith("tracing.present") or name == "tracing.present"
    ]
    assert not wrong, "\n".join(wrong)


def test_renderers_do_not_import_the_session() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in _modules(PRESENT)
        if path.name != "__init__.py"
        for line, name in _imports(path)
        if name.startswith(("tracing.session", "tracing.Run", "tracing.LineageSession"))
    ]
    assert not wrong, "\n".join(wrong)
