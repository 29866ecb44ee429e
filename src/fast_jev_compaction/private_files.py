"""Files the plugin and the CLI create are the user's alone: folders 0700, files 0600, from creation on.

``hook.log`` holds prompt text and the archive holds tool output, so nothing is created readable
by others and then tightened (a reader could open it in between). The hook process also sets
the umask (``hooks/fast_jev_hook.py``) so that files made by libraries (SQLite's database, WAL
and shared-memory files) follow the same rule.

When the plugin data folder cannot be written, ``hook.log`` goes to a per-user folder in the
system temp directory that is refused unless it is a real folder (not a symlink) owned by this
user and closed to everyone else.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600
TEMP_PREFIX = "fast-jev-compaction"


class UnsafeFolderError(OSError):
    """A folder exists where a private one should be, but others could read or replace it."""


def make_private_dirs(path: Path) -> None:
    """``mkdir -p`` where every folder created is 0700 (``Path.mkdir`` would use 0777 & ~umask for parents)."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=FOLDER_MODE)
        except FileExistsError:
            pass
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is not a folder")


def open_private_append(path: Path) -> int:
    """An fd appending to ``path``, created 0600; a symlink in its place is refused."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)


def user_temp_dir() -> Path:
    """``<tmp>/fast-jev-compaction-<uid>``, made 0700 if missing; raises ``UnsafeFolderError``
    when it is a symlink, not a folder, someone else's, or open to group or others."""
    import tempfile  # only without a data folder: the hook's start does without it

    folder = Path(tempfile.gettempdir()) / f"{TEMP_PREFIX}-{os.getuid()}"
    try:
        folder.mkdir(mode=FOLDER_MODE)
    except FileExistsError:
        pass
    check_own_folder(folder, 0o077)
    return folder


def check_own_folder(folder: Path, open_bits: int = 0o022) -> None:
    """Raise ``UnsafeFolderError`` unless ``folder`` is a plain folder (not a symlink) of this
    user's that grants none of ``open_bits`` (by default: no one else may add or replace a file
    in it, so nothing found there was planted)."""
    info = folder.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UnsafeFolderError(f"{folder} is not a plain folder")
    if info.st_uid != os.getuid():
        raise UnsafeFolderError(f"{folder} belongs to another user")
    if info.st_mode & open_bits:
        raise UnsafeFolderError(f"{folder} is open to other users ({stat.filemode(info.st_mode)})")


def write_private(path: Path, data: bytes, *, replace: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file renamed into place), 0600 from
    creation; with ``replace=False`` an existing file is left as it is (written once)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if replace:
            os.replace(temporary, path)
        else:
            try:
                os.link(temporary, path)  # fails when the file is there: never overwritten
            except FileExistsError:
                pass
            temporary.unlink()
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
