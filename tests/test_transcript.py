"""The transcript reader: Claude Code JSONL and the other conversation formats."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fast_jev_compaction.conversation.messages import SessionMessage, parse_messages
from fast_jev_compaction.conversation.transcript import (
    TranscriptError,
    TranscriptParse,
    load_messages,
    parse_transcript,
    parse_transcript_with_stats,
    read_messages,
)
from fast_jev_compaction.errors import CompactionError

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
CORPUS_JSONL = sorted(CORPUS.rglob("*.jsonl")) if CORPUS.is_dir() else []
SPOTTER_COMPACTED = "spotter/transcripts/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"


# --- helpers -----------------------------------------------------------------------------------


@cache
def _parsed(path: Path) -> TranscriptParse:
    with path.open(encoding="utf-8") as handle:
        return parse_transcript_with_stats(handle, path.name)


def _raw_records(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.strip():
            value = json.loads(line)
            if isinstance(value, dict):
                records.append(value)
    return records


def _simple_live(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The live conversation records, computed the plain way: after the last boundary,
    sidechains dropped unless the whole file is a sidechain, well-formed user/assistant only."""
    last = max((i for i, r in enumerate(records) if r.get("subtype") == "compact_boundary"), default=-1)
    live = records[last + 1 :]
    talk = [r for r in live if r.get("type") in ("user", "assistant")]
    every = [r for r in records if r.get("type") in ("user", "assistant")]
    subagent = bool(every) and all(r.get("isSidechain") is True for r in every)
    return [
        r
        for r in talk
        if (subagent or r.get("isSidechain") is not True)
        and isinstance(r.get("message"), dict)
        and isinstance(r["message"].get("content"), (str, list))
    ]


def _blocks(record: dict[str, Any], kind: str) -> Iterator[dict[str, Any]]:
    content = record["message"]["content"]
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == kind:
                yield block


def _position_of_calls(messages: list[SessionMessage]) -> dict[str, int]:
    return {use.tool_use_id: i for i, m in enumerate(messages) for use in m.toolUses}


def _jsonl(*records: Any) -> list[str]:
    return [json.dumps(r) if not isinstance(r, str) else r for r in records]


def _user(uuid: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "isSidechain": False, "message": {"role": "user", "content": content}, **extra}


def _assistant(uuid: str, message_id: str, *blocks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "assistant",
        "uuid": uuid,
        "isSidechain": False,
        "message": {"id": message_id, "role": "assistant", "content": list(blocks)},
        **extra,
    }


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _call(tool_use_id: str, name: str = "Bash", **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id, "name": name, "input": inp}


def _result(tool_use_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content, **extra}


# --- every corpus transcript -------------------------------------------------------------------

corpus_files = pytest.mark.parametrize(
    "path", CORPUS_JSONL, ids=[str(p.relative_to(CORPUS)) for p in CORPUS_JSONL]
)


@corpus_files
def test_corpus_results_follow_their_calls(corpus_dir: Path, path: Path) -> None:
    messages = _parsed(path).messages
    calls = _position_of_calls(messages)
    for index, message in enumerate(messages):
        for result in message.toolResults or []:
            if result.tool_use_id in calls:
                assert calls[result.tool_use_id] < index, result.tool_use_id


@corpus_files
def test_corpus_tool_use_count_matches_raw_live_segment(corpus_dir: Path, path: Path) -> None:
    live = _simple_live(_raw_records(path))
    raw_ids = {b["id"] for r in live if r["type"] == "assistant" for b in _blocks(r, "tool_use")}
    messages = _parsed(path).messages
    out_ids = [use.tool_use_id for m in messages for use in m.toolUses]
    assert len(out_ids) == len(raw_ids)
    assert set(out_ids) == raw_ids


@corpus_files
def test_corpus_merges_assistant_records_by_message_id(corpus_dir: Path, path: Path) -> None:
    if _parsed(path).stats.preserved_records:
        pytest.skip("preserved segment: covered by its own test")
    live = _simple_live(_raw_records(path))
    expected: list[str | None] = []
    seen: set[str] = set()
    for record in live:
        if record["type"] != "assistant":
            continue
        message_id = record["message"].get("id")
        if isinstance(message_id, str):
            if message_id in seen:
                continue
            seen.add(message_id)
        expected.append(record.get("uuid"))
    got = [m.handle for m in _parsed(path).messages if m.role == "assistant"]
    assert got == expected
    users = [r.get("uuid") for r in live if r["type"] == "user"]
    assert [m.handle for m in _parsed(path).messages if m.role == "user"] == users


@corpus_files
def test_corpus_tool_uses_carry_their_outcome(corpus_dir: Path, path: Path) -> None:
    messages = _parsed(path).messages
    results = {}
    for message in messages:
        for result in message.toolResults or []:
            results.setdefault(result.tool_use_id, result)
    for message in messages:
        for use in message.toolUses:
            result = results.get(use.tool_use_id)
            if result is None:
                assert use.text is None and use.isError is None
            else:
                assert use.text == result.text
                assert use.isError is (True if result.isError else None)
        assert "toolUseResult" not in message.to_wire()


@corpus_files
def test_corpus_results_no_pass_cut_are_written_back_as_they_came(corpus_dir: Path, path: Path) -> None:
    """Issue 22's round trip: a session file made of the messages as read holds each result's
    content as the transcript wrote it (tool references, images and lists of text items
    alike); tests/test_session_file.py checks the rest of the block and its record."""
    from fast_jev_compaction.conversation.session_file import transcript_records

    written = {
        block["tool_use_id"]: block["content"]
        for record in transcript_records(_parsed(path).messages)
        for block in _blocks(record, "tool_result")
    }
    for record in _simple_live(_raw_records(path)):
        for block in _blocks(record, "tool_result"):
            content = block.get("content")
            assert written.get(block["tool_use_id"], content) == ("" if content is None else content)


@corpus_files
def test_corpus_load_messages_agrees_with_parse_transcript(corpus_dir: Path, path: Path) -> None:
    parsed = _parsed(path)
    if not parsed.stats.recognised:
        # The workflow journal is JSONL but not a transcript.
        with pytest.raises(TranscriptError, match="expected a Claude Code transcript"):
            read_messages(path)
        return
    assert read_messages(path) == parsed.messages


# --- edge cases and errors ---------------------------------------------------------------------


def test_edge_cases_skips_non_conversation_lines(corpus_dir: Path) -> None:
    parsed = _parsed(corpus_dir / "claude-code-log/test_data/edge_cases.jsonl")
    stats = parsed.stats
    assert stats.non_object_lines == 3  # a string, a number and an array
    assert stats.untyped_records == 1  # {"silly": "this"}
    assert stats.malformed_records == 2  # "message": "error", and a misspelt "content" key
    assert stats.skipped_types["summary"] == 1
    failing = next(u for m in parsed.messages for u in m.toolUses if u.tool_use_id == "tool_edge_001")
    assert failing.isError is True and failing.text is not None and failing.text.startswith("Error:")
    # A bare string in a content list is kept as text, not dropped.
    assert parsed.messages[-1].text == "wow error"


def test_broken_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    lines = _jsonl(_user("u1", "hello"), "", '{"type": "assistant", "uuid": "a1",, }')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(TranscriptError, match=r"^broken\.jsonl:3: invalid JSON \(") as caught:
        read_messages(path)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, CompactionError)
    with pytest.raises(TranscriptError, match=r"^<stdin>:3: invalid JSON"):
        parse_transcript(lines)


def test_broken_pretty_printed_json_reports_its_line() -> None:
    text = '[\n  {"role": "user", "text": "hi"},\n  {"role": "assistant" "text": "x"}\n]\n'
    with pytest.raises(TranscriptError, match=r"^doc\.json:3: invalid JSON"):
        load_messages(text, "doc.json")


def test_non_utf8_file_is_a_transcript_error(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(json.dumps(_user("u1", "x")).encode() + b"\n\xff\xfe\n")
    with pytest.raises(TranscriptError, match="latin.jsonl"):
        read_messages(path)


def test_blank_lines_bom_and_line_separators_inside_strings() -> None:
    # U+2028 may sit raw inside a JSON string; only "\n" ends a record.
    text = "\ufeff" + json.dumps(_user("u1", "a\u2028b"), ensure_ascii=False) + "\n\n\r\n"
    messages = load_messages(text)
    assert [m.text for m in messages] == ["a\u2028b"]


def test_empty_and_foreign_documents_are_rejected() -> None:
    with pytest.raises(TranscriptError, match="empty document"):
        load_messages("  \n")
    with pytest.raises(TranscriptError, match="accepted|expected a Claude Code transcript"):
        load_messages('{"hello": 1}', "x.json")
    with pytest.raises(TranscriptError, match="expected a Claude Code transcript"):
        load_messages("42")
    with pytest.raises(TranscriptError, match=r"invalid SessionMessage at 0\.role"):
        load_messages('[{"role": "tool", "text": "x"}]')


# --- compaction --------------------------------------------------------------------------------


def test_spotter_session_keeps_only_the_live_segment(corpus_dir: Path) -> None:
    path = corpus_dir / SPOTTER_COMPACTED
    records = _raw_records(path)
    boundary = next(i for i, r in enumerate(records) if r.get("subtype") == "compact_boundary")
    summary = records[boundary + 1]
    assert summary.get("isCompactSummary") is True
    before = {r.get("uuid") for r in records[:boundary]}

    parsed = _parsed(path)
    messages = parsed.messages
    assert parsed.stats.compact_boundaries == 1
    assert parsed.stats.records_before_boundary == boundary
    assert messages[0].handle == summary["uuid"]
    assert messages[0].role == "user"
    assert messages[0].text == summary["message"]["content"]
    assert messages[0].text.startswith("This session is being continued from a previous conversation")
    assert not any(m.handle in before for m in messages)
    # The /compact command records after the summary are kept; the caveat is marked injected.
    assert messages[1].to_wire().get("isMeta") is True
    assert "<command-name>/compact</command-name>" in messages[2].text


def test_compact_boundary_drops_the_rewound_history(corpus_dir: Path) -> None:
    messages = read_messages(corpus_dir / "claude-code-log/upstream-newer/dag_compact_after_rewind.jsonl")
    assert [m.handle for m in messages] == ["cs", "p1u", "p1a"]
    assert messages[0].text.startswith("This session is being continued")


def test_preserved_segment_is_restored_after_the_summary(corpus_dir: Path) -> None:
    path = corpus_dir / "claude-code-log/upstream-newer/dag_compact_after_rewind_preserved.jsonl"
    parsed = _parsed(path)
    # The boundary lists b2a, b2u2 and b2a2 as kept verbatim; only b2a2 was re-written after it.
    assert [m.handle for m in parsed.messages] == ["cs", "b2a", "b2u2", "b2a2", "p1u", "p1a"]
    assert parsed.stats.preserved_records == 2


def test_preserved_segment_found_by_walking_parent_links() -> None:
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "cb",
        "parentUuid": None,
        "compactMetadata": {"trigger": "auto", "preservedSegment": {"headUuid": "a2", "anchorUuid": "cs", "tailUuid": "a3"}},
    }
    lines = _jsonl(
        _user("u1", "old prompt"),
        _assistant("a1", "m1", _text("old answer"), parentUuid="u1"),
        _user("u2", "recent prompt", parentUuid="a1"),
        _assistant("a2", "m2", _text("recent answer"), parentUuid="u2"),
        _user("u3", "ok", parentUuid="a2"),
        _assistant("a3", "m3", _text("last"), parentUuid="u3"),
        boundary,
        _user("cs", "This session is being continued ...", isCompactSummary=True, parentUuid="cb"),
        _user("n1", "next", parentUuid="cs"),
    )
    assert [m.handle for m in parse_transcript(lines)] == ["cs", "a2", "u3", "a3", "n1"]


def test_summary_without_boundary_is_an_ordinary_user_message(corpus_dir: Path) -> None:
    path = corpus_dir / "claude-code-transcripts/sample_session.json"
    loglines = json.loads(path.read_text(encoding="utf-8"))["loglines"]
    at = next(i for i, r in enumerate(loglines) if r.get("isCompactSummary"))
    messages = read_messages(path)
    summary = [m for m in messages if m.text == loglines[at]["message"]["content"]]
    assert len(summary) == 1 and summary[0].role == "user"
    # Without a boundary, nothing before the summary is dropped.
    assert messages.index(summary[0]) > 0 and messages[0].text == loglines[0]["message"]["content"]


# --- sidechains --------------------------------------------------------------------------------


def test_inline_sidechain_records_are_skipped_in_a_main_file(corpus_dir: Path) -> None:
    parsed = _parsed(corpus_dir / "claude-code-log/test_data/memory_sidechain.jsonl")
    assert parsed.stats.sidechain_skipped == 3
    assert not parsed.stats.subagent
    raw = {r.get("uuid"): r for r in _raw_records(corpus_dir / "claude-code-log/test_data/memory_sidechain.jsonl")}
    assert all(raw[m.handle].get("isSidechain") is False for m in parsed.messages if m.handle)


def test_subagent_file_keeps_its_sidechain_records(corpus_dir: Path) -> None:
    path = corpus_dir / "spotter/transcripts/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl"
    parsed = _parsed(path)
    assert parsed.stats.subagent and parsed.stats.sidechain_skipped == 0
    assert sum(len(m.toolUses) for m in parsed.messages) == 12


# --- other formats -----------------------------------------------------------------------------


def test_json_list_of_session_messages(corpus_dir: Path) -> None:
    path = corpus_dir / "jev-compaction-bench/todo-cli-messages.json"
    messages = read_messages(path)
    assert messages == parse_messages(json.loads(path.read_text(encoding="utf-8")))
    assert len(messages) == 36 and sum(len(m.toolUses) for m in messages) == 14


def test_loglines_export(corpus_dir: Path) -> None:
    messages = read_messages(corpus_dir / "claude-code-transcripts/sample_session.json")
    calls = _position_of_calls(messages)
    assert len(calls) == 12
    results = [(i, r) for i, m in enumerate(messages) for r in m.toolResults or []]
    assert len(results) == 12
    assert all(calls[r.tool_use_id] < i for i, r in results)
    first_assistant = next(m for m in messages if m.role == "assistant")
    assert [b["type"] for b in first_assistant.to_wire()["extraBlocks"]] == ["thinking"]


def test_bare_list_of_claude_code_records() -> None:
    doc = [_user("u1", "hi"), _assistant("a1", "m1", _text("hello"))]
    assert [m.text for m in load_messages(json.dumps(doc))] == ["hi", "hello"]


def test_lossless_compaction_conversation(corpus_dir: Path) -> None:
    path = corpus_dir / "lossless-compaction/2026-10-04-every-kind-bases/short.conversation.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    messages = read_messages(path)
    assert len(messages) == len(raw) == 101
    uses = [u for m in messages for u in m.toolUses]
    assert [u.tool_use_id for u in uses] == [f"toolu_pos_{n}" for n in range(1, 39)]
    calls = _position_of_calls(messages)
    for index, message in enumerate(messages):
        for result in message.toolResults or []:
            # Pairs by position: each result answers the call right before it here.
            assert calls[result.tool_use_id] == index - 1
            assert result.isError is False
    raw_results = [b["text"] for m in raw for b in m["blocks"] if b["type"] == "tool_result"]
    assert [u.text for u in uses] == raw_results
    assert read_messages(path) == messages  # synthetic ids are stable


def test_lossless_parallel_calls_pair_in_order() -> None:
    doc = [
        {"role": "user", "blocks": [_text("go")]},
        {"role": "assistant", "blocks": [{"type": "tool_use", "name": "A", "input": {}}, {"type": "tool_use", "name": "B", "input": {}}]},
        {"role": "user", "blocks": [{"type": "tool_result", "text": "ra"}, {"type": "tool_result", "text": "rb"}]},
        {"role": "user", "blocks": [{"type": "tool_result", "text": "stray"}]},
    ]
    messages = load_messages(json.dumps(doc))
    assert [(u.tool, u.tool_use_id, u.text) for u in messages[1].toolUses] == [
        ("A", "toolu_pos_1", "ra"),
        ("B", "toolu_pos_2", "rb"),
    ]
    assert messages[3].toolResults is not None
    assert messages[3].toolResults[0].tool_use_id not in {"toolu_pos_1", "toolu_pos_2"}


@pytest.mark.parametrize("name", ["github_issue.traj.json", "local.traj.json"])
def test_mini_swe_agent_is_rejected(corpus_dir: Path, name: str) -> None:
    with pytest.raises(TranscriptError) as caught:
        read_messages(corpus_dir / "mini-swe-agent" / name)
    message = str(caught.value)
    assert message.startswith(f"{name}: not a recognised conversation format")
    assert "Claude Code transcript" in message and "loglines" in message and "{role, blocks}" in message


def test_questions_file_is_rejected(corpus_dir: Path) -> None:
    with pytest.raises(TranscriptError, match="not a recognised conversation format"):
        read_messages(corpus_dir / "lossless-compaction/questions.json")


# --- thinking and other blocks -----------------------------------------------------------------


def test_lossless_thinking_blocks_are_kept(corpus_dir: Path) -> None:
    messages = read_messages(corpus_dir / "lossless-compaction/2026-10-04-every-kind-bases/thinking.conversation.json")
    extra = [b for m in messages for b in m.to_wire().get("extraBlocks", [])]
    assert len(extra) == 20 and all(b["type"] == "thinking" for b in extra)


def test_claude_code_thinking_blocks_are_kept_with_signature(corpus_dir: Path) -> None:
    path = corpus_dir / SPOTTER_COMPACTED
    live = _simple_live(_raw_records(path))
    raw = [b for r in live if r["type"] == "assistant" for b in _blocks(r, "thinking")]
    assert raw, "fixture has thinking blocks"
    kept = [b for m in _parsed(path).messages for b in m.to_wire().get("extraBlocks", []) if b["type"] == "thinking"]
    assert kept == raw


# --- hand-written transcript -------------------------------------------------------------------


HAND_WRITTEN = _jsonl(
    {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
    _user("u1", "Please look at the repo."),
    _assistant("a1", "msg_A", {"type": "thinking", "thinking": "plan", "signature": "sig"}),
    _assistant("a2", "msg_A", _text("Let me look.")),
    _assistant("a3", "msg_A", _call("t1", "Read", file_path="/r/a.py")),
    {"type": "progress", "data": {"type": "hook_progress"}, "toolUseID": "t1"},
    # Some versions write a result before the next fragment of the same message id.
    _user("r1", [_result("t1", [_text("line 1"), _text("line 2")])]),
    _assistant("a4", "msg_A", _call("t2", "Bash", command="false")),
    _user("r2", [_result("t2", "exit 1", is_error=True)], toolUseResult="Error: exit 1"),
    {"type": "attachment", "uuid": "att", "attachment": {"type": "hook_success"}},
    _user("m1", "<system-reminder>be brief</system-reminder>", isMeta=True),
    _user("s1", "subagent chatter", isSidechain=True),
    _assistant("b1", "msg_B", _text("Done."), _call("t3", "ToolSearch", query="task")),
    _user(
        "r3",
        [
            _result(
                "t3",
                [
                    {"type": "tool_reference", "tool_name": "TaskCreate"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                    {"type": "mystery", "payload": 1},
                ],
                is_error=False,
            ),
            _text("and also this"),
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "BBBB"}},
        ],
    ),
    {"type": "system", "subtype": "turn_duration", "uuid": "sys"},
)


def test_hand_written_transcript() -> None:
    parsed = parse_transcript_with_stats(HAND_WRITTEN, "hand.jsonl")
    wire = [m.to_wire() for m in parsed.messages]
    assert wire == [
        {"role": "user", "text": "Please look at the repo.", "toolUses": [], "handle": "u1"},
        {
            "role": "assistant",
            "text": "Let me look.",
            "toolUses": [
                {"tool_use_id": "t1", "tool": "Read", "input": {"file_path": "/r/a.py"}, "text": "line 1\nline 2"},
                {"tool_use_id": "t2", "tool": "Bash", "input": {"command": "false"}, "text": "exit 1", "isError": True},
            ],
            "handle": "a1",
            "extraBlocks": [{"type": "thinking", "thinking": "plan", "signature": "sig"}],
        },
        {
            "role": "user",
            "text": "",
            "toolUses": [],
            # No is_error written, none read; the list of text items as written rides along.
            "toolResults": [{"tool_use_id": "t1", "text": "line 1\nline 2", "content": [_text("line 1"), _text("line 2")]}],
            "handle": "r1",
        },
        {
            "role": "user",
            "text": "",
            "toolUses": [],
            # The record's own fields ride on its result, for a session file to write back.
            "toolResults": [{"tool_use_id": "t2", "text": "exit 1", "isError": True,
                             "recordFields": {"toolUseResult": "Error: exit 1"}}],
            "handle": "r2",
        },
        {"role": "user", "text": "<system-reminder>be brief</system-reminder>", "toolUses": [], "handle": "m1", "isMeta": True},
        {
            "role": "assistant",
            "text": "Done.",
            "toolUses": [
                {
                    "tool_use_id": "t3",
                    "tool": "ToolSearch",
                    "input": {"query": "task"},
                    "text": "[tool: TaskCreate]\n[image: image/png]\n[mystery]",
                }
            ],
            "handle": "b1",
        },
        {
            "role": "user",
            "text": "and also this",
            "toolUses": [],
            "toolResults": [{
                "tool_use_id": "t3", "text": "[tool: TaskCreate]\n[image: image/png]\n[mystery]", "isError": False,
                # The content as written rides along: text cannot give these items back.
                "content": [
                    {"type": "tool_reference", "tool_name": "TaskCreate"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                    {"type": "mystery", "payload": 1},
                ],
            }],
            "handle": "r3",
            "extraBlocks": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "BBBB"}}],
            # The text came before the image: the order a session file writes them back in.
            "blockLayout": ["r", len("and also this"), "x"],
        },
    ]
    stats = parsed.stats
    assert stats.sidechain_skipped == 1
    assert stats.skipped_types == {"file-history-snapshot": 1, "progress": 1, "attachment": 1, "system": 1}


def test_is_error_values() -> None:
    lines = _jsonl(
        _assistant("a", "m", _call("x1"), _call("x2"), _call("x3"), _call("x4")),
        _user("r1", [_result("x1", "a", is_error=True)]),
        _user("r2", [_result("x2", "b", is_error=False)]),
        _user("r3", [_result("x3", "c")]),
        _user("r4", [_result("x4", None, is_error=None)]),
    )
    messages = parse_transcript(lines)
    # As written: a missing or null flag is no flag (None), which goes back missing; a null one
    # goes back null, as a member of the block.
    assert [m.toolResults[0].isError for m in messages[1:] if m.toolResults] == [True, False, None, None]
    assert messages[4].toolResults[0].extra["blockFields"] == {"is_error": None}
    assert [u.isError for u in messages[0].toolUses] == [True, None, None, None]
    assert messages[0].toolUses[3].text == ""


def test_text_blocks_join_with_blank_line_and_string_content_is_verbatim() -> None:
    lines = _jsonl(
        _user("u1", "  spaced\n"),
        _user("u2", [_text("one"), _text("two")]),
        _assistant("a1", "m1", _text("x")),
        _assistant("a2", "m1", _text("y")),
    )
    assert [m.text for m in parse_transcript(lines)] == ["  spaced\n", "one\n\ntwo", "x\n\ny"]


@pytest.mark.parametrize("interleaved", [False, True])
def test_parallel_calls_with_results_between_fragments(interleaved: bool) -> None:
    a1 = _assistant("a1", "msg", _call("p1"))
    a2 = _assistant("a2", "msg", _call("p2"))
    r1 = _user("r1", [_result("p1", "one")])
    r2 = _user("r2", [_result("p2", "two")])
    order = [a1, r1, a2, r2] if interleaved else [a1, a2, r1, r2]
    messages = parse_transcript(_jsonl(_user("u", "go"), *order, _assistant("a3", "msg2", _text("ok"))))
    assert [m.handle for m in messages] == ["u", "a1", "r1", "r2", "a3"]
    assert [u.tool_use_id for u in messages[1].toolUses] == ["p1", "p2"]
    assert [u.text for u in messages[1].toolUses] == ["one", "two"]


# --- Claude Code 2.1.121: a result line before its call's records --------------------------------
#
# Record shapes as Claude Code 2.1.x writes them (fields of the entire-checkpoints sessions): each
# response block its own record sharing message.id, each result its own record whose parentUuid
# and sourceToolAssistantUUID name the record holding its call.

SESSION_ID = "6f0c8e53-2a1d-4c9b-9f4e-0d7b1c2a3e45"


def _cc(kind: str, uuid: str, parent: str | None, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/dev/shop",
        "sessionId": SESSION_ID, "version": "2.1.121", "gitBranch": "main", "type": kind,
        "message": message, "uuid": uuid, "timestamp": "2026-11-20T10:00:00.000Z", **extra,
    }


def _cc_prompt(uuid: str, parent: str | None, text: str) -> dict[str, Any]:
    return _cc("user", uuid, parent, {"role": "user", "content": text}, permissionMode="default")


def _cc_block(uuid: str, parent: str, message_id: str, block: dict[str, Any]) -> dict[str, Any]:
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 2100, "cache_read_input_tokens": 18000, "output_tokens": 9}
    message = {"model": "claude-sonnet-4-6", "id": message_id, "type": "message", "role": "assistant",
               "content": [block], "stop_reason": None, "stop_sequence": None, "usage": usage}
    return _cc("assistant", uuid, parent, message, requestId=f"req_{message_id}")


def _cc_result(uuid: str, call_record: str, tool_use_id: str, output: str) -> dict[str, Any]:
    block = {"tool_use_id": tool_use_id, "type": "tool_result", "content": output, "is_error": False}
    return _cc("user", uuid, call_record, {"role": "user", "content": [block]},
               toolUseResult={"stdout": output, "stderr": "", "interrupted": False, "isImage": False},
               sourceToolAssistantUUID=call_record)


def _cc_session(big: str = "ok") -> list[dict[str, Any]]:
    """A prompt, one response with two parallel calls and a closing reply; the second call's
    result line comes before every record of the response, as 2.1.121 wrote it."""
    m1, m2 = "msg_01AbCdEfGhJkLmNpQrStUvWx", "msg_01ZyXwVuTsRqPnMlKjHgFeDc"
    return [
        _cc_prompt("u-1", None, "Find the slow entries in the access log."),
        _cc_result("r-b", "a-4", "toolu_01B", big),
        _cc_block("a-1", "u-1", m1, {"type": "thinking", "thinking": "Log first, then the CSV.", "signature": "EqQB"}),
        _cc_block("a-2", "a-1", m1, {"type": "text", "text": "Let me find the slow entries."}),
        _cc_block("a-3", "a-2", m1, {"type": "tool_use", "id": "toolu_01A", "name": "Bash",
                                     "input": {"command": "sort -k9 -n access.log | tail", "description": "Slowest"},
                                     "caller": {"type": "direct"}}),
        _cc_block("a-4", "a-3", m1, {"type": "tool_use", "id": "toolu_01B", "name": "Read",
                                     "input": {"file_path": "/home/dev/shop/input.csv"}, "caller": {"type": "direct"}}),
        _cc_result("r-a", "a-3", "toolu_01A", "GET /cart 2.31s\nGET /search 4.02s"),
        _cc_block("a-5", "r-a", m2, {"type": "text", "text": "/search is the slowest at 4.02 s."}),
    ]


def test_a_result_written_before_its_calls_records_follows_them_by_its_parent_uuid() -> None:
    from fast_jev_compaction.conversation.pairing import pair_tool_calls

    messages = parse_transcript(_jsonl(*_cc_session()))
    assert [m.handle for m in messages] == ["u-1", "a-1", "r-b", "r-a", "a-5"]
    assert [(u.tool_use_id, u.text) for u in messages[1].toolUses] == [
        ("toolu_01A", "GET /cart 2.31s\nGET /search 4.02s"), ("toolu_01B", "ok")]
    pairing = pair_tool_calls(messages, 0)
    assert [(c.tool_use_id, c.call_index, c.result_index) for c in pairing.calls] == [
        ("toolu_01A", 1, 3), ("toolu_01B", 1, 2)]
    assert pairing.orphan_results == []


def test_the_streamed_and_whole_readers_order_a_chained_result_alike(tmp_path: Path) -> None:
    path = tmp_path / f"{SESSION_ID}.jsonl"
    path.write_text("\n".join(_jsonl(*_cc_session())) + "\n", encoding="utf-8")
    streamed = read_messages(path)
    whole = load_messages(path.read_text(encoding="utf-8"))
    assert streamed == whole
    assert [m.handle for m in streamed] == ["u-1", "a-1", "r-b", "r-a", "a-5"]


def test_a_result_whose_chain_does_not_reach_its_call_is_an_error_naming_its_line(tmp_path: Path) -> None:
    session = _cc_session()
    session[1]["parentUuid"] = "u-1"  # read already: nothing after the call will release it
    path = tmp_path / "late.jsonl"
    path.write_text("\n".join(_jsonl(*session)) + "\n", encoding="utf-8")
    with pytest.raises(TranscriptError) as caught:
        read_messages(path)
    assert str(caught.value) == (
        "late.jsonl:2: the tool_result for toolu_01B comes before its call, and its "
        "parentUuid does not name a record after the call; the records are out of order: move this "
        "line below the assistant record holding the call, or remove it"
    )


def test_a_result_released_before_its_call_is_an_error_too() -> None:
    session = _cc_session()
    session[1]["parentUuid"] = "a-2"  # comes in the file, but before the call's response ends
    del session[5]["message"]["id"]  # the call then opens a message of its own, after the result
    session[5]["message"]["id"] = "msg_01Other"
    with pytest.raises(TranscriptError, match=r"^s\.jsonl:2: the tool_result for toolu_01B comes before its call \(at s\.jsonl:6\)"):
        parse_transcript(_jsonl(*session), "s.jsonl")


def test_a_second_result_for_one_call_is_an_error_naming_its_line() -> None:
    session = _cc_session()
    session.insert(7, _cc_result("r-a2", "a-3", "toolu_01A", "again"))
    with pytest.raises(TranscriptError) as caught:
        parse_transcript(_jsonl(*session), "twice.jsonl")
    assert str(caught.value) == (
        "twice.jsonl:8: a second tool_result for toolu_01A; a call has one result: remove the repeated line")


def test_an_export_s_out_of_order_result_is_named_by_its_item() -> None:
    session = _cc_session()
    session[1]["parentUuid"] = "u-1"
    with pytest.raises(TranscriptError, match=r"^export\.json: item 2: the tool_result for toolu_01B comes before its call,"):
        load_messages(json.dumps({"loglines": session}), "export.json")


def test_a_result_whose_call_is_not_in_the_file_stays_where_it_was() -> None:
    # After a compact boundary a result can name a call (and a parent) the live part lacks.
    session = _cc_session()
    session.insert(1, _cc_result("r-x", "gone", "toolu_01Gone", "from before"))
    session.insert(3, _cc_result("r-y", "u-1", "toolu_01Gone2", "also from before"))
    messages = parse_transcript(_jsonl(*session))
    assert [m.handle for m in messages] == ["u-1", "r-x", "r-y", "a-1", "r-b", "r-a", "a-5"]


def test_a_chained_session_compacts_and_its_transcript_output_reads_back_as_compacted(tmp_path: Path) -> None:
    import subprocess
    import sys

    source = tmp_path / "in.jsonl"
    big = "\n".join(f"{n},sku-{n},{n * 7 % 100}.99" for n in range(900))
    source.write_text("\n".join(_jsonl(*_cc_session(big))) + "\n", encoding="utf-8")
    out = tmp_path / f"{SESSION_ID}.jsonl"
    archive = str(tmp_path / "archive")

    def compact(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "fast_jev_compaction.cli", "compact", str(source),
                               "--preserve-recent", "1", "--archive", archive, *argv],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)

    written = compact("--format", "transcript", "-o", str(out))
    assert written.returncode == 0, written.stderr
    plain = compact()
    assert plain.returncode == 0, plain.stderr
    expected = parse_messages(json.loads(plain.stdout))
    assert any(u.text != big for m in expected for u in m.toolUses if u.tool_use_id == "toolu_01B")  # it was cut

    def shape(messages: list[SessionMessage]) -> list[tuple[Any, ...]]:
        return [(m.role, m.text, [(u.tool_use_id, u.tool, u.input) for u in m.toolUses],
                 [(r.tool_use_id, r.text, r.isError) for r in m.toolResults or ()]) for m in messages]

    assert shape(read_messages(out)) == shape(expected)


def test_subagent_file_keeps_all_sidechain_records() -> None:
    lines = _jsonl(
        _user("s1", "task prompt", isSidechain=True),
        _assistant("s2", "m", _text("done"), isSidechain=True),
    )
    parsed = parse_transcript_with_stats(lines)
    assert [m.text for m in parsed.messages] == ["task prompt", "done"]
    assert parsed.stats.subagent


# --- property: any interleaving of parallel results ---------------------------------------------


@st.composite
def _sessions(draw: st.DrawFn) -> tuple[list[str], int, int]:
    """Turns of parallel calls, each result placed anywhere after its own call record."""
    records: list[dict[str, Any]] = []
    turns = draw(st.integers(min_value=1, max_value=4))
    calls = 0
    for turn in range(turns):
        records.append(_user(f"u{turn}", f"prompt {turn}"))
        width = draw(st.integers(min_value=1, max_value=4))
        fragments = [_assistant(f"a{turn}_{k}", f"msg{turn}", _call(f"c{turn}_{k}")) for k in range(width)]
        calls += width
        sequence: list[dict[str, Any]] = list(fragments)
        for k in range(width):
            after = sequence.index(fragments[k])
            at = draw(st.integers(min_value=after + 1, max_value=len(sequence)))
            sequence.insert(at, _user(f"r{turn}_{k}", [_result(f"c{turn}_{k}", f"out {k}")]))
        records.extend(sequence)
    return _jsonl(*records), turns, calls


@settings(max_examples=60, deadline=None)
@given(_sessions())
def test_merged_turns_precede_their_results(session: tuple[list[str], int, int]) -> None:
    lines, turns, calls = session
    messages = parse_transcript(lines)
    assistants = [m for m in messages if m.role == "assistant"]
    assert len(assistants) == turns
    assert sum(len(m.toolUses) for m in assistants) == calls
    positions = _position_of_calls(messages)
    result_positions = {r.tool_use_id: i for i, m in enumerate(messages) for r in m.toolResults or []}
    assert set(result_positions) == set(positions)
    assert all(positions[k] < result_positions[k] for k in positions)
    # Results keep their file order.
    order = [r.tool_use_id for m in messages for r in m.toolResults or []]
    file_order = [json.loads(l)["message"]["content"][0]["tool_use_id"] for l in lines if '"tool_result"' in l]
    assert order == file_order


def test_blocks_are_tuples_from_every_reader_and_compare_equal_across_them():
    lines = [
        json.dumps({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}}),
        json.dumps({"type": "assistant", "uuid": "a1", "message": {"id": "m1", "role": "assistant", "content": [
            {"type": "text", "text": "reading"}, {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}}]}}),
        json.dumps({"type": "user", "uuid": "u2", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "body"}]}}),
        json.dumps({"type": "assistant", "uuid": "a2", "message": {"id": "m2", "role": "assistant",
                                                                   "content": [{"type": "text", "text": "hello"}]}}),
    ]
    read = parse_transcript(lines)
    wired = parse_messages([m.to_wire() for m in read])
    for messages in (read, wired):
        assert [type(m.toolUses) for m in messages] == [tuple] * 4
        assert [type(m.toolResults) for m in messages] == [type(None), type(None), tuple, type(None)]
        # Messages without calls all hold the one empty tuple: nothing per message.
        assert [m.toolUses for m in messages if not m.toolUses] == [(), (), ()]
    assert [(m.toolUses, m.toolResults) for m in read] == [(m.toolUses, m.toolResults) for m in wired]
    assert read[1].toolUses[0].text == "body"
    # JSON has no tuples: the wire shape holds lists.
    assert read[1].to_wire()["toolUses"][0]["tool_use_id"] == "t1"
    assert json.loads(json.dumps([m.to_wire() for m in read]))[2]["toolResults"] == [{"tool_use_id": "t1", "text": "body"}]


def test_a_short_input_value_repeated_across_calls_is_one_string():
    def call(n: int, command: str) -> str:
        return json.dumps({"type": "assistant", "uuid": f"a{n}", "message": {"id": f"m{n}", "role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": command}}]}})

    # Built at run time, so the two equal texts start as two strings.
    short, long = "".join(["git ", "status"]), "x" * 4000
    read = parse_transcript([call(1, short), call(2, short), call(3, long), call(4, long)])
    wired = parse_messages([m.to_wire() for m in read])
    for messages in (read, wired):
        values = [m.toolUses[0].input["command"] for m in messages]
        assert values == [short, short, long, long]
        assert values[0] is values[1]


def test_equal_inputs_of_short_values_are_one_dict_and_unequal_ones_stay_apart():
    def call(n: int, tool_input: dict[str, object]) -> str:
        return json.dumps({"type": "assistant", "uuid": f"a{n}", "message": {"id": f"m{n}", "role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": tool_input}]}})

    inputs: list[dict[str, object]] = [
        {"file_path": "a.py"}, {"file_path": "a.py"},
        {"file_path": "a.py", "limit": 1}, {"file_path": "a.py", "limit": 1},
        {"file_path": "a.py", "limit": True},  # equal to the one before in Python, not in JSON
        {"limit": 1, "file_path": "a.py"},  # the same items in another order print differently
        {"file_path": "a.py", "limit": 1.5}, {"file_path": "a.py", "limit": 1.5},
        {"file_path": "x" * 4000}, {"file_path": "x" * 4000},
    ]
    read = parse_transcript([call(n, given) for n, given in enumerate(inputs)])
    wired = parse_messages([m.to_wire() for m in read])
    for messages in (read, wired):
        got = [m.toolUses[0].input for m in messages]
        assert [json.dumps(g) for g in got] == [json.dumps(g) for g in inputs]
        assert got[0] is got[1] and got[2] is got[3]
        assert len({id(g) for g in got[3:]}) == 7  # a bool, a reorder, floats, long values: each its own
