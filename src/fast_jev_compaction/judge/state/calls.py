"""The calls a state carries, structured or one-line: each with its kind, file target, re-run keys,
result note and digest."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ...textutil import ELLIPSIS
from ..features import _INCIDENTAL_INPUTS
from ..lexicon import FILE_KINDS as _FILE_KINDS
from ..lexicon import basename as _basename
from ..lexicon import command_head as _command_head
from ..lexicon import tool_kind as _tool_kind
from .inputs import as_text, input_fields, strip_ellipsis

_RESULT_NOTE = re.compile(r"^\s*(ok|error)\b[,\s]*(\d+)?", re.IGNORECASE)
_ONE_LINE = re.compile(
    r"(?:^|(?<=\s))(t\d+|[^\s→]+)[ \t]+(\S+)(?:[ \t]+(.*?))?[ \t]*→[ \t]*(ok|error)[ \t]+(\d+)[ \t]*ch\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class PathRef:
    """A file target; ``cut`` when the rendered input was truncated inside the path."""

    path: str
    cut: bool

    @property
    def base(self) -> str:
        return "" if self.cut else _basename(self.path)

    def same_file(self, other: "PathRef") -> bool:
        a, b = self.path, other.path
        if not a or not b:
            return False
        if not self.cut and not other.cut:
            return a == b
        if self.cut and other.cut:
            return a.startswith(b) or b.startswith(a)
        prefix, full = (a, b) if self.cut else (b, a)
        return full.startswith(prefix)


@dataclass
class StateCall:
    id: str
    tool: str
    kind: str
    seq: int  # order of appearance across the history
    pos: int  # index of the history entry holding it
    msg_index: int  # the entry's `i` (message index)
    result_chars: int | None
    is_error: bool
    fields: dict[str, Any]  # the input as far as the state shows it
    digest: str = ""  # the output's digest, when the state carries one
    file: PathRef | None = None
    range_key: str = ""
    rerun_key: str = ""  # identical key on a later call -> an identical re-run
    head_key: str = ""  # test/build command head: a later run of the same suite supersedes


def _normalize_space(text: str) -> str:
    return " ".join(text.split())


def _describe_call(call: StateCall, input_cut: bool) -> None:
    """Fill the target and the re-run keys of ``call`` from its input fields, as
    ``features.call_target`` does from the whole input."""
    fields = call.fields
    path_value = None
    for key in ("file_path", "notebook_path", "path"):
        value = fields.get(key)
        if isinstance(value, str) and value.strip():
            path_value = value
            break
    if call.kind in _FILE_KINDS and path_value is not None:
        path, cut = strip_ellipsis(path_value)
        call.file = PathRef(path, cut)
        offset, limit = fields.get("offset"), fields.get("limit")
        if offset not in (None, "") or limit not in (None, ""):
            call.range_key = f"{as_text(offset)}:{as_text(limit)}"
    command = fields.get("command")
    if call.kind == "test_build" and isinstance(command, str):
        call.head_key = _command_head(_normalize_space(strip_ellipsis(command)[0]))
    if not input_cut:  # of an input cut short, what was cut may differ: no re-run is identical to it
        kept = {k: v for k, v in fields.items() if k not in _INCIDENTAL_INPUTS}
        call.rerun_key = f"{call.tool}:{as_text(kept)}"


def _parse_result_note(note: Any) -> tuple[int | None, bool]:
    if not isinstance(note, str):
        return None, False
    match = _RESULT_NOTE.match(note)
    if not match:
        return None, "error" in note.lower()
    chars = int(match.group(2)) if match.group(2) else None
    return chars, match.group(1).lower() == "error"


def calls_of(raw: Any) -> list[StateCall]:
    """One history `tool_calls` element -> its calls (placed by the caller)."""

    def made(call_id: str, tool: str, rendered: Any, one_line: bool, chars: int | None, is_error: bool,
             digest: str) -> StateCall:
        fields = input_fields(rendered, one_line)
        cut = isinstance(rendered, str) and rendered.rstrip().endswith(ELLIPSIS)
        call = StateCall(id=call_id, tool=tool, kind=_tool_kind(tool, fields), seq=-1, pos=-1, msg_index=-1,
                         result_chars=chars, is_error=is_error, fields=fields, digest=digest)
        _describe_call(call, cut)
        return call

    if isinstance(raw, Mapping):
        chars, is_error = _parse_result_note(raw.get("result"))
        digest = raw.get("digest")
        return [made(as_text(raw.get("id", "")).strip(), as_text(raw.get("tool", "")).strip() or "unknown",
                     raw.get("input"), False, chars, is_error or raw.get("isError") is True,
                     digest if isinstance(digest, str) else "")]
    if isinstance(raw, str):
        return [
            made(line_id, line_tool, rendered or "", True, int(size), status.lower() == "error", "")
            for line_id, line_tool, rendered, status, size in (m.groups() for m in _ONE_LINE.finditer(raw))
        ]
    return []
