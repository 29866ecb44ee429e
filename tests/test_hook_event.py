"""The hook event read as it is decoded: the same event, and the same errors, as a whole-document read.

``parse_event`` walks the top-level object and decodes the messages one at a time; these tests
hold it to ``json.loads`` for syntax (message, line, column) and to ``read_event`` (the check of
a decoded document) for shape, and spawn the real entry to see what a local compaction imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fast_jev_compaction.conversation.messages import MessageError, SessionMessage, ToolUse, message_from_wire, parse_messages
from fast_jev_compaction.hook.event import HookEvent, parse_event, read_event

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "text": "go", "handle": "h1", "uuid": "u-1"},
    {
        "role": "assistant",
        "text": "",
        "toolUses": [{"tool_use_id": "t1", "tool": "Read", "input": {"file_path": "a.py"}, "result": {"x": None}, "text": "ok"}],
        "handle": "h2",
    },
    {"role": "user", "toolResults": [{"tool_use_id": "t1", "text": "ok", "isError": False}], "meta": None},
]


def document(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "event": "session.compact", "trigger": "auto", "sessionId": "s", "pluginData": "/tmp/d",
        "options": {"judge": "local"}, "context": {"percent": 61}, "messages": MESSAGES,
    }
    doc.update(extra)
    return doc


@pytest.mark.parametrize("indent", [None, 2])
def test_the_streamed_read_gives_the_whole_documents_event(indent: int | None) -> None:
    doc = document(newerField=[1, 2], agentId=None)
    text = json.dumps(doc, indent=indent)
    event = parse_event(text)
    assert event == read_event(json.loads(text))
    assert (event.trigger, event.sessionId, event.options, event.context) == ("auto", "s", {"judge": "local"}, {"percent": 61})
    assert event.extra == {"newerField": [1, 2]} and event.agentId is None
    assert [m.to_wire() for m in event.messages] == [
        {"role": "user", "text": "go", "toolUses": [], "handle": "h1", "uuid": "u-1"},
        {"role": "assistant", "text": "", "toolUses": [
            {"tool_use_id": "t1", "tool": "Read", "input": {"file_path": "a.py"}, "text": "ok", "result": {"x": None}}],
         "handle": "h2"},
        {"role": "user", "text": "", "toolUses": [], "toolResults": [{"tool_use_id": "t1", "text": "ok", "isError": False}]},
    ]


def test_the_header_is_handed_over_before_the_messages() -> None:
    seen: list[dict[str, Any]] = []
    event = parse_event(json.dumps(document()), seen.append)
    assert seen == [{k: v for k, v in document().items() if k != "messages"}]
    assert len(event.messages) == 3
    # Without a messages array the header comes at the end, once.
    with pytest.raises(MessageError):
        parse_event('{"pluginData": "/x"}', seen.append)
    assert seen[1:] == [{"pluginData": "/x"}]


def test_a_repeated_member_counts_once_its_last_value() -> None:
    text = '{"messages": [{"role": "robot"}], "trigger": "manual", "messages": [], "trigger": "auto"}'
    assert parse_event(text) == read_event(json.loads(text)) == HookEvent(messages=[], trigger="auto")


@pytest.mark.parametrize(
    "text",
    [
        '{"messages": [{"role": "user", "text": "a"}',  # cut short inside the array
        '{"messages": [{"role": "user", "text": "a"}]',  # cut short after it
        '{"messages": [{"role": "user", "te',  # inside a message
        '{"trigger": "manual" "messages": []}',
        '{"trigger" "manual"}',
        '{trigger: 1}',
        '{"messages": []} trailing',
        '{"messages": [,]}',
        '{"messages": [{"role": "robot"}], "x": nope}',  # the syntax error wins over the shape, as before
        "this is not json {",
    ],
)
def test_syntax_errors_are_json_loads_own(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        parse_event(text)
    assert (got.value.msg, got.value.lineno, got.value.colno) == (expected.value.msg, expected.value.lineno, expected.value.colno)


@pytest.mark.parametrize(
    ("doc", "location", "what"),
    [
        ({"trigger": "manual"}, "messages", "Field required"),
        ({"messages": {}}, "messages", "Input should be a valid list"),
        ({"messages": [{"role": "robot"}]}, "messages.0.role", "Input should be 'user' or 'assistant'"),
        ({"messages": [{"text": "x"}]}, "messages.0.role", "Field required"),
        ({"messages": [{"role": "user"}, 5]}, "messages.1", "Input should be a valid dictionary"),
        ({"messages": [{"role": "user", "text": None}]}, "messages.0.text", "Input should be a valid string"),
        ({"messages": [{"role": "user", "handle": 5}]}, "messages.0.handle", "Input should be a valid string"),
        ({"messages": [{"role": "user", "toolUses": "x"}]}, "messages.0.toolUses", "Input should be a valid list"),
        ({"messages": [{"role": "user", "toolUses": None}]}, "messages.0.toolUses", "Input should be a valid list"),
        ({"messages": [{"role": "assistant", "toolUses": [{"tool": "Read"}]}]}, "messages.0.toolUses.0.tool_use_id", "Field required"),
        ({"messages": [{"role": "assistant", "toolUses": [{"tool_use_id": "t", "tool": "R", "input": [1]}]}]},
         "messages.0.toolUses.0.input", "Input should be a valid dictionary"),
        ({"messages": [{"role": "user", "toolResults": [{"tool_use_id": "t", "isError": "maybe"}]}]},
         "messages.0.toolResults.0.isError", "Input should be a valid boolean"),
        ({"messages": [], "options": []}, "options", "Input should be a valid dictionary"),
        ({"messages": [], "trigger": None}, "trigger", "Input should be a valid string"),
        ({"messages": [], "sessionId": 7}, "sessionId", "Input should be a valid string"),
    ],
)
def test_a_bad_event_names_its_field(doc: dict[str, Any], location: str, what: str) -> None:
    for read in (lambda: parse_event(json.dumps(doc)), lambda: read_event(doc)):
        with pytest.raises(MessageError) as caught:
            read()
        assert (caught.value.location, caught.value.what) == (location, what)


def test_a_document_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(MessageError, match="Input should be a valid dictionary"):
        parse_event("[1, 2]")


def test_a_lenient_flag_is_read_as_a_boolean() -> None:
    result = message_from_wire({"role": "user", "toolResults": [{"tool_use_id": "t", "isError": 1}]})
    assert result.toolResults is not None and result.toolResults[0].isError is True


def test_messages_without_extras_share_one_read_only_empty_extra() -> None:
    a, b = parse_messages([{"role": "user", "text": "a"}, {"role": "user", "text": "b"}])
    assert a.extra is b.extra and not a.extra
    with pytest.raises(TypeError):
        a.extra["x"] = 1  # type: ignore[index]
    assert SessionMessage(role="user", extra={}) == SessionMessage(role="user")
    assert ToolUse(tool_use_id="t", tool="R").to_wire() == {"tool_use_id": "t", "tool": "R", "input": {}}


_IMPORTS = """
import io, json, os, sys
from fast_jev_compaction.hook.entry import main
out = io.StringIO()
main([], stdin_fd=os.open(sys.argv[1], os.O_RDONLY), stdout=out)
print(json.dumps({"answer": json.loads(out.getvalue()), "modules": sorted(sys.modules)}))
"""


def test_a_local_compaction_imports_no_http_library(tmp_path: Path) -> None:
    # pydantic validates the event (and brings decimal, secrets, ... of its own); the Jev
    # client's httpx, tenacity and asyncio load only for a remote judge.
    from test_hook_entry import event, tool_heavy_conversation

    data = tmp_path / "data"
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event(tool_heavy_conversation(), data)), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-I", "-c", _IMPORTS, str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["answer"]["action"] == "replace"
    roots = {name.split(".")[0] for name in report["modules"]}
    assert "pydantic" in roots
    assert not roots & {"httpx", "httpcore", "anyio", "tenacity", "asyncio"}


def test_a_result_shares_its_calls_strings_only_when_they_are_equal() -> None:
    output = "".join(["line\n"] * 50)
    use = {"tool_use_id": "t1", "tool": "Bash", "input": {"command": "x"}, "text": output}
    same, other = parse_messages([
        {"role": "assistant", "toolUses": [use]},
        {"role": "user", "toolResults": [{"tool_use_id": "t1", "text": "".join(["line\n"] * 50)}]},
    ]), parse_messages([
        {"role": "assistant", "toolUses": [use]},
        {"role": "user", "toolResults": [{"tool_use_id": "t1", "text": "something else"}]},
    ])
    assert same[1].toolResults is not None and other[1].toolResults is not None
    assert same[1].toolResults[0].text is same[0].toolUses[0].text
    assert same[1].toolResults[0].tool_use_id is same[0].toolUses[0].tool_use_id
    assert other[1].toolResults[0].text == "something else" and other[0].toolUses[0].text == output


class Pieces:
    """A text source handing the document over a few characters at a time, as a slow pipe would."""

    def __init__(self, text: str, size: int) -> None:
        self.text, self.size, self.reads = text, size, 0

    def read(self, least: int) -> str:
        self.reads += 1
        # The window asks for at least ``least``; a source may give more, never less before its end.
        piece, self.text = self.text[: max(least, self.size)], self.text[max(least, self.size) :]
        return piece


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    from fast_jev_compaction.hook import event as event_module

    monkeypatch.setattr(event_module, "_WINDOW", 5)


@pytest.mark.parametrize("indent", [None, 2])
def test_an_event_read_in_pieces_is_the_whole_documents_event(small_window: None, indent: int | None) -> None:
    text = "  \n" + json.dumps(document(newerField=[1, 2.5e3, "é→𝄞"], count=12345), indent=indent, ensure_ascii=False) + "\n"
    source = Pieces(text, 7)
    assert parse_event(source) == parse_event(text) == read_event(json.loads(text))
    assert source.reads > 10  # it was read in pieces, not at once


@pytest.mark.parametrize(
    "text",
    [
        '{"messages": [{"role": "user", "text": "a"}',
        '{"messages": [{"role": "user", "text": "a"}]',
        '{"messages": [{"role": "user", "te',
        '{\n  "trigger": "manual"\n  "messages": []}',
        '{"messages": [\n {"role": "user"},\n\n {"role": "user", "text": "abc"} x]}',
        '{"messages": []}\n\n   trailing',
        '{"messages": [{"role": "robot"}],\n "x": nope}',
        "\n\n   this is not json {",
        '{"count": 12',
    ],
)
def test_syntax_errors_read_in_pieces_name_the_documents_place(small_window: None, text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        parse_event(Pieces(text, 3))
    assert (got.value.msg, got.value.lineno, got.value.colno, got.value.pos) == (
        expected.value.msg, expected.value.lineno, expected.value.colno, expected.value.pos)
