"""Shared test fixtures: where the read-only corpus lives, and the hook's plugin data folder."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS} (it sits beside the repository as shared/corpus)")
    return CORPUS


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "plugin-data"
