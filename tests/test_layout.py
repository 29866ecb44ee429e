"""The layout's promises, checked on the source: folders read as the pipeline, nothing imports upward.

The core is the package's top-level modules, the pipeline's step folders (``conversation``,
``state``, ``decide``) and the ``redaction`` folder they share; it never imports the edges
(``hook``, ``commands``, ``jev``, ``audit``, ``evaluation``). A step never imports a later one,
except that building the state may recognise the markers a pass wrote. ``jev`` (the client and
the server) never imports a judge: the server is handed one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "fast_jev_compaction"
EDGES = ("hook", "commands", "jev", "audit", "evaluation")
STEPS = ("conversation", "state", "decide")
# Folders of the core that every step and edge may use: a top-level module grown into a folder.
SHARED = ("redaction",)
# The CLI entry and the lazy package face are edges themselves.
CORE_EXCEPTIONS = {"cli.py", "__init__.py"}


def imported_packages(path: Path) -> set[str]:
    """First-level subpackages or modules of fast_jev_compaction that ``path`` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    depth = len(path.relative_to(PACKAGE).parts) - 1
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                if node.level - 1 < depth:
                    continue  # inside its own subpackage
                parts = module.split(".") if module else []
                names = parts or [alias.name for alias in node.names]
                found.update(names[:1])
            elif module.startswith("fast_jev_compaction."):
                found.add(module.split(".")[1])
    return found


def core_modules() -> list[Path]:
    top = [p for p in PACKAGE.glob("*.py") if p.name not in CORE_EXCEPTIONS]
    # Every level: a module grown into a folder inside a step (conversation/transcript/) is core too.
    return sorted(top + [p for folder in STEPS + SHARED for p in (PACKAGE / folder).rglob("*.py")])


def step_imports(step: str) -> set[str]:
    """The other steps that modules of ``step`` import, relative imports included."""
    found: set[str] = set()
    for path in (PACKAGE / step).rglob("*.py"):
        depth = len(path.relative_to(PACKAGE).parts) - 1  # a relative import this many levels up reaches the top
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level == depth + 1:
                    found.add(module.split(".")[0] if module else "")
                elif module.startswith("fast_jev_compaction."):
                    found.add(module.split(".")[1])
    return found & set(STEPS) - {step}


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_the_core_never_imports_an_edge(path: Path) -> None:
    assert not imported_packages(path) & set(EDGES)


def test_a_step_never_imports_a_later_one() -> None:
    assert step_imports("conversation") == set()
    assert step_imports("decide") == {"conversation"}
    # The state leaves out the lead line a pass wrote (``decide.markers``), and is built from the
    # conversation.
    assert step_imports("state") == {"conversation", "decide"}


def test_the_top_level_holds_the_flow_and_a_few_shared_modules() -> None:
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top == {"__init__", "cli", "compaction", "ladder", "give_back", "options", "errors", "stats",
                   "textutil", "private_files"}


def folders() -> list[str]:
    """Every folder of the package, nested ones included (``conversation/transcript``)."""
    return sorted(p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*/__init__.py"))


@pytest.mark.parametrize("folder", folders())
def test_each_folder_says_its_step_in_its_docstring(folder: str) -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text(encoding="utf-8")))
    assert doc and doc.splitlines()[0].strip().endswith((".", ":"))


@pytest.mark.parametrize("path", sorted((PACKAGE / "jev").glob("*.py")), ids=lambda p: p.name)
def test_jev_never_imports_a_judge(path: Path) -> None:
    assert "judge" not in imported_packages(path)


def test_the_architecture_tree_names_every_folder_and_core_module() -> None:
    text = (PACKAGE.parents[1] / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    tree = text.split("```")[1]
    names = {folder.rsplit("/", 1)[-1] for folder in folders()}
    assert {name for name in names if f"  {name}/" not in tree} == set()
    named = {p.name for p in core_modules() + [PACKAGE / "cli.py"] if p.name != "__init__.py"}
    assert {name for name in named if f" {name} " not in tree} == set()
