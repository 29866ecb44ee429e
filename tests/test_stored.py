"""A tool's stored record (a hook message's ``result``, a transcript's record fields) is held as
its JSON text and written back exactly as ``JSON.stringify`` writes its value."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given

from fast_jev_compaction.conversation.messages import parse_messages
from fast_jev_compaction.conversation.stored import StoredJSON, json_pieces, piece_text
from fast_jev_compaction.hook.answer import answer_size, answer_text, wire_messages
from fast_jev_compaction.hook.answer_file import ascii_json
from fast_jev_compaction.textutil import js_json
from test_hook_fuzz import json_value

RECORD: dict[str, Any] = {
    "stdout": "caf\u00e9 \U0001f600 \u4e2d\u6587\nline two",
    "lone": "\ud800 half a pair",
    "numbers": [1.0, 2.5, 7, None, True],
    "nested": {"file": {"content": "x" * 300, "numLines": 1}},
}


def conversation() -> list[dict[str, Any]]:
    return [
        {"role": "user", "text": "read it", "toolUses": [], "handle": "p"},
        {"role": "assistant", "text": "", "toolUses": [
            {"tool_use_id": "t1", "tool": "Read", "input": {"file_path": "a.py"}, "text": "out", "result": RECORD},
        ]},
        {"role": "user", "text": "", "toolUses": [], "toolResults": [
            {"tool_use_id": "t1", "text": "out", "isError": False, "result": RECORD},
        ]},
    ]


def test_the_record_on_a_call_and_on_its_result_is_one_stored_text() -> None:
    messages = parse_messages(conversation())
    on_call = messages[1].toolUses[0].extra["result"]
    assert isinstance(on_call, StoredJSON)
    assert messages[2].toolResults is not None and messages[2].toolResults[0].extra["result"] is on_call
    # The public wire form is the value again; a record stays its text only where asked.
    assert messages[1].to_wire()["toolUses"][0]["result"] == json.loads(js_json(RECORD))
    assert messages[1].to_wire(stored=True)["toolUses"][0]["result"] is on_call


def test_the_answer_writes_a_stored_record_as_json_stringify_writes_its_value() -> None:
    messages = parse_messages(conversation())
    plain = [m.to_wire() for m in messages[1:]]
    for m in plain:
        m.pop("handle", None)
    answer = {"action": "replace", "messages": wire_messages(messages[1:]), "toast": "t"}
    text = answer_text(answer)
    assert text == js_json({**answer, "messages": plain})
    assert '"numbers":[1,2.5,7,null,true]' in text and "\\ud800" in text  # as JavaScript prints them
    assert answer_size(answer, iter(answer["messages"])) == len(text.encode("utf-8"))
    # The answer file's ASCII form reads back as the same value.
    for wired, value in zip(answer["messages"], plain):
        data = ascii_json(wired)
        assert data.isascii() and json.loads(data) == json.loads(js_json(value))


def test_records_anywhere_in_a_value_go_back_in_place_and_a_mark_like_text_stays_text() -> None:
    # The writer marks where a record goes with a string no input can guess: a text shaped like
    # a mark is only text.
    value = {"a": StoredJSON.of({"k": 1}), "b": "\x00" + "0" * 16 + ":0", "c": [StoredJSON.of([2])]}
    text = "".join(piece_text(p) for p in json_pieces(value))
    assert text == js_json({"a": {"k": 1}, "b": "\x00" + "0" * 16 + ":0", "c": [[2]]})


@given(record=json_value, other=json_value)
def test_any_record_is_written_as_the_plain_wire_form_writes_it(record: Any, other: Any) -> None:
    """Whatever the records hold (NULs, lone surrogates, mark-like strings, non-finite numbers,
    nested lists), the answer written from their stored text is the text of the plain wire form,
    and the answer file's ASCII form reads back as the same value."""
    messages = parse_messages([
        {"role": "assistant", "text": "", "toolUses": [{"tool_use_id": "t1", "tool": "Read", "text": "o", "result": record}],
         "meta": other},
        {"role": "user", "text": "", "toolUses": [], "toolResults": [
            {"tool_use_id": "t1", "text": "o", "result": other}, {"tool_use_id": "t9", "text": "x", "result": [record, other]},
        ]},
    ])
    answer = {"action": "replace", "messages": wire_messages(messages)}
    text = answer_text(answer)
    assert text == js_json({**answer, "messages": [m.to_wire() for m in messages]})
    assert answer_size(answer, iter(answer["messages"])) == len(text.encode("utf-8"))
    assert json.loads(text)["messages"] == [json.loads(ascii_json(m)) for m in answer["messages"]]
