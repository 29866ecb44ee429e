"""What the user is working towards, as the judge reads it (upstream §3.2, without its pollution)."""

from __future__ import annotations

import re
from typing import Sequence

from ..conversation.messages import SessionMessage
from ..decide.markers import is_fold_note, without_lead_note
from ..textutil import truncate

GOAL_PROMPTS = 3
GOAL_PROMPT_CHARS = 500

# Host-injected wrappers that look like user text but were not typed by the user: a block runs
# from one of these tags to the first closing tag of its name.
_INJECTED_OPENER = re.compile(
    r"<(system-reminder|command-name|command-message|command-args|local-command-[\w-]+|"
    r"task-notification|user-prompt-submit-hook|bash-input|bash-stdout|bash-stderr)>"
)
_INJECTED_OPENERS = ("<local-command-", "<command-", "<system-reminder>", "<task-notification>", "Caveat: ")
_CONTINUATION = "This session is being continued from a previous conversation"


def prompt_text(message: SessionMessage) -> str:
    """The part of a user message the user actually typed, or '' when there is none."""
    if message.role != "user" or message.toolResults:
        return ""
    extras = message.extra
    if extras.get("isMeta") or extras.get("isCompactSummary"):
        return ""
    # The compaction's own lead line, which the engine joins to the first prompt, is not the user's.
    text = without_lead_note(message.text)
    if "<" in text:  # each injected block opens with one
        text = _without_injected(text)
    text = text.strip()
    # Nor the note that stands for the conversation a fold moved out (turn_eviction.fold_old_turns).
    if not text or text.startswith(_INJECTED_OPENERS) or text.startswith(_CONTINUATION) or is_fold_note(text):
        return ""
    return text


def _without_injected(text: str) -> str:
    """``text`` without its injected blocks. Each block's end is found by ``str.find``: a lazy
    ``.*?</name>`` pattern steps through a long reminder one character at a time."""
    kept: list[str] = []
    start = at = 0
    while (opener := _INJECTED_OPENER.search(text, at)) is not None:
        closer = f"</{opener[1]}>"
        end = text.find(closer, opener.end())
        if end < 0:  # never closed: not a block, and the text goes on from its next character
            at = opener.start() + 1
            continue
        kept.append(text[start : opener.start()])
        start = at = end + len(closer)
    kept.append(text[start:])
    return "".join(kept)


def goal_from_messages(messages: Sequence[SessionMessage]) -> str:
    """The last three real prompts, 500 characters each, oldest first."""
    # Newest first, up to the third: the earlier prompts are never read.
    prompts: list[str] = []
    for message in reversed(messages):
        text = prompt_text(message)
        if text:
            prompts.append(text)
            if len(prompts) == GOAL_PROMPTS:
                break
    return "\n".join(truncate(text, GOAL_PROMPT_CHARS) for text in reversed(prompts))


def goal_with_instructions(goal: str, instructions: str | None) -> str:
    """Fold ``/compact <instructions>`` into the goal; blank instructions change nothing."""
    if not instructions or not instructions.strip():
        return goal
    focus = f"Focus for this compaction: {instructions.strip()}"
    return f"{goal}\n{focus}" if goal else focus


def compaction_goal(messages: Sequence[SessionMessage], goal: str | None, instructions: str | None) -> str:
    """The goal a compaction uses: the given one, else the recent prompts; plus the instructions."""
    return goal_with_instructions((goal or "").strip() or goal_from_messages(messages), instructions)
