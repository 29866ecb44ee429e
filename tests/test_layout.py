"""The layout's promises, checked on the source: nothing imports upward.

The core (the package's top-level modules) never imports the edges (``hook``, ``commands``,
``jev``, ``audit``, ``evaluation``), and ``jev`` (the client and the server) never imports a
judge: the server is handed one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "fast_jev_compaction"
EDGES = ("hook", "commands", "jev", "audit", "evaluation")
# Top-level modules that are edges themselves: the CLI entry, the lazy package face, and the
# terminal tables the CLI and the audit print (they redact what they show through the audit).
CORE_EXCEPTIONS = {"cli.py", "__init__.py", "table.py"}


def imported_packages(path: Path) -> set[str]:
    """First-level subpackages of fast_jev_compaction that ``path`` imports (relative or absolute)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    depth = len(path.relative_to(PACKAGE).parts) - 1
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = module.split(".") if module else []
                if node.level - 1 < depth:
                    continue  # inside its own subpackage
                names = parts or [alias.name for alias in node.names]
                found.update(names[:1])
            elif module.startswith("fast_jev_compaction."):
                found.add(module.split(".")[1])
    return found


@pytest.mark.parametrize("path", sorted(p for p in PACKAGE.glob("*.py") if p.name not in CORE_EXCEPTIONS), ids=lambda p: p.name)
def test_the_core_never_imports_an_edge(path: Path) -> None:
    assert not imported_packages(path) & set(EDGES)


@pytest.mark.parametrize("path", sorted((PACKAGE / "jev").glob("*.py")), ids=lambda p: p.name)
def test_jev_never_imports_a_judge(path: Path) -> None:
    assert "judge" not in imported_packages(path)
