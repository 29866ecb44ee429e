"""Fixtures for the e2e suite: the binary (installed on first use), a fake API, a throwaway HOME.

Each test gets its own HOME, project folder and fake server, and loads a copy of the
repository's plugin files with ``--plugin-dir``; the mod runs the hook with this interpreter
(which has the package installed) through ``FAST_JEV_PYTHON``, so no bootstrap is needed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest

from claude_harness import PLUGIN_FILES, PLUGIN_NAME, REPO, Claude, find_claude
from fake_anthropic import FakeAnthropic


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    path, reason = find_claude()
    if path is None:
        pytest.skip(f"e2e: {reason}")
    return path


@pytest.fixture(scope="session")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the plugin files, so nothing a session writes lands in the repository."""
    target = tmp_path_factory.mktemp("plugin") / PLUGIN_NAME
    target.mkdir()
    for name in PLUGIN_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copy2(source, target / name)
    return target


@pytest.fixture()
def fake_api(tmp_path: Path) -> Iterator[FakeAnthropic]:
    project = tmp_path / "project"
    project.mkdir()
    api = FakeAnthropic(log_path=tmp_path / "requests.jsonl", cwd=str(project)).start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture()
def claude(claude_bin: Path, plugin_dir: Path, fake_api: FakeAnthropic, tmp_path: Path) -> Claude:
    (tmp_path / "home").mkdir()
    # The "do the thing" scenario reads this file with the Read tool.
    (tmp_path / "project" / "big.txt").write_text("".join(f"data row {n}\n" for n in range(1, 2001)))
    return Claude(bin=claude_bin, root=tmp_path, plugin=plugin_dir, api=fake_api)
