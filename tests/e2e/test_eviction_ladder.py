"""The eviction ladder in the real Claude Code 2.1.332 (issue 21): a session compacted three
times over a context that cutting tool outputs cannot bring under the window's target.

The fake reports a context of some 45 % of the default model's 1,000,000-token window (its base
tokens stand for what the conversation's characters leave out: system prompt, tools, memory),
so every ``/compact`` aims under the 40 % ``targetPercent`` and goes down the ladder: the outputs
are cut (rung a), then a Write call's body moves to the archive (rung b), then the oldest whole
turns (rung d), then the older part of the turn in flight (rung e): the need is more than the
whole conversation holds. (A manual ``/compact`` gets a window only from 40 % on, so its need is
at least the 2-point margin, 80,000 characters: more than rungs a and b can free here, and pass
one always reaches rung e.) The model then follows the markers with the Read tool, from the old
turn's index line to the turn's file, from there to the file of the part of it moved before,
and from that to the Write body's file, and gets the originals back. No summary is asked for at
any point.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from claude_harness import Claude
from fake_anthropic import FINAL_TEXT, RECOVER_ALL, REPORT, conversation
from fast_jev_compaction.decide.markers import LEAD_HEAD, is_turn_index_line
from test_claude_plugin import _blocks, _result_text
from test_repeated_compaction import grown_round, manual_pass

pytestmark = pytest.mark.e2e

ROUNDS = ("do the writing thing", "do round two", "do round three")
# 45 % of the default model's window: the 40 % target (less its 2-point margin) is some 70,000
# tokens, about 245,000 characters, away; the whole conversation holds less than that.
CONTEXT_TOKENS = 450_000
OLD_TURN = "old-turn"
INPUT_MARKER = re.compile(r"moved this ([\d,]+)-char content to the archive: saved at (\S+?); Read it if needed; the file on disk holds its current content\]")
LINE_NUMBER = re.compile(r"^\s*\d+[→\t]")
# An old turn's index line, whole or shrunk to the file it names (rung e).
INDEX_PATH = re.compile(r"the whole turn (?:\([\d,]+ chars\) )?is saved at (\S+?); Read it if needed\]")
PART_PATH = re.compile(r"this part of the turn \([\d,]+ chars\) is saved at (\S+?); Read it if needed\]")
TURN_HEAD = "## the user's prompt\n"


def shown(read_result: str) -> str:
    """A file as the Read tool showed it, without its line numbers (and the empty line it shows
    after a final line break)."""
    return "\n".join(LINE_NUMBER.sub("", line) for line in read_result.splitlines()).rstrip("\n") + "\n"


def write_inputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b["input"] for m in conversation(body) for b in _blocks(m) if b.get("type") == "tool_use" and b["name"] == "Write"]


def assistant_texts(body: dict[str, Any]) -> list[str]:
    return [b.get("text", "") for m in conversation(body) if m["role"] == "assistant" for b in _blocks(m) if b.get("type") == "text"]


def test_a_write_body_and_old_turns_go_to_the_archive_and_are_read_back_without_a_summary(claude: Claude) -> None:
    claude.api.base_tokens = CONTEXT_TOKENS
    settings = claude.settings(preserveRecentMessages=2, targetPercent=40)
    (claude.project / "notes.txt").write_text("".join(f"notes row {n}\n" for n in range(1, 1501)))
    sid: str | None = None
    passes: list[list[Any]] = []
    for number, prompt in enumerate(ROUNDS, start=1):
        asked, sid = grown_round(claude, prompt, sid, settings)
        if number == 2:
            # Round two went on from pass one's history: the Write call is not there, an index
            # line after the first prompt names the file of the turn's older part that holds it.
            went_on = claude.api.message_requests()[asked]
            assert not write_inputs(went_on)
            parts = [m.group(1) for t in assistant_texts(went_on) for m in PART_PATH.finditer(t)]
        passes.append(manual_pass(claude, sid, settings, number))
        assert claude.api.summarizer_requests() == [], f"pass {number} asked for a summary"

    # Pass one: the outputs cut (rung a) and the Write body moved to the archive (rung b) fell
    # short; one turn only, the one in flight, so no old turn moved, and its older part, the
    # Write call included, went to one file (rung e), its last exchange staying in place.
    reasons = [row.reason for row, _ in claude.decisions()]
    assert "1 input(s) archived" in reasons[0] and "1 older part(s) of a turn moved" in reasons[0], reasons[0]
    assert "old turn(s)" not in reasons[0]
    [write] = [d for d in passes[0] if d.tool == "Write"]
    assert (write.action, write.reason) == ("drop", OLD_TURN) and [write.archive_path] == parts, (write, parts)
    assert [d.reason for d in passes[0] if d.action == "keep"] == ["pinned"]
    part_file = write.archive_path
    part_held = Path(part_file).read_text(encoding="utf-8")
    assert part_held.startswith(TURN_HEAD + "do the writing thing\n") and "Writing the report." in part_held
    # The part's file holds the Write call as rung b left it: its body a marker naming the file
    # that holds it.
    [(size, body_file)] = INPUT_MARKER.findall(part_held)
    assert int(size.replace(",", "")) == len(REPORT) and Path(body_file).read_text(encoding="utf-8") == REPORT
    assert REPORT not in part_held
    # Passes two and three: each moved the turn before its own to the archive (rung d), one file
    # per turn (and the older part of its own turn, rung e); round one's turn file holds the
    # index line of the part moved before.
    def whole_turns(decisions: list[Any], prompt: str) -> set[str]:
        return {
            d.archive_path for d in decisions
            if d.reason == OLD_TURN and Path(d.archive_path).read_text(encoding="utf-8").startswith(TURN_HEAD + prompt + "\n")
        }

    first_turn = whole_turns(passes[1], ROUNDS[0])
    second_turn = whole_turns(passes[2], ROUNDS[1])
    assert len(first_turn) == 1 and len(second_turn) == 1 and first_turn != second_turn
    assert all("1 old turn(s) moved to the archive" in reason for reason in reasons[1:]), reasons
    [turn_file] = first_turn
    held = Path(turn_file).read_text(encoding="utf-8")
    assert held.startswith(TURN_HEAD + "do the writing thing\n") and PART_PATH.findall(held) == [part_file]

    # The model is sent the prompts verbatim, each old turn as one index line, the lead line once.
    asked = len(claude.api.message_requests())
    recovered = claude.run(f"please {RECOVER_ALL}", resume=sid, settings=settings)
    assert recovered.returncode == 0 and recovered.result["result"] == FINAL_TEXT, recovered.stderr[-2000:]
    requests = claude.api.message_requests()
    first = requests[asked]
    texts = json.dumps(conversation(first))
    assert texts.count(LEAD_HEAD) == 1
    assert all(prompt in texts for prompt in ROUNDS)
    index_lines = [t for t in assistant_texts(first) if is_turn_index_line(t)]
    assert [INDEX_PATH.search(t).group(1) for t in index_lines if INDEX_PATH.search(t)] == [turn_file, *second_turn]
    # After them, the line of round three's older part, which pass three moved (rung e).
    [third_part] = {d.archive_path for d in passes[2] if d.reason == OLD_TURN} - second_turn
    assert [m.group(1) for t in index_lines for m in PART_PATH.finditer(t)] == [third_part] and len(index_lines) == 3
    assert "Writing the report." not in texts and not write_inputs(first)

    # It reads the first old turn's file through its index line's path, finds there the index
    # line of the part moved before, reads that part's file, finds there the Write call's
    # marker, reads that file too, and gets the turn, its part and the report back as they were.
    last = requests[-1]
    turn = conversation(last)
    at = max(i for i, m in enumerate(turn) if m["role"] == "user" and any(RECOVER_ALL in b.get("text", "") for b in _blocks(m)))
    reads = {
        b["id"]: b["input"]["file_path"]
        for m in turn[at:] if m["role"] == "assistant" for b in _blocks(m) if b.get("type") == "tool_use" and b["name"] == "Read"
    }
    got = {reads[b["tool_use_id"]]: _result_text(b) for m in turn[at:] for b in _blocks(m) if b.get("type") == "tool_result"}
    assert turn_file in got and shown(got[turn_file]) == held
    assert part_file in got and shown(got[part_file]) == part_held
    assert body_file in got, sorted(got)
    order = list(reads.values())
    assert order.index(turn_file) < order.index(part_file) < order.index(body_file)
    assert shown(got[body_file]) == REPORT
    # The file the Write call made is on disk as written.
    assert (claude.project / "report.md").read_text(encoding="utf-8") == REPORT
    # Every path a marker named, in view or in a file read, was there to read: no read failed.
    assert all("<tool_use_error>" not in text and "does not exist" not in text for text in got.values())

    # Each pass read the user's prompts as its goal, never the lead line the engine joined to
    # the first of them.
    goals = [line.split(" goal: ", 1)[1] for line in claude.hook_log().splitlines() if " goal: " in line]
    assert len(goals) == 3 and not any(LEAD_HEAD[:40] in goal for goal in goals), goals
    assert goals[1] == "do the writing thing | do round two", goals

    # Three passes, three boundaries, and never a summary: not asked for, not on disk.
    assert claude.api.summarizer_requests() == []
    records = claude.transcript(sid or "")
    assert sum(r.get("subtype") == "compact_boundary" for r in records) == 3
    assert not any(r.get("isCompactSummary") for r in records)
