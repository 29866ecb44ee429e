"""Where cut outputs are saved: a content-addressed folder of plain text files (and the images
and documents of rebuilt results, :mod:`.hook.media`).

A file's name is a hash of the output it holds, so identical outputs are stored once, a name
cannot collide with another output or escape the folder, and a file is written once and never
overwritten: whatever later passes do, every marker's path still holds its original.

``archive_path`` is pure (the core puts the path into its markers); ``write_archive`` is the
I/O edge that the hook and the CLI call after a compaction.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Any, Mapping

from ..private_files import check_own_folder, make_private_dirs, write_private

SUFFIX = ".txt"
# The images and documents the Read tool shows as they are, by media type, with the extension
# their saved file takes; anything else is described, not saved.
EXTENSIONS: Mapping[str, str] = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "application/pdf": ".pdf",
}
# Enough of a SHA-256 to make an accidental collision impossible in practice, short enough to read.
NAME_HEX = 32
# What this module names: a hash and an extension. Only such files are ever pruned.
_ARCHIVED = re.compile(rf"[0-9a-f]{{{NAME_HEX}}}\.[a-z0-9]{{1,5}}")
# The temporary file a write of one makes (private_files.write_private); a kill mid-write leaves it.
_WRITING = re.compile(rf"\.[0-9a-f]{{{NAME_HEX}}}\.[a-z0-9]{{1,5}}\.\d+\.tmp")
# A write takes milliseconds: a temporary file this old was left by a process that died.
STALE_WRITE_S = 3600.0


def encoded(text: str) -> bytes:
    # Lone surrogates (an output cut mid-emoji) have no UTF-8 form; replacing them keeps the file
    # readable by the Read tool, and the hash is taken over exactly the bytes written.
    return text.encode("utf-8", errors="replace")


def base64_bytes(data: Any) -> bytes | None:
    """The bytes of an image's or a document's base64 ``data``; None when it is not valid base64."""
    if not isinstance(data, str) or not data:
        return None
    import base64  # only a session with an image or a document decodes one
    import binascii

    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def on_disk(path: str) -> str:
    """The name the file system knows a marker's ``path`` by. A marker states a path as the
    UTF-8 text of its bytes, the bytes the Read tool encodes it back to; this process's locale
    may encode names otherwise (ISO-8859-1, ASCII), and would then name other bytes."""
    return os.fsdecode(path.encode("utf-8", "surrogateescape"))


def as_marked(path: str | os.PathLike[str]) -> str:
    """A path on disk as a marker states it: its bytes read as UTF-8 (:func:`on_disk` undone)."""
    return os.fsencode(path).decode("utf-8", "surrogateescape")


def archive_name(content: str | bytes, suffix: str = SUFFIX) -> str:
    """The file's name: a hash of the bytes written, and ``suffix`` (``.txt`` for an output's text)."""
    data = content if isinstance(content, bytes) else encoded(content)
    return sha256(data).hexdigest()[:NAME_HEX] + suffix


def archive_path(directory: str, content: str | bytes, suffix: str = SUFFIX) -> str:
    return os.path.join(directory, archive_name(content, suffix))


def archived(directory: str, path: str) -> bytes | None:
    """The bytes saved at ``path`` when it is a file this module wrote in ``directory``: named by
    a hash of what it holds, directly in that folder, a regular file that still holds it; None
    otherwise (a path a tool output or a record made up to pass for a marker's)."""
    folder, name = os.path.split(path)
    if not _ARCHIVED.fullmatch(name) or os.path.normpath(folder) != os.path.normpath(directory):
        return None
    try:
        info = os.lstat(on_disk(path))
        if not stat.S_ISREG(info.st_mode):
            return None
        data = Path(on_disk(path)).read_bytes()
    except OSError:
        return None
    return data if archive_name(data, name[NAME_HEX:]) == name else None


@dataclass
class ArchiveReport:
    """How many archive files one write made, found already there, or removed to bound the folder."""

    written: int = 0
    reused: int = 0
    removed: int = 0


def write_archive(files: Mapping[str, str | bytes], *, max_bytes: int | None = None, max_age_days: float | None = None) -> ArchiveReport:
    """Write each ``path -> text or bytes`` not already there (private, atomic); then bound the
    folder(s). Each path is as a marker states it (:func:`on_disk`).

    Raises OSError when a file cannot be written, so the caller can fall back to notes without
    a path; a folder that cannot be pruned is left as it is.
    """
    report = ArchiveReport()
    folders: set[Path] = set()
    for path, text in files.items():
        target = Path(on_disk(path))
        if target.parent not in folders:
            make_private_dirs(target.parent)
            # A marker will name this folder's files: one that others can write to could hold a
            # file planted under an output's name.
            check_own_folder(target.parent)
            folders.add(target.parent)
        try:
            info = target.lstat()
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISREG(info.st_mode):
            # Same name, same content: refresh its age so pruning keeps what is still pointed at.
            os.utime(target, follow_symlinks=False)
            report.reused += 1
            continue
        if info is not None:  # a symlink or another non-file under an output's name: never ours
            target.unlink()
        write_private(target, text if isinstance(text, bytes) else encoded(text), replace=False)
        report.written += 1
    if max_bytes is not None or max_age_days is not None:
        for folder in folders:
            report.removed += prune(folder, max_bytes=max_bytes, max_age_days=max_age_days, keep={on_disk(path) for path in files})
    return report


def prune(folder: Path, *, max_bytes: int | None, max_age_days: float | None, keep: set[str] = frozenset()) -> int:  # type: ignore[assignment]
    """Remove archived files past an age, then the oldest ones past a total size, never ``keep``;
    and what killed writes left behind."""
    now = time.time()
    removed = 0
    try:
        entries = []
        for entry in os.scandir(folder):
            if not entry.is_file(follow_symlinks=False):
                continue
            if _ARCHIVED.fullmatch(entry.name):
                info = entry.stat(follow_symlinks=False)
                entries.append((info.st_mtime, info.st_size, entry.path))
            elif _WRITING.fullmatch(entry.name) and now - entry.stat(follow_symlinks=False).st_mtime > STALE_WRITE_S:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed += 1
    except OSError:
        return removed
    entries.sort()
    total = sum(size for _, size, _ in entries)
    for mtime, size, path in entries:
        too_old = max_age_days is not None and now - mtime > max_age_days * 86400
        too_big = max_bytes is not None and total > max_bytes
        if not (too_old or too_big) or path in keep:
            continue
        try:
            os.unlink(path)
        except OSError:
            continue
        total -= size
        removed += 1
    return removed
