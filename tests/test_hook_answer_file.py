"""A replace answer too large for the host's 4 MiB stdout cap goes to a private file the answer
names: the real entry script in a subprocess, the file as the mod reads it."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from fast_jev_compaction.conversation.messages import parse_messages
from fast_jev_compaction.conversation.stored import unstored
from fast_jev_compaction.hook.answer import STDOUT_SOFT_LIMIT, answer_text, wire_messages, wired
from fast_jev_compaction.hook.answer_file import ANSWERS_DIR, STALE_AFTER_S, ascii_json, remove_stale, write_messages
from fast_jev_compaction.hook.turns import turn_problems
from fast_jev_compaction.textutil import js_json
from test_hook_entry import compactions, event, run_hook, tool_heavy_conversation

# Every kind of character the JSON must carry: accented, CJK, astral (a surrogate pair in
# JavaScript), a control character, a quote and a backslash.
MIXED = 'é 中文 😀 \x01 "quoted" back\\slash'


def _with_long_reply(reply: str) -> list[dict[str, Any]]:
    conversation = tool_heavy_conversation()
    conversation[-1]["text"] = reply
    return conversation


def _hook(messages: list[dict[str, Any]], data_dir: Path) -> dict[str, Any]:
    document = json.dumps(event(messages, data_dir, options={"minReductionRatio": 0}), ensure_ascii=False)
    answer, _ = run_hook(document.encode("utf-8"), data_dir)
    return answer


def test_ascii_json_reads_back_as_the_same_value() -> None:
    value = {"text": MIXED, "n": [1, 2.5, True, None], "lone": "\ud800 half a pair"}
    data = ascii_json(value)
    assert data.isascii()
    assert json.loads(data) == value
    assert b"\\ud83d\\ude00" in data  # the astral character as JavaScript's surrogate pair


def test_an_answer_written_in_pieces_is_the_whole_answer_s_text() -> None:
    """The hook writes its answer message by message (``answer.answer_pieces``); the pieces join to the
    text of the whole document, whatever its members and wherever ``messages`` sits among them."""
    message = {"role": "user", "text": MIXED, "lone": "\ud800 half", "n": [1.0, 2.5, 1e21]}
    answers = [
        {"action": "replace", "messages": [message, {"role": "assistant", "text": "ok"}], "log": ["a", MIXED]},
        {"messages": [], "action": "replace"},
        {"action": "replace", "messages": [message]},
        {"action": "skip", "reason": "nothing to compact", "log": []},
    ]
    for answer in answers:
        assert answer_text(answer) == js_json(answer)


def plain(value: Any) -> Any:
    """``value`` with every stored record made its JSON value again."""
    return json.loads(json.dumps(value, default=unstored))


def test_messages_wired_as_they_are_written_read_as_the_list_of_them() -> None:
    """The hook's answer holds its messages as a view (``wire_messages``) that wires each one as
    it is read: written, indexed, sliced or checked, it is the list of their wire forms."""
    messages = parse_messages(tool_heavy_conversation())
    for compact in (False, True):
        listed = list(wired(messages, compact))
        view = wire_messages(messages, compact=compact)
        assert len(view) == len(listed) and view[0] == listed[0] and view[-1] == listed[-1]
        assert view[1:4] == listed[1:4] and list(view) == listed
        answer = {"action": "replace", "messages": view, "toast": MIXED}
        # A tool's stored record is written as its text, as JSON.stringify writes its value.
        assert answer_text(answer) == js_json({**answer, "messages": plain(listed)})
        assert turn_problems(view, messages) == []


def test_an_answer_too_large_for_stdout_goes_to_a_private_file(data_dir: Path) -> None:
    # About 3.5 MB of reply kept verbatim: over the stdout limit even with prompts by handle.
    reply = f"a long reply, kept verbatim: {MIXED}. " * 90_000
    messages = _with_long_reply(reply)
    answer = _hook(messages, data_dir)

    assert answer["action"] == "replace", answer.get("reason")
    assert "messages" not in answer and answer["toast"].endswith(", no summary")
    assert len(json.dumps(answer)) < 10_000
    named = answer["messagesFile"]
    path = Path(named["path"])
    assert path.parent == data_dir / ANSWERS_DIR
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = path.read_bytes()
    assert named["bytes"] == len(data) > STDOUT_SOFT_LIMIT
    assert data.isascii()  # byte offsets are character offsets: $.fs.read ranges cut nothing

    wired = json.loads(data)
    # The compact form: the kept prompt by handle, stored tool records left out.
    assert {"handle": "h-prompt"} in wired
    assert wired[-1]["text"] == reply
    assert not any("result" in block for message in wired for block in message.get("toolUses", []))
    assert turn_problems(wired, parse_messages(messages)) == []
    [(row, _decisions)] = compactions(data_dir)
    assert row.outcome == "replaced"


def test_an_answer_that_fits_stdout_makes_no_file(data_dir: Path) -> None:
    answer = _hook(tool_heavy_conversation(), data_dir)
    assert answer["action"] == "replace" and "messagesFile" not in answer and answer["messages"]
    assert not (data_dir / ANSWERS_DIR).exists()


def test_without_a_folder_to_write_in_the_hook_falls_back(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data folder should be")
    answer = _hook(_with_long_reply("a long reply, kept verbatim. " * 130_000), blocker)
    assert answer["action"] == "fallback"
    assert answer["reason"].startswith("the pruned history is too large for the hook's output and could not be saved to a file: ")


def test_old_answer_files_are_removed_on_a_later_run(data_dir: Path) -> None:
    folder = data_dir / ANSWERS_DIR
    folder.mkdir(parents=True, mode=0o700)
    old, recent, other = folder / "answer-1-2-aa.json", folder / "answer-3-4-bb.json", folder / "notes.json"
    for path in (old, recent, other):
        path.write_text("[]")
    hours_ago = time.time() - STALE_AFTER_S - 60
    os.utime(old, (hours_ago, hours_ago))
    os.utime(other, (hours_ago, hours_ago))

    answer = _hook(tool_heavy_conversation(), data_dir)
    assert answer["action"] == "replace"
    assert not old.exists()
    assert recent.exists()  # the mod may still be reading it
    assert other.exists()  # not an answer file: not the hook's to remove


def test_remove_stale_tolerates_a_missing_folder(tmp_path: Path) -> None:
    remove_stale(tmp_path / "absent")
    assert not (tmp_path / "absent").exists()


def test_a_write_that_fails_half_way_leaves_no_file(tmp_path: Path) -> None:
    def messages() -> Iterator[dict[str, Any]]:
        yield {"role": "user", "text": "first", "toolUses": []}
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_messages(tmp_path, messages())
    assert list((tmp_path / ANSWERS_DIR).iterdir()) == []


def test_written_messages_are_one_json_array_of_their_size(tmp_path: Path) -> None:
    messages = [{"role": "user", "text": MIXED, "toolUses": []}, {"handle": "h-1"}]
    path, size = write_messages(tmp_path, iter(messages))
    assert path.stat().st_size == size and json.loads(path.read_bytes()) == messages
    empty, size = write_messages(tmp_path, iter(()))
    assert empty.read_bytes() == b"[]" and size == 2 and empty != path


def test_write_messages_refuses_a_symlinked_answers_folder(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / ANSWERS_DIR).symlink_to(elsewhere)
    with pytest.raises(OSError):
        write_messages(tmp_path, iter([{"role": "user"}]))
    assert list(elsewhere.iterdir()) == []


def test_remove_stale_never_follows_a_symlinked_answers_folder(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    old = elsewhere / "answer-1-2-abcd.json"
    old.write_text("[]")
    os.utime(old, (0, 0))
    (tmp_path / ANSWERS_DIR).symlink_to(elsewhere)
    remove_stale(tmp_path / ANSWERS_DIR)
    assert old.exists()
