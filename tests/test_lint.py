"""ruff and mypy, as configured in pyproject.toml, pass over the repository.

They run here so the README's one test command (which CI runs) also runs the linters."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_tool(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]' brings it)")
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )


def test_ruff_finds_nothing() -> None:
    done = run_tool("ruff", "check", "src", "tests", "hooks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing() -> None:
    done = run_tool("mypy")
    assert done.returncode == 0, done.stdout + done.stderr
