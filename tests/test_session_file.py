"""``--format transcript`` (session_file.py): what a pass did not change comes back as it was.

Issue 22: the session file turned ToolSearch's ``tool_reference`` blocks into plain text and
left out each result record's ``toolUseResult``, even when nothing was cut. Checked on every
corpus transcript (entire-checkpoints included): written as read, and after a pass through the
CLI that cuts (a window, so the ladder archives inputs too).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fast_jev_compaction.cli import main
from fast_jev_compaction.conversation.messages import RECORD_FIELDS, SessionMessage, ToolResult, ToolUse
from fast_jev_compaction.conversation.pairing import collect_tool_calls
from fast_jev_compaction.conversation.session_file import transcript_records
from fast_jev_compaction.conversation.transcript import parse_transcript_with_stats, record_fields
from fast_jev_compaction.decide.decisions import CallDecision
from fast_jev_compaction.decide.digest import DigestShape
from fast_jev_compaction.decide.rebuild import rebuild

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
CORPUS_JSONL = sorted(CORPUS.rglob("*.jsonl")) if CORPUS.is_dir() else []
corpus_files = pytest.mark.parametrize("path", CORPUS_JSONL, ids=[str(p.relative_to(CORPUS)) for p in CORPUS_JSONL])

# A record's fields the writer makes for itself: a session file is a new session, with new ids.
WRITERS = frozenset({
    "type", "message", "uuid", "parentUuid", "logicalParentUuid", "timestamp", "sessionId", "cwd",
    "userType", "isSidechain", "version", "gitBranch", "slug", "agentId", "entrypoint", "promptId",
    "teamName", "isMeta", "sourceToolAssistantUUID",
})


def _records(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _read(path: Path) -> list[SessionMessage] | None:
    with path.open(encoding="utf-8") as handle:
        parsed = parse_transcript_with_stats(handle, path.name)
    return parsed.messages if parsed.stats.recognised else None


def _content(record: dict[str, Any]) -> list[Any]:
    content = record["message"]["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _as_written(content: Any) -> Any:
    # A bare string in a content list (edge_cases.jsonl, not an API shape) is read as text.
    return content if isinstance(content, str) else [{"type": "text", "text": b} if isinstance(b, str) else b for b in content]


def _results(record: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for block in _content(record):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            yield block


@corpus_files
def test_every_block_and_record_field_comes_back_as_it_was_when_nothing_is_cut(corpus_dir: Path, path: Path) -> None:
    """Written as read: each record's content equals the transcript's, block for block and in
    order (a turn's fragments, one record each there, are one record here), and a user record's
    own fields (a result's toolUseResult, a prompt's todos or isCompactSummary) equal the
    transcript's."""
    messages = _read(path)
    if messages is None:
        pytest.skip("not a transcript")
    records = _records(path)
    by_uuid = {r["uuid"]: r for r in records if isinstance(r.get("uuid"), str)}
    turns: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("type") == "assistant" and isinstance(r.get("message"), dict) and isinstance(r["message"].get("id"), str):
            turns[(r["message"]["id"], r.get("isSidechain"))].append(r)
    written = list(transcript_records(messages))
    for message, record in zip(messages, written, strict=True):
        original = by_uuid[message.handle]
        if message.role == "assistant":
            key = (original["message"].get("id"), original.get("isSidechain"))
            blocks = [b for r in turns.get(key, [original]) for b in _content(r)]
            assert _content(record) == _as_written(blocks)
        else:
            assert record["message"]["content"] == _as_written(original["message"]["content"])
            own = {k: v for k, v in original.items() if k not in WRITERS}
            assert {k: v for k, v in record.items() if k not in WRITERS} == own
            assert "toolUseResult" not in original or record["toolUseResult"] == original["toolUseResult"]
    # A result record names the record of its calls, as Claude Code's own do.
    ids = {r["uuid"]: {b["id"] for b in _content(r) if b.get("type") == "tool_use"} for r in written if r["type"] == "assistant"}
    for record in written:
        if "sourceToolAssistantUUID" in record:
            assert {b["tool_use_id"] for b in _results(record)} <= ids[record["sourceToolAssistantUUID"]]


@corpus_files
def test_a_pass_that_cuts_writes_back_what_it_did_not_cut_and_no_record_of_what_it_did(
    corpus_dir: Path, path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI with a small window: a result the pass left whole comes back with its
    block and its record's fields; a cut or rewritten result, or one whose call's input went to
    the archive, comes back without the record (its toolUseResult holds what was cut)."""
    before = _read(path)
    if before is None:
        pytest.skip("not a transcript")
    out = tmp_path / "out.jsonl"
    code = main(["compact", str(path), "--out", str(out), "--format", "transcript", "--judge", "local",
                 "--window", "16000", "--target-percent", "30", "--archive", str(tmp_path / "archive")])
    assert code == 0, capsys.readouterr().err
    records = _records(path)
    by_uuid = {r["uuid"]: r for r in records if isinstance(r.get("uuid"), str)}
    result_record = {r.tool_use_id: by_uuid[m.handle] for m in before for r in m.toolResults or () if m.handle}
    calls = {b["id"]: b for r in records if r.get("type") == "assistant" and isinstance(r.get("message"), dict)
             for b in _content(r) if isinstance(b, dict) and b.get("type") == "tool_use"}
    written = _records(out)
    written_calls = {b["id"]: b for r in written if r["type"] == "assistant" for b in _content(r) if b.get("type") == "tool_use"}
    for record in written:
        for block in _results(record):
            original = result_record.get(block["tool_use_id"])
            if original is None:
                continue
            whole = block in list(_results(original))
            call = written_calls.get(block["tool_use_id"])
            untouched = whole and (call is None or call == calls.get(block["tool_use_id"]))
            own = record_fields(original) or {}
            if untouched:
                assert {k: record.get(k) for k in own} == own
            else:
                assert not any(k in record for k in own), block["tool_use_id"]


def _call_and_result(record: dict[str, Any], output: str = "File created") -> list[SessionMessage]:
    use = ToolUse("t1", "Write", {"file_path": "/a.py", "content": "x = 1\n" * 400}, text=output)
    result = ToolResult("t1", output, extra={RECORD_FIELDS: record})
    return [SessionMessage("user", "write it"), SessionMessage("assistant", "", (use,)),
            SessionMessage("user", "", (), (result,)), SessionMessage("assistant", "done")]


def test_an_input_moved_to_the_archive_takes_its_record_along() -> None:
    record = {"toolUseResult": {"type": "create", "filePath": "/a.py", "content": "x = 1\n" * 400}}
    messages = _call_and_result(record)
    calls = collect_tool_calls(messages, 0)
    moved = {"file_path": "/a.py", "content": "[moved]"}
    out, _ = rebuild(messages, [], calls, DigestShape(budget=1600, head=500), inputs={"t1": moved})
    [written] = [r for r in transcript_records(out) if r["type"] == "user" and isinstance(r["message"]["content"], list)]
    assert "toolUseResult" not in written
    assert out[2].toolResults and out[2].toolResults[0].text == "File created"
    # Left whole, the record comes back with it.
    [kept] = [r for r in transcript_records(messages) if r["type"] == "user" and isinstance(r["message"]["content"], list)]
    assert kept["toolUseResult"] == record["toolUseResult"]


def test_a_cut_result_comes_back_without_its_record() -> None:
    record = {"toolUseResult": {"stdout": "y" * 9000}}
    messages = _call_and_result(record, "y" * 9000)
    calls = collect_tool_calls(messages, 0)
    decision = CallDecision("t1", "t1", "Write", 0.0, 0.0, "truncate", "test", archive_path="/tmp/t1.txt")
    out, _ = rebuild(messages, [decision], calls, DigestShape(budget=1600, head=500))
    assert all("toolUseResult" not in r for r in transcript_records(out))
