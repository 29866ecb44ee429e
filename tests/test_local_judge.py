"""LocalJudge: feature behaviour, both state forms, explainability and robustness."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fast_jev_compaction.judge import JudgeInputError, LocalJudge
from fast_jev_compaction.judge.features import FEATURE_NAMES
from fast_jev_compaction.judge.model import load_state_model
from fast_jev_compaction.judge.state import read_state
from fast_jev_compaction.judge.state_features import state_features
from fast_jev_compaction.state.asker import AskResult, JevAsker
from fast_jev_compaction.state.tokens import estimate_tokens
from fast_jev_compaction.textutil import js_json

CONTEXT = "A coding assistant conversation is being compacted to free context."


# ---------------------------------------------------------------------------------------------
# hand-built fixtures following the "Jev state" contract in docs/ARCHITECTURE.md
# ---------------------------------------------------------------------------------------------


def call(cid: str, tool: str, inp: dict[str, Any], chars: int, error: bool = False, limit: int = 1000) -> dict[str, Any]:
    text = js_json(inp)
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return {"id": cid, "tool": tool, "input": text,
            "result": f"{'error' if error else 'ok'}, {chars} chars (omitted)"}


def line(cid: str, tool: str, rendered: str, chars: int, error: bool = False) -> str:
    return f"{cid} {tool} {rendered} \u2192 {'error' if error else 'ok'} {chars}ch"


def assistant(i: int, *calls: Any, text: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"i": i, "role": "assistant", "text": text}
    if calls:
        entry["tool_calls"] = list(calls)
    return entry


def user(i: int, text: str) -> dict[str, Any]:
    return {"i": i, "role": "user", "text": text}


def state(*entries: dict[str, Any], goal: str = "") -> dict[str, Any]:
    return {"context": CONTEXT, "goal": goal, "history": list(entries)}


def questions(*pairs: tuple[str, str, int]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for cid, tool, chars in pairs:
        out[f"call_{cid}"] = {
            "type": "noul",
            "instructions": f"Tool call {cid} ({tool}) should stay in the history: knowing this call was made, "
                            "with its input, still matters for what the assistant does next",
        }
        out[f"result_{cid}"] = {
            "type": "noul",
            "instructions": f"The full output of tool call {cid} ({tool}, {chars} chars) should stay in the history "
                            "verbatim: the assistant still needs its contents and re-running the tool would not do",
        }
    return out


def padding(start: int, count: int) -> list[dict[str, Any]]:
    """Neutral assistant messages that only age what came before them."""
    return [assistant(start + 2 * k, text=f"Step {k} done.") for k in range(count)]


def probs(s: dict[str, Any], q: dict[str, Any]) -> dict[str, float]:
    answers = LocalJudge().answer(s, q)
    return {name: a["noul"] for name, a in answers.items()}


READ_A = {"file_path": "/repo/src/alpha.py"}


# ---------------------------------------------------------------------------------------------
# feature behaviour
# ---------------------------------------------------------------------------------------------


def features(s: dict[str, Any]) -> dict[str, dict[str, float]]:
    return state_features(read_state(s))


def test_a_reread_supersedes_a_read_and_another_file_does_not() -> None:
    later_read = assistant(9, call("t2", "Read", READ_A, 4100))
    other_read = assistant(9, call("t2", "Read", {"file_path": "/repo/src/beta.py"}, 4100))
    base = [user(0, "start"), assistant(1, call("t1", "Read", READ_A, 4000)), *padding(3, 3)]
    assert features(state(*base, later_read))["t1"]["superseded"] == 1.0
    assert features(state(*base, other_read))["t1"]["superseded"] == 0.0


def test_a_partial_reread_does_not_supersede_a_full_read() -> None:
    base = [user(0, "start"), assistant(1, call("t1", "Read", READ_A, 4000))]
    partial = assistant(3, call("t2", "Read", {**READ_A, "offset": 10, "limit": 20}, 800))
    assert features(state(*base, partial))["t1"]["superseded"] == 0.0


def test_edit_call_is_kept_even_when_old() -> None:
    edit = call("t1", "Edit", {"file_path": "/repo/src/alpha.py", "old_string": "a = 1", "new_string": "a = 2"}, 600)
    s = state(user(0, "start"), assistant(1, edit), *padding(3, 80))
    p = probs(s, questions(("t1", "Edit", 600)))
    assert p["call_t1"] >= 0.9
    assert p["call_t1"] >= p["result_t1"]


def test_a_failed_call_is_held_by_the_error_floor() -> None:
    cmd = {"command": "python tools/check.py --all"}
    q = questions(("t1", "Bash", 3000))
    failed = probs(state(user(0, "go"), assistant(1, call("t1", "Bash", cmd, 3000, error=True)), *padding(3, 10)), q)
    passed = probs(state(user(0, "go"), assistant(1, call("t1", "Bash", cmd, 3000)), *padding(3, 10)), q)
    assert failed["call_t1"] >= load_state_model().error_floor
    assert failed["call_t1"] > passed["call_t1"]


def test_a_read_has_no_call_floor() -> None:
    s = state(user(0, "start"), assistant(1, call("t1", "Read", READ_A, 60_000)), *padding(3, 60))
    p = probs(s, questions(("t1", "Read", 60_000)))
    assert p["call_t1"] == pytest.approx(_unfloored_call(p["result_t1"]))


def _unfloored_call(keep_result: float) -> float:
    """keep_call with no floor: keep_result on Jev's scale, even at the reuse risk reuse_at_even."""
    at_even = load_state_model().call_reuse_at_even
    logit = math.log(keep_result / (1 - keep_result)) - math.log(at_even / (1 - at_even))
    return 1 / (1 + math.exp(-logit))


def test_later_text_repeating_the_output_raises_both_scores() -> None:
    """A state shows an output as its digest: a later reply repeating its terms raises both
    scores (the file's name alone does not: ``target_mentioned_later`` is not fitted)."""
    q = questions(("t1", "Read", 3000))
    read = {**call("t1", "Read", READ_A, 3000),
            "digest": "def parse_alpha_tokens(stream): \u2026 return tokenize_alpha_stream(stream) "
                      "[terms: parse_alpha_tokens, tokenize_alpha_stream]"}
    base = [user(0, "start"), assistant(1, read), *padding(3, 10)]
    mentioned = probs(state(*base, assistant(30, text="The bug: parse_alpha_tokens calls tokenize_alpha_stream twice.")), q)
    silent = probs(state(*base, assistant(30, text="Moving on to the docs.")), q)
    assert mentioned["result_t1"] > silent["result_t1"]
    assert mentioned["call_t1"] > silent["call_t1"]


def test_a_mention_before_the_call_does_not_count() -> None:
    s = state(user(0, "look at alpha.py"), assistant(1, call("t1", "Read", READ_A, 3000)), *padding(3, 5))
    assert features(s)["t1"]["target_mentioned_later"] == 0.0


def test_recent_call_scores_higher_than_old_call() -> None:
    q = questions(("t1", "Read", 3000))
    recent = probs(state(user(0, "go"), *padding(1, 2), assistant(9, call("t1", "Read", READ_A, 3000)),
                         *padding(11, 3)), q)
    old = probs(state(user(0, "go"), assistant(1, call("t1", "Read", READ_A, 3000)), *padding(3, 40)), q)
    assert recent["result_t1"] > old["result_t1"]
    assert recent["call_t1"] > old["call_t1"]


def test_read_of_a_file_edited_later_is_stale() -> None:
    q = questions(("t1", "Read", 3000))
    base = [user(0, "go"), assistant(1, call("t1", "Read", READ_A, 3000))]
    edit_same = assistant(3, call("t2", "Edit", {**READ_A, "old_string": "x", "new_string": "y"}, 300))
    edit_other = assistant(3, call("t2", "Edit", {"file_path": "/repo/src/beta.py", "old_string": "x",
                                                  "new_string": "y"}, 300))
    reread = assistant(5, call("t3", "Read", READ_A, 3000))
    assert features(state(*base, edit_same))["t1"]["edited_unread"] == 1.0
    assert features(state(*base, edit_other))["t1"]["edited_unread"] == 0.0
    assert features(state(*base, edit_same, reread))["t1"]["edited_unread"] == 0.0
    assert set(LocalJudge().explain(state(*base, edit_same), q)) == set(q)


def test_side_effect_command_is_kept_and_inspection_is_not() -> None:
    q = questions(("t1", "Bash", 2500))
    pad = padding(3, 30)
    push = probs(state(user(0, "ship it"), assistant(1, call("t1", "Bash", {"command": "git push origin main"}, 2500)),
                       *pad), q)
    look = probs(state(user(0, "ship it"), assistant(1, call("t1", "Bash", {"command": "ls -la src"}, 2500)), *pad), q)
    assert push["call_t1"] >= 0.9
    assert look["call_t1"] < 0.5
    assert look["call_t1"] == pytest.approx(_unfloored_call(look["result_t1"]))  # no floor for an inspection


def test_rerun_test_suite_supersedes_the_earlier_run() -> None:
    first = call("t1", "Bash", {"command": "pytest tests/test_parser.py -q"}, 5000)
    rerun = features(state(user(0, "fix tests"), assistant(1, first),
                           assistant(3, call("t2", "Bash", {"command": "pytest -q"}, 5000))))
    once = features(state(user(0, "fix tests"), assistant(1, first),
                          assistant(3, call("t2", "Bash", {"command": "git status"}, 300))))
    assert rerun["t1"]["superseded"] == 1.0 and once["t1"]["superseded"] == 0.0


def test_a_digest_sharing_the_goal_terms_raises_scores() -> None:
    q = questions(("t1", "Read", 3000))
    digested = {**call("t1", "Read", READ_A, 3000), "digest": "class LedgerRefund: ⏎ def rounding_mode(self): [terms: LedgerRefund.round]"}
    entries = [user(0, "go"), assistant(1, digested), *padding(3, 10)]
    in_goal = probs(state(*entries, goal="Fix the rounding_mode of LedgerRefund"), q)
    off_goal = probs(state(*entries, goal="Write the changelog entry"), q)
    assert in_goal["result_t1"] > off_goal["result_t1"]
    assert "goal_overlap" in LocalJudge().explain(state(*entries, goal="Fix the rounding_mode"), q)["result_t1"]


def test_decision_tools_keep_their_call() -> None:
    s = state(user(0, "plan"), assistant(1, call("t1", "AskUserQuestion", {"questions": [{"q": "Which DB?"}]}, 900)),
              *padding(3, 20))
    p = probs(s, questions(("t1", "AskUserQuestion", 900)))
    assert p["call_t1"] >= load_state_model().call_floors["decision"]


def test_a_typical_session_drops_a_reasonable_share() -> None:
    """Old large reads and listings go; recent work, edits, errors and pushes stay."""
    entries: list[dict[str, Any]] = [user(0, "Make the parser handle unicode")]
    pairs: list[tuple[str, str, int]] = []
    i = 1
    for n in range(1, 31):
        path = {"file_path": f"/repo/src/mod{n % 12}.py"}
        if n % 5 == 0:
            c = call(f"t{n}", "Edit", {**path, "old_string": "a", "new_string": "b"}, 700)
            tool, chars = "Edit", 700
        elif n % 7 == 0:
            c = call(f"t{n}", "Bash", {"command": "pytest -q"}, 2500, error=n < 28)
            tool, chars = "Bash", 2500
        else:
            c = call(f"t{n}", "Read", path, 3000 + 1000 * (n % 9))
            tool, chars = "Read", 3000 + 1000 * (n % 9)
        entries.append(assistant(i, c))
        pairs.append((f"t{n}", tool, chars))
        i += 2
    answers = probs(state(*entries), questions(*pairs))
    reads = [n for n in range(1, 31) if n % 5 and n % 7]
    old, recent = reads[: len(reads) // 2], reads[len(reads) // 2 :]
    assert sum(answers[f"result_t{n}"] for n in recent) > sum(answers[f"result_t{n}"] for n in old)
    assert all(answers[f"call_t{n}"] >= 0.9 for n in range(5, 31, 5))  # edits


# ---------------------------------------------------------------------------------------------
# both state forms
# ---------------------------------------------------------------------------------------------


def test_one_line_and_merged_entries_are_parsed() -> None:
    s = state(
        user(0, "start"),
        {"i": 1, "role": "user", "text": "[\u2026 2400 chars omitted \u2026]"},
        assistant(2, line("t1", "Read", "file_path=/repo/src/alpha.py", 4000),
                  line("t2", "Grep", "pattern=def parse path=/repo/src", 900),
                  line("t3", "Bash", "command=git commit -m fix description=Commit", 120)),
        assistant(5, line("t4", "Read", "file_path=/repo/src/alpha.py limit=100", 2000, error=True)),
        assistant(7, call("t5", "Edit", {**READ_A, "old_string": "a", "new_string": "b"}, 300)),
    )
    q = questions(("t1", "Read", 4000), ("t2", "Grep", 900), ("t3", "Bash", 120), ("t4", "Read", 2000),
                  ("t5", "Edit", 300))
    judge = LocalJudge()
    answers = judge.answer(s, q)
    assert set(answers) == set(q)
    found = features(s)
    for cid in ("t1", "t2", "t3", "t4", "t5"):
        assert found[cid]["recency"] > 0, cid  # every call is found in the history, with its age
    assert found["t1"]["kind_read"] and found["t2"]["kind_search"] and found["t3"]["kind_side_effect"]
    assert found["t4"]["is_error"]
    assert found["t1"]["edited_unread"]  # one-line read, structured edit of the same file


def test_several_calls_in_one_string_are_all_found() -> None:
    merged = " ".join([line("t1", "Read", "file_path=/a/x.py", 10), line("t2", "Read", "file_path=/a/y.py", 20)])
    s = state(user(0, "go"), assistant(1, merged))
    found = features(s)
    assert found["t1"]["recency"] > 0 and found["t2"]["recency"] > 0


def test_truncated_inputs_still_yield_targets() -> None:
    long_path = "/repo/" + "deeply/nested/" * 8 + "module.py"
    cut = line("t1", "Read", f"file_path={long_path}"[:59] + "\u2026", 5000)
    again = line("t2", "Read", f"file_path={long_path}"[:59] + "\u2026", 5000)
    s = state(user(0, "go"), assistant(1, cut), assistant(3, again))
    assert features(s)["t1"]["superseded"] == 1.0

    structured = call("t1", "Bash", {"command": "git push origin main " + "x" * 300}, 50, limit=200)
    assert structured["input"].endswith("\u2026")
    assert features(state(user(0, "go"), assistant(1, structured)))["t1"]["kind_side_effect"] == 1.0


def test_question_for_a_call_missing_from_the_state_is_still_answered() -> None:
    s = state(user(0, "go"))
    answers = LocalJudge().answer(s, questions(("t7", "Read", 50_000)))
    assert set(answers) == {"call_t7", "result_t7"}
    assert answers["result_t7"]["noul"] < 0.5  # only the size and the tool are known: a huge read


# ---------------------------------------------------------------------------------------------
# contract: determinism, explanation, ranges, usage, protocol
# ---------------------------------------------------------------------------------------------


def _mixed_state() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    s = state(
        user(0, "Fix the flaky test in test_api.py"),
        assistant(1, call("t1", "Read", {"file_path": "/r/tests/test_api.py"}, 5200),
                  call("t2", "Bash", {"command": "pytest tests/test_api.py"}, 3100, error=True)),
        assistant(3, line("t3", "Glob", "pattern=**/*.py", 800)),
        user(5, "also check conftest.py please"),
        assistant(7, call("t4", "Edit", {"file_path": "/r/tests/test_api.py", "old_string": "a", "new_string": "b"},
                          400)),
        assistant(9, call("t5", "Bash", {"command": "pytest tests/test_api.py"}, 900)),
        goal="Fix the flaky test",
    )
    q = questions(("t1", "Read", 5200), ("t2", "Bash", 3100), ("t3", "Glob", 800), ("t4", "Edit", 400),
                  ("t5", "Bash", 900))
    return s, q


def test_answers_are_deterministic() -> None:
    s, q = _mixed_state()
    first = LocalJudge().answer(s, q)
    judge = LocalJudge()
    assert judge.answer(s, q) == first
    assert judge.answer(json.loads(json.dumps(s)), q) == first  # a cache hit gives the same
    assert len({a["noul"] for a in first.values()}) > 3  # not a constant


@pytest.mark.parametrize("call_scale", [None, 0.05], ids=["as shipped", "keep_call on its own scale"])
def test_explain_sums_through_the_logistic_to_the_answer(call_scale: float | None) -> None:
    s, q = _mixed_state()
    model = load_state_model()
    judge = LocalJudge(state_model=replace(model, call_reuse_at_even=call_scale) if call_scale else model)
    answers = judge.answer(s, q)
    explanation = judge.explain(s, q)
    assert set(explanation) == set(q)
    for name, parts in explanation.items():
        assert "bias" in parts
        logit = sum(parts.values())
        assert math.isclose(1 / (1 + math.exp(-logit)), answers[name]["noul"], rel_tol=1e-9, abs_tol=1e-12)
        known = {"bias", *FEATURE_NAMES} | ({"call_floor"} if name.startswith("call_") else set())
        assert set(parts) <= known


def test_probabilities_in_range_and_call_at_least_result() -> None:
    s, q = _mixed_state()
    answers = LocalJudge().answer(s, q)
    for a in answers.values():
        assert a["type"] == "noul" and 0.0 <= a["noul"] <= 1.0
    for cid in ("t1", "t2", "t3", "t4", "t5"):
        assert answers[f"call_{cid}"]["noul"] >= answers[f"result_{cid}"]["noul"]


def test_usage_and_ask_follow_the_protocol() -> None:
    s, q = _mixed_state()
    judge = LocalJudge()
    assert isinstance(judge, JevAsker)
    result = asyncio.run(judge.ask(s, q))
    assert isinstance(result, AskResult)
    assert dict(result.answers) == judge.answer(s, q)
    assert result.usage.output_tokens == len(q)
    assert result.usage.input_tokens == estimate_tokens(js_json(s)) + estimate_tokens(js_json(q))


def test_state_as_json_string_is_accepted() -> None:
    s, q = _mixed_state()
    assert LocalJudge().answer(js_json(s), q) == LocalJudge().answer(s, q)


@pytest.mark.parametrize(
    "bad_state",
    [None, 3, "not json", [], {"goal": "x"}, {"history": "nope"}, {"history": [1]},
     {"history": [{"i": 0, "role": "assistant", "text": "", "tool_calls": "t1"}]}],
)
def test_bad_state_is_an_input_error(bad_state: Any) -> None:
    with pytest.raises(JudgeInputError):
        LocalJudge().answer(bad_state, questions(("t1", "Read", 1)))


@pytest.mark.parametrize(
    "bad_questions",
    [{}, [], {"q": "text"}, {"q": {"type": "choice", "instructions": "x"}}, {"q": {"type": "noul"}}],
)
def test_bad_questions_are_an_input_error(bad_questions: Any) -> None:
    with pytest.raises(JudgeInputError):
        LocalJudge().answer(state(user(0, "go")), bad_questions)


def test_large_state_with_many_questions_is_fully_answered() -> None:
    entries: list[dict[str, Any]] = [user(0, "Refactor the app package")]
    pairs: list[tuple[str, str, int]] = []
    for n in range(1, 201):
        tool = ("Read", "Edit", "Bash", "Grep")[n % 4]
        inp: dict[str, Any] = {
            "Read": {"file_path": f"/repo/app/m{n % 37}.py"},
            "Edit": {"file_path": f"/repo/app/m{n % 37}.py", "old_string": "x = 1\n" * 20, "new_string": "y"},
            "Bash": {"command": ("pytest -q", "git status", "npm run build", "git commit -am wip")[n % 4]},
            "Grep": {"pattern": f"def f{n % 50}", "path": "/repo/app"},
        }[tool]
        chars = (n * 7919) % 40_000 + 10
        entries.append(assistant(2 * n - 1, call(f"t{n}", tool, inp, chars),
                                 text=f"Now m{(n * 3) % 37}.py needs f{n} changed; " * 3))
        pairs.append((f"t{n}", tool, chars))
    s, q = state(*entries, goal="Refactor the app package"), questions(*pairs)
    assert estimate_tokens(js_json(s)) > 20_000 and len(q) == 400
    answers = LocalJudge().answer(s, q)
    assert set(answers) == set(q)
    assert len({round(a["noul"], 6) for name, a in answers.items() if name.startswith("result_")}) > 20


# ---------------------------------------------------------------------------------------------
# property: any well-formed state and question set is answered in full
# ---------------------------------------------------------------------------------------------

_TOOLS = st.sampled_from(["Read", "Edit", "Write", "Bash", "Grep", "Glob", "WebFetch", "Task", "TodoWrite",
                          "AskUserQuestion", "mcp__gh__create_issue", "Weird Tool"])
_TEXT = st.text(max_size=40)
_INPUT = st.dictionaries(st.sampled_from(["file_path", "command", "pattern", "path", "limit", "url", "x"]),
                         st.one_of(_TEXT, st.integers(-5, 5000), st.none()), max_size=3)


@st.composite
def _states(draw: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    history: list[dict[str, Any]] = []
    pairs: list[tuple[str, str, int]] = []
    n_entries = draw(st.integers(0, 8))
    next_id = 1
    for i in range(n_entries):
        role = draw(st.sampled_from(["user", "assistant"]))
        entry: dict[str, Any] = {"i": draw(st.one_of(st.just(i), st.integers(0, 500))), "role": role,
                                 "text": draw(_TEXT)}
        if role == "assistant" and draw(st.booleans()):
            items: list[Any] = []
            for _ in range(draw(st.integers(1, 3))):
                cid, tool = f"t{next_id}", draw(_TOOLS)
                chars, error = draw(st.integers(0, 200_000)), draw(st.booleans())
                next_id += 1
                if draw(st.booleans()):
                    items.append(call(cid, tool, draw(_INPUT), chars, error, limit=draw(st.integers(2, 120))))
                else:
                    rendered = " ".join(f"{k}={v}" for k, v in draw(_INPUT).items())[:60]
                    items.append(line(cid, tool, rendered, chars, error))
                pairs.append((cid, tool, chars))
            entry["tool_calls"] = items
        if draw(st.booleans()):
            entry["pending_calls"] = [{"tool_use_id": "toolu_x", "tool": draw(_TOOLS), "input": js_json(draw(_INPUT))}]
        history.append(entry)
    pairs.append((f"t{next_id + draw(st.integers(0, 3))}", draw(_TOOLS), draw(st.integers(0, 99))))  # maybe unknown
    q = questions(*pairs)
    if draw(st.booleans()):
        q["free_question"] = {"type": "noul", "instructions": draw(_TEXT)}
    return {"context": CONTEXT, "goal": draw(_TEXT), "history": history}, q


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_states())
def test_any_well_formed_state_is_answered(case: tuple[dict[str, Any], dict[str, dict[str, Any]]]) -> None:
    s, q = case
    judge = LocalJudge()
    answers = judge.answer(s, q)
    assert set(answers) == set(q)
    for a in answers.values():
        assert a["type"] == "noul" and 0.0 <= a["noul"] <= 1.0 and math.isfinite(a["noul"])
    assert set(judge.explain(s, q)) == set(q)


# ---------------------------------------------------------------------------------------------
# with the real state builder, when it is there
# ---------------------------------------------------------------------------------------------


def test_real_fitting_stages_are_understood() -> None:
    compaction = pytest.importorskip("fast_jev_compaction.compaction")
    messages_mod = pytest.importorskip("fast_jev_compaction.conversation.messages")
    options_mod = pytest.importorskip("fast_jev_compaction.options")
    SessionMessage, ToolUse, ToolResult = (messages_mod.SessionMessage, messages_mod.ToolUse,
                                           messages_mod.ToolResult)

    messages = [SessionMessage(role="user", text="start: tidy the modules")]
    for n in range(40):
        messages.append(SessionMessage(role="assistant", text="", toolUses=(
            ToolUse(tool_use_id=f"u{n}", tool="Read", input={"file_path": f"/repo/src/module-{n % 15}.ts"}),)))
        messages.append(SessionMessage(role="user", text="", toolResults=(
            ToolResult(tool_use_id=f"u{n}", text="x" * (200 + 37 * n)),)))
    messages.append(SessionMessage(role="assistant", text="done"))

    seen: list[tuple[Any, Any]] = []

    class Recording(LocalJudge):
        # Asked over the Jev protocol, as `fast-jev serve` asks it, not in process.
        score_calls = None  # type: ignore[assignment]

        async def ask(self, s: Any, q: Any) -> AskResult:
            seen.append((s, q))
            return await super().ask(s, q)

    # Every call asked (no rules; the threshold policy asks about every call, the budget one only
    # about outputs it could cut): the state has room for the whole history in detail.
    every_call = {"policy": "threshold", "use_rules": False}
    full = compaction.compact_sync(messages, Recording(), options_mod.resolve_options(**every_call))
    tight = compaction.compact_sync(messages, Recording(), options_mod.resolve_options(**every_call, max_state_tokens=1500))
    assert full.stats.state_stage == "full"
    assert tight.stats.state_stage != "full"
    one_line = [e for s, _ in seen for e in s["history"] if e.get("tool_calls") and isinstance(e["tool_calls"][0], str)]
    assert one_line, "the tight budget should have produced one-line calls"
    judge = LocalJudge()
    for s, q in seen:
        expl = judge.explain(s, q)
        for name in q:
            assert "recency" in expl[name], name  # every asked call was located in the state
    # the same call is judged alike in both forms: superseded re-reads drop in both
    for result in (full, tight):
        dropped = [d for d in result.decisions if d.reason != "pinned" and d.action != "keep"]
        assert dropped
