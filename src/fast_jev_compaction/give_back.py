"""The ladder's last step with a window: what its cuts freed beyond the need goes back.

A cut frees a whole output at a time, and an evicted turn a whole turn: the step that crosses
the need often frees far more than the window needed (a 40,000-character read truncated when
5,000 were missing, a long old turn evicted for the last few points). Freeing only what the
window needs, least valuable first, means the surplus is spent on what was cut last: the
outputs the budget policy truncated go back whole, most recent first (recency is the strongest
sign that a later turn needs an output), each one only if its whole text fits in what is left
of the surplus; so the context still ends under its aim (``policy.chars_to_free``'s margin
under the target). An output given back leaves nothing in the archive (but the file another one names: files
are named by their content, and an evicted turn may hold the same output cut); its decision says
``under-target``: the pass had freed what the window needs without it.

Only truncations go back: a truncated output's call and result are still in place, its digest
standing for it, so the original takes the digest's place exactly (a dropped call, a moved
input or an evicted turn would change the history's shape). Nor an output that imitates our
marks (it would go back with its look-alikes unquoted).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterable, Sequence

from .conversation.messages import SessionMessage, ToolResult, ToolUse
from .decide.decisions import BUDGET, KEEP, TRUNCATE, UNDER_TARGET, CallDecision
from .decide.digest import IDS_SHARE, DigestShape
from .decide.markers import imitates_marks
from .decide.rebuild import block_only, cut_output

if TYPE_CHECKING:
    from .compaction import CompactResult


# Surplus under this is not worth a wider digest (a few lines).
_WIDER_MIN = 400


def given_back(
    result: CompactResult, source: Sequence[SessionMessage], surplus: float, shape: DigestShape | None = None
) -> CompactResult:
    """``result`` (a compaction of ``source``) with its budget truncations undone, most recent
    first, while each one's cost (the characters its original adds back) fits in ``surplus``,
    the characters freed beyond the need; then, with the digests' ``shape``, the truncations
    left keep wider digests, most recent first, as far as what is left of it allows.
    ``result`` itself when nothing fits."""
    if surplus <= 0:
        return result
    order = {call.tool_use_id: at for at, call in enumerate(result.calls)}
    cut = [
        decision for decision in result.decisions
        if decision.action == TRUNCATE and decision.reason == BUDGET and decision.tool_use_id in order
    ]
    cut.sort(key=lambda decision: order[decision.tool_use_id], reverse=True)
    originals = _originals(source, {decision.tool_use_id for decision in cut})
    shown = _shown(result.messages, originals.keys())
    left = surplus
    back: dict[str, str] = {}  # tool_use_id -> the text its result goes back with
    for decision in cut:
        original = originals.get(decision.tool_use_id)
        current = shown.get(decision.tool_use_id)
        if original is None or current is None or imitates_marks(original.text):
            continue
        cost = len(original.text) - len(current)
        if cost <= left:
            back[decision.tool_use_id] = original.text
            left -= cost
    wider: dict[str, str] = {}
    for decision in cut if shape is not None else ():
        original = originals.get(decision.tool_use_id)
        current = shown.get(decision.tool_use_id)
        if left < _WIDER_MIN or original is None or current is None or decision.tool_use_id in back:
            continue
        made = _wider(original, current, decision.archive_path, shape, left) if shape is not None else None
        if made is not None:
            wider[decision.tool_use_id] = made
            left -= len(made) - len(current)
    if not back and not wider:
        return result
    messages = _with_texts(result.messages, {**back, **wider}, originals, _original_uses(source, back.keys()))
    decisions = [_given(decision, back, wider, shown) for decision in result.decisions]
    named = {path for decision in decisions for path in (decision.archive_path, decision.input_archive_path) if path}
    gone = {path for path in _paths(result, back) if path is not None and path not in named}
    # A file is named by its content: the same output cut in a turn moved out since (or in what a
    # fold or another file holds) still names it there.
    gone = {path for path in gone if not any(path in text for other, text in result.archive.items() if other != path)}
    archive = {path: text for path, text in result.archive.items() if path not in gone}
    stats = replace(
        result.stats,
        chars_after=result.stats.chars_after + round(surplus - left),
        kept=result.stats.kept + len(back),
        truncated=result.stats.truncated - len(back),
    )
    return replace(result, messages=messages, decisions=decisions, stats=stats, archive=archive)


def _originals(source: Sequence[SessionMessage], wanted: set[str]) -> dict[str, ToolResult]:
    """The results of ``wanted`` calls as ``source`` holds them, by tool_use_id."""
    return {
        result.tool_use_id: result
        for message in source for result in message.toolResults or () if result.tool_use_id in wanted
    }


def _original_uses(source: Sequence[SessionMessage], wanted: Iterable[str]) -> dict[str, ToolUse]:
    """The calls of ``wanted`` as ``source`` holds them, by tool_use_id."""
    ids = set(wanted)
    return {use.tool_use_id: use for message in source for use in message.toolUses if use.tool_use_id in ids}


def _shown(messages: Sequence[SessionMessage], wanted: Iterable[str]) -> dict[str, str]:
    """The text each of the ``wanted`` results has in ``messages`` (its digest), by tool_use_id."""
    ids = set(wanted)
    return {
        result.tool_use_id: result.text
        for message in messages for result in message.toolResults or () if result.tool_use_id in ids
    }


def _wider(original: ToolResult, current: str, path: str | None, shape: DigestShape, left: float) -> str | None:
    """A digest of ``original`` wider than ``current`` by at most ``left`` characters, or None."""
    budget = shape.budget + int(left)
    made = cut_output(original.text, bool(original.isError), _shape(shape, budget), path)
    if made is not None and len(made) - len(current) > left:
        # The note and the ids line are outside the budget's count: take the overshoot off once.
        made = cut_output(original.text, bool(original.isError), _shape(shape, budget - (len(made) - len(current) - int(left))), path)
    if made is None or not 0 < len(made) - len(current) <= left:
        return None
    return made


def _shape(shape: DigestShape, budget: int) -> DigestShape:
    return DigestShape(budget=budget, head=shape.head, ids=(budget - shape.head) // IDS_SHARE, focus=shape.focus)


def _with_texts(
    messages: Sequence[SessionMessage], texts: dict[str, str], originals: dict[str, ToolResult],
    uses: dict[str, ToolUse],
) -> list[SessionMessage]:
    """``messages`` with each of these results (and the copy of it its call carries) holding its
    new text; an output given back whole is its original block, its record included."""
    out = list(messages)
    for at, message in enumerate(messages):
        results = message.toolResults or ()
        if any(result.tool_use_id in texts for result in results):
            out[at] = replace(message, toolResults=tuple(
                result if result.tool_use_id not in texts
                else originals[result.tool_use_id] if texts[result.tool_use_id] is originals[result.tool_use_id].text
                else ToolResult(result.tool_use_id, texts[result.tool_use_id], result.isError)
                for result in results
            ))
        if any(use.tool_use_id in texts and use.text is not None for use in message.toolUses):
            out[at] = replace(out[at], toolUses=tuple(
                _with_text(use, texts[use.tool_use_id], uses.get(use.tool_use_id))
                if use.tool_use_id in texts and use.text is not None else use
                for use in message.toolUses
            ))
    return out


def _with_text(use: ToolUse, text: str, original: ToolUse | None) -> ToolUse:
    """A call carrying its output's new text: the original call, its record included, when the
    output went back whole and the call is as it was; else its block members alone (the record
    holds the output as it was, which a digest or a moved input no longer is)."""
    if original is not None and text == original.text and use.input is original.input:
        return original
    return ToolUse(use.tool_use_id, use.tool, use.input, text, use.isError, block_only(use.extra))


def _given(decision: CallDecision, back: dict[str, str], wider: dict[str, str], shown: dict[str, str]) -> CallDecision:
    """The decision on a call once its output went back (kept: ``under-target``) or kept a
    wider digest (its cut frees that much less)."""
    tool_use_id = decision.tool_use_id
    if tool_use_id in back:
        d = decision
        return CallDecision(d.id, d.tool_use_id, d.tool, d.keep_call, d.keep_result, KEEP, UNDER_TARGET)
    if tool_use_id in wider:
        return replace(decision, chars_freed=decision.chars_freed - (len(wider[tool_use_id]) - len(shown[tool_use_id])))
    return decision


def _paths(result: CompactResult, back: dict[str, str]) -> set[str | None]:
    """The files the outputs given back were saved to."""
    return {decision.archive_path for decision in result.decisions if decision.tool_use_id in back}
