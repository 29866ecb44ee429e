"""A pass with a window frees what brings the context under its target, least valuable first,
down the eviction ladder: a) tool outputs, b) the long input fields of old calls. Protected and
pinned calls stay whole, and every cut is archived whole."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from fast_jev_compaction.compaction import CompactResult, compact_sync
from fast_jev_compaction.conversation.messages import SessionMessage
from fast_jev_compaction.conversation.pairing import Pairing, ToolCall
from fast_jev_compaction.conversation.sizes import message_chars
from fast_jev_compaction.decide.archive import archive_path
from fast_jev_compaction.decide.decisions import INPUT_ARCHIVED, KEEP, TRUNCATE, UNDER_TARGET
from fast_jev_compaction.decide.markers import carries_mark, saved_path
from fast_jev_compaction.decide.policy import CHARS_PER_TOKEN, MEDIA_CHARS, TARGET_MARGIN_POINTS
from fast_jev_compaction.options import resolve_options
from scripted_asker import assistant, pair, result, results, use, user

TARGET_PERCENT = 40.0


class ValueJudge:
    """An in-process judge that values each output as the test says (by tool_use_id)."""

    def __init__(self, values: dict[str, float], default: float = 0.5) -> None:
        self.values = values
        self.default = default

    async def ask(self, state: Any, questions: Any) -> Any:
        raise AssertionError("an in-process judge is never asked over the wire")

    def score_calls(self, messages: Any, pairing: Pairing, goal: str, only: Sequence[ToolCall]) -> dict[str, tuple[float, float]]:
        return {c.tool_use_id: (self.values.get(c.tool_use_id, self.default),) * 2 for c in only}


def chars(messages: Sequence[SessionMessage]) -> int:
    return sum(message_chars(m) for m in messages)


def window_needing(messages: Sequence[SessionMessage], need: int) -> int:
    """A window that leaves ``messages`` about ``need`` characters over the pass's aim."""
    aim = (chars(messages) - need) / CHARS_PER_TOKEN
    return math.ceil(aim / ((TARGET_PERCENT - TARGET_MARGIN_POINTS) / 100))


def run(messages: list[SessionMessage], window: int, values: dict[str, float] | None = None, **options: Any) -> CompactResult:
    opts = resolve_options(window_tokens=window, target_percent=TARGET_PERCENT, preserve_recent_messages=2, **options)
    return compact_sync(messages, ValueJudge(values or {}), opts)


def by_id(out: CompactResult) -> dict[str, Any]:
    return {d.tool_use_id: d for d in out.decisions}


def reads(sizes: dict[str, int]) -> list[SessionMessage]:
    """One Read of its own file per entry, each output ``size`` characters long."""
    messages = [user("go")]
    for tool_use_id, size in sizes.items():
        messages += pair(tool_use_id, f"{tool_use_id} line\n" * (size // len(f"{tool_use_id} line\n")), "Read", file_path=f"/src/{tool_use_id}.py")
    return messages + [user("done"), assistant("ok")]


def test_a_context_under_its_target_loses_nothing():
    messages = reads({"big": 9000, "huge": 20000})
    # An earlier read of the same file: a rule would drop it, but nothing needs freeing.
    messages[1:1] = pair("early", "old view\n" * 700, "Read", file_path="/src/big.py")
    out = run(messages, window=10**6)
    assert out.stats.need_chars == 0 and out.stats.short_chars == 0
    assert out.messages == messages and all(a is b for a, b in zip(out.messages, messages))
    assert {d.action for d in out.decisions} == {KEEP}
    assert by_id(out)["early"].reason == UNDER_TARGET
    assert out.archive == {}


def test_a_small_need_cuts_only_the_least_valuable_output():
    messages = reads({"low": 9000, "mid": 9000, "high": 9000})
    values = {"low": 0.1, "mid": 0.5, "high": 0.9}
    out = run(messages, window_needing(messages, 2000), values)
    actions = {k: d.action for k, d in by_id(out).items()}
    assert actions == {"low": TRUNCATE, "mid": KEEP, "high": KEEP}
    assert out.stats.short_chars == 0
    assert out.stats.chars_after / CHARS_PER_TOKEN <= window_needing(messages, 2000) * TARGET_PERCENT / 100
    # Without a window the default budget frees 90 % of the judged outputs: all three are cut.
    default = compact_sync(messages, ValueJudge(values), resolve_options(preserve_recent_messages=2))
    assert default.stats.need_chars is None and default.stats.truncated == 3


def test_when_the_usual_cuts_fall_short_every_other_judged_output_is_truncated_least_valuable_first():
    # Under their cut-over and too valued to be cheap: the budget alone never cuts them.
    messages = reads({"a": 3500, "b": 3500, "c": 3500})
    values = {"a": 0.6, "b": 0.2, "c": 0.9}
    need = 3000  # one digest frees about 2,800
    out = run(messages, window_needing(messages, need), values)
    actions = {k: d.action for k, d in by_id(out).items()}
    assert actions == {"a": TRUNCATE, "b": TRUNCATE, "c": KEEP}
    assert out.stats.short_chars == 0 and out.stats.inputs_archived == 0


def protected_session(body: str, heredoc: str) -> list[SessionMessage]:
    """A Write, a long heredoc and a long Task prompt among calls the rules protect, then a pinned tail."""
    messages = [user("build the thing")]
    messages += pair("write", "File created successfully at: /src/app.py", "Write", file_path="/src/app.py", content=body)
    messages += pair("heredoc", "ok", "Bash", command=f"cat > /tmp/notes.md <<'EOF'\n{heredoc}\nEOF", description="notes")
    messages += pair("push", "To github.com:o/r.git\n   1a2b..3c4d  main -> main", "Bash", command="git push origin main " + "-v " * 300)
    messages += pair("broken", "Error: boom\n" * 40, "Bash", is_error=True, command="python broken.py " + "--flag " * 200)
    messages += pair("task", "summary of findings\n" * 20, "Task", description="survey", prompt="Look into this. " * 200)
    messages += [
        assistant("", use("ask", "AskUserQuestion", text="User answered: yes", questions=[{"question": "Q " * 400}])),
        results(result("ask", "User answered: yes")),
    ]
    messages += [user("now the last step"), *pair("last", "z" * 3000, "Write", file_path="/src/last.py", content="L" * 5000)]
    return messages


def test_a_huge_need_moves_the_bodies_of_old_calls_to_the_archive_and_protected_ones_stay(tmp_path: Path):
    body, heredoc = "print('hello')\n" * 400, "note line\n" * 300
    messages = protected_session(body, heredoc)
    out = run(messages, window=1000, archive_dir=str(tmp_path))
    decisions = by_id(out)
    assert out.stats.inputs_archived == 4 and out.stats.short_chars > 0  # a window far too small
    assert {k for k, d in decisions.items() if d.reason == INPUT_ARCHIVED} == {"write", "heredoc", "push", "task"}

    uses = {u.tool_use_id: u for m in out.messages for u in m.toolUses}
    originals = {u.tool_use_id: u for m in messages for u in m.toolUses}
    for tool_use_id in ("write", "heredoc", "task"):
        assert list(uses[tool_use_id].input) == list(originals[tool_use_id].input)  # the same keys, in order
    write = uses["write"].input
    assert write["file_path"] == "/src/app.py"
    saved = archive_path(str(tmp_path), body)
    assert write["content"] == (
        f"[fast-jev-compaction moved this {len(body):,}-char content to the archive: saved at {saved}; "
        "Read it if needed; the file on disk holds its current content]"
    )
    assert out.archive[saved] == body
    command = uses["heredoc"].input["command"]
    assert "the file on disk" not in command and out.archive[command.split("saved at ")[1].split(";")[0]].endswith(heredoc + "\nEOF")
    assert uses["heredoc"].input["description"] == "notes"
    # Calls whose inputs the rules protect and the pinned tail stay whole; a push's command is
    # moved like any heredoc (its output, kept whole, is what cannot be had again).
    assert decisions["push"].reason == INPUT_ARCHIVED and decisions["push"].action == KEEP
    for tool_use_id in ("broken", "ask", "last"):
        assert uses[tool_use_id].input == originals[tool_use_id].input
    assert decisions["last"].reason == "pinned"
    assert out.messages[-1] is messages[-1]


def test_old_bodies_stay_while_cutting_outputs_reaches_the_target(tmp_path: Path):
    messages = protected_session("print('hello')\n" * 400, "note line\n" * 300)
    messages[1:1] = pair("log", "build step done\n" * 2000, "Read", file_path="/tmp/build.log")
    out = run(messages, window_needing(messages, 5000), archive_dir=str(tmp_path))
    assert by_id(out)["log"].action == TRUNCATE
    assert out.stats.inputs_archived == 0 and out.stats.short_chars == 0
    assert all(d.reason != INPUT_ARCHIVED for d in out.decisions)


def test_without_an_archive_old_bodies_stay(tmp_path: Path):
    messages = protected_session("print('hello')\n" * 400, "note line\n" * 300)
    out = run(messages, window=1000)
    assert out.stats.inputs_archived == 0
    assert [u.input for m in out.messages for u in m.toolUses if u.tool_use_id == "write"] == [messages[1].toolUses[0].input]


def test_a_later_pass_leaves_a_moved_body_as_it_is(tmp_path: Path):
    messages = protected_session("print('hello')\n" * 400, "note line\n" * 300)
    first = run(messages, window=1000, archive_dir=str(tmp_path))
    second = run(first.messages, window=1000, archive_dir=str(tmp_path))
    assert second.stats.inputs_archived == 0
    assert not any(carries_mark(text) for text in second.archive.values())  # no marker archived as a body
    moved = [u.input for m in first.messages for u in m.toolUses if u.tool_use_id == "write"]
    assert [u.input for m in second.messages for u in m.toolUses if u.tool_use_id == "write"] == moved


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def with_image(messages: list[SessionMessage], at: int) -> list[SessionMessage]:
    """``messages`` with a screenshot attached to the user message at ``at``, as the transcript
    reader keeps it (an extra block beside the text)."""
    import base64

    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}}
    message = messages[at]
    return [*messages[:at], replace(message, extra={"extraBlocks": [block], "uuid": "u-shot"}), *messages[at + 1:]]


def test_when_outputs_and_inputs_fall_short_old_attached_images_move_to_the_archive(tmp_path: Path):
    session = protected_session("print('hello')\n" * 400, "note line\n" * 300)
    messages = with_image([session[0], user("it looks like this"), *session[1:]], 1)
    messages = with_image(messages, len(messages) - 1)  # in the pinned window
    out = run(messages, window=1000, archive_dir=str(tmp_path))
    assert out.stats.media_archived == 1 and out.stats.inputs_archived > 0
    saved = archive_path(str(tmp_path), PNG, ".png")
    assert out.media == {saved: PNG}
    shot = out.messages[1]
    assert shot.text == messages[1].text and shot.handle is None and "uuid" not in shot.extra
    assert shot.extra["extraBlocks"] == [{
        "type": "text",
        "text": f"[fast-jev-compaction moved an image/png (2.1 kB) of this message to the archive: saved at {saved}; "
        "Read it to see it again]",
    }]
    assert out.messages[-1] is messages[-1]  # the pinned window keeps its image


def test_attached_images_stay_while_the_rungs_above_reach_the_target(tmp_path: Path):
    plain = reads({"log": 40000, "other": 3000})
    messages = with_image([plain[0], user("it looks like this"), *plain[1:]], 1)
    out = run(messages, window_needing(messages, 10000), archive_dir=str(tmp_path))
    assert out.stats.short_chars == 0 and out.stats.media_archived == 0 and out.media == {}
    assert out.messages[1] is messages[1]


def test_an_image_moves_when_the_need_is_left_short_by_a_call_whose_output_and_input_both_went(tmp_path: Path):
    """A call cut on both rungs frees its output's digest and its input once each: what is still
    needed after them, less than an image's worth, takes the image."""
    session = [
        user("set it up"),
        *pair("setup", "surveyed one more module\n" * 1000, "Task", description="survey", prompt="Survey the code. " * 200),
        user("it looks like this"),
        user("thanks"), assistant("done"),
    ]
    messages = with_image(session, 3)
    probe = run(messages, window=1000, archive_dir=str(tmp_path))
    both = by_id(probe)["setup"]
    assert both.action == TRUNCATE and both.reason == INPUT_ARCHIVED
    out = run(messages, window_needing(messages, both.chars_freed + 1000 - MEDIA_CHARS), archive_dir=str(tmp_path))
    # The window is whole tokens: the need comes within one of a token's share of the aim (1.33 chars).
    assert both.chars_freed + 1000 - 2 <= out.stats.need_chars <= both.chars_freed + 1000
    assert by_id(out)["setup"].reason == INPUT_ARCHIVED and out.stats.media_archived == 1 and out.stats.short_chars == 0


def test_the_hook_moves_an_old_write_body_to_its_archive_when_outputs_cannot_fit_the_window(data_dir: Path):
    """The plugin's own pass over a window far too small: the answer replaces, the Write call goes
    back with its keys and a marker for its body, and the marker's file holds the body."""
    from test_hook_entry import _bash, event, run_hook

    body = "export function handler() {\n  return 42;\n}\n" * 200
    write = {
        "tool_use_id": "toolu_write", "tool": "Write", "input": {"file_path": "/src/handler.ts", "content": body},
        "text": "File created successfully at: /src/handler.ts",
    }
    messages: list[dict[str, Any]] = [
        {"role": "user", "text": "write the handler", "toolUses": [], "handle": "h-prompt"},
        {"role": "assistant", "text": "", "toolUses": [write], "handle": "h-write"},
        {"role": "user", "text": "", "toolUses": [], "toolResults": [
            {"tool_use_id": "toolu_write", "text": write["text"], "isError": False}], "handle": "h-write-result"},
        *_bash(1, "seq 1 3000", "\n".join(str(n) for n in range(1, 3001))),
        # Past the pinned recent messages.
        *({"role": "assistant", "text": f"Step {n} done.", "toolUses": [], "handle": f"h-done-{n}"} for n in range(8)),
    ]
    doc = event(messages, data_dir, trigger="plugin", context={"tokens": 9_000, "window": 10_000})
    answer, _ = run_hook(json.dumps(doc).encode(), data_dir)
    assert answer["action"] == "replace", answer.get("reason")
    uses = [u for m in answer["messages"] for u in m.get("toolUses", []) if u["tool_use_id"] == "toolu_write"]
    assert len(uses) == 1 and list(uses[0]["input"]) == ["file_path", "content"]
    content = uses[0]["input"]["content"]
    assert content.startswith(f"[fast-jev-compaction moved this {len(body):,}-char content to the archive: saved at ")
    path = saved_path(content)
    assert path is not None and Path(path).read_bytes() == body.encode()
