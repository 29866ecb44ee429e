"""Apply decisions to the messages (upstream §6.3-6.4).

Invariants: untouched messages are returned as the same objects; the input is never mutated;
user and assistant text is never changed; a result never outlives its call; a message left
with nothing is removed.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence, TypeVar

from .decisions import CallDecision
from .messages import SessionMessage, ToolResult, ToolUse
from .pairing import ToolCall

# A cut must save more than its own note; short results stay identical.
TRUNCATION_MARGIN = 120
B = TypeVar("B", ToolUse, ToolResult)
_RECORD_IDS = frozenset({"uuid", "handle"})


def truncated_result_text(
    text: str, is_error: bool, head_chars: int, archived_at: str | None = None
) -> str:
    """The head of a long result plus a note on how to see the rest again."""
    if len(text) <= head_chars + TRUNCATION_MARGIN:
        return text
    head = f"{text[:head_chars]}\n" if head_chars > 0 else ""
    error = " (error)" if is_error else ""
    if archived_at:
        how = f"the full output is saved at {archived_at}; Read it if needed"
    else:
        how = "re-run the tool if needed"
    cut = f"{head}[fast-jev-compaction truncated {len(text) - head_chars} chars of this tool result{error}; {how}]"
    # The margin covers the plain note, not a long archive path: a cut must never grow the text.
    return cut if len(cut) < len(text) else text


def apply_decisions(
    messages: Sequence[SessionMessage],
    decisions: Sequence[CallDecision],
    calls: Sequence[ToolCall],
    head_chars: int,
    archive: Mapping[str, str] | None = None,
) -> list[SessionMessage]:
    """Rebuild the transcript; ``archive`` maps a tool_use_id to where its full result is saved."""
    pinned = {call.tool_use_id for call in calls if call.pinned}
    # A forged or stale decision cannot touch a pinned call.
    actions = {
        d.tool_use_id: d.action for d in decisions if d.action != "keep" and d.tool_use_id not in pinned
    }
    archive = archive or {}
    out: list[SessionMessage] = []
    for message in messages:
        results = message.toolResults or []
        if not any(u.tool_use_id in actions for u in message.toolUses) and not any(
            r.tool_use_id in actions for r in results
        ):
            out.append(message)
            continue

        uses, uses_changed = _apply(
            message.toolUses, actions, lambda u: _truncated_use(u, head_chars, archive.get(u.tool_use_id))
        )
        kept_results, results_changed = _apply(
            results, actions, lambda r: _truncated_result(r, head_chars, archive.get(r.tool_use_id))
        )
        if not uses_changed and not results_changed:
            out.append(message)
        elif not message.text.strip() and not uses and not kept_results:
            continue
        else:
            out.append(_rebuilt(message, uses, kept_results))
    return out


def _apply(blocks: Sequence[B], actions: Mapping[str, str], cut: Callable[[B], B]) -> tuple[list[B], bool]:
    """Drop or cut the blocks the decisions name; say whether anything differs from the input."""
    kept: list[B] = []
    changed = False
    for block in blocks:
        action = actions.get(block.tool_use_id)  # type: ignore[attr-defined]
        if action == "drop_call":
            changed = True
            continue
        if action == "drop_result":
            new = cut(block)
            changed = changed or new is not block
            block = new
        kept.append(block)
    return kept, changed


def _truncated_use(use: ToolUse, head_chars: int, archived_at: str | None) -> ToolUse:
    original = use.text or ""
    text = truncated_result_text(original, bool(use.isError), head_chars, archived_at)
    if text == original:
        return use
    return ToolUse(
        tool_use_id=use.tool_use_id,
        tool=use.tool,
        input=use.input,
        text=text,
        isError=True if use.isError else None,
    )


def _truncated_result(result: ToolResult, head_chars: int, archived_at: str | None) -> ToolResult:
    text = truncated_result_text(result.text, bool(result.isError), head_chars, archived_at)
    if text == result.text:
        return result
    return ToolResult(tool_use_id=result.tool_use_id, text=text, isError=bool(result.isError))


def _rebuilt(message: SessionMessage, uses: list[ToolUse], results: list[ToolResult]) -> SessionMessage:
    """A handle-less copy: the engine rebuilds it from role, text and tool blocks.

    Other blocks the reader kept (thinking, images) ride along as extras rather than vanish;
    the record id does not, since this is a new record.
    """
    extras = {k: v for k, v in (message.model_extra or {}).items() if k not in _RECORD_IDS}
    return SessionMessage(
        role=message.role,
        text=message.text,
        toolUses=uses,
        toolResults=results or None,
        **extras,
    )
