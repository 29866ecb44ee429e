"""Regrouping a rebuilt history into Claude Code's turn shape, and the check before answering.

The conversations have Claude Code's fragment shape: one message per record, so a response with
several tool calls is a text fragment plus one assistant message per call, and its results come
back one user message each, in the order the tools finished (or interleaved with the calls when
they ran one by one). Every mix of keep / truncate / drop inside one turn is exercised.
"""

from __future__ import annotations

import re
from typing import get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult, ToolUse
from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.decide.decisions import Action, CallDecision
from fast_jev_compaction.decide.digest import DigestShape
from fast_jev_compaction.decide.markers import drop_marker, short_index_line
from fast_jev_compaction.decide.rebuild import apply_decisions, cut_output
from fast_jev_compaction.hook.answer import wire_messages
from fast_jev_compaction.hook.turns import carried_by, keeps_handle, regroup, replies, replies_after, turn_problems

# The three outcomes in decisions.py order; a rename of the actions changes nothing here.
KEEP, TRUNCATE, DROP = get_args(Action)
HEAD = 40
SHAPE = DigestShape(budget=200, head=HEAD)


def prompt(text: str, handle: str = "") -> SessionMessage:
    return SessionMessage(role="user", text=text, handle=handle or f"h-{text}")


def prose(text: str) -> SessionMessage:
    return SessionMessage(role="assistant", text=text, handle=f"h-{text}")


def call(name: str) -> SessionMessage:
    use = ToolUse(tool_use_id=name, tool="Read", input={"file_path": f"/{name}"})
    return SessionMessage(role="assistant", toolUses=(use,), handle=f"h-use-{name}")


def result(name: str, text: str = "", extra: str = "") -> SessionMessage:
    block = ToolResult(tool_use_id=name, text=text or f"output of {name}", isError=False)
    return SessionMessage(role="user", text=extra, toolResults=(block,), handle=f"h-result-{name}")


def shape(messages: list[SessionMessage]) -> list[tuple[str, str, list[str], list[str]]]:
    return [
        (m.role, m.text, [u.tool_use_id for u in m.toolUses], [r.tool_use_id for r in m.toolResults or []])
        for m in messages
    ]


# --------------------------------------------------------------------------- regroup


def test_one_response_with_parallel_calls_becomes_one_turn_and_one_results_message() -> None:
    messages = [prompt("go"), prose("Two at once."), call("a"), call("b"), result("b"), result("a"), prose("Done.")]
    out = regroup(messages)
    assert shape(out) == [
        ("user", "go", [], []),
        ("assistant", "Two at once.", ["a", "b"], []),
        ("user", "", [], ["b", "a"]),
        ("assistant", "Done.", [], []),
    ]
    # Untouched messages that need no merging are the very same objects (the prompt keeps its handle).
    assert out[0] is messages[0] and out[-1] is messages[-1]
    assert out[1].handle is None and out[2].handle is None
    assert out[2].toolResults == (messages[4].toolResults[0], messages[5].toolResults[0])  # type: ignore[index]


def test_calls_run_one_by_one_stay_interleaved() -> None:
    messages = [prompt("go"), call("a"), result("a"), call("b"), result("b")]
    out = regroup(messages)
    assert all(o is m for o, m in zip(out, messages, strict=True))


def test_text_between_the_calls_of_a_turn_joins_the_turn_text_in_order() -> None:
    # The engine rebuilds a message as text then calls; the prose keeps its order.
    messages = [prompt("go"), prose("First."), call("a"), prose("Second."), call("b"), result("a"), result("b")]
    assert shape(regroup(messages)) == [
        ("user", "go", [], []),
        ("assistant", "First.Second.", ["a", "b"], []),
        ("user", "", [], ["a", "b"]),
    ]


def test_text_of_a_results_message_rides_with_the_results() -> None:
    messages = [call("a"), call("b"), result("a", extra="[Request interrupted by user]"), result("b")]
    out = regroup(messages)
    assert shape(out) == [("assistant", "", ["a", "b"], []), ("user", "[Request interrupted by user]", [], ["a", "b"])]


def test_text_fragments_of_one_response_join_as_the_engine_joins_them() -> None:
    messages = [prompt("go"), prose("Let me "), SessionMessage(role="assistant", text=""), prose("look."), call("a"), result("a")]
    assert shape(regroup(messages))[1] == ("assistant", "Let me look.", ["a"], [])


def test_results_without_a_call_and_pending_calls_stay_where_they_are() -> None:
    stray = result("gone")
    messages = [prompt("go"), stray, prose("Now."), call("a"), call("b")]
    out = regroup(messages)
    assert out[1] is stray
    assert shape(out)[2:] == [("assistant", "Now.", ["a", "b"], [])]
    assert turn_problems(wire_messages(out), messages) == []


def test_a_turn_whose_calls_were_all_dropped_stays_a_reply_of_its_own() -> None:
    messages = [prompt("go"), prose("Looking."), call("a"), result("a"), prose("Then."), call("b"), result("b")]
    decisions = [CallDecision("t1", "a", "Read", 0.0, 0.0, DROP, "budget", 0, "/archive/a.txt")]
    calls = pair_tool_calls(messages, 0).calls
    rebuilt = apply_decisions(messages, decisions, calls, SHAPE)
    out = regroup(rebuilt, None, replies(messages))
    # Two replies, two text blocks; the dropped call's marker on its own line after its reply's prose.
    marker = drop_marker("Read", "/a", len("output of a"), False, "/archive/a.txt")
    assert shape(out) == [
        ("user", "go", [], []),
        ("assistant", f"Looking.\n{marker}", [], []),
        ("assistant", "Then.", ["b"], []),
        ("user", "", [], ["b"]),
    ]
    assert turn_problems(wire_messages(out), messages) == []
    # Without the responses (a list that lost an assistant message) the replies join as before.
    assert shape(regroup(rebuilt, None, replies(messages)[1:]))[1] == ("assistant", f"Looking.\n{marker}\nThen.", ["b"], [])


def test_a_dropped_call_with_no_prose_of_its_own_leads_the_next_reply_on_its_own_line() -> None:
    messages = [prompt("go"), call("a"), result("a"), prose("Then."), call("b"), result("b")]
    decisions = [CallDecision("t1", "a", "Read", 0.0, 0.0, DROP, "budget", 0, "/archive/a.txt")]
    out = regroup(apply_decisions(messages, decisions, pair_tool_calls(messages, 0).calls, SHAPE), None, replies(messages))
    marker = drop_marker("Read", "/a", len("output of a"), False, "/archive/a.txt")
    assert shape(out) == [("user", "go", [], []), ("assistant", f"{marker}\nThen.", ["b"], []), ("user", "", [], ["b"])]


def test_replies_number_the_responses_of_the_assistant_messages() -> None:
    messages = [prompt("go"), prose("A."), call("a"), call("b"), result("a"), result("b"), prose("B."), prompt("next"), prose("C.")]
    assert list(replies(messages)) == [1, 1, 1, 2, 3]


def test_replies_after_number_the_messages_a_pass_left_by_their_sources() -> None:
    first = [prompt("go"), prose("X."), call("x"), result("x"), prose("Y.")]
    messages = [*first, prompt("next"), prose("A."), call("a"), result("a"), prose("B."), call("b"), result("b")]
    decisions = [CallDecision("t3", "a", "Read", 0.0, 0.0, DROP, "budget", 0, "/archive/a.txt")]
    rebuilt = apply_decisions(messages, decisions, pair_tool_calls(messages, 0).calls, SHAPE)
    # The first turn evicted, as the ladder's rung d leaves it: one index line after its prompt.
    out = [rebuilt[0], SessionMessage(role="assistant", text=short_index_line("/archive/turn.txt")), *rebuilt[5:]]
    marker = drop_marker("Read", "/a", len("output of a"), False, "/archive/a.txt")
    assert [m.text for m in out if m.role == "assistant"] == [out[1].text, "A.", marker, "B.", ""]
    numbers = list(replies_after(out, messages))
    # The index line a response of its own; the dropped call's marker (rebuilt) with "A.", its
    # response; "B." and its call the next one.
    assert numbers[0] < 0 and numbers[1:] == [3, 3, 4, 4]
    assert shape(regroup(out, None, replies_after(out, messages)))[1:5] == [
        ("assistant", out[1].text, [], []),
        ("user", "next", [], []),
        ("assistant", f"A.\n{marker}", [], []),
        ("assistant", "B.", ["b"], []),
    ]
    # Numbered before the pass (what the hook did), the counts differ and the replies run together.
    assert shape(regroup(out, None, replies(messages)))[3][1] == f"A.\n{marker}\nB."


# --------------------------------------------------------------------------- turn_problems


def test_turn_problems_finds_what_the_engine_would_repair() -> None:
    messages = [prompt("go"), call("a"), call("b"), result("b"), result("a")]
    wired = wire_messages(messages)
    problems = turn_problems(wired, messages)
    assert problems == ["tool result a is message 4, its call is message 1"]
    assert turn_problems(wire_messages(regroup(messages)), messages) == []


def test_turn_problems_reads_handle_only_entries_and_flags_lost_calls_and_duplicates() -> None:
    messages = [prompt("go"), call("a"), result("a"), result("orphan")]
    regrouped = wire_messages(regroup(messages), compact=True)
    assert regrouped[0] == {"handle": "h-go"}
    # A result whose call was never there is the engine's to drop; one that lost its call is not.
    assert turn_problems(regrouped, messages) == []
    assert turn_problems([regrouped[0], regrouped[2]], messages) == ["tool result a outlives its call"]
    doubled = [*regrouped[:3], regrouped[2]]
    assert "tool result a appears twice" in turn_problems(doubled, messages)
    assert turn_problems(regrouped[:2], messages) == ["tool call a lost its result"]


def test_turn_problems_reads_a_generator_and_handles_out_of_the_inputs_order() -> None:
    messages = [prompt("go"), call("a"), result("a"), prompt("next", "h-next"), call("b"), result("b")]
    handles = [m.handle for m in messages]
    # Every entry by handle, read once from a generator: the input's order, then reversed.
    assert turn_problems(({"handle": h} for h in handles), messages) == []
    problems = turn_problems(({"handle": h} for h in reversed(handles)), messages)
    assert problems == ["tool result b is message 0, its call is message 1", "tool result a is message 3, its call is message 4"]


# --------------------------------------------------------------------------- properties


@st.composite
def sessions(draw):
    """Claude Code-shaped messages: prompts, responses of 0-4 calls, results in any order."""
    messages: list[SessionMessage] = [prompt("start")]
    outputs: dict[str, str] = {}
    pending_ok = True
    turns = draw(st.integers(min_value=1, max_value=6))
    for turn in range(turns):
        if draw(st.booleans()):
            messages.append(prompt(f"prompt {turn}"))
        if draw(st.booleans()):
            messages.append(prose(f"Turn {turn} says hello. "))
        if draw(st.booleans()):
            messages.append(SessionMessage(role="assistant", text="", handle=f"h-thinking-{turn}"))
        names = [f"t{turn}c{k}" for k in range(draw(st.integers(min_value=0, max_value=4)))]
        for name in names:
            outputs[name] = draw(st.sampled_from(["short", "line of output\n" * 30, "x" * 400]))
        if draw(st.booleans()) and names:
            for name in names:  # one by one: each call's result before the next call
                messages += [call(name), result(name, outputs[name])]
            continue
        messages += [call(name) for name in names]
        if draw(st.booleans()):
            messages.append(prose(f"Turn {turn} after the calls."))
        last = turn == turns - 1
        if last and pending_ok and draw(st.booleans()):
            continue  # the calls are still running: no results yet
        finished = draw(st.permutations(names))
        messages += [result(name, outputs[name]) for name in finished]
    if draw(st.booleans()):
        messages.append(prose("All done."))
    return messages


def _decisions(messages: list[SessionMessage], actions: list[str]):
    calls = pair_tool_calls(messages, 0).calls
    decisions = [
        CallDecision(c.id, c.tool_use_id, c.tool, 0.0, 0.0, action, "budget", 0, f"/archive/{c.tool_use_id}.txt")  # type: ignore[arg-type]
        for c, action in zip(calls, actions)
    ]
    return calls, decisions


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.lists(st.sampled_from([KEEP, TRUNCATE, DROP]), min_size=24, max_size=24), st.data())
def test_every_mix_of_keep_truncate_drop_keeps_the_turn_shape(messages: list[SessionMessage], actions: list[str], data) -> None:
    calls, decisions = _decisions(messages, actions)
    archive = {d.tool_use_id: d.archive_path for d in decisions}
    # Engine text (a caveat, a skill's text) hangs on some messages.
    handles = [m.handle for m in messages if m.handle]
    hung = {h: f"<meta of {h}>" for h in data.draw(st.lists(st.sampled_from(handles), unique=True, max_size=4))}
    out = regroup(apply_decisions(messages, decisions, calls, SHAPE), carried_by(messages, hung), replies(messages))
    wired = wire_messages(out)

    # Hung text comes back once, in a user message, for every message that went back rebuilt.
    surviving_blocks = {b.tool_use_id for m in out for b in [*m.toolUses, *(m.toolResults or [])]}
    for source in messages:
        text = hung.get(source.handle or "")
        if text is None:
            continue
        blocks = {b.tool_use_id for b in [*source.toolUses, *(source.toolResults or [])]}
        survived = not blocks or bool(blocks & surviving_blocks)
        expected = 0 if keeps_handle(source) or not survived else 1
        assert sum(m.text.count(text) for m in out) == expected
        assert all(m.role == "user" for m in out if text in m.text)
    sent = out
    out = [m for m in out if m.toolResults or not m.text.startswith("<meta of ")]

    # What the engine will read pairs up: no result away from its call, none twice, none orphaned.
    assert turn_problems(wired, messages) == []
    answered = {r.tool_use_id for m in messages for r in m.toolResults or []}
    for index, message in enumerate(out):
        uses = [u.tool_use_id for u in message.toolUses]
        if any(u in answered for u in uses):
            following = out[index + 1]
            assert following.role == "user"
            assert {r.tool_use_id for r in following.toolResults or []} == set(uses) & answered

    # Each decision shows: kept verbatim, truncated with a note naming the saved file, dropped whole.
    action_of = {d.tool_use_id: d.action for d in decisions}
    original = {r.tool_use_id: r.text for m in messages for r in m.toolResults or []}
    now = {r.tool_use_id: r.text for m in out for r in m.toolResults or []}
    kept_uses = {u.tool_use_id for m in out for u in m.toolUses}
    for tool_use_id, text in original.items():
        action = action_of.get(tool_use_id, KEEP)
        if action == DROP:
            assert tool_use_id not in now and tool_use_id not in kept_uses
        elif action == TRUNCATE:
            assert now[tool_use_id] == (cut_output(text, False, SHAPE, archive[tool_use_id]) or text)
        else:
            assert now[tool_use_id] == text

    # Prose is verbatim and in order; plain prompts are the input's own objects.
    def prose_of(ms: list[SessionMessage], role: str) -> str:
        # Marker lines of dropped calls set aside (each on its own line), the rest is the prose.
        text = "".join(m.text for m in ms if m.role == role and m.text.strip())
        return re.sub(r"\n?\[fast-jev-compaction: [^\n]*? if needed\]\n?", "", text)

    assert sum(m.text.count("[fast-jev-compaction: the ") for m in out) == actions[: len(calls)].count(DROP)

    assert prose_of(out, "assistant") == prose_of(messages, "assistant")
    assert [m for m in out if m.role == "user" and not m.toolResults] == [
        m for m in messages if m.role == "user" and not m.toolResults
    ]
    assert all(any(o is m for m in messages) for o in out if o.role == "user" and not o.toolResults)

    # A run of assistant messages only after a reply left with prose and no calls: every turn is
    # one message, and its replies stay apart.
    for before, after in zip(sent, sent[1:]):
        if before.role == after.role == "assistant":
            assert not before.toolUses and re.sub(r"\[fast-jev-compaction: [^\n]*? if needed\]", "", before.text).strip()


def test_an_answer_that_would_separate_results_from_their_calls_falls_back(monkeypatch, tmp_path) -> None:
    from fast_jev_compaction.hook import compaction
    from fast_jev_compaction.hook.event import HookEvent
    from fast_jev_compaction.hook.log import HookLog

    big = "line of output\n" * 800
    messages = [prompt("go"), prose("Both.")]
    for turn in range(3):
        names = [f"t{turn}a", f"t{turn}b"]
        messages += [call(n) for n in names] + [result(n, big) for n in reversed(names)]
    messages.append(prose("Done."))
    event = HookEvent(messages=messages, sessionId="s", pluginData=str(tmp_path), options={"preserveRecentMessages": 1})
    log = HookLog(tmp_path)

    assert compaction.run_compaction(event, log).action == "replaced"
    # Without the regrouping the check sees what the engine would repair, and says so.
    monkeypatch.setattr(compaction, "regroup", lambda messages, carried=None, responses=None: list(messages))
    outcome = compaction.run_compaction(event, log)
    assert outcome.action == "fallback"
    assert outcome.reason.startswith("the pruned history would separate tool results from their calls (tool result t0a ")
    assert "ERROR tool results out of place: tool result t0a is message" in (tmp_path / "hook.log").read_text()


def test_a_call_dropped_between_its_turn_s_results_leaves_no_run_of_assistant_messages() -> None:
    # The engine hands results interleaved with the turn's later call fragments (spotter, 2.1.39).
    messages = [prompt("go"), call("a"), call("b"), result("a"), call("c"), result("b"), result("c"), prose("Next."), call("d"), result("d")]
    decisions = [CallDecision("t3", "c", "Read", 0.0, 0.0, DROP, "budget", 0, "/archive/c.txt")]
    out = regroup(apply_decisions(messages, decisions, pair_tool_calls(messages, 0).calls, SHAPE))
    assert all(not (x.role == y.role == "assistant") for x, y in zip(out, out[1:]))
    marker = drop_marker("Read", "/c", len("output of c"), False, "/archive/c.txt")
    assert shape(out) == [
        ("user", "go", [], []),
        ("assistant", "", ["a", "b"], []),
        ("user", "", [], ["a", "b"]),
        ("assistant", f"{marker}\nNext.", ["d"], []),
        ("user", "", [], ["d"]),
    ]


def test_a_turn_whose_result_comes_late_still_goes_out_in_its_place() -> None:
    # Turns go out as soon as their calls have their results; one still waiting holds back
    # what came after it, so the order is the input's.
    messages = [prompt("go"), call("a"), prompt("meanwhile"), call("b"), result("b"), result("a"), call("c")]
    out = regroup(messages)
    assert shape(out) == [
        ("user", "go", [], []),
        ("assistant", "", ["a"], []),
        ("user", "", [], ["a"]),
        ("user", "meanwhile", [], []),
        ("assistant", "", ["b"], []),
        ("user", "", [], ["b"]),
        ("assistant", "", ["c"], []),
    ]
    assert out[0] is messages[0] and out[3] is messages[2] and out[6] is messages[6]
    # A turn or results message that is one message already comes back as it was.
    assert out[1] is messages[1] and out[2] is messages[5] and out[5] is messages[4]


def _hook_replies(corpus_dir: str, data_dir, context: dict | None = None) -> tuple[dict, int, int]:
    """The a79e8577 session (entire-checkpoints) through the spawned hook: its answer, how many of
    the answer's assistant messages join two replies' texts, and how many replies are not in them
    (an evicted turn's replies are in its file). Markers and index lines are left out."""
    import json
    from pathlib import Path

    from fast_jev_compaction.conversation.transcript import read_messages
    from test_hook_entry import event, run_hook

    path = Path(corpus_dir) / "entire-checkpoints/PackmindHub__context-evaluator/a79e8577-088e-4020-be7a-d941574b478c.jsonl"
    messages = read_messages(path)
    extra = {} if context is None else {"context": context}
    answer, _ = run_hook(json.dumps(event([m.to_wire() for m in messages], data_dir, **extra)).encode(), data_dir)
    assert answer["action"] == "replace", answer.get("reason")

    # Each reply's texts in order, by the response they belong to.
    numbers = iter(replies(messages))
    texts = [(next(numbers), m.text) for m in messages if m.role == "assistant"]
    queue = [(reply, text.strip()) for reply, text in texts if text.strip()]
    by_handle = {m.handle: m for m in messages}
    answered = [by_handle[m["handle"]].to_wire() if set(m) == {"handle"} else m for m in answer["messages"]]
    joined = missing = 0
    for message in answered:
        if message["role"] != "assistant":
            continue
        rest = re.sub(r"\[fast-jev-compaction[^\n]*? if needed\]", "", message["text"]).strip()
        seen = set()
        while rest:
            while queue and not rest.startswith(queue[0][1]):
                queue.pop(0)
                missing += 1
            assert queue, rest[:200]
            reply, text = queue.pop(0)
            seen.add(reply)
            rest = rest[len(text):].strip()
        joined += len(seen) > 1
    return answer, joined, missing + len(queue)


def test_a_real_session_s_replies_stay_apart_through_the_hook(corpus_dir, data_dir) -> None:
    """A 2.1.47 session (entire-checkpoints) whose compaction drops calls between replies: before,
    5 of the hook's messages each joined two replies' texts. Spawned with JSON on stdin."""
    _, joined, missing = _hook_replies(corpus_dir, data_dir)
    assert (joined, missing) == (0, 0)


def test_replies_the_ladder_separated_stay_apart_when_it_evicts_a_turn(corpus_dir, data_dir) -> None:
    """Issue 21: the same session in a 15,000-token window, where the ladder moves a whole turn out
    (its assistant messages become one index line): the responses numbered before the ladder no
    longer matched the messages after it, and 3 of the hook's messages each joined two replies."""
    tokens = 78_000
    answer, joined, missing = _hook_replies(corpus_dir, data_dir, {"tokens": tokens, "window": 15_000, "percent": 100 * tokens / 15_000})
    assert "old turn(s) moved whole" in answer["toast"]
    assert joined == 0 and missing > 0


def _results(text: str, *names: str) -> SessionMessage:
    blocks = tuple(ToolResult(tool_use_id=name, text=f"output of {name}", isError=False) for name in names)
    return SessionMessage(role="user", text=text, toolResults=blocks, handle=f"h-results-{'-'.join(names)}")


def test_regroup_keeps_a_results_message_s_own_text_with_the_turn_of_its_first_result() -> None:
    # Turn 1's call waits across a message of no results of its own; one message answers both turns.
    messages = [call("a"), prompt("meanwhile"), call("b"), _results("[Request interrupted by user]", "a", "b")]
    out = regroup(messages)
    assert shape(out) == [
        ("assistant", "", ["a"], []),
        ("user", "[Request interrupted by user]", [], ["a"]),
        ("user", "meanwhile", [], []),
        ("assistant", "", ["b"], []),
        ("user", "", [], ["b"]),
    ]


def test_regroup_leaves_a_result_whose_call_is_unknown_in_place_with_its_message_s_text() -> None:
    only_stray = _results("hung text", "gone")
    out = regroup([prompt("go"), only_stray, prose("Next.")])
    assert out[1] is only_stray
    # Beside a result of a known call: the known one joins its turn with the message's text,
    # and the stray follows as a message of its own, never lost.
    out = regroup([prompt("go"), call("a"), _results("note", "gone", "a")])
    assert shape(out) == [
        ("user", "go", [], []),
        ("assistant", "", ["a"], []),
        ("user", "note", [], ["a"]),
        ("user", "", [], ["gone"]),
    ]
