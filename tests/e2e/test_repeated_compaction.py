"""Repeated compaction of one growing session in the real Claude Code 2.1.332 (issue 7).

The seed system's later passes destroyed what the first one kept: a second pass that freed
little fell to the built-in summary, the 60 % trigger fired again on every turn, and a result
cut twice overwrote its archived original. These cases drive one session through several
passes and check, from the fake API's side, that no summary is ever asked for, that each pass
hands the model the pruned history with its markers, and that every marker's file still holds
the output it stands for.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from claude_harness import Claude, Tui, wait_for
from fake_anthropic import FINAL_TEXT, conversation
from fast_jev_compaction.decide.markers import LEAD_HEAD, carries_mark
from test_claude_plugin import _blocks, _result_text, items

pytestmark = pytest.mark.e2e

OLD_TURN = "old-turn"
# How an old turn's archive file starts (turn_eviction.render_turn).
TURN_HEAD = "## the user's prompt\n"
ROUNDS = ("do the thing", "do round two", "do round three")
# Every path a marker names: a cut output's note ("saved at …; Read it if needed") or a drop
# marker ("… is saved at …; Read it if needed"), or an older spelling ("full output: …").
NAMED_PATH = re.compile(r"(?:saved at|full output:) (\S+?)(?:;|\s|\])")


def results_of(body: dict[str, Any]) -> dict[str, str]:
    return {b["tool_use_id"]: _result_text(b) for m in conversation(body) for b in _blocks(m) if b.get("type") == "tool_result"}


def texts_of(body: dict[str, Any]) -> list[str]:
    """Every text the model is sent: prose blocks and tool results."""
    out: list[str] = []
    for message in conversation(body):
        for block in _blocks(message):
            if block.get("type") == "text":
                out.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                out.append(_result_text(block))
    return out


def originals_seen(requests: list[dict[str, Any]]) -> dict[str, str]:
    """Each tool output as the tool first returned it (before any pass could cut it)."""
    found: dict[str, str] = {}
    for body in requests:
        for tool_use_id, text in results_of(body).items():
            if tool_use_id not in found and not carries_mark(text):
                found[tool_use_id] = text
    return found


def reachable_paths(body: dict[str, Any]) -> set[str]:
    """Every path a request's markers name, and every path named in a named turn's file, on
    down the chain: rung e's index line names the file of the turn in flight's older part, and
    once that turn is old its own file holds that line."""
    found = {path for text in texts_of(body) for path in NAMED_PATH.findall(text)}
    todo = list(found)
    while todo:
        held = Path(todo.pop()).read_text(encoding="utf-8")
        if held.startswith(TURN_HEAD):
            new = set(NAMED_PATH.findall(held)) - found
            found |= new
            todo.extend(new)
    return found


def assert_pass_applied(body: dict[str, Any], decisions: list[Any], originals: dict[str, str], before: dict[str, str]) -> None:
    """The request after a pass: kept results as they were, cut ones carry a note whose file
    holds the original, dropped calls are gone and a marker names where their output went."""
    now = results_of(body)
    named = {path for text in texts_of(body) for path in NAMED_PATH.findall(text)}
    for decision in decisions:
        tool_use_id = decision.tool_use_id
        if decision.action == "drop":
            assert tool_use_id not in json.dumps(body), f"dropped call {tool_use_id} is still sent"
            assert decision.archive_path in named, f"no marker names {decision.archive_path}"
            continue
        assert tool_use_id in now, f"{decision.action} result {tool_use_id} is gone"
        if decision.action == "keep":
            # A call whose result the model has not read yet (a pass mid-turn) goes on whole.
            assert now[tool_use_id] == before.get(tool_use_id, originals[tool_use_id]), f"kept result {tool_use_id} changed"
        else:
            assert decision.action == "truncate"
            assert f"saved at {decision.archive_path}; Read it if needed]" in now[tool_use_id]
            assert len(now[tool_use_id]) < len(originals[tool_use_id])
        if decision.archive_path:
            assert Path(decision.archive_path).read_text(encoding="utf-8") == originals[tool_use_id]


def assert_history_holds(body: dict[str, Any], passes: list[list[Any]], originals: dict[str, str]) -> None:
    """A request after several passes: each call as its first cut left it (a later pass keeps a
    cut as it is), a never-cut result whole; or, once the ladder moved its old turn to the
    archive (rung d, or rung e's older part of the turn in flight), the call gone, an index line
    naming the turn's file (or a file down the chain of turn files the request names), and that
    file holding the call as the passes before left it."""
    first_cut: dict[str, Any] = {}
    evicted: dict[str, Any] = {}
    for decisions in passes:
        for decision in decisions:
            if decision.action == "drop" and decision.reason == OLD_TURN:
                evicted.setdefault(decision.tool_use_id, decision)
                first_cut.setdefault(decision.tool_use_id, None)
                continue
            if decision.action != "keep" and first_cut.get(decision.tool_use_id) is None:
                first_cut[decision.tool_use_id] = decision
            first_cut.setdefault(decision.tool_use_id, None)
    now = results_of(body)
    named = {path for text in texts_of(body) for path in NAMED_PATH.findall(text)}
    reachable = reachable_paths(body)
    for tool_use_id, cut in first_cut.items():
        turn = evicted.get(tool_use_id)
        if turn is not None:
            assert tool_use_id not in json.dumps(body), f"evicted call {tool_use_id} is still sent"
            assert turn.archive_path in reachable, f"no marker or turn file leads to {turn.archive_path}"
            held = Path(turn.archive_path).read_text(encoding="utf-8")
            assert f" call {tool_use_id}\n" in held
            if cut is None:
                # Whole, or cut by the pass that evicted its turn: the note names the original's file.
                output = turn_output(held, tool_use_id)
                saved = NAMED_PATH.findall(output)
                assert output == originals[tool_use_id] or (
                    len(saved) == 1 and Path(saved[0]).read_text(encoding="utf-8") == originals[tool_use_id]
                ), f"result {tool_use_id} is not recoverable from its turn's file"
            else:
                assert f"saved at {cut.archive_path}; Read it if needed]" in held
        elif cut is None:
            assert now[tool_use_id] == originals[tool_use_id], f"kept result {tool_use_id} changed"
        elif cut.action == "drop":
            assert tool_use_id not in json.dumps(body) and cut.archive_path in named
        else:
            assert f"saved at {cut.archive_path}; Read it if needed]" in now[tool_use_id]
        if cut is not None and cut.archive_path:
            assert Path(cut.archive_path).read_text(encoding="utf-8") == originals[tool_use_id]


def turn_output(held: str, tool_use_id: str) -> str:
    """A call's output as an old turn's archive file holds it (turn_eviction.render_turn)."""
    found = re.search(rf"^## output of \S+ call {re.escape(tool_use_id)}(?: \(an error\))?\n", held, re.M)
    assert found, f"no output of {tool_use_id} in its turn's file"
    end = held.find("\n\n## ", found.end())
    return held[found.end() : end if end >= 0 else len(held) - 1]


def assert_named_files_hold(body: dict[str, Any], passes: list[list[Any]], originals: dict[str, str]) -> None:
    """Every path the request's markers name holds a full original, or an old turn (rung d);
    every output a pass moved out is at its path, named in view or in a named turn's file."""
    named = {path for text in texts_of(body) for path in NAMED_PATH.findall(text)}
    turns = {d.archive_path for p in passes for d in p if d.reason == OLD_TURN}
    moved = {
        d.archive_path: originals[d.tool_use_id]
        for p in passes for d in p if d.action != "keep" and d.archive_path and d.reason != OLD_TURN
    }
    assert named
    reachable = set(named)
    for path in named:
        held = Path(path).read_text(encoding="utf-8")
        assert held in originals.values() or (path in turns and held.startswith(TURN_HEAD)), path
        if path in turns:
            reachable.update(NAMED_PATH.findall(held))
    assert set(moved) <= reachable
    for path, original in moved.items():
        assert Path(path).read_text(encoding="utf-8") == original


# --------------------------------------------------------------------------- three passes


def grown_round(claude: Claude, prompt: str, sid: str | None, settings: Any) -> tuple[int, str]:
    """One round of a resumed session: how many requests came before it, and the session id."""
    asked = len(claude.api.message_requests())
    grown = claude.run(prompt, resume=sid, settings=settings)
    assert grown.returncode == 0 and grown.result["result"] == FINAL_TEXT, grown.stderr[-2000:]
    return asked, sid or grown.session_id


def manual_pass(claude: Claude, sid: str, settings: Any, number: int) -> list[Any]:
    """``/compact`` as pass ``number``: it replaced the history without a summary; its decisions."""
    compacted = claude.run("/compact", resume=sid, settings=settings)
    assert compacted.returncode == 0, compacted.stderr[-2000:]
    assert [b["trigger"] for b in compacted.boundaries()] == ["manual"], f"pass {number}: {compacted.result}"
    [toast] = compacted.toasts()
    assert toast.endswith(", no summary"), toast
    rows = claude.decisions()
    assert [(row.trigger, row.outcome) for row, _ in rows] == [("manual", "replaced")] * number, [r.reason for r, _ in rows]
    return list(rows[-1][1])


def test_three_passes_over_a_growing_session_never_summarise_and_keep_every_original(claude: Claude) -> None:
    settings = claude.settings(preserveRecentMessages=2)
    (claude.project / "notes.txt").write_text("".join(f"notes row {n}\n" for n in range(1, 1501)))
    sid: str | None = None
    passes: list[list[Any]] = []
    for number, prompt in enumerate(ROUNDS, start=1):
        asked, sid = grown_round(claude, prompt, sid, settings)
        requests = claude.api.message_requests()
        if passes:
            # The session went on from the pruned history the last pass left.
            previous = results_of(requests[asked - 1])
            assert_pass_applied(requests[asked], passes[-1], originals_seen(requests), previous)
        last = requests[-1]

        decisions = manual_pass(claude, sid, settings, number)
        # Each pass sees the whole history: this round's calls and every call kept before.
        new_ids = set(results_of(last)) - {d.tool_use_id for p in passes for d in p if d.action == "drop"}
        assert {d.tool_use_id for d in decisions} == new_ids
        assert any(d.action != "keep" and d.tool_use_id not in {e.tool_use_id for p in passes for e in p} for d in decisions)
        # An output cut by an earlier pass is never cut again.
        for earlier in (d for p in passes for d in p if d.action == "truncate"):
            [again] = [d for d in decisions if d.tool_use_id == earlier.tool_use_id]
            assert (again.action, again.rule) == ("keep", "already-cut")
        passes.append(decisions)
        last_results = results_of(last)
        assert claude.api.summarizer_requests() == [], f"pass {number} asked for a summary"

    asked = len(claude.api.message_requests())
    follow = claude.run("what now?", resume=sid, settings=settings)
    assert follow.returncode == 0 and follow.result["is_error"] is False
    requests = claude.api.message_requests()
    final = requests[asked]
    originals = originals_seen(requests)
    assert_pass_applied(final, passes[-1], originals, last_results)
    assert_history_holds(final, passes, originals)
    # On disk: one boundary per pass, and no summary record after any of them.
    records = claude.transcript(sid)
    assert sum(r.get("subtype") == "compact_boundary" for r in records) == 3
    assert not any(r.get("isCompactSummary") for r in records)
    # One lead line for the model, however many passes ran.
    assert sum(text.count(LEAD_HEAD) for text in texts_of(final)) == 1

    # After three passes every path a marker names still holds a full original, and every
    # output any pass moved out is at its path.
    named = {path for text in texts_of(final) for path in NAMED_PATH.findall(text)}
    moved = {d.archive_path: originals[d.tool_use_id] for p in passes for d in p if d.action != "keep" and d.archive_path}
    assert named and set(moved) <= named
    for path in named:
        assert Path(path).read_text(encoding="utf-8") in originals.values(), path
    for path, original in moved.items():
        assert Path(path).read_text(encoding="utf-8") == original
    assert {d.action for p in passes for d in p} == {"keep", "truncate", "drop"}

    # A fourth pass finds nothing more to cut: it skips, and the history stays as it was.
    again = claude.run("/compact", resume=sid, settings=settings)
    assert again.returncode == 0 and again.result["result"].startswith("Not compacted"), again.result
    assert again.boundaries() == [] and again.toasts() == []
    [*_, (row, skipped)] = claude.decisions()
    assert (row.trigger, row.outcome) == ("manual", "skipped") and row.reason.startswith("nothing left to prune"), row.reason
    assert all(d.action == "keep" for d in skipped)
    asked = len(claude.api.message_requests())
    after = claude.run("and now?", resume=sid, settings=settings)
    assert after.returncode == 0 and after.result["is_error"] is False
    untouched = claude.api.message_requests()[asked]
    assert items(untouched)[: len(items(final)) + 1] == [*items(final), ("assistant_text", follow.result["result"])]
    assert claude.api.summarizer_requests() == []


def test_three_engine_auto_compactions_mid_turn_each_replace_the_history(claude: Claude) -> None:
    """The engine's own trigger, three times in one growing session: each round crosses the
    --autocompact limit between two of its tool calls, each pass replaces, the round goes on."""
    # Input tokens = 1,000 + the conversation's characters: a pass that cuts them lowers them.
    claude.api.token_factor = 4.0
    settings = claude.settings(preserveRecentMessages=2)
    (claude.project / "notes.txt").write_text("".join(f"notes row {n}\n" for n in range(1, 1501)))
    # Where a later round starts (the fake's base tokens make up the difference to the pruned
    # history): 2.1.332 under --autocompact 100000 compacts once the last usage plus the new
    # output passes about 60k, so a later round crosses after its second output or later,
    # never on its first (the next test crosses on the first).
    later_start = 33_000
    sid: str | None = None
    for number, prompt in enumerate(ROUNDS, start=1):
        asked = len(claude.api.message_requests())
        if asked:  # the engine takes no limit under 100k: the fake's base moves instead
            claude.api.base_tokens = later_start - len(json.dumps(conversation(claude.api.message_requests()[-1])))
        passes = len(claude.decisions())
        run = claude.run(prompt, "--autocompact", "100000", resume=sid, settings=settings)
        assert run.returncode == 0 and run.result["result"] == FINAL_TEXT, (run.result, run.stderr[-2000:])
        sid = sid or run.session_id
        # At least one pass in each round (the last round's pinned outputs take several), every
        # one a replacement.
        rows = claude.decisions()
        assert len(rows) > passes and {b["trigger"] for b in run.boundaries()} == {"auto"}
        assert len(run.boundaries()) == len(rows) - passes
        assert [(row.trigger, row.outcome) for row, _ in rows] == [("auto", "replaced")] * len(rows), [r.reason for r, _ in rows]
        assert all(toast.endswith(", no summary") for toast in run.toasts()) and run.toasts()
        assert claude.api.summarizer_requests() == [], f"round {number} asked for a summary"
        # The round went on from the pruned history, ran each of its steps once, and its last
        # request holds every pass's decisions so far.
        requests = claude.api.message_requests()
        uses = [json.dumps(b["input"], sort_keys=True) for m in conversation(requests[-1]) for b in _blocks(m) if b.get("type") == "tool_use"]
        assert len(uses) == len(set(uses))
        assert_history_holds(requests[-1], [list(ds) for _row, ds in rows], originals_seen(requests))
    assert len(claude.decisions()) >= 3

    requests = claude.api.message_requests()
    assert_named_files_hold(requests[-1], [list(ds) for _row, ds in claude.decisions()], originals_seen(requests))


def test_the_engine_firing_right_after_a_large_output_over_a_pruned_history_never_summarises(claude: Claude) -> None:
    """Found in the real binary: a later round crossed the --autocompact limit on its first
    output, which the pass keeps (in flight); over a history already pruned it freed under
    minReductionRatio (21 % here) and the built-in summary threw the verbatim history away.
    The mod now hands the hook the engine's threshold and compaction window (the usage
    breakdown): a pass is judged by them. Four rounds: the first pass replaces; the second
    round's passes replace, the first of them over the threshold with room left in the model's
    window (a later one also moves the older part of that turn in flight, rung e, its last
    exchange staying whole); the third round's pass, with nothing of its own to cut, moves round
    two's turn to the archive (the ladder's rung d) and replaces; the fourth round's pass finds nothing left
    to prune (round three's turn is smaller than its index line would be) and skips (the engine
    says "not compacted" and goes on with the turn)."""
    claude.api.token_factor = 4.0
    settings = claude.settings(preserveRecentMessages=2)
    # Prose the pass keeps whole: what it frees is a smaller share of the conversation.
    prose = " ".join(f"design note {n}: the parser keeps every field as it was read." for n in range(150))
    # Where each later round starts (the fake's base makes up the difference to the pruned
    # history): from 62k the first output of round two passes 2.1.332's 67k threshold under
    # --autocompact 100000, and a later round's one small output passes it from 75k.
    rounds = (
        ("do the thing", None), (f"do round two. {prose}", 62_000), ("do a small thing", 75_000), ("do a small thing", 75_000)
    )
    sid: str | None = None
    for number, (prompt, start) in enumerate(rounds, start=1):
        if start is not None:
            claude.api.base_tokens = start - len(json.dumps(conversation(claude.api.message_requests()[-1])))
        passes = len(claude.decisions())
        run = claude.run(prompt, "--autocompact", "100000", resume=sid, settings=settings)
        assert run.returncode == 0 and run.result["result"] == FINAL_TEXT, (run.result, run.stderr[-2000:])
        sid = sid or run.session_id
        rows = claude.decisions()[passes:]
        assert rows, f"round {number}: the engine never fired"
        assert len(run.boundaries()) == sum(row.outcome == "replaced" for row, _ in rows)
        assert claude.api.summarizer_requests() == [], f"round {number} asked for a summary"
        requests = claude.api.message_requests()
        assert_history_holds(requests[-1], [list(ds) for _row, ds in claude.decisions()], originals_seen(requests))
        if number == 1:
            assert [(row.trigger, row.outcome) for row, _ in rows] == [("auto", "replaced")]
        elif number == 2:
            assert [(row.trigger, row.outcome) for row, _ in rows] == [("auto", "replaced")] * len(rows)
            # The first pass fired on the round's first output (pinned, in flight): with
            # nothing of this round to cut, what it freed is round one's turn, moved whole to the
            # archive (the ladder's rung d), over a history the first pass had pruned.
            first_row, first = rows[0]
            [pinned] = [d for d in first if d.reason == "pinned"]
            assert "seq 100000 103000" in pinned.input_preview and "round two filler" not in json.dumps([d.input_preview for d in first])
            assert {(d.action, d.reason) for d in first if d.reason != "pinned"} == {("drop", OLD_TURN)}
            assert "1 old turn(s) moved to the archive" in first_row.reason, first_row.reason
            assert "67k threshold" in run.toasts()[0] and run.toasts()[0].endswith(", no summary"), run.toasts()
        elif number == 3:
            [(row, decisions)] = rows
            assert (row.trigger, row.outcome) == ("auto", "replaced"), row.reason
            assert "1 old turn(s) moved to the archive" in row.reason and "67k threshold" in run.toasts()[0], run.toasts()
            assert {(d.action, d.reason) for d in decisions if d.reason != "pinned"} == {("drop", OLD_TURN)}
            # This pass moved round two's turn, its last call in it; the older part of that turn
            # (the calls pinned in flight by round two's earlier passes) left with those passes'
            # later ones (rung e): by now every call of round two is in the archive.
            round_two = claude.decisions()[1:-1]
            assert {d.input_preview for d in decisions if d.reason == OLD_TURN} >= {d.input_preview for d in round_two[-1][1] if d.reason == "pinned"}
            moved = {d.input_preview for _row, ds in claude.decisions() for d in ds if d.reason == OLD_TURN}
            assert moved >= {d.input_preview for _row, ds in round_two for d in ds}
        else:
            # The engine may ask before the round's first request too (the round starts over its
            # threshold): each pass skips.
            for row, decisions in rows:
                assert (row.trigger, row.outcome) == ("auto", "skipped"), row.reason
                assert row.reason.startswith("nothing left to prune; context ") and "67k threshold with room left" in row.reason
                assert all(d.action == "keep" for d in decisions)
            assert run.toasts() == [] and run.boundaries() == []
            notices = [e["text"] for e in run.system("notification") if e.get("key") == "compaction-skipped"]
            assert len(notices) == len(rows) and all(n.startswith("not compacted · nothing left to prune") for n in notices), notices
    records = claude.transcript(sid or "")
    assert not any(r.get("isCompactSummary") for r in records)


# --------------------------------------------------------------------------- the 60 % trigger


# Turns of the interactive session: the prompt, and the input tokens the fake reports for its
# answer (of the default model's 1,000,000-token window), so turn.complete reads that share.
TRIGGER_TURNS = (
    ("do the thing", 640_000),  # crosses 60 %: a pass replaces the history
    ("quiet turn one", 640_000),  # still above: no pass
    ("quiet turn two", 640_000),
    # Grew more than 10 points: a pass. The first turn's outputs are cut already, so the ladder
    # moves that old turn whole to the archive (rung d, once the pin shrinks: rung e).
    ("quiet turn three", 770_000),
    ("quiet turn four", 770_000),
    ("quiet turn five", 300_000),  # back under the threshold
    ("quiet turn six", 620_000),  # a new crossing: a pass, with nothing left to cut
    ("quiet turn seven", 620_000),
    ("quiet turn eight", 740_000),  # grew 10 points again: a pass
    ("quiet turn nine", 740_000),  # no pass; its answer also means the last pass has finished
)
# The decision-log rows after each turn: one per pass.
PASSES_AFTER = [1, 1, 1, 2, 2, 2, 3, 3, 4, 4]


def test_the_trigger_fires_once_per_crossing_and_a_pass_with_nothing_to_cut_skips(claude: Claude) -> None:
    """Interactively (headless, $.session.compact() is refused): ten turns, four passes; two
    replace (the first cuts outputs, the second moves that old turn to the archive), two skip.

    The seed system fired on every turn over the threshold and each pass that freed nothing
    ran the built-in summary, throwing away the verbatim history the first pass kept.
    """
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed (.ci/install-claude.sh installs it with apt-get); the TUI cannot be driven")
    tui = Tui(claude, tmux)
    counts: list[int] = []
    try:
        tui.start(claude.settings(preserveRecentMessages=2, minFreedPercent=0))
        for (prompt, tokens), expected in zip(TRIGGER_TURNS, PASSES_AFTER):
            claude.api.base_tokens = tokens
            asked = len(claude.api.message_requests())
            tui.type(prompt)
            answer = f"Echo: {prompt}" if prompt.startswith("quiet") else FINAL_TEXT
            wait_for(tui.screen, lambda s, a=answer: a in s)
            assert len(claude.api.message_requests()) > asked, tui.screen()
            # A firing turn's pass leaves its row; a spurious one would show up by the next count.
            counts.append(len(wait_for(claude.decisions, lambda rows, n=expected: len(rows) >= n)))
    finally:
        tui.close()
    assert counts == PASSES_AFTER
    rows = claude.decisions()
    assert [(row.trigger, row.outcome) for row, _ in rows] == [("plugin", "replaced")] * 2 + [("plugin", "skipped")] * 2, (
        [(row.outcome, row.reason) for row, _ in rows]
    )
    # The second pass (77 %) moved the first turn, as the first pass left it, to one archive file.
    evicted = rows[1][1]
    assert evicted and {(d.action, d.reason) for d in evicted} == {("drop", OLD_TURN)}
    [turn_file] = {d.archive_path for d in evicted}
    held = Path(turn_file).read_text(encoding="utf-8")
    assert held.startswith(TURN_HEAD + "do the thing") and all(f" call {d.tool_use_id}\n" in held for d in evicted)
    # Each later pass fired at the turn that crossed or grew again (62 %, 74 % of the window),
    # found nothing left to cut (the quiet turns are shorter than an index line), and left the
    # history as it was.
    shares = [re.match(r"nothing left to prune; context (\d+)", row.reason) for row, _ in rows[2:]]
    assert [int(m.group(1)) // 10 if m else None for m in shares] == [6, 7], [row.reason for row, _ in rows]
    assert all(d.action == "keep" for _row, decisions in rows[2:] for d in decisions)
    assert claude.api.summarizer_requests() == []
    # The last turn was sent the history the second pass left: the lead line, the first prompt
    # and the index line naming its turn's file in place of its replies, the quiet turns whole.
    last = claude.api.message_requests()[-1]
    assert sum(text.count(LEAD_HEAD) for text in texts_of(last)) == 1
    assert {path for text in texts_of(last) for path in NAMED_PATH.findall(text)} == {turn_file}
    assert "Echo: quiet turn one" in json.dumps(last) and "seq 1 3000" not in json.dumps(last)
