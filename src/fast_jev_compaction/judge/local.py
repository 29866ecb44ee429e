"""LocalJudge: the embedded, offline judge used when no Jev key is configured.

It reads the very state and questions Jev would get and answers each ``noul`` question with a
logistic model over named, hand-weighted features. Jev never sees result bodies (upstream §9.1),
and neither does this judge; what it can see is the tool, the input target, the result size, the
error flag, the position of the call and what happened afterwards (re-reads, re-runs, edits of the
same file, later text naming the target). Output size alone ranks reuse well (kompact: AUC 0.878),
and "read again later" is kompact's label for "reproducible", so those carry the most weight.

Every probability is ``sigmoid(sum(contributions))`` where each contribution is
``weight * feature value``; :meth:`LocalJudge.explain` returns exactly those contributions.
"""

from __future__ import annotations

import bisect
import json
import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..asker import AskResult, Usage
from ..messages import SessionMessage
from ..pairing import Pairing, ToolCall
from ..textutil import ELLIPSIS, js_json
from ..tokens import estimate_tokens
from .lexicon import FILE_KINDS as _FILE_KINDS
from .lexicon import GENERIC_HEADS as _GENERIC_HEADS
from .lexicon import RERUNNABLE_KINDS as _RERUNNABLE_KINDS
from .lexicon import basename as _basename
from .lexicon import command_file_terms as _command_file_terms
from .lexicon import command_head as _command_head
from .lexicon import tool_kind as _tool_kind


class JudgeInputError(ValueError):
    """The state or the questions are not in the shape the Jev protocol defines."""


# --------------------------------------------------------------------------------------------
# Weights. Logits; a feature absent from a table contributes nothing to that question.
# Calibrated by hand so that, at the default 0.5 threshold, old/large/superseded reads drop and
# recent, small, failed, mentioned, mutating and decision calls stay.
# --------------------------------------------------------------------------------------------

CALL_WEIGHTS: Mapping[str, float] = {
    "bias": 0.0,
    # tool kind: what losing the record of the call costs
    "kind_read": -0.4,
    "kind_search": -0.6,
    "kind_fetch": -0.3,
    "kind_edit": 3.0,  # the record of a change is the change; never cheap to lose
    "kind_side_effect": 2.6,  # non-idempotent: cannot be re-run to find out it happened
    "kind_test_build": 0.4,
    "kind_inspect": -0.4,
    "kind_shell": 0.2,
    "kind_decision": 2.6,  # user answers and plan approvals are quoted later far above base rate
    "kind_agent": 1.0,
    "kind_todo": 0.4,
    "kind_other": 0.3,
    "size_log": -0.15,
    "is_error": 1.2,
    "recency": 2.0,
    "user_turns_after": -0.6,
    "superseded": -1.5,
    "stale_after_edit": -0.3,
    "code_changed_after": -0.2,
    "mentioned_later": 1.0,
    "mentioned_by_user": 0.5,
    "in_goal": 0.8,
    "pending_same_target": 0.8,
}

RESULT_WEIGHTS: Mapping[str, float] = {
    "bias": -0.3,
    # tool kind: how cheap and faithful a re-run is
    "kind_read": -0.6,
    "kind_search": -0.8,
    "kind_fetch": -0.3,
    "kind_edit": -0.8,  # the output only acknowledges the change the input already records
    "kind_side_effect": 1.2,  # its output (commit hash, deploy URL) cannot be had again
    "kind_test_build": 0.3,
    "kind_inspect": -0.5,
    "kind_shell": 0.0,
    "kind_decision": 2.6,
    "kind_agent": 1.0,  # re-running a sub-agent is slow and not reproducible
    "kind_todo": -0.8,
    "kind_other": 0.3,
    "size_log": -1.0,  # per decade above 1000 chars: large outputs cost the most to keep
    "tiny_result": 1.0,  # a result this small is not truncated anyway
    "is_error": 0.8,
    "recency": 2.0,
    "user_turns_after": -0.8,
    "superseded": -2.0,
    "stale_after_edit": -1.0,
    "code_changed_after": -0.5,
    "mentioned_later": 0.9,
    "mentioned_by_user": 0.5,
    "in_goal": 0.8,
    "pending_same_target": 0.8,
}

# Feature scales.
_RECENCY_HALF_LIFE = 20.0  # messages
_TINY_RESULT_CHARS = 420  # truncated_result_text leaves results up to head(300)+120 untouched
_USER_TURNS_SATURATION = 5
_ANALYSIS_CACHE_SIZE = 4

_CALL_NAME = re.compile(r"^(call|result)_(.+)$")
_CALL_INSTR_TOOL = re.compile(r"tool call (\S+) \(([^()]*)\)", re.IGNORECASE)
_RESULT_INSTR = re.compile(r"tool call (\S+) \(([^()]*?),\s*(\d+)\s*chars\)", re.IGNORECASE)
_RESULT_NOTE = re.compile(r"^\s*(ok|error)\b[,\s]*(\d+)?", re.IGNORECASE)
_ONE_LINE = re.compile(
    r"(?:^|(?<=\s))(t\d+|[^\s→]+)[ \t]+(\S+)(?:[ \t]+(.*?))?[ \t]*→[ \t]*(ok|error)[ \t]+(\d+)[ \t]*ch\b",
    re.IGNORECASE,
)
_WORD_RUN = re.compile(r"[A-Za-z0-9_]{4,}")

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



def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


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
# Call facts
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _PathRef:
    """A file target; ``cut`` when the rendered input was truncated inside the path."""

    path: str
    cut: bool

    @property
    def base(self) -> str:
        return "" if self.cut else _basename(self.path)

    def same_file(self, other: "_PathRef") -> bool:
        a, b = self.path, other.path
        if not a or not b:
            return False
        if not self.cut and not other.cut:
            return a == b or a.endswith("/" + b) or b.endswith("/" + a)
        if self.cut and other.cut:
            return a.startswith(b) or b.startswith(a)
        prefix, full = (a, b) if self.cut else (b, a)
        return full.startswith(prefix)


@dataclass
class _Call:
    id: str
    tool: str
    kind: str
    seq: int  # order of appearance across the history
    pos: int  # index of the history entry holding it
    msg_index: int  # the entry's `i` (message index)
    result_chars: int | None
    is_error: bool
    file: _PathRef | None = None
    range_key: str = ""
    rerun_key: str = ""  # identical key on a later call -> this one's output is redundant
    rerun_cut: bool = False
    head_key: str = ""  # test/build command head: a later run of the same suite supersedes
    terms: tuple[str, ...] = ()


def _normalize_space(text: str) -> str:
    return " ".join(text.split())


def _describe_call(call: _Call, fields: Mapping[str, Any]) -> None:
    """Fill targets, re-run keys and mention terms of ``call`` from its input fields."""
    terms: list[str] = []
    path_value = None
    for key in ("file_path", "notebook_path", "path"):
        value = fields.get(key)
        if isinstance(value, str) and value.strip():
            path_value = value
            break

    if call.kind in _FILE_KINDS and path_value is not None:
        path, cut = _strip_ellipsis(path_value)
        call.file = _PathRef(path, cut)
        base = call.file.base
        if len(base) >= 3:
            terms.append(base)
        offset, limit = fields.get("offset"), fields.get("limit")
        if offset not in (None, "") or limit not in (None, ""):
            call.range_key = f"{_as_text(offset)}:{_as_text(limit)}"
        if call.kind == "read":
            call.rerun_key = f"read:{path}:{call.range_key}"
            call.rerun_cut = cut
    elif call.kind in ("side_effect", "test_build", "inspect", "shell") and "command" in fields:
        command, cut = _strip_ellipsis(_as_text(fields.get("command")))
        normalized = _normalize_space(command)
        head = _command_head(normalized)
        if normalized:
            call.rerun_key = f"cmd:{normalized}"
            call.rerun_cut = cut
        if call.kind == "test_build" and head:
            call.head_key = head
        if len(head) >= 3 and head not in _GENERIC_HEADS:
            terms.append(head)
        terms.extend(_command_file_terms(normalized if not cut else normalized.rsplit(" ", 1)[0]))
    elif call.kind in ("search", "fetch"):
        parts = []
        for key in ("pattern", "glob", "query", "url", "path", "type", "output_mode"):
            value = fields.get(key)
            if value not in (None, ""):
                parts.append(f"{key}={_as_text(value)}")
        rendered = " ".join(parts) if parts else _as_text(dict(fields))
        rendered, cut = _strip_ellipsis(rendered)
        if rendered:
            call.rerun_key = f"{call.tool.lower()}:{rendered}"
            call.rerun_cut = cut
        for key in ("pattern", "query"):
            value = fields.get(key)
            if isinstance(value, str):
                runs = _WORD_RUN.findall(_strip_ellipsis(value)[0])
                if runs:
                    terms.append(max(runs, key=len))
        url = fields.get("url")
        if isinstance(url, str):
            url_path, url_cut = _strip_ellipsis(url)
            last = _basename(url_path.split("?", 1)[0])
            if not url_cut and len(last) >= 4:
                terms.append(last)
        if isinstance(path_value, str):
            base = _basename(_strip_ellipsis(path_value)[0])
            if len(base) >= 4 and not path_value.strip().endswith(ELLIPSIS):
                terms.append(base)
    elif call.kind == "todo":
        if call.tool.lower() == "todowrite":
            call.rerun_key = "todo"  # every TodoWrite replaces the whole list
    elif path_value is not None:
        base = _basename(_strip_ellipsis(path_value)[0])
        if len(base) >= 4 and not path_value.strip().endswith(ELLIPSIS):
            terms.append(base)

    seen: set[str] = set()
    cleaned: list[str] = []
    for term in terms:
        term = term.lower().strip()
        if len(term) >= 3 and term not in seen:
            seen.add(term)
            cleaned.append(term)
    call.terms = tuple(cleaned)


# --------------------------------------------------------------------------------------------
# The per-state analysis, built once and shared by every question about that state
# --------------------------------------------------------------------------------------------


@dataclass
class _Pending:
    file: _PathRef | None
    terms: tuple[str, ...]


@dataclass
class _Analysis:
    goal: str
    calls: dict[str, _Call]
    ordered: list[_Call]
    last_index: int
    # later-text search: all entry texts, lowercased, joined; offsets map hits back to entries
    blob: str
    starts: list[int]
    user_blob: str
    user_starts: list[int]
    user_turns_suffix: list[int]  # user entries with text at position >= p
    pending: list[_Pending]
    file_calls_by_base: dict[str, list[_Call]] = field(default_factory=dict)
    cut_file_calls: list[_Call] = field(default_factory=list)
    rerun_last: dict[str, int] = field(default_factory=dict)  # key -> largest seq
    cut_rerun_calls: list[_Call] = field(default_factory=list)
    head_last: dict[str, int] = field(default_factory=dict)
    last_edit_seq: int = -1
    # filled lazily; server threads may race on a key, but they store equal lists (GIL-atomic)
    term_hits: dict[tuple[str, bool], list[int]] = field(default_factory=dict)

    def later_edit_of(self, call: _Call) -> bool:
        return any(other.kind == "edit" for other in self._later_same_file(call))

    def later_read_of(self, call: _Call) -> bool:
        for other in self._later_same_file(call):
            # a later full read, or a re-read of the same range, replaces this output
            if other.kind == "read" and (not other.range_key or other.range_key == call.range_key):
                return True
        return False

    def _later_same_file(self, call: _Call) -> Iterable[_Call]:
        if call.file is None:
            return ()
        target = call.file
        if target.cut:
            # a cut path has no reliable basename: compare against every file call
            pool = [c for group in self.file_calls_by_base.values() for c in group] + self.cut_file_calls
        else:
            pool = self.file_calls_by_base.get(target.base, []) + self.cut_file_calls
        return [c for c in pool if c.seq > call.seq and c.file is not None and target.same_file(c.file)]

    def rerun_later(self, call: _Call) -> bool:
        if not call.rerun_key:
            return False
        if not call.rerun_cut and self.rerun_last.get(call.rerun_key, -1) > call.seq:
            return True
        if call.head_key and self.head_last.get(call.head_key, -1) > call.seq:
            return True
        if call.rerun_cut or self.cut_rerun_calls:
            for other in self.ordered[call.seq + 1 :]:
                if other.rerun_key and other.rerun_key != call.rerun_key and (
                    (call.rerun_cut and other.rerun_key.startswith(call.rerun_key))
                    or (other.rerun_cut and call.rerun_key.startswith(other.rerun_key))
                ):
                    return True
                if call.rerun_cut and other.rerun_key == call.rerun_key:
                    return True
        return False

    def mentions_after(self, term: str, pos: int, user_only: bool) -> int:
        """How many times ``term`` occurs in entry texts after history position ``pos``."""
        hits = self.term_hits.get((term, user_only))
        if hits is None:
            # once per term and state: every occurrence, mapped to the entry holding it
            blob, starts = (self.user_blob, self.user_starts) if user_only else (self.blob, self.starts)
            hits = []
            at = blob.find(term)
            while at != -1:
                hits.append(bisect.bisect_right(starts, at) - 1)
                at = blob.find(term, at + len(term))
            self.term_hits[(term, user_only)] = hits
        return len(hits) - bisect.bisect_right(hits, pos)


_SEPARATOR = "\n\x00\n"


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


def _analyse(state: Mapping[str, Any]) -> _Analysis:
    goal = _as_text(state.get("goal", "")).lower()
    history = state.get("history")
    entries = [e for e in history if isinstance(e, Mapping)] if isinstance(history, list) else []

    calls: dict[str, _Call] = {}
    ordered: list[_Call] = []
    pending: list[_Pending] = []
    texts: list[str] = []
    user_texts: list[str] = []
    user_turns: list[int] = []
    last_index = 0

    for pos, entry in enumerate(entries):
        msg_index = _entry_index(entry, pos)
        last_index = max(last_index, msg_index)
        role = entry.get("role")
        text = _as_text(entry.get("text", "")).lower()
        texts.append(text)
        is_user_text = role == "user" and bool(text.strip())
        user_texts.append(text if role == "user" else "")
        user_turns.append(1 if is_user_text else 0)

        raw_calls = entry.get("tool_calls")
        for raw in raw_calls if isinstance(raw_calls, list) else []:
            for call_id, tool, fields, chars, is_error in _calls_of(raw):
                call = _Call(
                    id=call_id,
                    tool=tool,
                    kind=_tool_kind(tool, fields),
                    seq=len(ordered),
                    pos=pos,
                    msg_index=msg_index,
                    result_chars=chars,
                    is_error=is_error,
                )
                _describe_call(call, fields)
                ordered.append(call)
                calls.setdefault(call_id, call)

        raw_pending = entry.get("pending_calls")
        for item in raw_pending if isinstance(raw_pending, list) else []:
            pending.append(_pending_of(item))

    def joined(parts: list[str]) -> tuple[str, list[int]]:
        starts: list[int] = []
        offset = 0
        for part in parts:
            starts.append(offset)
            offset += len(part) + len(_SEPARATOR)
        return _SEPARATOR.join(parts), starts

    blob, starts = joined(texts)
    user_blob, user_starts = joined(user_texts)
    suffix = [0] * (len(entries) + 1)
    for pos in range(len(entries) - 1, -1, -1):
        suffix[pos] = suffix[pos + 1] + user_turns[pos]

    analysis = _Analysis(
        goal=goal,
        calls=calls,
        ordered=ordered,
        last_index=last_index,
        blob=blob,
        starts=starts,
        user_blob=user_blob,
        user_starts=user_starts,
        user_turns_suffix=suffix,
        pending=pending,
    )
    for call in ordered:
        if call.file is not None:
            if call.file.cut:
                analysis.cut_file_calls.append(call)
            else:
                analysis.file_calls_by_base.setdefault(call.file.base, []).append(call)
        if call.rerun_key:
            if call.rerun_cut:
                analysis.cut_rerun_calls.append(call)
            else:
                analysis.rerun_last[call.rerun_key] = call.seq
        if call.head_key:
            analysis.head_last[call.head_key] = call.seq
        if call.kind == "edit":
            analysis.last_edit_seq = call.seq
    return analysis


def _calls_of(raw: Any) -> list[tuple[str, str, dict[str, Any], int | None, bool]]:
    """One history `tool_calls` element -> (id, tool, input fields, result chars, is_error)."""
    if isinstance(raw, Mapping):
        call_id = _as_text(raw.get("id", "")).strip()
        tool = _as_text(raw.get("tool", "")).strip() or "unknown"
        chars, is_error = _parse_result_note(raw.get("result"))
        if raw.get("isError") is True:
            is_error = True
        return [(call_id, tool, _input_fields(raw.get("input")), chars, is_error)]
    if isinstance(raw, str):
        found: list[tuple[str, str, dict[str, Any], int | None, bool]] = []
        for match in _ONE_LINE.finditer(raw):
            line_id, line_tool, rendered, status, size = match.groups()
            fields = _input_fields(rendered or "", one_line=True)
            found.append((line_id, line_tool, fields, int(size), status.lower() == "error"))
        return found
    return []


def _pending_of(item: Any) -> _Pending:
    if isinstance(item, Mapping):
        tool = _as_text(item.get("tool", "")).strip()
        fields = _input_fields(item.get("input"))
    elif isinstance(item, str):
        # a string rendering: "<tool> <input> → no result yet"
        tool, _, rest = item.strip().partition(" ")
        fields = _input_fields(rest.split("→", 1)[0].strip())
    else:
        return _Pending(None, ())
    probe = _Call(id="", tool=tool, kind=_tool_kind(tool, fields), seq=-1, pos=-1, msg_index=-1,
                  result_chars=None, is_error=False)
    _describe_call(probe, fields)
    file = probe.file
    if file is None:
        value = fields.get("file_path") or fields.get("notebook_path") or fields.get("path")
        if isinstance(value, str) and value.strip():
            file = _PathRef(*_strip_ellipsis(value))
    return _Pending(file, probe.terms)


# --------------------------------------------------------------------------------------------
# Features and the model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Question:
    name: str
    which: str  # "call" | "result" | ""
    call_id: str
    tool: str
    chars: int | None


def _parse_question(name: str, question: Any) -> _Question:
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
    return _Question(name=name, which=which, call_id=call_id, tool=tool, chars=chars)


def _features(analysis: _Analysis, call: _Call | None, question: _Question) -> dict[str, float]:
    """Named feature values for one call (``call`` is None when the state lacks it)."""
    values: dict[str, float] = {"bias": 1.0}
    if call is None:
        kind = _tool_kind(question.tool, {}) if question.tool else "other"
        if kind == "shell":
            kind = "other"  # a shell call whose command we cannot see
        values[f"kind_{kind}"] = 1.0
        chars = question.chars
    else:
        values[f"kind_{call.kind}"] = 1.0
        chars = question.chars if question.chars is not None else call.result_chars

    if chars is not None:
        values["size_log"] = max(-3.0, min(2.5, math.log10(chars + 1) - 3.0))
        if chars <= _TINY_RESULT_CHARS:
            values["tiny_result"] = 1.0
    if call is None:
        return values

    if call.is_error:
        values["is_error"] = 1.0
    age = max(0, analysis.last_index - call.msg_index)
    values["recency"] = 0.5 ** (age / _RECENCY_HALF_LIFE)
    turns = analysis.user_turns_suffix[call.pos + 1] if call.pos + 1 < len(analysis.user_turns_suffix) else 0
    if turns:
        values["user_turns_after"] = min(turns, _USER_TURNS_SATURATION) / _USER_TURNS_SATURATION

    if call.kind in _RERUNNABLE_KINDS and (
        analysis.rerun_later(call) or (call.kind == "read" and analysis.later_read_of(call))
    ):
        values["superseded"] = 1.0
    if call.kind == "read" and analysis.later_edit_of(call):
        values["stale_after_edit"] = 1.0
    if call.kind == "test_build" and "superseded" not in values and analysis.last_edit_seq > call.seq:
        values["code_changed_after"] = 1.0

    mentioned = by_user = in_goal = False
    for term in call.terms:
        if not mentioned and analysis.mentions_after(term, call.pos, user_only=False):
            mentioned = True
            by_user = by_user or analysis.mentions_after(term, call.pos, user_only=True) > 0
        if not in_goal and term in analysis.goal:
            in_goal = True
    if mentioned:
        values["mentioned_later"] = 1.0
    if by_user:
        values["mentioned_by_user"] = 1.0
    if in_goal:
        values["in_goal"] = 1.0

    terms = set(call.terms)
    for pend in analysis.pending:
        if (call.file is not None and pend.file is not None and call.file.same_file(pend.file)) or (
            terms and terms.intersection(pend.terms)
        ):
            values["pending_same_target"] = 1.0
            break
    return values


def _contributions(values: Mapping[str, float], weights: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in values.items():
        weight = weights.get(name, 0.0)
        if weight and value:
            out[name] = weight * value
    out.setdefault("bias", 0.0)
    return out


def validate_state(state: Any) -> Mapping[str, Any]:
    """The compaction state as a mapping; a JSON string holding one is accepted too."""
    if isinstance(state, str):
        try:
            state = json.loads(state)
        except ValueError as exc:
            raise JudgeInputError("state is a string but not JSON of a compaction state") from exc
    if not isinstance(state, Mapping):
        raise JudgeInputError("state must be an object {context, goal, history}")
    history = state.get("history")
    if not isinstance(history, list):
        raise JudgeInputError("state.history must be a list")
    for n, entry in enumerate(history):
        if not isinstance(entry, Mapping):
            raise JudgeInputError(f"state.history[{n}] must be an object")
        for key in ("tool_calls", "pending_calls"):
            if key in entry and not isinstance(entry[key], list):
                raise JudgeInputError(f"state.history[{n}].{key} must be a list")
    goal = state.get("goal", "")
    if goal is not None and not isinstance(goal, str):
        raise JudgeInputError("state.goal must be a string")
    return state


def validate_questions(questions: Any) -> Mapping[str, Any]:
    """Named ``noul`` questions; anything else is an input error (the only type answered here)."""
    if not isinstance(questions, Mapping) or not questions:
        raise JudgeInputError("questions must be a non-empty object of named questions")
    for name, question in questions.items():
        if not isinstance(name, str) or not name:
            raise JudgeInputError("question names must be non-empty strings")
        if not isinstance(question, Mapping):
            raise JudgeInputError(f"question {name!r} must be an object")
        if question.get("type") != "noul":
            raise JudgeInputError(f"question {name!r}: only type 'noul' is supported")
        if not isinstance(question.get("instructions"), str):
            raise JudgeInputError(f"question {name!r}: instructions must be a string")
    return questions


class LocalJudge:
    """Deterministic, offline judge over the Jev state; implements the ``JevAsker`` protocol."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, _Analysis] = OrderedDict()

    # -- in process ----------------------------------------------------------------------------

    def score_calls(
        self, messages: Sequence[SessionMessage], pairing: Pairing, goal: str, only: Iterable[ToolCall] | None = None
    ) -> dict[str, tuple[float, float]]:
        """``{tool_use_id: (keep_call, keep_result)}`` from the fitted model over the messages,
        for every completed call or for those in ``only``.

        In process the judge reads the outputs themselves (``judge/features.py``), not the Jev
        state's notes and digests: the compaction calls this instead of ``ask`` when it can.
        """
        from .model import score_calls

        return score_calls(messages, pairing, goal, only=only)

    # -- the JevAsker protocol -----------------------------------------------------------------

    async def ask(self, state: Any, questions: Mapping[str, Any]) -> AskResult:
        answers, usage = self.answer_with_usage(state, questions)
        return AskResult(answers=answers, usage=usage)

    # -- sync API -------------------------------------------------------------------------------

    def answer(self, state: Any, questions: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """Raw Jev answers: ``{name: {"type": "noul", "noul": p}}`` for every question."""
        return self.answer_with_usage(state, questions)[0]

    def answer_with_usage(self, state: Any, questions: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], Usage]:
        state_json, scored = self._score(state, questions)
        answers = {
            name: {"type": "noul", "noul": _sigmoid(sum(parts.values()))} for name, parts in scored.items()
        }
        usage = Usage(
            input_tokens=estimate_tokens(state_json) + estimate_tokens(js_json(dict(questions))),
            output_tokens=len(answers),
        )
        return answers, usage

    def explain(self, state: Any, questions: Mapping[str, Any]) -> dict[str, dict[str, float]]:
        """Per question, the named logit contributions; ``sigmoid(sum)`` is the answer."""
        return self._score(state, questions)[1]

    # -- internals ------------------------------------------------------------------------------

    def _analysis(self, state: Mapping[str, Any]) -> tuple[str, _Analysis]:
        key = js_json(state)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return key, cached
        analysis = _analyse(state)  # built outside the lock; a duplicate build is harmless
        with self._lock:
            self._cache[key] = analysis
            while len(self._cache) > _ANALYSIS_CACHE_SIZE:
                self._cache.popitem(last=False)
        return key, analysis

    def _score(self, state: Any, questions: Mapping[str, Any]) -> tuple[str, dict[str, dict[str, float]]]:
        mapping = validate_state(state)
        validate_questions(questions)
        state_json, analysis = self._analysis(mapping)
        scored: dict[str, dict[str, float]] = {}
        # the pair of a call is scored together so the call can be held at or above its result
        parsed = {name: _parse_question(name, q) for name, q in questions.items()}
        result_logits: dict[str, float] = {}
        for name, question in parsed.items():
            if question.which != "result":
                continue
            call = analysis.calls.get(question.call_id)
            parts = _contributions(_features(analysis, call, question), RESULT_WEIGHTS)
            scored[name] = parts
            result_logits[question.call_id] = sum(parts.values())
        for name, question in parsed.items():
            if question.which == "result":
                continue
            call = analysis.calls.get(question.call_id)
            if question.which == "call" or call is not None:
                parts = _contributions(_features(analysis, call, question), CALL_WEIGHTS)
                floor = result_logits.get(question.call_id)
                if floor is not None and sum(parts.values()) < floor:
                    # keeping an output without the call that produced it makes no sense
                    parts["covers_result"] = floor - sum(parts.values())
                scored[name] = parts
            else:
                # not a compaction question: no call to look at, so no evidence either way
                scored[name] = {"bias": 0.0}
        return state_json, {name: scored[name] for name in questions}
