"""Cut tool output is saved under the plugin data folder, and the truncation note points there.

Paths are decided before the compaction (a pure mapping the core puts into its notes); the
files are written after it, only for the results that were actually cut. If a write fails the
notes are rebuilt without paths, so a note never points at a file that is not there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from ..messages import SessionMessage
from .private_files import FILE_MODE, make_private_dirs

ARCHIVE_DIR = "archive"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name)[:128] or "unknown"


def archive_paths(data: Path, session_id: str | None, messages: Sequence[SessionMessage]) -> dict[str, str]:
    """Where each call's full result would be saved: ``<data>/archive/<session>/<tool_use_id>.txt``."""
    folder = data / ARCHIVE_DIR / _safe(session_id or "unknown-session")
    return {
        result.tool_use_id: str(folder / f"{_safe(result.tool_use_id)}.txt")
        for message in messages
        for result in message.toolResults or ()
    }


def save_results(
    messages: Sequence[SessionMessage], cut_ids: set[str], paths: dict[str, str]
) -> None:
    """Write the full text of every cut result (atomically, readable by the user only)."""
    for message in messages:
        for result in message.toolResults or ():
            if result.tool_use_id not in cut_ids:
                continue
            target = Path(paths[result.tool_use_id])
            make_private_dirs(target.parent)
            temporary = target.with_suffix(f".{os.getpid()}.tmp")
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
            # A lone surrogate (output cut mid-emoji) has no UTF-8 bytes: it is saved as \udXXX.
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
                handle.write(result.text)
            os.replace(temporary, target)
