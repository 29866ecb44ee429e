"""A replace answer too large for the host's stdout cap, handed to the mod as a private file.

``$.process.run`` keeps the first 4 MiB of the hook's stdout, and ``$.fs.read`` reads at most
4 MiB at a time, by byte ranges (docs/ARCHITECTURE.md, hook protocol). An answer whose messages
do not fit stdout writes them to ``<pluginData>/answers/answer-*.json`` (0600 in a 0700 folder)
one message at a time, as JSON with every non-ASCII character escaped, so that byte and
character offsets agree and no range cuts a character; stdout then names the file and its size.
The mod reads it by ranges and empties it; files older than ``STALE_AFTER_S`` (one the mod never
read, an emptied one) are removed on later runs.

Stdlib only: the hook imports this on its start.
"""

from __future__ import annotations

import codecs
import os
import time
from pathlib import Path
from typing import Any, Iterable

from ..conversation.stored import json_pieces, piece_text
from ..private_files import FILE_MODE, check_own_folder, make_private_dirs

ANSWERS_DIR = "answers"
PREFIX = "answer-"
SUFFIX = ".json"
# Long past any read: the mod reads the file as soon as the hook has exited.
STALE_AFTER_S = 3600.0
_BUFFER_BYTES = 1 << 20
_JSON_ESCAPES = "fast-jev-json-escapes"


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    """A codec error handler: each non-ASCII character as a JSON escape (astral ones as a
    surrogate pair). It only meets characters inside JSON strings, where escapes are valid."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    escaped = []
    for char in error.object[error.start : error.end]:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            escaped.append(f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}")
        else:
            escaped.append(f"\\u{code:04x}")
    return "".join(escaped), error.end


codecs.register_error(_JSON_ESCAPES, _json_escapes)


def ascii_json(value: Any) -> bytes:
    """``js_json(value)`` as ASCII bytes: ``JSON.parse`` reads back the same value."""
    return b"".join(piece_text(piece).encode("ascii", _JSON_ESCAPES) for piece in json_pieces(value))


def write_messages(folder: Path, messages: Iterable[dict[str, Any]]) -> tuple[Path, int]:
    """Write the messages as one JSON array to a new private file under ``folder/answers``;
    its path and size in bytes. A failure leaves no file behind."""
    import secrets  # only for an answer this large: the hook's start does without it

    directory = folder / ANSWERS_DIR
    make_private_dirs(directory)
    check_own_folder(directory)  # a symlink planted in its place would take the answer elsewhere
    path = directory / f"{PREFIX}{time.time_ns() // 1_000_000}-{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    size = 0
    try:
        with os.fdopen(fd, "wb", buffering=_BUFFER_BYTES) as handle:
            handle.write(b"[")
            for count, message in enumerate(messages):
                if count:
                    handle.write(b",")
                data = ascii_json(message)
                handle.write(data)
                size += len(data) + (1 if count else 0)
            handle.write(b"]")
            size += 2
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path, size


def remove_stale(directory: Path, now: float | None = None) -> None:
    """Remove answer files last written more than ``STALE_AFTER_S`` ago; quietly, file by file."""
    cutoff = (time.time() if now is None else now) - STALE_AFTER_S
    try:
        check_own_folder(directory)  # a symlink in its place: another folder's files are not ours
        entries = list(os.scandir(directory))
    except OSError:  # no answers folder yet (or not ours): nothing to remove
        return
    for entry in entries:
        if not (entry.name.startswith(PREFIX) and entry.name.endswith(SUFFIX)):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                os.unlink(entry.path)
        except OSError:  # another hook removed it first
            continue
