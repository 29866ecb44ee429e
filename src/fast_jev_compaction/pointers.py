"""The lines of a file that earlier outputs pointed at, for the digest of a later Read of it.

A search hit (``src/ledger.py:412:``), a compiler or linter error (``src/ledger.py:412:9``) or a
stack frame (``File "/srv/app/src/ledger.py", line 412``) names a line; when the file is read
afterwards, that line is the one the session read it for. The pointers are found by path and
line number, the path matched by its trailing parts (a relative path in a grep hit names the
file an absolute path reads).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Mapping, Sequence

from .lexicon import READ, call_shape
from .messages import ToolResult
from .pairing import ToolCall

# A pointer: a path (a run of path characters, never starting inside a longer run) followed by
# ":<line>" or '", line <line>'. One pass over an output finds them all, whatever files were read.
_PATH = r"[A-Za-z0-9_.~/\\-]"
_POINTER = re.compile(rf"(?<!{_PATH})({_PATH}+)(?::|\", line )(\d{{1,7}})\b")
# An output is searched this far for pointers: the far end of a huge output (a log, a dump)
# points at nothing the session read for.
POINTER_SCAN_CHARS = 200_000


def _name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _same_file(pointer: str, read: str) -> bool:
    """Whether ``pointer`` names the file at ``read``: the one path ends with the other, at a
    separator."""
    pointer, read = pointer.replace("\\", "/").removeprefix("./"), read.replace("\\", "/")
    shorter, longer = sorted((pointer, read), key=len)
    return longer == shorter or longer.endswith("/" + shorter)


def pointed_lines(calls: Sequence[ToolCall], results: Mapping[str, ToolResult]) -> dict[str, frozenset[int]]:
    """By tool_use_id of each Read, the line numbers of its file that the outputs of the calls
    before it pointed at (what ``digest(..., pointed=)`` takes); Reads nothing pointed into are
    left out."""
    reads = [(call, shape.file) for call in calls if (shape := call_shape(call.tool, call.input)).kind == READ and shape.file]
    if not reads:
        return {}
    names = {_name(path) for _, path in reads}
    # By file name, each pointer (path, line) and the index of the call whose output holds it.
    seen: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for index, call in enumerate(calls):
        result = results.get(call.tool_use_id)
        if result is None:
            continue
        for match in _POINTER.finditer(result.text, 0, POINTER_SCAN_CHARS):
            path = match[1]
            name = _name(path)
            if name in names:
                seen[name].append((path, int(match[2]), index))
    position = {call.tool_use_id: index for index, call in enumerate(calls)}
    pointed: dict[str, frozenset[int]] = {}
    for call, path in reads:
        at = position[call.tool_use_id]
        lines = frozenset(line for pointer, line, index in seen.get(_name(path), ()) if index < at and _same_file(pointer, path))
        if lines:
            pointed[call.tool_use_id] = lines
    return pointed
