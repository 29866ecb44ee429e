"""Rungs d and e of the eviction ladder (``turn_eviction.py``, ``ladder.compact_to_fit``): old
turns move to the archive, oldest first and only as far as the window needs (of the last, its
older part), then the pin shrinks; the user's prompts never change and no tool result loses its
call."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from fast_jev_compaction.cli import main
from fast_jev_compaction.compaction import compact_sync, run_sync
from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult, ToolUse, parse_messages
from fast_jev_compaction.conversation.sizes import message_chars
from fast_jev_compaction.conversation.transcript import read_messages
from fast_jev_compaction.decide.decisions import DROP, INPUT_ARCHIVED, OLD_TURN, PINNED, TRUNCATE, UNDER_TARGET
from fast_jev_compaction.decide.markers import (
    carries_mark,
    fold_note,
    is_lead_note,
    is_turn_index_line,
    lead_note,
    prompt_note,
    saved_path,
    short_index_line,
    turn_index_line,
)
from fast_jev_compaction.decide.policy import CHARS_PER_TOKEN, TARGET_MARGIN_POINTS
from fast_jev_compaction.decide.turn_eviction import (
    PROMPT_HEAD_CHARS,
    evict_in_flight,
    evict_turns,
    has_old_turn,
    in_flight_chars,
    in_flight_preserve,
    is_prompt,
    shorten_index_lines,
    shorten_old_prompts,
)
from fast_jev_compaction.hook.turns import regroup, turn_problems
from fast_jev_compaction.judge.local import LocalJudge
from fast_jev_compaction.ladder import compact_to_fit
from fast_jev_compaction.options import CompactOptions
from fast_jev_compaction.stats import CompactStats, summarize
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
    # Roles alternate around each index line of a whole turn: a prompt before it, a prompt (or the
    # end) after it. The line of the turn in flight's older part follows the prompt (or the lines
    # of parts moved before it), and the rest of the turn follows it.
    for at, line in index_lines(after):
        if PART in line.text:
            assert is_prompt(after[at - 1]) or is_turn_index_line(after[at - 1].text)
            continue
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


def long_old_turn() -> list[SessionMessage]:
    """A short first turn, a long old turn (``long_turn``'s twelve steps) and a newer turn of
    four short exchanges after it, whose last messages are the pinned window."""
    opening = [SessionMessage(role="user", text="prompt: what does this project do?"), SessionMessage(role="assistant", text="It ports modules.")]
    newer = [SessionMessage(role="user", text="prompt: now run the tests")]
    for k in range(4):
        newer += [
            SessionMessage(role="assistant", text=f"Running part {k}.", toolUses=(ToolUse(f"toolu_t{k}", "Bash", {"command": f"pytest -k part{k}"}),)),
            SessionMessage(role="user", toolResults=(ToolResult(f"toolu_t{k}", f"{k + 3} passed"),)),
        ]
    return [*opening, *long_turn(), *newer]


def test_the_turn_the_rest_of_the_need_falls_in_gives_up_only_its_older_part(tmp_path: Path) -> None:
    """Old turns go whole while the need is larger; the turn it ends in moves only the older part
    that frees the rest, as the turn in flight does: a whole long turn would free far more than
    the window needs."""
    messages = long_old_turn()
    old_turn = messages[2:39]
    whole = sum(message_chars(m) for m in old_turn)
    result = fit(messages, tmp_path, window_needing(messages, whole / 4))

    ((at, line),) = index_lines(result.messages)
    assert PART in line.text and result.messages[at - 1].text == "prompt: port every module to the new API"
    assert (result.stats.evicted_turns, result.stats.evicted_parts) == (0, 1)
    texts = [m.text for m in result.messages]
    # The oldest steps left; the newer ones, the turn's closing reply among them, stay in place.
    assert reply(0) not in texts and reply(11) in texts and result.messages[at + 1].role == "assistant"
    freed = result.stats.chars_before - result.stats.chars_after
    assert whole / 4 <= freed < whole / 2
    path = saved_path(line.text)
    assert path is not None and reply(0) in result.archive[path] and reply(11) not in result.archive[path]
    gone = {d.tool_use_id for d in result.decisions if d.reason == OLD_TURN}
    assert "toolu_0" in gone and "toolu_11" not in gone
    assert_whole(messages, result.messages)


def test_a_later_pass_takes_the_rest_of_a_partly_moved_old_turn_whole_and_its_file_names_the_part(tmp_path: Path) -> None:
    messages = long_old_turn()
    first = fit(messages, tmp_path, window_needing(messages, sum(message_chars(m) for m in messages[2:39]) / 4))
    prompt = next(at for at, m in enumerate(first.messages) if m.text == "prompt: port every module to the new API")
    part_line = first.messages[prompt + 1].text
    rest = first.messages[prompt + 1 : prompt + 1 + next(k for k, m in enumerate(first.messages[prompt + 1 :]) if is_prompt(m))]
    # A need as large as what is left of the turn: it goes whole, its one line after its prompt.
    again = fit(first.messages, tmp_path, window_needing(first.messages, sum(message_chars(m) for m in rest)))
    line = again.messages[prompt + 1]
    assert is_turn_index_line(line.text) and PART not in line.text and is_prompt(again.messages[prompt + 2])
    # The turn's file holds the part's line, whose file holds the oldest steps.
    path = saved_path(line.text)
    assert path is not None and part_line in again.archive[path] and reply(11) in again.archive[path]
    assert reply(0) in first.archive[saved_path(part_line)]
    assert_whole(messages, again.messages)


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


PART = "the assistant's replies to this prompt up to here"


def long_turn(exchanges: int = 12, *, in_flight: bool = False) -> list[SessionMessage]:
    """One prompt and a long turn answering it: a Read of its own module and a reply per step;
    ``in_flight``: the turn ends with parallel Reads of two large files just returned."""
    messages = [SessionMessage(role="user", text="prompt: port every module to the new API")]
    for k in range(exchanges):
        body = "\n".join(f"def mod{k}_f{n}(x):  # step {k}.{n}\n    return api.call({k}, {n}, x)" for n in range(40))
        messages += [
            SessionMessage(role="assistant", text=f"Reading mod{k}.", toolUses=(ToolUse(f"toolu_{k}", "Read", {"file_path": f"src/mod{k}.py"}),)),
            SessionMessage(role="user", toolResults=(ToolResult(f"toolu_{k}", body),)),
            SessionMessage(role="assistant", text=reply(k)),
        ]
    if in_flight:
        big = "\n".join(f"line {n}: value = compute({n}) + offset" for n in range(BIG_OUTPUT // 40))
        messages += [
            SessionMessage(role="assistant", toolUses=(ToolUse("toolu_a", "Read", {"file_path": "src/a.py"}),)),
            SessionMessage(role="assistant", toolUses=(ToolUse("toolu_b", "Read", {"file_path": "src/b.py"}),)),
            SessionMessage(role="user", toolResults=(ToolResult("toolu_a", big.replace("line", "a-line")),)),
            SessionMessage(role="user", toolResults=(ToolResult("toolu_b", big.replace("line", "b-line")),)),
        ]
    return messages


def test_a_long_turn_in_flight_loses_its_older_part_oldest_first_and_keeps_its_last_exchange(tmp_path: Path) -> None:
    messages = long_turn()
    chars = sum(message_chars(m) for m in messages)
    # More than cutting every output frees, far less than the whole turn.
    result = fit(messages, tmp_path, window_needing(messages, chars / 2))
    ((at, line),) = index_lines(result.messages)
    assert at == 1 and PART in line.text and (result.stats.evicted_turns, result.stats.evicted_parts) == (0, 1)
    # The oldest replies went, the last exchange (the last Read, its output, the closing reply)
    # stays in place, and the ones in between only as far as the need.
    texts = [m.text for m in result.messages]
    assert reply(0) not in texts and reply(6) in texts
    assert [u.tool_use_id for m in result.messages[-3:] for u in m.toolUses] == ["toolu_11"]
    assert [r.tool_use_id for m in result.messages[-3:] for r in m.toolResults or ()] == ["toolu_11"]
    assert result.messages[-1].text == reply(11)
    assert result.stats.short_chars == 0 and result.stats.chars_after == sum(message_chars(m) for m in result.messages)
    # Its file holds the replies and calls it stands for, and the index line says which.
    path = saved_path(line.text)
    assert path is not None and reply(0) in result.archive[path] and "toolu_0" in result.archive[path]
    assert "files touched: src/mod0.py, src/mod1.py" in line.text
    gone = {d.tool_use_id for d in result.decisions if d.reason == OLD_TURN}
    assert "toolu_0" in gone and "toolu_11" not in gone
    assert_whole(messages, result.messages)


def test_a_later_pass_moves_the_next_part_after_the_first_parts_line(tmp_path: Path) -> None:
    messages = long_turn()
    first = fit(messages, tmp_path, window_needing(messages, sum(message_chars(m) for m in messages) / 2))
    again = fit(first.messages, tmp_path, TINY_WINDOW)
    lines = [line.text for _, line in index_lines(again.messages)]
    assert len(lines) == 2 and lines[0] == index_lines(first.messages)[0][1].text
    # The second part's file holds no index line: a file never names another part's file.
    assert not any(PART in text for text in again.archive.values())
    assert_whole(messages, again.messages)


def test_when_the_exchange_in_flight_alone_is_over_the_target_its_outputs_are_cut(tmp_path: Path) -> None:
    messages = long_turn(2, in_flight=True)
    result = fit(messages, tmp_path, TINY_WINDOW * 100)
    cut = {d.tool_use_id: d for d in result.decisions}
    assert cut["toolu_a"].action == TRUNCATE and cut["toolu_b"].action == TRUNCATE
    # Each is archived whole, and its calls stay in place with their results.
    assert all(r.text in result.archive.values() for m in messages[-2:] for r in m.toolResults or ())
    assert [u.tool_use_id for m in result.messages[-4:] for u in m.toolUses] == ["toolu_a", "toolu_b"]
    assert_whole(messages, result.messages)


def test_an_exchange_in_flight_too_large_to_stay_whole_is_cut_before_old_turns_leave(tmp_path: Path) -> None:
    """A Read just returned, larger than all the aim leaves: it cannot stay whole whatever else
    leaves, so it is cut first, and old turns go only for what that cut left to free."""
    big = "\n".join(f"line {n}: value = compute({n}) + offset" for n in range(BIG_OUTPUT // 40))
    messages = [
        *session(),
        SessionMessage(role="user", text="prompt 8: read src/big.py"),
        SessionMessage(role="assistant", text="Reading the big file.", toolUses=(ToolUse("toolu_big", "Read", {"file_path": "src/big.py"}),)),
        SessionMessage(role="user", toolResults=(ToolResult("toolu_big", big),)),
    ]
    aim = 0.9 * len(big)
    window = int(aim / ((40 - TARGET_MARGIN_POINTS) / 100 * CHARS_PER_TOKEN))
    result = fit(messages, tmp_path, window, preserve=in_flight_preserve(messages, 6))
    decided = {d.tool_use_id: d for d in result.decisions}
    assert decided["toolu_big"].action == TRUNCATE
    assert big in result.archive.values()
    # The oldest turns went (the first prompt's turn stays, as the first message does), the
    # newest stay whole, and the context is under its aim.
    assert decided["toolu_1"].reason == OLD_TURN and decided[f"toolu_{TURNS - 1}"].reason != OLD_TURN
    assert reply(TURNS - 1) in [m.text for m in result.messages]
    assert 0 < result.stats.evicted_turns < TURNS - 1
    assert result.stats.chars_after <= aim

def test_an_output_cut_in_a_moved_part_of_a_turn_later_evicted_is_reached_through_three_files(tmp_path: Path) -> None:
    """The first pass cuts Reads to digests and moves the turn's older part; a later prompt makes
    that turn an old one, and the next pass evicts it whole: the turn's file names the part's
    file, whose digests name the outputs' own."""
    from fast_jev_compaction.evaluation.outcome import MARKER_PATH, Context, read_archived

    messages = long_turn()
    first = fit(messages, tmp_path, window_needing(messages, 0.8 * sum(message_chars(m) for m in messages)))
    later = [*first.messages, SessionMessage(role="user", text="prompt: now run the tests"),
             SessionMessage(role="assistant", text="Running them.")]
    second = fit(later, tmp_path, TINY_WINDOW)
    archive = {**first.archive, **second.archive}
    ((_, line), *_rest) = index_lines(second.messages)
    assert PART not in line.text
    original = messages[2].toolResults[0].text  # toolu_0's output
    (turn_file,) = Context.of(second.messages).marker_paths
    named = [match.group(1) for match in MARKER_PATH.finditer(archive[turn_file])]
    # Neither the turn's file nor the files it names hold the output whole: the part's names it.
    assert original not in archive[turn_file] and not any(original in archive[path] for path in named)
    in_view = [turn_file]
    assert any(original in text for text in read_archived(in_view, archive))


def test_a_parts_line_merged_with_the_next_calls_leaves_with_them_never_apart_from_their_results(tmp_path: Path) -> None:
    """The hook writes a part's index line and the reply after it back as one message (the
    engine's turn shape): the next pass's part starts there, the calls with their results."""
    line = turn_index_line([("Bash", 1)], [], 924, str(tmp_path / "part.txt"), part=True)
    messages = regroup([
        SessionMessage(role="user", text="prompt: do round two"),
        SessionMessage(role="assistant", text=line),
        SessionMessage(role="assistant", toolUses=(ToolUse("toolu_x", "Bash", {"command": "make"}),)),
        SessionMessage(role="user", toolResults=(ToolResult("toolu_x", "build output\n" * 400),)),
        SessionMessage(role="assistant", text="Almost done.", toolUses=(ToolUse("toolu_y", "Bash", {"command": "echo done"}),)),
        SessionMessage(role="user", toolResults=(ToolResult("toolu_y", "done"),)),
    ])
    assert len(messages) == 5 and is_turn_index_line(messages[1].text) and messages[1].toolUses
    part = evict_in_flight(messages, [], 2, 1000, str(tmp_path))
    assert [t.part for t in part.turns] == [True]
    assert_whole(messages, part.messages)
    # The trailing exchange stays in place; the moved part's file holds toolu_x, its output and
    # the earlier line (the way back to the earlier part's file).
    assert part.messages[-2:] == messages[-2:]
    (text,) = part.archive.values()
    assert "toolu_x" in text and "build output" in text and str(tmp_path / "part.txt") in text
    # With nothing but the merged message before the trailing exchange held back, nothing moves apart.
    assert evict_in_flight(messages[:3], [], 0, 1000, str(tmp_path)).messages == messages[:3]


def wide_session(turns: int = 30) -> list[SessionMessage]:
    """A first prompt, then ``turns`` turns that each read and edit a few files (long index
    lines), and a last turn in flight."""
    messages = [SessionMessage(role="user", text="prompt: start")]
    for k in range(turns):
        files = [f"src/package_{k}/module_{n}_with_a_long_descriptive_name.py" for n in range(6)]
        messages.append(SessionMessage(role="user", text=f"prompt {k}: tidy package {k}"))
        for n, file in enumerate(files):
            messages += [
                SessionMessage(role="assistant", toolUses=(ToolUse(f"toolu_{k}_{n}", "Read", {"file_path": file}),)),
                SessionMessage(role="user", toolResults=(ToolResult(f"toolu_{k}_{n}", f"x_{k}_{n} = {k * n}\n" * 40),)),
            ]
        messages.append(SessionMessage(role="assistant", text=f"Package {k} tidied."))
    messages += [SessionMessage(role="user", text="prompt: and the last one"), SessionMessage(role="assistant", text="Done.")]
    return messages


def is_short(line: SessionMessage) -> bool:
    return line.text == short_index_line(str(saved_path(line.text)))


def test_once_every_turn_has_gone_the_oldest_index_lines_shrink_to_their_files(tmp_path: Path) -> None:
    messages = wide_session()
    # Old turns meet the need: their lines stay whole.
    some = fit(messages, tmp_path, window_needing(messages, 0.7 * sum(message_chars(m) for m in messages)))
    lines = index_lines(some.messages)
    assert 0 < len(lines) < 30 and not any(is_short(line) for _, line in lines)
    # They cannot: every turn goes, then every line shrinks to the file it names.
    every = fit(messages, tmp_path, TINY_WINDOW)
    assert len(index_lines(every.messages)) == 30 and all(is_short(line) for _, line in index_lines(every.messages))
    assert every.stats.chars_after == sum(message_chars(m) for m in every.messages)
    assert_whole(messages, every.messages)

    # Oldest first, and only as far as the need.
    saving = message_chars(lines[0][1]) - len(short_index_line(str(saved_path(lines[0][1].text))))
    shrunk, freed = shorten_index_lines(some.messages, 2.5 * saving)
    assert [is_short(line) for _, line in index_lines(shrunk)] == [True] * 3 + [False] * (len(lines) - 3)
    assert freed == sum(map(message_chars, some.messages)) - sum(map(message_chars, shrunk)) >= 2.5 * saving
    assert [saved_path(line.text) for _, line in index_lines(shrunk)] == [saved_path(line.text) for _, line in lines]


def pasted(k: int, size: int) -> str:
    return f"prompt {k}: here is the log\n" + "".join(f"log {k} line {n}: step ok\n" for n in range(size // 22))


def long_prompts_session() -> list[SessionMessage]:
    """wide_session with a long pasted log as an old prompt, a long one that the user ended
    without a reply (a ``!`` command's output), and a long last prompt."""
    messages = wide_session(4)
    prompts = [at for at, m in enumerate(messages) if is_prompt(m)]
    messages[prompts[1]] = SessionMessage(role="user", text=pasted(1, 20_000), handle="h1")
    messages[prompts[-1]:prompts[-1]] = [SessionMessage(role="user", text=pasted(9, 30_000), handle="h9")]
    messages[-2] = SessionMessage(role="user", text=pasted(10, 8_000), handle="hlast")
    return messages


def test_when_nothing_else_is_left_old_prompts_keep_their_opening_and_the_last_stays_whole(tmp_path: Path) -> None:
    messages = long_prompts_session()
    before = [m for m in messages if is_prompt(m)]
    result = fit(messages, tmp_path, TINY_WINDOW)
    after = [m for m in result.messages if is_prompt(m)]
    assert len(after) == len(before)
    # The user's last prompt is the very same message; the long old ones keep their opening and
    # a note naming the file that holds each whole; the short ones stay as they were.
    assert after[-1] is before[-1]
    for old, new in zip(before[:-1], after[:-1]):
        if len(old.text) <= PROMPT_HEAD_CHARS + 200:
            assert new.text == old.text
            continue
        assert new.text.startswith(old.text[:PROMPT_HEAD_CHARS]) and len(new.text) < PROMPT_HEAD_CHARS + 300
        assert new.handle is None and carries_mark(new.text)
        path = saved_path(new.text)
        assert path is not None and result.archive[path] == old.text
        assert new.text.endswith(prompt_note(len(old.text), path))
    assert result.stats.chars_after == sum(map(message_chars, result.messages))
    shortened = sum(old.text != new.text for old, new in zip(before, after))
    assert shortened == result.stats.prompts_archived == 2
    assert f"; {shortened} old prompt(s) cut to their opening, each saved whole" in summarize(result.stats)
    from fast_jev_compaction.hook.answer import toast_text

    assert f"{shortened} old prompt(s) cut to their opening" in toast_text(result.stats, "under the target")


def test_the_first_prompt_cut_to_its_opening_keeps_the_lead_line_whole_and_the_users_opening(tmp_path: Path) -> None:
    """The engine joins the lead line to the first prompt, so a later pass reads it as that
    prompt's opening: the cut keeps the line whole (a later pass finds it, the model reads all of
    it) and the user's own opening after it."""
    messages = long_prompts_session()
    first = messages[0]
    lead = lead_note(str(tmp_path))
    messages[0] = SessionMessage(role="user", text=f"{lead}\n\n{pasted(0, 20_000)}", handle="h0")
    result = fit(messages, tmp_path, TINY_WINDOW)
    assert first.role == "user" and not result.stats.prompts_folded
    cut = result.messages[0]
    assert cut is not messages[0] and saved_path(cut.text) is not None
    assert result.archive[saved_path(cut.text)] == messages[0].text
    assert cut.text.startswith(f"{lead}\n\n{pasted(0, 20_000)[:PROMPT_HEAD_CHARS]}")
    assert len(cut.text) - len(lead) < PROMPT_HEAD_CHARS + 300


def written_session() -> list[SessionMessage]:
    """Turns that each write a module: long inputs, short outputs."""
    messages: list[SessionMessage] = []
    for k in range(TURNS):
        content = "\n".join(f"def g{k}_{n}(x):\n    return x * {n}  # body" for n in range(150))
        messages += [
            SessionMessage(role="user", text=f"prompt {k}: write src/w{k}.py"),
            SessionMessage(role="assistant", text=f"Writing w{k}.", toolUses=(
                ToolUse(f"toolu_w{k}", "Write", {"file_path": f"src/w{k}.py", "content": content}),)),
            SessionMessage(role="user", toolResults=(ToolResult(f"toolu_w{k}", "File created successfully"),)),
            SessionMessage(role="assistant", text=reply(k)),
        ]
    return [*messages, SessionMessage(role="user", text="now run the tests")]


@pytest.mark.parametrize("share", [0.1, 0.15, 0.2])
def test_a_call_pinned_in_the_first_pass_whose_input_the_second_moves_says_so(tmp_path: Path, share: float) -> None:
    """Rung e's pass, with the pin shrunk, may move the input of a call the first pass pinned:
    its decision names the file the input went to, as the first pass's would, and it is no
    longer counted as pinned."""
    messages = written_session()
    window = int(sum(map(message_chars, messages)) * share / CHARS_PER_TOKEN / 0.3)
    result = fit(messages, tmp_path, window)
    inputs = {use.tool_use_id: use.input for m in messages for use in m.toolUses}
    moved = [use.tool_use_id for m in result.messages for use in m.toolUses if use.input != inputs[use.tool_use_id]]
    decisions = {d.tool_use_id: d for d in result.decisions}
    assert moved
    for tool_use_id in moved:
        decision = decisions[tool_use_id]
        assert decision.reason == INPUT_ARCHIVED and decision.input_archive_path in result.archive, decision
    assert result.stats.pinned == sum(d.reason == PINNED for d in result.decisions)


def twice_read_session() -> list[SessionMessage]:
    """The same output read in an old turn and in a recent one (a file and its copy), and an
    old turn with a long reply: evicting that turn frees far more than the need."""
    same = "\n".join(f"line {n}: value = compute({n}) + offset  # shared module" for n in range(200))
    messages: list[SessionMessage] = []
    for k in range(TURNS):
        tool, given = ("Read", {"file_path": "src/a.py" if k == 1 else "src/copy_of_a.py"}) if k in (1, 6) else ("Bash", {"command": f"ls dir{k}"})
        messages += [
            SessionMessage(role="user", text=f"prompt {k}: look at things"),
            SessionMessage(role="assistant", text=f"Running {k}.", toolUses=(ToolUse(f"toolu_{k}", tool, given),)),
            SessionMessage(role="user", toolResults=(ToolResult(f"toolu_{k}", same if k in (1, 6) else f"small {k}\n" * 30),)),
            SessionMessage(role="assistant", text=reply(k) * (5 if k == 2 else 1)),
        ]
    return [*messages, SessionMessage(role="user", text="now fix it")]


def test_an_output_given_back_leaves_its_file_when_an_evicted_turn_names_it(tmp_path: Path) -> None:
    """Files are named by their content: an output given back whole shares its file with the
    same output cut in a turn moved out since, whose marker (in the turn's file) still names it."""
    messages = twice_read_session()
    window = int(sum(map(message_chars, messages)) * 0.472 / CHARS_PER_TOKEN / 0.3)
    result = fit(messages, tmp_path, window, preserve=2)
    decisions = {d.tool_use_id: d for d in result.decisions}
    assert (decisions["toolu_1"].reason, decisions["toolu_6"].reason) == (OLD_TURN, UNDER_TARGET)
    named = {
        path for text in [*result.archive.values(), *(m.text for m in result.messages)]
        for path in re.findall(r"saved at (\S+?\.txt)", text)
    }
    assert named and named <= result.archive.keys()


def test_a_prompt_pasted_twice_is_counted_each_time_it_is_cut(tmp_path: Path) -> None:
    """The same log pasted in two old prompts is one file, but two prompts cut: the count says
    what the messages hold, not how many files hold them."""
    messages = long_prompts_session()
    prompts = [at for at, m in enumerate(messages) if is_prompt(m)]
    messages[prompts[2]] = SessionMessage(role="user", text=messages[prompts[1]].text, handle="h2")
    before = [m for m in messages if is_prompt(m)]
    result = fit(messages, tmp_path, TINY_WINDOW)
    after = [m for m in result.messages if is_prompt(m)]
    assert len(after) == len(before)
    shortened = sum(old.text != new.text for old, new in zip(before, after))
    assert shortened == result.stats.prompts_archived == 3
    assert len({saved_path(new.text) for old, new in zip(before, after) if old.text != new.text}) == 2


def test_old_prompts_stay_whole_while_the_rungs_above_meet_the_need(tmp_path: Path) -> None:
    messages = long_prompts_session()
    # Old turns going meets this need: every prompt is the very same message.
    result = fit(messages, tmp_path, window_needing(messages, 2_000))
    assert [m for m in result.messages if is_prompt(m)] == [m for m in messages if is_prompt(m)]


def test_old_prompts_shrink_oldest_first_and_only_as_far_as_the_need(tmp_path: Path) -> None:
    messages = long_prompts_session()
    prompts = [m for m in messages if is_prompt(m)]
    long_ones = [m for m in prompts[:-1] if len(m.text) > 1000]
    shrunk, freed, files = shorten_old_prompts(messages, 1000, str(tmp_path))
    changed = [m for m in prompts if m not in shrunk]
    assert changed == long_ones[:1] and list(files.values()) == [long_ones[0].text]
    assert freed == sum(map(message_chars, messages)) - sum(map(message_chars, shrunk)) >= 1000
    every, _, files = shorten_old_prompts(messages, 10**9, str(tmp_path))
    assert sorted(files.values()) == sorted(m.text for m in long_ones)
    assert [m for m in every if is_prompt(m)][-1] is prompts[-1]


def test_an_old_prompt_is_cut_only_when_most_of_it_leaves(tmp_path: Path) -> None:
    """A prompt just past its opening would give the user's words for a few characters (a real
    pass freed 2 of the 130,176 it needed, and replaced the history for it)."""
    messages = long_prompts_session()
    prompts = [at for at, m in enumerate(messages) if is_prompt(m)]
    barely, most = prompts[1], prompts[2]
    messages[barely] = SessionMessage(role="user", text="b" * (PROMPT_HEAD_CHARS + 400), handle="hb")
    messages[most] = SessionMessage(role="user", text="m" * (PROMPT_HEAD_CHARS * 4), handle="hm")
    shrunk, freed, files = shorten_old_prompts(messages, 10**9, str(tmp_path))
    assert shrunk[barely] is messages[barely]
    assert shrunk[most] is not messages[most] and messages[most].text in files.values()
    # What the cut prompt keeps (its opening and the note) is less than what it moved out.
    assert len(shrunk[most].text) < len(messages[most].text) - len(shrunk[most].text)


def test_an_old_pasted_prompt_goes_before_the_older_part_of_the_turn_in_flight(tmp_path: Path) -> None:
    """Least valuable first: an old prompt past its opening frees the need before any of the
    turn in flight, the most recent work, moves out."""
    old = [SessionMessage(role="user", text=pasted(0, 12_000)), SessionMessage(role="assistant", text="Noted.")]
    messages = old + long_turn()
    # More than cutting every output frees; less than that and the pasted prompt together.
    result = fit(messages, tmp_path, window_needing(messages, 25_000))
    assert result.stats.evicted_parts == 0 and not any(PART in line.text for _, line in index_lines(result.messages))
    assert result.messages[0].text.startswith(old[0].text[:PROMPT_HEAD_CHARS]) and len(result.messages[0].text) < 1000
    assert result.messages[-1].text == reply(11) and reply(0) in [m.text for m in result.messages]


def test_an_old_turn_goes_before_a_recent_output_under_its_cut_over_is_cut(tmp_path: Path) -> None:
    """Rung a's further cuts (outputs under their cut-over) wait while old turns can go: the
    oldest turn is worth less than a recent output the budget would not cut by its size."""
    body = "\n".join(f"def helper_{n}(x):  # recent\n    return x + {n}" for n in range(90))
    messages = session() + [
        SessionMessage(role="user", text="prompt: check the helpers"),
        SessionMessage(role="assistant", text="Reading them.", toolUses=(ToolUse("toolu_mid", "Read", {"file_path": "src/helpers.py"}),)),
        SessionMessage(role="user", toolResults=(ToolResult("toolu_mid", body),)),
        SessionMessage(role="assistant", text="They add offsets."),
    ] + [m for k in range(4) for m in (SessionMessage(role="user", text=f"prompt: next {k}"), SessionMessage(role="assistant", text="ok"))]
    assert 3_000 < len(body) < 6_000 and has_old_turn(messages, 6)
    # Cutting that output alone would meet this need, and so would the oldest turn that can go.
    result = fit(messages, tmp_path, window_needing(messages, 2_000))
    decisions = {d.tool_use_id: d for d in result.decisions}
    assert decisions["toolu_mid"].action == "keep" and result.stats.evicted_turns >= 1
    assert {r.tool_use_id: r.text for m in result.messages for r in m.toolResults or ()}["toolu_mid"] == body
    assert_whole(messages, result.messages)
    # One long turn has none to move out (its further cuts come in the first pass, as before);
    # nor a session whose turns but the first message's all end in the pinned window.
    assert not has_old_turn(long_turn(), 6) and not has_old_turn(messages, len(messages) - 1)


def test_the_turn_in_flight_is_counted_from_the_last_prompt() -> None:
    messages = long_prompts_session()
    last = max(at for at, m in enumerate(messages) if is_prompt(m))
    assert in_flight_chars(messages) == sum(map(message_chars, messages[last:]))
    tools_only = [m for m in messages if not is_prompt(m)]
    assert in_flight_chars(tools_only) == sum(map(message_chars, tools_only))


def test_a_prompt_whose_image_rung_c_moved_is_still_its_turn_s_prompt(tmp_path: Path) -> None:
    """Rung c gives an old prompt whose image it moved a new message, without its handle: rung d
    still finds it by its text, and evicts its turn behind it."""
    from test_ladder import with_image

    plain = session()
    messages = with_image([*plain[:4], replace(plain[4], handle="h-prompt-1"), *plain[5:]], 4)
    result = fit(messages, tmp_path, TINY_WINDOW)
    assert result.stats.media_archived == 1
    moved = next(m for m in result.messages if m.text == messages[4].text)
    assert moved is not messages[4] and moved.handle is None
    evicted = [result.messages[at - 1].text for at, _ in index_lines(result.messages)]
    assert messages[4].text in evicted


def test_a_turn_whose_call_the_user_interrupted_leaves_with_its_call(tmp_path: Path) -> None:
    """A call never answered (the user interrupted it) parts no pair when its turn leaves."""
    messages = [
        SessionMessage(role="user", text="prompt 0"),
        SessionMessage(role="assistant", text="Long reply. " * 80, toolUses=(ToolUse("toolu_x", "Bash", {"command": "sleep 100"}),)),
        SessionMessage(role="user", text="prompt 1: never mind"),
        SessionMessage(role="assistant", text="Fine."),
    ]
    evicted = evict_turns(messages, messages, [], 0, 10**6, str(tmp_path), keep_first=False)
    assert len(evicted.turns) == 1 and not any(m.toolUses for m in evicted.messages)
    assert "toolu_x" in next(iter(evicted.archive.values()))
    # A call answered in a later turn keeps its turn in place.
    answered_later = [*messages[:2], SessionMessage(role="user", toolResults=(ToolResult("toolu_x", "done"),)), *messages[2:]]
    answered_later[2:2] = [SessionMessage(role="user", text="prompt between")]
    kept = evict_turns(answered_later, answered_later, [], 0, 10**6, str(tmp_path), keep_first=False)
    assert kept.turns == [] and any(m.toolUses for m in kept.messages)


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
    # The earlier lines still name their files (shrunk to them, the window being tiny).
    files_before = [saved_path(line.text) for _, line in index_lines(first.messages)]
    assert set(files_before) < {saved_path(line.text) for _, line in index_lines(again.messages)}
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
EXPECTED_PART_INDEX = (
    "[fast-jev-compaction: the assistant's replies to this prompt up to here and its 12 tool calls (Read ×9, "
    "Bash ×3) were moved out of the conversation; files touched: src/app.py; this part of the turn (54,321 "
    f"chars) is saved at {ARCHIVE}; Read it if needed]"
)
EXPECTED_PROMPT_NOTE = (
    "[fast-jev-compaction moved the rest of this prompt out of the conversation; the whole prompt "
    f"(54,321 chars) is saved at {ARCHIVE}; Read it if needed]"
)
EXPECTED_FOLD_NOTE = (
    f"[fast-jev-compaction: the conversation before this point (12 prompt(s), 54,321 chars) is saved at {ARCHIVE}; "
    "Read it if needed]"
)
EXPECTED_SHORT_INDEX = (
    "[fast-jev-compaction: the assistant's replies to this prompt, with their calls, were moved out of the "
    f"conversation; the whole turn is saved at {ARCHIVE}; Read it if needed]"
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
        "part index line": turn_index_line([("Read", 9), ("Bash", 3)], ["src/app.py"], 54321, ARCHIVE, part=True),
        "short index line": short_index_line(ARCHIVE),
        "prompt note": prompt_note(54321, ARCHIVE),
        "fold note": fold_note(12, 54321, ARCHIVE),
        "lead note with its folder": lead_note(FOLDER),
    }


def test_the_index_lines_and_the_lead_note_are_pinned() -> None:
    texts = new_texts()
    assert texts["index line"] == EXPECTED_INDEX
    assert texts["one-call index line"] == EXPECTED_ONE_CALL_INDEX
    assert texts["text-only index line"] == EXPECTED_TEXT_INDEX
    assert texts["part index line"] == EXPECTED_PART_INDEX
    assert texts["short index line"] == EXPECTED_SHORT_INDEX
    assert texts["prompt note"] == EXPECTED_PROMPT_NOTE
    assert texts["fold note"] == EXPECTED_FOLD_NOTE
    assert texts["lead note with its folder"] == EXPECTED_LEAD_WITH_FOLDER
    many = turn_index_line([("Read", 10)], [f"f{n}.py" for n in range(10)], 1, ARCHIVE)
    assert "files touched: f0.py, f1.py, f2.py, f3.py, f4.py, f5.py, f6.py, f7.py and 2 more;" in many


@pytest.mark.parametrize("name", list(new_texts()))
def test_the_new_texts_inform_without_alarm(name: str) -> None:
    text = new_texts()[name]
    assert not any(word in text for word in FORBIDDEN)
    assert not any(phrase in text.lower() for phrase in FORBIDDEN_ANY_CASE)


@pytest.mark.parametrize("name", ["index line", "one-call index line", "text-only index line", "part index line", "short index line"])
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

