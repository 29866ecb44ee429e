"""Reading a Jev state: its entries, its calls (structured or one-line) and what became of them.

A state is what every judge gets (docs/ARCHITECTURE.md, "Jev state"): the goal, and history
entries whose calls are either structured (input JSON, maybe truncated, a result note and a
digest of the output) or one-line strings. This module turns one into a :class:`StateView`:
every call with its kind, target, re-run keys and digest, and the texts around it, so features
can be computed from what the state carries and nothing else.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from pydantic import ValidationError

from ..state.protocol import QUESTIONS_ADAPTER, STATE_ADAPTER, first_problem
from ..textutil import ELLIPSIS, js_json
from .features import _INCIDENTAL_INPUTS
from .lexicon import FILE_KINDS as _FILE_KINDS
from .lexicon import basename as _basename
from .lexicon import command_head as _command_head
from .lexicon import tool_kind as _tool_kind


class JudgeInputError(ValueError):
    """The state or the questions are not in the shape the Jev protocol defines."""


_CALL_NAME = re.compile(r"^(call|result)_(.+)$")
_CALL_INSTR_TOOL = re.compile(r"tool call (\S+) \(([^()]*)\)", re.IGNORECASE)
_RESULT_INSTR = re.compile(r"tool call (\S+) \(([^()]*?),\s*(\d+)\s*chars\)", re.IGNORECASE)
_RESULT_NOTE = re.compile(r"^\s*(ok|error)\b[,\s]*(\d+)?", re.IGNORECASE)
_ONE_LINE = re.compile(
    r"(?:^|(?<=\s))(t\d+|[^\s→]+)[ \t]+(\S+)(?:[ \t]+(.*?))?[ \t]*→[ \t]*(ok|error)[ \t]+(\d+)[ \t]*ch\b",
    re.IGNORECASE,
)

# Keys a one-line input may carry; splitting only at these keeps `KEY=VAL make` inside a command.
_KNOWN_KEYS = frozenset(
    """file_path path notebook_path command description pattern glob type output_mode offset limit
    old_string new_string replace_all content edits url prompt query timeout run_in_background
    subagent_type questions todos plan cell_id new_source edit_mode head_limit multiline
    allowed_domains blocked_domains cell_type shell_id bash_id task_id""".split()
)
_FREE_TEXT_KEYS = frozenset(
    {"command", "description", "prompt", "content", "old_string", "new_string", "query", "new_source", "plan"}
)
_ONE_LINE_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z_][A-Za-z0-9_]*)=")


def _strip_ellipsis(value: str) -> tuple[str, bool]:
    """A value cut by ``truncate`` ends in ``…``; keep the known prefix and remember the cut."""
    value = value.strip()
    if value.endswith(ELLIPSIS):
        return value[:-1].rstrip(), True
    return value, False


# --------------------------------------------------------------------------------------------
# Input parsing: JSON strings (maybe truncated), dicts, and one-line `key=value` renderings
# --------------------------------------------------------------------------------------------

_JSON_PAIR = re.compile(r'"([A-Za-z_][\w\-]*)"\s*:\s*("(?:[^"\\]|\\.)*(?:"|\\?$)|[^,{}\[\]"]+)')


def _decode_partial_string(raw: str) -> str:
    """Decode a JSON string token that may lack its closing quote (truncated input)."""
    body = raw[1:]
    if body.endswith('"') and not body.endswith('\\"'):
        body = body[:-1]
    elif body.endswith("\\"):
        body = body[:-1]
    try:
        return str(json.loads(f'"{body}"'))
    except ValueError:
        return body.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def _fields_from_json_text(text: str) -> dict[str, Any]:
    """Top-level fields of an input rendered as JSON, tolerating truncation."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    found: dict[str, Any] = {}
    for match in _JSON_PAIR.finditer(text):
        key, raw = match.group(1), match.group(2)
        if key in found:
            continue  # the first occurrence is the top-level one in practice
        if raw.startswith('"'):
            found[key] = _decode_partial_string(raw)
        else:
            found[key] = raw.strip()
    return found


def _fields_from_one_line(text: str) -> dict[str, Any]:
    """``file_path=/a limit={"limit":100}`` -> fields.

    Inside a free-text value (a command, a prompt) only a known key starts the next field, so
    ``command=FOO=1 make`` keeps ``FOO=1 make`` as the command.
    """
    cuts: list[tuple[int, int, str]] = []
    for match in _ONE_LINE_KEY.finditer(text):
        key = match.group(1)
        if cuts and cuts[-1][2] in _FREE_TEXT_KEYS and key not in _KNOWN_KEYS:
            continue
        cuts.append((match.start(), match.end(), key))
    fields: dict[str, Any] = {}
    for n, (_, value_start, key) in enumerate(cuts):
        value_end = cuts[n + 1][0] if n + 1 < len(cuts) else len(text)
        value = text[value_start:value_end].strip()
        if value.startswith("{"):
            # non-string values are rendered as the JSON of {"key": value}
            inner = _fields_from_json_text(value)
            if key in inner:
                fields.setdefault(key, inner[key])
                continue
        fields.setdefault(key, value)
    return fields


def _input_fields(raw: Any, one_line: bool = False) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items()}
    if not isinstance(raw, str):
        return {}
    if one_line:
        return _fields_from_one_line(raw)
    stripped = raw.strip()
    if stripped.startswith("{"):
        return _fields_from_json_text(stripped)
    return _fields_from_one_line(stripped)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return js_json(value)
    except (TypeError, ValueError):
        return str(value)




# --------------------------------------------------------------------------------------------
# Calls
# --------------------------------------------------------------------------------------------


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
        path, cut = _strip_ellipsis(path_value)
        call.file = PathRef(path, cut)
        offset, limit = fields.get("offset"), fields.get("limit")
        if offset not in (None, "") or limit not in (None, ""):
            call.range_key = f"{_as_text(offset)}:{_as_text(limit)}"
    command = fields.get("command")
    if call.kind == "test_build" and isinstance(command, str):
        call.head_key = _command_head(_normalize_space(_strip_ellipsis(command)[0]))
    if not input_cut:  # of an input cut short, what was cut may differ: no re-run is identical to it
        kept = {k: v for k, v in fields.items() if k not in _INCIDENTAL_INPUTS}
        call.rerun_key = f"{call.tool}:{_as_text(kept)}"


# --------------------------------------------------------------------------------------------
# The view of one state, built once and shared by every question about it
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    pos: int
    msg_index: int
    role: str
    text: str


@dataclass
class StateView:
    goal: str
    entries: list[Entry]
    calls: dict[str, StateCall]
    ordered: list[StateCall]
    last_index: int  # the last message's index, as far as the state tells
    file_calls_by_base: dict[str, list[StateCall]] = field(default_factory=dict)
    cut_file_calls: list[StateCall] = field(default_factory=list)
    rerun_last: dict[str, int] = field(default_factory=dict)  # key -> largest seq
    head_last: dict[str, int] = field(default_factory=dict)

    def later_same_file(self, call: StateCall) -> list[StateCall]:
        """Later reads and edits of the file ``call`` worked on, in order."""
        if call.file is None:
            return []
        target = call.file
        if target.cut:
            # a cut path has no reliable basename: compare against every file call
            pool = [c for group in self.file_calls_by_base.values() for c in group] + self.cut_file_calls
        else:
            pool = self.file_calls_by_base.get(target.base, []) + self.cut_file_calls
        later = [c for c in pool if c.seq > call.seq and c.file is not None and target.same_file(c.file)]
        return sorted(later, key=lambda c: c.seq)

    def later_read_of(self, call: StateCall) -> bool:
        # a later full read, or a re-read of the same range, replaces this output
        return any(
            other.kind == "read" and other.range_key in ("", call.range_key) for other in self.later_same_file(call)
        )

    def rerun_later(self, call: StateCall) -> bool:
        """An identical later call, or a later run of the same test suite."""
        if call.rerun_key and self.rerun_last.get(call.rerun_key, -1) > call.seq:
            return True
        return bool(call.head_key) and self.head_last.get(call.head_key, -1) > call.seq

def _entry_index(entry: Mapping[str, Any], position: int) -> int:
    value = entry.get("i")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return position
    return int(value)


def _parse_result_note(note: Any) -> tuple[int | None, bool]:
    if not isinstance(note, str):
        return None, False
    match = _RESULT_NOTE.match(note)
    if not match:
        return None, "error" in note.lower()
    chars = int(match.group(2)) if match.group(2) else None
    return chars, match.group(1).lower() == "error"


def read_state(state: Mapping[str, Any]) -> StateView:
    """The view of a validated state (:func:`validate_state`)."""
    goal = _as_text(state.get("goal", ""))
    history = state.get("history")
    raw_entries = [e for e in history if isinstance(e, Mapping)] if isinstance(history, list) else []

    entries: list[Entry] = []
    calls: dict[str, StateCall] = {}
    ordered: list[StateCall] = []
    last_index = 0
    for pos, raw_entry in enumerate(raw_entries):
        msg_index = _entry_index(raw_entry, pos)
        role = _as_text(raw_entry.get("role", ""))
        entries.append(Entry(pos, msg_index, role, _as_text(raw_entry.get("text", ""))))
        raw_calls = raw_entry.get("tool_calls")
        found = [c for raw in (raw_calls if isinstance(raw_calls, list) else []) for c in _calls_of(raw)]
        # A message with completed calls is followed by their results: the conversation goes on
        # at least one message past it.
        last_index = max(last_index, msg_index + 1 if found else msg_index)
        for call in found:
            call.seq, call.pos, call.msg_index = len(ordered), pos, msg_index
            ordered.append(call)
            calls.setdefault(call.id, call)

    view = StateView(goal=goal, entries=entries, calls=calls, ordered=ordered, last_index=last_index)
    for call in ordered:
        if call.file is not None:
            if call.file.cut:
                view.cut_file_calls.append(call)
            else:
                view.file_calls_by_base.setdefault(call.file.base, []).append(call)
        if call.rerun_key:
            view.rerun_last[call.rerun_key] = call.seq
        if call.head_key:
            view.head_last[call.head_key] = call.seq
    return view


def _calls_of(raw: Any) -> list[StateCall]:
    """One history `tool_calls` element -> its calls (placed by the caller)."""

    def made(call_id: str, tool: str, rendered: Any, one_line: bool, chars: int | None, is_error: bool,
             digest: str) -> StateCall:
        fields = _input_fields(rendered, one_line)
        cut = isinstance(rendered, str) and rendered.rstrip().endswith(ELLIPSIS)
        call = StateCall(id=call_id, tool=tool, kind=_tool_kind(tool, fields), seq=-1, pos=-1, msg_index=-1,
                         result_chars=chars, is_error=is_error, fields=fields, digest=digest)
        _describe_call(call, cut)
        return call

    if isinstance(raw, Mapping):
        chars, is_error = _parse_result_note(raw.get("result"))
        digest = raw.get("digest")
        return [made(_as_text(raw.get("id", "")).strip(), _as_text(raw.get("tool", "")).strip() or "unknown",
                     raw.get("input"), False, chars, is_error or raw.get("isError") is True,
                     digest if isinstance(digest, str) else "")]
    if isinstance(raw, str):
        return [
            made(line_id, line_tool, rendered or "", True, int(size), status.lower() == "error", "")
            for line_id, line_tool, rendered, status, size in (m.groups() for m in _ONE_LINE.finditer(raw))
        ]
    return []


# --------------------------------------------------------------------------------------------
# Questions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    name: str
    which: str  # "call" | "result" | ""
    call_id: str
    tool: str
    chars: int | None


def parse_question(name: str, question: Any) -> Question:
    instructions = question.get("instructions", "") if isinstance(question, Mapping) else ""
    instructions = instructions if isinstance(instructions, str) else ""
    which, call_id = "", ""
    match = _CALL_NAME.match(name)
    if match:
        which, call_id = match.group(1), match.group(2)
    tool, chars = "", None
    result_match = _RESULT_INSTR.search(instructions)
    if result_match:
        tool, chars = result_match.group(2).strip(), int(result_match.group(3))
        call_id = call_id or result_match.group(1)
        which = which or "result"
    else:
        call_match = _CALL_INSTR_TOOL.search(instructions)
        if call_match:
            tool = call_match.group(2).strip()
            call_id = call_id or call_match.group(1)
            which = which or "call"
    return Question(name=name, which=which, call_id=call_id, tool=tool, chars=chars)


def validate_state(state: Any) -> Mapping[str, Any]:
    """The compaction state as a mapping, checked against ``protocol.JevState``; a JSON string
    holding one is accepted too. The state is read as it came (the check's copy is let go)."""
    try:
        checked = STATE_ADAPTER.validate_python(state)
    except ValidationError as exc:
        raise JudgeInputError(first_problem(exc, "state")) from None
    return checked if isinstance(state, str) else state


def validate_questions(questions: Any) -> Mapping[str, Any]:
    """Named ``noul`` questions (``protocol.Questions``); anything else is an input error (the
    only type answered here)."""
    try:
        QUESTIONS_ADAPTER.validate_python(questions)
    except ValidationError as exc:
        raise JudgeInputError(first_problem(exc, "questions")) from None
    return questions
