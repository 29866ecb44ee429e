"""Named features of every completed tool call, from what is known when the compaction runs.

Everything here reads the messages handed to the compaction and nothing else: "later" always
means later within those messages, never after them. Features read the result bodies (size,
error lines, ids, overlap with the goal and the latest prompt, reuse so far), the tool's kind
and target, and what happened to that target afterwards (a re-read, an identical re-run, an edit
not followed by a re-read).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate
from typing import Iterable, Mapping, Sequence

from ..conversation.messages import SessionMessage
from ..conversation.pairing import Pairing, ToolCall
from ..state.goal import prompt_text
from ..textutil import js_json
from .lexicon import basename, command_head, tool_kind
from .reuse import ReuseIndex, ascii_words, build_reuse_index, long_ids, word_set

KINDS = (
    "read", "search", "fetch", "edit", "side_effect", "test_build", "inspect", "shell",
    "decision", "agent", "todo", "other",
)
FEATURE_NAMES: tuple[str, ...] = (
    "size_log",
    "tiny",
    *(f"kind_{kind}" for kind in KINDS),
    "is_error",
    "age_fraction",
    "calls_after_fraction",
    "recency",
    "prompts_after",
    "superseded",
    "edited_unread",
    "reused",
    "reused_log",
    "reuse_recency",
    "later_text_overlap",
    "goal_overlap",
    "prompt_overlap",
    "target_mentioned_later",
    "error_lines",
    "ids_log",
)

# Input fields that do not change what a call does: runs differing only in these are identical.
_INCIDENTAL_INPUTS = frozenset({"description", "timeout", "run_in_background"})
# Kinds whose second run is a second change (or answer), never a copy of the first output.
_CHANGES = frozenset({"edit", "side_effect", "decision", "agent"})
_HALF_LIFE_MESSAGES = 20.0
_PROMPTS_SATURATION = 5
# rebuild.truncated_result_text leaves results up to its 300-char head plus a 120-char margin alone
_TINY_CHARS = 420
_ERROR_WORDS = r"\b(?:error|exception|traceback|failed|failure|fatal|panic|assert(?:ion)?|denied|not found)\b"
_ERROR_WORD = re.compile(_ERROR_WORDS, re.IGNORECASE)
# The same words in a lower-cased text, and where each can start: only a text holding one of
# these stems is searched, and only where one starts. Lower-casing keeps every position, word
# boundary and ASCII letter except for four non-ASCII letters that IGNORECASE also matches to
# ASCII ones (İ ı ſ K): a text holding one of those is searched as it is.
_ERROR_WORD_LOWER = re.compile(_ERROR_WORDS)
_ERROR_STEMS = ("error", "exception", "traceback", "fail", "fatal", "panic", "assert", "denied", "not found")
_FOLDS_TO_ASCII = re.compile("[\u0130\u0131\u017f\u212a]")
_TERM = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_STOP_TERMS = frozenset(
    """this that with from have will what when where which there their they them then than into
    your about would could should been were also just like make sure need only some more most very
    file files code line lines please here each other using used true false none null self return
    function const import export class string value data test tests""".split()
)


@dataclass(frozen=True, slots=True)
class CallTarget:
    """What a call worked on, as far as "the same target" goes."""

    kind: str
    path: str = ""  # file target of a read or an edit
    range: str = ""  # offset:limit of a partial read
    # identical key on a later call = an identical re-run: the hash of the tool and its input as
    # JSON, not the JSON itself (a copy of every input, a Write's whole content); two different
    # inputs sharing a 64-bit hash within one process is astronomically unlikely. None for a read
    # or a change, which an identical call never replaces (:func:`replaces`): their inputs, a
    # Write's whole content among them, are not rendered for nothing.
    rerun: int | None = None
    head: str = ""  # test/build command head: a later run of the same suite replaces this one


def call_target(call: ToolCall) -> CallTarget:
    kind = tool_kind(call.tool, call.input)
    path = ""
    for key in ("file_path", "notebook_path", "path"):
        value = call.input.get(key)
        if isinstance(value, str) and value.strip():
            path = value.strip()
            break
    offset, limit = call.input.get("offset"), call.input.get("limit")
    span = f"{offset}:{limit}" if offset not in (None, "") or limit not in (None, "") else ""
    head = ""
    command = call.input.get("command")
    if kind == "test_build" and isinstance(command, str):
        head = command_head(" ".join(command.split()))
    return CallTarget(
        kind=kind,
        path=path if kind in ("read", "edit") else "",
        range=span,
        rerun=None
        if kind == "read" or kind in _CHANGES
        else hash(f"{call.tool}:{js_json({k: v for k, v in call.input.items() if k not in _INCIDENTAL_INPUTS})}"),
        head=head,
    )


def replaces(later: CallTarget, earlier: CallTarget) -> bool:
    """Whether ``later`` reproduces ``earlier``'s output: a re-read, an identical or newer run."""
    if earlier.kind == "read":
        return later.kind == "read" and later.path == earlier.path and later.range in ("", earlier.range)
    if earlier.kind in _CHANGES:
        return False  # a second run is a second change, not a copy of the first output
    if later.rerun == earlier.rerun:
        return True
    return bool(earlier.head) and later.head == earlier.head


def result_text(messages: Sequence[SessionMessage], call: ToolCall) -> str:
    for result in messages[call.result_index].toolResults or ():
        if result.tool_use_id == call.tool_use_id:
            return result.text
    return ""


def terms(text: str) -> set[str]:
    """Identifier-like words of four letters or more, lower-cased, common words left out."""
    if text.isascii():
        # Lower-casing ASCII moves no match: the text is lower-cased once, not term by term.
        return set(_TERM.findall(text.lower())) - _STOP_TERMS
    return set(map(str.lower, _TERM.findall(text))) - _STOP_TERMS


def error_lines(text: str) -> int:
    """How many lines hold an error word."""
    if text.isascii() or _FOLDS_TO_ASCII.search(text) is None:
        return _error_lines_lowered(text.lower())
    return _error_lines_searched(text)


def _error_lines_lowered(lowered: str) -> int:
    """:func:`_error_lines_searched` of a text, from its lower-cased form, when lower-casing
    changes no match (no letter that IGNORECASE folds to ASCII): searched only where a stem
    starts (tests/test_speed_equivalence.py checks the two agree)."""
    starts = []
    for stem in _ERROR_STEMS:
        at = lowered.find(stem)
        while at >= 0:
            if _ERROR_WORD_LOWER.match(lowered, at):
                starts.append(at)
            at = lowered.find(stem, at + 1)
    count = 0
    line_end = -1
    for at in sorted(starts):
        if at > line_end:
            count += 1
            line_end = lowered.find("\n", at)
            if line_end < 0:
                break
    return count


def _error_lines_searched(text: str) -> int:
    count = 0
    at = 0
    while (match := _ERROR_WORD.search(text, at)) is not None:
        count += 1
        # the rest of this line is done: go on from the next one
        end = text.find("\n", match.end())
        if end < 0:
            break
        at = end + 1
    return count


def _superseded(
    target: CallTarget,
    n: int,
    last_read: Mapping[tuple[str, str], int],
    last_rerun: Mapping[int, int],
    last_head: Mapping[str, int],
) -> bool:
    """Whether a later call replaces call ``n`` (:func:`replaces`, looked up instead of scanned)."""
    if target.kind == "read":
        return last_read.get((target.path, ""), -1) > n or last_read.get((target.path, target.range), -1) > n
    if target.kind in _CHANGES:
        return False
    rerun_later = target.rerun is not None and last_rerun.get(target.rerun, -1) > n
    return rerun_later or (bool(target.head) and last_head.get(target.head, -1) > n)


# Texts are searched for names this many characters at a time, lower-cased and joined by NULs.
_NAMING_CHUNK_CHARS = 1 << 16


def _last_naming(texts: Iterable[tuple[int, str]], names: set[str]) -> dict[str, int]:
    """For each name, the position of the first of ``texts`` (position, text), walked in the
    order given, whose lower-cased text holds it; names no text holds are left out.

    The texts go in chunks, joined by NULs: each name is looked for once per chunk, in C, not
    once per text, and a name found is placed within its chunk by where it first occurs. No name
    holds a NUL (the caller's are file names), so none spans two texts.
    """
    names = set(names)
    found: dict[str, int] = {}
    chunk: list[str] = []
    positions: list[int] = []
    size = 0

    def search() -> None:
        joined = "\x00".join(chunk)
        starts = list(accumulate((len(text) + 1 for text in chunk[:-1]), initial=0))
        for name in [name for name in names if name in joined]:
            found[name] = positions[bisect_right(starts, joined.find(name)) - 1]
            names.discard(name)
        chunk.clear()
        positions.clear()

    for position, text in texts:
        if not names:
            break
        chunk.append(text.lower())
        positions.append(position)
        size += len(text)
        if size >= _NAMING_CHUNK_CHARS:
            search()
            size = 0
    if chunk and names:
        search()
    return found


def _share(wanted: set[str], present: set[str]) -> float:
    return len(wanted & present) / len(wanted) if wanted else 0.0


def call_features(
    messages: Sequence[SessionMessage],
    pairing: Pairing,
    goal: str,
    index: ReuseIndex | None = None,
    only: Iterable[ToolCall] | None = None,
) -> dict[str, dict[str, float]]:
    """``{tool_use_id: {feature: value}}`` for every completed call, or for the calls in
    ``only`` (a call's features do not depend on which others are asked for); ``index`` may be
    passed in when the caller already built it over the same messages."""
    if not messages:
        return {}
    wanted = None if only is None else {call.tool_use_id for call in only}
    last = len(messages) - 1
    calls = pairing.calls
    # the outputs asked about, by position in ``calls``
    texts = {
        n: result_text(messages, call) for n, call in enumerate(calls) if wanted is None or call.tool_use_id in wanted
    }
    # whether each output's words are all ASCII, looked at once for its three token walks
    plain = {n: ascii_words(text) for n, text in texts.items()}
    reuse = index if index is not None else build_reuse_index(messages, word_set(texts.values(), plain.values()))
    targets = [call_target(call) for call in calls]

    prompt_positions = [i for i, m in enumerate(messages) if prompt_text(m)]
    prompt_set = set(prompt_positions)
    latest_prompt = prompt_text(messages[prompt_positions[-1]]) if prompt_positions else ""
    goal_terms, prompt_terms = terms(goal), terms(latest_prompt)
    # term -> the last assistant message using it
    last_said: dict[str, int] = {}
    for position, message in enumerate(messages):
        if message.role == "assistant":
            last_said.update(dict.fromkeys(terms(message.text), position))
    # file name -> the last prompt or reply naming it, for the names of the calls asked about
    wanted_names = {
        name
        for call, target in zip(calls, targets)
        if (wanted is None or call.tool_use_id in wanted)
        and target.path
        and len(name := basename(target.path).lower()) >= 4
        and "\x00" not in name  # names no file: no file system allows a NUL in a path
    }
    last_named = _last_naming(
        ((p, m.text) for p in range(last, -1, -1) if (m := messages[p]).role == "assistant" or p in prompt_set),
        wanted_names,
    )

    def named_at(name: str) -> int:
        return last_named.get(name, -1)

    # what happened to each target afterwards, by key -> the last call (position in ``calls``)
    last_read: dict[tuple[str, str], int] = {}
    last_rerun: dict[int, int] = {}
    last_head: dict[str, int] = {}
    last_edit: dict[str, int] = {}
    for n, target in enumerate(targets):
        if target.kind == "read":
            last_read[(target.path, target.range)] = n
        if target.rerun is not None:
            last_rerun[target.rerun] = n
        if target.head:
            last_head[target.head] = n
        if target.kind == "edit":
            last_edit[target.path] = n

    out: dict[str, dict[str, float]] = {}
    for n, text in texts.items():
        call, target = calls[n], targets[n]
        values = dict.fromkeys(FEATURE_NAMES, 0.0)
        values["size_log"] = math.log10(call.result_chars + 1)
        values["tiny"] = 1.0 if call.result_chars <= _TINY_CHARS else 0.0
        values[f"kind_{target.kind}"] = 1.0
        values["is_error"] = 1.0 if call.is_error else 0.0
        since = last - call.result_index
        values["age_fraction"] = since / last if last else 0.0
        values["calls_after_fraction"] = (len(calls) - 1 - n) / len(calls)
        values["recency"] = 0.5 ** (since / _HALF_LIFE_MESSAGES)
        prompts = len(prompt_positions) - bisect_right(prompt_positions, call.result_index)
        values["prompts_after"] = min(prompts, _PROMPTS_SATURATION) / _PROMPTS_SATURATION

        if _superseded(target, n, last_read, last_rerun, last_head):
            values["superseded"] = 1.0
        if target.kind == "read" and target.path:
            # edited since, unless read again (whole, or the same range) after the last edit
            read_again = max(last_read.get((target.path, ""), -1), last_read.get((target.path, target.range), -1))
            values["edited_unread"] = 1.0 if last_edit.get(target.path, -1) > max(n, read_again) else 0.0

        ids = long_ids(text, plain[n])
        reused = reuse.reuses(text, call.result_index, ids, plain[n])
        if reused:
            values["reused"] = 1.0
            values["reused_log"] = math.log1p(len(reused))
            latest = max(reused.values())
            values["reuse_recency"] = 0.5 ** ((last - latest) / _HALF_LIFE_MESSAGES)
        output_terms = terms(text)
        said_later = {t for t in output_terms if last_said.get(t, -1) > call.result_index}
        values["later_text_overlap"] = len(said_later) / len(output_terms) if output_terms else 0.0
        values["goal_overlap"] = _share(goal_terms, output_terms)
        values["prompt_overlap"] = _share(prompt_terms, output_terms)
        name = basename(target.path).lower() if target.path else ""
        if len(name) >= 4 and named_at(name) > call.result_index:
            values["target_mentioned_later"] = 1.0
        values["error_lines"] = math.log1p(min(error_lines(text), 50))
        values["ids_log"] = math.log1p(len(ids))
        out[call.tool_use_id] = values
    return out


def feature_vector(values: Mapping[str, float]) -> list[float]:
    """The values in :data:`FEATURE_NAMES` order (a missing feature is 0)."""
    return [float(values.get(name, 0.0)) for name in FEATURE_NAMES]
