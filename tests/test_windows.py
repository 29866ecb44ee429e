"""Windowed states: any history size compacts, every request within budget (windows.py)."""

from __future__ import annotations

import pytest

from fast_jev_compaction.compaction import compact_sync
from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.options import CompactOptions
from fast_jev_compaction.state.fitting import fit_state
from fast_jev_compaction.state.goal import goal_from_messages
from fast_jev_compaction.state.tokens import estimate_tokens
from fast_jev_compaction.state.windows import WINDOWED
from fast_jev_compaction.textutil import js_json
from scripted_asker import ScriptedAsker, pair, user

OUTPUT = "def handler(event):\n    return process(event)\n" * 8


def session(calls: int) -> list:
    messages = [user("Please refactor the event handlers and keep the tests green")]
    for k in range(calls):
        tool, field = ("Read", "file_path") if k % 2 else ("Bash", "command")
        value = f"/repo/src/handler_{k}.py" if k % 2 else f"python -m pytest tests/test_handler_{k}.py"
        messages += pair(f"toolu_{k}", f"{OUTPUT}# {k}\n", tool, **{field: value})
    messages.append(user("Now summarise what changed"))
    return messages


EVERY_CALL = CompactOptions(use_rules=False, policy="threshold")


def wire_tokens(request) -> int:
    return estimate_tokens(js_json({"model": "jev-latest", "state": request.state, "questions": request.questions}))


@pytest.fixture(scope="module")
def big():
    messages = session(3000)
    asker = ScriptedAsker(0.9, yields=0)
    # Without the rules, and with the threshold policy (it asks about every call, the budget one
    # only about outputs it could cut), every candidate reaches the judge: the largest load.
    result = compact_sync(messages, asker, EVERY_CALL)
    return messages, asker, result


def test_three_thousand_calls_compact_with_every_request_within_budget(big):
    messages, asker, result = big
    assert result.stats.state_stage == WINDOWED
    assert result.stats.windows > 1
    assert all(wire_tokens(request) <= CompactOptions().max_request_tokens for request in asker.requests)
    assert all(request.state and isinstance(request.state, dict) for request in asker.requests)
    assert result.stats.requests == len(asker.requests)


def test_every_candidate_is_asked_exactly_once(big):
    messages, asker, result = big
    candidates = [call for call in pair_tool_calls(messages, CompactOptions().preserve_recent_messages).candidates]
    names = asker.asked_names
    assert len(names) == len(set(names)) == 2 * len(candidates)
    assert {f"call_{c.id}" for c in candidates} <= set(names)


def test_a_window_shows_its_own_calls_in_detail_and_the_newest_messages(big):
    messages, asker, _ = big
    last = len(messages) - 1
    for request in asker.requests[:3] + asker.requests[-2:]:
        asked = {name.split("_", 1)[1] for name in request.questions}
        history = request.state["history"]
        detailed = {c["id"] for e in history for c in e.get("tool_calls", []) if isinstance(c, dict)}
        assert asked <= detailed
        assert history[-1]["i"] == last
        assert request.state["goal"] == goal_from_messages(messages)


def test_windows_share_the_cost_linearly(big):
    _, asker, result = big
    # Each request carries close to a full state; the total grows with the candidates, not their square.
    assert result.stats.estimated_tokens <= len(asker.requests) * CompactOptions().max_request_tokens
    assert len(asker.requests) < 3000 / 20


def test_a_session_that_fits_one_state_gets_exactly_that_state():
    messages = session(40)
    options = EVERY_CALL
    asker = ScriptedAsker(0.9, yields=0)
    result = compact_sync(messages, asker, options)
    pairing = pair_tool_calls(messages, options.preserve_recent_messages)
    expected = fit_state(messages, pairing, goal_from_messages(messages), options.preserve_recent_messages, 25_000)
    assert [request.state for request in asker.requests] == [expected.state]
    assert result.stats.windows == 0
    assert result.stats.state_stage == expected.stage


def test_small_budgets_force_windows_on_a_small_session():
    messages = session(200)
    options = CompactOptions(max_state_tokens=3000, max_request_tokens=4000, use_rules=False, policy="threshold")
    asker = ScriptedAsker(0.9, yields=0)
    result = compact_sync(messages, asker, options)
    assert result.stats.windows > 1
    assert all(wire_tokens(request) <= 4000 for request in asker.requests)
    candidates = pair_tool_calls(messages, options.preserve_recent_messages).candidates
    assert sorted(asker.asked_names) == sorted(f"{k}_{c.id}" for c in candidates for k in ("call", "result"))


def test_the_hook_compacts_a_three_thousand_call_event(tmp_path):
    """The real hook script, a real subprocess: past the old ~1,300-call limit the answer is a
    replace, not the built-in summary."""
    import json
    import subprocess
    import sys

    from test_hook_entry import HOOK, event, hook_env

    messages = [m.to_wire() for m in session(3000)]
    # The gate is not under test here: a 10 % reduction is enough to replace.
    body = json.dumps(event(messages, tmp_path, options={"minReductionRatio": 0.1})).encode()
    out = subprocess.run([sys.executable, str(HOOK)], input=body, capture_output=True, env=hook_env(tmp_path), cwd=tmp_path, timeout=300)
    answer = json.loads(out.stdout)
    assert answer["action"] == "replace", answer.get("reason")
    # The embedded judge scores in process; windows are what a Jev-protocol judge gets (above).
    assert "replaced session=session-1" in (tmp_path / "hook.log").read_text()
    assert len(answer["messages"]) < len(messages)


def test_a_request_about_a_few_calls_carries_a_state_sized_by_them():
    """A later pass asking about the newest calls of a long history: its state holds them in
    detail, the newest messages and a little of the history around them, not the whole history."""
    from fast_jev_compaction.state.questions import question_tokens
    from fast_jev_compaction.state.windows import SURROUND_PER_CALL, plan_requests

    messages = session(400)
    pairing = pair_tool_calls(messages, 6)
    goal = goal_from_messages(messages)
    asked = pairing.candidates[-2:]
    cost = {call.id: question_tokens(call) for call in asked}
    requests = plan_requests(messages, pairing, asked, goal, 6, 25_000, 30_000, cost)
    everything = plan_requests(messages, pairing, pairing.candidates, goal, 6, 25_000, 30_000,
                               {call.id: question_tokens(call) for call in pairing.candidates})
    assert len(requests) == 1
    state = requests[0].state
    detailed = {c["id"] for e in state["history"] for c in e.get("tool_calls", []) if isinstance(c, dict)}
    assert {call.id for call in asked} <= detailed
    assert state["history"][-1]["i"] == len(messages) - 1
    assert len(state["history"]) < 0.1 * len(messages)
    assert requests[0].state_tokens < 0.1 * sum(r.state_tokens for r in everything)
    # The surroundings stay within their share: a few hundred tokens per asked call.
    newest_and_detail = estimate_tokens(js_json({**state, "history": [e for e in state["history"] if e["i"] >= asked[0].call_index]}))
    assert requests[0].state_tokens - newest_and_detail <= 2 * SURROUND_PER_CALL + 50


def _spaced_session() -> list:
    # Texts of long runs of spaces: each character counts in the size guess, few in the estimate.
    messages = [user("Please tidy the handlers" + " " * 4000 + "and keep the tests green")]
    for k in range(4):
        messages += pair(f"toolu_{k}", f"{OUTPUT}# {k}\n", "Read", file_path=f"/repo/src/handler_{k}.py")
        messages.append(user("Next one." + " " * 4000 + "Thanks."))
    return messages


def _plain_fit(messages: list, limit: float):  # type: ignore[no-untyped-def]
    from fast_jev_compaction.state.fitting import DETAILED_STAGES, _Budget
    from fast_jev_compaction.state.history import history_entries

    pairing = pair_tool_calls(messages, 2)
    goal = goal_from_messages(messages)
    for input_chars, stage in DETAILED_STAGES:
        tokens = _Budget(goal, history_entries(messages, pairing, input_chars), limit).tokens
        if tokens <= limit:
            return stage, tokens
    return None


def test_a_history_guessed_far_over_the_limit_is_not_tried() -> None:
    """The single state is not tried when the history's size guess passes
    GUESSED_CHARS_PER_TOKEN characters per token of the limit, even where it would have fitted
    (the trade-off of fitting.GUESSED_CHARS_PER_TOKEN); under that it is tried as before."""
    from fast_jev_compaction.state.fitting import GUESSED_CHARS_PER_TOKEN, _size_guess, fit_detailed
    from fast_jev_compaction.state.history import RenderMemo, shown_messages

    messages = _spaced_session()
    pairing = pair_tool_calls(messages, 2)
    goal = goal_from_messages(messages)
    guessed = sum(map(_size_guess, shown_messages(messages, pairing, RenderMemo())))
    fitted = _plain_fit(messages, 10_000)
    assert fitted is not None
    needed = fitted[1]
    assert guessed > GUESSED_CHARS_PER_TOKEN * needed  # the case the guess gets wrong
    assert fit_detailed(messages, pairing, goal, needed, RenderMemo()) is None
    roomy = guessed / GUESSED_CHARS_PER_TOKEN
    tried = fit_detailed(messages, pairing, goal, roomy, RenderMemo())
    assert tried is not None and (tried.stage, tried.tokens) == _plain_fit(messages, roomy)


def test_a_history_not_tried_as_one_state_is_asked_about_in_windows() -> None:
    messages = _spaced_session()
    asker = ScriptedAsker(0.9, yields=0)
    options = CompactOptions(use_rules=False, policy="threshold", max_state_tokens=1_500, preserve_recent_messages=2)
    result = compact_sync(messages, asker, options)
    assert result.stats.state_stage == WINDOWED
    assert asker.requests and all(wire_tokens(request) <= options.max_request_tokens for request in asker.requests)
    asked = {name for request in asker.requests for name in request.questions}
    assert {f"call_{c.id}" for c in pair_tool_calls(messages, 2).candidates} <= asked


def _windows(messages, max_state_tokens=6000.0, max_request_tokens=8000.0):
    from fast_jev_compaction.state.history import RenderMemo
    from fast_jev_compaction.state.questions import question_tokens
    from fast_jev_compaction.state.windows import _Windows

    pairing = pair_tool_calls(messages, 2)
    to_judge = list(pairing.candidates)
    cost = {call.id: question_tokens(call) for call in to_judge}
    windows = _Windows(messages, pairing, goal_from_messages(messages), 2, max_state_tokens, max_request_tokens, cost, RenderMemo())
    return windows, to_judge, cost


def _mixed_session() -> list:
    """Small outputs with some large ones between them (a large call's detail holds its digest)."""
    messages = [user("Please refactor the event handlers and keep the tests green")]
    for k in range(120):
        output = ("x = compute(event)  # step\n" * 400 if k % 17 == 5 else OUTPUT) + f"# {k}\n"
        messages += pair(f"toolu_{k}", output, "Read", file_path=f"/repo/src/handler_{k}.py")
    messages.append(user("Now summarise what changed"))
    return messages


def test_windows_split_fills_each_window_to_window_share_of_the_room_and_no_further():
    windows, to_judge, question = _windows(_mixed_session())
    split = windows._split(to_judge)
    # WINDOW_SHARE, pinned: 70 % of a window state's room for its own calls, the rest for the
    # history around them.
    room = windows._room() * 0.7

    def used(calls) -> int:
        return sum(windows._call_cost(c) + question[c.id] for c in calls)

    assert len(split) > 2 and [c for window in split for c in window] == to_judge
    for window, following in zip(split, split[1:]):
        assert used(window) <= room
        # Full: the next call would have taken it past the share.
        assert used(window + following[:1]) > room
    assert used(split[-1]) <= room


def test_windows_surround_takes_smaller_neighbours_past_one_that_does_not_fit():
    from scripted_asker import assistant

    messages = [
        user("Please refactor the event handlers"),
        assistant("Looking at the handlers first."),
        user("Here is the whole spec:\n" + "a requirement of the spec, in words\n" * 400),
        *pair("toolu_0", OUTPUT, "Read", file_path="/repo/src/handler_0.py"),
        assistant("Done with that one."),
        user("next"),
        assistant("On it."),
    ]
    windows, _, _ = _windows(messages, max_state_tokens=50_000.0, max_request_tokens=60_000.0)
    small = (0, 1, 5, 6, 7)
    cost = {index: windows._context(index)[1] for index in (*small, 2)}
    assert cost[2] > sum(cost[index] for index in small)
    entries: dict = {}
    # Room around the call (at 3) for every small message, not for the spec just before it:
    # the walk goes on past the spec while the later side still grows.
    tokens = windows._surround(entries, 0, sum(cost[index] for index in small), 3, 3)
    assert set(entries) == set(small)
    assert tokens == sum(windows._context(index)[1] for index in entries)
