"""The lines of a file that earlier outputs pointed at, for the digest of a later Read of it.

A search hit (``src/ledger.py:412:``), a compiler or linter error (``src/ledger.py:412:9``) or a
stack frame (``File "/srv/app/src/ledger.py", line 412``) names a line; when the file is read
afterwards, that line is the one the session read it for. The pointers are found by path and
line number, the path matched by its trailing parts (a relative path in a grep hit names the
file an absolute path reads).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import defaultdict
from typing import Iterator, Mapping, Sequence

from ..conversation.lexicon import READ, call_shape
from ..conversation.messages import ToolResult
from ..conversation.pairing import ToolCall

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


class Pointed(Mapping[str, frozenset[int]]):
    """By tool_use_id of each Read that earlier outputs pointed into, the line numbers they named
    (what ``digest(..., pointed=)`` takes). A Read's set is made when it is asked for: what is
    held is, per file read, the lines pointed into it in call order (one list, shared by every
    Read of that file) and, per Read, how many of them came before it. A set for every Read at
    once held the same lines over and over (each Read of a file has all the earlier ones')."""

    __slots__ = ("_reads",)

    def __init__(self, reads: dict[str, tuple[list[int], int]]) -> None:
        self._reads = reads

    def __getitem__(self, tool_use_id: str) -> frozenset[int]:
        lines, before = self._reads[tool_use_id]
        return frozenset(lines[:before])

    def __iter__(self) -> Iterator[str]:
        return iter(self._reads)

    def __len__(self) -> int:
        return len(self._reads)


def pointed_lines(calls: Sequence[ToolCall], results: Mapping[str, ToolResult]) -> Pointed:
    """The lines of its file that the outputs of the calls before it pointed at, for each Read
    (:class:`Pointed`); Reads nothing pointed into are left out."""
    reads = [
        (index, call.tool_use_id, shape.file)
        for index, call in enumerate(calls)
        if (shape := call_shape(call.tool, call.input)).kind == READ and shape.file
    ]
    if not reads:
        return Pointed({})
    names = {_name(path) for _, _, path in reads}
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
    # By path read, the lines pointed into that file and the index of the call pointing, in call order.
    into: dict[str, tuple[list[int], list[int]]] = {}
    pointed: dict[str, tuple[list[int], int]] = {}
    for at, tool_use_id, path in reads:
        if path not in into:
            found = [(line, index) for pointer, line, index in seen.get(_name(path), ()) if _same_file(pointer, path)]
            into[path] = ([line for line, _ in found], [index for _, index in found])
        lines, indices = into[path]
        before = bisect_left(indices, at)
        if before:
            pointed[tool_use_id] = (lines, before)
    return Pointed(pointed)
