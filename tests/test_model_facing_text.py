"""The texts a model reads: the judge's context and questions, and the note an agent finds in a
cut result. Pinned verbatim so that any change is a deliberate edit of this file too."""

from __future__ import annotations

import re

import pytest

from fast_jev_compaction.pairing import ToolCall
from fast_jev_compaction.questions import STATE_CONTEXT, questions_for
from fast_jev_compaction.rebuild import truncated_result_text

CALL = ToolCall(
    id="t7", tool_use_id="toolu_7", tool="Bash", input={"command": "ls"}, call_index=3, result_index=4,
    result_chars=1234, is_error=False, pinned=False,
)
ARCHIVE = ".claude/fast-jev-compaction/result-toolu_7.txt"

EXPECTED_CONTEXT = (
    "A coding assistant conversation is being compacted to free context. `history` is the "
    "conversation so far, oldest first; each tool output is shown as a short `result` note and "
    "long texts may be abridged. Each question asks whether one tool call, or the full output of "
    "that call, still needs to stay in the history verbatim. A call that is not kept leaves the "
    "history together with its output; an output that is not kept is cut to its opening lines. "
    "Files can be read again and read-only commands re-run; the output of a command with side "
    "effects (a deploy, a push, a one-time code) exists only in the history."
)
EXPECTED_CALL_QUESTION = (
    "Tool call t7 (Bash) should stay in the history: knowing this call was made, with its input, "
    "still matters for what the assistant does next"
)
EXPECTED_RESULT_QUESTION = (
    "The full output of tool call t7 (Bash, 1234 chars) should stay in the history verbatim: the "
    "assistant still needs its contents and re-running the tool would not do"
)
EXPECTED_NOTE = "[fast-jev-compaction truncated 1700 chars of this tool result; re-run the tool if needed]"
EXPECTED_ARCHIVED_NOTE = (
    "[fast-jev-compaction truncated 1700 chars of this tool result; the full output is saved at "
    f"{ARCHIVE}; Read it if needed]"
)

# Shouting and command words that steer a model by alarm rather than by information.
FORBIDDEN = ["BLOCKED", "MANDATORY", "Do NOT", "NEVER"]
FORBIDDEN_ANY_CASE = ["must not", "for efficiency"]


def note(archived_at=None, is_error=False):
    return truncated_result_text("x" * 2000, is_error, 300, archived_at)[301:]


def model_facing_texts():
    questions = questions_for(CALL)
    return {
        "context": STATE_CONTEXT,
        "call question": questions["call_t7"]["instructions"],
        "result question": questions["result_t7"]["instructions"],
        "note": note(),
        "error note": note(is_error=True),
        "archived note": note(ARCHIVE),
    }


def test_context_is_pinned():
    """Deliberate difference (c): this is our wording, not upstream's, which claimed every tool
    could always be re-run (§9.2-9.3)."""
    assert STATE_CONTEXT == EXPECTED_CONTEXT
    assert "`history`" in STATE_CONTEXT and "`result`" in STATE_CONTEXT


def test_questions_are_pinned():
    questions = questions_for(CALL)
    assert questions == {
        "call_t7": {"type": "noul", "instructions": EXPECTED_CALL_QUESTION},
        "result_t7": {"type": "noul", "instructions": EXPECTED_RESULT_QUESTION},
    }


def test_truncation_notes_are_pinned():
    assert note() == EXPECTED_NOTE
    assert note(ARCHIVE) == EXPECTED_ARCHIVED_NOTE
    assert note(is_error=True) == EXPECTED_NOTE.replace("tool result;", "tool result (error);")


@pytest.mark.parametrize("name", list(model_facing_texts()))
def test_no_alarm_words(name):
    text = model_facing_texts()[name]
    for word in FORBIDDEN:
        assert word not in text, (name, word)
    for phrase in FORBIDDEN_ANY_CASE:
        assert phrase not in text.lower(), (name, phrase)


def test_notes_say_how_to_get_the_content_back():
    assert "re-run the tool if needed" in note()
    archived = note(ARCHIVE)
    assert re.search(rf"{re.escape(ARCHIVE)}; Read it if needed\]$", archived)
    assert "re-run" not in archived  # with a saved copy the agent is pointed at the file instead
