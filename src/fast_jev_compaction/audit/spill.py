"""Spill entries: decision-log rows that could not be written in time, kept beside the database.

One small private JSON file per row, ``<db name>.spill-<stamp>-<random>.json`` in the database's
folder: ``{"compaction": {column: value}, "decisions": [{column: value}, ...]}``. One file per
entry because the mod's ``$.fs.write`` can only write whole files, and because a file created
under a temporary name and renamed appears whole or not at all. The next write to the log replays
every entry in its own transaction, keyed by the file's name, then deletes the files, so a replay
interrupted half-way never duplicates a row.

Stdlib only: the hook imports this on its hot path.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from ..private_files import write_private

SUFFIX = ".json"
# Far beyond any real entry (a compaction's decisions are a few hundred bytes each).
MAX_ENTRY_BYTES = 64 * 1024 * 1024
# An entry the mod is still writing may not parse yet; past this age an unreadable one is set aside.
UNREADABLE_GRACE_S = 60.0


def _prefix(db: Path) -> str:
    return f"{db.name}.spill-"


def pending(db: Path) -> list[Path]:
    """The spill entries beside ``db``, oldest first (names start with a time stamp in ms)."""
    prefix = _prefix(db)
    # A scan of the folder, not ``glob``: the hook asks on every write, and glob's import and
    # the pattern it compiles cost more than the scan.
    try:
        with os.scandir(db.parent) as entries:
            # Regular files only: a FIFO or a link (to /dev/zero, say) under such a name would
            # hang whatever read it.
            names = [
                entry.name for entry in entries
                if entry.name.startswith(prefix) and entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False)
            ]
    except OSError:  # no folder yet, or not readable: nothing to replay
        return []
    return sorted((db.parent / name for name in names), key=lambda p: (len(p.name), p.name))


def entry_id(db: Path, path: Path) -> str:
    """The replay key: the file name without the database prefix and the suffix."""
    return path.name[len(_prefix(db)) : -len(SUFFIX)]


def write(db: Path, compaction: dict[str, Any], decisions: list[dict[str, Any]]) -> Path:
    """Write one entry, private (0600), whole or not at all; return its path."""
    import secrets  # only when the log is busy: the hook's start does without it

    db.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Milliseconds first, as the mod names its entries, so both kinds replay in time order.
    name = f"{_prefix(db)}{time.time_ns() // 1_000_000}-{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
    final = db.parent / name
    body = json.dumps({"compaction": compaction, "decisions": decisions}, ensure_ascii=True)
    write_private(final, body.encode("ascii"))
    return final


def load(path: Path) -> dict[str, Any] | None:
    """The entry, or None when it cannot be read (yet), or is no regular file of a sane size."""
    try:
        # Not following a link, and not waiting for a FIFO's writer; then read only a regular file.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
                return None
            data = json.loads(handle.read(MAX_ENTRY_BYTES + 1).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("compaction"), dict):
        return None
    decisions = data.get("decisions", [])
    if not isinstance(decisions, list) or not all(isinstance(d, dict) for d in decisions):
        return None
    return {"compaction": data["compaction"], "decisions": decisions}


def set_aside(path: Path, *, only_if_older_than: float | None = None) -> None:
    """Rename an entry that can never be replayed, so it is kept for a human and not retried."""
    try:
        if only_if_older_than is not None and time.time() - path.stat().st_mtime < only_if_older_than:
            return
        path.replace(path.with_name(path.name + ".bad"))
    except OSError:
        pass


def remove(paths: list[Path]) -> None:
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
