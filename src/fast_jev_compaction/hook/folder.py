"""The plugin data folder the hook writes to: the event's, else ``CLAUDE_PLUGIN_DATA``.

A folder that is relative, empty, or cannot name a file is treated as absent.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from ..decide.archive import on_disk


def _usable_folder(candidate: str | None) -> bool:
    # Relative would mean "under whatever the cwd is": the user's project.
    if not candidate or not candidate.strip() or not os.path.isabs(candidate):
        return False
    try:
        os.fsencode(candidate)  # a NUL or an unencodable surrogate cannot name a file
    except (UnicodeError, ValueError):
        return False
    return "\x00" not in candidate


def _named(text: str | None) -> str | None:
    try:
        return on_disk(text) if text else None
    except UnicodeError:  # a lone surrogate no file's bytes decode to
        return None


def data_dir(event_data: str | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """The plugin data folder: the event's, then CLAUDE_PLUGIN_DATA; None when neither is usable.

    The event's is JSON text, the UTF-8 of the folder's bytes: it names the folder by those
    bytes whatever this process's locale encodes names with (the environment's is bytes already).
    """
    env = os.environ if env is None else env
    for candidate in (_named(event_data), env.get("CLAUDE_PLUGIN_DATA")):
        if _usable_folder(candidate):
            return Path(candidate)  # type: ignore[arg-type]
    return None
