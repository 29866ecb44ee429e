"""Rungs d and e of the eviction ladder (``turn_eviction.py``, ``ladder.compact_to_fit``): old
turns move whole to the archive, oldest first and only as far as the window needs, then the pin
shrinks; the user's prompts never change and no tool result loses its call."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from fast_jev_compaction.cli import main
from fast_jev_compaction.compaction import compact_sync, run_sync
from fast_jev_compaction.decisions import DROP, OLD_TURN, PINNED, TRUNCATE
from fast_jev_compaction.hook.turns import regroup, turn_problems
from fast_jev_compaction.judge.local import LocalJudge
from fast_jev_compaction.ladder import compact_to_fit
from fast_jev_compaction.markers import (
    carries_mark,
    is_lead_note,
    is_turn_index_line,
    lead_note,
    saved_path,
    turn_index_line,
)
from fast_jev_compaction.messages import SessionMessage, ToolResult, ToolUse, parse_messages
from fast_jev_compaction.options import CompactOptions
from fast_jev_compaction.policy import CHARS_PER_TOKEN, TARGET_MARGIN_POINTS
from fast_jev_compaction.stats import CompactStats, message_chars, summarize
from fast_jev_compaction.transcript import read_messages
from fast_jev_compaction.turn_eviction import is_prompt
from test_model_facing_text import ARCHIVE, FORBIDDEN, FORBIDDEN_ANY_CASE

TURNS = 8
BIG_OUTPUT = 20_000
# A window no ladder can fit these sessions into: every rung is taken.
TINY_WINDOW = 100


def reply(k: int) -> str:
    # Prose that differs from turn to turn (the judge and the rules see no re-run).
    return f"Turn {k}: " + " ".join(f"the module mod{k} handles case {n} by checking its input first." for n in range(60))


def session(*, last_read: bool = False) -> list[SessionMessage]:
    """A first prompt, then TURNS turns of a prompt, a small Read and a long reply; with
    ``last_read`` the last turn also reads a large file, inside the pinned window."""
    messages: list[SessionMessage] = []
    for k in range(TURNS):
        messages += [
            SessionMessage(role="user", text=f"prompt {k}: please look at src/mod{k}.py"),
            SessionMessage(role="assistant", text=f"Reading mod{k}.", toolUses=(ToolUse(f"toolu_{k}", "Read", {"file_path": f"src/mod{k}.py"}),)),
            SessionMessage(role="user", toolResults=(ToolResult(f"toolu_{k}", f"def mod{k}():\n    return {k}\n"),)),
            SessionMessage(role="assistant", text=reply(k)),
        ]
    if last_read:
        big = "\n".join(f"line {n}: value = compute({n}) + offset" for n in range(BIG_OUTPUT // 40))
        messages[-1:-1] = [
            SessionMessage(role="assistant", text="Reading the big file.", toolUses=(ToolUse("toolu_big", "Read", {"file_path": "src/big.py"}),)),
            SessionMessage(role="user", toolResults=(ToolResult("toolu_big", big),)),
        ]
    return messages


def turn_chars(messages: list[SessionMessage], k: int) -> int:
    return sum(message_chars(m) for m in messages[4 * k + 1 : 4 * k + 4])


def window_needing(messages: list[SessionMessage], need: float, target_percent: float = 40) -> int:
    """A window (tokens) for which a pass over ``messages`` must free about ``need`` characters."""
    chars = sum(message_chars(m) for m in messages)
    return int((chars - need) / ((target_percent - TARGET_MARGIN_POINTS) / 100 * CHARS_PER_TOKEN))


def fit(messages: list[SessionMessage], archive: Path | None, window: int, preserve: int = 6):
    options = CompactOptions(
        window_tokens=window, archive_dir=str(archive) if archive else None, preserve_recent_messages=preserve
    )
    return run_sync(compact_to_fit(messages, LocalJudge(), options), waits=False)


def index_lines(messages: list[SessionMessage]) -> list[tuple[int, SessionMessage]]:
    return [(at, m) for at, m in enumerate(messages) if is_turn_index_line(m.text)]


def assert_whole(before: list[SessionMessage], after: list[SessionMessage]) -> None:
    """Prompts byte-identical and in order; no result without its call nor call without its result."""
    assert [m for m in after if is_prompt(m)] == [m for m in before if is_prompt(m)]
    regrouped = regroup(after)
    assert turn_problems([m.to_wire() for m in regrouped], before) == []
    uses = {u.tool_use_id for m in after for u in m.toolUses}
    results = {r.tool_use_id for m in after for r in m.toolResults or ()}
    assert uses == results
    # Roles alternate around each index line: a prompt before it, a prompt (or the end) after it.
    for at, _line in index_lines(after):
        assert is_prompt(after[at - 1])
        assert at + 1 == len(after) or is_prompt(after[at + 1])


def test_the_oldest_turns_go_first_and_only_until_the_need_is_met(tmp_path: Path) -> None:
    messages = session()
    need = 2.5 * turn_chars(messages, 1)
    result = fit(messages, tmp_path, window_needing(messages, need))

    # Turn 0 is the first message's; turns 1 to 3 meet the need (two would not), turns 4 on stay.
    evicted = [result.messages[at - 1].text for at, _ in index_lines(result.messages)]
    assert evicted == ["prompt 1: please look at src/mod1.py", "prompt 2: please look at src/mod2.py", "prompt 3: please look at src/mod3.py"]
    assert result.stats.evicted_turns == 3
    assert reply(0) in [m.text for m in result.messages]
    assert all(reply(k) in [m.text for m in result.messages] for k in range(4, TURNS))
    assert result.stats.chars_before - result.stats.chars_after >= need
    assert_whole(messages, result.messages)
    assert "3 old turn(s) moved to the archive" in summarize(result.stats)

    # Each evicted call is recorded: dropped with its turn, pointing at the turn's file.
    gone = [d for d in result.decisions if d.reason == OLD_TURN]
    assert [d.tool_use_id for d in gone] == ["toolu_1", "toolu_2", "toolu_3"]
    assert all(d.action == DROP and d.archive_path in result.archive for d in gone)
    assert result.stats.dropped == 3


def test_with_the_engine_s_count_the_ladder_still_stops_once_the_need_is_met(tmp_path: Path) -> None:
    """The engine's count (the hook's) includes what the messages do not hold (system prompt,
    tools): the need is worked out on it once, and what the ladder frees comes off it."""
    messages = session()
    tokens = int(sum(message_chars(m) for m in messages) / CHARS_PER_TOKEN) + 5000
    need = 2.5 * turn_chars(messages, 1)
    window = int((tokens * CHARS_PER_TOKEN - need) / ((40 - TARGET_MARGIN_POINTS) / 100 * CHARS_PER_TOKEN))
    options = CompactOptions(window_tokens=window, context_tokens=tokens, archive_dir=str(tmp_path))
    result = run_sync(compact_to_fit(messages, LocalJudge(), options), waits=False)
    assert result.stats.evicted_turns == 3


def test_a_turns_file_holds_its_replies_calls_and_outputs_and_its_line_names_them(tmp_path: Path) -> None:
    messages = session()
    result = fit(messages, tmp_path, window_needing(messages, 0.5 * turn_chars(messages, 1)))
    ((at, line),) = index_lines(result.messages)
    path = saved_path(line.text)
    assert path is not None and path.startswith(str(tmp_path))
    saved = result.archive[path]
    for text in ("prompt 1: please look at src/mod1.py", "Reading mod1.", reply(1), "toolu_1", '{"file_path":"src/mod1.py"}', "def mod1():\n    return 1"):
        assert text in saved
    assert line.text == turn_index_line([("Read", 1)], ["src/mod1.py"], turn_chars(messages, 1), path)
    assert line.role == "assistant" and carries_mark(line.text)


def test_without_a_window_the_ladder_is_the_pass() -> None:
    messages = session(last_read=True)
    options = CompactOptions(archive_dir="/tmp/archive-never-written")
    ladder = run_sync(compact_to_fit(messages, LocalJudge(), options), waits=False)
    alone = compact_sync(messages, LocalJudge(), options)
    assert ladder.messages == alone.messages
    assert ladder.decisions == alone.decisions
    assert ladder.archive == alone.archive
    assert replace(ladder.stats, ms=0) == replace(alone.stats, ms=0)
    assert ladder.stats.evicted_turns == 0


def test_without_an_archive_no_turn_leaves() -> None:
    messages = session()
    result = fit(messages, None, window_needing(messages, 3 * turn_chars(messages, 1)))
    assert index_lines(result.messages) == [] and result.stats.evicted_turns == 0


def test_the_pin_shrinks_only_when_old_turns_cannot_meet_the_need(tmp_path: Path) -> None:
    messages = session(last_read=True)
    big_result = next(m for m in messages if m.toolResults and m.toolResults[0].tool_use_id == "toolu_big")

    # Old turns suffice: the pinned window (the last 8 messages: the last turn and the end of
    # the one before) is left as it was.
    enough = fit(messages, tmp_path / "a", window_needing(messages, 2 * turn_chars(messages, 1)), preserve=8)
    assert enough.messages[-8:] == messages[-8:]
    assert next(d for d in enough.decisions if d.tool_use_id == "toolu_big").reason == PINNED

    # They cannot: every old turn goes, then the pin shrinks to the turn in flight, whose big
    # output is cut like any other, and the turns the old pin held go too: the one it held in
    # part, and the first message's.
    short = fit(messages, tmp_path / "b", TINY_WINDOW, preserve=8)
    big = next(d for d in short.decisions if d.tool_use_id == "toolu_big")
    assert big.action == TRUNCATE and big_result not in short.messages
    evicted = [short.messages[at - 1].text for at, _ in index_lines(short.messages)]
    assert evicted == [f"prompt {k}: please look at src/mod{k}.py" for k in range(TURNS - 1)]
    assert reply(0) in [m.text for m in enough.messages]
    assert reply(TURNS - 1) in [m.text for m in short.messages]  # the turn in flight stays
    assert_whole(messages, short.messages)
    # The ladder's figures add up: what it says it freed is what the history lost.
    assert short.stats.chars_after == sum(message_chars(m) for m in short.messages)
    assert short.stats.messages_after == len(short.messages)


def test_with_nothing_left_to_unpin_but_the_first_message_its_turn_goes_last(tmp_path: Path) -> None:
    messages = session()
    # No pinned window (the session ends with a reply: no call in flight): rung e can only free
    # the first message's turn, which goes once the others could not meet the need.
    result = fit(messages, tmp_path, window_needing(messages, (TURNS - 1.5) * turn_chars(messages, 1)), preserve=0)
    evicted = [result.messages[at - 1].text for at, _ in index_lines(result.messages)]
    assert evicted == [f"prompt {k}: please look at src/mod{k}.py" for k in range(TURNS - 1)]
    assert reply(TURNS - 1) in [m.text for m in result.messages]
    assert_whole(messages, result.messages)
    enough = fit(messages, tmp_path, window_needing(messages, 1.5 * turn_chars(messages, 1)), preserve=0)
    assert reply(0) in [m.text for m in enough.messages] and enough.stats.evicted_turns == 2


def test_a_later_pass_leaves_an_evicted_turn_as_it_is(tmp_path: Path) -> None:
    messages = session()
    first = fit(messages, tmp_path, window_needing(messages, 2 * turn_chars(messages, 1)))
    again = fit(first.messages, tmp_path, TINY_WINDOW)
    lines_before = [line.text for _, line in index_lines(first.messages)]
    assert set(lines_before) < {line.text for _, line in index_lines(again.messages)}
    # No turn file holds a turn evicted already (its index line alone).
    assert again.stats.evicted_turns > 0
    assert not any("the assistant's replies to this prompt" in text for text in again.archive.values())


# --------------------------------------------------------------------------- the texts


EXPECTED_INDEX = (
    "[fast-jev-compaction: the assistant's replies to this prompt and its 4 tool calls (Read ×3, Bash) were "
    "moved out of the conversation; files touched: src/app.py, src/db.py; the whole turn (12,345 chars) is "
    f"saved at {ARCHIVE}; Read it if needed]"
)
EXPECTED_ONE_CALL_INDEX = (
    "[fast-jev-compaction: the assistant's replies to this prompt and its Bash call were moved out of the "
    f"conversation; the whole turn (980 chars) is saved at {ARCHIVE}; Read it if needed]"
)
EXPECTED_TEXT_INDEX = (
    "[fast-jev-compaction: the assistant's replies to this prompt were moved out of the conversation; the "
    f"whole turn (4,321 chars) is saved at {ARCHIVE}; Read it if needed]"
)
FOLDER = "/home/u/.claude/plugins/data/fast-jev-compaction/archive"
EXPECTED_LEAD_WITH_FOLDER = (
    "[fast-jev-compaction: this conversation was compacted without a summary. Older tool outputs were cut "
    "to their key lines or moved out of it; each marker names the file that holds the full output, and one "
    "Read of that file brings it back; a tool output's imitation of a marker reads [quoted fast-jev-compaction "
    f"and names no saved file. Every saved file is in {FOLDER}; Grep that folder to find a detail "
    "no marker in view points at]"
)


def new_texts() -> dict[str, str]:
    return {
        "index line": turn_index_line([("Read", 3), ("Bash", 1)], ["src/app.py", "src/db.py"], 12345, ARCHIVE),
        "one-call index line": turn_index_line([("Bash", 1)], [], 980, ARCHIVE),
        "text-only index line": turn_index_line([], [], 4321, ARCHIVE),
        "lead note with its folder": lead_note(FOLDER),
    }


def test_the_index_lines_and_the_lead_note_are_pinned() -> None:
    texts = new_texts()
    assert texts["index line"] == EXPECTED_INDEX
    assert texts["one-call index line"] == EXPECTED_ONE_CALL_INDEX
    assert texts["text-only index line"] == EXPECTED_TEXT_INDEX
    assert texts["lead note with its folder"] == EXPECTED_LEAD_WITH_FOLDER
    many = turn_index_line([("Read", 10)], [f"f{n}.py" for n in range(10)], 1, ARCHIVE)
    assert "files touched: f0.py, f1.py, f2.py, f3.py, f4.py, f5.py, f6.py, f7.py and 2 more;" in many


@pytest.mark.parametrize("name", list(new_texts()))
def test_the_new_texts_inform_without_alarm(name: str) -> None:
    text = new_texts()[name]
    assert not any(word in text for word in FORBIDDEN)
    assert not any(phrase in text.lower() for phrase in FORBIDDEN_ANY_CASE)


@pytest.mark.parametrize("name", ["index line", "one-call index line", "text-only index line"])
def test_an_index_line_says_where_the_turn_is_and_a_later_pass_knows_it(name: str) -> None:
    text = new_texts()[name]
    assert text.endswith(f"saved at {ARCHIVE}; Read it if needed]")
    assert saved_path(text) == ARCHIVE and carries_mark(text) and is_turn_index_line(text)


def test_a_lead_note_is_known_with_or_without_its_folder() -> None:
    assert lead_note(None) == lead_note("") != lead_note(FOLDER)
    assert is_lead_note(lead_note(None)) and is_lead_note(lead_note(FOLDER))
    assert not is_lead_note("please compact this conversation")


# --------------------------------------------------------------------------- the CLI

LONG_SESSION = "entire-checkpoints/entireio__cli/15f99783-ab13-4526-902c-0ca770a5d70e.jsonl"
WINDOW = 32_000


def test_the_cli_brings_a_long_session_under_its_window(corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = corpus_dir / LONG_SESSION
    out = tmp_path / "out.json"
    code = main(["compact", str(path), "--out", str(out), "--judge", "local", "--window", str(WINDOW), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    stats = CompactStats(**summary["stats"])
    assert stats.chars_after / CHARS_PER_TOKEN < 0.40 * WINDOW
    assert stats.evicted_turns > 0
    before = read_messages(path)
    after = parse_messages(json.loads(out.read_text(encoding="utf-8")))
    assert sum(message_chars(m) for m in after) == stats.chars_after
    assert_whole(before, after)
    # Every index line's file is on disk and holds the reply it stands for.
    for _, line in index_lines(after):
        saved = Path(str(saved_path(line.text))).read_text(encoding="utf-8")
        assert saved.startswith("## the user's prompt\n")


# --------------------------------------------------------------------------- the hook


def test_the_hook_moves_old_turns_out_when_its_window_needs_it(data_dir: Path) -> None:
    from test_hook_entry import event, run_hook

    messages = session()
    chars = sum(message_chars(m) for m in messages)
    window = window_needing(messages, 2.5 * turn_chars(messages, 1))
    # The engine's count is of its last request: the hook adds the last response and what came after.
    from fast_jev_compaction.hook.gate import unmeasured_tokens

    measured = int(chars / CHARS_PER_TOKEN) - unmeasured_tokens(messages)
    context = {"tokens": measured, "window": window, "percent": 100 * measured / window}
    answer, _ = run_hook(json.dumps(event([m.to_wire() for m in messages], data_dir, context=context)).encode(), data_dir)

    assert answer["action"] == "replace", answer.get("reason")
    assert "3 old turn(s) moved whole" in answer["toast"]
    out = answer["messages"]
    assert out[0]["text"] == lead_note(str(data_dir / "archive"))
    lines = [m["text"] for m in out if is_turn_index_line(m.get("text", ""))]
    assert len(lines) == 3
    for line in lines:
        assert reply(int(line.split("src/mod")[1][0])) in Path(str(saved_path(line))).read_text(encoding="utf-8")
    # The prompts come back as they were, in order, after the lead line.
    assert [m["text"] for m in out[1:] if m["role"] == "user" and not m.get("toolResults")] == [
        m.text for m in messages if is_prompt(m)
    ]


def test_without_a_writable_archive_the_hook_moves_no_turn(data_dir: Path) -> None:
    from test_hook_entry import event, hook_log, run_hook

    data_dir.mkdir(parents=True)
    (data_dir / "archive").write_text("a file where the archive folder would go", encoding="utf-8")
    messages = session()
    chars = sum(message_chars(m) for m in messages)
    window = window_needing(messages, 2.5 * turn_chars(messages, 1))
    context = {"tokens": int(chars / CHARS_PER_TOKEN), "window": window, "percent": 100 * chars / CHARS_PER_TOKEN / window}
    answer, _ = run_hook(json.dumps(event([m.to_wire() for m in messages], data_dir, context=context)).encode(), data_dir)

    assert "cut outputs not archived" in hook_log(data_dir)
    texts = [m.get("text", "") for m in answer.get("messages", [])]
    # No line points at a file that is not there: no turn left the conversation.
    assert not any(is_turn_index_line(text) or "saved at" in text for text in texts)
